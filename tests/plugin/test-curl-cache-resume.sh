#!/usr/bin/env bash
# test-curl-cache-resume.sh: a copy through cache-dir= that is killed
# (kill -9 of nbdkit) half way and run again fetches only what it had
# not fetched.  nginx serves a 32 MiB image and answers at most 16
# requests a second (limit_req: the requests wait their turn, so a
# request's bytes are either all sent at once or not at all, and nginx's
# access log grows request by request); a copy takes about two seconds.
#  - nbdcopy (one connection, 4 reads in flight) copies the export of a
#    fresh nbdkit -r with an empty cache-dir=; once nginx has logged half
#    the image as sent, nbdkit is killed with SIGKILL.
#  - Every *.blk file the kill left is whole (they are renamed into place
#    whole; half-written ones are *.tmp).
#  - A new nbdkit on the same cache-dir= copies the export: byte-exact,
#    in far less than the 5 s a claim is waited for (the killed
#    process's claims are stale), and the origin sends at most what the
#    first run had not, plus 2% of the image, plus what was in flight at
#    the kill: the bytes of requests the kill cut (as nginx logged them)
#    and 4 MiB, nbdcopy's 4 reads of one 1 MiB block each, whose bytes
#    may have left nginx but not reached the cache when nbdkit died.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy
requires nginx
nginx -V 2>&1 | grep -q -- --with-http_stub_status_module ||
  skip "nginx has no stub_status module"

mib=$((1024 * 1024))
size=$((32 * mib))
blk_size=$((4096 + mib))
inflight=4                      # nbdcopy's reads in flight (--requests)
allow=$((64 * 1024))            # the two probes' answers, and a little more

# start_nginx, with the requests for /paced/ held to 16 a second by
# limit_req (whose zone is declared at the http level, where
# start_nginx's EXTRA does not reach) and nginx's count of open
# connections at /status.
_paced_conf ()
{
  # shellcheck disable=SC2016
  _nginx_conf |
    sed 's|^http {|http {\n  limit_req_zone $server_port zone=paced:1m rate=16r/s;|'
}
_nginx_extra="location /paced/ { alias $tmp/www/;
      limit_req zone=paced burst=1000; }
    location = /status { access_log off; stub_status; }"
mkdir -p "$tmp/www" "$tmp/nginx-tmp"
_nginx_run nginx "$tmp" "$tmp/access.log" _paced_conf
port=$_nginx_port
image=$tmp/www/disk.img
make_random_file "$image" "$size"
url=http://127.0.0.1:$port/paced/disk.img
dir=$tmp/cache

# sent: what nginx sent of disk.img since $tmp/access.log was emptied.
sent ()
{
  awk '$2 == "GET" && $6 ~ /disk\.img/ { n += $5 } END { print n + 0 }' \
      "$tmp/access.log"
}

# cut: the bytes nginx sent for requests whose answer it could not
# finish (fewer body bytes than the ranges asked).
cut ()
{
  awk '$2 == "GET" && $6 ~ /disk\.img/ {
         n = split(substr($3, 7), r, ","); want = 0
         for (i = 1; i <= n; i++) { split(r[i], ab, "-"); want += ab[2] - ab[1] + 1 }
         if ($5 < want) c += $5
       }
       END { print c + 0 }' "$tmp/access.log"
}

# The first copy, killed half way.
: >"$tmp/access.log"
start_nbdkit r1 -r -v "$PLUGIN" "$url" "cache-dir=$dir"
killed=$nbdkit_pid
timeout "$client_timeout" nbdcopy --connections=1 --requests=$inflight \
        "$uri" "$tmp/r1.img" 2>"$tmp/copy1.err" &
copy=$!
_pids+=("$copy")
for ((i = 0; i < 400; i++)); do
  [ "$(sent)" -lt $((size / 2)) ] || break
  _alive "$copy" || break
  sleep 0.05
done
_alive "$copy" || fail "the first copy ended before nbdkit was killed"
kill -KILL "$killed"
st=0
wait "$copy" || st=$?
_forget_pid "$copy"
[ "$st" -ne 0 ] || fail "nbdcopy succeeded though nbdkit was killed"
stop_pid "$killed"
# nginx logs each request when it ends: wait until the killed
# nbdkit's connections are all closed (only /status's own is left).
for ((i = 0; i < 50; i++)); do
  open=$(curl -s -m 2 "http://127.0.0.1:$port/status" |
           awk '/^Active connections/ { print $3 }')
  [ "$open" != 1 ] || break
  sleep 0.1
done
[ "$open" = 1 ] || fail "nginx still has $open connections open after the kill"
first=$(sent) cut=$(cut)
cp "$tmp/access.log" "$tmp/access-r1.log"
blks=$(find "$dir" -name '*.blk' -type f | wc -l)
echo "killed after $first bytes sent ($cut of them cut), $blks blocks on disk"
if [ "$first" -lt $((size * 3 / 10)) ] || [ "$first" -gt $((size * 8 / 10)) ]
then
  fail "the kill was not half way: $first of $size bytes sent"
fi
[ "$blks" -ge 1 ] || problem "the killed copy left no block on disk"
wrong=$(find "$dir" -name '*.blk' -type f -printf '%s\n' |
          grep -cvx "$blk_size" || :)
[ "$wrong" -eq 0 ] || problem "$wrong block files the kill left are not whole"

# The copy again, on the same directory.
: >"$tmp/access.log"
start_nbdkit r2 -r -v "$PLUGIN" "$url" "cache-dir=$dir"
t0=$EPOCHREALTIME
st=0
timeout "$client_timeout" nbdcopy --connections=1 --requests=$inflight \
        "$uri" "$tmp/r2.img" || st=$?
secs=$(seconds_since "$t0")
stop_nbdkit r2
second=$(sent)
cp "$tmp/access.log" "$tmp/access-r2.log"
left=$((size - first))
limit=$((left + size / 50 + cut + inflight * mib + allow))
echo "the second copy took $secs s; the origin sent $second bytes," \
     "$left were left (limit $limit)"
grep 'cache: .* blocks on disk' "$tmp/r2.err" || :
[ "$st" -eq 0 ] || problem "the second copy failed ($st)"
cmp -s "$image" "$tmp/r2.img" ||
  problem "the second copy differs: $(cmp "$image" "$tmp/r2.img" 2>&1 | head -1)"
grep 'read chain:' "$tmp/r2.err" | grep -qw cache ||
  problem "no cache in the read chain: $(grep -m1 'read chain:' "$tmp/r2.err")"
[ "$second" -le "$limit" ] ||
  problem "the second copy fetched $second bytes, more than $limit"
awk -v s="$secs" 'BEGIN { exit !(s < 4.5) }' ||
  problem "the second copy took $secs s: the killed nbdkit's claims held it up"

check_problems
echo "cache-resume: the copy resumed"
