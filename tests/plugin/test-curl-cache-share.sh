#!/usr/bin/env bash
# test-curl-cache-share.sh: one cache-dir= shared, and the identity that
# decides what is shared.  nginx serves the image at several paths; its
# access log counts the bytes each run made it send (the probe's first
# 8 KiB always go out, so "nothing" is at most 1% of the image).
#  (a) Three nbdkit processes on one empty cache-dir= copy at once with
#      nbdcopy (a rate-limited location, so the copies overlap, which
#      the test checks): each copy is the image's bytes, and nginx sent
#      at most 1.3 times the image in all (a block is fetched once per
#      directory, not once per process: the claims).
#  (b) checksum=sha256:... names the content: a copy through one URL,
#      then one through another URL (another path and another ETag: a
#      second copy of the file with another mtime), both with the same
#      checksum=: the second fetches at most 1% and is exact.  The same
#      URL without checksum= (another key: its path and ETag) shares
#      nothing and fetches it all.  (b4) A URL that serves other bytes
#      under the same checksum=, read in part (no verdict): a later read
#      through the right URL gets the right bytes, not those (blocks are
#      shared only once the digest proved them).  (b6) The same URL
#      serving the other bytes, then replaced by the right ones (a new
#      ETag): its old blocks are not served.  (b5) checksum=md5:
#      not shared (md5 collisions can be made): the second URL fetches
#      it all.
#  (c) A presigned URL whose signature changes between runs: the query
#      keys that only sign (S3's X-Amz-*, Azure's se/sp/sv/sr/sig,
#      Google's X-Goog-*) are not part of the key, so after a first run
#      signed for S3, runs signed again (for S3, Azure, Google) fetch at
#      most 1% each, and there is one object directory.  A query key
#      that names something (?version=2 after ?version=1) or another
#      path to the same file (same size, same ETag) is another object:
#      fetched whole, a directory of its own.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy
requires_nbdsh

size=$((8 * 1024 * 1024 + 999))
big=$((12 * 1024 * 1024))
# /slow/ is limited per request: nbdcopy's reads of 1 MiB take 1/6 s
# each, so three copies of 12 MiB last about a second and overlap.
# /y/ serves a copy of the image with another mtime (another ETag).
start_nginx_named o 'location /slow/ { alias DIR/www/; limit_rate 6m; }
  location /x/ { alias DIR/www/; }
  location /y/ { alias DIR/y/; }
  location /t/ { alias DIR/www/; }'
www=$tmp/nginx-o/www
log=$tmp/nginx-o/access.log
base=http://127.0.0.1:$o_port
make_random_file "$www/big.img" "$big"
make_random_file "$www/disk.img" "$size"
image=$www/disk.img
mkdir -p "$tmp/nginx-o/y"
cp "$image" "$tmp/nginx-o/y/disk.img"
touch -d '2020-01-02 03:04:05' "$tmp/nginx-o/y/disk.img"
chmod -R a+rX "$tmp/nginx-o/y"
sha=$(sha "$image")

# fetched: $fetched is the bytes nginx sent since its log was emptied.
fetched ()
{
  fetched=$(awk '{ s += $5 } END { print s + 0 }' "$log")
}

# run NAME URL PLUGIN-PARAMETERS...: a copy of $image through URL with
# nbdcopy, by a new nbdkit; $fetched is what nginx sent for it, the
# probe included.
run ()
{
  local name=$1 u=$2
  shift 2
  : >"$log"
  start_nbdkit "$name" -r -v "$PLUGIN" "$u" "$@"
  timeout "$client_timeout" nbdcopy "$uri" "$tmp/$name.out" ||
    problem "($name) nbdcopy failed"
  stop_nbdkit "$name"
  cmp -s "$image" "$tmp/$name.out" ||
    problem "($name) the copy differs from the image"
  rm -f "$tmp/$name.out"
  fetched
}

# at_most NAME PERCENT: $fetched is at most PERCENT % of $size.
at_most ()
{
  echo "($1) nginx sent $fetched bytes"
  [ "$fetched" -le $(($2 * size / 100)) ] ||
    problem "($1) nginx sent $fetched bytes, more than $2% of $size"
}

# at_least NAME PERCENT: $fetched is at least PERCENT % of $size.
at_least ()
{
  echo "($1) nginx sent $fetched bytes"
  [ "$fetched" -ge $(($2 * size / 100)) ] ||
    problem "($1) nginx sent $fetched bytes, less than $2% of $size:" \
            "shared what is another object"
}

# objects DIR: $objects is how many object directories DIR holds.
objects ()
{
  objects=$(find "$1" -mindepth 1 -maxdepth 1 -type d \
                 -regextype posix-extended -regex '.*/[0-9a-f]{64}' |
              wc -l)
}

# (a) Three at once on an empty directory.
mkdir -m 700 "$tmp/a"
: >"$log"
for i in 1 2 3; do
  start_nbdkit "a$i" -r "$PLUGIN" "$base/slow/big.img" "cache-dir=$tmp/a"
  eval "uri_a$i=\$uri"
done
pids=()
for i in 1 2 3; do
  eval "u=\$uri_a$i"
  ( t0=$EPOCHREALTIME
    timeout "$client_timeout" nbdcopy "$u" "$tmp/a$i.out"
    echo "$t0 $EPOCHREALTIME" >"$tmp/a$i.times" ) &
  pids+=("$!")
