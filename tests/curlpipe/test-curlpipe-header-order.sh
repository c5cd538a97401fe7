#!/usr/bin/env bash
# test-curlpipe-header-order.sh: -D's headers come before the body when
# both go to one place by different names, as with curl and as the man
# page says: -D - -o /dev/stdout, and -D /dev/stdout with the body on
# standard output.  The raw server's /ok answers exactly
# "HTTP/1.1 200 OK", "Content-Length: 3", a blank line and "ok\n".
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

start_raw_server
url=http://127.0.0.1:$raw_port/ok
printf 'HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n' >"$tmp/expected"

# ordered ARGS...: curlpipe -s ARGS $url, standard output a pipe (as a
# file, /dev/stdout opened again would start at its offset 0), must
# write exactly the headers, then the body.
ordered ()
{
  local st
  curlpipe -s "$@" "$url" </dev/null 2>"$tmp/err" | cat >"$tmp/out"
  st=${PIPESTATUS[0]}
  if [ "$st" -ne 0 ]; then
    problem "$*: exit status $st: $(cat "$tmp/err")"
  elif ! cmp -s "$tmp/expected" "$tmp/out"; then
    problem "$*: standard output is not the headers then the body:" \
            "$(od -c "$tmp/out" | head -4)"
  fi
}

ordered -D - -o /dev/stdout
ordered -D /dev/stdout
ordered -D /dev/stdout -o /dev/stdout
ordered -D - -o -

check_problems
