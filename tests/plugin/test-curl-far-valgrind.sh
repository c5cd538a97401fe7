#!/usr/bin/env bash
# test-curl-far-valgrind.sh: the spare connections opened during the
# probe for a far server (helpers/linkem, 30 ms, between the plugin and
# the server) under valgrind: no memory errors and no definite leaks in
# nbdkit
#  (a) when a copy starts at once and takes the spares (the copy is
#      byte-exact), and
#  (b) when nbdkit is stopped (SIGTERM) with every spare still unused:
#      nbdkit exits 0 within 10 s;
# and the head start (nginx's HTTP/2 over TLS, 30 ms away)
#  (c) taken by a copy (byte-exact),
#  (d) cut off by nbdinfo, which exits as soon as it has the size, and
#  (e) begun beside a probe that fails (404): nbdkit exits with the
#      error, the head start ended before nbdkit ever forked.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_valgrind
requires nbdcopy

size=$((4 * 1024 * 1024 + 123))
make_cert
serve_image "$size"
start_linkem "$port" 30
http_port=$linkem_port
start_linkem "$tlsport" 30
https_far=https://127.0.0.1:$linkem_port
linkem_port=$http_port

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

# (c)
st=0
nbdkit_valgrind c
OUT=$tmp/out-c.img timeout -k 5 120 \
  "${vg[@]}" -U - "$PLUGIN" "$https_far/disk.img" cainfo="$tmp/cert.pem" \
  --run 'nbdcopy "$uri" "$OUT"' >"$tmp/c.out" 2>"$tmp/c.err" || st=$?
valgrind_clean c "$st"
grep -q 'a head start of 12288 KiB' "$tmp/c.err" || fail "(c) no head start"
assert_same_file "$image" "$tmp/out-c.img"

# (d)
st=0
nbdkit_valgrind d
timeout -k 5 120 \
  "${vg[@]}" -U - "$PLUGIN" "$https_far/disk.img" cainfo="$tmp/cert.pem" \
  --run 'nbdinfo --size "$uri"' >"$tmp/d.out" 2>"$tmp/d.err" || st=$?
valgrind_clean d "$st"
grep -q 'a head start of 12288 KiB' "$tmp/d.err" || fail "(d) no head start"
[ "$(cat "$tmp/d.out")" = "$size" ] || fail "(d) nbdinfo: $(cat "$tmp/d.out")"

# (e)
st=0
nbdkit_valgrind e
timeout -k 5 120 \
  "${vg[@]}" -U - "$PLUGIN" "$https_far/missing.img" cainfo="$tmp/cert.pem" \
  --run true >"$tmp/e.out" 2>"$tmp/e.err" || st=$?
[ "$st" -ne 99 ] || fail "(e) valgrind found errors (valgrind-e.log)"
[ "$st" -ne 0 ] || fail "(e) nbdkit exited 0 on a URL that answers 404"
grep -q 'ERROR SUMMARY: 0 errors' "$tmp/valgrind-e.log" ||
  fail "(e) valgrind reports errors (valgrind-e.log)"
grep -q 'a head start of 12288 KiB' "$tmp/e.err" || fail "(e) no head start"
grep -q '404' "$tmp/e.err" || fail "(e) no 404 in the error: $(tail -3 "$tmp/e.err")"
