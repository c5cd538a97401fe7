#!/usr/bin/env bash
# test-curl-redirect-https-http.sh: no downgrade.  An https:// url= that
# nginx redirects to plain http:// is refused at start-up (the probe
# meets the redirect) with a message naming insecure-redirect, and not
# one request, so not one header, goes out in clear.  With
# insecure-redirect=true the redirect is followed and the copy is
# exact.  A redirect from http:// to https:// is always followed.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy

make_cert
# One nginx, plain HTTP on PORT and HTTPS on TLSPORT.
start_nginx_named s '
    location = /down/disk.img { return 302 http://127.0.0.1:PORT/disk.img; }
    location = /up/disk.img { return 302 https://127.0.0.1:TLSPORT/disk.img; }'
make_random_file "$tmp/nginx-s/www/disk.img" $((1024 * 1024 + 99))
log=$tmp/nginx-s.log

# copy_from NAME URL PLUGIN-ARGS...: a whole copy, exact.
copy_from ()
{
  local name=$1 url=$2
  shift 2
  start_nbdkit "$name" -r "$PLUGIN" "$url" "$@"
  timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
  stop_nbdkit "$name"
  assert_same_file "$tmp/nginx-s/www/disk.img" "$tmp/out.img"
  rm -f "$tmp/out.img"
}

# Refused: the TLS side saw the request and answered the redirect; the
# plain side saw nothing.
down=https://127.0.0.1:$s_tlsport/down/disk.img
expect_nbdkit_fails refused -r "$PLUGIN" "$down" "cainfo=$tmp/cert.pem" \
  "header=X-Token: CLEARTEXTSECRET"
assert_grep_i "$tmp/refused.err" insecure-redirect
grep -qE "^https $s_tlsport [A-Z]+ /down/disk.img 302 .*CLEARTEXTSECRET" \
     "$log" || {
  cat "$log" >&2
  fail "the redirect was never reached with the header"
}
if grep -qE '^http ' "$log"; then
  cat "$log" >&2
  fail "a request (and the header) went out over plain HTTP"
fi

# Allowed: the file comes over plain HTTP.
: >"$log"
copy_from allowed "$down" "cainfo=$tmp/cert.pem" insecure-redirect=true
grep -qE "^http $s_port GET /disk.img 206 " "$log" || {
  cat "$log" >&2
  fail "insecure-redirect=true: no GET over plain HTTP"
}

# Upgrade: http:// to https:// needs nothing.
: >"$log"
copy_from up "http://127.0.0.1:$s_port/up/disk.img" "cainfo=$tmp/cert.pem"
grep -qE "^https $s_tlsport GET /disk.img 206 " "$log" || {
  cat "$log" >&2
  fail "http to https: no GET over HTTPS"
}
