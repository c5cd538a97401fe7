#!/usr/bin/env bash
# test-curl-sockets.sh: unix-socket-path= reaches nginx listening on a
# Unix socket (the URL still gives the path and Host), and resolve=
# sends a name DNS does not know to 127.0.0.1 (ipresolve=v4 with it,
# and ipresolve=v6 finds no address for it); without resolve= that name
# fails at start-up.  tcp-keepalive=true sets SO_KEEPALIVE (ss shows the
# keepalive timer on the plugin's connection).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy

serve_image $((2 * 1024 * 1024 + 77)) 'listen unix:DIR/nginx.sock; access_log DIR/headers.log hdrs;'

copy ()
{
  local name=$1
  shift
  rm -f "$tmp/out.img"
  : >"$tmp/headers.log"
  start_nbdkit "$name" -r "$PLUGIN" "$@"
  timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
  stop_nbdkit "$name"
  assert_same_file "$image" "$tmp/out.img"
}

# Port 1: nothing listens there, so only the socket can answer.
copy unix http://disk.invalid:1/disk.img "unix-socket-path=$tmp/nginx.sock"
grep -q '^GET HTTP/1.1 disk.invalid 206 ' "$tmp/headers.log" ||
  fail "nginx did not see the GETs on its Unix socket"

copy resolve "http://images.example.test:$port/disk.img" \
  "resolve=images.example.test:$port:127.0.0.1" ipresolve=v4
grep -q '^GET HTTP/1.1 images.example.test 206 ' "$tmp/headers.log" ||
  fail "nginx did not see the GETs for images.example.test"

# The name has only an IPv4 address: IPv6 only finds none.
expect_nbdkit_fails v6 -r "$PLUGIN" "http://images.example.test:$port/disk.img" \
  "resolve=images.example.test:$port:127.0.0.1" ipresolve=v6
assert_grep_i "$tmp/v6.err" "images.example.test"

expect_nbdkit_fails noresolve -r "$PLUGIN" \
  "http://images.example.test:$port/disk.img"
assert_grep_i "$tmp/noresolve.err" "images.example.test"

# tcp-keepalive: the kernel runs a keepalive timer on the connection.
command -v ss >/dev/null || skip "ss (iproute2) is not installed"
for ka in true false; do
  start_nbdkit "ka$ka" -r "$PLUGIN" "$url" "tcp-keepalive=$ka"
  ss -tnoH state established "( dport = :$port )" >"$tmp/ss-$ka"
  stop_nbdkit "ka$ka"
  [ -s "$tmp/ss-$ka" ] || fail "tcp-keepalive=$ka: no connection to nginx"
  if grep -q 'timer:(keepalive' "$tmp/ss-$ka"; then got=true; else got=false; fi
  [ "$got" = "$ka" ] ||
    fail "tcp-keepalive=$ka: ss shows: $(cat "$tmp/ss-$ka")"
done
