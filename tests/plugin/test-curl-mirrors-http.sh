#!/usr/bin/env bash
# test-curl-mirrors-http.sh: mirrors over plain HTTP, where each request
# in flight is a connection of its own (HTTP/1.1).  Two nginx servers of
# one image, url= and a mirror, each 100 ms away behind helpers/linkem
# on a link of 200 Mbit/s, each with its own access log, and each
# stating the image's sha-256 in Repr-Digest (the mirror's proof), read
# with connections=4.  The pool once held connections= for all sources
# together, so that two mirrors kept no more in flight than url= alone:
# in bench/mirrors the mirror then looked slower than url= and was
# given ever less (10% of the bytes at 100 ms).
#  (a) nbdcopy copies the image byte for byte.
#  (b) Each server sent at least a quarter of the image's bytes
#      ($body_bytes_sent of its GETs): both links carried the copy.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy

rtt=100
mbit=200
conns=4
size=$((32 * 1024 * 1024))
make_random_file "$tmp/image.src" "$size"
dig="add_header Repr-Digest 'sha-256=:$(openssl dgst -sha256 -binary \
  <"$tmp/image.src" | base64 -w0):' always;"
# No make_cert: plain HTTP only.
serve_image "$size" "$dig"
cp -p "$tmp/image.src" "$image"
start_nginx_named m1 "$dig"
cp -p "$image" "$tmp/nginx-m1/www/disk.img"

start_linkem "$port" "$rtt" --rate "$mbit"
url=http://127.0.0.1:$linkem_port/disk.img
start_linkem "$m1_port" "$rtt" --rate "$mbit"
m1_url=http://127.0.0.1:$linkem_port/disk.img

start_nbdkit a -r -v "$PLUGIN" "$url" "mirror=$m1_url" connections=$conns \
  timeout=20
wait_log "$tmp/a.err" "mirror $m1_url: the same object"

# (a)
t0=$EPOCHREALTIME
timeout "$client_timeout" nbdcopy "$uri" "$tmp/copy.img" ||
  { tail -20 "$tmp/a.err" >&2; fail "(a) nbdcopy failed"; }
echo "(a) copied in $(seconds_since "$t0") s"
stop_nbdkit a
assert_same_file "$image" "$tmp/copy.img"

# (b) served LOG: the body bytes of the image's GETs in an access log.
served ()
{
  awk '$2 == "GET" && $6 == "/disk.img" { n += $5 } END { print n + 0 }' "$1"
}
url_bytes=$(served "$tmp/access.log")
m1_bytes=$(served "$tmp/nginx-m1/access.log")
echo "(b) url= served $url_bytes bytes, the mirror $m1_bytes, of $size"
grep 'source .*requests' "$tmp/a.err" || :
for b in "$url_bytes" "$m1_bytes"; do
  [ "$b" -ge $((size / 4)) ] ||
    fail "(b) a source served $b bytes, less than a quarter of $size: url= $url_bytes, the mirror $m1_bytes"
done
