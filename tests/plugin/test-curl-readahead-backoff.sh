#!/usr/bin/env bash
# test-curl-readahead-backoff.sh: a read-ahead segment that fails holds
# read-ahead back for a while, also when some of its bytes came.  The
# fault server (short-body-large) cuts every answer to a range longer
# than 64 KiB in half and closes the connection, as a proxy that cuts
# long answers would; it answers shorter ranges (the reads', the
# probe's) correctly.  So every segment fails after half its bytes, and
# the reads are served by their own GETs.  Only a segment that failed
# before its first byte used to set the back-off (a defect once): then
# every read started a new stream whose segment failed again, and a
# sequential reader cost two GETs per read.
#   60 sequential reads of 64 KiB at QD1 (from 1 MiB on), 0.05 s apart
#   (so over 3 s, and the first back-offs, 1 s then 2 s, run out), give
#   the image's bytes (no read fails: a segment's failure is not the
#   read's), from at most 75 GETs besides the probe's (one per read, and
#   a stream's first segments each time a back-off ran out: 3 streams
#   of up to 3 segments on their way at once; the broken plugin made
#   about 120), and the debug log says a stream failed and none starts
#   for a while.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

reads=60
fault_export short-body-large $((8 * 1024 * 1024 + 321)) \
             -v -D curl.readahead=1 -D curl.requests=1
: >"$tmp/fault.log"

t0=$EPOCHREALTIME
N=$reads nbdsh -u "$uri" -c '
import os, time
data = open(os.environ["FILE"], "rb").read()
off = 1024 * 1024
for i in range(int(os.environ["N"])):
    assert h.pread(65536, off) == data[off:off + 65536], \
        "read %d at %d differs" % (i, off)
    off += 65536
    time.sleep(0.05)
h.shutdown()
' >"$tmp/reads.out" 2>&1 || {
  cat "$tmp/reads.out" >&2
  fail "sequential reads failed"
}
secs=$(seconds_since "$t0")
stop_nbdkit ro

gets=$(grep '^GET ' "$tmp/fault.log" | grep -cv ' range=bytes=0-8191 ' || :)
cut=$(grep '^GET ' "$tmp/fault.log" |
      awk '{ split(substr($3, 13), ab, "-")
             if (ab[2] - ab[1] + 1 > 65536) n++ }
           END { print n + 0 }')
echo "$reads reads in $secs s: $gets GETs, $cut of them segments cut short"
[ "$gets" -le $((reads + 15)) ] || {
  head -n 20 "$tmp/fault.log" >&2
  problem "$gets GETs for $reads sequential reads (at most $((reads + 15)))"
}
[ "$cut" -ge 1 ] || problem "no read-ahead segment was asked for"
grep -qE 'read-ahead: stream from [0-9]+ failed: none starts for [0-9]+ ms' \
     "$tmp/ro.err" ||
  problem "no 'read-ahead: stream from ... failed: none starts for' line"

check_problems
