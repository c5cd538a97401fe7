#!/usr/bin/env bash
# test-curl-short-body.sh: a server that closes the connection halfway
# through every 206 body (but answers the probe's first 8 KiB and 1-byte
# ranges correctly): each such read is tried retries=2 more times and is then an
# EIO error, never short or padded data, and the plugin recovers: a later
# read that the server answers in full gives the right byte.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

fault_export short-body $((1024 * 1024 + 3)) retries=2 retry-delay=0.05
# One read at a time, and a clean disconnect, so that what is checked is
# each read's own answer.
nbdsh -u "$uri" -c '
import errno, os
size = int(os.environ["SIZE"])
data = open(os.environ["FILE"], "rb").read()
for off, n in ((0, 65536), (40960, 512), (size - 2, 2), (500000, 100000)):
    try:
        h.pread(n, off)
    except nbd.Error as e:
        assert e.errnum == errno.EIO, "read at %d: %s" % (off, e.string)
    else:
        raise SystemExit("a truncated read at %d was reported done" % off)
    # The connection that broke must not break the next request.
    assert h.pread(1, off + 1) == data[off + 1:off + 2], "1-byte read differs"
print("ok")
h.shutdown()
' >"$tmp/nbdsh.out" 2>&1 || {
  cat "$tmp/nbdsh.out" >&2
  fail "truncated reads were not all errors"
}
stop_nbdkit ro
sent=$(grep -c ' status=206 ' "$tmp/fault.log" || :)
[ "$sent" -ge 9 ] || fail "the server answered only $sent ranged GETs"
# Each truncated range was asked for three times (once and two retries).
awk '$3 ~ /^range=bytes=/ && $3 != "range=bytes=0-8191" && $NF != "sent=1" {
       n[$3]++ }
     END { for (r in n) if (n[r] != 3) { print r, n[r]; bad++ }
           exit bad > 0 }' "$tmp/fault.log" >"$tmp/tries.out" ||
  fail "ranges not tried exactly 3 times: $(cat "$tmp/tries.out")"
assert_grep_i "$tmp/ro.err" "retries exhausted"
