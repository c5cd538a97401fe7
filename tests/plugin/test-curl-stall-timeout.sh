#!/usr/bin/env bash
# test-curl-stall-timeout.sh: timeout= ends a transfer about timeout=
# seconds after its last byte, also when a burst came first (libcurl's
# low-speed check averages over about 5 s, so alone it saw such a stall
# only 5 s late): a server that sends half of every answer, the probe's
# too, and then nothing, fails nbdkit's start-up within (retries + 1) x
# timeout= plus the back-off, and a read whose answer stalls after
# bytes that came for 0.9 s fails as soon after its last byte.  A read
# whose answer drips on for longer than timeout= (20 KB/s) is not cut
# off.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

make_random_file "$tmp/disk.img" $((4 * 1024 * 1024))

# Start-up: 3 attempts of timeout=2, each about 2 s after its burst
# (progress is looked at every second at least), and 0.3 s of back-off:
# 9-10 s.  With the 5 s average each attempt took 7-8 s.
start_fault_server stall-half "$tmp/disk.img"
t0=$EPOCHREALTIME
expect_nbdkit_fails startup -r "$PLUGIN" \
  "http://127.0.0.1:$fault_port/disk.img" timeout=2 retries=2 \
  retry-delay=0.1
secs=$(seconds_since "$t0")
echo "start-up against a stalling server failed after $secs s"
awk -v s="$secs" 'BEGIN { exit !(s <= 14) }' ||
  fail "start-up took $secs s to give up: more than 3 x (timeout=2" \
       "+ 1 s) + back-off + slack"
assert_grep_i "$tmp/startup.err" "no byte for 2 s"
probes=$(grep -c '^GET ' "$tmp/fault.log" || :)
[ "$probes" -eq 3 ] || fail "$probes GETs at start-up, expected 3 (retries=2)"
stop_pid "$fault_pid"

# A read: the probe is answered, the read's answer stalls after half of
# its body came in four pieces 0.3 s apart: it fails 2-3 s after the
# last (0.9 s), where the 5 s average made it 8 s from its start.
start_fault_server stall-half-after-probe "$tmp/disk.img"
start_nbdkit stall -r "$PLUGIN" "http://127.0.0.1:$fault_port/disk.img" \
  timeout=2 retries=0 readahead=false
out=$(nbdsh -u "$uri" -c '
import time
t0 = time.monotonic()
try:
    h.pread(65536, 1048576)
    print("read succeeded")
except nbd.Error as e:
    print("read failed after %.1f s" % (time.monotonic() - t0))
')
echo "$out"
secs=$(sed -n 's/^read failed after \([0-9.]*\) s$/\1/p' <<<"$out")
[ -n "$secs" ] || fail "the stalled read did not fail: $out"
awk -v s="$secs" 'BEGIN { exit !(s <= 5) }' ||
  fail "the stalled read failed after $secs s: more than 0.9 s +" \
       "timeout=2 + 1 s + slack"
stop_nbdkit stall
assert_grep_i "$tmp/stall.err" "no byte for 2 s"
stop_pid "$fault_pid"

# A healthy answer that drips on for longer than timeout=: 96 KiB at
# 20 KB/s take about 5 s, with timeout=2.
start_fault_server drip-after-probe "$tmp/disk.img"
start_nbdkit drip -r "$PLUGIN" "http://127.0.0.1:$fault_port/disk.img" \
  timeout=2 retries=0 readahead=false
FILE=$tmp/disk.img nbdsh -u "$uri" -c '
import os
with open(os.environ["FILE"], "rb") as f:
    f.seek(1048576)
    want = f.read(98304)
assert h.pread(98304, 1048576) == want, "wrong bytes"
' || fail "a read that dripped on for longer than timeout= failed"
stop_nbdkit drip
