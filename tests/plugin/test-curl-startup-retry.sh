#!/usr/bin/env bash
# test-curl-startup-retry.sh: a server that is busy when nbdkit starts
# (its first answer is 503) is asked again after the back-off, and
# nbdkit then serves the image; the retry during start-up must not crash
# nbdkit (nbdkit 1.32 aborts in nbdkit_nanosleep called from
# .get_ready, when its standard input is readable, as here: /dev/null).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy

make_random_file "$tmp/disk.img" $((1024 * 1024 + 5))
start_fault_server first-503-once "$tmp/disk.img"
start_nbdkit ro -r -v "$PLUGIN" "http://127.0.0.1:$fault_port/disk.img" \
  retry-delay=0.1 </dev/null
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
assert_same_file "$tmp/disk.img" "$tmp/out.img"
stop_nbdkit ro
assert_grep_i "$tmp/ro.err" "retry 1 of"
probes=$(grep -c '^GET .*range=bytes=0-8191 ' "$tmp/fault.log" || :)
[ "$probes" -ge 2 ] || fail "the probe was not asked again ($probes GETs)"
grep -q 'status=503' "$tmp/fault.log" || fail "no 503 was sent"
