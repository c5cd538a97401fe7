#!/usr/bin/env bash
# test-curl-status-header.sh: only an answer's first line (or the first
# after a 1xx answer's headers) is its status line.  The fault server's
# status-header mode ends every header block with headers named like
# status lines ("HTTP/x: y", "HTTP/1.1 200 OK: x"), which curl reads as
# headers: nbdkit starts (the probe's answer is not refused) and nbdcopy
# copies the object byte for byte.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy
requires curl --version

size=$((1024 * 1024 + 512))
fault_export status-header "$size"
# The headers were sent, and curl takes them for headers.
curl -s -r 0-9 -D "$tmp/headers" -o /dev/null \
     "http://127.0.0.1:$fault_port/disk.img" ||
  fail "curl could not read the status-header server"
grep -q '^HTTP/x: y' "$tmp/headers" ||
  fail "the fault server sent no 'HTTP/x: y' header: $(cat "$tmp/headers")"
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
assert_same_file "$tmp/disk.img" "$tmp/out.img"
stop_nbdkit ro
