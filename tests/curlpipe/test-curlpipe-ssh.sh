#!/usr/bin/env bash
# test-curlpipe-ssh.sh: ssh and scp through curlpipe, as their
# ProxyCommand, and an HTTP streaming tunnel (the stream server's
# /tcp/PORT) to a private sshd on loopback: scp copies 4 MiB byte for
# byte with curlpipe spelled "-s -T . -N URL" and spelled as curl users
# write it ("-s --no-buffer URL -T . --no-progress-meter
# --expect100-timeout 0.01"); `ssh host 'sleep 2; exit 3'` returns 3
# and ends promptly; and when sshd dies mid-session (its session's
# processes killed) the tunnel ends, so ssh ends within 5 s instead of
# waiting for ever on a curlpipe whose answer is over.  A first scp with
# plain "-s URL" checks the tunnel itself.
#
# sshd is the test's own (start_sshd in functions.sh): a child on a
# free port, with its own configuration and keys in $tmp.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

user=$(id -un)
start_stream_server
start_sshd
tunnel=http://127.0.0.1:$stream_port/tcp/$ssh_port
cp_q=$(printf %q "$CURLPIPE")

# ssh_opts PROXY-ARGS: ssh's options for curlpipe PROXY-ARGS as the
# ProxyCommand (the tunnel URL is added where PROXY-ARGS says URL).
ssh_opts ()
{
  opts=(-F /dev/null -i "$tmp/id" -o IdentitiesOnly=yes -o BatchMode=yes
        -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
        -o LogLevel=ERROR
        -o "ProxyCommand=$cp_q ${1//URL/$tunnel}")
}

# descendants PID: PID's children, theirs, and so on.
descendants ()
{
  local c
  for c in $(pgrep -P "$1" || :); do
    echo "$c"
    descendants "$c"
  done
}

# kill_tree PID: KILL every descendant of PID (started by this test).
kill_tree ()
{
  local p
  for p in $(descendants "$1"); do
    kill -KILL "$p" 2>/dev/null || :
  done
}

make_random_file "$tmp/src.bin" $((4 * 1024 * 1024 + 3))

# copies NAME PROXY-ARGS: scp of src.bin to $tmp/NAME.bin, byte exact.
copies ()
{
  local name=$1 st=0
  ssh_opts "$2"
  timeout "$client_timeout" scp -q "${opts[@]}" "$tmp/src.bin" \
    "$user@127.0.0.1:$tmp/$name.bin" </dev/null >"$tmp/scp-$name.out" \
    2>&1 || st=$?
  if [ "$st" -ne 0 ]; then
    problem "scp through curlpipe $2: exit status $st:" \
            "$(cat "$tmp/scp-$name.out")"
  elif ! cmp -s "$tmp/src.bin" "$tmp/$name.bin"; then
    problem "scp through curlpipe $2: the copy differs"
  fi
}

copies plain '-s URL'
[ "$_problems" -eq 0 ] || fail "the tunnel itself does not work"
copies short '-s -T . -N URL'
copies curl-style \
  '-s --no-buffer URL -T . --no-progress-meter --expect100-timeout 0.01'

# A remote command's exit status comes back, and ssh ends with it.
for args in '-s URL' '-s -T . -N URL'; do
  ssh_opts "$args"
  st=0
  t0=$SECONDS
  timeout "$client_timeout" ssh "${opts[@]}" "$user@127.0.0.1" \
    'sleep 2; exit 3' </dev/null >"$tmp/ssh.out" 2>"$tmp/ssh.err" || st=$?
  [ "$st" -eq 3 ] ||
    problem "ssh through curlpipe $args, 'sleep 2; exit 3': exit status" \
            "$st: $(cat "$tmp/ssh.err")"
  [ $((SECONDS - t0)) -le 12 ] ||
    problem "ssh through curlpipe $args, 'sleep 2; exit 3' took" \
            "$((SECONDS - t0)) s"
done

# sshd dies mid-session: ssh must notice, through curlpipe, at once.
ssh_opts '-s URL'
timeout 60 ssh "${opts[@]}" "$user@127.0.0.1" 'echo ready; sleep 30' \
  </dev/null >"$tmp/ssh-kill.out" 2>"$tmp/ssh-kill.err" &
ssh_pid=$!
_pids+=("$ssh_pid")
for ((n = 0; n < 200; n++)); do
  grep -q ready "$tmp/ssh-kill.out" && break
  _alive "$ssh_pid" || break
  sleep 0.1
done
grep -q ready "$tmp/ssh-kill.out" ||
  fail "the ssh session did not start: $(cat "$tmp/ssh-kill.err")"
# The session's processes are sshd's children and theirs; the listener
# stays.
session=$(descendants "$sshd_pid")
[ -n "$session" ] || fail "no sshd session process"
for p in $session; do
  [ "$(cat "/proc/$p/comm" 2>/dev/null)" != sshd ] ||
    kill -KILL "$p" 2>/dev/null || :
done
t0=$(date +%s%N)
for ((n = 0; n < 100; n++)); do
  _alive "$ssh_pid" || break
  sleep 0.1
done
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
for p in $session; do
  kill -KILL "$p" 2>/dev/null || :       # the remote `sleep 30`
done
if _alive "$ssh_pid"; then
  problem "sshd killed mid-session: ssh still running after $ms ms"
  kill_tree "$ssh_pid"
elif [ "$ms" -gt 5000 ]; then
  problem "sshd killed mid-session: ssh took $ms ms to end"
fi
stop_pid "$ssh_pid"
[ "$_status" -ne 0 ] ||
  problem "sshd killed mid-session: ssh exited 0"

check_problems
