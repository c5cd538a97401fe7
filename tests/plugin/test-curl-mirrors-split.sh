#!/usr/bin/env bash
# test-curl-mirrors-split.sh: with mirrors, a large read is asked in
# pieces of several sources at once (split.c).  url= and a mirror are
# nginx servers (HTTPS, HTTP/2) of one image, each 40 ms away behind
# helpers/linkem on a link of 80 Mbit/s (a piece takes longer to send
# than the round trip, so the next is expected first at the other
# source), each with its own access log, and each states the image's
# sha-256 in Repr-Digest (its proof as a mirror).
#  (a) Reads of 2 MiB, one at a time, read-ahead off: each gives the image's bytes, and of two reads at least
#      both servers served pieces of 512 KiB (with each read whole at
#      one source, as before, no read is served by both).
#  (b) Both links stop (SIGSTOP) with such a read in flight, and nbdkit
#      is told to stop: it exits in a few seconds, not after timeout=.
#      The pieces that run in threads of their own learn from the
#      read's thread that nbdkit stops.
#  (c) The mirror's link is killed while reads of 2 MiB run: every
#      read still gives the image's bytes (its pieces are asked of
#      url=).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

rtt=40
mbit=80
piece=$((512 * 1024))
make_cert
size=$((16 * 1024 * 1024))
make_random_file "$tmp/image.src" "$size"
dig="add_header Repr-Digest 'sha-256=:$(openssl dgst -sha256 -binary \
  <"$tmp/image.src" | base64 -w0):' always;"
serve_image "$size" "$dig"
cp -p "$tmp/image.src" "$image"
ca=cainfo=$tmp/cert.pem
start_nginx_named m1 "$dig location / { }"
cp -p "$image" "$tmp/nginx-m1/www/disk.img"

start_linkem "$tlsport" "$rtt" --rate "$mbit"
url_link=$linkem_pid
url=https://127.0.0.1:$linkem_port/disk.img
start_linkem "$m1_tlsport" "$rtt" --rate "$mbit"
m1_link=$linkem_pid
m1_url=https://127.0.0.1:$linkem_port/disk.img

# Reads of 2 MiB in a shuffled order, each compared with the image
# (readahead=false: neither the head start nor a stream serves them).
cat >"$tmp/reads.py" <<'EOF'
import nbd, os, random, sys
data = open(os.environ["FILE"], "rb").read()
step = 2 << 20
offs = list(range(0, len(data), step))
random.Random(7).shuffle(offs)
offs = [o for i, o in enumerate(offs)
        if i == 0 or o != offs[i - 1] + step]
h = nbd.NBD()
h.connect_uri(sys.argv[1])
for off in offs:
    n = min(step, len(data) - off)
    assert h.pread(n, off) == data[off:off + n], "read at %d differs" % off
h.shutdown()
EOF

# blocks LOG: the 2 MiB blocks (the reads) of which a GET in an access
# log asked for one piece: one range of exactly a piece's length.
blocks ()
{
  awk -v p="$piece" '$2 == "GET" && $3 ~ /^bytes=[0-9]+-[0-9]+$/ {
         split (substr ($3, 7), r, "-")
         if (r[2] - r[1] + 1 == p && r[1] % p == 0)
           print int (r[1] / (4 * p))
       }' "$1" | sort -u
}

# (a)
start_nbdkit a -r -v "$PLUGIN" "$url" "mirror=$m1_url" "$ca" timeout=20 readahead=false
wait_log "$tmp/a.err" "mirror $m1_url: the same object"
: >"$tmp/access.log"
: >"$tmp/nginx-m1/access.log"
FILE=$image timeout "$client_timeout" "$PYTHON_NBD" "$tmp/reads.py" "$uri" ||
  { tail -20 "$tmp/a.err" >&2; fail "(a) the reads failed"; }
blocks "$tmp/access.log" >"$tmp/url.blocks"
blocks "$tmp/nginx-m1/access.log" >"$tmp/m1.blocks"
both=$(comm -12 "$tmp/url.blocks" "$tmp/m1.blocks" | wc -l)
echo "(a) reads of 2 MiB with pieces at url=: $(wc -l <"$tmp/url.blocks"), at the mirror: $(wc -l <"$tmp/m1.blocks"), at both: $both"
[ "$both" -ge 2 ] ||
  fail "(a) no read of 2 MiB was asked in pieces of both sources"

# (b) Still on (a)'s nbdkit, which has measured both sources.
cat >"$tmp/one.py" <<'EOF'
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pread(2 << 20, 8 << 20)
EOF
: >"$tmp/access.log"
kill -STOP "$url_link" "$m1_link"
"$PYTHON_NBD" "$tmp/one.py" "$uri" >/dev/null 2>&1 &
reader=$!
sleep 1.5
t0=$EPOCHREALTIME
kill -TERM "$nbdkit_pid"
for ((i = 0; i < 200; i++)); do
  _alive "$nbdkit_pid" || break
  sleep 0.1
done
secs=$(seconds_since "$t0")
kill -CONT "$url_link" "$m1_link"
_alive "$nbdkit_pid" && fail "(b) nbdkit had not exited after $secs s"
wait "$nbdkit_pid" 2>/dev/null && st=0 || st=$?
_forget_pid "$nbdkit_pid"
wait "$reader" 2>/dev/null || :
echo "(b) nbdkit exited in $secs s, status $st"
# Debian's nbdkit 1.32 may abort in its own code when told to stop with
# a request in flight (connections.c: raw_send_socket: Assertion 'sock
# >= 0'); that is not this plugin's.
[ "$st" -eq 0 ] || grep -q "raw_send_socket: Assertion" "$tmp/a.err" ||
  { tail -20 "$tmp/a.err" >&2; fail "(b) nbdkit exited with status $st"; }
awk -v s="$secs" 'BEGIN { exit !(s < 5) }' ||
  fail "(b) nbdkit took $secs s to stop with the pieces of a read stalled"

# (c)
start_nbdkit c -r -v "$PLUGIN" "$url" "mirror=$m1_url" "$ca" timeout=20 readahead=false
wait_log "$tmp/c.err" "mirror $m1_url: the same object"
FILE=$image timeout "$client_timeout" "$PYTHON_NBD" "$tmp/reads.py" "$uri" &
reader=$!
sleep 0.5
kill -KILL "$m1_link"
wait "$reader" ||
  { tail -20 "$tmp/c.err" >&2; fail "(c) the reads failed"; }
stop_nbdkit c
grep -q "source $m1_url: .*: its reads go to the other sources" \
     "$tmp/c.err" || fail "(c) nbdkit did not say the mirror was dropped"
