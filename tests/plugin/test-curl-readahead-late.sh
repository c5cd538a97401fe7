#!/usr/bin/env bash
# test-curl-readahead-late.sh: a read that a stream of read-ahead has
# gone past (one of a few reads in flight that reached the plugin late,
# behind others on a busy machine) is an ordinary read, not the start
# of a new stream.  It continues the run of the read before it, whose
# answer came, so it once started a stream that asked again for a
# whole window the first stream had fetched already (fio at QD4 fetched
# 25% more than it read).
#   (a) A sequential reader (QD1, 64 KiB) starts a stream from 1 MiB; it
#   then skips one read (1 MiB + 320 KiB) and reads on for 2 MiB, then
#   comes back for the read it skipped: right bytes, and nginx's GET for
#   it asks for exactly those 64 KiB.
#   (b) But a reader that reads the same 8 MiB again from their start
#   (far behind the stream of its first pass, as fio does when it wraps
#   around, or a client that reads a file twice) is read ahead of again:
#   the second pass costs a few GETs, not one per read (the first
#   version of (a)'s fix made it 128).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

export_image ro $((16 * 1024 * 1024)) -r
late=$((1024 * 1024 + 5 * 65536))
FILE=$image LATE=$late nbdsh -u "$uri" -c '
import os
data = open(os.environ["FILE"], "rb").read()
late = int(os.environ["LATE"])
def read(off):
    assert h.pread(65536, off) == data[off:off + 65536], "read at %d" % off
off = 1024 * 1024
while off < late:
    read(off)
    off += 65536
off += 65536                    # the late read is skipped...
for i in range(32):
    read(off)
    off += 65536
read(late)                      # ... and comes now
h.shutdown()
' >"$tmp/nbdsh.out" 2>&1 || {
  cat "$tmp/nbdsh.out" >&2
  fail "the reads failed"
}
stop_nbdkit ro

want="GET bytes=$late-$((late + 65535)) 206"
grep -q " $want " "$tmp/access.log" || {
  grep " GET " "$tmp/access.log" >&2
  fail "no GET of exactly the late read ($want)"
}
if grep -E " GET bytes=$late-[0-9]+ 206" "$tmp/access.log" |
   grep -vq " $want "; then
  grep " GET " "$tmp/access.log" >&2
  fail "the late read started a stream of its own"
fi
echo "the late read at $late was one GET of its own bytes"

# (b)
: >"$tmp/access.log"
start_nbdkit twice -r "$PLUGIN" "$url"
FILE=$image LOG=$tmp/access.log nbdsh -u "$uri" -c '
import os
data = open(os.environ["FILE"], "rb").read()
for p in range(2):
    off = 1024 * 1024
    for i in range(128):
        assert h.pread(65536, off) == data[off:off + 65536], \
            "pass %d: read at %d" % (p, off)
        off += 65536
    if p == 0:
        print(len(open(os.environ["LOG"]).readlines()), flush=True)
h.shutdown()
' >"$tmp/twice.out" 2>&1 || {
  cat "$tmp/twice.out" >&2
  fail "(b) the reads failed"
}
stop_nbdkit twice
first=$(head -n 1 "$tmp/twice.out")
second=$(($(grep -c ' GET ' "$tmp/access.log") - first))
echo "(b) the second pass of 128 reads: $second GETs"
[ "$second" -le 32 ] || {
  tail -n +"$((first + 1))" "$tmp/access.log" >&2
  fail "(b) the second pass of 128 reads cost $second GETs"
}
