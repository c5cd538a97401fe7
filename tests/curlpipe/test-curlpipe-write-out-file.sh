#!/usr/bin/env bash
# test-curlpipe-write-out-file.sh: -w @FILE and -w @- read at most 1 MiB
# (1048576 bytes, line ends included): a format of exactly that much is
# used, one byte more is refused at once, before any transfer, with exit
# 2 and a message saying so; an endless one (-w @/dev/zero, `yes |
# curlpipe -w @-`) is refused the same way within 10 s, never read to
# the end of memory.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

start_stream_server
url=http://127.0.0.1:$stream_port/status/200
cap=$((1024 * 1024))

# A format of exactly $cap bytes: 'x' and a line end every 1024 bytes.
head -c "$cap" /dev/zero | tr '\0' x | fold -w 1023 | head -c "$cap" \
  >"$tmp/format"
[ "$(file_size "$tmp/format")" -eq "$cap" ] || fail "bad format file"
st=0
curlpipe -s -w "@$tmp/format" "$url" </dev/null >"$tmp/out" \
         2>"$tmp/err" || st=$?
[ "$st" -eq 0 ] ||
  problem "-w @FILE of $cap bytes: exit status $st: $(cat "$tmp/err")"
# The body ("200 OK"-like text of /status/200) then the format's x's.
xs=$(tr -cd x <"$tmp/out" | wc -c)
[ "$xs" -eq "$(tr -cd x <"$tmp/format" | wc -c)" ] ||
  problem "-w @FILE of $cap bytes: $xs x's written"

# refused NAME ARGS...: curlpipe ARGS must exit 2 within 10 s with one
# message "curlpipe: -w @NAME: longer than 1048576 bytes" (and the
# usage hint); the stream server sees no request.
refused ()
{
  local name=$1 t0 ms
  shift
  st=0
  t0=$(date +%s%N)
  timeout 10 "$CURLPIPE" -s "$@" "$url" >"$tmp/out" 2>"$tmp/err" || st=$?
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  if [ "$st" -ne 2 ]; then
    problem "-w @$name: exit status $st after $ms ms (expected 2);" \
            "stderr: $(head -c 300 "$tmp/err")"
  elif [ "$(head -1 "$tmp/err")" != \
         "curlpipe: -w @$name: longer than $cap bytes" ]; then
    problem "-w @$name: the message is '$(head -1 "$tmp/err")'"
  fi
}

head -c $((cap + 1)) /dev/zero | tr '\0' x >"$tmp/big"
: >"$tmp/stream.log"
refused "$tmp/big" -w "@$tmp/big" </dev/null
refused /dev/zero -w @/dev/zero </dev/null
yes | refused - -w @-
[ ! -s "$tmp/stream.log" ] ||
  problem "a refused -w @FILE still made a request: $(cat "$tmp/stream.log")"

check_problems
