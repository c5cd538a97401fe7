#!/usr/bin/env bash
# test-curl-validator-control.sh: an ETag or Last-Modified with control
# characters (here a CR followed by a second header) is never copied into
# If-Match / If-Unmodified-Since, so a server cannot inject headers into
# the plugin's requests; such a validator is not used, never echoed, and
# the disk is still served byte-exactly.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy

size=$((2 * 1024 * 1024 + 17))
fault_export control-validators "$size" -D curl.verbose=1
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
assert_same_file "$tmp/disk.img" "$tmp/out.img"
stop_nbdkit ro

gets=$(grep -c '^GET ' "$tmp/fault.log" || :)
[ "$gets" -gt 1 ] || fail "only $gets GETs reached the server"
if grep -q 'injected=yes' "$tmp/fault.log"; then
  grep 'injected=yes' "$tmp/fault.log" | head -5 >&2
  fail "a validator's control characters reached a request"
fi
# Nothing of the smuggled header is echoed in the plugin's messages
# (its own requests' headers are shown by -D curl.verbose=1, and the
# answers' headers are shown too, so look only at what the plugin sent).
if grep -E '^.*> .*X-Injected' "$tmp/ro.err"; then
  fail "the smuggled header appears in a request"
fi
