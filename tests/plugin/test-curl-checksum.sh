#!/usr/bin/env bash
# test-curl-checksum.sh: checksum=ALGO:HEX holds the object to the
# digest the user gives, computed from the bytes reads return as they
# cover the object; once every byte was read, a mismatch fails the read
# that completed it and every read after.  nginx serves a 24 MiB image.
#  (a) nbdcopy with checksum=sha256 of the image: the copy is the
#      image's bytes and nbdkit says the digest matches.
#  (b) qemu-img convert with sha512, nbdcopy with md5 (upper-case hex):
#      both match.
#  (c) One byte of the served file changed (the checksum is the
#      original's): nbdcopy and qemu-img convert both fail, and nbdkit
#      says the digest is not checksum='s; a read after that fails too.
#  (d) Reads from the end backwards, 1 MiB at a time: every read gives
#      the image's bytes; the plugin spills them to a file in $TMPDIR and
#      hashes them once the read at 0 comes, reading nothing again.
#      With TMPDIR a directory that does not exist there is no spill
#      file: the 23 MiB after the first are read again once the read at
#      0 completes the object.  With a wrong checksum the read at 0
#      fails.
#  (e) nbdinfo reads nothing of the object: no verdict, nothing fails,
#      and nbdkit says at exit that the digest was not checked.
#  (f) Bad values refused at start-up, each with a message naming the
#      problem, also when a good value follows (as connections=abc
#      connections=4 is: each value is checked as it comes); a writable
#      connection refused (checksum= needs -r).
#  (g) nbdcopy splits an image among its workers in regions of 128 MiB
#      and reads them at once: 320 MiB (sparse) read nothing twice.
#  (i) No spill file and reads not pinned: what was read out of order is
#      read again and compared with digests of the bytes served, so the
#      digest matches (a pin is not what proves them).
#  (j) Reads scattered into more ranges than the plugin notes: the
#      digest is still checked.
#  (h) The server states the object's digest (nginx adds the header
#      the URL's query asks for): Repr-Digest, Digest or
#      x-amz-checksum-sha256 that agree, or are of another algorithm, or
#      an S3 composite checksum, let nbdkit start; one that disagrees
#      stops it at start-up, with a message that names the header.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy
requires qemu-img
requires_nbdsh

size=$((24 * 1024 * 1024))
serve_image "$size" 'location /d/ { alias DIR/www/;
  add_header Repr-Digest $arg_r; add_header Digest $arg_g;
  add_header x-amz-checksum-sha256 $arg_a; }'
sha256=$(sha256sum <"$image" | cut -d' ' -f1)
sha512=$(sha512sum <"$image" | cut -d' ' -f1)
md5=$(md5sum <"$image" | cut -d' ' -f1)

# (a)
start_nbdkit a -r -v "$PLUGIN" "$url" "checksum=sha256:$sha256"
timeout "$client_timeout" nbdcopy "$uri" "$tmp/a.img"
stop_nbdkit a
assert_same_file "$image" "$tmp/a.img"
grep -q "checksum: the sha256 of all $size bytes matches" "$tmp/a.err" ||
  fail "(a) nbdkit did not say the sha256 matches"

# (b)
start_nbdkit b1 -r -v "$PLUGIN" "$url" "checksum=SHA512:$sha512"
timeout "$client_timeout" qemu-img convert -f raw "$uri" -O raw "$tmp/b.img"
stop_nbdkit b1
assert_same_file "$image" "$tmp/b.img"
grep -q "checksum: the sha512 of all $size bytes matches" "$tmp/b1.err" ||
  fail "(b) nbdkit did not say the sha512 matches"
start_nbdkit b2 -r -v "$PLUGIN" "$url" "checksum=md5:${md5^^}"
timeout "$client_timeout" nbdcopy "$uri" null:
stop_nbdkit b2
grep -q "checksum: the md5 of all $size bytes matches" "$tmp/b2.err" ||
  fail "(b) nbdkit did not say the md5 matches"

