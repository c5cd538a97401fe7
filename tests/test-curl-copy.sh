#!/usr/bin/env bash
# test-curl-copy.sh: nbdcopy of a whole read-only export gives the served
# bytes, for a size that is not a multiple of 4096; every read is an exact
# "Range: bytes=A-B" that nginx answers 206, and none reaches past the
# last byte (a range one byte too long is a classic bug).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")}/functions.sh"
requires_plugin
requires nbdcopy

size=$((10 * 1024 * 1024 + 1234))
start_nginx
make_random_file "$tmp/www/disk.img" "$size"

start_nbdkit ro -r "$PLUGIN" "http://127.0.0.1:$port/disk.img"
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
stop_nbdkit ro
assert_same_file "$tmp/www/disk.img" "$tmp/out.img"

# Log fields: CONNECTION METHOD RANGE STATUS BODY_BYTES URI.
awk -v size="$size" '
  $2 != "GET" { next }
  {
    gets++
    if ($3 !~ /^bytes=[0-9]+-[0-9]+$/) {
      print "GET without an exact single range: " $0; bad++; next
    }
    split(substr($3, 7), r, "-")
    a = r[1] + 0; b = r[2] + 0
    if (b < a) { print "empty or reversed range: " $0; bad++ }
    if (b >= size) { print "range past the last byte " size - 1 ": " $0; bad++ }
    if ($4 != 206) { print "range not answered 206: " $0; bad++ }
    if ($5 != b - a + 1) { print "body is not the range length: " $0; bad++ }
    if (b == size - 1) tail++
  }
  END {
    if (gets < 2) { print "only " gets " GET requests"; bad++ }
    if (!tail) { print "no range ended at the last byte " size - 1; bad++ }
    exit bad > 0
  }' "$tmp/access.log" >"$tmp/ranges.out" || {
  cat "$tmp/ranges.out" >&2
  fail "nginx access log shows bad ranges"
}
