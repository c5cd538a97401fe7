#!/usr/bin/env bash
# test-curl-head-start-http1.sh: the head start over HTTP/1.1.  Once
# nbdkit runs, a distant HTTP/1.1 server gets a stream from the object's
# start asking for its first 12 MiB, on the pool's connections (the
# spares opened during the probe).  KubeVirt CDI's import (qemu-img
# reading a qcow2 through the retry filter, one read at a time) paid a
# round trip for each of its first metadata reads, then several more
# while read-ahead's window grew: 2.3 s at 100 ms where one curl GET
# took 1.35 s.  A client that has read 1 MiB of the head start gets a
# window of twice the head start at once, so the bytes after it are
# asked for while its own are still coming.
#  nginx over plain HTTP, 30 ms away (helpers/linkem).  nbdsh reads as
#  qemu-img does a qcow2, one read at a time: 512 bytes at 0, 8 at 192
#  KiB, 64 KiB at 64 KiB and at 256 KiB, then 1 MiB reads from 320 KiB
#  to 3 MiB, each checked against the image.  nginx is asked for none
#  of those ranges (the head start's GETs served them), and read-ahead
#  asked for bytes past 12 MiB while the reads were still within the
#  first 4 MiB.  With -D curl.headstart=0 there is no head start, and
#  nginx is asked for the small reads' own ranges.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

size=$((24 * 1024 * 1024 + 123))
serve_image "$size" 'access_log DIR/access.log ranges;'
start_linkem "$port" 30
url=http://127.0.0.1:$linkem_port/disk.img

# qcow2_reads NAME: the reads above through nbdkit NAME, checked.
qcow2_reads ()
{
  FILE=$image nbdsh -u "$uri" -c '
import os
data = open(os.environ["FILE"], "rb").read()
M = 1024 * 1024
reads = [(0, 512), (196608, 8), (65536, 65536), (262144, 65536)]
reads += [(327680 + i * M, M) for i in range(3)]
for off, n in reads:
    assert h.pread(n, off) == data[off:off + n], "read at %d differs" % off
' || fail "$1: the reads failed or differ"
}

# asked_small: how many GETs asked for one of the small reads' ranges.
asked_small ()
{
  grep -c -E 'GET bytes=(196608-196615|65536-131071|262144-327679) ' \
    "$tmp/access.log" || :
}

: >"$tmp/access.log"
start_nbdkit h1 -r -v -D curl.readahead=1 "$PLUGIN" "$url"
# Said once nbdkit runs, which may be just after its socket is there.
wait_log "$tmp/h1.err" 'HTTP/1.1: a head start of 12288 KiB goes out'

qcow2_reads h1
grep -q 'read-ahead: stream from 0 asks for 1258291[0-9]-' "$tmp/h1.err" ||
  problem "read-ahead asked for nothing past the head start within 4 MiB"
stop_nbdkit h1
n=$(asked_small)
[ "$n" -eq 0 ] || problem "nginx was asked for $n of the small reads"

: >"$tmp/access.log"
start_nbdkit off -r -v -D curl.headstart=0 "$PLUGIN" "$url"
wait_log "$tmp/off.err" 'no head start over HTTP/1.1: -D curl.headstart=0'
qcow2_reads off
stop_nbdkit off
n=$(asked_small)
[ "$n" -ge 2 ] ||
  problem "without a head start nginx was asked for $n of the small reads"

check_problems
