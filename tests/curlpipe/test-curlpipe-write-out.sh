#!/usr/bin/env bash
# test-curlpipe-write-out.sh: -w/--write-out FORMAT prints, as curl
# does, on standard output after the answer's body: %{http_code},
# %{size_upload} (the body bytes sent) and %{time_total} (seconds, with
# a fraction), and "\n" as a newline; with -o FILE the body goes to
# FILE and the -w line still to standard output.  -D/--dump-header FILE
# writes the answer's headers to FILE, and only the body goes to
# standard output.  With -f and an HTTP error, "-D -" still writes the
# headers to standard output (not standard error), and %{exitcode} is
# the exit status, 22.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

start_stream_server
url=http://127.0.0.1:$stream_port/echo

# run INPUT ARGS...: curlpipe ARGS with INPUT through a pipe; status in
# $st, stdout in $tmp/out, stderr in $tmp/err.
run ()
{
  local input=$1
  shift
  st=0
  printf '%s' "$input" | curlpipe "$@" >"$tmp/out" 2>"$tmp/err" || st=$?
  [ "$st" -eq 0 ] || problem "curlpipe $*: exit status $st: $(cat "$tmp/err")"
}

run abc -s -w '%{http_code}' "$url"
[ "$st" -ne 0 ] || [ "$(cat "$tmp/out")" = abc200 ] ||
  problem "-w '%{http_code}': stdout is '$(cat "$tmp/out")', not 'abc200'"

# A regular file: Content-Length, so size_upload is the body's size.
make_random_file "$tmp/in" 1000
st=0
curlpipe -s --write-out '%{http_code} %{size_upload} %{time_total}\n' \
  "$url" <"$tmp/in" >"$tmp/out" 2>"$tmp/err" || st=$?
[ "$st" -eq 0 ] || problem "--write-out: exit status $st: $(cat "$tmp/err")"
if [ "$st" -eq 0 ]; then
  head -c 1000 "$tmp/out" | cmp -s - "$tmp/in" ||
    problem "-w: the body is not first on standard output"
  line=$(tail -c +1001 "$tmp/out")
  [[ $line =~ ^200\ 1000\ [0-9]+\.[0-9]+$ ]] ||
    problem "-w '%{http_code} %{size_upload} %{time_total}\\n': the line" \
            "after the body is '$line', not '200 1000 SECONDS'"
  [ "$(tail -c 1 "$tmp/out" | od -An -c | tr -d ' ')" = '\n' ] ||
    problem "-w: '\\n' did not end the line with a newline"
fi

# -o FILE: the body in FILE, the -w text on standard output.
run xyz -s -o "$tmp/body" -w '%{http_code}' "$url"
if [ "$st" -eq 0 ]; then
  [ "$(cat "$tmp/out")" = 200 ] ||
    problem "-o FILE -w: stdout is '$(cat "$tmp/out")', not '200'"
  [ "$(cat "$tmp/body" 2>/dev/null)" = xyz ] ||
    problem "-o FILE -w: FILE is not the body"
fi

for opt in -D --dump-header; do
  rm -f "$tmp/headers"
  run body -s "$opt" "$tmp/headers" "$url"
  [ "$st" -eq 0 ] || continue
  [ "$(cat "$tmp/out")" = body ] ||
    problem "$opt: stdout is '$(cat "$tmp/out")', not the body only"
  if [ ! -f "$tmp/headers" ]; then
    problem "$opt FILE: no FILE"
  else
    grep -q '^HTTP/1.1 200' "$tmp/headers" ||
      problem "$opt FILE: no status line in: $(cat "$tmp/headers")"
    grep -qi '^Transfer-Encoding: chunked' "$tmp/headers" ||
      problem "$opt FILE: no Transfer-Encoding in: $(cat "$tmp/headers")"
    ! grep -q body "$tmp/headers" || problem "$opt FILE: the body is in FILE"
  fi
done

# -f -D - on a 404: the headers on standard output, %{exitcode} 22.
st=0
printf 'x' | curlpipe -s -f -D - -w '%{exitcode}' \
  "http://127.0.0.1:$stream_port/status/404" >"$tmp/out" 2>"$tmp/err" ||
  st=$?
[ "$st" -eq 22 ] ||
  problem "-f -D - on a 404: exit status $st, not 22: $(cat "$tmp/err")"
grep -q '^HTTP/1.1 404' "$tmp/out" ||
  problem "-f -D - on a 404: no status line on standard output:" \
          "$(cat "$tmp/out")"
! grep -q '^HTTP/1.1 404' "$tmp/err" ||
  problem "-f -D - on a 404: the headers went to standard error"
[ "$(tail -c 2 "$tmp/out")" = 22 ] ||
  problem "-f -w '%{exitcode}' on a 404: standard output ends with" \
          "'$(tail -c 2 "$tmp/out")', not the exit status 22"

check_problems
