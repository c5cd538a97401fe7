#!/usr/bin/env bash
# test-curl-exit-quiet.sh: a client that reads a boot sector and leaves,
# with a server 40 ms away that stops answering after the probe: nbdkit
# exits at once with status 0 and prints no error.  The boot sector came
# with the probe's answer, and is served from it at once (in under half
# a second).  The head start's GETs, which go out on the
# spare connections once nbdkit runs, stall; they are the only requests
# after the probe's.  The same over HTTP/2 (helpers/h2-fault-server.py, 40 ms away), where
# the head start's GETs go out beside the probe's and never get their
# bodies: still status 0, no error, and an exit within 5 s.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

# quiet_exit NAME URL [PLUGIN-ARGS...]: nbdkit on URL, a client that
# reads the boot sector after half a second and leaves; nbdkit must
# exit 0 within 5 s and print no error.  Its stderr is $tmp/NAME.err.
quiet_exit ()
{
  local name=$1 url=$2 st=0 t0 secs
  shift 2
  t0=$EPOCHREALTIME
  timeout 60 "${NBDKIT[@]}" -r -U - -v "$PLUGIN" "$url" "$@" \
    --run 'sleep 0.5; '"$PYTHON_NBD"' -m nbd -u "$uri" -c "
import time
t = time.monotonic()
h.pread(512, 0)
print(\"boot sector read in %.3f s\" % (time.monotonic() - t))"' \
    </dev/null >"$tmp/$name.out" 2>"$tmp/$name.err" || st=$?
  secs=$(seconds_since "$t0")
  echo "$name: nbdkit ran ${secs} s, status $st"
  [ "$st" -eq 0 ] ||
    { cat "$tmp/$name.err" >&2; fail "$name: nbdkit exited with $st"; }
  if grep -E '(^|: )error: ' "$tmp/$name.err"; then
    fail "$name: nbdkit printed errors at its exit"
  fi
  awk -v s="$secs" 'BEGIN { exit !(s < 5) }' ||
    fail "$name: nbdkit took $secs s to exit"
}

make_random_file "$tmp/disk.img" $((1024 * 1024))
start_fault_server stall-after-probe "$tmp/disk.img"
start_linkem "$fault_port" 40
quiet_exit http "http://127.0.0.1:$linkem_port/disk.img"
grep -q ': 15 spare connections open$' "$tmp/http.err" ||
  fail "no spare connections were open: the test did not test"
grep -q 'HTTP/1.1: a head start of' "$tmp/http.err" ||
  fail "no head start over HTTP/1.1: the test did not test"
# Served from the probe's bytes, not from the head start's stalled GET
# (a read waits for one at least a second before asking on its own).
secs=$(sed -n 's/^boot sector read in \([0-9.]*\) s$/\1/p' "$tmp/http.out")
awk -v s="${secs:-9}" 'BEGIN { exit !(s < 0.5) }' ||
  fail "the boot sector took ${secs:-?} s: not from the probe's bytes"
# The head start asks for the 1 MiB object from 0 in growing GETs.
others=$(grep '^stalled:' "$tmp/fault.log" |
           grep -v -E 'range=bytes=(0|131072|262144|524288)-' || :)
[ -n "$(grep '^stalled:' "$tmp/fault.log")" ] ||
  fail "the head start's GETs did not stall: the test did not test"
[ -z "$others" ] || fail "requests after the probe's: $others"

# HTTP/2: the head start stalls.
requires_h2
make_cert
start_h2_fault_server stall-always "$tmp/disk.img" 1
start_linkem "$h2_port" 40
quiet_exit http2 "https://127.0.0.1:$linkem_port/disk.img" \
  cainfo="$tmp/cert.pem"
grep -q 'a head start of' "$tmp/http2.err" ||
  fail "HTTP/2: no head start: the test did not test"
grep -q 'fault=stall' "$tmp/h2.log" ||
  fail "HTTP/2: the head start did not stall: the test did not test"
