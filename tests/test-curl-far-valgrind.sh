#!/usr/bin/env bash
# test-curl-far-valgrind.sh: the start-up warm-up of a far server's
# connections (bench/linkem, 30 ms, between the plugin and the server)
# under valgrind: no memory errors and no definite leaks in nbdkit
#  (a) when a copy starts while the connections are still opening (and
#      the copy is byte-exact), and
#  (b) when nbdkit is stopped (SIGTERM) while every warm-up request waits
#      for a server that answered the probe and then nothing: the warm-up
#      threads end and are joined, and nbdkit exits 0 within 10 s.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")}/functions.sh"
requires_plugin
requires_valgrind
requires nbdcopy

size=$((4 * 1024 * 1024 + 123))
serve_image "$size"
start_linkem "$port" 30

# (a)
st=0
nbdkit_valgrind a
OUT=$tmp/out.img timeout -k 5 120 \
  "${vg[@]}" -U - "$PLUGIN" "http://127.0.0.1:$linkem_port/disk.img" \
  --run 'nbdcopy "$uri" "$OUT"' >"$tmp/a.out" 2>"$tmp/a.err" || st=$?
valgrind_clean a "$st"
grep -q ': opening 15 more connections' "$tmp/a.err" ||
  fail "(a) no warm-up in nbdkit's debug output"
assert_same_file "$image" "$tmp/out.img"

# (b)
start_fault_server stall-after-probe "$image"
start_linkem "$fault_port" 30
nbdkit_valgrind b
"${vg[@]}" -U "$tmp/b.sock" "$PLUGIN" \
  "http://127.0.0.1:$linkem_port/disk.img" timeout=60 \
  </dev/null >"$tmp/b.out" 2>"$tmp/b.err" &
pid=$!
_pids+=("$pid")
for ((n = 0; n < 300; n++)); do
  [ "$(grep -c '^stalled: GET range=bytes=0-0' "$tmp/fault.log")" -lt 15 ] ||
    break
  _alive "$pid" || break
  sleep 0.1
done
grep -q ': opening 15 more connections' "$tmp/b.err" ||
  fail "(b) no warm-up in nbdkit's debug output"
stalled=$(grep -c '^stalled: GET range=bytes=0-0' "$tmp/fault.log" || :)
[ "$stalled" -eq 15 ] || fail "(b) $stalled warm-up GETs waiting, not 15"
kill -TERM "$pid"
for ((n = 0; n < 100; n++)); do
  _alive "$pid" || break
  sleep 0.1
done
! _alive "$pid" ||
  fail "(b) nbdkit under valgrind still running 10 s after SIGTERM"
st=0
wait "$pid" || st=$?
_forget_pid "$pid"
valgrind_clean b "$st"
