#!/usr/bin/env bash
# test-curl-readahead-clients.sh: read-ahead decides per NBD connection
# whether its client waits for its answers.  Five clients that each
# keep one read in flight (five VMs booting from one export, five dd's)
# must each get read-ahead: counted as one client with five reads in
# flight, read-ahead stayed off for all of them (12.6 MiB/s together
# behind a 20 ms link where one alone got 50.8).
#   nginx behind linkem (20 ms round trip).  Five nbdsh processes at
#   once, each reading its own 6 MiB of a 30 MiB image sequentially,
#   64 KiB at a time at QD1, every read checked against the image; the
#   time is the slowest client's, from its first read to its last.  The
#   same with readahead=false gives the time without read-ahead; with
#   it the five must take at most two thirds of that (without the fix,
#   about as long; with it 0.4 to 0.9 s against 2.1 s).  Without
#   read-ahead each read costs a round trip.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh
requires nginx

clients=5
region=$((6 * 1024 * 1024))
serve_image $((clients * region))
start_linkem "$port" 20

# five_readers NAME: the five clients against nbdkit NAME ($uri); $secs
# is the slowest one's time.
five_readers ()
{
  local name=$1 i pids=()
  for ((i = 0; i < clients; i++)); do
    FILE=$image FROM=$((i * region)) LEN=$region nbdsh -u "$uri" -c '
import os, time
base, n = int(os.environ["FROM"]), int(os.environ["LEN"])
with open(os.environ["FILE"], "rb") as f:
    f.seek(base)
    want = f.read(n)
t0 = time.monotonic()
for off in range(0, n, 65536):
    assert h.pread(65536, base + off) == want[off:off + 65536], \
        "read at %d differs" % (base + off)
print("%.2f" % (time.monotonic() - t0))
' >"$tmp/$name-$i.out" 2>&1 &
    pids+=($!)
  done
  for ((i = 0; i < clients; i++)); do
    wait "${pids[$i]}" || {
      cat "$tmp/$name-$i.out" >&2
      fail "$name: client $i failed"
    }
  done
  secs=$(sort -n "$tmp/$name"-*.out | tail -n 1)
}

start_nbdkit plain -r "$PLUGIN" "http://127.0.0.1:$linkem_port/disk.img" \
  readahead=false
five_readers plain
plain=$secs
stop_nbdkit plain

# No head start: its stream would serve the first clients' regions,
# and what is tested is how reads start streams.
start_nbdkit ra -r -v -D curl.readahead=1 -D curl.headstart=0 "$PLUGIN" \
  "http://127.0.0.1:$linkem_port/disk.img"
five_readers ra
ra=$secs
stop_nbdkit ra
started=$(grep -c 'read-ahead: stream from [0-9]* starts' "$tmp/ra.err" || :)
echo "$clients clients of $((region >> 20)) MiB at QD1: $plain s without" \
     "read-ahead, $ra s with it; $started streams started"
# Under ThreadSanitizer nbdkit's CPU, not the round trips, sets the
# pace (2.7 s without read-ahead, 2.05 s with it, six streams started):
# there the streams started say what the time cannot.
if [ -z "${TSAN_RUNTIME:-}" ]; then
  awk -v a="$ra" -v b="$plain" 'BEGIN { exit !(a * 1.5 <= b) }' ||
    fail "five QD1 clients took $ra s with read-ahead, $plain s without: read-ahead did not serve them"
fi
[ "$started" -ge "$clients" ] ||
  fail "$started read-ahead streams started for $clients sequential clients"
