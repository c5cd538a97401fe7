#!/usr/bin/env bash
# test-curl-redirect-renew-waiters.sh: reads that wait for a renewal of
# the remembered target (or for url-script's run) share its outcome, so
# none waits for more than one renewal per try of its own.  Renewals run
# one at a time; each waiting read used to run its own in turn once the
# one before had failed, so the k-th read waited k renewals (8 reads,
# timeout=3: 3, 6, ... 24 s).  timeout=2 retries=0, 8 reads at once:
#  - expired: the presigned target (Expires=, 8 s) has expired and the
#    redirector hangs;
#  - refused: the target answers 403 and the redirector hangs;
#  - script: url-script's URL answers 403 and the script, run again,
#    hangs.
# Every read ends (with EIO: nothing answers) within 2 x timeout + 2 s
# of when it was sent, and once the redirector (the script) answers
# again, reads are served again, byte-exact.
#  - margin: a target that lives 12 s, a redirector that hangs from
#    6.5 s before its end, reads one after another until 0.5 s before:
#    none fails and none takes longer than 2 x timeout + 2 s.  The
#    renewal starts at least 2 x timeout + 1 s before the expiry, so the
#    old target outlives a renewal that hangs (a tenth of the life, 1 s
#    here, was less than the renewal took: the renewing read failed).
# Most of the time is waiting for links to expire: the expired case's
# link ages while the refused and script cases run, and the margin's
# life is the least that keeps its renewal window at 2 x timeout + 1 s.
# url= is helpers/redirector.py; the target is nginx, which does not
# check the link (the plugin reads its Expires= all the same).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh
requires nginx

# /disk.img answers 403 while DIR/refuse exists.
start_nginx_named obj "location = /disk.img {
      if (-f DIR/refuse) { return 403; }
    }"
image=$tmp/nginx-obj/www/disk.img
make_random_file "$image" $((4 * 1024 * 1024))
start_redirector rd
echo "http://127.0.0.1:$obj_port/disk.img" >"$tmp/rd/target"
cat >"$tmp/url.sh" <<EOF
#!/bin/sh
[ -f "$tmp/script-hang" ] && exec sleep 60
echo "http://127.0.0.1:$obj_port/disk.img"
EOF
chmod +x "$tmp/url.sh"
bound=6                         # 2 x timeout + 2 s

# The Expires= of the first link the target was asked with.
first_expiry ()
{
  sed -n 's/.*Expires=\([0-9]*\)&.*/\1/p' "$tmp/nginx-obj.log" | head -1
}

# waiters MODE START FIRST HANG...: FIRST reads, then when START
# (seconds since the epoch) has come, create the files HANG..., send 8
# reads at once, wait for each (each must fail), remove the files, and
# read until one is served (at most 20 s).
waiters ()
{
  local mode=$1 start=$2 first=$3
  shift 3
  START=$start FIRST=$first FILE=$image HANG="$*" BOUND=$bound \
    nbdsh -u "$uri" -c '
import os, time
data = open(os.environ["FILE"], "rb").read()
files = os.environ["HANG"].split()

def check(buf, off):
    assert buf.to_bytearray() == data[off:off + 4096], "wrong data at %d" % off

# 20 reads served first (here or before): the target is not one that
# keeps failing soon after it was found (those are given up, and reads
# follow url=).
for i in range(int(os.environ["FIRST"])):
    off = i * 4096
    assert h.pread(4096, off) == data[off:off + 4096], "wrong data at %d" % off
time.sleep(max(0, float(os.environ["START"]) - time.time()))
for f in files:
    open(f, "w").close()
sent, ended, failed = {}, {}, 0
for i in range(8):
    off = (i + 1) * 65536
    b = nbd.Buffer(4096)
    sent[h.aio_pread(b, off)] = (b, off, time.time())
deadline = time.time() + 60
while len(ended) < len(sent) and time.time() < deadline:
    h.poll(100)
    for c in [c for c in sent if c not in ended]:
        try:
            if h.aio_command_completed(c):
                check(sent[c][0], sent[c][1])
                ended[c] = time.time() - sent[c][2]
        except nbd.Error:
            ended[c] = time.time() - sent[c][2]
            failed += 1
for f in files:
    os.unlink(f)
lat = sorted(round(t, 1) for t in ended.values())
print("latencies %s failed %d" % (lat, failed))
assert len(ended) == 8, "%d reads never ended" % (8 - len(ended))
assert failed == 8, "%d reads were served: nothing was to answer" % (8 - failed)
assert lat[-1] <= float(os.environ["BOUND"]), \
    "a read took %.1f s: it waited for more than one renewal" % lat[-1]
deadline = time.time() + 20
while True:
    try:
        assert h.pread(4096, 8192) == data[8192:12288], "wrong data"
        break
    except nbd.Error:
        assert time.time() < deadline, "reads are not served again"
        time.sleep(0.5)
h.shutdown()
' >"$tmp/$mode.out" 2>&1 || {
    cat "$tmp/$mode.out" >&2
    problem "$mode: reads waited too long, or failed"
  }
  rm -f "$@"
  echo "$mode: 8 reads at once: $(head -1 "$tmp/$mode.out")"
}

