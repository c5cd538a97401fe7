#!/usr/bin/env bash
# test-curl-readahead-filter.sh: NBD_CMD_CACHE reads ahead, even with
# readahead=false (no stream of the plugin's own).  nginx serves a
# 24 MiB image.
#  (a) nbdkit's readahead filter, which sends .cache ahead of each
#      read: 256 sequential reads of 64 KiB at QD1 give the image's
#      bytes from at most 80 GETs (see below); without the filter, one
#      GET each.
#  (b) A client's NBD_CMD_CACHE of 4 MiB at 1 MiB: within 5 s, and
#      before any read, nginx has answered GETs that cover those 4 MiB;
#      then 64 reads of 64 KiB there at QD1 give the image's bytes and
#      make no GET of that range.  Without the cache request, one GET
#      per read.
#  (c) readahead-size=0: the export does not offer NBD_CMD_CACHE.
#  (d) readahead-size=4M bounds what a cache request reads ahead: after
#      NBD_CMD_CACHE of 16 MiB at 1 MiB and a pause of 0.5 s, 64 reads
#      there give the image's bytes, and at most 4 MiB (and one block)
#      were held.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh
filterdir=$(nbdkit --dump-config | sed -n 's/^filterdir=//p')
[ -f "$filterdir/nbdkit-readahead-filter.so" ] ||
  skip "nbdkit's readahead filter is not installed"

size=$((24 * 1024 * 1024))
serve_image "$size"
M=$((1024 * 1024))

# reads NAME CACHE COUNT NBDKIT-ARGS...: through nbdkit NAME started
# with NBDKIT-ARGS, unless CACHE is 0 an NBD_CMD_CACHE of CACHE MiB at
# 1 MiB, then (CACHE 4) until nginx's log shows GETs that cover those
# bytes (at most 5 s, then it fails) or (else) 0.5 s, and the number of
# lines of the log then in $tmp/NAME.before; then COUNT reads of 64 KiB
# from 1 MiB on at QD1, each compared with the image.  $gets is then
# the GETs nginx had (the probe's aside).
reads ()
{
  local name=$1 cache=$2 count=$3
  shift 3
  : >"$tmp/access.log"
  start_nbdkit "$name" -r "$@"
  FILE=$image CACHE=$cache COUNT=$count LOG=$tmp/access.log \
    BEFORE=$tmp/$name.before nbdsh -u "$uri" -c '
import os, re, time
data = open(os.environ["FILE"], "rb").read()
off = 1024 * 1024
cache = int(os.environ["CACHE"]) * 1024 * 1024

def covered(lines):
    # Up to where GETs answered with bytes cover [off, off + cache).
    spans = sorted((int(m.group(1)), int(m.group(2)) + 1)
                   for m in (re.search(r" GET bytes=(\d+)-(\d+) 206 ", l)
                             for l in lines) if m)
    end = off
    for a, b in spans:
        if a <= end:
            end = max(end, b)
    return end

if cache > 0:
    assert h.can_cache(), "the export does not offer NBD_CMD_CACHE"
    h.cache(cache, off)
    if cache == 4 * 1024 * 1024:
        for i in range(50):
            lines = open(os.environ["LOG"]).readlines()
            if covered(lines) >= off + cache:
                break
            time.sleep(0.1)
        else:
            raise SystemExit("5 s after NBD_CMD_CACHE of [%d, %d): GETs "
                             "cover up to %d" % (off, off + cache,
                                                 covered(lines)))
    else:
        time.sleep(0.5)
        lines = open(os.environ["LOG"]).readlines()
    open(os.environ["BEFORE"], "w").write("%d\n" % len(lines))
for i in range(int(os.environ["COUNT"])):
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

# (a) Usually 26-35 GETs; one CI run saw 52: the filter's cache requests
# come from its own thread, and one that arrives after the reads went
# past its offset starts a new stream there, which ends the stream in
# use when that one was idle for 20 ms (on a busy machine), so the new
# reads begin again with small segments.  Without the filter: 256.
reads filter 0 256 --filter=readahead "$PLUGIN" "$url" readahead=false
[ "$gets" -le 80 ] || {
  cat "$tmp/access.log" >&2
  problem "(a) the readahead filter: $gets GETs for 256 sequential reads"
}
echo "(a) with nbdkit's readahead filter: $gets GETs for 256 reads"
reads nofilter 0 256 "$PLUGIN" "$url" readahead=false
[ "$gets" -eq 256 ] || {
  cat "$tmp/access.log" >&2
  problem "(a) without the filter: $gets GETs for 256 reads, expected 256"
}

# (b) in_range [FIRST-LINE]: the GETs in nginx's log from FIRST-LINE
# on that ask for bytes of [1 MiB, 5 MiB).
in_range ()
{
  tail -n +"${1:-1}" "$tmp/access.log" | awk -v lo="$M" -v hi=$((5 * M)) '
    $2 == "GET" && $3 ~ /^bytes=[0-9]+-[0-9]+$/ {
      split(substr($3, 7), ab, "-")
      if (ab[1] + 0 < hi && ab[2] + 0 >= lo) n++
    }
    END { print n + 0 }'
}
reads cache 4 64 -v -D curl.readahead=1 "$PLUGIN" "$url" readahead=false
grep -qE "read-ahead: stream from $M " "$tmp/cache.err" ||
  problem "(b) NBD_CMD_CACHE did not start a stream at $M"
# (Without $tmp/cache.before the client failed, a problem already.)
if [ -s "$tmp/cache.before" ]; then
  n=$(in_range $(($(cat "$tmp/cache.before") + 1)))
  if [ "$n" -eq 0 ]; then
    echo "(b) NBD_CMD_CACHE of 4 MiB: $(in_range) GETs of it, before the reads"
  else
    cat "$tmp/access.log" >&2
    problem "(b) the reads of the cached range made $n GETs of it"
  fi
fi
reads nocache 0 64 "$PLUGIN" "$url" readahead=false
n=$(in_range)
[ "$n" -eq 64 ] || {
  cat "$tmp/access.log" >&2
  problem "(b) without NBD_CMD_CACHE: $n GETs for 64 reads, expected 64"
}

# (c)
start_nbdkit none -r "$PLUGIN" "$url" readahead-size=0
nbdsh -u "$uri" -c '
assert not h.can_cache(), "readahead-size=0 offers NBD_CMD_CACHE"
h.shutdown()
' || problem "(c) readahead-size=0: the export offers NBD_CMD_CACHE"
stop_nbdkit none
start_nbdkit some -r "$PLUGIN" "$url" readahead=false
nbdsh -u "$uri" -c '
assert h.can_cache(), "readahead=false does not offer NBD_CMD_CACHE"
h.shutdown()
' || problem "(c) readahead=false: the export does not offer NBD_CMD_CACHE"
stop_nbdkit some

# (d)
reads bound 16 64 -v -D curl.readahead=1 "$PLUGIN" "$url" readahead=false \
      readahead-size=4M
# The unload line: "read-ahead: N streams ... fetched ...; at most K KiB held".
pat='read-ahead: [0-9]+ streams.*; at most ([0-9]+) KiB held'
peak=$(sed -nE "s/.*$pat.*/\\1/p" "$tmp/bound.err")
if [ -z "$peak" ]; then
  problem "(d) no 'at most N KiB held' line at unload"
elif [ "$peak" -gt $((4096 + 256)) ]; then
  problem "(d) readahead-size=4M: $peak KiB were held at once"
fi
echo "(d) readahead-size=4M, NBD_CMD_CACHE of 16 MiB: at most $peak KiB held"

check_problems
