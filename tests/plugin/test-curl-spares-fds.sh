#!/usr/bin/env bash
# test-curl-spares-fds.sh: the spare connections opened during the probe
# leave nbdkit the file descriptors it needs.  With a limit of 40
# descriptors (ulimit -n):
#  (a) connections=64 on loopback: start-up succeeds and nbdinfo gets the
#      size (the spares took at most half, and were closed after it);
#  (b) the default connections=16, 30 ms away (helpers/linkem), where the
#      spares are kept: fewer than 15 were opened, and a copy is
#      byte-exact.  No head start goes out over HTTP/1.1 with so few
#      descriptors: its connections left nbdkit none for nbdcopy's
#      second NBD connection ("pipe2: Too many open files"), and the
#      copy hung.
# Before the limit, 63 spares used up the descriptors: nbdkit failed at
# start-up ("Too many open files", or the probe's "Couldn't connect").
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy
requires nbdinfo

size=$((2 * 1024 * 1024 + 99))
serve_image "$size"

# (a)
st=0
got=$( (ulimit -n 40
        timeout 60 "${NBDKIT[@]}" -r -U - -v "$PLUGIN" "$http_url" \
          connections=64 --run 'nbdinfo --size "$uri"') 2>"$tmp/a.err") ||
  st=$?
[ "$st" -eq 0 ] ||
  { tail -5 "$tmp/a.err" >&2; fail "(a) nbdkit exited with status $st"; }
[ "$got" = "$size" ] || fail "(a) nbdinfo --size said '$got', expected $size"
n=$(sed -n 's/.*: \([0-9]*\) spare connections opening.*/\1/p' "$tmp/a.err")
echo "(a) spares opened: ${n:-none}"
[ -n "$n" ] && [ "$n" -gt 0 ] && [ "$n" -lt 20 ] ||
  fail "(a) ${n:-no} spares opened, expected 1 to 19 within 40 descriptors"

# (b)
start_linkem "$port" 30
st=0
(ulimit -n 40
 OUT=$tmp/out.img timeout 60 "${NBDKIT[@]}" -r -U - -v "$PLUGIN" \
   "http://127.0.0.1:$linkem_port/disk.img" \
   --run 'nbdcopy "$uri" "$OUT"') 2>"$tmp/b.err" || st=$?
[ "$st" -eq 0 ] ||
  { tail -5 "$tmp/b.err" >&2; fail "(b) nbdkit exited with status $st"; }
n=$(sed -n 's/.*: \([0-9]*\) spare connections open$/\1/p' "$tmp/b.err")
echo "(b) spares kept: ${n:-none}"
[ -n "$n" ] && [ "$n" -gt 0 ] && [ "$n" -lt 15 ] ||
  fail "(b) ${n:-no} spares kept, expected 1 to 14 within 40 descriptors"
assert_same_file "$image" "$tmp/out.img"
grep -q 'no head start over HTTP/1.1: few file descriptors' "$tmp/b.err" ||
  fail "(b) not said: no head start with few file descriptors"