params=(timeout=2 retries=0 readahead=false)

# expired: a link of 8 s, found at start-up, and its 20 reads served
# at once, before its renewal window (4 s before the end) opens.  No
# read then until it expired: the next two cases run meanwhile.
echo "x 8" >"$tmp/rd/sign"
: >"$tmp/nginx-obj.log"
start_nbdkit expired -r -v "$PLUGIN" \
             "http://127.0.0.1:$rd_port/disk.img" "${params[@]}"
expired_uri=$uri
expires=$(first_expiry)
[ -n "$expires" ] || fail "expired: no link with an expiry was used"
read_in_turn "$image" 0 20 4096 >"$tmp/expired-first.out" 2>&1 || {
  cat "$tmp/expired-first.out" >&2
  fail "expired: the first reads failed"
}
rm -f "$tmp/rd/sign"

# refused: the target, with no expiry, answers 403.
start_nbdkit refused -r -v "$PLUGIN" \
             "http://127.0.0.1:$rd_port/disk.img" "${params[@]}"
waiters refused 0 20 "$tmp/rd/hang" "$tmp/nginx-obj/refuse"
stop_nbdkit refused

# script: url-script's URL answers 403, the script hangs.
start_nbdkit script -r -v "$PLUGIN" "url-script=$tmp/url.sh" \
             "${params[@]}"
waiters script 0 20 "$tmp/script-hang" "$tmp/nginx-obj/refuse"
stop_nbdkit script
grep -q "url-script.*waited" "$tmp/script.err" ||
  problem "script: no message about the run that the reads waited for"

uri=$expired_uri
echo "x 8" >"$tmp/rd/sign"
waiters expired "$((expires + 1))" 0 "$tmp/rd/hang"
stop_nbdkit expired

# margin: the renewal window opens 2 x timeout + 1 s before the end.
# It is at most half the life, which the plugin may see a second short:
# 12 s is the least life that keeps it at 5 s.
echo "x 12" >"$tmp/rd/sign"
: >"$tmp/nginx-obj.log"
start_nbdkit margin -r -v "$PLUGIN" \
             "http://127.0.0.1:$rd_port/disk.img" "${params[@]}"
expires=$(first_expiry)
[ -n "$expires" ] || fail "margin: no link with an expiry was used"
EXPIRES=$expires FILE=$image HANG=$tmp/rd/hang BOUND=$bound \
  nbdsh -u "$uri" -c '
import os, time
data = open(os.environ["FILE"], "rb").read()
expires = int(os.environ["EXPIRES"])
bad, n, slowest = [], 0, 0
while time.time() < expires - 0.5:
    if time.time() >= expires - 6.5 and not os.path.exists(os.environ["HANG"]):
        open(os.environ["HANG"], "w").close()
    off = (n * 37 * 4096) % (len(data) - 4096)
    t0 = time.time()
    try:
        ok = h.pread(4096, off) == data[off:off + 4096]
    except nbd.Error as e:
        ok = False
    dt = time.time() - t0
    slowest = max(slowest, dt)
    if not ok or dt > float(os.environ["BOUND"]):
        bad.append((round(expires - t0, 1), round(dt, 1), ok))
    n += 1
    time.sleep(0.02)
os.path.exists(os.environ["HANG"]) and os.unlink(os.environ["HANG"])
print("%d reads, slowest %.1f s; failed or slow (s before the end, "
      "latency, ok): %s" % (n, slowest, bad))
assert not bad, "a read before the end failed or was slow"
h.shutdown()
' >"$tmp/margin.out" 2>&1 || {
  cat "$tmp/margin.out" >&2
  problem "margin: a read failed or waited while the old target was valid"
}
stop_nbdkit margin
echo "margin: $(head -1 "$tmp/margin.out")"
grep -q "asking for a new redirect target failed" "$tmp/margin.err" ||
  problem "margin: the renewal did not fail (the redirector did not hang?)"
check_problems
