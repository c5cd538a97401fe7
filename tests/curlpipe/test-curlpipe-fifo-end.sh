#!/usr/bin/env bash
# test-curlpipe-fifo-end.sh: a named pipe whose writer has already
# closed when curlpipe gets to it (the writer wrote a few bytes and
# left): the upload ends with those bytes, as from any pipe, whether
# the FIFO is standard input or -T's file.  Linux never reports the end
# of a FIFO to a description opened after its last writer closed, so
# curlpipe, which reads through a description of its own, waited
# forever here.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

start_nginx_put
url=http://127.0.0.1:$port/put
mkfifo "$tmp/fifo"

# A writer that, a second from now, writes "hello" to the FIFO and
# closes it.  (Started before the redirection that opens the FIFO,
# which waits for it.)
writer ()
{
  ( sleep 1; printf hello >"$tmp/fifo" ) &
  writer_pid=$!
}

# check NAME STATUS: curlpipe ended in time with 0 and uploaded "hello".
check ()
{
  local name=$1 st=$2
  wait "$writer_pid" || :
  [ "$st" -ne 124 ] || fail "($name) curlpipe still waited after 10 s"
  [ "$st" -eq 0 ] || fail "($name) curlpipe exited with $st"
  [ "$(cat "$tmp/www/$name.img")" = hello ] ||
    fail "($name) the upload is '$(cat "$tmp/www/$name.img")', not hello"
}

writer
st=0
timeout 10 "$CURLPIPE" -sf "$url/stdin.img" <"$tmp/fifo" || st=$?
check stdin "$st"

writer
st=0
timeout 10 "$CURLPIPE" -sf -T "$tmp/fifo" "$url/file.img" || st=$?
check file "$st"
