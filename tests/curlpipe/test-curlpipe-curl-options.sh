#!/usr/bin/env bash
# test-curlpipe-curl-options.sh: a curl command line that streams
# standard input carries over to curlpipe: "-T -" and "-T ." (upload
# standard input), -N/--no-buffer, --no-progress-meter,
# --expect100-timeout SECS, -S/--show-error, combined short options
# (-sS, -sSf, -sN), options after the URL (as in
# ProxyCommand="curl -s --no-buffer URL -T . --no-progress-meter
# --expect100-timeout 0.01"), -m 0 (no limit), and -H 'Name;' (a header
# with an empty value, sent as "Name:") next to -H 'Name:' (libcurl's
# own header left out).  Each upload comes back through the echo, and
# the headers as the server received them.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

start_stream_server
base=http://127.0.0.1:$stream_port

# echoes ARGS...: "hello ARGS" goes through $base/echo with curlpipe
# ARGS (the URL among them as URL) and comes back unchanged, exit 0.
echoes ()
{
  local args=() a st=0 want="hello $*"
  for a in "$@"; do
    [ "$a" = URL ] && a=$base/echo
    args+=("$a")
  done
  printf '%s' "$want" | curlpipe "${args[@]}" >"$tmp/out" 2>"$tmp/err" ||
    st=$?
  if [ "$st" -ne 0 ]; then
    problem "curlpipe $*: exit status $st: $(head -c 300 "$tmp/err")"
  elif [ "$(cat "$tmp/out")" != "$want" ]; then
    problem "curlpipe $*: the echo came back as '$(cat "$tmp/out")'"
  fi
}

echoes -s -T - URL
echoes -s -T . URL
echoes -s --upload-file - URL
echoes -s -N URL
echoes -s --no-buffer URL
echoes --no-progress-meter URL
echoes -s --expect100-timeout 0.01 URL
echoes -s -S URL
echoes -s --show-error URL
echoes -sS URL
echoes -sSf URL
echoes -sN URL
echoes -m 0 -s URL
echoes -s --max-time 0 URL
echoes -s -T . -N URL
# ssh's ProxyCommand, as curl users write it.
echoes -s --no-buffer URL -T . --no-progress-meter --expect100-timeout 0.01

# -S with -s: the error is still shown (7: refused); -sSf: 22 on an
# HTTP error.
st=0
printf x | curlpipe -sS "http://127.0.0.1:$(free_port)/x" 2>"$tmp/err" ||
  st=$?
[ "$st" -eq 7 ] && grep -q '^curlpipe: ' "$tmp/err" ||
  problem "-sS, connection refused: exit status $st, stderr" \
          "'$(cat "$tmp/err")'"
st=0
printf x | curlpipe -sSf "$base/status/404" >/dev/null 2>"$tmp/err" || st=$?
[ "$st" -eq 22 ] || problem "-sSf on a 404: exit status $st, not 22"

# -H 'X-Empty;' is sent with an empty value, -H 'Accept:' removes
# libcurl's "Accept: */*", -H 'X-Full: v' is sent as it is.
st=0
printf x | curlpipe -s -H 'X-Empty;' -H 'Accept:' -H 'X-Full: v' \
  "$base/headers" >"$tmp/headers" 2>"$tmp/err" || st=$?
if [ "$st" -ne 0 ]; then
  problem "-H 'X-Empty;': exit status $st: $(cat "$tmp/err")"
else
  grep -qxE 'X-Empty: *' "$tmp/headers" ||
    problem "-H 'X-Empty;': the server did not get 'X-Empty:';" \
            "it got: $(tr '\n' '|' <"$tmp/headers")"
  ! grep -qi '^X-Empty;' "$tmp/headers" ||
    problem "-H 'X-Empty;' was sent as it was written"
  ! grep -qi '^Accept:' "$tmp/headers" ||
    problem "-H 'Accept:' did not remove the Accept header"
  grep -qx 'X-Full: v' "$tmp/headers" ||
    problem "-H 'X-Full: v' did not arrive"
fi

check_problems
