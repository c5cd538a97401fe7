#!/usr/bin/env bash
# test-curl-readahead-short.sh: runs of two reads on a distant server
# (20 ms round trip through linkem, so that the probe takes it for one)
# cost no read-ahead.  A file system reads an inode and then a block:
# pairs of reads at random places.  A stream used to start at the
# second read of a run and ask for a first segment of at least 128 KiB:
# with pairs of 4 KiB reads at 30 ms and 10 Mbit/s, 16 times the bytes
# read and 2.2 times as slow as with readahead=false.  Now a stream
# starts once two reads of the run were answered (one only when a
# stream served reads within the last second).  30 pairs of 4 KiB reads
# at QD1, each pair at a random offset (seeded): every read gives the
# image's bytes, no stream starts, and nginx sent exactly the bytes
# read.  The head start is off (-D curl.headstart=0): its GETs ask for
# the object's start whatever the client reads.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh
requires nginx

size=$((64 * 1024 * 1024))
serve_image "$size"
start_linkem "$port" 20

# runs NAME LENGTH: 30 runs of LENGTH reads of 4 KiB at QD1 through a
# new nbdkit NAME, each run at a random offset; $bytes is what nginx
# sent for them (the probe's aside).
runs ()
{
  local name=$1
  start_nbdkit "$name" -r -v -D curl.readahead=1 -D curl.headstart=0 \
               "$PLUGIN" "http://127.0.0.1:$linkem_port/disk.img"
  : >"$tmp/access.log"
  FILE=$image LEN=$2 nbdsh -u "$uri" -c '
import os, random
data = open(os.environ["FILE"], "rb").read()
rnd = random.Random(20261202 + int(os.environ["LEN"]))
for i in range(30):
    off = rnd.randrange(16, len(data) // 4096 - 16) * 4096
    for k in range(int(os.environ["LEN"])):
        assert h.pread(4096, off) == data[off:off + 4096], \
            "read at %d differs" % off
        off += 4096
h.shutdown()
' >"$tmp/$name.out" 2>&1 || {
    cat "$tmp/$name.out" >&2
    fail "($name) the reads failed"
  }
  stop_nbdkit "$name"
  bytes=$(awk '$2 == "GET" && $3 != "bytes=0-8191" { b += $5 }
               END { print b + 0 }' "$tmp/access.log")
  cp "$tmp/access.log" "$tmp/access-$name.log"
}

runs pairs 2
streams=$(grep -c 'read-ahead: stream from .* starts' "$tmp/pairs.err" || :)
echo "pairs: $streams streams, nginx sent $bytes bytes for $((60 * 4096))"
[ "$streams" -eq 0 ] || problem "$streams streams for pairs of reads"
[ "$bytes" -eq $((60 * 4096)) ] ||
  problem "nginx sent $bytes bytes for 60 reads of 4 KiB ($((60 * 4096)))"

check_problems
