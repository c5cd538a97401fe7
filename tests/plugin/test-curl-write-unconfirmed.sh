#!/usr/bin/env bash
# test-curl-write-unconfirmed.sh: until a write is shown to have kept
# the object's size, no second partial write is sent.  On a server that
# ignores Content-Range (each PUT replaces the whole object) and answers
# every HEAD after the first PUT with 503, the plugin cannot confirm its
# first write: with retries=0 that write is reported failed, and the
# next two writes fail without being sent, so the server gets exactly
# one PUT.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

size=65536
make_random_file "$tmp/disk.img" "$size"
start_fault_server ignore-content-range-head-503 "$tmp/disk.img"

start_nbdkit rw "$PLUGIN" "http://127.0.0.1:$fault_port/disk.img" retries=0
nbdsh -u "$uri" -c '
results = []
for off in (4096, 8192, 12288):
    try:
        h.pwrite(bytes([0x5a]) * 512, off)
        results.append("ok")
    except nbd.Error as e:
        results.append("error: %s" % e.string)
print(results)
for i, r in enumerate(results):
    assert r != "ok", "write %d was reported done" % (i + 1)
' >"$tmp/nbdsh.out" 2>&1 || {
  cat "$tmp/nbdsh.out" >&2
  fail "a write the plugin could not confirm was reported done"
}
stop_nbdkit rw

# The first write reached the server; the two after it did not.
grep -q '^PUT /disk.img .*content-range="bytes 4096-4607/\*" ' \
     "$tmp/fault.log" || {
  cat "$tmp/fault.log" >&2
  fail "the first write was not sent as a PUT of bytes 4096-4607"
}
puts=$(grep -c '^PUT ' "$tmp/fault.log" || :)
[ "$puts" -eq 1 ] || {
  cat "$tmp/fault.log" >&2
  fail "the server got $puts PUT requests, expected 1"
}
grep -q '^HEAD .*status=503 ' "$tmp/fault.log" ||
  fail "no HEAD was answered 503: the fault was not injected"
