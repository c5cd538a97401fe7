#!/usr/bin/env bash
# test-curlpipe-resolve.sh: --resolve HOST:PORT:ADDR sends a name DNS
# does not know to ADDR, and --connect-to HOST1:PORT1:HOST2:PORT2 sends
# the connection for HOST1:PORT1 to HOST2:PORT2, as in curl; either way
# the server gets the URL's own name in Host.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

start_stream_server
name=pipe.example.test

# sends HOST-HEADER ARGS...: curlpipe -s ARGS (the URL among them)
# reaches the stream server, which saw "Host: HOST-HEADER".
sends ()
{
  local want=$1 st=0
  shift
  printf x | curlpipe -s "$@" >"$tmp/headers" 2>"$tmp/err" || st=$?
  if [ "$st" -ne 0 ]; then
    problem "curlpipe $*: exit status $st: $(cat "$tmp/err")"
  elif ! grep -qx "Host: $want" "$tmp/headers"; then
    problem "curlpipe $*: the server did not get 'Host: $want':" \
            "$(cat "$tmp/headers")"
  fi
}

sends "$name:$stream_port" --resolve "$name:$stream_port:127.0.0.1" \
  "http://$name:$stream_port/headers"
sends "$name" --connect-to "$name:80:127.0.0.1:$stream_port" \
  "http://$name/headers"
# Both together, as curl takes them: --connect-to names a host that
# --resolve then resolves.
sends "$name" --connect-to "$name:80:other.example.test:$stream_port" \
  --resolve "other.example.test:$stream_port:127.0.0.1" "http://$name/headers"

check_problems
