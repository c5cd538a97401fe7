#!/usr/bin/env bash
# test-curl-checksum-unverified.sh: bytes checksum= did not hash as
# they were served, nor spilled, are verified against digests of what
# was served, and a spill file that cannot be written falls back as
# documented.  (What cannot be verified at all: test-curl-checksum-
# reread.sh (5).)
#  (a) url= gives no validator (nginx: no ETag, no Last-Modified), so
#      reads are not pinned, and there is no spill file (TMPDIR does not
#      exist); nbdcopy reads a 160 MiB image in two regions at once, so
#      out of order: what was read ahead of the digest is read again and
#      compared with the digests of what was served; the copy succeeds
#      and the digest matches, with bytes read a second time.
#  (b) nbdkit's file size limit (ulimit -f, 2 MiB) far below the
#      object (24 MiB), reads from the end backwards: nbdkit is not
#      killed by SIGXFSZ at its first write to the spill file; every
#      read gives the image's bytes, and once the read at 0 completes the
#      object the bytes past the limit are read again from url= (pinned)
#      and the digest matches.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy
requires_nbdsh

size=$((24 * 1024 * 1024))
serve_image "$size" 'location /nv/ { alias DIR/www/;
    etag off; add_header Last-Modified ""; }'
sha256=$(sha "$image")

# (a) The client under nbdkit --run: nbdkit 1.32 may abort when a client
# hangs up with replies queued, as nbdcopy does after a failed read.
truncate -s 160M "$tmp/www/big.img"
zeros=$(sha "$tmp/www/big.img")
nv_url=${url%/*}/nv/big.img
! curl -sI "$nv_url" | grep -qi '^\(etag\|last-modified\):' ||
  fail "(a) nginx gave a validator"
st=0
TMPDIR=$tmp/no-such-dir timeout "$client_timeout" \
  "${NBDKIT[@]}" -r -v -U - "$PLUGIN" "$nv_url" "checksum=sha256:$zeros" \
  --run 'env -u LD_PRELOAD -u ASAN_OPTIONS -u TSAN_OPTIONS nbdcopy "$uri" null:' \
  2>"$tmp/a.err" || st=$?
[ "$st" -ne 124 ] || fail "(a) the copy hung"
grep -q "checksum: the sha256 of all 167772160 bytes matches checksum= ([1-9][0-9]* bytes read a second time)" \
     "$tmp/a.err" ||
  { grep 'checksum' "$tmp/a.err" >&2; fail "(a) no match with bytes read again"; }
[ "$st" -eq 0 ] || fail "(a) the copy failed ($st)"

# (b) The limit is the soft one, for nbdkit only: raised again at once.
ulimit -S -f 2048
start_nbdkit b -r -v "$PLUGIN" "$url" "checksum=sha256:$sha256"
ulimit -S -f unlimited
FILE=$image nbdsh -u "$uri" -c '
import os
data = open(os.environ["FILE"], "rb").read()
mib = 1024 * 1024
for k in range(len(data) // mib - 1, -1, -1):
    assert h.pread(mib, k * mib) == data[k * mib:(k + 1) * mib], \
        "read at %d differs" % (k * mib)
h.shutdown()
' >"$tmp/b.out" 2>&1 || {
  cat "$tmp/b.out" >&2
  grep -h 'checksum\|signal' "$tmp/b.err" >&2
  fail "(b) the backward reads failed"
}
stop_nbdkit b
grep -q "checksum: spill file: byte .* is past the file size limit" \
     "$tmp/b.err" || fail "(b) nbdkit did not say the spill file hit the limit"
grep -q "checksum: the sha256 of all $size bytes matches checksum= ([1-9][0-9]* bytes read a second time)" \
     "$tmp/b.err" ||
  fail "(b) not a match with bytes read again: $(grep 'checksum:' "$tmp/b.err")"
echo "checksum unverified: every case held"
