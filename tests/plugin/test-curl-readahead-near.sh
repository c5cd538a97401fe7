#!/usr/bin/env bash
# test-curl-readahead-near.sh: on a server that answers within 2 ms
# (loopback, a LAN) read-ahead waits until a client has shown that it
# waits for every answer.  nbdcopy and qemu-img keep many reads in
# flight, but near the server their first reads are answered before
# the next ones come; the streams they started there, until they
# retired, made loopback copies 4-11% slower (bench/run, the same
# build with and without read-ahead).  nginx on loopback serves the
# 48 MiB image, and from /slow/ at 2 MiB/s per request after the first
# second's worth (nginx's limit_rate), so that an answer begins at once
# (the probe measures a near server: nbdkit's debug line says which,
# and nbdkit is started again when it measured 2 ms or more) and a read
# of 4 MiB takes about a second.
#  (a) 24 sequential reads of 64 KiB at QD1: a stream starts at the
#      17th read (16 answered, none beside another), not before.
#  (b) 10 sequential reads of 4 MiB from /slow/ with 2 in flight (so
#      two reads of the run are always in the plugin at once): every
#      read gives the image's bytes, no stream starts, and nginx sent no
#      more bytes than were read (the plugin before this rule started a
#      stream at the third read, which asked for the bytes ahead).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh
requires nginx

M=$((1024 * 1024))
size=$((48 * M))
serve_image "$size" 'location /slow/ {
      alias DIR/www/;
      limit_rate 2m;
    }'

# start_near NAME NBDKIT-ARGS...: start_nbdkit NAME, again (5 times at
# most) while its probe measured a distant server (on a busy machine
# an answer on loopback may take a few milliseconds); skip if none was
# near.
start_near ()
{
  local name=$1 said n
  for ((n = 0; n < 5; n++)); do
    start_nbdkit "$@"
    probe_said "$name"
    echo "($name) $said"
    case $said in *"a near server") return 0 ;; esac
    stop_nbdkit "$name"
  done
  skip "($name) no probe measured a near server: nothing to test with"
}

# (a)
start_near qd1 -r -v -D curl.readahead=1 "$PLUGIN" "$url"
read_in_turn "$image" "$M" 24 65536 >"$tmp/qd1.out" 2>&1 || {
  cat "$tmp/qd1.out" >&2
  fail "(a) the reads failed"
}
stop_nbdkit qd1
first=$(sed -n 's/.*read-ahead: stream from \([0-9]*\) starts.*/\1/p' \
          "$tmp/qd1.err" | head -n 1)
echo "(a) the first stream starts at ${first:-none}"
[ "$first" = $((M + 16 * 65536)) ] ||
  problem "(a) the first stream started at ${first:-none}, not at the 17th read ($((M + 16 * 65536)))"

# (b)
start_near qd2 -r -v -D curl.readahead=1 "$PLUGIN" \
           "http://127.0.0.1:$port/slow/disk.img"
: >"$tmp/access.log"
FILE=$image nbdsh -u "$uri" -c '
import os
data = open(os.environ["FILE"], "rb").read()
M = 1024 * 1024
bufs, off, end = {}, 4 * M, 44 * M
while off < end or bufs:
    while off < end and len(bufs) < 2:
        buf = nbd.Buffer(4 * M)
        bufs[h.aio_pread(buf, off)] = (buf, off)
        off += 4 * M
    h.poll(-1)
    for cookie in list(bufs):
        if h.aio_command_completed(cookie):
            buf, o = bufs.pop(cookie)
            assert buf.to_bytearray() == data[o:o + 4 * M], \
                "read at %d differs" % o
h.shutdown()
' >"$tmp/qd2.out" 2>&1 || {
  cat "$tmp/qd2.out" >&2
  fail "(b) the reads failed"
}
stop_nbdkit qd2
grep -q 'pread count=4194304 offset=' "$tmp/qd2.err" ||
  fail "(b) no read in the debug log: nothing was tested"
! grep 'read-ahead: stream from' "$tmp/qd2.err" ||
  problem "(b) a stream started for a client with 2 reads in flight"
bytes=$(awk '$2 == "GET" { b += $5 } END { print b + 0 }' "$tmp/access.log")
echo "(b) nginx sent $bytes bytes for 10 reads of 4 MiB"
[ "$bytes" -le $((40 * M)) ] ||
  problem "(b) nginx sent $bytes bytes for 10 reads of 4 MiB ($((40 * M)))"

check_problems
