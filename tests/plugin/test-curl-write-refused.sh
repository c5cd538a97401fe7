#!/usr/bin/env bash
# test-curl-write-refused.sh: nginx's dav module answers 501 to a PUT
# with Content-Range.  The NBD write fails with EIO, nbdkit says the
# server does not take partial writes, and the file is unchanged.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

size=$((512 * 1024 + 17))
start_nginx 'location /put/ { dav_methods PUT; alias DIR/www/; }'
make_random_file "$tmp/www/disk.img" "$size"
before=$(sha "$tmp/www/disk.img")

start_nbdkit rw "$PLUGIN" "http://127.0.0.1:$port/put/disk.img"
nbdsh -u "$uri" -c '
import errno
try:
    h.pwrite(b"\x5a" * 4096, 8192)
except nbd.Error as e:
    print("write failed:", e.string)
    assert e.errnum == errno.EIO, "expected EIO, got %r" % e.errno
else:
    raise SystemExit("the write was reported done")
' >"$tmp/nbdsh.out" 2>&1 || {
  cat "$tmp/nbdsh.out" >&2
  fail "the refused write was not an EIO error"
}
stop_nbdkit rw

assert_grep_i "$tmp/rw.err" partial
[ "$(sha "$tmp/www/disk.img")" = "$before" ] || fail "the file changed"
grep -qE '^[0-9]+ PUT - 501 ' "$tmp/access.log" ||
  fail "nginx did not see (and refuse) the PUT"
