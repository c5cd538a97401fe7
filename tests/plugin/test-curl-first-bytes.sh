#!/usr/bin/env bash
# test-curl-first-bytes.sh: start-up is one ranged GET of the object's
# first 8 KiB, whose bytes serve the client's first reads.
#  (a) nginx sees exactly one request from nbdkit's start to a client's
#      reads of 4 KiB at 0 and 512 bytes at 1024 (bytes=0-8191, no HEAD),
#      and the reads give the image's bytes.
#  (b) An object smaller than 8 KiB (answered with the bytes it has) is
#      served whole and exactly.
#  (c) Writes: with a writable connection the kept bytes are not
#      served: a write at 0 and a read of it give the new bytes (Apache
#      mod_dav).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh
requires nbdcopy

# (a)
serve_image $((3 * 1024 * 1024 + 5))
start_nbdkit ro -r "$PLUGIN" "$url"
FILE=$image nbdsh -u "$uri" -c '
import os
data = open(os.environ["FILE"], "rb").read()
assert h.pread(4096, 0) == data[:4096], "the first 4 KiB differ"
assert h.pread(512, 1024) == data[1024:1536], "bytes 1024-1535 differ"
' || fail "(a) the first reads failed"
stop_nbdkit ro
lines=$(wc -l <"$tmp/access.log")
[ "$lines" -eq 1 ] && grep -qE '^[0-9]+ GET bytes=0-8191 206 8192 ' \
                           "$tmp/access.log" || {
  cat "$tmp/access.log" >&2
  fail "(a) $lines requests, expected the probe's one GET of bytes=0-8191"
}

# (b)
make_random_file "$tmp/www/small.img" 1000
start_nbdkit small -r "$PLUGIN" "http://127.0.0.1:$port/small.img"
timeout "$client_timeout" nbdcopy "$uri" "$tmp/small.out"
stop_nbdkit small
assert_same_file "$tmp/www/small.img" "$tmp/small.out"
grep -qE ' GET bytes=0-8191 206 1000 /small.img ' "$tmp/access.log" ||
  fail "(b) the small object was not answered with the bytes it has"

# (c)
start_apache
make_random_file "$tmp/dav/disk.img" $((256 * 1024))
chmod a+rw "$tmp/dav/disk.img"
start_nbdkit rw "$PLUGIN" "http://127.0.0.1:$dav_port/disk.img"
nbdsh -u "$uri" -c '
h.pwrite(b"\x5a" * 4096, 0)
assert h.pread(4096, 0) == b"\x5a" * 4096, "read the old bytes after a write"
' || fail "(c) a read after a write gave the old first bytes"
stop_nbdkit rw
