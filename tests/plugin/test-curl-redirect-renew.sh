#!/usr/bin/env bash
# test-curl-redirect-renew.sh: the remembered end of url='s redirect is
# found again when it stops serving, and before it expires.
#  - Refused: part-way through the reads the target answers 403 and url=
#    now redirects to another origin.  The read that got the 403 asks
#    url= again at once and is served by the new target; every read is
#    byte-exact, the old target answered exactly one 403, and url= was
#    asked twice in all.
#  - Refused, with 64 reads in flight: the others wait for the one read
#    that asks url= again, so url= is still asked twice in all.
#  - Unreachable: the target's server stops and url= now redirects to
#    another origin: every read succeeds (after a retry), url= is asked
#    twice in all.
#  - Expiring: url= answers with a presigned-style URL (Expires= and a
#    signature, checked by nginx's secure_link module) that lives 5 s.
#    Reads spread over 12 s all succeed; the URL was signed again before
#    it expired (nginx never answered 410), a few times, not per read.
#  - Down: url= stops answering; in the second before the link's end
#    (when it is due for renewal) a read still succeeds with it; after
#    its end a read fails on url=, the expired link not asked.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh
requires_secure_link

size=$((2 * 1024 * 1024 + 333))

# count LOG ERE: the lines of LOG that match.
count ()
{
  grep -cE -- "$2" "$1" || :
}

# ----------------------------------------------------------------------
# Refused.  "old" stops serving when DIR/gone exists; "new" has a copy
# with the same modification time (so the same ETag and Last-Modified:
# the same object to the pin); the front redirects to "new" once
# DIR/moved exists.
start_nginx_named old 'location = /disk.img {
      if (-f DIR/gone) { return 403; }
    }'
make_random_file "$tmp/nginx-old/www/disk.img" "$size"
start_nginx_named new
cp -p "$tmp/nginx-old/www/disk.img" "$tmp/nginx-new/www/disk.img"
start_nginx_named front "location = /disk.img {
      if (-f DIR/moved) { return 302 http://127.0.0.1:$new_port/disk.img; }
      return 302 http://127.0.0.1:$old_port/disk.img;
    }"
image=$tmp/nginx-old/www/disk.img

start_nbdkit refused -r -v "$PLUGIN" "http://127.0.0.1:$front_port/disk.img"
# Ten reads from the old target, then it refuses and the front moves on,
# then ten more reads (none inside the probe's first 8 KiB).
reads_moved_at_11 refused 65536 17 5000 "$tmp/nginx-front/moved" \
  "$tmp/nginx-old/gone"
stop_nbdkit refused

front_gets=$(count "$tmp/nginx-front.log" " GET /disk.img 302 ")
[ "$front_gets" -eq 2 ] && [ "$(wc -l <"$tmp/nginx-front.log")" -eq 2 ] || {
  cat "$tmp/nginx-front.log" >&2
  fail "refused: url= was asked $front_gets times, not twice (start-up," \
       "and once after the 403)"
}
refusals=$(count "$tmp/nginx-old.log" " GET /disk.img 403 ")
[ "$refusals" -eq 1 ] || {
  cat "$tmp/nginx-old.log" >&2
  fail "refused: the old target answered $refusals 403s, not one"
}
old_reads=$(count "$tmp/nginx-old.log" " GET /disk.img 206 ")
new_reads=$(count "$tmp/nginx-new.log" " GET /disk.img 206 ")
[ "$old_reads" -ge 10 ] && [ "$new_reads" -ge 10 ] || {
  cat "$tmp/nginx-old.log" "$tmp/nginx-new.log" >&2
  fail "refused: $old_reads reads from the old target, $new_reads from" \
       "the new one (expected at least 10 each)"
}
[ "$(wc -l <"$tmp/nginx-new.log")" -eq "$new_reads" ] || {
  cat "$tmp/nginx-new.log" >&2
  fail "refused: the new target answered something other than 206"
}
grep -qE "the redirect target of .* failed \(.*403.*\): asking" \
     "$tmp/refused.err" || fail "refused: no debug line about the 403"
echo "refused: front 2 GETs, old target $old_reads reads and 1 403," \
     "new target $new_reads reads"

