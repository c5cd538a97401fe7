#!/usr/bin/env bash
# test-curlpipe-exit-codes.sh: curlpipe exits with curl's status for
# each kind of failure, with a message, and never 0 for a transfer that
# did not happen: a malformed URL (3: "http://[::1", port 99999, a space
# in the host), a scheme other than http and https (1, curl's
# CURLE_UNSUPPORTED_PROTOCOL), a Unix socket that does not exist (7), a
# name that does not resolve (6), nothing listening (7), an answer
# shorter than its Content-Length (18), HTTP >= 400 with -f (22), a
# reader of standard output that goes away (23), --max-time against a
# server that never answers (28), https to a plain HTTP port (35), a
# certificate nobody trusts (60); 2 stays for usage errors.  Every case
# is tried and each one that fails is listed.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

# expect WANT ARGS...: curlpipe ARGS (standard input "x") exits WANT with
# a message on stderr; stdout in $tmp/out, stderr in $tmp/err.  Returns
# 1 (after noting the problem) when it does not.
expect ()
{
  local want=$1 st=0
  shift
  printf x | curlpipe "$@" >"$tmp/out" 2>"$tmp/err" || st=$?
  if [ "$st" -ne "$want" ]; then
    problem "curlpipe $*: exit status $st, expected $want;" \
            "stderr: $(head -c 300 "$tmp/err")"
    return 1
  fi
  if ! grep -q '^curlpipe: ' "$tmp/err"; then
    problem "curlpipe $*: exit status $st without a message"
    return 1
  fi
}

make_cert
start_nginx
start_stream_server
base=http://127.0.0.1:$stream_port
dead=http://127.0.0.1:$(free_port)/x

# Failures before any connection: each was "exit 0, no message".
expect 3 -s 'http://[::1' || :
expect 3 -s 'http://[::1/x' || :
expect 1 -s ftp://127.0.0.1/x || :
expect 3 -s http://127.0.0.1:99999/x || :
expect 3 -s 'http://a b/x' || :
if expect 7 -s --unix-socket /nonexistent/sock http://localhost/x; then
  grep -qF /nonexistent/sock "$tmp/err" ||
    problem "--unix-socket: the message does not name the socket:" \
            "$(cat "$tmp/err")"
fi

# What a script does with the status: no silent success.
out=$(printf x | curlpipe -f http://127.0.0.1:99999/x 2>/dev/null &&
        echo UPLOADED) || :
[ "$out" != UPLOADED ] ||
  problem "'curlpipe -f http://127.0.0.1:99999/x && echo UPLOADED'" \
          "printed UPLOADED"

# .invalid never resolves (RFC 6761); without a network the resolver
# answers at once.  If it does not answer within 5 s here, this one case
# says so and is left out rather than turned into a timeout.
st=0
timeout 5 getent hosts nonexistent.invalid >/dev/null 2>&1 || st=$?
if [ "$st" -eq 124 ]; then
  echo "$(basename "$0"): the resolver is too slow here: exit 6 not checked"
elif expect 6 -s http://nonexistent.invalid/x; then
  grep -qF nonexistent.invalid "$tmp/err" ||
    problem "exit 6: the message does not name the host: $(cat "$tmp/err")"
fi

if expect 7 -s "$dead"; then
  grep -qF "$dead" "$tmp/err" ||
    problem "exit 7: the message does not name $dead: $(cat "$tmp/err")"
fi

# 3 MiB of the 10 the answer promised: the 3 are written, then 18.
if expect 18 -s "$base/truncated"; then
  [ "$(file_size "$tmp/out")" -eq $((3 * 1024 * 1024)) ] ||
    problem "truncated answer: $(file_size "$tmp/out") bytes written," \
            "not 3 MiB"
fi

expect 22 -sf "$base/status/404" || :
expect 22 -sf "$base/status/500" || :
# Without -f an HTTP error is an answer like any other.
st=0
printf x | curlpipe -s "$base/status/404" >"$tmp/out" || st=$?
[ "$st" -eq 0 ] || problem "HTTP 404 without -f: exit status $st, not 0"

# The reader of standard output leaves after one byte of a 16 MiB echo.
set +e
head -c $((16 * 1024 * 1024)) /dev/zero |
  timeout "$client_timeout" "$CURLPIPE" -s "$base/echo" 2>"$tmp/err" |
  head -c 1 >/dev/null
st=${PIPESTATUS[1]}
set -e
if [ "$st" -ne 23 ]; then
  problem "a reader that went away: exit status $st, not 23"
else
  grep -qi "broken pipe" "$tmp/err" ||
    problem "exit 23 without 'Broken pipe': $(cat "$tmp/err")"
fi

# /silent reads the body and never answers.
start=$SECONDS
expect 28 -s -m 1 "$base/silent" || :
[ $((SECONDS - start)) -le 10 ] ||
  problem "--max-time 1 took $((SECONDS - start)) s"

# TLS: a handshake with something that is not TLS (35), and nginx's
# self-signed certificate without --cacert (60).
expect 35 -s "https://127.0.0.1:$port/x" || :
expect 60 -s "https://127.0.0.1:$tlsport/x" || :
# The same with --cacert gets through (nginx answers 405 to a PUT).
st=0
printf x | curlpipe -s --cacert "$tmp/cert.pem" \
  "https://127.0.0.1:$tlsport/x" >/dev/null 2>"$tmp/err" || st=$?
[ "$st" -eq 0 ] ||
  problem "https with --cacert: exit status $st: $(cat "$tmp/err")"

# Usage errors stay 2.
st=0
curlpipe --no-such-option "$base/echo" </dev/null 2>"$tmp/err" || st=$?
[ "$st" -eq 2 ] || problem "an unknown option: exit status $st, not 2"
st=0
curlpipe -s </dev/null 2>"$tmp/err" || st=$?
[ "$st" -eq 2 ] || problem "no URL: exit status $st, not 2"

check_problems
