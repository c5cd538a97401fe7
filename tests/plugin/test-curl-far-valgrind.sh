#!/usr/bin/env bash
# test-curl-far-valgrind.sh: the spare connections opened during the
# probe for a far server (helpers/linkem, 30 ms, between the plugin and
# the server) under valgrind: no memory errors and no definite leaks in
# nbdkit
#  (a) when a copy starts at once and takes the spares (the copy is
#      byte-exact), and
#  (b) when nbdkit is stopped (SIGTERM) with every spare still unused:
#      nbdkit exits 0 within 10 s.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
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
grep -q ': 15 spare connections open$' "$tmp/a.err" ||
  fail "(a) no spare connections in nbdkit's debug output"
assert_same_file "$image" "$tmp/out.img"

# (b)
nbdkit_valgrind b
"${vg[@]}" -U "$tmp/b.sock" "$PLUGIN" \
  "http://127.0.0.1:$linkem_port/disk.img" \
  </dev/null >"$tmp/b.out" 2>"$tmp/b.err" &
pid=$!
_pids+=("$pid")
for ((n = 0; n < 300; n++)); do
  ! grep -q ': 15 spare connections open$' "$tmp/b.err" || break
  _alive "$pid" || break
  sleep 0.1
done
grep -q ': 15 spare connections open$' "$tmp/b.err" ||
  fail "(b) no spare connections in nbdkit's debug output"
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
