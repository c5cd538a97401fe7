#!/usr/bin/env bash
# test-curl-wrong-content-range.sh: a server whose 206 answers are for the
# wrong range (Content-Range and body one byte later) must never make the
# plugin return those bytes: each such read is an EIO error, while a
# correctly answered read still gives the right bytes.  The fault server
# answers 1-byte ranges (the size probe) and ranges that end at the last
# byte (it cannot shift those) correctly.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

fault_export wrong-content-range $((1024 * 1024 + 3))
# One read at a time, and a clean disconnect, so that what is checked is
# each read's own answer.
nbdsh -u "$uri" -c '
import errno, os
size = int(os.environ["SIZE"])
data = open(os.environ["FILE"], "rb").read()
assert h.get_size() == size
chunk = 65536
for off in range(0, size - chunk, chunk * 3):
    try:
        got = h.pread(chunk, off)
    except nbd.Error as e:
        assert e.errnum == errno.EIO, "read at %d: %s" % (off, e.string)
    else:
        right = got == data[off:off + chunk]
        raise SystemExit("read at %d returned data from a wrong range%s" %
                         (off, " (the right bytes)" if right else ""))
# Ranges that end at the last byte are answered correctly.
assert h.pread(4099, size - 4099) == data[-4099:], "tail read differs"
print("ok")
h.shutdown()
' >"$tmp/nbdsh.out" 2>&1 || {
  cat "$tmp/nbdsh.out" >&2
  fail "reads from wrong ranges were not all errors"
}
stop_nbdkit ro
assert_grep_i "$tmp/ro.err" range
