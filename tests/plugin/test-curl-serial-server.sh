#!/usr/bin/env bash
# test-curl-serial-server.sh: a server that serves one connection at a
# time and closes each after one answer (helpers/fault-server.py serial,
# as a simple single-threaded server does).  The spare connections must
# not come before the probe's in its queue, nor be taken in another
# order than it accepts them:
#  (a) on loopback: nbdinfo --size answers, and a copy is byte-exact;
#  (b) 30 ms away (helpers/linkem), where the spares are kept: the same,
#      and reads one at a time (a client that keeps one read in flight)
#      are byte-exact.
# Before the spares opened once the probe's connection was up, the
# server accepted a spare first and waited for its request while the
# probe waited in its queue: start-up hung.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy
requires nbdinfo
requires_nbdsh

size=$((1024 * 1024 + 77))
make_random_file "$tmp/disk.img" "$size"
start_fault_server serial "$tmp/disk.img"

# check WHAT URL: size, a copy, and reads one at a time, each within 30 s.
check ()
{
  local what=$1 url=$2 got
  start_nbdkit "$what" -r -v "$PLUGIN" "$url"
  got=$(timeout 30 nbdinfo --size "$uri") ||
    fail "($what) nbdinfo failed or hung (status $?)"
  [ "$got" -eq "$size" ] || fail "($what) size $got, expected $size"
  timeout 30 nbdcopy "$uri" "$tmp/out.img" ||
    fail "($what) nbdcopy failed or hung (status $?)"
  assert_same_file "$tmp/disk.img" "$tmp/out.img"
  rm -f "$tmp/out.img"
  FILE=$tmp/disk.img nbdsh -u "$uri" -c '
import os
data = open(os.environ["FILE"], "rb").read()
for off in (9000, 500000, 3, 1044000, 200000):
    assert h.pread(4096, off) == data[off:off + 4096], "offset %d" % off
' || fail "($what) reads one at a time failed, hung or were wrong"
  stop_nbdkit "$what"
}

check a "http://127.0.0.1:$fault_port/disk.img"
start_linkem "$fault_port" 30
check b "http://127.0.0.1:$linkem_port/disk.img"
grep -q ': 15 spare connections open$' "$tmp/b.err" ||
  fail "(b) no spare connections were kept: the test did not test"
