#!/usr/bin/env bash
# test-curlpipe-proxy.sh: curlpipe streams through a forward proxy
# (tinyproxy, whose log shows each request) with -x/--proxy URL, for an
# http URL (the echo comes back through it) and an https one (CONNECT);
# --noproxy LIST goes direct for the hosts listed; --proxy-user U:P gets
# through a proxy that asks for it (without it, -f exits 22 on the
# 407); and curl's environment variables work as in curl: http_proxy,
# HTTPS_PROXY, NO_PROXY.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY \
      no_proxy NO_PROXY
make_cert
start_nginx_put
start_stream_server
echo_url=http://127.0.0.1:$stream_port/echo
start_tinyproxy open
open_proxy=http://127.0.0.1:$proxy_port

# through LOG PATTERN: how many requests the proxy logged that match.
through ()
{
  grep -cE "Request \\(file descriptor [0-9]+\\): $2" "$1" || :
}

# echoes NAME [VAR=VALUE...] -- ARGS...: "hello NAME" comes back from
# curlpipe -s ARGS $echo_url, run with that environment.
echoes ()
{
  local name=$1 env=() st=0
  shift
  while [ "$1" != -- ]; do env+=("$1"); shift; done
  shift
  printf 'hello %s' "$name" |
    env "${env[@]}" timeout "$client_timeout" "$CURLPIPE" -s "$@" \
      "$echo_url" >"$tmp/out" 2>"$tmp/err" || st=$?
  if [ "$st" -ne 0 ]; then
    problem "$name: exit status $st: $(cat "$tmp/err")"
    return 1
  fi
  [ "$(cat "$tmp/out")" = "hello $name" ] || {
    problem "$name: the echo came back as '$(cat "$tmp/out")'"
    return 1
  }
}

# Each case: how many PUTs of $echo_url the proxy saw, before and after.
put_echo="PUT $echo_url HTTP/1.1"
n0=$(through "$tmp/open.log" "$put_echo")
if echoes x -- -x "$open_proxy"; then
  [ "$(through "$tmp/open.log" "$put_echo")" -eq $((n0 + 1)) ] ||
    problem "-x: the request did not go through the proxy"
fi
if echoes proxy -- --proxy "$open_proxy"; then
  [ "$(through "$tmp/open.log" "$put_echo")" -eq $((n0 + 2)) ] ||
    problem "--proxy: the request did not go through the proxy"
fi
if echoes noproxy -- -x "$open_proxy" --noproxy 127.0.0.1; then
  [ "$(through "$tmp/open.log" "$put_echo")" -eq $((n0 + 2)) ] ||
    problem "--noproxy 127.0.0.1: the request went through the proxy"
fi

# https: a CONNECT tunnel to nginx.
st=0
printf 'tls' | curlpipe -sf -x "$open_proxy" --cacert "$tmp/cert.pem" \
  "https://127.0.0.1:$tlsport/put/tls" 2>"$tmp/err" || st=$?
if [ "$st" -ne 0 ]; then
  problem "-x, https: exit status $st: $(cat "$tmp/err")"
else
  [ "$(cat "$tmp/www/tls")" = tls ] || problem "-x, https: no upload"
  [ "$(through "$tmp/open.log" "CONNECT 127.0.0.1:$tlsport")" -ge 1 ] ||
    problem "-x, https: no CONNECT through the proxy"
fi

# Environment variables (libcurl's reading of them, as curl's).
n0=$(through "$tmp/open.log" "$put_echo")
if echoes http_proxy "http_proxy=$open_proxy" --; then
  [ "$(through "$tmp/open.log" "$put_echo")" -eq $((n0 + 1)) ] ||
    problem "http_proxy: the request did not go through the proxy"
fi
if echoes NO_PROXY "http_proxy=$open_proxy" NO_PROXY=127.0.0.1 --; then
  [ "$(through "$tmp/open.log" "$put_echo")" -eq $((n0 + 1)) ] ||
    problem "NO_PROXY=127.0.0.1: the request went through the proxy"
fi
n0=$(through "$tmp/open.log" "CONNECT 127.0.0.1:$tlsport")
st=0
printf 'env' | HTTPS_PROXY=$open_proxy curlpipe -sf --cacert "$tmp/cert.pem" \
  "https://127.0.0.1:$tlsport/put/env" 2>"$tmp/err" || st=$?
if [ "$st" -ne 0 ]; then
  problem "HTTPS_PROXY: exit status $st: $(cat "$tmp/err")"
else
  [ "$(through "$tmp/open.log" "CONNECT 127.0.0.1:$tlsport")" -eq \
    $((n0 + 1)) ] || problem "HTTPS_PROXY: no CONNECT through the proxy"
fi
stop_pid "$proxy_pid"

# A proxy that asks for credentials.
start_tinyproxy auth 'BasicAuth alice pr0xy'
auth_proxy=http://127.0.0.1:$proxy_port
if echoes proxy-user -- -x "$auth_proxy" --proxy-user alice:pr0xy; then
  [ "$(through "$tmp/auth.log" "$put_echo")" -ge 1 ] ||
    problem "--proxy-user: the request did not go through the proxy"
fi
st=0
printf x | curlpipe -sf -x "$auth_proxy" "$echo_url" >/dev/null \
  2>"$tmp/err" || st=$?
[ "$st" -eq 22 ] ||
  problem "no --proxy-user, the proxy answers 407: exit status $st," \
          "not 22: $(cat "$tmp/err")"

check_problems
