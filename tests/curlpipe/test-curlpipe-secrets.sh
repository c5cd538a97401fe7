#!/usr/bin/env bash
# test-curlpipe-secrets.sh: curlpipe -v shows the request and the answer
# but never a secret: not the password, not the Authorization header
# libcurl builds from -u (nor its base64), not a Cookie, not the value
# of a header that is not on the list of harmless ones (X-Api-Key), over
# HTTP/2 (where libcurl 7.88 notes each header as "h2h3 [name: value]")
# and over HTTP/1.1.  Messages name the URL without its user name,
# password or query: a refused connection, an HTTP error with -f.
# Nor do the proxy's credentials show, from http_proxy (libcurl's note
# on the variable) or from -x in a message on a bad proxy URL; nor the
# value of a header whose name has '.', '~' or "'" in it, nor (over
# HTTP/2) a value with '[' in it; nor a URL's password that holds an
# unencoded '/', '?' or '#' (a URL that does not parse), in a message or
# in -w '%{url}'.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

make_cert
start_nginx_put
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

# The proxy's credentials in http_proxy: libcurl notes the variable it
# uses.  The raw server answers the proxied request.
start_raw_server
st=0
env -u https_proxy -u HTTPS_PROXY -u all_proxy -u ALL_PROXY -u no_proxy \
    -u NO_PROXY http_proxy="http://puser:PROXYSECRET@127.0.0.1:$raw_port" \
    timeout "$client_timeout" "$CURLPIPE" -v "http://127.0.0.1:$dead/ok" \
    </dev/null >"$tmp/out" 2>"$tmp/proxy-env.err" || st=$?
[ "$st" -eq 0 ] && [ "$(cat "$tmp/out")" = ok ] ||
  problem "-v through http_proxy: exit status $st, stdout" \
          "'$(cat "$tmp/out")' (expected 0 and 'ok')"
proxy_b64=$(printf 'puser:PROXYSECRET' | base64)
no_secret "$tmp/proxy-env.err" "-v with http_proxy" PROXYSECRET "$proxy_b64"

# A proxy URL that libcurl refuses: a port out of range, an unknown
# scheme.
for proxy in "http://puser:PROXYSECRET@127.0.0.1:99999" \
             "bogus://puser:PROXYSECRET@127.0.0.1:1"; do
  for v in -s -v; do
    st=0
    curlpipe "$v" -x "$proxy" "http://127.0.0.1:$dead/x" </dev/null \
      >"$tmp/out" 2>"$tmp/proxy-x.err" || st=$?
    [ "$st" -ne 0 ] || problem "$v -x ${proxy%%:*}://...: exit status 0"
    no_secret "$tmp/proxy-x.err" "$v -x ${proxy%%:*}://... (${proxy##*:})" \
              PROXYSECRET "$proxy_b64"
  done
done

# Header names with '.', '~' and "'" (token characters all three), over
# HTTP/1.1.
st=0
printf 'body' |
  curlpipe -v --http1.1 -H 'X.Auth-Token: HDRSECRET1' -H 'X~T: HDRSECRET2' \
    -H "X'T: HDRSECRET3" "http://127.0.0.1:$stream_port/echo" \
    >"$tmp/out" 2>"$tmp/names.err" || st=$?
[ "$st" -eq 0 ] || problem "-v, odd header names: exit status $st"
no_secret "$tmp/names.err" "-v, header names with . ~ '" \
          HDRSECRET1 HDRSECRET2 HDRSECRET3
grep -q '^> PUT /echo' "$tmp/names.err" ||
  problem "-v, odd header names: the request line is not shown"

# A password with an unencoded '/', '?' or '#': the URL does not parse as
# meant, and no part of the password may show, in a message, in -v's
# notes or in -w '%{url}'.
for url in "http://user:PW/SEC1@127.0.0.1:$dead/x" \
           "http://user:PW?SEC2@127.0.0.1:$dead/x" \
           "http://user:PW#SEC3@127.0.0.1:$dead/x"; do
  for v in -s -v; do
    st=0
    curlpipe "$v" "$url" </dev/null >"$tmp/url.out" 2>"$tmp/url.err" ||
      st=$?
    # The character after "http://user:PW".
    what="$v, a password with '${url:14:1}'"
    [ "$st" -ne 0 ] || problem "$what: exit status 0"
    no_secret "$tmp/url.err" "$what (stderr)" SEC1 SEC2 SEC3 PW
    no_secret "$tmp/url.out" "$what (stdout)" SEC1 SEC2 SEC3 PW
  done
done
st=0
curlpipe -s -w '%{url}' "http://user:PW/SEC1@127.0.0.1:$dead/x" </dev/null \
  >"$tmp/url.out" 2>"$tmp/url.err" || st=$?
no_secret "$tmp/url.out" "-w '%{url}', a password with '/' (stdout)" SEC1 PW
no_secret "$tmp/url.err" "-w '%{url}', a password with '/' (stderr)" SEC1 PW

# HTTP/2: values with '[' and ']' (libcurl 7.88 notes each header as
# "h2h3 [name: value]").
st=0
printf 'h2' |
  curlpipe -v --http2 -H 'X-Token: abc[TOKSECRET]' \
    -H 'Cookie: consent=[1,2]; sid=COOKIESECRET' --cacert "$tmp/cert.pem" \
    "https://127.0.0.1:$tlsport/put/brackets" >"$tmp/out" \
    2>"$tmp/brackets.err" || st=$?
[ "$st" -eq 0 ] || problem "-v --http2, values with '[': exit status $st"
grep -q '^< HTTP/2 201' "$tmp/brackets.err" ||
  problem "-v --http2, values with '[': not HTTP/2 201:" \
          "$(grep '^<' "$tmp/brackets.err")"
no_secret "$tmp/brackets.err" "-v --http2, values with '['" \
          TOKSECRET COOKIESECRET

check_problems
