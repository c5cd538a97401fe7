#!/usr/bin/env bash
# test-curl-head-size-zero.sh: the size comes from the probe's ranged
# GET, never from HEAD alone.  A server whose HEAD says Content-Length:
# 0 for a 1 MiB object must give a 1 MiB disk with the object's bytes
# (not an empty one); a truly empty object is an empty disk.  An answer
# to that GET that says "empty" (200 with Content-Length: 0) but carries
# the object in chunked framing proves nothing: nbdkit must refuse to
# start or serve the real size.
# Writes to a server whose HEAD says 0: the check after a write confirms
# the size with a ranged GET too.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdinfo
requires nbdcopy
requires_nbdsh

size=$((1024 * 1024))
fault_export head-zero "$size"
got=$(timeout "$client_timeout" nbdinfo --size "$uri")
[ "$got" = "$size" ] || fail "HEAD said 0: the disk has $got bytes, not $size"
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
assert_same_file "$tmp/disk.img" "$tmp/out.img"
stop_nbdkit ro
grep -q '^GET .*range=bytes=0-8191 ' "$tmp/fault.log" ||
  fail "no ranged GET gave the size"

# Really empty objects: nginx answers the ranged GET with 200 and no
# body, the fault server with 416 "bytes */0"; both are an empty disk.
stop_pid "$fault_pid"
: >"$tmp/empty.img"
: >"$tmp/fault.log"
start_fault_server normal "$tmp/empty.img"
start_nbdkit empty416 -r "$PLUGIN" "http://127.0.0.1:$fault_port/empty.img"
got=$(timeout "$client_timeout" nbdinfo --size "$uri")
[ "$got" = 0 ] || fail "the empty object gave a disk of $got bytes"
stop_nbdkit empty416
grep -q '^GET .*range=bytes=0-8191 .*status=416 ' "$tmp/fault.log" ||
  fail "no 416 confirmed the empty object"

start_nginx
: >"$tmp/www/empty.img"
start_nbdkit empty -r "$PLUGIN" "http://127.0.0.1:$port/empty.img"
got=$(timeout "$client_timeout" nbdinfo --size "$uri")
[ "$got" = 0 ] || fail "the empty object gave a disk of $got bytes"
stop_nbdkit empty
grep -q ' GET bytes=0-8191 200 0 ' "$tmp/access.log" || {
  cat "$tmp/access.log" >&2
  fail "no ranged GET confirmed the empty object on nginx"
}

# HEAD says 0, and the probe's GET is answered 200 with both
# Content-Length: 0 and Transfer-Encoding: chunked, the chunked body
# being the whole object (Transfer-Encoding wins, RFC 9112 6.3).  nbdkit
# may refuse to start or serve the real size, never an empty disk.
stop_pid "$fault_pid"
: >"$tmp/fault.log"
start_fault_server head-zero-chunked "$tmp/disk.img"
rm -f "$tmp/chunked.size"
st=0
timeout 20 "${NBDKIT[@]}" -f -U "$tmp/chunked.sock" -r "$PLUGIN" \
        "http://127.0.0.1:$fault_port/disk.img" \
        --run "nbdinfo --size \"\$uri\" >$tmp/chunked.size" \
        </dev/null 2>"$tmp/chunked.err" || st=$?
[ "$st" -ne 124 ] || fail "head-zero-chunked: nbdkit hung (killed after 20 s)"
assert_no_crash "$tmp/chunked.err" "$st"
grep -q '^GET .*range=bytes=0-8191 .*status=200 ' "$tmp/fault.log" || {
  cat "$tmp/fault.log" >&2
  fail "head-zero-chunked: the probe's GET was not answered as planned"
}
if [ -e "$tmp/chunked.size" ]; then
  # nbdkit started: --run ran nbdinfo.
  got=$(cat "$tmp/chunked.size")
  [ "$got" = "$size" ] ||
    fail "head-zero-chunked: \"200, Content-Length: 0\" with a chunked" \
         "body of $size bytes gave a disk of '$got' bytes, not $size"
  echo "head-zero-chunked: served the real size, $got bytes"
else
  [ "$st" -ne 0 ] || fail "head-zero-chunked: nbdkit exited 0 without serving"
  assert_grep_i "$tmp/chunked.err" error
  echo "head-zero-chunked: refused: $(grep -i -m1 error "$tmp/chunked.err")"
fi

# Writes to that server (HEAD says 0, GET and a partial PUT are right):
# the check after the first write must not take HEAD's 0 for the size
# (which would call the write "ignored Content-Range" and stop all
# writes), but confirm it with a ranged GET, as the probe does.
stop_pid "$fault_pid"
: >"$tmp/fault.log"
start_fault_server head-zero "$tmp/disk.img"
start_nbdkit hzrw "$PLUGIN" "http://127.0.0.1:$fault_port/disk.img"
nbdsh -u "$uri" -c '
for off in (8192, 65536):
    h.pwrite(b"\xaa" * 4096, off)
' >"$tmp/hzrw.out" 2>&1 || {
  cat "$tmp/hzrw.out" "$tmp/hzrw.err" >&2
  fail "head-zero: writes to a server whose HEAD says 0 failed"
}
stop_nbdkit hzrw
! grep -qi "ignored Content-Range" "$tmp/hzrw.err" ||
  fail "head-zero: a correct write was called 'ignored Content-Range'"
[ "$(file_size "$tmp/disk.img")" = "$size" ] ||
  fail "head-zero: the object's size changed"
[ "$(dd if="$tmp/disk.img" bs=4096 skip=2 count=1 2>/dev/null |
     tr -d '\252' | wc -c)" -eq 0 ] ||
  fail "head-zero: the first write is not in the object"
