#!/usr/bin/env bash
# test-curl-file-url.sh: a file:// URL is served read-only: a copy gives
# the file's bytes, a write fails and leaves the file unchanged.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy
requires nbdinfo
requires_nbdsh

size=$((1024 * 1024 + 555))
make_random_file "$tmp/disk.img" "$size"
before=$(sha "$tmp/disk.img")

# Not -r: the plugin itself must say it cannot write.
start_nbdkit file "$PLUGIN" "file://$tmp/disk.img"
timeout "$client_timeout" nbdinfo "$uri" >"$tmp/info.out"
grep -qE '^[[:space:]]*is_read_only: true$' "$tmp/info.out" || {
  cat "$tmp/info.out" >&2
  fail "a file:// export is not read-only"
}
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
assert_same_file "$tmp/disk.img" "$tmp/out.img"

# libnbd refuses a write to a read-only export itself; either way it must
# fail with an NBD error (not, say, a missing python module).
nbdsh -u "$uri" -c '
try:
    h.pwrite(b"x", 0)
except nbd.Error as e:
    print("write refused:", e.string)
else:
    raise SystemExit("a write to a file:// export succeeded")
' >"$tmp/write.out" 2>&1 || {
  cat "$tmp/write.out" >&2
  fail "the write test did not run or the write succeeded"
}
grep -q '^write refused' "$tmp/write.out" || fail "no write refusal seen"
stop_nbdkit file
[ "$(sha "$tmp/disk.img")" = "$before" ] || fail "the file changed"
[ "$(file_size "$tmp/disk.img")" -eq "$size" ] || fail "the file size changed"
