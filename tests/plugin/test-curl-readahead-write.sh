#!/usr/bin/env bash
# test-curl-readahead-write.sh: a write drops what read-ahead holds of
# the bytes it writes.  Apache mod_dav serves a writable 24 MiB image.
# A client reads 64 KiB at a time at QD1 from 1 MiB on (32 reads; on
# loopback a stream starts at the 17th, see stream_lead, serves the
# next ones and runs ahead of them), then writes a pattern 128 KiB ahead
# of where it reads (bytes the stream holds already) and one 3 MiB ahead
# (in the stream's range), and reads on sequentially past both: every
# read gives the bytes written, never the ones read ahead before the
# write.  Then a sequential read of the whole image, and the file on
# disk, are the image with the writes.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

size=$((24 * 1024 * 1024))
start_apache
make_random_file "$tmp/dav/disk.img" "$size"
chmod a+rw "$tmp/dav/disk.img"
cp "$tmp/dav/disk.img" "$tmp/expected.img"

start_nbdkit rw -v -D curl.readahead=1 "$PLUGIN" \
             "http://127.0.0.1:$dav_port/disk.img"
stream_lead rw
EXPECTED=$tmp/expected.img nbdsh -u "$uri" -c '
import os, time
exp = bytearray(open(os.environ["EXPECTED"], "rb").read())
K64 = 65536

def read(off, n, what):
    got = h.pread(n, off)
    if got != exp[off:off + n]:
        raise SystemExit("%s: read of %d at %d differs from the image%s"
                         % (what, n, off, " (gave the bytes before the write)"
                            if got == old[off:off + n] else ""))

def write(off, n, seed):
    buf = bytes((seed + k * 7) % 251 for k in range(n))
    h.pwrite(buf, off)
    exp[off:off + n] = buf

old = bytes(exp)
off = 1024 * 1024
for i in range(32):
    read(off, K64, "before the writes")
    off += K64
# The stream fills its window (at least 256 KiB past the reads).
time.sleep(0.1)
near, far = off + 128 * 1024, off + 3 * 1024 * 1024
write(near, 4096, 1)
write(far + 1000, K64, 2)
while off < far + 2 * K64:
    read(off, K64, "after the writes")
    off += K64
# The whole image, sequentially.
for off in range(0, len(exp), 1024 * 1024):
    read(off, 1024 * 1024, "the whole image")
if h.can_flush():
    h.flush()
h.shutdown()
open(os.environ["EXPECTED"], "wb").write(exp)
' >"$tmp/nbdsh.out" 2>&1 || {
  cat "$tmp/nbdsh.out" >&2
  fail "a read after a write did not give the bytes written"
}
stop_nbdkit rw
assert_same_file "$tmp/expected.img" "$tmp/dav/disk.img"
# The reads before the writes were served by a stream (from the read
# after the lead, or the one after it).
M=$((1024 * 1024))
at=$((M + lead * 65536))
grep -qE "read-ahead: stream from ($at|$((at + 65536))) " \
     "$tmp/rw.err" || fail "no stream started on the first reads"
