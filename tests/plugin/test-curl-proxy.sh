#!/usr/bin/env bash
# test-curl-proxy.sh: proxy= sends every request through a real forward
# proxy (tinyproxy), whose log shows them, for http and (with CONNECT)
# https URLs; with proxy authentication,
# proxy-user= and proxy-password=+FILE get through, and without them the
# plugin stops at start-up with the proxy's 407.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy
requires tinyproxy

make_cert
serve_image $((3 * 1024 * 1024 + 11))

# proxied LOG: how many GETs of the image the proxy forwarded.
proxied ()
{
  grep -c "Request .*: GET $http_url " "$1" || :
}

start_tinyproxy open
start_nbdkit open -r "$PLUGIN" "$http_url" "proxy=http://127.0.0.1:$proxy_port"
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
stop_nbdkit open
assert_same_file "$image" "$tmp/out.img"
n=$(proxied "$tmp/open.log")
[ "$n" -ge 4 ] || { cat "$tmp/open.log" >&2; fail "only $n GETs went through the proxy"; }

# An https URL through the proxy (CONNECT): the proxy's "200 Connection
# established" is not the answer to check.
rm -f "$tmp/out.img"
start_nbdkit tls -r "$PLUGIN" "$url" \
  "cainfo=$tmp/cert.pem" "proxy=http://127.0.0.1:$proxy_port"
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
stop_nbdkit tls
assert_same_file "$image" "$tmp/out.img"
grep -q "CONNECT 127.0.0.1:$tlsport" "$tmp/open.log" ||
  fail "the https copy did not go through the proxy"
stop_pid "$proxy_pid"

start_tinyproxy auth "BasicAuth alice pr0xy"
printf 'pr0xy' >"$tmp/proxy-pw"
rm -f "$tmp/out.img"
start_nbdkit auth -r "$PLUGIN" "$http_url" "proxy=http://127.0.0.1:$proxy_port" \
  proxy-user=alice "proxy-password=+$tmp/proxy-pw"
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
stop_nbdkit auth
assert_same_file "$image" "$tmp/out.img"
n=$(proxied "$tmp/auth.log")
[ "$n" -ge 4 ] || fail "only $n GETs went through the authenticating proxy"

expect_nbdkit_fails noauth -r "$PLUGIN" "$http_url" \
  "proxy=http://127.0.0.1:$proxy_port"
assert_grep_i "$tmp/noauth.err" "407"
