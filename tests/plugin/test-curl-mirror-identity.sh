#!/usr/bin/env bash
# test-curl-mirror-identity.sh: what proves a mirror the object at url=,
# and what holds it to that object once it serves.  An ETag is an
# identity of a version at one URL, not of content (nginx's is the
# file's mtime and size), checksum= alone proves nothing of the bytes a client that
# never reads everything gets, and a mirror proven by a digest is pinned
# to it.  Image A (url=) and B (another of the same size) are served by
# nginx over HTTP, each server its own origin.
#  (a) A mirror at another origin that holds B with A's mtime, so
#      nginx's ETag of it is url='s: refused, with a message that says
#      why and names the ways out; nbdcopy gets A's bytes exactly.  With
#      mirror-same-etag=true it is taken (the documented risk).  B at
#      another path of url='s own server (the same origin, the same
#      ETag) is refused too.
#  (b) A mirror that holds B with no validator, given checksum=
#      (A's): refused; 300 random reads through nbdsh (that never read
#      every byte) get A's bytes.
#  (c) The same mirror with a TMPDIR that cannot take the spill file,
#      nbdcopy reading out of order: the copy is A's, and nbdkit's
#      verdict matches.
#  (d) A mirror that states checksum='s digest in Repr-Digest, no
#      validator: taken, and its reads pinned to that digest.
#  (e) A mirror proven by a digest alone (a fault server: Repr-Digest,
#      no ETag, no Last-Modified) whose object is replaced by another
#      of its size once proven, before its first read: no read gives
#      the other bytes, the copy is A's, and nbdkit drops the mirror.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy
requires_nbdsh

size=$((32 * 1024 * 1024))
make_random_file "$tmp/A.img" "$size"
make_random_file "$tmp/B.img" "$size"
touch -r "$tmp/A.img" "$tmp/B.img"
sha=$(sha "$tmp/A.img")
b64=$(openssl dgst -sha256 -binary <"$tmp/A.img" | base64 -w0)

# url=: A, and B with A's mtime at /copy/ (url='s origin); a mirror at
# another origin with B and A's mtime; one with B and no validator; one
# with B, no validator and A's digest stated (a lie: only checksum=
# could catch it, at the end).
start_nginx_named a 'location /slow/ { alias DIR/www/; limit_rate 4m;
    add_header Repr-Digest "sha-256=:'"$b64"':" always; }'
cp -p "$tmp/A.img" "$tmp/nginx-a/www/disk.img"
mkdir -p "$tmp/nginx-a/www/copy"
cp -p "$tmp/B.img" "$tmp/nginx-a/www/copy/disk.img"
start_nginx_named b
cp -p "$tmp/B.img" "$tmp/nginx-b/www/disk.img"
start_nginx_named c 'etag off; add_header Last-Modified "";'
cp -p "$tmp/B.img" "$tmp/nginx-c/www/disk.img"
start_nginx_named d 'etag off; add_header Last-Modified "";
    add_header Repr-Digest "sha-256=:'"$b64"':" always;'
cp -p "$tmp/A.img" "$tmp/nginx-d/www/disk.img"
a_url=http://127.0.0.1:$a_port/disk.img
b_url=http://127.0.0.1:$b_port/disk.img
c_url=http://127.0.0.1:$c_port/disk.img
d_url=http://127.0.0.1:$d_port/disk.img

etag_of ()
{
  curl -sI "$1" | tr -d '\r' | sed -n 's/^[Ee][Tt]ag: //p'
}
[ -n "$(etag_of "$a_url")" ] && [ "$(etag_of "$a_url")" = "$(etag_of "$b_url")" ] ||
  fail "nginx gave A and B different ETags: $(etag_of "$a_url") $(etag_of "$b_url")"

# decided NAME URL: nbdkit NAME has said whether it uses the mirror URL.
decided ()
{
  wait_log "$tmp/$1.err" "mirror $2: \(the same object\|not used\)"
}

# gets NAME: the mirror NAME's GETs of disk.img.
gets ()
{
  grep -c 'GET .* /disk.img' "$tmp/nginx-$1/access.log" || true
}

# (a)
start_nbdkit a -r -v "$PLUGIN" "$a_url" "mirror=$b_url"
decided a "$b_url"
st=0
timeout "$client_timeout" nbdcopy "$uri" "$tmp/a.img" || st=$?
stop_nbdkit a
[ "$st" -eq 0 ] || fail "(a) the copy failed ($st)"
cmp -s "$tmp/A.img" "$tmp/a.img" ||
  fail "(a) the copy is not A: $(cmp -l "$tmp/A.img" "$tmp/a.img" | wc -l) bytes differ ($(gets b) GETs at the mirror)"
rm -f "$tmp/a.img"
grep -q "mirror $b_url: not used: it has url='s strong ETag .* but at another URL" \
     "$tmp/a.err" || fail "(a) the mirror was not refused for its ETag"
assert_grep_i "$tmp/a.err" "Repr-Digest" "checksum=" "mirror-same-etag=true"
[ "$(gets b)" -eq 1 ] || fail "(a) the refused mirror served $(gets b) GETs"

start_nbdkit a2 -r -v "$PLUGIN" "$a_url" "mirror=$b_url" mirror-same-etag=true
decided a2 "$b_url"
stop_nbdkit a2
grep -q "mirror $b_url: the same object (the same strong ETag, with mirror-same-etag=true)" \
     "$tmp/a2.err" || fail "(a) mirror-same-etag=true: the mirror was not taken"

start_nbdkit a3 -r -v "$PLUGIN" "$a_url" \
  "mirror=http://127.0.0.1:$a_port/copy/disk.img"
