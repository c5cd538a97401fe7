#!/usr/bin/env bash
# test-curl-cache-fleet.sh: many hosts importing one image need one
# download from the origin when an HTTP cache that stores ranges sits in
# front of it, as the man page's "One download for many hosts" says.
# The front is nginx with proxy_cache and the slice module (the
# configuration the man page gives): it asks the origin for whole 1 MiB
# slices, keeps each under its own key, and cuts the plugin's ranges out
# of them.  The origin is another nginx, whose access log counts the
# bytes it sent.  Three nbdkit processes (no cache-dir=) are the hosts.
#  (a) url= is the front: three nbdcopy started together, each a
#      byte-exact copy; the origin sent at most 1.05 times the image.
#  (b) url= is the origin and proxy= the front (it takes absolute-form
#      requests, so it is a forward proxy for this origin): three copies
#      one after another, the same bounds.
#  (c) Reads with many in flight make the plugin batch ranges into one
#      request; the slice module answers a request for several ranges
#      with 200 and the whole object (it lets nginx's range filter make
#      single ranges only), which the plugin takes as the sign to ask
#      for one range per request from then on: the reads are exact and
#      the origin still sent at most 1.05 times the image.
# Every request for a range the front got was answered 206 from its
# cache or through it, never passed to the origin as it was: the origin
# only ever saw whole slices.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy
requires_nbdsh
nginx -V 2>&1 | grep -q -- --with-http_slice_module ||
  skip "nginx has no slice module"

size=$((16 * 1024 * 1024 + 4321))
start_nginx_named origin
www=$tmp/nginx-origin/www
for f in a b c; do
  make_random_file "$www/$f.img" "$size"
done
origin_log=$tmp/nginx-origin/access.log

# The front, as in the man page, with a log line per request:
#   METHOD RANGE STATUS BODY_BYTES URI CACHE-STATUS
# proxy_cache_lock makes a request for a slice that another request is
# already fetching wait for it rather than fetch it too: without it,
# three hosts that start together fetch the image three times.
_front_conf ()
{
  local dir=$tmp/front
  cat <<EOF
worker_processes 1;
pid $dir/nginx.pid;
error_log $tmp/front-error.log;
events { worker_connections 256; }
http {
  log_format front '\$request_method \$http_range \$status '
                   '\$body_bytes_sent \$uri \$upstream_cache_status';
  access_log $tmp/front.log front;
  client_body_temp_path $dir/tmp; proxy_temp_path $dir/tmp;
  fastcgi_temp_path $dir/tmp; uwsgi_temp_path $dir/tmp;
  scgi_temp_path $dir/tmp;
  proxy_cache_path $dir/cache keys_zone=images:1m max_size=1g;
  server {
    listen 127.0.0.1:$p;
    location = /__ready { access_log off; return 204; }
    location / {
      slice 1m;
      proxy_cache images;
      proxy_cache_key \$uri\$is_args\$args\$slice_range;
      proxy_set_header Range \$slice_range;
      proxy_cache_valid 200 206 1h;
      proxy_cache_lock on;
      proxy_cache_lock_timeout 30s;
      proxy_pass http://127.0.0.1:$origin_port;
    }
  }
}
EOF
}
mkdir -p "$tmp/front/tmp" "$tmp/front/cache"
_nginx_run front "$tmp/front" "$tmp/front.log" _front_conf
front_port=$_nginx_port

# sent NAME: $sent is the bytes the origin sent for NAME.img, $ratio
# that over the image's size (two decimals).
sent ()
{
  sent=$(awk -v u="/$1.img" '$6 == u { s += $5 } END { print s + 0 }' \
             "$origin_log")
  ratio=$(awk -v s="$sent" -v n="$size" 'BEGIN { printf "%.2f", s / n }')
}

