#!/usr/bin/env bash
# test-curl-checksum-reread.sh: bytes checksum= reads again at the end
# (no spill file: TMPDIR does not exist) prove the bytes the client got,
# not only what the server holds when they are read again.  A 24 MiB
# object; the client reads its last MiB first (ahead of the digest, so
# not hashed as served), then the rest in order; the read of the 23rd
# MiB completes the object, and the last MiB is read again.
#  (1) nginx, strong ETag (mtime-size): between the client's first read
#      and the others, the file is replaced by the expected version of
#      the same size and mtime (cp -p), so the ETag stays.  The digest
#      of the bytes read again is checksum='s, but the client got others:
#      the completing read and every later one fail, and nbdkit says the
#      bytes read again differ from those served before, naming them;
#      never that the digest matches.
#  (2) The same with nothing replaced: every read succeeds and the
#      digest matches, with the MiB read a second time.
#  (3) A weak ETag only (W/"v1", which promises no identical bytes),
#      replaced: no match, the read fails.
#  (4) No validator at all, nothing replaced: the bytes read again are
#      compared with those served, so the digest matches.
#  (5) Past the digests kept (262,144 ranges), a range that keeps none
#      fails the verdict as "could not be verified", and the message says
#      to give nbdkit a TMPDIR with room.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

mib=$((1024 * 1024))
size=$((24 * mib))
serve_image "$size" 'location /weak/ { alias DIR/www/; etag off;
    add_header ETag "W/\"v1\"" always; }
  location /nv/ { alias DIR/www/; etag off; add_header Last-Modified ""; }'
base=${url%/disk.img}

# A: the version served first, B (the expected one) but for its last MiB.
cp "$image" "$tmp/B.img"
cp "$image" "$tmp/A.img"
make_random_file "$tmp/last" "$mib"
dd if="$tmp/last" of="$tmp/A.img" bs=$mib seek=23 conv=notrunc status=none
touch -d '2020-01-01 00:00:00' "$tmp/A.img" "$tmp/B.img"
sumA=$(sha "$tmp/A.img") sumB=$(sha "$tmp/B.img")

# run_case NAME PATH REPLACE SUM: nbdkit without a spill file on
# $base/PATH/x.img (A) with checksum=sha256:SUM, the client's reads (B
# replaces A after the first if REPLACE is 1); $failed, which failed.
run_case ()
{
  local name=$1 path=$2
  cp -p "$tmp/A.img" "$tmp/www/x.img"
  chmod 644 "$tmp/www/x.img"
  TMPDIR=$tmp/no-such-dir start_nbdkit "$name" -r -v "$PLUGIN" \
    "$base$path/x.img" "checksum=sha256:$4" readahead=false
  B=$tmp/B.img X=$tmp/www/x.img REPLACE=$3 nbdsh -u "$uri" -c '
import os, shutil
mib = 1024 * 1024
b = open(os.environ["B"], "rb").read()
failed = []
def read(k):
    try:
        got = h.pread(mib, k * mib)
    except nbd.Error:
        failed.append(k)
        return
    if k < 23:
        assert got == b[k * mib:(k + 1) * mib], "read %d: not B" % k
read(23)
if os.environ["REPLACE"] == "1":
    x = os.environ["X"]
    shutil.copy2(os.environ["B"], x + ".new")
    os.chmod(x + ".new", 0o644)
    os.rename(x + ".new", x)
for k in range(23):
    read(k)
read(0)             # after the object was completed
print("failed", " ".join(map(str, failed)))
h.shutdown()
' >"$tmp/$name.out" 2>&1 || { cat "$tmp/$name.out" >&2; fail "($name) nbdsh"; }
  stop_nbdkit "$name"
  failed=$(sed -n 's/^failed *//p' "$tmp/$name.out")
}

# (1)
run_case 1 "" 1 "$sumB"
grep -qi "^etag: \"" <<<"$(curl -sI "$base/x.img")" || fail "(1) no strong ETag"
! grep -q "checksum: the sha256 of all .* matches" "$tmp/1.err" ||
  fail "(1) nbdkit said the digest matches for bytes the client never got"
grep -q "checksum: bytes $((23 * mib))-$((size - 1)) read again differ from the bytes served before" \
     "$tmp/1.err" ||
  { grep 'checksum' "$tmp/1.err" >&2; fail "(1) no message that the bytes differ"; }
[ "$failed" = "22 0" ] || fail "(1) failed reads: '$failed', not the completing one and after"

# (2) A is the object, served unchanged.
run_case 2 "" 0 "$sumA"
[ -z "$failed" ] || fail "(2) reads failed: $failed"
grep -q "checksum: the sha256 of all $size bytes matches checksum= ($mib bytes read a second time)" \
     "$tmp/2.err" ||
  fail "(2) no match with the MiB read again: $(grep 'checksum:' "$tmp/2.err")"

# (3)
run_case 3 /weak 1 "$sumB"
curl -sI "$base/weak/x.img" | grep -qi '^etag: W/"v1"' || fail "(3) no weak ETag"
! grep -q "checksum: the sha256 of all .* matches" "$tmp/3.err" ||
  fail "(3) nbdkit said the digest matches for bytes the client never got"
grep -q "checksum: bytes .* read again differ from the bytes served before" \
     "$tmp/3.err" ||
  { grep 'checksum' "$tmp/3.err" >&2; fail "(3) no message that the bytes differ"; }
[ "$failed" = "22 0" ] || fail "(3) failed reads: '$failed'"

# (4)
run_case 4 /nv 0 "$sumA"
[ -z "$failed" ] || fail "(4) reads failed: $failed"
grep -q "checksum: the sha256 of all $size bytes matches checksum= ($mib bytes read a second time)" \
     "$tmp/4.err" ||
  fail "(4) no match with the MiB read again: $(grep 'checksum:' "$tmp/4.err")"
# (5) More reads kept as digests than the plugin holds (262,144): one
# byte each from byte 1 on, 262,145 of them, then byte 0 completes the
# object.  The last range kept no digest: the digest is never said to
# match, and the completing read fails saying why.  nbdkit's blocksize
# filter cuts one client read into these 1-byte reads of the plugin, in
# order, which read-ahead serves from a few GETs.  As 262,145 NBD reads
# they took 20 s (80 under ASan), most of it in round trips.
n=262145
make_random_file "$tmp/www/small.img" $((n + 1))
# Without -v: a debug line for each read would be most of the time.
TMPDIR=$tmp/no-such-dir start_nbdkit 5 -r --filter=blocksize "$PLUGIN" \
  "$base/small.img" "checksum=sha256:$(sha "$tmp/www/small.img")" \
  minblock=1 maxdata=1
t0=$EPOCHREALTIME
N=$n nbdsh -u "$uri" -c '
import os
h.pread(int(os.environ["N"]), 1)
try:
    h.pread(1, 0)
except nbd.Error:
    print("the completing read failed")
h.shutdown()
' >"$tmp/5.out" 2>&1 || { cat "$tmp/5.out" >&2; fail "(5) nbdsh"; }
echo "(5) $n reads in $(seconds_since "$t0") s"
stop_nbdkit 5
grep -q "the completing read failed" "$tmp/5.out" ||
  fail "(5) the completing read succeeded"
grep -q "checksum: bytes from $n on could not be verified: .*over 262144 such reads" \
     "$tmp/5.err" ||
  { grep 'checksum:' "$tmp/5.err" >&2; fail "(5) no message that bytes could not be verified"; }
grep -q "give nbdkit a TMPDIR with room for a spill file" "$tmp/5.err" ||
  fail "(5) the message does not say what to do"
echo "checksum reread: every case held"
