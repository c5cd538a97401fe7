#!/usr/bin/env bash
# test-curl-ignored-body-deadline.sh: the body of an answer the plugin
# does not use (a redirect's, a PUT's) is bounded in time by timeout=,
# like every other wait.  The fault server sends such bodies at two
# bytes a second (200 bytes: 100 s), which a stall limit of one byte a
# second never trips.  With timeout=2:
#   - redirect-drip: every GET of /disk.img is a 302 to /real/disk.img
#     whose body drips.  nbdkit must start and a 1 MiB copy must end
#     within 20 s (the redirect followed once its body is given up on,
#     or the read failed), never with wrong bytes.
#   - put-drip: a partial PUT is applied, then answered 200 with a body
#     that drips.  The write must succeed within 15 s.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy
requires_nbdsh

size=$((1024 * 1024))
make_random_file "$tmp/disk.img" "$size"
start_fault_server redirect-drip "$tmp/disk.img"
t0=$EPOCHREALTIME
start_nbdkit redirect -r "$PLUGIN" "http://127.0.0.1:$fault_port/disk.img" \
             timeout=2 retries=0
st=0
timeout 30 nbdcopy "$uri" "$tmp/out.img" 2>"$tmp/nbdcopy.err" || st=$?
secs=$(seconds_since "$t0")
echo "redirect-drip: nbdcopy exit $st after $secs s"
[ "$st" -ne 124 ] || fail "redirect-drip: nbdcopy hung (killed after 30 s)"
awk -v s="$secs" 'BEGIN { exit !(s <= 20) }' ||
  fail "redirect-drip: start-up and copy took $secs s with timeout=2"
if [ "$st" -eq 0 ]; then
  assert_same_file "$tmp/disk.img" "$tmp/out.img"
else
  assert_grep_i "$tmp/redirect.err" error
fi
stop_nbdkit redirect
grep -q '^drip: GET /disk.img .*: HTTP 302' "$tmp/fault.log" ||
  fail "redirect-drip: no redirect with a dripping body was sent"
stop_pid "$fault_pid"

# A partial PUT whose 200 answer drips.
size=65536
make_random_file "$tmp/disk.img" "$size"
cp "$tmp/disk.img" "$tmp/expected.img"
: >"$tmp/fault.log"
start_fault_server put-drip "$tmp/disk.img"
start_nbdkit put "$PLUGIN" "http://127.0.0.1:$fault_port/disk.img" \
             timeout=2 retries=0
t0=$EPOCHREALTIME
st=0
# Not the nbdsh function: its own time limit is the one to check here.
timeout 15 "$PYTHON_NBD" -m nbd -u "$uri" -c '
h.pwrite(bytes([0x5a]) * 512, 4096)
h.shutdown()
' >"$tmp/nbdsh.out" 2>&1 || st=$?
secs=$(seconds_since "$t0")
echo "put-drip: the write ended with exit $st after $secs s"
[ "$st" -ne 124 ] || fail "put-drip: the write hung (killed after 15 s)"
[ "$st" -eq 0 ] || {
  cat "$tmp/nbdsh.out" >&2
  fail "put-drip: the write failed"
}
stop_nbdkit put
# The server got exactly that write, and applied it.
printf 'Z%.0s' $(seq 512) |
  dd of="$tmp/expected.img" bs=1 seek=4096 conv=notrunc status=none
assert_same_file "$tmp/expected.img" "$tmp/disk.img"
grep -q '^drip: PUT /disk.img .*content-range="bytes 4096-4607/\*"' \
     "$tmp/fault.log" || {
  cat "$tmp/fault.log" >&2
  fail "put-drip: no PUT of bytes 4096-4607"
}