# ----------------------------------------------------------------------
# Refused, with many reads at once.
rm -f "$tmp/nginx-front/moved" "$tmp/nginx-old/gone"
for s in front old new; do : >"$tmp/nginx-$s.log"; done
start_nbdkit load -r "$PLUGIN" "http://127.0.0.1:$front_port/disk.img"
random_reads "$uri" "$image" 300
touch "$tmp/nginx-front/moved" "$tmp/nginx-old/gone"
random_reads "$uri" "$image" 600
stop_nbdkit load
front_gets=$(count "$tmp/nginx-front.log" " GET /disk.img 302 ")
[ "$front_gets" -eq 2 ] && [ "$(wc -l <"$tmp/nginx-front.log")" -eq 2 ] || {
  cat "$tmp/nginx-front.log" >&2
  fail "load: url= was asked $front_gets times, not twice"
}
refusals=$(count "$tmp/nginx-old.log" " GET /disk.img 403 ")
new_reads=$(count "$tmp/nginx-new.log" " GET /disk.img 206 ")
[ "$refusals" -ge 1 ] && [ "$refusals" -le 64 ] && [ "$new_reads" -ge 10 ] &&
  [ "$(wc -l <"$tmp/nginx-new.log")" -eq "$new_reads" ] || {
  cat "$tmp/nginx-old.log" "$tmp/nginx-new.log" >&2
  fail "load: the old target answered $refusals 403s, the new one" \
       "$new_reads reads"
}
echo "load: front 2 GETs, old target $refusals 403s, new target" \
     "$new_reads reads"

# ----------------------------------------------------------------------
# Unreachable: the old target's server stops.
rm -f "$tmp/nginx-front/moved" "$tmp/nginx-old/gone"
for s in front old new; do : >"$tmp/nginx-$s.log"; done
start_nbdkit unreachable -r -v "$PLUGIN" \
             "http://127.0.0.1:$front_port/disk.img"
FILE=$image nbdsh -u "$uri" -c '
import os
data = open(os.environ["FILE"], "rb").read()
off = 65536 * 3
assert h.pread(5000, off) == data[off:off + 5000], "the first read differs"
h.shutdown()
' >"$tmp/unreachable1.out" 2>&1 || {
  cat "$tmp/unreachable1.out" >&2
  fail "unreachable: the first read failed"
}
touch "$tmp/nginx-front/moved"
stop_pid "$old_pid"
FILE=$image nbdsh -u "$uri" -c '
import os
data = open(os.environ["FILE"], "rb").read()
for i in range(4, 14):
    off = i * 65536 + 3
    assert h.pread(5000, off) == data[off:off + 5000], "read %d differs" % i
h.shutdown()
' >"$tmp/unreachable2.out" 2>&1 || {
  cat "$tmp/unreachable2.out" >&2
  fail "unreachable: reads after the old target stopped failed"
}
stop_nbdkit unreachable
front_gets=$(count "$tmp/nginx-front.log" " GET /disk.img 302 ")
new_reads=$(count "$tmp/nginx-new.log" " GET /disk.img 206 ")
[ "$front_gets" -eq 2 ] && [ "$new_reads" -eq 10 ] || {
  cat "$tmp/nginx-front.log" "$tmp/nginx-new.log" >&2
  fail "unreachable: url= was asked $front_gets times (not twice), the" \
       "new target served $new_reads reads (not 10)"
}
grep -qE "the redirect target of .* failed \(.*connect.*\): asking" \
     "$tmp/unreachable.err" ||
  fail "unreachable: no debug line about the failed connection"
echo "unreachable: front 2 GETs, new target $new_reads reads"

# ----------------------------------------------------------------------
# Expiring.  nginx checks the link: 403 for a bad signature, 410 once
# the time in Expires has passed.  The front signs, which nginx cannot
# do: a link for now + 5 s, with the secure_link_md5 expression below.
secret=rt-$RANDOM$RANDOM
start_signed_nginx "$secret"
cp -p "$image" "$tmp/nginx-signed/www/disk.img"

rm -f "$tmp/signer.port"
SECRET=$secret TARGET=http://127.0.0.1:$signed_port \
  "$PYTHON" -c '
import base64, hashlib, http.server, os, sys, time

class Signer(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self):
        expires = int(time.time()) + 5
        text = "%d/disk.img %s" % (expires, os.environ["SECRET"])
        sig = base64.urlsafe_b64encode(hashlib.md5(text.encode()).digest())
        loc = "%s/disk.img?Expires=%d&md5=%s" % (
            os.environ["TARGET"], expires, sig.decode().rstrip("="))
        self.send_response(302)
        self.send_header("Location", loc)
        self.send_header("Content-Length", "0")
        self.end_headers()
        with open(sys.argv[2], "a") as log:
            log.write("%s %s 302 %s\n" % (self.command, self.path, loc))

    do_GET = do_HEAD = answer

    def log_message(self, *args):
        pass

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Signer)
with open(sys.argv[1] + ".new", "w") as f:
    f.write("%d\n" % server.server_address[1])
os.rename(sys.argv[1] + ".new", sys.argv[1])
server.serve_forever()
' "$tmp/signer.port" "$tmp/signer.log" </dev/null >"$tmp/signer.out" 2>&1 &
signer_pid=$!
await_port_file "$signer_pid" "$tmp/signer.port" "$tmp/signer.out" \
  "signing server"
