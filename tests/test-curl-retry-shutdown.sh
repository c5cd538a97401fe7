#!/usr/bin/env bash
# test-curl-retry-shutdown.sh: a read that waits to retry (here for the
# server's Retry-After: 30) does not hold nbdkit's shutdown: SIGTERM
# ends nbdkit within a few seconds, not after the back-off.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")}/functions.sh"
requires_plugin
requires_nbdsh

fault_export 503-long $((1024 * 1024)) retries=5
# One read in the background: it gets 503 with Retry-After: 30.
nbdsh -u "$uri" -c 'h.pread(65536, 4096)' >"$tmp/read.out" 2>&1 &
reader=$!
_pids+=("$reader")
for ((n = 0; n < 100; n++)); do
  grep -q ' status=503 ' "$tmp/fault.log" 2>/dev/null && break
  sleep 0.1
done
grep -q ' status=503 ' "$tmp/fault.log" || fail "the read never got its 503"
sleep 0.5                       # into the back-off
t0=$EPOCHREALTIME
kill -TERM "$nbdkit_pid"
for ((n = 0; n < 150; n++)); do
  _alive "$nbdkit_pid" || break
  sleep 0.1
done
secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
echo "nbdkit exited ${secs} s after SIGTERM"
_alive "$nbdkit_pid" && fail "nbdkit still running ${secs} s after SIGTERM"
awk -v s="$secs" 'BEGIN { exit !(s < 5) }' ||
  fail "nbdkit took ${secs} s to exit: the retry back-off held it"
stop_pid "$nbdkit_pid"
stop_pid "$reader"
retries=$(grep -c ' status=503 ' "$tmp/fault.log" || :)
[ "$retries" -eq 1 ] || fail "$retries requests were sent, expected 1"
