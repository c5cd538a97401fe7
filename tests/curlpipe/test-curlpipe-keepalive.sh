#!/usr/bin/env bash
# test-curlpipe-keepalive.sh: curlpipe turns TCP keep-alive on for its
# connection, so that a tunnel idle for hours (an ssh session through a
# NAT or a load balancer) is neither dropped by the middle box nor kept
# for ever once the peer is gone: while the transfer is open and idle,
# ss shows a keepalive timer on curlpipe's connection.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe
requires ss

start_stream_server
mkfifo "$tmp/fifo"

# A FIFO whose writer writes nothing: the upload stays open and idle.
sleep 60 >"$tmp/fifo" &
_pids+=("$!")
"$CURLPIPE" -s "http://127.0.0.1:$stream_port/echo" <"$tmp/fifo" \
  >"$tmp/out" 2>"$tmp/curlpipe.err" &
cp_pid=$!
_pids+=("$cp_pid")

# curlpipe's end of the connection is the one whose peer is the server.
for ((n = 0; n < ready_tries; n++)); do
  ss -tnoH state established "( dport = :$stream_port )" >"$tmp/ss"
  [ ! -s "$tmp/ss" ] || break
  _alive "$cp_pid" || fail "curlpipe exited: $(cat "$tmp/curlpipe.err")"
  sleep 0.1
done
[ -s "$tmp/ss" ] || fail "no connection from curlpipe to the server"
grep -q 'timer:(keepalive' "$tmp/ss" ||
  fail "no keepalive timer on curlpipe's connection; ss: $(cat "$tmp/ss")"
_alive "$cp_pid" || fail "curlpipe exited: $(cat "$tmp/curlpipe.err")"