signer_port=$(cat "$tmp/signer.port")
: >"$tmp/signer.log"

start_nbdkit expiring -r -v "$PLUGIN" \
             "http://127.0.0.1:$signer_port/disk.img"
t0=$EPOCHREALTIME
# 24 reads half a second apart: 12 s, more than two lifetimes of a link.
slow_reads 24 >"$tmp/expiring.out" 2>&1 || {
  cat "$tmp/expiring.out" >&2
  fail "expiring: reads failed"
}
secs=$(seconds_since "$t0")
stop_nbdkit expiring

expired=$(count "$tmp/nginx-signed.log" " /disk.img[^ ]* 410 ")
refused=$(count "$tmp/nginx-signed.log" " /disk.img[^ ]* 403 ")
[ "$expired" -eq 0 ] && [ "$refused" -eq 0 ] || {
  cat "$tmp/nginx-signed.log" >&2
  fail "expiring: the signed target answered $expired 410s and $refused" \
       "403s: the link was not renewed before it expired"
}
# The start-up, then a renewal a second before each link's end (every
# 3 to 4 s, Expires being whole seconds): 3 to 5 in 12 s, 6 allowed for
# a slow machine.  One per read would be 20 and more.
signed=$(count "$tmp/signer.log" "^GET /disk.img 302 ")
[ "$signed" -ge 3 ] && [ "$signed" -le 6 ] &&
  [ "$(wc -l <"$tmp/signer.log")" -eq "$signed" ] || {
  cat "$tmp/signer.log" >&2
  fail "expiring: url= answered $signed GETs in $secs s, not 3 to 6"
}
signed_get="^http $signed_port GET /disk.img[?]Expires=[0-9]+&md5=[^ ]+ 206 "
served=$(count "$tmp/nginx-signed.log" "$signed_get")
[ "$served" -eq "$(wc -l <"$tmp/nginx-signed.log")" ] &&
  [ "$served" -ge 20 ] || {
  cat "$tmp/nginx-signed.log" >&2
  fail "expiring: $served signed ranged GETs served of" \
       "$(wc -l <"$tmp/nginx-signed.log") requests"
}
links=$(awk '{ print $4 }' "$tmp/signer.log" | sort -u | wc -l)
used=$(awk '{ print $4 }' "$tmp/nginx-signed.log" | sort -u | wc -l)
[ "$used" -ge 3 ] || {
  cat "$tmp/nginx-signed.log" >&2
  fail "expiring: reads used $used different links, not 3 or more"
}
echo "expiring: $served reads in $secs s, $signed links signed" \
     "($links different), $used used, no 410"

# ----------------------------------------------------------------------
# The front goes down while a link is still good.  In the second before
# the link's end its renewal fails, and the link serves meanwhile; once
# it has expired a read fails, with a message.
: >"$tmp/signer.log"
: >"$tmp/nginx-signed.log"
start_nbdkit down -r "$PLUGIN" "http://127.0.0.1:$signer_port/disk.img" \
             retries=1 retry-delay=0.1
stop_pid "$signer_pid"
expires=$(sed -n 's/.*Expires=\([0-9]*\)&.*/\1/p' "$tmp/signer.log" | head -1)
[ -n "$expires" ] || fail "down: no link was signed"
EXPIRES=$expires FILE=$image nbdsh -u "$uri" -c '
import errno, os, time
data = open(os.environ["FILE"], "rb").read()
expires = int(os.environ["EXPIRES"])
time.sleep(max(0, expires - 0.6 - time.time()))
assert h.pread(4096, 65536) == data[65536:69632], "the read differs"
time.sleep(max(0, expires + 1.2 - time.time()))
try:
    h.pread(4096, 131072)
except nbd.Error as e:
    assert e.errnum == errno.EIO, e.string
else:
    raise SystemExit("a read of an expired link succeeded")
h.shutdown()
' >"$tmp/down.out" 2>&1 || {
  cat "$tmp/down.out" >&2
  fail "down: the good link did not serve, or the expired one did"
}
stop_nbdkit down
# The probe and the read in the link's last second were served by it;
# the expired link was not asked at all, and the read failed on url=.
served=$(count "$tmp/nginx-signed.log" " 206 ")
[ "$served" -eq 2 ] && [ "$(wc -l <"$tmp/nginx-signed.log")" -eq 2 ] || {
  cat "$tmp/nginx-signed.log" >&2
  fail "down: the link served $served reads, not the probe and one read"
}
assert_grep_i "$tmp/down.err" "pread" "Couldn't connect"
echo "down: the link served until its end; then url= was asked"
