#!/usr/bin/env bash
# test-curl-readahead-seq.sh: read-ahead serves a reader that keeps one
# read in flight from a few GETs, and costs a random reader nothing.
#  (a) 256 sequential reads of 64 KiB at QD1 (16 MiB from 1 MiB on) give
#      the image's bytes from at most 64 GETs (on loopback 16 ordinary
#      reads, then a stream's GETs of ranges longer than a read); the
#      debug lines show one stream and its memory bound,
#      by default the one --help names ("default 32M").
#  (b) With readahead=false the same reads cost one GET each (256).
#  (c) readahead-size=4M: at most 64 GETs again; the bound is 4096 KiB,
#      and no more than that (and one 256 KiB block for the read that
#      waits) is ever held, as the manual says.
#  (d) 300 reads of 4 KiB at random offsets (seeded) at QD1: exactly
#      one GET of exactly the read per read, no stream, and nginx sent
#      no byte more than was read.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

size=$((24 * 1024 * 1024 + 4321))
# The default bound, from the plugin's --help: "... (default 32M;".
default_kib=$(nbdkit "$PLUGIN" --help 2>&1 |
              sed -nE 's/^readahead-size=.*\(default ([0-9]+)M.*/\1/p')
[ -n "$default_kib" ] || fail "--help names no default readahead-size"
default_kib=$((default_kib * 1024))
serve_image "$size"
from=$((1024 * 1024))
len=$((16 * 1024 * 1024))

# seq_reads NAME PLUGIN-PARAMETERS...: the sequential reads through nbdkit NAME
# (its stderr with the read-ahead debug lines in $tmp/NAME.err), then
# $gets is the GETs nginx had for them (the probe's aside).
seq_reads ()
{
  local name=$1
  shift
  : >"$tmp/access.log"
  start_nbdkit "$name" -r -v -D curl.readahead=1 "$PLUGIN" "$url" "$@"
  FILE=$image FROM=$from LEN=$len nbdsh -u "$uri" -c '
import os
data = open(os.environ["FILE"], "rb").read()
off = int(os.environ["FROM"])
end = off + int(os.environ["LEN"])
while off < end:
    assert h.pread(65536, off) == data[off:off + 65536], \
        "read at %d differs" % off
    off += 65536
h.shutdown()
' >"$tmp/$name.out" 2>&1 || {
    cat "$tmp/$name.out" >&2
    problem "($name) $(tail -n 1 "$tmp/$name.out")"
  }
  stop_nbdkit "$name"
  gets_besides_probe "$name"
}

# A stream's first debug line, up to its memory bound.
starts="read-ahead: stream from [0-9]+ .*; [0-9]+ KiB held in all"

# longer_get LOG: LOG has a GET of a single range longer than 64 KiB.
longer_get ()
{
  awk '$2 == "GET" && $3 ~ /^bytes=[0-9]+-[0-9]+$/ {
         split(substr($3, 7), ab, "-")
         if (ab[2] - ab[1] + 1 > 65536) found = 1
       }
       END { exit !found }' "$1"
}

# (a)
seq_reads default
[ "$gets" -le 64 ] || {
  cat "$tmp/access.log" >&2
  problem "(a) $gets GETs for 256 sequential reads, expected at most 64"
}
# Read ahead: a GET of more than one read's bytes.
longer_get "$tmp/access.log" || {
  cat "$tmp/access.log" >&2
  problem "(a) no GET of a range longer than a read"
}
grep -qE "$starts, at most $default_kib KiB" "$tmp/default.err" ||
  problem "(a) no 'read-ahead: stream from ... at most $default_kib KiB' line"
grep -qE "read-ahead: 1 streams.* fetched [0-9]+ bytes and served [0-9]+" \
     "$tmp/default.err" ||
  problem "(a) no 'read-ahead: 1 streams ... fetched' line at unload"
echo "(a) $gets GETs: $(grep -F 'read-ahead: 1 streams' "$tmp/default.err" |
                        sed 's/.*read-ahead: //')"

# (b)
seq_reads off readahead=false
[ "$gets" -eq 256 ] || {
  cat "$tmp/access.log" >&2
  problem "(b) readahead=false: $gets GETs for 256 reads, expected 256"
}
! grep -q 'read-ahead: stream' "$tmp/off.err" ||
  problem "(b) readahead=false: a stream started"

# (c)
seq_reads small readahead-size=4M
[ "$gets" -le 64 ] || {
  cat "$tmp/access.log" >&2
  problem "(c) readahead-size=4M: $gets GETs for 256 sequential reads"
}
grep -qE "$starts, at most 4096 KiB" "$tmp/small.err" ||
  problem "(c) no 'read-ahead: stream from ... at most 4096 KiB' line"
# The unload line: "read-ahead: N streams ... fetched ...; at most K KiB held".
pat='read-ahead: [0-9]+ streams.*; at most ([0-9]+) KiB held'
peak=$(sed -nE "s/.*$pat.*/\\1/p" "$tmp/small.err")
if [ -z "$peak" ]; then
  problem "(c) no 'at most N KiB held' line at unload"
elif [ "$peak" -gt $((4096 + 256)) ]; then
  problem "(c) readahead-size=4M: $peak KiB were held at once"
fi
echo "(c) readahead-size=4M: $gets GETs, at most $peak KiB held"

# (d) Offsets from a seeded generator, anywhere in the image.
: >"$tmp/access.log"
start_nbdkit random -r -v -D curl.readahead=1 "$PLUGIN" "$url"
FILE=$image nbdsh -u "$uri" -c '
import os, random
data = open(os.environ["FILE"], "rb").read()
rnd = random.Random(20240611)
for i in range(300):
    off = rnd.randrange(8192, len(data) - 4096)
    assert h.pread(4096, off) == data[off:off + 4096], \
        "read at %d differs" % off
h.shutdown()
' >"$tmp/random.out" 2>&1 || {
  cat "$tmp/random.out" >&2
  problem "(d) $(tail -n 1 "$tmp/random.out")"
}
stop_nbdkit random
! grep -q 'read-ahead: stream' "$tmp/random.err" ||
  problem "(d) random reads started a stream"
awk '
  $2 != "GET" || $3 == "bytes=0-8191" { next }
  {
    gets++
    bytes += $5
    split(substr($3, 7), ab, "-")
    if ($3 !~ /^bytes=[0-9]+-[0-9]+$/ || ab[2] - ab[1] + 1 != 4096) {
      print "not one read of 4096 bytes: " $0; bad++
    }
  }
  END {
    if (gets != 300) { print gets " GETs for 300 reads"; bad++ }
    if (bytes != 300 * 4096) {
      print "nginx sent " bytes " bytes for " 300 * 4096 " read"; bad++
    }
    exit bad > 0
  }' "$tmp/access.log" >"$tmp/random-gets.out" || {
  cat "$tmp/random-gets.out" >&2
  problem "(d) the random reads did not cost exactly one GET each"
}

check_problems
