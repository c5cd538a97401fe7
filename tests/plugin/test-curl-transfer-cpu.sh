#!/usr/bin/env bash
# test-curl-transfer-cpu.sh: an HTTP/1.1 transfer that waits for bytes
# sleeps in poll(2).  A transport that ran its transfer again without
# waiting (say, one that polls only after a run that moved nothing, and
# counts a run as moving when it did not) would turn a transfer waiting
# on a slow server into a core at 100%.
#
# nginx behind linkem (20 ms round trip, 40 Mbit/s, so that transfers
# wait for bytes most of the time), over TLS on a port without HTTP/2
# and over plain HTTP: nbdcopy copies 4 MiB byte-exact, and nbdkit's CPU
# time (user + system, /proc/PID/stat) over the copy stays under half of
# the time it took.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nginx
requires nbdcopy

# nbdkit's CPU time so far, in clock ticks.
cpu_ticks ()
{
  awk '{ print $14 + $15 }' "/proc/$1/stat"
}

make_cert
nginx_http2=                    # the TLS port speaks HTTP/1.1 only
serve_image $((4 * 1024 * 1024))
ticks=$(getconf CLK_TCK)

for scheme in https http; do
  if [ "$scheme" = https ]; then
    start_linkem "$tlsport" 20 --rate 40
    params=(cainfo="$tmp/cert.pem")
  else
    start_linkem "$port" 20 --rate 40
    params=()
  fi
  start_nbdkit "$scheme" -r "$PLUGIN" \
               "$scheme://127.0.0.1:$linkem_port/disk.img" "${params[@]}"
  pid=$(cat "$tmp/$scheme.pid")
  c0=$(cpu_ticks "$pid")
  t0=$EPOCHREALTIME
  timeout 60 nbdcopy "$uri" "$tmp/copy-$scheme.img" ||
    fail "$scheme: nbdcopy failed: $(tail -3 "$tmp/$scheme.err")"
  t1=$EPOCHREALTIME
  c1=$(cpu_ticks "$pid")
  assert_same_file "$image" "$tmp/copy-$scheme.img"
  stop_nbdkit "$scheme"
  stop_pid "$linkem_pid"
  awk -v c=$((c1 - c0)) -v hz="$ticks" -v a="$t0" -v b="$t1" \
      -v s="$scheme" 'BEGIN {
    cpu = c / hz; wall = b - a
    printf "%s: 4 MiB copied in %.2f s, nbdkit used %.2f s of CPU\n", s, wall, cpu
    exit !(cpu < wall / 2)
  }' || fail "$scheme: nbdkit used more CPU than half the time the copy" \
            "took: a transfer spins while it waits for bytes"
done
check_problems
