#!/usr/bin/env bash
# test-curl-header-script-rules.sh: header-script's output is held to
# header='s rules, at the first run and at every renewal.  Writes go to
# Apache mod_dav (partial PUT).
#  (a) A script that prints "Content-Length: 0" (which would make every
#      PUT send an empty body that the server takes) stops nbdkit at
#      start-up with a message naming the line and the header; a line
#      that is no header is named by its number only.
#  (b) A renewal that prints it fails the write that ran it with EIO:
#      no PUT leaves with the script's Content-Length, and the file on
#      disk has the writes before the renewal only.
#  (c) libcurl's "Name;" form (a header with an empty value), which
#      header= accepts, is accepted from the script too and sent.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

size=$((256 * 1024))
start_apache
make_random_file "$tmp/dav/disk.img" "$size"
chmod a+rw "$tmp/dav/disk.img"
cp "$tmp/dav/disk.img" "$tmp/orig.img"
url=http://127.0.0.1:$dav_port/disk.img

# (a)
expect_nbdkit_fails a "$PLUGIN" "$url" \
  'header-script=echo "X-Token: t"; echo "Content-Length: 0"'
assert_grep_i "$tmp/a.err" "header-script" "output line 2" \
  "Content-Length" "sets it itself"
grep -q '^PUT' "$tmp/dav-access.log" && fail "(a) a PUT reached Apache"

# What stands before ':' or ';' on a line that is no header may be a
# value: it is not printed.
expect_nbdkit_fails a2 "$PLUGIN" "$url" \
  'header-script=echo "session=s3cret-token; lang=en"'
assert_grep_i "$tmp/a2.err" "header-script" "output line 1" "not a valid token"
if grep -qF s3cret-token "$tmp/a2.err"; then
  fail "(a) the line's value was printed"
fi

# (b) Iteration 0 is good; every later one adds Content-Length: 0.
script='echo "X-Token: t$iteration"
[ "$iteration" -eq 0 ] || echo "Content-Length: 0"'
start_nbdkit b "$PLUGIN" "$url" "header-script=$script" \
  header-script-renew=1
DISK=$tmp/dav/disk.img ORIG=$tmp/orig.img nbdsh -u "$uri" -c '
import errno, os, time
h.pwrite(b"A" * 4096, 0)
time.sleep(1.5)
try:
    h.pwrite(b"B" * 4096, 8192)
except nbd.Error as e:
    assert e.errnum == errno.EIO, e.string
else:
    raise SystemExit("a write after a renewal with Content-Length: 0 "
                     "was reported done")
h.shutdown()
' || fail "(b) the write after the bad renewal did not fail"
stop_nbdkit b
assert_grep_i "$tmp/b.err" "header-script" "Content-Length" "sets it itself"
# The file: the first write, and nothing else changed.
{ head -c 4096 /dev/zero | tr '\0' A; tail -c +4097 "$tmp/orig.img"; } \
  >"$tmp/expected.img"
assert_same_file "$tmp/expected.img" "$tmp/dav/disk.img"
puts=$(grep -c '^PUT' "$tmp/dav-access.log" || :)
[ "$puts" -eq 1 ] || { cat "$tmp/dav-access.log" >&2;
                       fail "(b) $puts PUTs reached Apache, expected 1"; }

# (c) "X-Empty;" goes out as an empty header.
start_nbdkit c -r -v -D curl.verbose=1 "$PLUGIN" "$url" \
  'header-script=echo "X-Empty;"; echo "X-Token: t"'
nbdsh -u "$uri" -c 'h.pread(512, 65536)' || fail "(c) a read failed"
stop_nbdkit c
# (-D curl.verbose=1 shows what libcurl sent, values masked.)
grep -q '> X-Empty:' "$tmp/c.err" || fail "(c) X-Empty was not sent"
