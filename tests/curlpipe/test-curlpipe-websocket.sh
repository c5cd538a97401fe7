#!/usr/bin/env bash
# test-curlpipe-websocket.sh: curlpipe ws:// and wss:// (RFC 6455)
# against helpers/ws-server.py (python3-websockets) and nginx proxying
# the upgrade over TLS.  Checked: 2 MiB echoed byte for byte both ways,
# also with a non-blocking standard input; every frame curlpipe sends is
# masked (the websockets library fails a connection with 1002 on an
# unmasked client frame, so every echo checks it); a fragmented text
# and binary message with a ping between fragments; a ping answered
# with its pong; the server's close (1000: exit 0; 4001: exit 56 and
# its code and reason) and ours (standard input's end: 1000, exit 0);
# frames that come with the upgrade's answer;
# an upgrade refused (404, 200, a wrong Sec-WebSocket-Accept: exit 22);
# frames a server must not send (masked, RSV bits, a ping over 125
# bytes: a close 1002 and exit 56); TCP closed without a close frame
# (52) or inside a frame (56); -m (28); nothing listening (7); -x
# through tinyproxy (a CONNECT tunnel); -u,
# --oauth2-bearer and the URL's user:password reaching the server,
# never in -v, messages or /proc/PID/cmdline; -A and -H User-Agent; an
# idle session that wakes up no more than a few times a second; wss://
# through nginx with --cacert (and 60 without it).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe
requires base64

start_ws_server
ws=ws://127.0.0.1:$ws_port
wrap=()

# ws_run WANT NAME ARGS...: curlpipe ARGS (run by the command in
# ${wrap[@]}, if any) with the caller's standard input, its output in $tmp/NAME.out and messages in $tmp/NAME.err; a
# problem unless it exits with WANT.
ws_run ()
{
  local want=$1 name=$2 st=0
  shift 2
  timeout 20 "${wrap[@]}" "$CURLPIPE" "$@" >"$tmp/$name.out" \
    2>"$tmp/$name.err" || st=$?
  [ "$st" -eq "$want" ] ||
    problem "$name: curlpipe $*: exit status $st, expected $want:" \
            "$(cat "$tmp/$name.err")"
}

# err_has NAME TEXT: curlpipe's message for NAME says TEXT.
err_has ()
{
  grep -qF -- "$2" "$tmp/$1.err" ||
    problem "$1: no '$2' in the message: $(cat "$tmp/$1.err")"
}

# out_is NAME PRINTF-FORMAT: NAME's output is exactly that.
out_is ()
{
  printf "$2" >"$tmp/$1.want"
  cmp -s "$tmp/$1.want" "$tmp/$1.out" ||
    problem "$1: output $(od -c "$tmp/$1.out" | head -3)"
}

# feed FILE OUT: FILE's bytes, then standard input stays open until OUT
# has as many (10 s at most): the websockets library answers a close at
# once and drops what it has not echoed yet.
feed ()
{
  local size n
  size=$(file_size "$1")
  cat "$1"
  for ((n = 0; n < 200; n++)); do
    [ "$(stat -c %s "$2" 2>/dev/null || echo 0)" -lt "$size" ] || return 0
    sleep 0.05
  done
}

# Standard input for the cases where the server leads: open, silent.
mkfifo "$tmp/fifo"
exec 3<>"$tmp/fifo"

# Echo, byte for byte both ways: 2 MiB in frames of up to 512 KiB.
make_random_file "$tmp/src.bin" $((2 * 1024 * 1024 + 7))
: >"$tmp/echo.out"
ws_run 0 echo -s "$ws/echo" < <(feed "$tmp/src.bin" "$tmp/echo.out")
cmp -s "$tmp/src.bin" "$tmp/echo.out" ||
  problem "echo: the answer differs from what was sent"

