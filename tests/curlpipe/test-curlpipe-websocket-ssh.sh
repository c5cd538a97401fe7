#!/usr/bin/env bash
# test-curlpipe-websocket-ssh.sh: ssh and scp through curlpipe as their
# ProxyCommand over a WebSocket bridge (helpers/ws-server.py's /tcp/PORT,
# on python3-websockets) to a private sshd on loopback, a one-word
# change from an HTTP bridge: "ProxyCommand curlpipe -s ws://...".  A
# remote command's output and exit status come back (3), scp copies
# 2 MiB to the server and back byte for byte, and every ssh ends
# promptly once its session is over.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

user=$(id -un)
start_ws_server
start_sshd
tunnel=ws://127.0.0.1:$ws_port/tcp/$ssh_port
opts=(-F /dev/null -i "$tmp/id" -o IdentitiesOnly=yes -o BatchMode=yes
      -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
      -o LogLevel=ERROR
      -o "ProxyCommand=$(printf %q "$CURLPIPE") -s $tunnel")

# A command, its output and its exit status.
st=0
t0=$SECONDS
timeout "$client_timeout" ssh "${opts[@]}" "$user@127.0.0.1" \
  'echo hello through a websocket; exit 3' </dev/null >"$tmp/ssh.out" \
  2>"$tmp/ssh.err" || st=$?
[ "$st" -eq 3 ] ||
  fail "ssh through ws://: exit status $st, expected 3: $(cat "$tmp/ssh.err")"
[ "$(cat "$tmp/ssh.out")" = "hello through a websocket" ] ||
  problem "ssh through ws://: output '$(cat "$tmp/ssh.out")'"
[ $((SECONDS - t0)) -le 10 ] ||
  problem "ssh through ws:// took $((SECONDS - t0)) s"

# scp both ways, byte for byte.
make_random_file "$tmp/src.bin" $((2 * 1024 * 1024 + 5))
st=0
timeout "$client_timeout" scp -q "${opts[@]}" "$tmp/src.bin" \
  "$user@127.0.0.1:$tmp/up.bin" </dev/null >"$tmp/scp.out" 2>&1 || st=$?
[ "$st" -eq 0 ] || problem "scp to the server: exit $st: $(cat "$tmp/scp.out")"
cmp -s "$tmp/src.bin" "$tmp/up.bin" ||
  problem "scp to the server through ws://: the copy differs"
st=0
timeout "$client_timeout" scp -q "${opts[@]}" \
  "$user@127.0.0.1:$tmp/src.bin" "$tmp/down.bin" </dev/null \
  >"$tmp/scp.out" 2>&1 || st=$?
[ "$st" -eq 0 ] ||
  problem "scp from the server: exit $st: $(cat "$tmp/scp.out")"
cmp -s "$tmp/src.bin" "$tmp/down.bin" ||
  problem "scp from the server through ws://: the copy differs"
grep -q "^/tcp/$ssh_port " "$tmp/ws.log" ||
  problem "the WebSocket server logged no bridge connection"

check_problems
