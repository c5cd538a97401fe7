#!/usr/bin/env bash
# test-curlpipe-upload-cut.sh: a server that reads 1 MiB of a 64 MiB body,
# answers 200 with a Content-Length ("ok\n") and closes without
# "Connection: close" has cut the upload short.  Where a length was
# promised (a regular file, --upload-size, -H 'Content-Length: N'),
# curlpipe exits 55 (as curl does), -f included, writes the answer, and
# its message says how much of the promised body went out (not that
# standard input had more than N bytes: it had exactly N).  Where none
# was (a pipe, sent chunked), the answer's end is the end of a tunnel:
# exit 0.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

start_raw_server
url=http://127.0.0.1:$raw_port/read-1m
# Larger than what loopback's socket buffers can take in (tcp_rmem's
# and tcp_wmem's largest, 32 and 4 MiB on Debian): with 6 MiB, a slow
# server let every byte reach the buffers before it closed.
size=$((64 * 1024 * 1024))
make_random_file "$tmp/in" "$size"
shown=${url//./\\.}
cut_msg="^curlpipe: $shown: the server answered before the whole body was"
cut_msg+=" sent: [0-9]+ of the $size bytes of its Content-Length went out$"

# cut KIND EXPECTED ARGS...: curlpipe ARGS with the file as standard
# input (KIND file) or through a pipe (KIND pipe); checks the exit
# status, the answer and the message.
cut ()
{
  local kind=$1 expected=$2 st=0
  shift 2
  if [ "$kind" = file ]; then
    curlpipe "$@" "$url" <"$tmp/in" >"$tmp/out" 2>"$tmp/err" || st=$?
  else
    cat "$tmp/in" | curlpipe "$@" "$url" >"$tmp/out" 2>"$tmp/err" || st=$?
  fi
  if [ "$st" -ne "$expected" ]; then
    problem "$kind $*: exit status $st (expected $expected);" \
            "stderr: $(cat "$tmp/err")"
    return
  fi
  [ "$(cat "$tmp/out")" = ok ] ||
    problem "$kind $*: the answer was not written: '$(cat "$tmp/out")'"
  if [ "$expected" -eq 0 ]; then
    [ ! -s "$tmp/err" ] || problem "$kind $*: a message: $(cat "$tmp/err")"
  elif [ "$(wc -l <"$tmp/err")" -ne 1 ] ||
         ! grep -Eq "$cut_msg" "$tmp/err"; then
    problem "$kind $*: the message is not one line saying how much of the" \
            "body went out: $(cat "$tmp/err")"
  fi
}

cut file 55 -s
cut file 55 -sf
cut pipe 55 -s --upload-size "$size"
cut pipe 55 -sf -H "Content-Length: $size"
cut pipe 0 -s
cut pipe 0 -sf

check_problems
