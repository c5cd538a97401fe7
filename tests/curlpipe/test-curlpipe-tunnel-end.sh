#!/usr/bin/env bash
# test-curlpipe-tunnel-end.sh: when the server ends its answer while
# standard input is still open and idle (a FIFO whose writer sleeps, a
# pipe from `sleep 30`), curlpipe writes the answer and exits 0 within
# 3 s; when the server drops the connection mid-answer (a FIN before the
# last chunk, or an RST), it exits promptly with curl's 18 (partial) or
# 56 (receive error), after writing what did arrive.  A tunnel whose far
# end is gone must not hang the program on the near end (ssh's
# ProxyCommand waits for curlpipe's output to end).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

start_stream_server
base=http://127.0.0.1:$stream_port
mkfifo "$tmp/fifo"

# Long enough to show a hang, short enough to keep a failing run short.
hang_limit=10

# tunnel KIND PATH: curlpipe -s $base/PATH with standard input open and
# silent: KIND "fifo" (a FIFO whose writer is `sleep 30`) or "pipe" (the
# output of `sleep 30`).  Sets $st (124: still running after
# $hang_limit s) and $ms; stdout in $tmp/out, stderr in $tmp/err.
tunnel ()
{
  local kind=$1 path=$2 writer t0
  if [ "$kind" = fifo ]; then
    # The writer's open waits for curlpipe's, then it holds the FIFO.
    sleep 30 >"$tmp/fifo" &
    writer=$!
    _pids+=("$writer")
    exec 3<"$tmp/fifo"
  else
    exec 3< <(sleep 30)
    writer=$!
    _pids+=("$writer")
  fi
  st=0
  t0=$(date +%s%N)
  timeout "$hang_limit" "$CURLPIPE" -s "$base/$path" <&3 \
          >"$tmp/out" 2>"$tmp/err" || st=$?
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  exec 3<&-
  stop_pid "$writer"
}

for kind in fifo pipe; do
  # The answer is over ("first\n" and the last chunk) while the upload
  # is still open; the server goes on reading it.
  tunnel "$kind" end-early
  if [ "$st" -ne 0 ] || [ "$ms" -gt 3000 ]; then
    problem "$kind: an answer that ended: exit status $st after $ms ms" \
            "(expected 0 within 3 s); stderr: $(cat "$tmp/err")"
  fi
  [ "$(cat "$tmp/out")" = first ] ||
    problem "$kind: the answer that ended was not written: '$(cat "$tmp/out")'"

  for path in drop reset; do
    tunnel "$kind" "$path"
    if [ "$st" -ne 18 ] && [ "$st" -ne 56 ] || [ "$ms" -gt 3000 ]; then
      problem "$kind: a connection the server dropped (/$path): exit" \
              "status $st after $ms ms (expected 18 or 56 within 3 s);" \
              "stderr: $(cat "$tmp/err")"
    elif ! grep -q '^curlpipe: ' "$tmp/err"; then
      problem "$kind: /$path: exit status $st without a message"
    fi
    # The bytes before a FIN are delivered (before an RST they may be
    # lost in the kernel, so /reset is not checked).
    [ "$path" != drop ] || [ "$(cat "$tmp/out")" = first ] ||
      problem "$kind: /drop: what arrived was not written:" \
              "'$(cat "$tmp/out")'"
  done
done

check_problems
