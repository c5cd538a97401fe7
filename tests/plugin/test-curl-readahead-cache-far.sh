#!/usr/bin/env bash
# test-curl-readahead-cache-far.sh: an NBD_CMD_CACHE far ahead of a
# sequential reader must not derail the reader's read-ahead stream.
# A large cache request was taken as the stream's own (its offset
# within four of its counts past the reads), moved the stream's
# position far ahead and counted the gap as held: the reader's next
# reads found nothing asked for before them and took 6.4x as long, 31x
# with such a hint every 2 MiB, also when the hint came from another
# NBD connection.
#   nginx behind linkem (20 ms round trip), a 104 MiB image.  Reader A
#   reads 12 MiB sequentially, 64 KiB at QD1, every read checked,
#   three times, from 0, 32 and 64 MiB: alone; with, every 2 MiB, a
#   cache request of 8 MiB starting 20 MiB past its position, sent on
#   A's own connection; the same on another connection B.  With the
#   hints A may take at most twice as long as alone (plus 1 s), and
#   each run is stopped after 20 times as long.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh
requires nginx

serve_image $((104 * 1024 * 1024))
start_linkem "$port" 20
start_nbdkit ra -r -v -D curl.readahead=1 "$PLUGIN" \
  "http://127.0.0.1:$linkem_port/disk.img"

FILE=$image URI=$uri nbdsh -c '
import os, sys, time
MiB = 1024 * 1024
data = open(os.environ["FILE"], "rb").read()
a = nbd.NBD()
a.connect_uri(os.environ["URI"])
b = nbd.NBD()
b.connect_uri(os.environ["URI"])
assert a.can_cache(), "the export does not take NBD_CMD_CACHE"

def run(base, hinter, limit):
    t0 = time.monotonic()
    for off in range(base, base + 12 * MiB, 65536):
        if hinter is not None and (off - base) % (2 * MiB) == 0:
            hinter.cache(8 * MiB, off + 20 * MiB)
        assert a.pread(65536, off) == data[off:off + 65536], \
            "read at %d differs" % off
        if time.monotonic() - t0 > limit:
            return None
    return time.monotonic() - t0

alone = run(0, None, 60)
assert alone is not None, "12 MiB alone took more than 60 s"
time.sleep(1.5)
for name, base, hinter in (("own", 32 * MiB, a), ("other", 64 * MiB, b)):
    t = run(base, hinter, 20 * alone + 5)
    shown = "more than %.1f" % (20 * alone + 5) if t is None else "%.1f" % t
    print("12 MiB: %.1f s alone, %s s with far cache hints on the %s "
          "connection" % (alone, shown, name))
    if t is None or t > 2 * alone + 1:
        print("FAIL: hints on the %s connection derailed the stream" % name)
    time.sleep(1.5)
' >"$tmp/reads.out" 2>&1 || {
  cat "$tmp/reads.out" >&2
  fail "the reads failed"
}
cat "$tmp/reads.out"
stop_nbdkit ra
! grep -q '^FAIL' "$tmp/reads.out" || fail "see above"
