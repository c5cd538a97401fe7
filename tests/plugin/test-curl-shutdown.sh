#!/usr/bin/env bash
# test-curl-shutdown.sh: nothing a request waits for holds up nbdkit's
# shutdown: SIGTERM ends nbdkit within a few seconds, not after the wait,
# (a) while a read waits to retry (the server's Retry-After: 30),
# (b) while a read waits for a server that stopped answering
#     (timeout=40), and
# (c) while a read waits for a header-script renewal that hangs
#     (timeout=40).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

# term_quickly WHAT: one read in the background, then (once WAIT-FOR is
# in the log, and half a second more) SIGTERM: nbdkit must be gone
# within 5 s.
term_quickly ()
{
  local what=$1 log=$2 pattern=$3 reader secs
  nbdsh -u "$uri" -c 'h.pread(65536, 4096)' >"$tmp/read.out" 2>&1 &
  reader=$!
  _pids+=("$reader")
  wait_log "$log" "$pattern"
  sleep 0.5
  term_timed "$nbdkit_pid" 150
  echo "$what: nbdkit exited ${secs} s after SIGTERM"
  _alive "$nbdkit_pid" && fail "$what: nbdkit still running ${secs} s after SIGTERM"
  awk -v s="$secs" 'BEGIN { exit !(s < 5) }' ||
    fail "$what: nbdkit took ${secs} s to exit"
  stop_pid "$nbdkit_pid"
  stop_pid "$reader"
}

# (a)
fault_export 503-long $((1024 * 1024)) retries=5
term_quickly "retry back-off" "$tmp/fault.log" ' status=503 '
retries=$(grep -c ' status=503 ' "$tmp/fault.log" || :)
[ "$retries" -eq 1 ] || fail "$retries requests were sent, expected 1"
stop_pid "$fault_pid"

# (b)
: >"$tmp/fault.log"
start_fault_server silent "$tmp/disk.img"
start_nbdkit silent -r "$PLUGIN" "http://127.0.0.1:$fault_port/disk.img" \
  timeout=40 retries=0
term_quickly "silent server" "$tmp/fault.log" '^silent: '
stop_pid "$fault_pid"

# (c) The script hangs from its second run on.
: >"$tmp/fault.log"
start_fault_server normal "$tmp/disk.img"
cat >"$tmp/script.sh" <<'EOF'
#!/bin/sh
[ "$iteration" -eq 0 ] || { echo hanging >"$0.hang"; exec sleep 60; }
echo "X-Token: t$iteration"
EOF
chmod +x "$tmp/script.sh"
start_nbdkit script -r "$PLUGIN" "http://127.0.0.1:$fault_port/disk.img" \
  timeout=40 retries=0 header-script="$tmp/script.sh" header-script-renew=1
sleep 1.5                       # the renewal is due
term_quickly "hanging header-script" "$tmp/script.sh.hang" hanging
