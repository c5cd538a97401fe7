#!/usr/bin/env bash
# test-curl-http2-nginx.sh: HTTP/2 against real nginx over TLS.  nginx
# logs the protocol and the TCP connection ($connection) of every
# request in its own access log (proto.log).
#  (a) nginx offering HTTP/2 by ALPN: a 64 MiB image copied by nbdcopy
#      (several NBD connections) and by qemu-img convert through one
#      nbdkit is byte-exact both times, every request went over HTTP/2,
#      and every read after the probe over ONE TCP connection (the
#      probe's, or one more): with http-version=2TLS on loopback, and
#      with the default (auto) through a 20 ms link (helpers/linkem),
#      far enough for auto to take HTTP/2.
#  (b) The same nginx with http-version=1.1: byte-exact, every request
#      HTTP/1.1, over several connections (the pool).
#  (c) nginx ending each connection with GOAWAY after 20 requests
#      (keepalive_requests 20), http-version=2TLS: byte-exact, every
#      request HTTP/2, on new connections as the old ones end.
#  (d) nginx whose HTTPS port does not offer HTTP/2: with
#      http-version=2TLS and with the default, on loopback and through
#      the link, the plugin falls back to HTTP/1.1: byte-exact, every
#      request HTTP/1.1, several connections; through the link the spare
#      connections open beside the probe, as soon as its connection
#      took HTTP/1.1 by ALPN.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy
requires qemu-img --version
make_cert

size=$((64 * 1024 * 1024))
rtt=20
logs='access_log DIR/proto.log proto; access_log DIR/access.log ranges;'

# copies NAME CLIENTS URL [PLUGIN-ARGS...]: through nbdkit NAME on URL,
# the copies CLIENTS names ("nbdcopy", "qemu-img" or both), each
# compared with $image; $tmp/proto-NAME.log is nginx's log of the run:
#   CONNECTION PROTOCOL METHOD RANGE STATUS BODY-BYTES
copies ()
{
  local name=$1 clients=$2 url=$3 first c
  shift 3
  first=$(($(wc -l <"$tmp/proto.log") + 1))
  start_nbdkit "$name" -r "$PLUGIN" "$url" cainfo="$tmp/cert.pem" "$@"
  for c in $clients; do
    rm -f "$tmp/out.img"
    case $c in
      nbdcopy) timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img" ;;
      qemu-img)
        timeout "$client_timeout" qemu-img convert -f raw "$uri" \
                -O raw "$tmp/out.img" ;;
    esac
    assert_same_file "$image" "$tmp/out.img"
  done
  stop_nbdkit "$name"
  tail -n +"$first" "$tmp/proto.log" >"$tmp/proto-$name.log"
}

# all_over NAME PROTOCOL: every request of run NAME went over PROTOCOL
# ("HTTP/2.0", "HTTP/1.1"), and there were GETs.
all_over ()
{
  local log=$tmp/proto-$1.log gets other
  gets=$(grep -c ' GET ' "$log" || :)
  other=$(awk -v p="$2" '$2 != p' "$log" | wc -l)
  echo "$1: $gets GETs, $other requests not over $2"
  [ "$gets" -ge 10 ] || problem "($1) only $gets GET requests"
  [ "$other" -eq 0 ] || {
    awk -v p="$2" '$2 != p' "$log" | head -5 >&2
    problem "($1) $other requests not over $2"
  }
}

# conns NAME: $conns is how many TCP connections carried the requests
# of run NAME after the probe's GET (its first, of bytes=0-8191), and
# $all how many carried them all.
conns ()
{
  local log=$tmp/proto-$1.log
  all=$(cut -d' ' -f1 "$log" | sort -u | wc -l)
  conns=$(awk 'probe { print $1 } $4 == "bytes=0-8191" { probe = 1 }' \
            "$log" | sort -u | wc -l)
  echo "$1: $conns TCP connections after the probe, $all in all"
}

# one_conn NAME: the reads of run NAME went over one TCP connection, and
# the probe's was that one or one more.
one_conn ()
{
  conns "$1"
  [ "$conns" -eq 1 ] && [ "$all" -le 2 ] ||
    problem "($1) the reads went over $conns TCP connections ($all in" \
            "all), not one"
}

# several_conns NAME: the reads of run NAME went over several TCP
# connections (the pool: nbdcopy keeps many reads in flight).
several_conns ()
{
  conns "$1"
  [ "$conns" -ge 2 ] ||
    problem "($1) the reads went over $conns connection: not in parallel"
}

# reserve EXTRA: the same $image from a new nginx (start_nginx EXTRA)
# at $url, and a 20 ms link to its HTTPS port at $far.
reserve ()
{
  [ -z "${nginx_pid:-}" ] || stop_pid "$nginx_pid"
  [ -z "${linkem_pid:-}" ] || stop_pid "$linkem_pid"
  [ -z "${image:-}" ] || mv "$image" "$tmp/image.keep"
  serve_image "$size" "$1"
  [ ! -f "$tmp/image.keep" ] || mv "$tmp/image.keep" "$image"
  start_linkem "$tlsport" "$rtt"
  far=https://127.0.0.1:$linkem_port/disk.img
}

# (a)
reserve "$logs"
copies h2_2tls "nbdcopy qemu-img" "$url" http-version=2TLS
all_over h2_2tls HTTP/2.0
one_conn h2_2tls
copies h2_far "nbdcopy qemu-img" "$far"
all_over h2_far HTTP/2.0
one_conn h2_far

# (b)
copies h1 nbdcopy "$url" http-version=1.1
all_over h1 HTTP/1.1
several_conns h1

# (c)
reserve "$logs keepalive_requests 20;"
copies goaway nbdcopy "$url" http-version=2TLS
all_over goaway HTTP/2.0
conns goaway
[ "$all" -ge 3 ] ||
  problem "(goaway) $all TCP connections: nginx's GOAWAY was not seen"

# (d)
nginx_http2= reserve "$logs"
copies fallback_2tls nbdcopy "$url" http-version=2TLS
copies fallback_default nbdcopy "$url"
copies fallback_far nbdcopy "$far"
for run in fallback_2tls fallback_default fallback_far; do
  all_over "$run" HTTP/1.1
  several_conns "$run"
done
# Far, the spare connections open beside the probe as soon as its
# connection took HTTP/1.1 by ALPN, not a round trip later, once its
# answer has come: their line comes before the one that gives up HTTP/2.
start_nbdkit fbv -r -v "$PLUGIN" "$far" cainfo="$tmp/cert.pem"
wait_log "$tmp/fbv.err" 'not multiplexed'
stop_nbdkit fbv
spare_line=$(grep -n 'spare connections opening beside' "$tmp/fbv.err" |
               head -1 | cut -d: -f1)
mux_line=$(grep -n 'not multiplexed' "$tmp/fbv.err" | head -1 | cut -d: -f1)
[ -n "$spare_line" ] && [ "$spare_line" -lt "$mux_line" ] ||
  problem "(d) far: the spares did not open beside the probe:" \
          "$(grep -E 'spare|multiplexed' "$tmp/fbv.err")"

check_problems
