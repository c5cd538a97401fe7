#!/usr/bin/env bash
# test-curlpipe-status-header.sh: only an answer's first line (or the
# first after the blank line that ends a 1xx answer's or a followed
# redirect's headers) is a status line.  A header inside the header
# block whose name starts with "HTTP/" ("HTTP/1.1 200 OK: x", "HTTP/x: y",
# sent by the raw server after "Transfer-Encoding: chunked") is a header
# (libcurl refuses one without a colon, as for curl): the chunked body
# is decoded ("hello" on standard output, exit 0, as curl writes it),
# not written with its framing, and the answer's last chunk ends a
# tunnel whose standard input stays open (exit 0 within 3 s, not a wait
# for standard input).  -D - shows the header as it came, and
# %{num_headers} counts it.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

start_raw_server
base=http://127.0.0.1:$raw_port

for mode in status-header status-colon; do
  st=0
  curlpipe -s "$base/$mode" </dev/null >"$tmp/out" 2>"$tmp/err" || st=$?
  [ "$st" -eq 0 ] ||
    problem "$mode: exit status $st (expected 0); stderr: $(cat "$tmp/err")"
  printf hello | cmp -s - "$tmp/out" ||
    problem "$mode: standard output is '$(od -c "$tmp/out" | head -3)'," \
            "not 'hello'"

  # Standard input open and idle: the last chunk ends the exchange.
  exec 3< <(sleep 30)
  writer=$!
  _pids+=("$writer")
  st=0
  t0=$(date +%s%N)
  timeout 10 "$CURLPIPE" -s "$base/$mode" <&3 >"$tmp/out" 2>"$tmp/err" ||
    st=$?
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  exec 3<&-
  stop_pid "$writer"
  if [ "$st" -ne 0 ] || [ "$ms" -gt 3000 ]; then
    problem "$mode, standard input open: exit status $st after $ms ms" \
            "(expected 0 within 3 s); stderr: $(cat "$tmp/err")"
  fi
  printf hello | cmp -s - "$tmp/out" ||
    problem "$mode, standard input open: standard output is" \
            "'$(od -c "$tmp/out" | head -3)', not 'hello'"
done

# The headers as they came, then the body; two headers after the
# status line.
st=0
curlpipe -s -D - -w '%{num_headers}' "$base/status-header" </dev/null \
         >"$tmp/out" 2>"$tmp/err" || st=$?
printf '%s\r\n' 'HTTP/1.1 200 OK' 'Transfer-Encoding: chunked' \
       'HTTP/1.1 200 OK: x' '' >"$tmp/expected"
printf hello2 >>"$tmp/expected"
[ "$st" -eq 0 ] && cmp -s "$tmp/expected" "$tmp/out" ||
  problem "-D - -w %{num_headers}: exit status $st, standard output" \
          "'$(od -c "$tmp/out" | head -5)'; stderr: $(cat "$tmp/err")"

check_problems
