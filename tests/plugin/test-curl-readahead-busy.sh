#!/usr/bin/env bash
# test-curl-readahead-busy.sh: read-ahead is for clients that keep few
# reads in flight; one that turns out to keep many fills the link
# itself, and needs the pool's connections for its reads.  A stream
# that its first reads started (nbdcopy's and qemu-img's first reads
# come one by one) must ask for nothing more once more than 4 reads
# are in the plugin at once.  Such streams went on asking ahead of the
# copy's reads, and on loopback their GETs took the pool's
# connections from the copy: copies of 256 MiB 11-17% slower
# (bench/run), qemu-img's in some runs 1.7 times as long.
#
# nginx behind linkem (40 ms round trip, so that the reads pile up in
# the plugin).  One NBD connection reads 64 KiB at 0, 64 KiB and 128
# KiB, each answered before the next (a stream starts at the third),
# then the rest of the 64 MiB image in 2 MiB reads with 8 in flight, as
# qemu-img convert does.  Every read gives the image's bytes; the
# stream says that it asks for nothing more (the broken plugin never
# did) and the debug log shows no range that it asked for after that;
# read-ahead fetched at most 10 MiB in all (what the first reads, 4
# of 2 MiB at most, asked for before the fifth came).  What was on its
# way is not cut off (that would cost the pool a new connection):
# nginx logged requests on at most 4 TCP connections, as connections=4
# allows.  The head start is off (-D curl.headstart=0): it would serve
# the first reads, and no stream would start at the third.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh
requires nginx

size=$((64 * 1024 * 1024))
serve_image "$size"
start_linkem "$port" 40
start_nbdkit busy -r -v -D curl.readahead=1 -D curl.headstart=0 "$PLUGIN" \
             "http://127.0.0.1:$linkem_port/disk.img" connections=4
: >"$tmp/access.log"

FILE=$image nbdsh -u "$uri" -c '
import os
data = open(os.environ["FILE"], "rb").read()
size = len(data)
for off in (0, 65536, 131072):
    assert h.pread(65536, off) == data[off:off + 65536], \
        "read at %d differs" % off
bs, depth, off = 2097152, 8, 196608
bufs = {}
while off < size or bufs:
    while off < size and len(bufs) < depth:
        n = min(bs, size - off)
        buf = nbd.Buffer(n)
        bufs[h.aio_pread(buf, off)] = (buf, off, n)
        off += n
    h.poll(-1)
    for cookie in list(bufs):
        if h.aio_command_completed(cookie):
            buf, o, n = bufs.pop(cookie)
            assert buf.to_bytearray() == data[o:o + n], \
                "read at %d differs" % o
h.shutdown()
' >"$tmp/out" 2>&1 || {
  cat "$tmp/out" >&2
  fail "the reads failed"
}
stop_nbdkit busy

grep -q 'read-ahead: stream from 131072 starts' "$tmp/busy.err" ||
  fail "no stream started at the third read: nothing was tested"
after=$(awk '
  /read-ahead: stream from 131072 asks for nothing more/ { retired = 1; next }
  retired && /read-ahead: stream from 131072 asks for [0-9]/ { n++ }
  END { print retired ? n + 0 : "never" }' "$tmp/busy.err")
case $after in
  never) problem "the stream went on asking ahead of 8 reads in flight" ;;
  0) ;;
  *) problem "the stream asked for $after ranges after it said it would not" ;;
esac
line=$(grep -E 'read-ahead: [0-9]+ streams in' "$tmp/busy.err" |
       tail -n 1 | sed 's/.*read-ahead: //')
echo "read-ahead: $line"
fetched=$(echo "$line" | sed -n 's/.* fetched \([0-9]*\) bytes.*/\1/p')
[ -n "$fetched" ] || fail "no read-ahead summary in the log"
[ "$fetched" -le $((10 * 1024 * 1024)) ] ||
  problem "read-ahead fetched $fetched bytes beside a client with 8 reads in flight (at most 10485760)"
conns=$(cut -d' ' -f1 "$tmp/access.log" | sort -u | wc -l)
echo "$(wc -l <"$tmp/access.log") requests on $conns connections"
[ "$conns" -le 4 ] ||
  problem "requests on $conns TCP connections with connections=4"

check_problems
