#!/usr/bin/env bash
# test-curlpipe-upload-size.sh: a body from a pipe goes chunked unless
# its size is given: --upload-size N, or a -H 'Content-Length: N', sends
# "Content-Length: N" and no Transfer-Encoding (nginx's log shows what
# it received), and the N bytes arrive; a pipe that ends before N bytes
# is an error (non-zero, promptly), not a short upload; and a pipe that
# has more than N bytes is an error too (26, a read error, as for too
# few), with no more than N bytes sent on the connection: the extra
# bytes must not reach the server (as the start of a next request).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

start_nginx_put
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

# 1500 bytes for --upload-size 1000.  The raw server logs how many bytes
# came after the request head on the connection ("count N") once it has
# been quiet for 1 s (at most 5 s), then answers.  (curlpipe may also
# refuse before it connects, or before it sends the request head: then
# the server received nothing of the body.)
start_raw_server
st=0
head -c 1500 "$tmp/in" |
  timeout 15 "$CURLPIPE" -s --upload-size 1000 \
    "http://127.0.0.1:$raw_port/count" >"$tmp/out" 2>"$tmp/err" || st=$?
if [ "$st" -ne 26 ]; then
  problem "--upload-size 1000 with 1500 bytes: exit status $st (expected" \
          "26); stderr: $(cat "$tmp/err")"
fi
# Every connection accepted ("accept") has its line, and a connection
# that curlpipe made before it exited has been accepted within 1 s.
for ((n = 0; n < 100; n++)); do
  accepted=$(grep -c '^accept$' "$tmp/raw.log" 2>/dev/null || :)
  ended=$(grep -cv '^accept$' "$tmp/raw.log" 2>/dev/null || :)
  accepted=${accepted:-0} ended=${ended:-0}
  [ "$accepted" -eq 0 ] && [ "$n" -ge 10 ] && break
  [ "$accepted" -gt 0 ] && [ "$ended" -ge "$accepted" ] && break
  sleep 0.1
done
got=$(sed -n 's/^count //p' "$tmp/raw.log" 2>/dev/null | sort -n | tail -1)
if [ "$accepted" -gt 0 ] && [ "$ended" -lt "$accepted" ]; then
  problem "--upload-size 1000 with 1500 bytes: the server did not finish" \
          "reading within 10 s"
elif [ -n "$got" ] && [ "$got" -gt 1000 ]; then
  problem "--upload-size 1000 with 1500 bytes: the server received $got" \
          "bytes after the request head (expected at most 1000)"
fi

check_problems
