#!/usr/bin/env bash
# test-curlpipe-ca-env.sh: like curl, curlpipe trusts the CA
# certificates named by CURL_CA_BUNDLE, or else by SSL_CERT_FILE, and
# --cacert wins over both: an https upload to nginx, whose certificate
# only the test's file vouches for, gets through with each of them and
# fails (60) with none; with -k or --insecure it gets through without.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

unset CURL_CA_BUNDLE SSL_CERT_FILE SSL_CERT_DIR
make_cert
start_nginx_put
url=https://127.0.0.1:$tlsport/put

# upload NAME [VAR=VALUE...] -- [OPTIONS...]: PUT "NAME" to $url/NAME
# with that environment; the status in $st, stderr in $tmp/NAME.err.
upload ()
{
  local name=$1 env=()
  shift
  while [ "$1" != -- ]; do env+=("$1"); shift; done
  shift
  st=0
  printf '%s' "$name" | env "${env[@]}" timeout "$client_timeout" \
    "$CURLPIPE" -sf "$@" "$url/$name" >/dev/null 2>"$tmp/$name.err" ||
    st=$?
}

# check NAME: the upload of NAME got through.
check ()
{
  if [ "$st" -ne 0 ]; then
    problem "$1: exit status $st: $(cat "$tmp/$1.err")"
  elif [ "$(cat "$tmp/www/$1" 2>/dev/null)" != "$1" ]; then
    problem "$1: the file did not arrive"
  fi
}

upload none --
[ "$st" -eq 60 ] || problem "no CA given: exit status $st, not 60"

upload curl-ca-bundle "CURL_CA_BUNDLE=$tmp/cert.pem" --
check curl-ca-bundle
upload ssl-cert-file "SSL_CERT_FILE=$tmp/cert.pem" --
check ssl-cert-file
# CURL_CA_BUNDLE comes before SSL_CERT_FILE (curl's order).
upload both "CURL_CA_BUNDLE=$tmp/cert.pem" SSL_CERT_FILE=/nonexistent.pem --
check both
upload cacert-wins CURL_CA_BUNDLE=/nonexistent.pem -- --cacert "$tmp/cert.pem"
check cacert-wins
# -k / --insecure: no CA needed, as with curl.
upload insecure-k -- -k
check insecure-k
upload insecure-long CURL_CA_BUNDLE=/nonexistent.pem -- --insecure
check insecure-long

check_problems
