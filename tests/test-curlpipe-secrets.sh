#!/usr/bin/env bash
# test-curlpipe-secrets.sh: curlpipe -v shows the request and the answer
# but never a secret: not the password, not the Authorization header
# libcurl builds from -u (nor its base64), not a Cookie, not the value
# of a header that is not on the list of harmless ones (X-Api-Key), over
# HTTP/2 (where libcurl 7.88 notes each header as "h2h3 [name: value]")
# and over HTTP/1.1.  Messages name the URL without its user name,
# password or query: a refused connection, an HTTP error with -f.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")}/functions.sh"
requires_curlpipe

make_cert
start_nginx 'location /put/ { dav_methods PUT; alias DIR/www/; }'
chmod 777 "$tmp/www"
start_stream_server
b64=$(printf 'alice:PASSWORDX' | base64)
secrets=(PASSWORDX "$b64" COOKIEX APIKEYX)

# no_secret FILE WHAT: FILE holds none of the secrets.
no_secret ()
{
  local s
  for s in "${secrets[@]}" "$@"; do
    if grep -qF -- "$s" "$1"; then
      problem "$2: '$s' was printed: $(grep -F -- "$s" "$1" | head -3)"
    fi
  done
}

for proto in --http2 --http1.1; do
  st=0
  printf 'body' |
    curlpipe -v "$proto" -u alice:PASSWORDX -H 'Cookie: c=COOKIEX' \
      -H 'X-Api-Key: APIKEYX' --cacert "$tmp/cert.pem" \
      "https://127.0.0.1:$tlsport/put/v$proto" \
      >"$tmp/out" 2>"$tmp/err$proto" || st=$?
  [ "$st" -eq 0 ] || problem "-v $proto: exit status $st"
  no_secret "$tmp/err$proto" "-v $proto"
  # The request and the answer are shown all the same, and a harmless
  # header with its value.
  grep -qiE '^> PUT /put/v' "$tmp/err$proto" ||
    problem "-v $proto: the request line is not shown"
  grep -qiE "^> host: 127.0.0.1:$tlsport" "$tmp/err$proto" ||
    problem "-v $proto: the Host header is not shown"
  grep -qiE '^< HTTP/(2|1.1) 201' "$tmp/err$proto" ||
    problem "-v $proto: the answer's status line is not shown"
done
[ "$(cat "$tmp/www/v--http2")" = body ] || problem "the HTTP/2 PUT failed"
grep -q '^< HTTP/2 201' "$tmp/err--http2" ||
  problem "--http2 did not speak HTTP/2: $(grep '^<' "$tmp/err--http2")"

# Messages: a refused connection, and -f on an HTTP error.
dead=$(free_port)
st=0
printf x | curlpipe -s "http://alice:PASSWORDX@127.0.0.1:$dead/x?sig=SIGX" \
  2>"$tmp/refused.err" || st=$?
[ "$st" -ne 0 ] || problem "a refused connection exited 0"
no_secret "$tmp/refused.err" "refused" SIGX alice
grep -qF "127.0.0.1:$dead/x" "$tmp/refused.err" ||
  problem "refused: the message does not name the URL:" \
          "$(cat "$tmp/refused.err")"

st=0
printf x | curlpipe -sf \
  "http://alice:PASSWORDX@127.0.0.1:$stream_port/status/404?sig=SIGX" \
  2>"$tmp/http.err" || st=$?
[ "$st" -eq 22 ] || problem "-f on a 404: exit status $st, not 22"
no_secret "$tmp/http.err" "-f on a 404" SIGX alice
grep -qF "127.0.0.1:$stream_port/status/404" "$tmp/http.err" ||
  problem "-f on a 404: the message does not name the URL:" \
          "$(cat "$tmp/http.err")"

# -v on the refused connection: libcurl's own notes must not carry the
# password either.
printf x | curlpipe -v "http://alice:PASSWORDX@127.0.0.1:$dead/x" \
  2>"$tmp/refused-v.err" || :
no_secret "$tmp/refused-v.err" "-v refused"

check_problems