# only_slices NAME: every GET the origin got for NAME.img asked for one
# whole slice (bytes=K*1M-(K+1)*1M-1) and was answered 206.
only_slices ()
{
  awk -v u="/$1.img" '
    $6 != u { next }
    $2 != "GET" { print "not a GET: " $0; bad++; next }
    {
      if (split(substr($3, 7), ab, "-") != 2 || $3 !~ /^bytes=/ ||
          ab[1] % 1048576 != 0 || ab[2] - ab[1] != 1048575) {
        print "not a slice: " $0; bad++
      }
      if ($4 != 206) { print "not answered 206: " $0; bad++ }
    }
    END { exit bad > 0 }' "$origin_log" >"$tmp/slices.out" || {
    cat "$tmp/slices.out" >&2
    problem "($1) the origin got requests that are not the front's slices"
  }
}

# judge NAME: the copies $tmp/NAME-*.out are the image's bytes and the
# origin sent at most 1.05 times the image.
judge ()
{
  local name=$1 f
  for f in "$tmp/$name"-*.out; do
    cmp -s "$www/$name.img" "$f" ||
      problem "($name) $(basename "$f") differs from the image"
  done
  sent "$name"
  echo "($name) the origin sent $sent bytes, ${ratio}x the image"
  awk -v s="$sent" -v n="$size" 'BEGIN { exit !(s <= 1.05 * n) }' ||
    problem "($name) the origin sent ${ratio}x the image (at most 1.05x)"
  only_slices "$name"
}

# (a) Three hosts at once, url= the front.
for i in 1 2 3; do
  start_nbdkit "a$i" -r "$PLUGIN" "http://127.0.0.1:$front_port/a.img"
  eval "uri_a$i=\$uri"
done
pids=()
for i in 1 2 3; do
  eval "u=\$uri_a$i"
  timeout "$client_timeout" nbdcopy "$u" "$tmp/a-$i.out" &
  pids+=("$!")
done
for i in 1 2 3; do
  wait "${pids[i - 1]}" || problem "(a) nbdcopy $i failed"
  stop_nbdkit "a$i"
done
judge a

# (b) Three hosts one after another, proxy= the front.
for i in 1 2 3; do
  start_nbdkit "b$i" -r "$PLUGIN" "http://127.0.0.1:$origin_port/b.img" \
               "proxy=http://127.0.0.1:$front_port"
  timeout "$client_timeout" nbdcopy "$uri" "$tmp/b-$i.out" ||
    problem "(b) nbdcopy $i failed"
  stop_nbdkit "b$i"
done
grep -q "^GET .* /b.img HIT\$" "$tmp/front.log" ||
  problem "(b) the front served no read of b.img from its cache"
judge b

# (c) Reads with up to 64 in flight, from two hosts one after the other:
# the first host's batch of ranges comes back whole (200), and the
# plugin asks for single ranges from then on.
for i in 1 2; do
  start_nbdkit "c$i" -r -v "$PLUGIN" "http://127.0.0.1:$front_port/c.img"
  random_reads "$uri" "$www/c.img" 400
  stop_nbdkit "c$i"
done
multi=$(grep -c "^GET bytes=[0-9-]*,.* /c.img " "$tmp/front.log" || :)
if [ "$multi" -gt 0 ]; then
  grep -q "^GET bytes=[0-9-]*,.* 200 [0-9]* /c.img " "$tmp/front.log" ||
    problem "(c) the front answered a request for several ranges with 206"
  cat "$tmp/c1.err" "$tmp/c2.err" |
    grep -q "answered with HTTP 200: asking for one range per request" ||
    problem "(c) nbdkit did not go on with one range per request"
fi
echo "(c) $multi requests for several ranges reached the front"
sent c
echo "(c) the origin sent $sent bytes, ${ratio}x the image"
awk -v s="$sent" -v n="$size" 'BEGIN { exit !(s <= 1.05 * n) }' ||
  problem "(c) the origin sent ${ratio}x the image (at most 1.05x)"
only_slices c

# Every range the front was asked for was answered 206 (but the
# requests for several ranges of (c), answered 200 by design).
awk '$1 == "GET" && $2 !~ /,/ && $3 != 206 { print; bad++ }
     END { exit bad > 0 }' "$tmp/front.log" >"$tmp/front-bad.out" || {
  cat "$tmp/front-bad.out" >&2
  problem "the front answered a single range with another status than 206"
}

check_problems