# (d), before the change: reads from the end backwards.
backwards ()
{
  FILE=$image nbdsh -u "$uri" -c '
import os
data = open(os.environ["FILE"], "rb").read()
mib = 1024 * 1024
for k in range(len(data) // mib - 1, -1, -1):
    try:
        got = h.pread(mib, k * mib)
    except nbd.Error as e:
        print("read at %d failed: %s" % (k * mib, e))
        raise SystemExit(3 if k == 0 else 2)
    assert got == data[k * mib:(k + 1) * mib], "read at %d differs" % k
h.shutdown()
'
}
for d in spill none; do
  dir=$tmp
  [ "$d" = none ] && dir=$tmp/no-such-dir
  TMPDIR=$dir start_nbdkit "d_$d" -r -v "$PLUGIN" "$url" \
                           "checksum=sha256:$sha256"
  backwards >"$tmp/d_$d.out" 2>&1 ||
    { cat "$tmp/d_$d.out" >&2; fail "(d) the backward reads failed ($d)"; }
  stop_nbdkit "d_$d"
  again=0
  [ "$d" = none ] && again=$((23 * 1024 * 1024))
  grep -q "sha256 of all $size bytes matches checksum= ($again bytes" \
       "$tmp/d_$d.err" ||
    fail "(d) $d: not a match with $again bytes read again:" \
         "$(grep 'checksum:' "$tmp/d_$d.err")"
done
# backwards_fails NAME PATTERN NBDKIT-ARGS...: the backward reads
# through nbdkit NAME fail at the read at 0, the one that completes the
# object, and nbdkit's log has PATTERN.
backwards_fails ()
{
  local name=$1 pattern=$2 st=0
  shift 2
  start_nbdkit "$name" "$@"
  backwards >"$tmp/$name.out" 2>&1 || st=$?
  stop_nbdkit "$name"
  [ "$st" -eq 3 ] ||
    { cat "$tmp/$name.out" >&2; fail "($name) not the read at 0 failed ($st)"; }
  grep -q "$pattern" "$tmp/$name.err" ||
    fail "($name) nbdkit did not say: $pattern"
}
wrong=$(printf '%s' "$sha256" | tr 0-9a-f 1-9a-f0)
backwards_fails d2 \
  "checksum: the sha256 of the $size bytes read is $sha256, not" \
  -r -v "$PLUGIN" "$url" "checksum=sha256:$wrong"

# (g) nbdcopy splits an image among its workers in regions of 128 MiB
# and reads them at once (two on two cores): the regions after the first
# are spilled, nothing is read twice.  A sparse file of 320 MiB.
truncate -s 320M "$tmp/www/sparse.img"
zeros=$(sha256sum <"$tmp/www/sparse.img" | cut -d' ' -f1)
TMPDIR=$tmp start_nbdkit g -r -v "$PLUGIN" "${url%/*}/sparse.img" \
                        "checksum=sha256:$zeros"
timeout "$client_timeout" nbdcopy "$uri" null:
stop_nbdkit g
grep -q "checksum: the sha256 of all 335544320 bytes matches checksum= (0 " \
     "$tmp/g.err" ||
  fail "(g) not a match with nothing read again: $(grep 'checksum:' \
        "$tmp/g.err")"

# (h)
b64 ()
{
  openssl dgst "-$1" -binary | base64 -w0
}
good=$(b64 sha256 <"$image")
bad=$(head -c 100 /dev/zero | b64 sha256)
other=$(b64 sha512 <"$image")
# QUERY WHAT-NBDKIT-SAYS: nbdkit starts, and says it.
while read -r q says; do
  start_nbdkit h -r -v "$PLUGIN" "${url%/*}/d/disk.img?$q" \
               "checksum=sha256:$sha256"
  stop_nbdkit h
  grep -q "checksum: $says" "$tmp/h.err" ||
    { grep 'checksum' "$tmp/h.err" >&2; fail "(h) $q: not '$says'"; }
done <<EOF
r=sha-256=:$good: the server's Repr-Digest agrees
g=MD5=AAAAAAAAAAAAAAAAAAAAAA==,SHA-256=$good the server's Digest agrees
a=$good the server's x-amz-checksum-sha256 agrees
r=sha-512=:$other: not checked: 0 of
a=$bad-3 not checked: 0 of
EOF
badurl=$(printf '%s' "$bad" | tr '+/' '-_' | tr -d =)
for q in "r=sha-256=:$bad:" "g=sha-256=$bad" "a=$bad" \
         "r=sha-512=:$other:,sha-256=:$bad:" "r=sha-256=:$bad:;p=1" \
         "r=sha-256=:$badurl:"; do
  expect_nbdkit_fails hb -r "$PLUGIN" "${url%/*}/d/disk.img?$q" \
                      "checksum=sha256:$sha256"
  grep -qi "checksum: the server's .* gives the object's sha256 as" \
       "$tmp/hb.err" ||
    { cat "$tmp/hb.err" >&2; fail "(h) $q: not refused for its digest"; }
done
# Digest headers longer than the plugin keeps: a wrong one could be
# among those left out.
filler=$(head -c 3100 /dev/zero | base64 -w0)
expect_nbdkit_fails hc -r "$PLUGIN" \
                    "${url%/*}/d/disk.img?g=unixsum=$filler" \
                    "checksum=sha256:$sha256"
grep -q "checksum: some of the server's digest headers could not be read" \
     "$tmp/hc.err" ||
  { cat "$tmp/hc.err" >&2; fail "(h) long digest headers not refused"; }

# (i) No spill file and reads not pinned (pin-object=false): bytes read
# out of order are read again and compared with the digests kept of the
# bytes served, pinned or not (test-curl-checksum-reread.sh: when they
# differ), so every read succeeds and the digest matches.
TMPDIR=$tmp/no-such-dir start_nbdkit i -r -v "$PLUGIN" "$url" \
  pin-object=false "checksum=sha256:$sha256"
backwards >"$tmp/i.out" 2>&1 ||
  { cat "$tmp/i.out" >&2; fail "(i) the backward reads failed"; }
stop_nbdkit i
grep -q "sha256 of all $size bytes matches checksum= ($((23 * 1024 * 1024)) bytes" \
     "$tmp/i.err" ||
  fail "(i) not a match with 23 MiB read again: $(grep 'checksum:' "$tmp/i.err")"

# (j) Reads scattered into more ranges than the plugin notes (4,096):
# every other 512-byte block of the first 5 MiB, then the rest.  The
# digest goes on (with a wrong checksum, some read fails; with the right
# one, none does, and nbdkit says it matches).
scattered ()
{
  nbdsh -u "$uri" -c '
blk, mib, bad = 512, 1024 * 1024, 0
offs = [k * blk for k in range(1, 5 * mib // blk, 2)] + \
       [k * blk for k in range(0, 5 * mib // blk, 2)] + \
       [k * mib for k in range(5, 24)]
for off in offs:
    try:
        h.pread(mib if off >= 5 * mib else blk, off)
    except nbd.Error:
        bad += 1
print("%d reads failed" % bad)
raise SystemExit(1 if bad else 0)
'
}
for sum in "$wrong" "$sha256"; do
  start_nbdkit j -r -v "$PLUGIN" "$url" "checksum=sha256:$sum"
  st=0
  scattered >"$tmp/j.out" 2>&1 || st=$?
  stop_nbdkit j
  if [ "$sum" = "$wrong" ]; then
    [ "$st" -eq 1 ] ||
      { cat "$tmp/j.out" >&2; fail "(j) no read failed, wrong checksum"; }
  else
    [ "$st" -eq 0 ] || { cat "$tmp/j.out" >&2; fail "(j) a read failed"; }
    grep -q "checksum: the sha256 of all $size bytes matches" "$tmp/j.err" ||
      fail "(j) nbdkit did not say the sha256 matches"
  fi
done

# (e)
start_nbdkit e -r -v "$PLUGIN" "$url" "checksum=sha256:$wrong"
timeout "$client_timeout" nbdinfo --size "$uri" >"$tmp/e.out"
stop_nbdkit e
[ "$(cat "$tmp/e.out")" -eq "$size" ] || fail "(e) nbdinfo: wrong size"
grep -q "checksum: not checked: 0 of $size bytes read in order" \
     "$tmp/e.err" || fail "(e) nbdkit did not say the digest was not checked"
! grep -q "checksum: the" "$tmp/e.err" || fail "(e) a verdict without reads"

# (c) One byte changed on the server, the same size and date.
old=$(od -An -tu1 -j 12345678 -N1 "$image" | tr -d ' ')
touch -r "$image" "$tmp/stamp"
# shellcheck disable=SC2059
printf "$(printf '\\%03o' $((old ^ 255)))" |
  dd of="$image" bs=1 seek=12345678 conv=notrunc status=none
touch -r "$tmp/stamp" "$image"
[ "$(sha256sum <"$image" | cut -d' ' -f1)" != "$sha256" ] ||
  fail "(c) the byte was not changed"
# The copies each under nbdkit --run: nbdkit 1.32 may abort when a
# client hangs up with replies queued (fixed in 1.33.10, "server: Don't
# assert on send if client hangs up early"), as nbdcopy does after a
# failed read; --run gives the client's status.  The clients run
# without the sanitizer nbdkit may be preloaded with (qemu-img's
# coroutines make ASan warn).
for client in 'nbdcopy "$uri" "$tmp/c.img"' \
              'qemu-img convert -f raw "$uri" -O raw "$tmp/c.img"'; do
  st=0
  timeout "$client_timeout" "${NBDKIT[@]}" -r -U - "$PLUGIN" "$url" \
          "checksum=sha256:$sha256" \
          --run "env -u LD_PRELOAD -u ASAN_OPTIONS -u TSAN_OPTIONS $client" \
          2>"$tmp/c.err" || st=$?
  [ "$st" -ne 0 ] || fail "(c) ${client%% *} succeeded on a changed object"
  [ "$st" -ne 124 ] || fail "(c) ${client%% *} hung"
  grep -q "checksum: the sha256 of the $size bytes read is .*, not $sha256 as" \
       "$tmp/c.err" ||
    { cat "$tmp/c.err" >&2; fail "(c) ${client%% *}: no mismatch said"; }
done
# One read at a time, in order: the last fails, and so does any after.
start_nbdkit c -r "$PLUGIN" "$url" "checksum=sha256:$sha256"
nbdsh -u "$uri" -c '
mib = 1024 * 1024
for k in range(23):
    h.pread(mib, k * mib)
for off in (23 * mib, 0):
    try:
        h.pread(mib, off)
    except nbd.Error:
        continue
    raise SystemExit("the read at %d succeeded after the mismatch" % off)
h.shutdown()
' >"$tmp/c3.out" 2>&1 || { cat "$tmp/c3.out" >&2; fail "(c) in order"; }
stop_nbdkit c
grep -q "checksum: the sha256 of the $size bytes read is .*, not $sha256 as" \
     "$tmp/c.err" || fail "(c) nbdkit did not say the digest differs"

# (f)
for bad in "sha1:$sha256" "sha256" "sha256:${sha256:1}" \
           "sha256:${sha256%?}g" "crc32:00000000"; do
  expect_nbdkit_fails f -r "$PLUGIN" "$url" "checksum=$bad"
  grep -q "checksum: " "$tmp/f.err" ||
    { cat "$tmp/f.err" >&2; fail "(f) checksum=$bad: no message"; }
done
expect_nbdkit_fails f2 -r "$PLUGIN" "$url" checksum=bogus \
  "checksum=sha256:$sha256"
grep -q "checksum: expected ALGO:HEX.*'bogus'" "$tmp/f2.err" ||
  { cat "$tmp/f2.err" >&2; fail "(f) checksum=bogus before a good one"; }
start_nbdkit w "$PLUGIN" "$url" "checksum=sha256:$sha256"
st=0
nbdsh -u "$uri" -c 'h.pread(4096, 0)' >"$tmp/w.out" 2>&1 || st=$?
stop_nbdkit w
[ "$st" -ne 0 ] || fail "(f) a writable connection was served"
grep -q "checksum= needs a read-only export" "$tmp/w.err" ||
  fail "(f) no message for the writable connection"
echo "checksum: every case held"
