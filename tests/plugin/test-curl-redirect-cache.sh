#!/usr/bin/env bash
# test-curl-redirect-cache.sh: url= answers 302 to an image on another
# origin, and the plugin follows that redirect once: the front server
# sees a single request during start-up and a whole copy (by nbdcopy,
# then by qemu-img convert), and every read goes straight to the image's
# origin.  With redirect-cache=false every GET asks url= first again, so
# the front answers one GET per GET the image's origin serves.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy
requires qemu-img --version

# A multiple of 512 (qemu-img rounds an export up to it), a few MiB so
# that a copy takes many reads.
size=$((4 * 1024 * 1024 + 5 * 512))
serve_image "$size"
start_nginx_named front "location = /disk.img {
      return 302 http://127.0.0.1:$port/disk.img;
    }"
front_url=http://127.0.0.1:$front_port/disk.img
front_log=$tmp/nginx-front.log

# count LOG ERE: the lines of LOG that match.
count ()
{
  grep -cE -- "$2" "$1" || :
}

# copy_with NAME CLIENT PLUGIN-ARGS...: a whole copy by CLIENT (nbdcopy
# or qemu-img) through nbdkit from the front's URL, compared with the
# image; both servers' logs of it in $tmp/NAME-front.txt and
# $tmp/NAME-image.txt.
copy_with ()
{
  local name=$1 client=$2
  shift 2
  : >"$front_log"
  : >"$tmp/access.log"
  # readahead=false: the counts below are of the copy's own reads.  On
  # a small image a copy has few reads in flight, so read-ahead may
  # start, and its last GET may be cut when nbdkit stops (nginx then
  # logs 499); test-curl-readahead-redirect.sh covers read-ahead
  # through a redirect.
  start_nbdkit "$name" -r -v "$PLUGIN" "$front_url" readahead=false "$@"
  case $client in
    nbdcopy)
      timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img" ;;
    qemu-img)
      timeout "$client_timeout" qemu-img convert -f raw "$uri" \
              -O raw "$tmp/out.img" ;;
  esac
  stop_nbdkit "$name"
  assert_same_file "$image" "$tmp/out.img"
  rm -f "$tmp/out.img"
  cp "$front_log" "$tmp/$name-front.txt"
  cp "$tmp/access.log" "$tmp/$name-image.txt"
}

# cached NAME: the front saw one request (a 302 to a GET), the image's
# origin served the copy with ranged GETs and nothing else, and the
# plugin said that reads go there directly.
cached ()
{
  local name=$1 front image
  front=$(wc -l <"$tmp/$name-front.txt")
  [ "$front" -eq 1 ] &&
    [ "$(count "$tmp/$name-front.txt" "^http $front_port GET /disk.img 302 ")" \
        -eq 1 ] || {
    cat "$tmp/$name-front.txt" >&2
    fail "$name: the front saw $front requests, not one GET"
  }
  image=$(count "$tmp/$name-image.txt" '^[0-9]+ GET bytes=[0-9-]+ 206 ')
  [ "$image" -ge 2 ] &&
    [ "$image" -eq "$(wc -l <"$tmp/$name-image.txt")" ] || {
    cat "$tmp/$name-image.txt" >&2
    fail "$name: the image's origin served $image ranged GETs, and" \
         "$(wc -l <"$tmp/$name-image.txt") requests in all"
  }
  grep -qF "redirects to http://127.0.0.1:$port: reads go there directly" \
       "$tmp/$name.err" || fail "$name: no debug line about the target"
  echo "$name: front 1 request, image origin $image GETs"
}

copy_with nbd nbdcopy
cached nbd
copy_with qemu qemu-img
cached qemu

# redirect-cache=false: one redirect per GET.  HEAD is asked only when
# the probe's GET has no validator, which nginx always sends.
copy_with nocache nbdcopy redirect-cache=false
front=$(count "$tmp/nocache-front.txt" "^http $front_port GET /disk.img 302 ")
image=$(count "$tmp/nocache-image.txt" '^[0-9]+ GET bytes=[0-9-]+ 206 ')
all=$(wc -l <"$tmp/nocache-front.txt")
[ "$front" -eq "$all" ] || {
  cat "$tmp/nocache-front.txt" >&2
  fail "nocache: the front saw $all requests, $front of them GETs"
}
[ "$image" -ge 2 ] && [ "$front" -ge $((image - 1)) ] &&
  [ "$front" -le $((image + 1)) ] || {
  cat "$tmp/nocache-front.txt" "$tmp/nocache-image.txt" >&2
  fail "nocache: the front saw $front GETs for the image's $image"
}
! grep -qF "reads go there directly" "$tmp/nocache.err" ||
  fail "nocache: the target was remembered with redirect-cache=false"
echo "nocache: front $front GETs, image origin $image GETs"
