#!/usr/bin/env bash
# test-curlpipe-output.sh: "-o -" means standard output (no file named
# "-"), and -o FILE is created or truncated only when the answer starts:
# a refused connection leaves an existing FILE as it was and creates no
# new one, while an answer, even an empty one, replaces the content.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

start_stream_server
start_nginx_put
base=http://127.0.0.1:$stream_port
dead=http://127.0.0.1:$(free_port)/x
mkdir "$tmp/cwd"
cd "$tmp/cwd"

st=0
printf 'to stdout' | curlpipe -s -o - "$base/echo" >"$tmp/out" || st=$?
[ "$st" -eq 0 ] || problem "-o -: exit status $st"
[ "$(cat "$tmp/out")" = "to stdout" ] ||
  problem "-o -: standard output has '$(cat "$tmp/out")', not 'to stdout'"
[ ! -e "$tmp/cwd/-" ] ||
  problem "-o - made a file named '-' holding '$(cat "$tmp/cwd/-")'"

printf 'old content\n' >"$tmp/keep"
st=0
printf x | curlpipe -s -o "$tmp/keep" "$dead" 2>"$tmp/err" || st=$?
[ "$st" -ne 0 ] || problem "-o FILE, connection refused: exit status 0"
[ "$(cat "$tmp/keep")" = "old content" ] ||
  problem "-o FILE, connection refused: FILE now holds" \
          "'$(cat "$tmp/keep")' ($(file_size "$tmp/keep") bytes)," \
          "not its old content"

printf x | curlpipe -s -o "$tmp/new" "$dead" 2>"$tmp/err" || :
[ ! -e "$tmp/new" ] || problem "-o FILE, connection refused: FILE was created"

# An answer replaces the old content, all of it.
printf 'a much longer old content\n' >"$tmp/replace"
printf 'new' | curlpipe -s -o "$tmp/replace" "$base/echo" ||
  problem "-o FILE: exit status $?"
[ "$(cat "$tmp/replace")" = new ] ||
  problem "-o FILE: FILE holds '$(cat "$tmp/replace")', not 'new'"

# So does an empty answer (nginx's 201 to a PUT).
printf 'old content\n' >"$tmp/empty"
printf 'x' | curlpipe -sf -o "$tmp/empty" "http://127.0.0.1:$port/put/e" ||
  problem "-o FILE, empty answer: exit status $?"
[ -f "$tmp/empty" ] && [ ! -s "$tmp/empty" ] ||
  problem "-o FILE, empty answer: FILE holds '$(cat "$tmp/empty")'"

check_problems
