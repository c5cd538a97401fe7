#!/usr/bin/env bash
# test-curl-readahead-changed.sh: read-ahead never serves bytes of an
# object that changed.  nginx serves a 24 MiB image; it is replaced by
# another of the same size and other bytes (a new file renamed over it,
# its modification time 10 s later, so its ETag differs).
#  (a) A stream that starts after the change: from 1 MiB on as many
#      reads as are answered before a stream starts (16 on loopback, 2
#      if the probe measured 2 ms or more: stream_lead), the
#      replacement, then three reads that continue them (the first of
#      them starts a stream, whose GET of more than the read carries the
#      pin and is refused with 412): each fails with EIO, none gives
#      bytes.
#  (b) Bytes read ahead before the change, dropped once the plugin sees
#      it: as many sequential reads and 20 more (a stream serves those
#      and reads ahead), the replacement, at once a read far away (its
#      GET is refused: EIO), then the next sequential reads, whose bytes
#      the stream holds: they must fail with EIO too, never give the
#      bytes held.
# In both, the new version's bytes never reach the client, and nbdkit's
# stderr says "changed since it was opened".
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

M=$((1024 * 1024))
size=$((24 * M))
serve_image "$size"
cp "$image" "$tmp/v1.img"
make_random_file "$tmp/v2.img" "$size"

# changed NAME SCRIPT: serve v1 (again), then nbdsh runs the common
# part below and SCRIPT with replace() (v2 renamed over the image) and
# must_fail(off) (a 64 KiB read at off fails with EIO, never gives
# bytes); nbdkit's stderr in $tmp/NAME.err.
changed ()
{
  local name=$1
  cp "$tmp/v1.img" "$image"
  touch -d @1700000000 "$image"
  : >"$tmp/access.log"
  start_nbdkit "$name" -r -v -D curl.readahead=1 "$PLUGIN" "$url"
  stream_lead "$name"
  LEAD=$lead V1=$tmp/v1.img V2=$tmp/v2.img DISK=$image nbdsh -u "$uri" -c '
import errno, os, shutil, time
v1 = open(os.environ["V1"], "rb").read()
v2 = open(os.environ["V2"], "rb").read()
M = 1024 * 1024
K64 = 65536
LEAD = int(os.environ["LEAD"])

# The new version is ready beside the image: replace() only renames it,
# and the old one keeps a name (freeing its blocks takes milliseconds).
new = os.environ["DISK"] + ".new"
shutil.copyfile(os.environ["V2"], new)
os.chmod(new, 0o644)
os.utime(new, (1700000010, 1700000010))
old = os.environ["DISK"] + ".old"
if os.path.exists(old):
    os.unlink(old)
os.link(os.environ["DISK"], old)

def replace():
    os.rename(new, os.environ["DISK"])

def must_fail(off):
    try:
        got = h.pread(K64, off)
    except nbd.Error as e:
        assert e.errnum == errno.EIO, \
            "read at %d: not EIO: %s" % (off, e.string)
        return
    which = ("the new version" if got == v2[off:off + K64] else
             "the old version" if got == v1[off:off + K64] else "other")
    raise SystemExit("read at %d after the change gave %s'"'"'s bytes"
                     % (off, which))
'"$2"'
h.shutdown()
' >"$tmp/$name.out" 2>&1 || {
    cat "$tmp/$name.out" >&2
    problem "($name) $(tail -n 1 "$tmp/$name.out")"
  }
  stop_nbdkit "$name"
  grep -q "changed since it was opened" "$tmp/$name.err" ||
    problem "($name) no 'changed since it was opened' in nbdkit's stderr"
  cp "$tmp/access.log" "$tmp/access-$name.log"
}

# (a)
changed after '
for i in range(LEAD):
    off = M + i * K64
    assert h.pread(K64, off) == v1[off:off + K64], "read at %d is not v1" % off
replace()
for i in range(LEAD, LEAD + 3):
    must_fail(M + i * K64)
'
# The stream asked for more than a read, pinned: 412.
awk '$2 == "GET" && $4 == 412 && $3 ~ /^bytes=[0-9]+-[0-9]+$/ {
       split(substr($3, 7), ab, "-")
       if (ab[2] - ab[1] + 1 > 65536) found = 1
     }
     END { exit !found }' "$tmp/access.log" || {
  cat "$tmp/access.log" >&2
  problem "(a) no read-ahead GET (longer than a read) refused with 412"
}
# After the probe and the first reads, no GET was answered with bytes.
! sed "1,$((lead + 1))d" "$tmp/access.log" | grep -qE " GET bytes=[0-9]+-[0-9]+ 206 " ||
  { cat "$tmp/access.log" >&2; problem "(a) a GET after the change gave bytes"
  }

# (b)
changed held '
off = M
for i in range(LEAD + 20):
    assert h.pread(K64, off) == v1[off:off + K64], "read at %d is not v1" % off
    off += K64
# At once (a stream that the reads leave for 20 ms is dropped anyway),
# but once the GETs asked for at the last read had their answers begun
# (one answered after the change is refused, which drops its stream):
# here only the change seen may drop the bytes held.
time.sleep(0.005)
replace()
must_fail(20 * M)
for i in range(4):
    must_fail(off)
    off += K64
'
# At the read after the lead or the one after it.
at=$((M + lead * 65536))
grep -qE "read-ahead: stream from ($at|$((at + 65536))) " \
     "$tmp/held.err" ||
  problem "(b) no stream started on the first sequential reads"
grep -qE "^[0-9]+ GET bytes=$((20 * M))-[0-9]+ 412 " \
     "$tmp/access.log" || {
  cat "$tmp/access.log" >&2
  problem "(b) the read far away was not refused with 412"
}

check_problems
