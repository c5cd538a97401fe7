#!/usr/bin/env bash
# test-curl-exit-quiet.sh: a client that reads a boot sector and leaves,
# with a server 40 ms away that stops answering after the probe: nbdkit
# exits at once with status 0 and prints no error.  The boot sector came
# with the probe's answer, and the spare connections opened during the
# probe sent no request: the server saw the probe's GET and nothing else.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

make_random_file "$tmp/disk.img" $((1024 * 1024))
start_fault_server stall-after-probe "$tmp/disk.img"
start_linkem "$fault_port" 40
st=0
t0=$EPOCHREALTIME
timeout 60 "${NBDKIT[@]}" -r -U - -v "$PLUGIN" \
  "http://127.0.0.1:$linkem_port/disk.img" \
  --run 'sleep 0.5; '"$PYTHON_NBD"' -m nbd -u "$uri" -c "h.pread(512, 0)"' \
  </dev/null >"$tmp/run.out" 2>"$tmp/run.err" || st=$?
secs=$(seconds_since "$t0")
echo "nbdkit ran ${secs} s, status $st"
[ "$st" -eq 0 ] || { cat "$tmp/run.err" >&2; fail "nbdkit exited with $st"; }
grep -q ': 15 spare connections open$' "$tmp/run.err" ||
  fail "no spare connections were open: the test did not test"
stalled=$(grep -c '^stalled:' "$tmp/fault.log" || :)
[ "$stalled" -eq 0 ] ||
  fail "$stalled requests after the probe's: $(grep '^stalled:' "$tmp/fault.log")"
if grep -E '(^|: )error: ' "$tmp/run.err"; then
  fail "nbdkit printed errors at its exit"
fi
awk -v s="$secs" 'BEGIN { exit !(s < 5) }' ||
  fail "nbdkit took $secs s to exit"
