#!/usr/bin/env bash
# test-curl-416-inside.sh: a 416 Range Not Satisfiable for a range
# inside the object (caching proxies with a short copy answer so) is
# asked again once, at once, on a new connection, and named in the
# error when it comes again.
#  (a) The fault server answers the first request for each range with
#      416 ("bytes */SIZE", the right size) and serves it when asked
#      again: nbdcopy makes a byte-exact copy, and every range that got
#      a 416 was asked again from another client port.
#  (b) Every request for a range gets 416: a read fails with EIO after
#      exactly two requests for its range, and the message names the
#      status, the range and the second try.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh
requires nbdcopy

size=$((4 * 1024 * 1024 + 512))

# (a)
fault_export stale-416 "$size" connections=4
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
assert_same_file "$tmp/disk.img" "$tmp/out.img"
stop_nbdkit ro
stop_pid "$fault_pid"
# Each 416'd range: asked again, the second time from another port.
awk '$1 == "port" { port[$3] = port[$3] " " $2; n[$3]++ }
     END {
       for (r in n) {
         if (n[r] == 1) continue
         split(port[r], p, " ")
         if (n[r] != 2 || p[1] == p[2]) { print r, n[r], port[r]; bad++ }
         twice++
       }
       if (twice == 0) { print "no range was asked twice"; bad++ }
       exit bad > 0
     }' "$tmp/fault.log" >"$tmp/ports.out" || {
  cat "$tmp/ports.out" >&2
  fail "(a) a 416 was not asked again once on a new connection"
}
grep -q 'status=416' "$tmp/fault.log" || fail "(a) no 416 was sent"

# (b)
mv "$tmp/fault.log" "$tmp/fault-a.log"
fault_export always-416 "$size"
read_fails 1048576 65536 || fail "(b) the read did not fail with EIO"
stop_nbdkit ro
asked=$(grep -c '^port [0-9]* range=1048576-1114111$' "$tmp/fault.log" || :)
[ "$asked" -eq 2 ] || fail "(b) the range was asked $asked times, not 2"
assert_grep_i "$tmp/ro.err" "416 Range Not Satisfiable" \
  "bytes 1048576-1114111" "again on a new connection"
