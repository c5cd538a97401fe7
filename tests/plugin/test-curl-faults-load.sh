#!/usr/bin/env bash
# test-curl-faults-load.sh: 8 nbdcopy clients at once (each with
# multi-conn, so 32 NBD connections) against one nbdkit whose server
# fails about 3% of range requests transiently (503, reset, truncated
# body): every copy is byte-exact, and the server's log shows that
# faults were injected and the ranges asked for again.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy

size=$((64 * 1024 * 1024 + 999))
make_random_file "$tmp/disk.img" "$size"
start_fault_server flaky "$tmp/disk.img"
# Batching off (-D curl.batch=1), so that nbdcopy's reads stay separate
# requests: 150 to 500 of them (read-ahead merges some), and 3% of that
# is several faults.
start_nbdkit ro -r -D curl.batch=1 "$PLUGIN" \
             "http://127.0.0.1:$fault_port/disk.img" retry-delay=0.05 timeout=5

pids=()
for i in 1 2 3 4 5 6 7 8; do
  timeout "$client_timeout" nbdcopy "$uri" \
    "$tmp/out$i.img" 2>"$tmp/nbdcopy$i.err" &
  pids+=($!)
done
failed=0
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || {
    cat "$tmp/nbdcopy$((i + 1)).err" >&2
    failed=$((failed + 1))
  }
done
stop_nbdkit ro
[ "$failed" -eq 0 ] || fail "$failed of 8 copies failed"
for i in 1 2 3 4 5 6 7 8; do
  assert_same_file "$tmp/disk.img" "$tmp/out$i.img"
done

# Faults: 503s, and 206 answers cut short (sent < the range's length).
faults=$(awk '/status=503/ { n++ }
              /status=206/ { split($NF, a, "="); split($3, r, "[=-]")
                             if ($3 !~ /,/ && a[2] + 0 < r[4] - r[3] + 1) n++ }
              END { print n + 0 }' "$tmp/fault.log")
gets=$(grep -c '^GET ' "$tmp/fault.log")
echo "$gets GET requests, $faults transient faults injected"
[ "$faults" -ge 3 ] || fail "only $faults faults injected in $gets GETs"
