#!/usr/bin/env bash
# test-curlpipe-errors.sh: each failure ends curlpipe promptly with its
# documented exit status (curl's) and a message naming the URL and the
# cause: nothing listening (7), an HTTP error without -f (0, body on
# stdout) and with -f (22, body on stderr), usage errors (2), a reader
# that closes standard output (23, "Broken pipe", not killed by SIGPIPE),
# --max-time on a stream that never ends (28); a server that refuses the
# upload at once while standard input stays open (22 with -f, at once);
# an answer cut short (18, and every byte that did arrive is written);
# standard output closed before the start (2).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

# run EXPECTED-STATUS ARGS...: curlpipe's status, stdout in $tmp/out,
# stderr in $tmp/err.
run ()
{
  local want=$1 st=0
  shift
  curlpipe "$@" >"$tmp/out" 2>"$tmp/err" || st=$?
  [ "$st" -eq "$want" ] || {
    cat "$tmp/err" >&2
    fail "curlpipe $*: exit status $st, expected $want"
  }
}

start_stream_server
base=http://127.0.0.1:$stream_port
dead=http://127.0.0.1:$(free_port)/x

echo data | run 7 -s "$dead"
assert_grep_i "$tmp/err" "$dead"
assert_grep_i "$tmp/err" "connect"

echo data | run 0 -s "$base/status/404"
assert_grep_i "$tmp/out" "error 404 from stream-server"
echo data | run 22 -sf "$base/status/404"
[ ! -s "$tmp/out" ] || fail "-f: the error body went to stdout"
assert_grep_i "$tmp/err" "error 404 from stream-server"
assert_grep_i "$tmp/err" "$base/status/404: the server answered HTTP 404"

run 2 --no-such-option "$base/echo" </dev/null
assert_grep_i "$tmp/err" "no-such-option"
run 2 -s </dev/null
assert_grep_i "$tmp/err" "URL is required"
run 2 -H $'X-A: 1\r\nX-B: 2' "$base/echo" </dev/null
assert_grep_i "$tmp/err" "not one 'Name: value'"
run 2 --max-time soon "$base/echo" </dev/null
assert_grep_i "$tmp/err" "'soon' is not a number of seconds"

# The reader of standard output goes away after 100 bytes of a 16 MiB
# echo: curlpipe must report it and exit, not die of SIGPIPE or hang.
set +e
head -c $((16 * 1024 * 1024)) /dev/zero |
  "$CURLPIPE" -s "$base/echo" 2>"$tmp/err" | head -c 100 >/dev/null
st=${PIPESTATUS[1]}
set -e
[ "$st" -eq 23 ] || fail "closed stdout: exit status $st, expected 23"
assert_grep_i "$tmp/err" "broken pipe"

# A stream that never ends (a FIFO we hold open and never write),
# bounded by --max-time 1.
mkfifo "$tmp/fifo"
exec 3<>"$tmp/fifo"
start=$SECONDS
run 28 -s -m 1 "$base/echo" <"$tmp/fifo"
[ $((SECONDS - start)) -le 10 ] ||
  fail "--max-time 1 took $((SECONDS - start)) s"
assert_grep_i "$tmp/err" "timed out"

# The server answers 403 before reading the body; standard input stays
# open (the FIFO) and idle: curlpipe must end with the answer.
start=$SECONDS
run 22 -sf "$base/early/403" <"$tmp/fifo"
exec 3>&-
[ $((SECONDS - start)) -le 10 ] ||
  fail "an early 403 took $((SECONDS - start)) s to end curlpipe"
assert_grep_i "$tmp/err" "early 403 from stream-server" "HTTP 403"

# 3 MiB of a promised 10: all 3 are written, then the error.
run 18 -s "$base/truncated" </dev/null
[ "$(stat -c %s "$tmp/out")" -eq $((3 * 1024 * 1024)) ] ||
  fail "truncated answer: $(stat -c %s "$tmp/out") bytes written, not 3 MiB"

st=0
"$CURLPIPE" -s "$base/echo" </dev/null >&- 2>"$tmp/err" || st=$?
[ "$st" -eq 2 ] || fail "closed stdout at start: exit $st, expected 2"
assert_grep_i "$tmp/err" "standard output is not open"
