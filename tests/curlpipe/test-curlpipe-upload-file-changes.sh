#!/usr/bin/env bash
# test-curlpipe-upload-file-changes.sh: a regular file on standard input
# is sent with its size at the start as Content-Length; if it changes
# while it is sent, the promise is kept or the upload fails, never more
# nor fewer bytes than promised on the connection:
#  - a file that grows ("DELETE /victim ..." appended) sends exactly the
#    promised bytes, then fails with 26 (a read error) saying the file
#    grew: what follows the body on a keep-alive connection would be
#    read by the server as the next request;
#  - a file that shrinks below the promised length fails with 26 saying
#    where it ended, promptly (libcurl would wait for the rest).
# The raw server's /count-late reads nothing for 2 s once it has the
# request head (so the upload waits on full socket buffers while the
# file changes), then counts every byte after the head.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

start_raw_server
url=http://127.0.0.1:$raw_port/count-late
# Far more than loopback's socket buffers hold (a few MiB each way); not
# a multiple of a read's size, so that the last read of the promised
# bytes also brings the bytes the file grew by (libcurl stops by itself
# when a read ends exactly at the Content-Length).
size=$((32 * 1024 * 1024 + 5))

# change KIND: curlpipe -s $url with a file of $size bytes as standard
# input, changed (KIND grow or shrink) once the server has the request
# head.  Sets $st, $got (the body bytes the server counted).
change ()
{
  local kind=$1 pid n
  make_random_file "$tmp/in" "$size"
  : >"$tmp/raw.log"
  timeout 30 "$CURLPIPE" -s "$url" <"$tmp/in" >"$tmp/out" 2>"$tmp/err" &
  pid=$!
  _pids+=("$pid")
  for ((n = 0; n < 100; n++)); do
    grep -q '^count-late$' "$tmp/raw.log" && break
    sleep 0.1
  done
  if [ "$kind" = grow ]; then
    printf 'DELETE /victim HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n' >>"$tmp/in"
  else
    truncate -s 1M "$tmp/in"
  fi
  st=0
  wait "$pid" || st=$?
  for ((n = 0; n < 100; n++)); do
    grep -q '^count ' "$tmp/raw.log" && break
    sleep 0.1
  done
  got=$(sed -n 's/^count //p' "$tmp/raw.log")
}

shown=${url//./\\.}
change grow
if [ "$st" -ne 26 ]; then
  problem "a file that grew: exit status $st (expected 26);" \
          "stderr: $(cat "$tmp/err")"
elif ! grep -Eq "^curlpipe: $shown: standard input \(a regular file\) grew past the $size bytes it had at the start: the rest was not sent$" "$tmp/err"; then
  problem "a file that grew: the message does not say so: $(cat "$tmp/err")"
fi
[ "$got" = "$size" ] ||
  problem "a file that grew: the server counted '$got' body bytes" \
          "(expected $size: nothing past the Content-Length)"

change shrink
if [ "$st" -ne 26 ]; then
  problem "a file that shrank: exit status $st (expected 26);" \
          "stderr: $(cat "$tmp/err")"
elif ! grep -Eq "^curlpipe: $shown: standard input \(a regular file\) ended after [0-9]+ of the $size bytes it had at the start$" "$tmp/err"; then
  problem "a file that shrank: the message does not say so: $(cat "$tmp/err")"
fi

check_problems
