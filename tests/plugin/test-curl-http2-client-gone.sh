#!/usr/bin/env bash
# test-curl-http2-client-gone.sh: a client that goes away while its read
# waits for a multiplexed HTTP/2 stream the server never answers frees
# the read within a second or two, not after timeout= (30 s here).  Over
# HTTP/2 the transfer runs in the plugin's own thread, which cannot ask
# nbdkit whether the client is still there: the nbdkit thread that waits
# for it asks, and has the transfer stopped.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh
requires_h2
make_cert

make_random_file "$tmp/orig.img" $((2 * 1024 * 1024))
# Every GET after the probe gets its headers and then nothing.
start_h2_fault_server stall-always "$tmp/orig.img" 1
start_nbdkit gone -r -v "$PLUGIN" "https://127.0.0.1:$h2_port/disk.img" \
  cainfo="$tmp/cert.pem" http-version=2TLS timeout=30 retries=0 \
  readahead-size=0
grep -q 'HTTP/2: requests as streams' "$tmp/gone.err" ||
  fail "not multiplexed: $(grep -i 'http/2\|multiplexed' "$tmp/gone.err")"

# Not the nbdsh function: its subshell and timeout would outlive the
# kill below, and the client with them.
"$PYTHON_NBD" -m nbd -u "$uri" -c 'h.pread(4096, 1048576)' \
  >"$tmp/read.out" 2>&1 &
reader=$!
_pids+=("$reader")
wait_log "$tmp/h2.log" 'fault=stall'
sleep 0.5
kill -9 "$reader"
t0=$EPOCHREALTIME
wait_log "$tmp/gone.err" 'the client disconnected'
secs=$(seconds_since "$t0")
echo "the read stopped ${secs} s after its client went"
awk -v s="$secs" 'BEGIN { exit !(s < 5) }' ||
  fail "the read went on ${secs} s after its client went"
