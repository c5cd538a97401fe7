#!/usr/bin/env bash
# test-curl-mirrors-drip.sh: mirrors that drip do not stall a copy.
# url= answers each read at once, 30 ms away (nginx behind
# helpers/linkem at 1 Tbit/s); three proven mirrors drip (fault servers
# on loopback in drip-5k-after-probe mode: the probe's ranges at once,
# every other answer's headers at once and its body at 5 kB/s), and
# their waits for a first byte are shorter than url='s, so reads go to
# them first.  url='s answers, each a millisecond, were never long
# enough to be measured, so once the mirrors were, url= was taken to be
# as slow as they, and no read left a dripping mirror: copies did not
# finish in 40 s.  Now url= is measured by the bytes its answers bring
# over the time they were coming, however short each one, and the
# mirrors' reads are found too slow and asked of url=.
#   All four servers state the same Repr-Digest: proven mirrors.
#   nbdcopy copies the 32 MiB image in reads of 2 MiB (asked in pieces
#   of 512 KiB of several sources, split.c) with url= alone; then with
#   the three mirrors, twice: the first copy finds the mirrors it asked
#   too slow (their first pieces drip) and drops them for 2 s; once they
#   are back, measured slow, the second copy runs (before the fix it
#   stalled: every piece went to them).  Each copy byte for byte, and
#   with the mirrors in at most 4 times the time alone plus 10 s
#   (nbdcopy is stopped after 60 s).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy

size=$((32 * 1024 * 1024))
make_random_file "$tmp/disk.img" "$size"
b64=$("$PYTHON" -c '
import base64, hashlib, sys
print(base64.b64encode(hashlib.sha256(open(sys.argv[1], "rb").read())
                       .digest()).decode())' "$tmp/disk.img")
conf="location / { add_header Repr-Digest \"sha-256=:$b64:\" always; }"

start_nginx_named u "$conf"
cp -p "$tmp/disk.img" "$tmp/nginx-u/www/disk.img"
start_linkem "$u_port" 30 --rate 1000000
url=http://127.0.0.1:$linkem_port/disk.img
mirrors=()
for m in m1 m2 m3; do
  "$PYTHON" "$helpers_srcdir/fault-server.py" --mode drip-5k-after-probe \
            --file "$tmp/disk.img" --log "$tmp/$m.log" \
            --port-file "$tmp/$m.port" \
            --header "Repr-Digest: sha-256=:$b64:" \
            </dev/null >"$tmp/$m.out" 2>&1 &
  await_port_file $! "$tmp/$m.port" "$tmp/$m.out" "fault server $m"
  mirrors+=("mirror=http://127.0.0.1:$(cat "$tmp/$m.port")/disk.img")
done

start_nbdkit alone -r "$PLUGIN" "$url"
t0=$EPOCHREALTIME
timeout 60 nbdcopy --request-size=$((2 << 20)) "$uri" "$tmp/alone.img" ||
  fail "the copy with url= alone failed"
alone=$(seconds_since "$t0")
stop_nbdkit alone
assert_same_file "$tmp/disk.img" "$tmp/alone.img"

start_nbdkit drip -r -v "$PLUGIN" "$url" "${mirrors[@]}"
for m in "${mirrors[@]}"; do
  wait_log "$tmp/drip.err" "mirror ${m#mirror=}: the same object"
done
for copy in 1 2; do
  if [ "$copy" -eq 2 ]; then
    # Each mirror dropped by the first copy is back in use.
    dropped=$(grep -c 'its reads go to the other sources' "$tmp/drip.err" || :)
    for ((n = 0; n < 200; n++)); do
      back=$(grep -c 'answers again: back in use' "$tmp/drip.err" || :)
      [ "$back" -lt "$dropped" ] || break
      sleep 0.1
    done
    [ "$back" -ge "$dropped" ] ||
      fail "$back of the $dropped mirrors dropped are back in use"
  fi
  rm -f "$tmp/drip.img"
  t0=$EPOCHREALTIME
  st=0
  timeout 60 nbdcopy --request-size=$((2 << 20)) "$uri" "$tmp/drip.img" ||
    st=$?
  drip=$(seconds_since "$t0")
  echo "32 MiB: $alone s with url= alone, $drip s with three dripping" \
       "mirrors (copy $copy)"
  [ "$st" -ne 124 ] ||
    fail "copy $copy with dripping mirrors did not finish in 60 s"
  [ "$st" -eq 0 ] || fail "copy $copy with dripping mirrors failed"
  assert_same_file "$tmp/disk.img" "$tmp/drip.img"
  awk -v a="$alone" -v d="$drip" 'BEGIN { exit !(d <= 4 * a + 10) }' ||
    fail "copy $copy took $drip s with dripping mirrors, $alone s without"
done
stop_nbdkit drip
grep -E 'source .*(too slow|requests)' "$tmp/drip.err" | tail -n 8
