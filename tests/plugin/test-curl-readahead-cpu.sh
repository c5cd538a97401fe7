#!/usr/bin/env bash
# test-curl-readahead-cpu.sh: a read that waits for its read-ahead
# segment sleeps.  seg_cond measured its deadline on CLOCK_REALTIME
# while the plugin gave it one on CLOCK_MONOTONIC, a time long past: the
# wait returned at once and the reader spun, a core at 100% (1.8-2.2 s
# of CPU in 2.45 s for 150 reads, against 0.1 s without read-ahead),
# taking the lock the segments' threads need for the bytes they store.
#
# nginx behind linkem (50 ms round trip, 40 Mbit/s, so that the reads
# wait for their segments most of the time).  150 sequential reads of
# 64 KiB, one at a time, give the image's bytes, and nbdkit's CPU time
# (user + system, /proc/PID/stat) over them stays under half of the time
# they took.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh
requires nginx

# nbdkit's CPU time so far, in clock ticks.
cpu_ticks ()
{
  awk '{ print $14 + $15 }' "/proc/$1/stat"
}

serve_image $((16 * 1024 * 1024))
start_linkem "$port" 50 --rate 40
start_nbdkit cpu -r -v -D curl.readahead=1 "$PLUGIN" \
             "http://127.0.0.1:$linkem_port/disk.img"
pid=$(cat "$tmp/cpu.pid")
c0=$(cpu_ticks "$pid")
t0=$EPOCHREALTIME
read_in_turn "$image" 0 150 65536
t1=$EPOCHREALTIME
c1=$(cpu_ticks "$pid")
grep -q 'read-ahead: stream from [0-9]* starts' "$tmp/cpu.err" ||
  fail "no stream started: the test reads nothing ahead"
ticks=$(getconf CLK_TCK)
awk -v c=$((c1 - c0)) -v hz="$ticks" -v a="$t0" -v b="$t1" 'BEGIN {
  cpu = c / hz; wall = b - a
  printf "150 reads of 64 KiB: %.2f s, nbdkit used %.2f s of CPU\n", wall, cpu
  exit !(cpu < wall / 2)
}' || fail "nbdkit used more CPU than half the time the reads took:" \
          "a reader spins while it waits"
check_problems
