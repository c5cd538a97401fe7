#!/usr/bin/env bash
# test-curl-readahead-others.sh: a read-ahead stream belongs to the
# sequential reader that started it.  Another client's reads, or random
# reads, that fall inside what the stream asked for are served from it
# but must not move it: when they did (a defect once), such a read
# moved the stream's position to its own, grew its window from there,
# and freed the bytes behind, which the sequential reader was about to
# read; that reader then lost its stream and started another, which
# asked for the same bytes again.
#  (a) One nbdkit, two NBD connections.  A reads the 32 MiB image
#      sequentially at QD1, 64 KiB at a time (512 reads); after every
#      8th read of A, B reads 4 KiB at a random offset (seeded) from A's
#      position to 4 MiB ahead of it, mostly inside what A's stream
#      asked for.  Every read gives the image's bytes; nginx sends at
#      most 1.25 times the image plus 4 MiB in all, and answers at most
#      100 GETs besides the probe's.  One stream fetches the image once
#      in about 25 GETs, and B's reads that it has not asked for yet
#      cost a GET of 4 KiB each (64 at most, 256 KiB); the slack is room
#      for a stream stopped and started again once or twice on a slow
#      machine (a new stream asks again for what the old one held, up
#      to about half of what was read so far).  The broken plugin lost
#      A's stream at about every B read and sent about 2.7 times the
#      image.
#  (b) 2000 reads of 4 KiB at random 4 KiB-aligned offsets (seeded) over
#      a 64 MiB image at QD1.  Random reads never start a stream but by
#      chance (a read that starts where one of the last few ended: with
#      this seed, once); such a stream asks for its first 256 KiB, and
#      the random reads that then fall into what it asked for are served
#      from it but must not make it ask for more.  So at most 2005 GETs
#      besides the probe's, none longer than 256 KiB, and nginx sends at
#      most 1 MiB more than was read (the broken plugin's chance stream,
#      moved on and grown by the random reads, fetched 30 MB or more in
#      most runs; in some it had died out sooner).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh
requires nginx

size=$((32 * 1024 * 1024))
serve_image "$size"
start_nbdkit others -r -v -D curl.readahead=1 "$PLUGIN" "$url"
: >"$tmp/access.log"

# (a)
FILE=$image URI=$uri nbdsh -u "$uri" -c '
import os, random
data = open(os.environ["FILE"], "rb").read()
size = len(data)
b = nbd.NBD()
b.connect_uri(os.environ["URI"])
rnd = random.Random(20240622)
bs, off, n = 65536, 0, 0
while off < size:
    assert h.pread(bs, off) == data[off:off + bs], "A: read at %d differs" % off
    off += bs
    n += 1
    if n % 8 == 0 and off < size:
        top = min(off + 4 * 1024 * 1024, size - 4096)
        r = rnd.randrange(off, top + 1)
        assert b.pread(4096, r) == data[r:r + 4096], \
            "B: read at %d differs" % r
print("A: %d reads, B: %d reads" % (n, n // 8))
b.shutdown()
h.shutdown()
' >"$tmp/a.out" 2>&1 || {
  cat "$tmp/a.out" >&2
  fail "(a) reads failed"
}
stop_nbdkit others
read -r gets bytes < <(awk '
  $2 == "GET" && $3 != "bytes=0-8191" { gets++; bytes += $5 }
  END { print gets + 0, bytes + 0 }' "$tmp/access.log")
line=$(grep -E 'read-ahead: [0-9]+ streams in' "$tmp/others.err" |
       tail -n 1 | sed 's/.*read-ahead: //')
echo "(a) $(cat "$tmp/a.out"): $gets GETs, $bytes bytes sent; $line"
max=$((size * 5 / 4 + 4 * 1024 * 1024))
[ "$bytes" -le "$max" ] ||
  problem "(a) nginx sent $bytes bytes for a $size-byte image (at most $max)"
[ "$gets" -le 100 ] ||
  problem "(a) $gets GETs for 512 sequential and 64 random reads"

# (b)
big=$tmp/www/big.img
make_random_file "$big" $((64 * 1024 * 1024))
start_nbdkit random -r -v -D curl.readahead=1 "$PLUGIN" \
             "http://127.0.0.1:$port/big.img"
: >"$tmp/access.log"
FILE=$big nbdsh -u "$uri" -c '
import os, random
data = open(os.environ["FILE"], "rb").read()
rnd = random.Random(20240623)
for i in range(2000):
    off = rnd.randrange(2, len(data) // 4096) * 4096
    assert h.pread(4096, off) == data[off:off + 4096], \
        "read at %d differs" % off
h.shutdown()
' >"$tmp/b.out" 2>&1 || {
  cat "$tmp/b.out" >&2
  fail "(b) random reads failed"
}
stop_nbdkit random
awk '
  $2 != "GET" || $3 == "bytes=0-8191" { next }
  {
    gets++
    bytes += $5
    split(substr($3, 7), ab, "-")
    if ($3 !~ /^bytes=[0-9]+-[0-9]+$/ || ab[2] - ab[1] + 1 > 262144) {
      if (shown++ < 5) print "longer than a first segment: " $0
      bad++
    }
  }
  END {
    print gets " GETs, " bytes " bytes sent for 2000 reads of 4096 bytes"
    if (gets > 2005 || bytes > 2000 * 4096 + 1048576) bad++
    exit bad > 0
  }' "$tmp/access.log" >"$tmp/random-gets.out" || {
  cat "$tmp/random-gets.out" >&2
  problem "(b) the random reads cost more than one GET each"
}
streams=$(grep -c 'read-ahead: stream from .* starts' "$tmp/random.err" || :)
echo "(b) $(tail -n 1 "$tmp/random-gets.out"); $streams streams"

check_problems
