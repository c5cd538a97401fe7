#!/usr/bin/env bash
# test-curl-http2-only.sh: a server on loopback that speaks only HTTP/2
# (helpers/h2-fault-server.py offers only "h2" by ALPN) is served by
# default.  With http-version=auto a server nearer than 2 ms that
# answers the probe in HTTP/2 gets HTTP/1.1 from then on; this one
# refuses HTTP/1.1, so the plugin must find that out at start-up and
# stay on HTTP/2, not fail every read.  The server's answers take 1.4 to
# 2.4 ms here, so some runs measure it near and some far: four runs,
# each a byte-exact copy, the near ones saying why they kept HTTP/2 and
# having tried HTTP/1.1 on one connection only.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy
requires_h2
make_cert

size=$((4 * 1024 * 1024 + 11))
make_random_file "$tmp/orig.img" "$size"
start_h2_fault_server normal "$tmp/orig.img"
url=https://127.0.0.1:$h2_port/disk.img

near=0
for run in 1 2 3 4; do
  rm -f "$tmp/out.img"
  start_nbdkit "r$run" -r -v "$PLUGIN" "$url" cainfo="$tmp/cert.pem" \
    timeout=10 retries=1 retry-delay=0.05
  timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img" ||
    problem "run $run: nbdcopy failed: $(grep 'error' "$tmp/r$run.err" |
                                         head -2)"
  stop_nbdkit "r$run"
  cmp -s "$tmp/orig.img" "$tmp/out.img" ||
    problem "run $run: the copy differs from the image"
  ! grep -q 'not multiplexed' "$tmp/r$run.err" ||
    problem "run $run: $(grep 'not multiplexed' "$tmp/r$run.err")"
  if grep -q 'does not answer HTTP/1.1' "$tmp/r$run.err"; then
    near=$((near + 1))
  fi
  echo "run $run: $(grep -o 'came [0-9.]* ms' "$tmp/r$run.err")"
done
echo "runs that measured the server near: $near of 4"
# Each near run tried HTTP/1.1 once (a connection without ALPN's h2),
# and no run more than that.
tries=$(grep -c 'open alpn=none' "$tmp/h2.log" || :)
[ "$tries" -eq "$near" ] ||
  problem "$tries connections without HTTP/2, expected $near (one per near run)"
check_problems
