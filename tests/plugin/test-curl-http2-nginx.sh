#!/usr/bin/env bash
# test-curl-http2-nginx.sh: HTTP/2 against real nginx over TLS.  nginx
# logs the protocol and the TCP connection ($connection) of every
# request in its own access log (proto.log).
#  (a) nginx offering HTTP/2 by ALPN: a 64 MiB image copied by nbdcopy
#      (several NBD connections) and by qemu-img convert through one
#      nbdkit is byte-exact both times, and every request went over
#      HTTP/2.  With http-version=2TLS, and with the default
#      http-version when the plugin's default offers HTTP/2; with the
#      default (the plugin multiplexes HTTP/2 streams on one connection
#      per origin) all the reads after the probe went over ONE TCP
#      connection.
#  (b) The same nginx with http-version=1.1: byte-exact, every request
#      HTTP/1.1, over several connections (the pool).
#  (c) nginx whose HTTPS port does not offer HTTP/2: with
#      http-version=2TLS and with the default, the plugin falls back to
#      HTTP/1.1: byte-exact, every request HTTP/1.1, several
#      connections.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy
requires qemu-img --version
make_cert

size=$((64 * 1024 * 1024))
logs='access_log DIR/proto.log proto; access_log DIR/access.log ranges;'

# The default http-version offers HTTP/2 since the plugin multiplexes
# HTTP/2 streams (it was 1.1 before).
default_h2=yes
! nbdkit "$PLUGIN" --help 2>&1 | grep -qE '1\.1 \(default\)' || default_h2=no

# copies NAME CLIENTS [PLUGIN-ARGS...]: through nbdkit NAME on $url,
# the copies CLIENTS names ("nbdcopy", "qemu-img" or both), each
# compared with $image; $tmp/proto-NAME.log is nginx's log of the run:
#   CONNECTION PROTOCOL METHOD RANGE STATUS BODY-BYTES
copies ()
{
  local name=$1 clients=$2 first c
  shift 2
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

# (a)
serve_image "$size" "$logs"
h2_runs=(2tls)
[ $default_h2 = no ] || h2_runs+=(default)
for run in "${h2_runs[@]}"; do
  if [ "$run" = 2tls ]; then
    copies h2_2tls "nbdcopy qemu-img" http-version=2TLS
  else
    copies h2_default "nbdcopy qemu-img"
  fi
  all_over "h2_$run" HTTP/2.0
  conns "h2_$run"
  if [ "$run" = default ]; then
    # Multiplexed: the probe's connection, or one more (the probe's
    # answer may come before the reads' connection is known to multiplex).
    [ "$conns" -eq 1 ] && [ "$all" -le 2 ] ||
      problem "(h2_$run) the reads went over $conns TCP connections" \
              "($all in all), not one"
  fi
done
[ $default_h2 = yes ] ||
  echo "the default http-version is 1.1: not run with the default"

# (b)
copies h1 nbdcopy http-version=1.1
all_over h1 HTTP/1.1
conns h1
[ "$conns" -ge 2 ] ||
  problem "(h1) the reads went over $conns connection: not in parallel"

# (c) The same image from an nginx without HTTP/2.
stop_pid "$nginx_pid"
cp "$image" "$tmp/image.img"
nginx_http2= serve_image 1 "$logs"
cp "$tmp/image.img" "$image"
for run in 2tls default; do
  if [ "$run" = 2tls ]; then
    copies fallback_2tls nbdcopy http-version=2TLS
  else
    copies fallback_default nbdcopy
  fi
  all_over "fallback_$run" HTTP/1.1
  conns "fallback_$run"
  [ "$conns" -ge 2 ] ||
    problem "(fallback_$run) the reads went over $conns connection:" \
            "not in parallel"
done

check_problems