# The same with a non-blocking standard input (set by whoever gave it).
: >"$tmp/nonblock.out"
wrap=("$PYTHON" -c '
import fcntl, os, sys
fcntl.fcntl(0, fcntl.F_SETFL, fcntl.fcntl(0, fcntl.F_GETFL) | os.O_NONBLOCK)
os.execv(sys.argv[1], sys.argv[1:])')
ws_run 0 nonblock -s "$ws/echo" < <(feed "$tmp/src.bin" "$tmp/nonblock.out")
wrap=()
cmp -s "$tmp/src.bin" "$tmp/nonblock.out" ||
  problem "echo with a non-blocking stdin: the answer differs"

# A ping, its pong checked by the server, then a text message and close.
ws_run 0 ping -s "$ws/ping" <"$tmp/fifo"
out_is ping 'pong ok\n'
wait_log "$tmp/ws.log" "^pong ok"

# Fragmented messages, a ping between fragments.
: >"$tmp/ws.log"
ws_run 0 fragments -s "$ws/fragments" <"$tmp/fifo"
out_is fragments 'hello, world\n\000\001\002\n'
wait_log "$tmp/ws.log" "^pong ok"

# The server's close: 1000 is a success, 4001 a failure with its code
# and reason; either way curlpipe echoes the code.
ws_run 0 close1000 -s "$ws/close/1000" <"$tmp/fifo"
out_is close1000 'bye\n'
wait_log "$tmp/ws.log" "^echoed 1000"
ws_run 56 close4001 -s "$ws/close/4001" <"$tmp/fifo"
out_is close4001 'bye\n'
err_has close4001 "closed the WebSocket with code 4001: reason for 4001"
wait_log "$tmp/ws.log" "^echoed 4001"

# Frames in the same packet as the upgrade's answer are the first ones.
ws_run 0 early -s "$ws/early" <"$tmp/fifo"
out_is early 'early\n'

# Ours: standard input's end sends a close 1000.
ws_run 0 ourclose -s "$ws/wait-close" \
  < <(printf abc)
wait_log "$tmp/ws.log" "^client closed 1000"

# Through an HTTP proxy (tinyproxy), which gives a tunnel (CONNECT).
if command -v tinyproxy >/dev/null; then
  start_tinyproxy proxy
  ws_run 0 proxied -s -x "http://127.0.0.1:$proxy_port" "$ws/ping" \
    <"$tmp/fifo"
  out_is proxied 'pong ok\n'
  grep -q "CONNECT.*127.0.0.1:$ws_port" "$tmp/proxy.log" ||
    problem "-x: the proxy logged no CONNECT to the server"
fi

# No upgrade.
ws_run 22 s404 -s "$ws/status/404" <"$tmp/fifo"
err_has s404 "$ws/status/404: Refused WebSocket upgrade: 404"
[ ! -s "$tmp/s404.out" ] || problem "s404: the refusal's body was output"
ws_run 22 s200 -s "$ws/status/200" <"$tmp/fifo"
err_has s200 "Refused WebSocket upgrade: 200"
ws_run 22 accept -s "$ws/bad-accept" <"$tmp/fifo"
err_has accept "Refused WebSocket upgrade: a wrong Sec-WebSocket-Accept"

# Frames a server must not send: a close 1002 goes back, exit 56.
for c in "masked:a masked frame from the server" \
         "rsv:reserved bits set" \
         "big-ping:a control frame over 125 bytes"; do
  path=${c%%:*}
  : >"$tmp/ws.log"
  ws_run 56 "$path" -s "$ws/$path" <"$tmp/fifo"
  err_has "$path" "WebSocket protocol error from the server: ${c#*:}"
  wait_log "$tmp/ws.log" "^client closed 1002"
done

# TCP closed without a close frame: between frames 52, inside one 56;
# what came before is written.
ws_run 52 drop -s "$ws/drop" <"$tmp/fifo"
out_is drop 'partial\n'
err_has drop "closed the connection without a WebSocket close frame"
ws_run 56 dropmid -s "$ws/drop-mid" <"$tmp/fifo"
err_has dropmid "closed the connection inside a WebSocket frame"

# -m bounds a session that never ends; nothing listening is 7.
t0=$SECONDS
ws_run 28 maxtime -s -m 0.5 "$ws/wait-close" <"$tmp/fifo"
err_has maxtime "timed out"
[ $((SECONDS - t0)) -le 5 ] || problem "-m 0.5 took $((SECONDS - t0)) s"
ws_run 7 refused -s "ws://127.0.0.1:$(free_port)/echo" </dev/null

# Credentials reach the server and nothing else.
pw=sekrit-pw-42
b64=$(printf 'joe:%s' "$pw" | base64)
: >"$tmp/ws.log"
ws_run 0 basic -v -u "joe:$pw" "$ws/wait-close" \
  < <(printf x)
grep -qF "/wait-close authorization=Basic $b64 " "$tmp/ws.log" ||
  problem "-u: the server got $(grep authorization "$tmp/ws.log")"
err_has basic "Authorization: ***"
ws_run 0 bearer -v --oauth2-bearer "tok-$pw" "$ws/wait-close" \
  < <(printf x)
grep -qF "authorization=Bearer tok-$pw " "$tmp/ws.log" ||
  problem "--oauth2-bearer: the server got $(grep authorization "$tmp/ws.log")"
ws_run 0 userinfo -v "ws://joe:$pw@127.0.0.1:$ws_port/wait-close" \
  < <(printf x)
[ "$(grep -cF "authorization=Basic $b64 " "$tmp/ws.log")" -eq 2 ] ||
  problem "the URL's user:password did not reach the server"
ws_run 22 refusedpw -v -u "joe:$pw" "$ws/status/403" </dev/null
for f in basic bearer userinfo refusedpw; do
  ! grep -qF -e "$pw" -e "$b64" "$tmp/$f.err" ||
    problem "$f: the secret is in curlpipe's messages or -v"
done
# -A, and a -H that replaces the default.
ws_run 0 agent -s -A agent-a/1 "$ws/wait-close" \
  < <(printf x)
ws_run 0 hagent -s -H 'User-Agent: agent-h/2' "$ws/wait-close" \
  < <(printf x)
grep -q "user-agent=agent-a/1$" "$tmp/ws.log" || problem "-A did not reach"
grep -q "user-agent=agent-h/2$" "$tmp/ws.log" || problem "-H did not reach"

# An idle session: no CPU, no wake-ups; the password not in cmdline.
mkfifo "$tmp/idle"
exec 4<>"$tmp/idle"
# (Without fd 4, the FIFO's writer here, or its end would never come.)
"$CURLPIPE" -s -u "joe:$pw" "$ws/wait-close" <"$tmp/idle" 4>&- \
  >"$tmp/idle.out" 2>"$tmp/idle.err" &
idle_pid=$!
_pids+=("$idle_pid")
wait_log "$tmp/ws.log" "^/wait-close authorization=Basic $b64 user-agent=curlpipe"
sleep 0.2
switches ()
{
  awk '/ctxt_switches/ { n += $2 } END { print n }' "/proc/$idle_pid/status"
}
s0=$(switches)
sleep 0.5
s1=$(switches)
[ $((s1 - s0)) -le 2 ] ||
  problem "idle session: $((s1 - s0)) context switches in 0.5 s"
! tr '\0' ' ' <"/proc/$idle_pid/cmdline" | grep -qF "$pw" ||
  problem "the password is in /proc/PID/cmdline"
printf 'last\n' >&4
for ((n = 0; n < 100; n++)); do
  [ ! -s "$tmp/idle.out" ] || break
  sleep 0.05
done
exec 4>&-
st=0
wait "$idle_pid" || st=$?
[ "$st" -eq 0 ] || problem "idle session ended with $st: $(cat "$tmp/idle.err")"
[ "$(cat "$tmp/idle.out")" = last ] ||
  problem "idle session: the echo after it: $(cat "$tmp/idle.out")"

# wss:// through nginx, which proxies the upgrade.
make_cert
nginx_http2= start_nginx "location /ws/ {
      proxy_pass http://127.0.0.1:$ws_port/;
      proxy_http_version 1.1;
      proxy_set_header Upgrade \$http_upgrade;
      proxy_set_header Connection upgrade;
    }"
wss=wss://127.0.0.1:$tlsport/ws
head -c $((1024 * 1024 + 3)) "$tmp/src.bin" >"$tmp/src1.bin"
: >"$tmp/wss.out"
ws_run 0 wss -s --cacert "$tmp/cert.pem" "$wss/echo" \
  < <(feed "$tmp/src1.bin" "$tmp/wss.out")
cmp -s "$tmp/src1.bin" "$tmp/wss.out" ||
  problem "wss:// echo through nginx: the answer differs"
ws_run 0 wssping -s -k "$wss/ping" <"$tmp/fifo"
out_is wssping 'pong ok\n'
ws_run 60 wssca -s "$wss/echo" </dev/null
ws_run 22 wss404 -s -k "$wss/status/404" </dev/null
err_has wss404 "Refused WebSocket upgrade: 404"

check_problems
