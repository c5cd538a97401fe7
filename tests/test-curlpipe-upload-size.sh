#!/usr/bin/env bash
# test-curlpipe-upload-size.sh: a body from a pipe goes chunked unless
# its size is given: --upload-size N, or a -H 'Content-Length: N', sends
# "Content-Length: N" and no Transfer-Encoding (nginx's log shows what
# it received), and the N bytes arrive; a pipe that ends before N bytes
# is an error (non-zero, promptly), not a short upload.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")}/functions.sh"
requires_curlpipe

start_nginx 'location /put/ { dav_methods PUT; alias DIR/www/; }'
chmod 777 "$tmp/www"
url=http://127.0.0.1:$port/put
size=$((3 * 1024 * 1024 + 5))
make_random_file "$tmp/in" "$size"

# Log: CONNECTION METHOD RANGE STATUS BODY_BYTES URI te=TE cl=CL
framing ()
{
  awk -v uri="/put/$1" '$2 == "PUT" && $6 == uri { print $4, $7, $8 }' \
      "$tmp/access.log"
}

# sized NAME ARGS...: the file through a pipe to $url/NAME with
# curlpipe -sf ARGS, sent with its length.
sized ()
{
  local name=$1 st=0
  shift
  cat "$tmp/in" | curlpipe -sf "$@" "$url/$name" 2>"$tmp/err" || st=$?
  if [ "$st" -ne 0 ]; then
    problem "$*: exit status $st: $(cat "$tmp/err")"
    return
  fi
  cmp -s "$tmp/in" "$tmp/www/$name" || problem "$*: the upload differs"
  [ "$(framing "$name")" = "201 te=- cl=$size" ] ||
    problem "$*: expected one PUT with Content-Length $size, nginx's log" \
            "says '$(framing "$name")'"
}

sized upload-size --upload-size "$size"
sized header -H "Content-Length: $size"

# Half of what was announced, then the end of standard input.
st=0
head -c 1000 "$tmp/in" |
  timeout 15 "$CURLPIPE" -sf --upload-size 2000 "$url/short" \
    2>"$tmp/err" || st=$?
if [ "$st" -eq 0 ]; then
  problem "--upload-size 2000 with 1000 bytes: exit status 0"
elif [ "$st" -eq 124 ]; then
  problem "--upload-size 2000 with 1000 bytes: still running after 15 s"
elif [ "$st" -eq 2 ]; then
  problem "--upload-size 2000 with 1000 bytes: exit status 2:" \
          "$(cat "$tmp/err")"
fi

check_problems
