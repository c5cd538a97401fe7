#!/usr/bin/env bash
# test-curlpipe-write-out-exitcode.sh: -w '%{exitcode}' prints the
# status curlpipe exits with, also when that status is decided last: a
# -D file whose buffered headers cannot be written when it is closed
# (/dev/full) makes curlpipe exit 23, and -w must say 23, not 0.  The
# body still comes first on standard output.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe
[ -w /dev/full ] || skip "no /dev/full"

start_stream_server
url=http://127.0.0.1:$stream_port/echo

st=0
printf 'body' | curlpipe -s -D /dev/full -w '[%{exitcode}]' "$url" \
  >"$tmp/out" 2>"$tmp/err" || st=$?
[ "$st" -eq 23 ] ||
  problem "-D /dev/full: exit status $st, not 23: $(cat "$tmp/err")"
[ "$(cat "$tmp/out")" = "body[$st]" ] ||
  problem "-D /dev/full -w '[%{exitcode}]': stdout is '$(cat "$tmp/out")'," \
          "not 'body[$st]' (the status curlpipe exited with)"
grep -q 'dev/full' "$tmp/err" ||
  problem "-D /dev/full: no message naming the file: $(cat "$tmp/err")"

# The same status with -o FILE on a good transfer: 0 and 0.
st=0
printf 'body' | curlpipe -s -o "$tmp/body" -w '[%{exitcode}]' "$url" \
  >"$tmp/out" 2>"$tmp/err" || st=$?
[ "$st" -eq 0 ] && [ "$(cat "$tmp/out")" = '[0]' ] ||
  problem "-o FILE -w: exit status $st, stdout '$(cat "$tmp/out")'"

check_problems
