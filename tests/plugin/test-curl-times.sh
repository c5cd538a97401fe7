#!/usr/bin/env bash
# test-curl-times.sh: -D curl.times=1 prints, when the plugin unloads,
# the time all exchanges spent in each of libcurl's phases, with their
# number: a line per phase, none above total, pre-transfer <=
# start-transfer, start-transfer above 0, TLS 0 over http, redirect 0
# (the plugin follows redirects itself); and no line per request.
# -D curl.requests=1 prints a line per request (range, status, latency)
# and no totals.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy

size=$((4 * 1024 * 1024 + 1234))
start_nginx
make_random_file "$tmp/www/disk.img" "$size"
url="http://127.0.0.1:$port/disk.img"
per_request=' ranges: HTTP [0-9]+: [0-9]+ us$'

start_nbdkit times -r -v -D curl.times=1 "$PLUGIN" "$url"
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
stop_nbdkit times
assert_same_file "$tmp/www/disk.img" "$tmp/out.img"

grep -E "$per_request" "$tmp/times.err" &&
  fail "per-request lines without -D curl.requests=1"
n=$(sed -n 's/.*debug: times (-D curl.times=1): \([0-9]*\) exchanges.*/\1/p' \
      "$tmp/times.err")
[ -n "$n" ] || fail "no totals at unload"
# The probe's GET, and at least one GET per 2 MiB read by
# nbdcopy's 256 KiB requests batched into at most 8 MiB.
[ "$n" -ge 3 ] || fail "totals over $n exchanges: too few"
phase ()
{
  local v
  v=$(sed -n "s/.*debug: $1  *\([0-9]*\.[0-9]\{6\}\) s\$/\1/p" \
        "$tmp/times.err")
  [ -n "$v" ] || fail "no total for $1"
  echo "$v"
}
dns=$(phase "name resolution")
conn=$(phase "connect")
app=$(phase "app connect (TLS)")
pre=$(phase "pre-transfer")
start=$(phase "start-transfer")
total=$(phase "total")
redir=$(phase "redirect")
echo "$n exchanges: dns $dns connect $conn tls $app pre $pre" \
     "start $start total $total redirect $redir"
# Each phase ends within its exchange, so no sum passes total's.  (On
# a reused connection libcurl may report a name resolution time and a
# connect time of 0, so those two sums need not be in order.)
awk -v d="$dns" -v c="$conn" -v a="$app" -v p="$pre" -v s="$start" \
    -v t="$total" -v r="$redir" 'BEGIN {
  exit !(d <= t && c <= t && p <= s && s <= t && s > 0 && t < 600 &&
         a == 0 && r == 0)
}' || fail "implausible totals (see above)"

start_nbdkit requests -r -v -D curl.requests=1 "$PLUGIN" "$url"
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out2.img"
stop_nbdkit requests
assert_same_file "$tmp/www/disk.img" "$tmp/out2.img"
grep -E "pread $url: [0-9]+\+[0-9]+ in [0-9]+$per_request" \
  "$tmp/requests.err" >/dev/null ||
  fail "no per-request lines with -D curl.requests=1"
grep -E "GET $url: 0\+8192 in 1 ranges: HTTP 206: " \
  "$tmp/requests.err" >/dev/null || fail "no line for the probe's GET"
grep -F 'times (-D curl.times=1)' "$tmp/requests.err" &&
  fail "totals without -D curl.times=1"
exit 0
