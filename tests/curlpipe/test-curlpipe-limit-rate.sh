#!/usr/bin/env bash
# test-curlpipe-limit-rate.sh: --limit-rate RATE (curl's spelling and
# suffixes: 50K is 51200 bytes per second) holds the upload and the
# download to RATE: 200 KiB sent at 50K to a sink takes 4 s (at least 3
# here), and so does 200 KiB through the echo; every byte arrives.
# Without the option the same upload takes well under a second.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

start_stream_server
base=http://127.0.0.1:$stream_port
# The sink's pattern (helpers/pattern.h): byte i is (i * 7 + i / 65536).
"$PYTHON" -c '
import sys
sys.stdout.buffer.write(bytes((i * 7 + i // 65536) & 0xff
                              for i in range(200 * 1024)))' >"$tmp/in"

# timed PATH ARGS...: the input through a pipe to $base/PATH; status in
# $st, milliseconds in $ms, stdout in $tmp/out.
timed ()
{
  local path=$1 t0
  shift
  st=0
  t0=$(date +%s%N)
  cat "$tmp/in" | curlpipe -s "$@" "$base/$path" >"$tmp/out" \
    2>"$tmp/err" || st=$?
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
}

timed sink
[ "$st" -eq 0 ] && [ "$(cat "$tmp/out")" = "ok 204800" ] ||
  fail "the upload without a limit failed: $st, $(cat "$tmp/out" "$tmp/err")"
[ "$ms" -lt 2000 ] || fail "200 KiB without a limit took $ms ms"

timed sink --limit-rate 50K
if [ "$st" -ne 0 ]; then
  problem "--limit-rate 50K, sink: exit status $st: $(cat "$tmp/err")"
else
  [ "$(cat "$tmp/out")" = "ok 204800" ] ||
    problem "--limit-rate 50K, sink: the server says '$(cat "$tmp/out")'"
  [ "$ms" -ge 3000 ] ||
    problem "--limit-rate 50K: 200 KiB went to the sink in $ms ms"
fi

timed echo --limit-rate 50K
if [ "$st" -ne 0 ]; then
  problem "--limit-rate 50K, echo: exit status $st: $(cat "$tmp/err")"
else
  cmp -s "$tmp/in" "$tmp/out" ||
    problem "--limit-rate 50K, echo: what came back differs"
  [ "$ms" -ge 3000 ] ||
    problem "--limit-rate 50K: 200 KiB went through the echo in $ms ms"
fi

check_problems
