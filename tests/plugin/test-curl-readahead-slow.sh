#!/usr/bin/env bash
# test-curl-readahead-slow.sh: a read does not wait long for a
# read-ahead segment that comes slowly.  The fault server (drip-large)
# sends every answer to a range longer than 64 KiB at about 20 KB/s (a
# first segment of 256 KiB takes 13 s), shorter ranges (the reads',
# the probe's) at once: a server or proxy that is slow for large
# ranges.  A read used to wait for the whole segment that holds its
# bytes however slowly it came (a defect once: 13 s for a read that its
# own GET answers in milliseconds; timeout= never fired, since bytes
# kept coming).  Now a read waits for its segment at most max(1 s, four
# round trips), capped by timeout=, then asks for its own bytes, and
# the stream stops and backs off.
#  (a) 40 sequential reads of 16 KiB at QD1 (from 1 MiB on), then a
#      pause of 1.5 s (the first back-off, 1 s, runs out), then 20 more:
#      every read gives the image's bytes and none takes longer than 3 s
#      (each is timed in nbdsh); the 60 take at most 8 s in all (about
#      2: two reads wait 1 s each for a stream's first segment, one
#      near the start and the 41st; the broken plugin took 13 s for the
#      first alone, and the client stops at the first read over 3 s);
#      and nbdkit, stopped right after, exits cleanly (stop_nbdkit) and
#      says a stream failed and backed off.
#  (b) Another nbdkit gets SIGTERM while a read waits for a stream's
#      first segment, which drips (a stream starts at the second read of
#      a run, or at the 17th when the server answers within 2 ms): it
#      exits cleanly within 5 s (stop_nbdkit).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

# (a)
fault_export drip-large $((8 * 1024 * 1024 + 321)) \
             -v -D curl.readahead=1 -D curl.requests=1
: >"$tmp/fault.log"

nbdsh -u "$uri" -c '
import os, time
data = open(os.environ["FILE"], "rb").read()
off, worst, t0 = 1024 * 1024, 0, time.monotonic()
for i in range(60):
    if i == 40:
        time.sleep(1.5)
    t = time.monotonic()
    got = h.pread(16384, off)
    t = time.monotonic() - t
    assert got == data[off:off + 16384], "read %d at %d differs" % (i, off)
    worst = max(worst, t)
    if t > 3:
        raise SystemExit("read %d at %d took %.1f s" % (i, off, t))
    off += 16384
total = time.monotonic() - t0 - 1.5
print("60 reads in %.1f s (the pause aside), the slowest %.2f s" %
      (total, worst))
if total > 8:
    raise SystemExit("the reads took %.1f s" % total)
h.shutdown()
' >"$tmp/reads.out" 2>&1 || {
  cat "$tmp/reads.out" >&2
  fail "$(tail -n 1 "$tmp/reads.out")"
}
cat "$tmp/reads.out"
t0=$EPOCHREALTIME
stop_nbdkit ro
echo "nbdkit exited $(seconds_since "$t0") s after SIGTERM"
grep -qE 'read-ahead: stream from [0-9]+ failed: none starts for [0-9]+ ms' \
     "$tmp/ro.err" ||
  fail "no 'read-ahead: stream from ... failed: none starts for' line"

# (b) SIGTERM while a read waits for a segment that drips.
start_nbdkit term -r -v -D curl.readahead=1 "$PLUGIN" \
             "http://127.0.0.1:$fault_port/disk.img"
timeout "$client_timeout" "$PYTHON_NBD" -m nbd -u "$uri" -c '
for i in range(40):
    h.pread(16384, 786432 + i * 16384)
' >"$tmp/term.out" 2>&1 &
reader=$!
_pids+=("$reader")
wait_log "$tmp/term.err" 'read-ahead: stream from [0-9]* starts'
sleep 0.3
t0=$EPOCHREALTIME
stop_nbdkit term
echo "(b) nbdkit exited $(seconds_since "$t0") s after SIGTERM, a read waiting"
stop_pid "$reader"
