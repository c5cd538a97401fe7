#!/usr/bin/env bash
# test-curlpipe-client-cert.sh: --cert FILE and --key FILE present a
# client certificate: nginx with ssl_verify_client on (and a CA the test
# makes) sees it (its subject comes back in the answer) and takes the
# upload; a FILE holding both certificate and key works with --cert
# alone; without a certificate nginx refuses (400, so 22 with -f).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")}/functions.sh"
requires_curlpipe

make_cert
# A CA of our own and a client certificate it signed.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=curlpipe-test-ca \
        -keyout "$tmp/ca-key.pem" -out "$tmp/ca.pem" 2>"$tmp/openssl.err" ||
  fail "openssl could not make the CA"
openssl req -newkey rsa:2048 -nodes -subj /CN=curlpipe-client \
        -keyout "$tmp/client-key.pem" -out "$tmp/client.csr" \
        2>>"$tmp/openssl.err" || fail "openssl could not make the request"
openssl x509 -req -in "$tmp/client.csr" -CA "$tmp/ca.pem" \
        -CAkey "$tmp/ca-key.pem" -CAcreateserial -days 2 \
        -out "$tmp/client.pem" 2>>"$tmp/openssl.err" ||
  fail "openssl could not sign the client certificate"
cat "$tmp/client.pem" "$tmp/client-key.pem" >"$tmp/client-both.pem"
chmod 644 "$tmp"/*.pem

start_nginx_put 'ssl_client_certificate DIR/ca.pem;
    ssl_verify_client on;
    location = /whoami { return 200 "$ssl_client_s_dn\n"; }'
url=https://127.0.0.1:$tlsport

# run NAME ARGS...: curlpipe -sf --cacert ... ARGS, standard input NAME;
# status in $st, stdout in $tmp/out, stderr in $tmp/err.
run ()
{
  local name=$1
  shift
  st=0
  printf '%s' "$name" |
    curlpipe -sf --cacert "$tmp/cert.pem" "$@" >"$tmp/out" 2>"$tmp/err" ||
    st=$?
}

run pair --cert "$tmp/client.pem" --key "$tmp/client-key.pem" "$url/put/pair"
if [ "$st" -ne 0 ]; then
  problem "--cert and --key: exit status $st: $(cat "$tmp/err")"
else
  [ "$(cat "$tmp/www/pair")" = pair ] || problem "--cert and --key: no upload"
fi
run whoami --cert "$tmp/client.pem" --key "$tmp/client-key.pem" "$url/whoami"
if [ "$st" -ne 0 ]; then
  problem "--cert and --key, /whoami: exit status $st: $(cat "$tmp/err")"
else
  grep -q 'CN=curlpipe-client' "$tmp/out" ||
    problem "nginx saw the client as '$(cat "$tmp/out")'"
fi

run both --cert "$tmp/client-both.pem" "$url/put/both"
if [ "$st" -ne 0 ]; then
  problem "--cert with the key in it: exit status $st: $(cat "$tmp/err")"
else
  [ "$(cat "$tmp/www/both")" = both ] ||
    problem "--cert with the key in it: no upload"
fi

run none "$url/put/none"
[ "$st" -eq 22 ] ||
  problem "no client certificate: exit status $st, not 22: $(cat "$tmp/err")"
[ ! -e "$tmp/www/none" ] || problem "no client certificate: uploaded anyway"

check_problems
