#!/usr/bin/env bash
# test-curl-redirect-renew-stuck.sh: a redirector that hangs or fails
# while the remembered target is due for renewal (a tenth of its life
# before its expiry, but at least 2 x timeout + 1 s) but still valid
# holds up one read at a time at most: the others go on with the old
# target, and a failed renewal backs off before the next (issue 37,
# points 11 and 12).
# url= is helpers/redirector.py, which redirects to a link that nginx's
# secure_link module checks and that lives 12 s.  With 16 reads in
# flight (random 4 KiB blocks, each compared with the image), reads per
# second are counted for 1 s before the renewal window, with the
# redirector answering, and for 1 s inside the window, with it:
#  - hang: accepting and never answering (timeout=2);
#  - fail: answering 503.
# Inside the window the rate must be at least half the rate before it
# (it fell to a read every 2 s, and to a fortieth, without the fix), and
# the redirector is asked at most 3 times in the window (once per read
# without the fix: 69-145 times in 0.6 s).  Every read is byte-exact,
# and the link is renewed once the redirector answers again.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh
requires_secure_link

secret=st-$RANDOM$RANDOM
start_signed_nginx "$secret"
image=$tmp/nginx-signed/www/disk.img
make_random_file "$image" $((8 * 1024 * 1024))
start_redirector rd
echo "http://127.0.0.1:$signed_port/disk.img" >"$tmp/rd/target"
echo "$secret 12" >"$tmp/rd/sign"

for mode in hang fail; do
  rm -f "$tmp/rd/hang" "$tmp/rd/fail"
  : >"$tmp/rd.log"
  : >"$tmp/nginx-signed.log"
  start_nbdkit "$mode" -r -v "$PLUGIN" "http://127.0.0.1:$rd_port/disk.img" \
               timeout=2
  expires=$(sed -n 's/.*Expires=\([0-9]*\)&.*/\1/p' "$tmp/nginx-signed.log" |
              head -1)
  [ -n "$expires" ] || fail "$mode: no signed link was used"
  # The window opens at expires - 5 (2 x timeout + 1 s: more than a
  # tenth of the link's life, 11 or 12 s as the plugin sees it), so the
  # redirector misbehaves from 5.5 s to 1 s before the end, and the
  # window's rate is counted from 3.9 to 2.9 s before it.
  EXPIRES=$expires FILE=$image CTRL=$tmp/rd/$mode RDLOG=$tmp/rd.log \
    nbdsh -u "$uri" -c '
import os, random, time
data = open(os.environ["FILE"], "rb").read()
expires = int(os.environ["EXPIRES"])
rnd = random.Random(11)

def until(t):
    time.sleep(max(0, t - time.time()))

def drain(inflight, deadline):
    while inflight and time.time() < deadline:
        h.poll(100)
        for c in [c for c in inflight if h.aio_command_completed(c)]:
            buf, off = inflight.pop(c)
            assert buf.to_bytearray() == data[off:off + 4096], \
                "wrong data at %d" % off
    assert not inflight, "%d reads never ended" % len(inflight)

# The reads that end in secs from start, 16 in flight; those still in
# flight at the end are left in inflight.
def rate(start, secs, inflight):
    until(start)
    end, done = time.time() + secs, 0
    while time.time() < end:
        while len(inflight) < 16:
            off = rnd.randrange(len(data) // 4096) * 4096
            buf = nbd.Buffer(4096)
            inflight[h.aio_pread(buf, off)] = (buf, off)
        h.poll(100)
        for c in [c for c in inflight if h.aio_command_completed(c)]:
            buf, off = inflight.pop(c)
            assert buf.to_bytearray() == data[off:off + 4096], \
                "wrong data at %d" % off
            done += 1
    return done

inflight = {}
before = rate(expires - 7.4, 1.0, inflight)
drain(inflight, time.time() + 10)
until(expires - 5.5)
open(os.environ["CTRL"], "w").close()
asked0 = sum(1 for _ in open(os.environ["RDLOG"]))
during = rate(expires - 3.9, 1.0, inflight)
asked = sum(1 for _ in open(os.environ["RDLOG"])) - asked0
# The hang outlasts the renewal that met it (timeout=2, seen within a
# second more), which must fail; the next may start only at the expiry.
until(expires - 1.0)
os.unlink(os.environ["CTRL"])
drain(inflight, time.time() + 30)
# After its end: the link is renewed, reads go on.
until(expires + 2.5)
after = rate(time.time(), 0.5, inflight)
drain(inflight, time.time() + 10)
print("before %d during %d after %d asked %d" % (before, during, after, asked))
h.shutdown()
' >"$tmp/$mode.out" 2>&1 || {
    cat "$tmp/$mode.out" >&2
    fail "$mode: reads failed"
  }
  stop_nbdkit "$mode"
  read -r _ before _ during _ after _ asked <"$tmp/$mode.out"
  echo "$mode: reads in 1 s: $before before the window, $during in it" \
       "($after in 0.5 s after its end); the redirector asked $asked" \
       "times in the window"
  [ "$before" -ge 20 ] || fail "$mode: only $before reads in 1 s before"
  [ $((during * 2)) -ge "$before" ] ||
    fail "$mode: $during reads in 1 s in the renewal window, against" \
         "$before before it: reads waited for the renewal"
  [ "$asked" -le 3 ] || {
    cat "$tmp/rd.log" >&2
    fail "$mode: the redirector was asked $asked times from when it began" \
         "to misbehave to the end of the count: not backed off"
  }
  [ "$after" -ge 1 ] || fail "$mode: no read after the link's end"
  # Renewed once it answered again: a link signed after the first.
  links=$(sed -n 's/.*Expires=\([0-9]*\)&.*/\1/p' "$tmp/nginx-signed.log" |
            sort -u | wc -l)
  [ "$links" -ge 2 ] || fail "$mode: the link was never renewed"
  grep -q "asking for a new redirect target failed" "$tmp/$mode.err" ||
    fail "$mode: no debug line about the failed renewal"
done