decided a3 "http://127.0.0.1:$a_port/copy/disk.img"
timeout "$client_timeout" nbdcopy "$uri" "$tmp/a3.img" ||
  fail "(a) the copy with B at url='s origin as a mirror failed"
stop_nbdkit a3
assert_same_file "$tmp/A.img" "$tmp/a3.img"
rm -f "$tmp/a3.img"
grep -q "mirror http://127.0.0.1:$a_port/copy/disk.img: not used: it has url='s strong ETag" \
     "$tmp/a3.err" || fail "(a) B at url='s origin was not refused"

# (b)
start_nbdkit b -r -v "$PLUGIN" "$a_url" "mirror=$c_url" "checksum=sha256:$sha"
decided b "$c_url"
random_reads "$uri" "$tmp/A.img" 300
stop_nbdkit b
grep -q "mirror $c_url: not used: no proof it is the same object: .*checksum= alone" \
     "$tmp/b.err" || fail "(b) the mirror was not refused"

# (c)
TMPDIR=$tmp/no-such-dir start_nbdkit c -r -v "$PLUGIN" "$a_url" \
  "mirror=$c_url" "checksum=sha256:$sha"
decided c "$c_url"
st=0
timeout "$client_timeout" nbdcopy "$uri" "$tmp/c.img" || st=$?
stop_nbdkit c
cmp -s "$tmp/A.img" "$tmp/c.img" ||
  fail "(c) the copy (status $st) is not A: $(cmp -l "$tmp/A.img" "$tmp/c.img" | wc -l) bytes differ; nbdkit: $(grep 'checksum:' "$tmp/c.err")"
rm -f "$tmp/c.img"
[ "$st" -eq 0 ] || fail "(c) the copy failed ($st)"
grep -q "mirror $c_url: not used" "$tmp/c.err" || fail "(c) the mirror was used"
grep -q "checksum: the sha256 of all $size bytes matches" "$tmp/c.err" ||
  fail "(c) no verdict: $(grep 'checksum:' "$tmp/c.err")"

# (d)
start_nbdkit d -r -v "$PLUGIN" "$a_url" "mirror=$d_url" "checksum=sha256:$sha"
decided d "$d_url"
timeout "$client_timeout" nbdcopy "$uri" "$tmp/d.img" || fail "(d) the copy failed"
stop_nbdkit d
assert_same_file "$tmp/A.img" "$tmp/d.img"
rm -f "$tmp/d.img"
grep -q "mirror $d_url: the same object (its digest is checksum='s), reads pinned, and to its digest" \
     "$tmp/d.err" || fail "(d) the mirror stating checksum='s digest was not taken and pinned"

# (e) url= at 4 MB/s a connection (its Repr-Digest from /slow/), so that
# the mirror is given reads.  The mirror's file is replaced by B (a new
# mtime) once nbdkit has proven it, before the copy.
cp "$tmp/A.img" "$tmp/fm.img"
"$PYTHON" "$helpers_srcdir/fault-server.py" --mode digest-only \
  --file "$tmp/fm.img" --log "$tmp/fm.log" --port-file "$tmp/fm.port" \
  </dev/null >"$tmp/fm.out" 2>&1 &
await_port_file $! "$tmp/fm.port" "$tmp/fm.out" fm
fm_url=http://127.0.0.1:$(cat "$tmp/fm.port")/disk.img
# repr_digest: what the mirror states now (a HEAD, which also computes
# the digest of a new version before a read waits for it).
repr_digest ()
{
  curl -sI "$fm_url" | tr -d '\r' | sed -n 's/^Repr-Digest: //p'
}
[ "$(repr_digest)" = "sha-256=:$b64:" ] || fail "(e) the mirror states $(repr_digest)"
start_nbdkit e -r -v "$PLUGIN" "http://127.0.0.1:$a_port/slow/disk.img" \
  "mirror=$fm_url" connections=4
decided e "$fm_url"
grep -q "mirror $fm_url: the same object (the same digest" "$tmp/e.err" ||
  fail "(e) the mirror was not taken on its digest"
cp "$tmp/B.img" "$tmp/fm.img.new"
mv "$tmp/fm.img.new" "$tmp/fm.img"
[ "$(repr_digest)" != "sha-256=:$b64:" ] || fail "(e) the mirror was not replaced"
: >"$tmp/fm.log"
st=0
timeout "$client_timeout" nbdcopy "$uri" "$tmp/e.img" || st=$?
stop_nbdkit e
grep -q "GET .*status=206" "$tmp/fm.log" ||
  fail "(e) the mirror was given no read"
cmp -s "$tmp/A.img" "$tmp/e.img" ||
  fail "(e) the copy (status $st) is not A: $(cmp -l "$tmp/A.img" "$tmp/e.img" | wc -l) bytes differ, $(grep -c 'status=206' "$tmp/fm.log") GETs at the mirror"
rm -f "$tmp/e.img"
[ "$st" -eq 0 ] || fail "(e) the copy failed ($st)"
# Dropped for its answer's digest, or (a busy machine) first for being
# slow to answer: either way no byte of it was taken, as the copy shows.
grep -q "source $fm_url: .*\(changed since it was proven\|too slow\).*: its reads go to the other sources" \
     "$tmp/e.err" || fail "(e) nbdkit did not say the mirror was dropped"
grep -q "mirror $fm_url: the same object (the same digest), reads pinned, and to its digest" \
     "$tmp/e.err" || fail "(e) nbdkit did not say the mirror is pinned to its digest"
echo "mirror identity: every case held"
