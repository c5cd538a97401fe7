#!/usr/bin/env bash
# test-curl-spares-closed.sh: a server that closes a connection when its
# first request comes late (helpers/fault-server.py drop-idle-first: more
# than 0.2 s after it was accepted, unanswered, with a reset), 30 ms away
# (helpers/linkem), so that every spare connection opened during the probe
# fails its first request as if the server's close had crossed it.
# With retries=0, a copy a second after start-up must still be
# byte-exact: each such request is asked again at once on a new
# connection, not counted as a retry, and the other spares are closed.
# Before, the read failed ("Connection reset by peer (retries
# exhausted)"), and with retries it waited the retry delay.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy

size=$((3 * 1024 * 1024 + 11))
make_random_file "$tmp/disk.img" "$size"
start_fault_server drop-idle-first "$tmp/disk.img"
start_linkem "$fault_port" 30

# No head start: it would take the spares before the server's close.
start_nbdkit spares -r -v -D curl.headstart=0 "$PLUGIN" \
  "http://127.0.0.1:$linkem_port/disk.img" \
             retries=0
wait_log "$tmp/spares.err" ': 15 spare connections open$'
sleep 1
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img" ||
  fail "the copy failed (status $?)"
assert_same_file "$tmp/disk.img" "$tmp/out.img"
stop_nbdkit spares
dropped=$(grep -c '^drop-idle-first: closed' "$tmp/fault.log" || :)
echo "the server closed $dropped connections unanswered"
[ "$dropped" -ge 1 ] || fail "no spare was taken: the test did not test"
grep -q 'the spare connection had been closed: asking again on a new' \
  "$tmp/spares.err" || fail "no request was asked again on a new connection"
if grep -E '(^|: )error: ' "$tmp/spares.err"; then
  fail "nbdkit reported errors"
fi
