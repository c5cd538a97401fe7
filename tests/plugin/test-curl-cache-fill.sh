#!/usr/bin/env bash
# test-curl-cache-fill.sh: with cache-dir= and cache-fill=true, the plugin
# fetches the whole object into the cache by itself while no client reads,
# once, and says so in -v; then, the origin gone, a client still copies
# every byte from the cache.  A VM booted from a URL keeps running
# through an outage of the origin once its image is filled.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy

size=$((24 * 1024 * 1024 + 4321))
serve_image "$size"
start_nbdkit fill -r -v "$PLUGIN" "$url" cache-dir="$tmp/cache" \
  cache-fill=true
wait_log "$tmp/fill.err" "read chain: cache,"
# The fill ends on its own, with no client: at most 30 s.
for ((n = 0; n < 300; n++)); do
  grep -q "cache fill: done" "$tmp/fill.err" && break
  sleep 0.1
done
grep -q "cache fill: done" "$tmp/fill.err" ||
  fail "the fill did not end in 30 s"
grep -q "cache fill: done (some reads failed)" "$tmp/fill.err" &&
  fail "the fill's reads failed"
grep -q "cache fill: [0-9]* of [0-9]* MiB cached (100%)" "$tmp/fill.err" ||
  fail "the fill's progress shows no 100%"

# Every block is on disk, fetched once (the probe's first bytes aside).
blocks=$(find "$tmp/cache" -name '*.blk' | wc -l)
[ "$blocks" -eq 25 ] || fail "$blocks block files, not 25"
sent=$(awk '{s += $5} END {print s + 0}' "$tmp/access.log")
[ "$sent" -ge "$size" ] && [ "$sent" -le $((size + size / 50)) ] ||
  fail "the origin sent $sent bytes for an object of $size"

# The origin goes; the export still serves every byte.
stop_pid "$nginx_pid"
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
assert_same_file "$image" "$tmp/out.img"
stop_nbdkit fill
grep -q "cache: $((size / 1024)) KiB served from disk" "$tmp/fill.err" ||
  fail "not everything came from disk: $(grep 'served from disk' \
    "$tmp/fill.err")"
