#!/usr/bin/env bash
# test-curlpipe-http-default.sh: curlpipe speaks HTTP/1.1 unless told
# --http2, for https too, even to a server that offers h2 (nginx): an
# HTTP/2 answer that ends (END_STREAM) while standard input is still
# open and idle does not end the transfer in libcurl, so a tunnel would
# hang; over HTTP/1.1 the end of the answer is the end.  -v shows
# "< HTTP/1.1", not "< HTTP/2"; --http2 still gets HTTP/2; and a GET of
# a file with standard input idle exits 0 with the file, promptly (with
# nginx this one ends over HTTP/2 as well, so it does not tell the two
# apart: it checks that the default still ends).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

make_cert
start_nginx_put
base=https://127.0.0.1:$tlsport

# The default: HTTP/1.1.
st=0
printf 'body' | curlpipe -v --cacert "$tmp/cert.pem" "$base/put/default" \
  >"$tmp/out" 2>"$tmp/default.err" || st=$?
[ "$st" -eq 0 ] || problem "https, the default: exit status $st"
grep -q '^< HTTP/1.1 201' "$tmp/default.err" ||
  problem "https, the default: not HTTP/1.1:" \
          "$(grep '^<' "$tmp/default.err" | head -3)"
! grep -q '^< HTTP/2' "$tmp/default.err" ||
  problem "https, the default: HTTP/2 without --http2"

# --http2 asks for it.
st=0
printf 'body' | curlpipe -v --http2 --cacert "$tmp/cert.pem" \
  "$base/put/h2" >"$tmp/out" 2>"$tmp/h2.err" || st=$?
[ "$st" -eq 0 ] || problem "--http2: exit status $st"
grep -q '^< HTTP/2 201' "$tmp/h2.err" ||
  problem "--http2: not HTTP/2: $(grep '^<' "$tmp/h2.err" | head -3)"

# A GET of a file (nginx answers without waiting for the request body)
# with standard input open and idle: the answer's end is the end.
make_random_file "$tmp/www/file" 5000
exec 3< <(sleep 30)
writer=$!
_pids+=("$writer")
st=0
t0=$(date +%s%N)
timeout 10 "$CURLPIPE" -s -X GET --cacert "$tmp/cert.pem" "$base/file" \
  <&3 >"$tmp/out" 2>"$tmp/err" || st=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
exec 3<&-
stop_pid "$writer"
if [ "$st" -ne 0 ] || [ "$ms" -gt 3000 ]; then
  problem "GET, stdin idle: exit status $st after $ms ms (expected 0" \
          "within 3 s; 124: still running after 10 s); stderr:" \
          "$(cat "$tmp/err")"
elif ! cmp -s "$tmp/www/file" "$tmp/out"; then
  problem "GET, stdin idle: the answer differs from the file"
fi

check_problems
