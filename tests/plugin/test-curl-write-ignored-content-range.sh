#!/usr/bin/env bash
# test-curl-write-ignored-content-range.sh: a server that ignores
# Content-Range and replaces the whole object with the body of a partial
# PUT.  After the first accepted write the plugin notices (the object's
# size changed), says "ignored Content-Range", and sends no more writes.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

size=$((1024 * 1024))
make_random_file "$tmp/disk.img" "$size"
start_fault_server ignore-content-range "$tmp/disk.img"

start_nbdkit rw "$PLUGIN" "http://127.0.0.1:$fault_port/disk.img"
# The first write may be reported done or failed (the damage is done by
# the time the plugin can know); the second must fail.
nbdsh -u "$uri" -c '
results = []
for off in (0, 65536):
    try:
        h.pwrite(b"\xaa" * 4096, off)
        results.append("ok")
    except nbd.Error as e:
        results.append("error: %s" % e.string)
print(results)
assert results[1] != "ok", "the second write was reported done"
' >"$tmp/nbdsh.out" 2>&1 || {
  cat "$tmp/nbdsh.out" >&2
  fail "the second write did not fail"
}
stop_nbdkit rw

assert_grep_i "$tmp/rw.err" "ignored Content-Range"
puts=$(grep -c '^PUT ' "$tmp/fault.log" || :)
[ "$puts" -eq 1 ] || fail "the server got $puts PUT requests, expected 1"
