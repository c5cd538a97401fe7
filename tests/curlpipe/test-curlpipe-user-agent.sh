#!/usr/bin/env bash
# test-curlpipe-user-agent.sh: curlpipe names itself to the server with
# "User-Agent: curlpipe/VERSION" (VERSION as curlpipe -V prints it),
# -A/--user-agent STRING sends STRING instead, and so does a
# -H 'User-Agent: ...'.  The server's own record of the request headers
# is what is checked.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

start_stream_server
url=http://127.0.0.1:$stream_port/headers
# "curlpipe 1.2.3 (libcurl/7.88.1 ...)"
version=$(curlpipe -V | sed -n '1s/^curlpipe \([^ ]*\).*/\1/p')
[ -n "$version" ] || fail "curlpipe -V does not say its version"

# agent WANT ARGS...: the server got exactly one "User-Agent: WANT".
agent ()
{
  local want=$1 st=0 got
  shift
  printf x | curlpipe -s "$@" "$url" >"$tmp/headers" 2>"$tmp/err" || st=$?
  if [ "$st" -ne 0 ]; then
    problem "curlpipe $*: exit status $st: $(cat "$tmp/err")"
    return
  fi
  got=$(grep -i '^User-Agent:' "$tmp/headers" || :)
  [ "$got" = "User-Agent: $want" ] ||
    problem "curlpipe ${*:-(no option)}: expected 'User-Agent: $want'," \
            "the server got '$got'"
}

agent "curlpipe/$version"
agent "my-agent/1.0" -A "my-agent/1.0"
agent "Long Agent (x)" --user-agent "Long Agent (x)"
agent "hdr/2" -H "User-Agent: hdr/2"

check_problems
