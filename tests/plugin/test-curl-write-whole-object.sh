#!/usr/bin/env bash
# test-curl-write-whole-object.sh: the check after the first accepted
# write proves nothing when that write covered the whole object (a
# server that ignores Content-Range keeps the size then).  On such a
# server a full-size write followed by a 512-byte write must report the
# second write as failed, saying that the server ignored Content-Range,
# and every later write must fail without being sent.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

size=65536
make_random_file "$tmp/disk.img" "$size"
start_fault_server ignore-content-range "$tmp/disk.img"

start_nbdkit rw "$PLUGIN" "http://127.0.0.1:$fault_port/disk.img"
SIZE=$size nbdsh -u "$uri" -c '
import os
size = int(os.environ["SIZE"])
results = []
for off, n in ((0, size), (4096, 512), (8192, 512), (0, size)):
    try:
        h.pwrite(bytes([0x5a]) * n, off)
        results.append("ok")
    except nbd.Error as e:
        results.append("error: %s" % e.string)
print(results)
assert results[0] == "ok", "the whole-object write failed"
for i in (1, 2, 3):
    assert results[i] != "ok", "write %d was reported done" % i
' >"$tmp/nbdsh.out" 2>&1 || {
  cat "$tmp/nbdsh.out" >&2
  fail "a write after the whole-object write was reported done"
}
stop_nbdkit rw

assert_grep_i "$tmp/rw.err" "ignored Content-Range"
# The whole-object write and the 512-byte one reached the server; the
# writes after the server was found out did not.
puts=$(grep -c '^PUT ' "$tmp/fault.log" || :)
[ "$puts" -eq 2 ] || {
  cat "$tmp/fault.log" >&2
  fail "the server got $puts PUT requests, expected 2"
}
