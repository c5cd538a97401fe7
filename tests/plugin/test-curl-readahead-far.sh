#!/usr/bin/env bash
# test-curl-readahead-far.sh: read-ahead works for a server far away
# (300 ms round trip: helpers/linkem between the plugin and nginx).
# While a GET runs, the plugin asks the read-ahead segment's sink every
# 200 ms (from libcurl's progress callback) whether to go on, with a
# call that carries no bytes.  That call must not change what the
# segment counts as received: when it reset the count to none (a defect
# once), a segment whose answer came more than 200 ms after it was asked
# for, all in one piece, ended with its count short of its end, was
# thrown away, and every read was asked for again: more GETs than reads,
# and read-ahead served next to nothing.  The link runs at 1 Tbit/s so
# that each answer comes in one piece, as it does from a server that is
# slow to start answering (at linkem's default 1 Gbit/s an answer comes
# in 64 KiB pieces 0.5 ms apart, and the 200 ms check usually falls
# before the last of them, which hid the defect).
#   40 sequential reads of 64 KiB at QD1 (2.5 MiB from 1 MiB on) through
#   nbdsh give the image's bytes; nginx answers at most 20 GETs for
#   ranges that start among them, besides the probe's (two reads' own,
#   before a stream starts; then the segments of one stream: about 16
#   in all; the broken plugin made about 48); and the unload line
#   "read-ahead: N streams in M GETs fetched X bytes and served Y" has Y
#   at least 36 reads' bytes (a stream starts at the third read and
#   serves it and the other 37).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh
requires nginx

rtt=300
rate=1000000
reads=40
from=$((1024 * 1024))
size=$((8 * 1024 * 1024 + 321))
serve_image "$size"
start_linkem "$port" "$rtt" --rate "$rate"
start_nbdkit far -r -v -D curl.readahead=1 -D curl.requests=1 "$PLUGIN" \
             "http://127.0.0.1:$linkem_port/disk.img"
: >"$tmp/access.log"

t0=$EPOCHREALTIME
FILE=$image FROM=$from N=$reads nbdsh -u "$uri" -c '
import os
data = open(os.environ["FILE"], "rb").read()
off = int(os.environ["FROM"])
for i in range(int(os.environ["N"])):
    assert h.pread(65536, off) == data[off:off + 65536], \
        "read %d at %d differs" % (i, off)
    off += 65536
h.shutdown()
' >"$tmp/reads.out" 2>&1 || {
  cat "$tmp/reads.out" >&2
  fail "sequential reads through a 300 ms link failed"
}
secs=$(seconds_since "$t0")
stop_nbdkit far

# The GETs that start inside the range read (read-ahead goes on past
# it, up to the end of the image, once the reads stop).
end=$((from + reads * 65536))
gets=$(awk -v end="$end" '
  $2 == "GET" && $3 != "bytes=0-8191" {
    split(substr($3, 7), ab, "-")
    if (ab[1] + 0 < end) n++
  }
  END { print n + 0 }' "$tmp/access.log")
pat='read-ahead: [0-9]+ streams in [0-9]+ GETs fetched [0-9]+ bytes'
line=$(grep -E "$pat and served [0-9]+" "$tmp/far.err" | tail -n 1 |
       sed 's/.*read-ahead: //')
echo "$reads reads in $secs s, $gets GETs for them: $line"
[ "$gets" -le 20 ] || {
  cat "$tmp/access.log" >&2
  problem "$gets GETs for $reads sequential reads, expected at most 20"
}
served=$(sed -nE 's/.* and served ([0-9]+).*/\1/p' <<<"$line")
if [ -z "$served" ]; then
  problem "no 'read-ahead: ... served N' line at unload"
elif [ "$served" -lt $((36 * 65536)) ]; then
  problem "read-ahead served $served bytes of $((reads * 65536)) read"
fi

check_problems
