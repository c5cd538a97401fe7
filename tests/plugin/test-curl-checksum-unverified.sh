#!/usr/bin/env bash
# test-curl-checksum-unverified.sh: checksum= never says the digest
# matches for bytes it did not hash as they were served, and a spill
# file that cannot be written falls back as documented.
#  (a) url= gives no validator (nginx: no ETag, no Last-Modified), so
#      reads are not pinned, and there is no spill file (TMPDIR does not
#      exist); nbdcopy reads a 160 MiB image in two regions at once, so
#      out of order: the copy fails, nbdkit says the bytes could not be
#      verified and why, and what to do (a TMPDIR with room), and never
#      that the digest matches.
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
! grep -q "checksum: the sha256 of all .* matches" "$tmp/a.err" ||
  fail "(a) nbdkit said the digest matches for bytes it could not verify"
grep -q "checksum: bytes from [0-9]* on could not be verified: .* not pinned" \
     "$tmp/a.err" ||
  { grep 'checksum' "$tmp/a.err" >&2; fail "(a) no message that the bytes could not be verified"; }
grep -q "give nbdkit a TMPDIR with room for a spill file" "$tmp/a.err" ||
  fail "(a) the message does not say what to do"
[ "$st" -ne 0 ] || fail "(a) the copy succeeded"

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
