#!/usr/bin/env bash
# test-curl-connections.sh: connections=N bounds the HTTP connections a
# whole parallel copy opens (the size probe reuses a pool connection),
# requests do run in parallel, and the copy gives the served bytes.  nginx logs $connection, the serial
# number of the TCP connection, with every request.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy

size=$((64 * 1024 * 1024))
serve_image "$size"

for n in 2 8; do
  first=$(($(wc -l <"$tmp/access.log") + 1))
  start_nbdkit "c$n" -r "$PLUGIN" "$url" connections=$n
  timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
  stop_nbdkit "c$n"
  assert_same_file "$image" "$tmp/out.img"
  rm -f "$tmp/out.img"
  tail -n +"$first" "$tmp/access.log" >"$tmp/run$n.log"
  conns=$(cut -d' ' -f1 "$tmp/run$n.log" | sort -u | wc -l)
  gets=$(grep -c ' GET ' "$tmp/run$n.log" || :)
  echo "connections=$n: $gets GET requests over $conns TCP connections"
  [ "$gets" -ge 2 ] || fail "connections=$n: only $gets GET requests"
  [ "$conns" -ge 1 ] && [ "$conns" -le "$n" ] ||
    fail "connections=$n: the copy opened $conns HTTP connections"
  # The pool opens a connection only when every open one is busy, and
  # nbdcopy keeps 64 requests in flight: more than one connection is the
  # proof that requests ran concurrently.
  [ "$conns" -ge 2 ] ||
    fail "connections=$n: requests were serialized on $conns connection"
done