done
for i in 1 2 3; do
  wait "${pids[i - 1]}" || problem "(a) nbdcopy $i failed"
  stop_nbdkit "a$i"
  cmp -s "$www/big.img" "$tmp/a$i.out" ||
    problem "(a) copy $i differs from the image"
done
# The copies overlapped: each started before any ended.
cat "$tmp"/a[123].times >"$tmp/a.times"
awk '{ if ($1 > s) s = $1; if (e == "" || $2 < e) e = $2 }
     END { printf "(a) the copies overlapped for %.2f s\n", e - s
           exit !(s < e) }' "$tmp/a.times" ||
  problem "(a) the copies did not overlap: the test proves nothing"
fetched
echo "(a) nginx sent $fetched bytes for three copies of $big"
awk -v f="$fetched" -v n="$big" \
    'BEGIN { printf "(a) %.2fx the image\n", f / n; exit !(f <= 1.3 * n) }' ||
  problem "(a) nginx sent more than 1.3 times the image"
objects "$tmp/a"
[ "$objects" -eq 1 ] || problem "(a) $objects object directories, not 1"

# (b) checksum= shares between URLs.
run b1 "$base/x/disk.img" "cache-dir=$tmp/b" "checksum=sha256:$sha"
run b2 "$base/y/disk.img" "cache-dir=$tmp/b" "checksum=sha256:$sha"
at_most b2 1
run b3 "$base/y/disk.img" "cache-dir=$tmp/b"
at_least b3 90
# (b4) Other bytes under the same checksum, read in part, then the right
# URL in part: its own bytes.
# first_part NAME URL DIR: the first 2 MiB through URL, with checksum=
# and cache-dir=DIR, into $tmp/NAME.out and compared with the image's
# (0 if the same).
first_part ()
{
  start_nbdkit "$1" -r "$PLUGIN" "$2" "cache-dir=$3" "checksum=sha256:$sha"
  nbdsh -u "$uri" -c "open ('$tmp/$1.out', 'wb').write (h.pread (2097152, 0))" ||
    problem "($1) the read through $2 failed"
  stop_nbdkit "$1"
  head -c 2097152 "$image" | cmp -s - "$tmp/$1.out"
}
make_random_file "$www/wrong.img" "$size"
first_part b4wrong "$base/x/wrong.img" "$tmp/b4" || :
first_part b4disk "$base/x/disk.img" "$tmp/b4" ||
  problem "(b4) the right URL got other bytes: another URL's, kept"
# (b6) One URL, other bytes under checksum=, read in part; then the file
# replaced by the right one (another mtime, so another ETag): its own
# blocks were of the other version, and are not served.
cp "$www/wrong.img" "$www/turn.img"
touch -d '2020-01-01' "$www/turn.img"
first_part b6wrong "$base/x/turn.img" "$tmp/b6" || :
cp "$image" "$www/turn.img"
first_part b6right "$base/x/turn.img" "$tmp/b6" ||
  problem "(b6) the replaced URL served its old version's blocks"
md5=$(md5sum <"$image" | cut -d' ' -f1)
run b5x "$base/x/disk.img" "cache-dir=$tmp/b5" "checksum=md5:$md5"
run b5y "$base/y/disk.img" "cache-dir=$tmp/b5" "checksum=md5:$md5"
at_least b5y 90

# (c) Presigned URLs: the first run signed for S3; then the same path
# signed again for S3 (the keys in another order), and as Azure and
# Google sign: all key the same (their queries have nothing but
# signing keys), so each fetches at most 1% and there is one object.
s3='X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-SignedHeaders=host'
s3+='&X-Amz-Credential=AKIDEXAMPLE%2F20261205%2Fus-east-1%2Fs3%2Faws4_request'
s3a='X-Amz-Date=20261205T100000Z&X-Amz-Expires=3600&X-Amz-Signature=0a1b2c'
s3b='X-Amz-Date=20261205T110000Z&X-Amz-Expires=600&X-Amz-Signature=9f8e7d'
az='sv=2022-11-02&sr=b&sp=r&se=2026-12-06T10%3A00%3A00Z&sig=ZyX%2Fw%3D'
gs='X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Expires=900'
gs+='&X-Goog-Date=20261205T120000Z&X-Goog-Signature=ef01'
run c_s3 "$base/x/disk.img?$s3&$s3a" "cache-dir=$tmp/c"
cases=(
  "s3_again | $s3b&$s3"
  "azure    | $az"
  "gcs      | $gs"
)
for row in "${cases[@]}"; do
  case_row "$row" name q
  run "c_$name" "$base/x/disk.img?$q" "cache-dir=$tmp/c"
  at_most "c_$name" 1
done
objects "$tmp/c"
[ "$objects" -eq 1 ] || problem "(c) $objects object directories, not 1"
run c_v1 "$base/x/disk.img?version=1" "cache-dir=$tmp/c-v"
run c_v2 "$base/x/disk.img?version=2" "cache-dir=$tmp/c-v"
at_least c_v2 90
run c_path "$base/t/disk.img" "cache-dir=$tmp/c-v"
at_least c_path 90
objects "$tmp/c-v"
[ "$objects" -eq 3 ] || problem "(c-v) $objects object directories, not 3"

check_problems
