#!/usr/bin/env bash
# test-curl-write-gateway.sh: a write answered 502 after the retries
# (a gateway whose origin may have written) is of unknown outcome, not
# refused: the next write is sent only once a check of the object's
# size shows that the first did not break it.  ab7ca69 took every
# answered write as refused (nothing written), and sent the next one
# without that check.
#
# The fault server replaces the whole object on each PUT (it ignores
# Content-Range) and answers 502.  With retries=0, the first write fails;
# the second one first asks HEAD, finds the object shrunk to 512 bytes,
# and is not sent: the server gets exactly one PUT, and the second
# write's error says that Content-Range was ignored.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

size=65536
make_random_file "$tmp/disk.img" "$size"
start_fault_server ignore-content-range-put-502 "$tmp/disk.img"

start_nbdkit rw "$PLUGIN" "http://127.0.0.1:$fault_port/disk.img" retries=0
nbdsh -u "$uri" -c '
for off in (4096, 8192):
    try:
        h.pwrite(bytes([0x5a]) * 512, off)
        raise SystemExit("the write at %d was reported done" % off)
    except nbd.Error:
        pass
' >"$tmp/nbdsh.out" 2>&1 || {
  cat "$tmp/nbdsh.out" >&2
  fail "a write answered 502 was reported done"
}
stop_nbdkit rw

grep -q '^PUT .*status=502 ' "$tmp/fault.log" || {
  cat "$tmp/fault.log" >&2
  fail "no PUT was answered 502: the fault was not injected"
}
puts=$(grep -c '^PUT ' "$tmp/fault.log" || :)
[ "$puts" -eq 1 ] || {
  cat "$tmp/fault.log" >&2
  fail "the server got $puts PUT requests, expected 1: the second write" \
       "went without checking what the first did"
}
grep -q '^HEAD ' "$tmp/fault.log" ||
  fail "no HEAD after the write: its outcome was not checked"
assert_grep_i "$tmp/rw.err" "ignored Content-Range"
check_problems
