#!/usr/bin/env bash
# test-curl-mirrors.sh: mirror=URL, more sources of url='s object.  A
# mirror serves reads only once proven the same object (same size and a
# digest both state alike, or checksum='s; a strong ETag only with
# mirror-same-etag=true); reads go to the source expected
# to answer first; one that fails, changes or stalls is dropped and its
# reads asked of the others, none failed.  nginx serves url= and each
# mirror from a server of its own (HTTPS, HTTP/2), each with its own
# access log, and each states the image's sha-256 in Repr-Digest; the
# mirrors' copies keep the image's mtime (nginx's ETag).  The fault
# servers of (j), (m) and (n) serve one file, so the same ETag, with
# mirror-same-etag=true.
#  (a) Two mirrors of one image: nbdcopy copies it byte for byte, and
#      all three servers served reads (within three copies: which one
#      gets a read on loopback follows small differences in speed).
#  (b) A mirror with another version of the same size (its own ETag, no
#      digest), one without validators or digest (no ETag, no
#      Last-Modified), one of another size: each refused with a message
#      saying why, and asked nothing after the probe's one GET; the copy
#      is right.  checksum= does not make the one without validators
#      used (it states no digest).
#  (c) A mirror whose Repr-Digest agrees with url='s (its ETag is its
#      own) is used; one whose Repr-Digest differs is refused.
#  (d) A mirror killed (SIGKILL) in the middle of a copy: the copy
#      completes byte for byte, in far less than timeout=, and nbdkit
#      says the mirror was dropped; so does a reader of one read at a
#      time, whose reads read-ahead serves.
#  (e) A mirror that stops answering (SIGSTOP) in the middle of a copy:
#      its reads are asked of url= (hedged) and the copy completes long
#      before timeout=.
#  (f) A mirror at a quarter of url='s rate serves fewer bytes than
#      url=, and some.
#  (g) Secrets: user=, password= and header= go to url='s server only,
#      not to a mirror at another origin (another port), nor with
#      location-trusted=true to where a mirror redirects.
#  (i) url= dropped (it stopped answering) and then the mirror's object
#      changing: the reads go back to url=, and the copy completes.
#  (j) A mirror that cuts answers longer than 1 MiB off half-way (a
#      fault server): one reader of 1 MiB at a time gets the image's bytes,
#      and read-ahead's GETs cut off go on at url= from mid-range.
#  (k) A mirror that never answers holds up neither another mirror's
#      proof nor nbdkit's exit.
#  (l) url= and the mirror both stop answering at once, url= for 2 s,
#      the mirror for 4.5 s: no read fails (url= alone would wait), and
#      the copy completes.
#  (m) A mirror that answers its probe and then no request (a fault
#      server): the copy's first reads there are asked of url= in far
#      less than timeout=, before any read was measured.
#  (n) A mirror that answers its probe at once and every read at 20
#      KB/s (a fault server): its reads are asked of url= within about
#      a second, for nbdcopy and for a reader of one read at a time.
#  (o) A mirror that stops answering (SIGSTOP) once proven, before the
#      copy: the TLS handshakes of the reads' connections to it never
#      end, and its reads are asked of url= long before timeout=.
#  (h) Bad values: a mirror that is a file: URL or not a URL, mirror=
#      with a file: url=, a writable connection with mirrors, and a
#      plain-http mirror of an https url= (taken with
#      insecure-redirect=true).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy
requires_nbdsh

make_cert
size=$((48 * 1024 * 1024))
# The image made first, so that every server's configuration can state
# its digest (server-wide: a location with an add_header of its own
# states only its own).
make_random_file "$tmp/image.src" "$size"
dig="add_header Repr-Digest 'sha-256=:$(openssl dgst -sha256 -binary \
  <"$tmp/image.src" | base64 -w0):' always;"
serve_image "$size" "$dig
  location /d/ { alias DIR/www/;
  add_header Repr-Digest \$arg_r; }
  location /slow/ { alias DIR/www/; limit_rate 8m; }"
cp -p "$tmp/image.src" "$image"
ca=cainfo=$tmp/cert.pem

# [dig=] mirror NAME [EXTRA]: a named nginx serving a copy of the image
# at ${NAME}_url (https, the same mtime: nginx's ETag is the same), and
# its digest ($dig; with dig= none).
mirror ()
{
  start_nginx_named "$1" "$dig location / { ${2:-} }"
  cp -p "$image" "$tmp/nginx-$1/www/disk.img"
  printf -v "${1}_url" %s "https://127.0.0.1:$(eval echo \$${1}_tlsport)/disk.img"
}

# gets NAME: the GETs of disk.img in NAME's access log.
gets ()
{
  grep -c 'GET .* /disk.img' "$tmp/nginx-$1/access.log" || true
}

# bytes LOG: the body bytes of disk.img's GETs in an access log.
bytes ()
{
  awk '$2 == "GET" && $6 ~ /disk.img/ { n += $5 } END { print n + 0 }' "$1"
}

# copy_ok NAME PARAMS...: nbdkit on the plugin with PARAMS; once it has
# said of each mirror= whether it is used, nbdcopy copies the export,
# which must be the image.  nbdkit's stderr in $tmp/NAME.err.
copy_ok ()
{
  local name=$1 a n=0 i
  shift
  for a in "$@"; do
    case $a in mirror=*) n=$((n + 1)) ;; esac
  done
  : >"$tmp/access.log"
  start_nbdkit "$name" -r -v "$PLUGIN" "$@" "$ca"
  for ((i = 0; i < 100; i++)); do
    [ "$(grep -c 'mirror https.*: \(the same object\|not used\)' \
           "$tmp/$name.err")" -ge "$n" ] && break
    sleep 0.1
  done
  [ "$i" -lt 100 ] || fail "($name) nbdkit did not say whether it uses each mirror"
  timeout "$client_timeout" nbdcopy "$uri" "$tmp/$name.img" ||
    fail "($name) the copy failed"
  stop_nbdkit "$name"
  assert_same_file "$image" "$tmp/$name.img"
  rm -f "$tmp/$name.img"
}

mirror m1
mirror m2

# (a) On loopback the three are about as fast, and which gets a read
# follows small differences in their measured speed: under load one
# copy may leave a server with only the probe's GET.  So up to three
# copies, until each server has served reads.
for try in 1 2 3; do
  copy_ok a "$url" "mirror=$m1_url" "mirror=$m2_url"
  n=$(grep -c 'GET' "$tmp/access.log" || true)
  [ "$(gets m1)" -lt 2 ] || [ "$(gets m2)" -lt 2 ] || [ "$n" -lt 2 ] ||
    break
  echo "(a) copy $try: url= $n GETs, m1 $(gets m1), m2 $(gets m2): again"
done
for m in m1 m2; do
  grep -q "mirror https://127.0.0.1:.*: the same object (the same digest)" \
       "$tmp/a.err" || fail "(a) nbdkit did not say a mirror is the same object"
  n=$(gets $m)
  [ "$n" -ge 2 ] || fail "(a) $m served $n GETs"
done
n=$(grep -c 'GET' "$tmp/access.log" || true)
[ "$n" -ge 2 ] || fail "(a) url='s server served $n GETs"
echo "(a) GETs: url= $n, m1 $(gets m1), m2 $(gets m2)"
grep -q "source https://127.0.0.1:$m1_tlsport/disk.img: [0-9]* requests" \
     "$tmp/a.err" || fail "(a) no count of m1's requests at exit"

# (b) m3: another version, same size, its own mtime (another ETag), no
# digest; m4: no validators (its location's add_header: no digest); m5:
# another size.
dig= mirror m3
mirror m4 'etag off; add_header Last-Modified "";'
dig= mirror m5
make_random_file "$tmp/nginx-m3/www/disk.img" "$size"
make_random_file "$tmp/nginx-m5/www/disk.img" $((size + 512))
copy_ok b "$url" "mirror=$m3_url" "mirror=$m4_url" "mirror=$m5_url"
grep -q "mirror $m3_url: not used: no proof it is the same object: .*not url='s strong ETag" \
     "$tmp/b.err" || fail "(b) m3 not refused for its ETag"
grep -q "mirror $m4_url: not used: no proof it is the same object: .* it has none" \
     "$tmp/b.err" || fail "(b) m4 not refused for its missing ETag"
grep -q "mirror $m5_url: not used: its size is $((size + 512)) bytes" \
     "$tmp/b.err" || fail "(b) m5 not refused for its size"
for m in m3 m4 m5; do
  [ "$(gets $m)" -eq 1 ] || fail "(b) $m served $(gets $m) GETs, not the probe's one"
done
sum=$(sha256sum <"$image" | cut -d' ' -f1)
: >"$tmp/nginx-m4/access.log"
copy_ok b2 "$url" "mirror=$m4_url" "checksum=sha256:$sum"
grep -q "mirror $m4_url: not used: no proof it is the same object: .*checksum= alone" \
     "$tmp/b2.err" || fail "(b) with checksum= m4 was not refused"
[ "$(gets m4)" -eq 1 ] || fail "(b) with checksum= m4 served $(gets m4) GETs"
grep -q "checksum: the sha256 of all $size bytes matches" "$tmp/b2.err" ||
  fail "(b) the checksum was not checked"

# (c) Repr-Digest through /d/ on url='s server and on m6 (whose ETag
# is its own: another mtime).
mirror m6 'add_header Repr-Digest $arg_r;'
touch -d '2001-01-01' "$tmp/nginx-m6/www/disk.img"
b64=$(openssl dgst -sha256 -binary <"$image" | base64 -w0)
bad=$(head -c 32 /dev/zero | base64 -w0)
durl="https://127.0.0.1:$tlsport/d/disk.img?r=sha-256=:$b64:"
copy_ok c "$durl" "mirror=$m6_url?r=sha-256=:$b64:"
grep -q "mirror $m6_url.*: the same object (the same digest)" "$tmp/c.err" ||
  fail "(c) m6 with the same Repr-Digest was not used"
: >"$tmp/nginx-m6/access.log"
copy_ok c2 "$durl" "mirror=$m6_url?r=sha-256=:$bad:"
grep -qi "not used: its repr-digest states another sha256" "$tmp/c2.err" ||
  fail "(c) m6 with another Repr-Digest was not refused"
[ "$(gets m6)" -eq 1 ] || fail "(c) the refused m6 served $(gets m6) GETs"

# (d) and (e): url= and a mirror each at 8 MB/s a connection, over 2
# connections, so that the copy lasts a few seconds; the mirror killed,
# or stopped, 0.7 s in.  The client is nbdcopy, whose reads go out in
# batches, or (qd1) one reader of 1 MiB at a time, whose reads
# read-ahead serves.
slow="https://127.0.0.1:$tlsport/slow/disk.img"
cat >"$tmp/qd1.py" <<'EOF'
import nbd, os, sys
data = open(os.environ["FILE"], "rb").read()
h = nbd.NBD()
h.connect_uri(sys.argv[1])
step = 1 << 20
for off in range(0, len(data), step):
    n = min(step, len(data) - off)
    assert h.pread(n, off) == data[off:off + n], "read at %d differs" % off
h.shutdown()
EOF
middle_of_copy ()
{
  local name=$1 sig=$2 m=$3 client=$4 pid port t0 copier
  eval "pid=\$${m}_pid port=\$${m}_tlsport"
  start_nbdkit "$name" -r -v "$PLUGIN" "$slow" \
    "mirror=https://127.0.0.1:$port/disk.img" "$ca" connections=2 timeout=30
  # Proven before it is killed: on a loaded machine its probe came late.
  wait_log "$tmp/$name.err" "mirror https://127.0.0.1:$port/disk.img: the same object"
  t0=$EPOCHREALTIME
  if [ "$client" = qd1 ]; then
    FILE=$image timeout "$client_timeout" "$PYTHON_NBD" "$tmp/qd1.py" "$uri" &
  else
    timeout "$client_timeout" nbdcopy "$uri" "$tmp/$name.img" &
  fi
  copier=$!
  sleep 0.7
  kill "-$sig" "$pid" $(pgrep -P "$pid") 2>/dev/null || true
  wait "$copier" || { tail -20 "$tmp/$name.err" >&2;
                      fail "($name) the copy failed"; }
  secs=$(seconds_since "$t0")
  stop_nbdkit "$name"
  if [ "$client" != qd1 ]; then
    assert_same_file "$image" "$tmp/$name.img"
    rm -f "$tmp/$name.img"
  fi
  grep -q "source https://127.0.0.1:$port/disk.img: .*: its reads go to the other sources" \
       "$tmp/$name.err" || fail "($name) nbdkit did not say the mirror was dropped"
  awk -v s="$secs" 'BEGIN { exit !(s < 15) }' ||
    fail "($name) the copy took $secs s"
  echo "($name) copy in $secs s; the mirror served $(gets $m) GETs"
}
mirror m7 'limit_rate 8m;'
middle_of_copy d KILL m7 nbdcopy
mirror m7b 'limit_rate 8m;'
middle_of_copy d2 KILL m7b qd1
mirror m8 'limit_rate 8m;'
middle_of_copy e STOP m8 nbdcopy
grep -q "source https://127.0.0.1:[0-9]*/disk.img: too slow" "$tmp/e.err" ||
  fail "(e) the stopped mirror's reads were not hedged"
kill -CONT "$m8_pid" $(pgrep -P "$m8_pid") 2>/dev/null || true

# (f) url= at 8 MB/s a connection, m9 at 2 MB/s, 2 connections each:
# m9 gets some of the bytes, and fewer than url=.
mirror m9 'limit_rate 2m;'
copy_ok f "$slow" "mirror=$m9_url" connections=2
from_url=$(bytes "$tmp/access.log")
from_m9=$(bytes "$tmp/nginx-m9/access.log")
echo "(f) bytes from url=: $from_url, from the slow mirror: $from_m9"
[ "$from_m9" -gt 1 ] && [ "$from_m9" -lt "$from_url" ] ||
  fail "(f) the slow mirror served $from_m9 bytes, url= $from_url"

# (g) url= at m1's server (it has the secrets); m2 is another origin.
# served_without_secrets WHO LOG: WHO served reads (its nginx LOG),
# none of them with the credentials.
served_without_secrets ()
{
  [ "$(grep -c 'GET /disk.img' "$2")" -ge 2 ] || fail "(g) $1 was not used"
  ! grep -v 'auth="-" token="-"' "$2" | grep -q GET ||
    fail "(g) $1 got the credentials"
}

: >"$tmp/nginx-m1.log"
: >"$tmp/nginx-m2.log"
copy_ok g "$m1_url" "mirror=$m2_url" user=alice password=s3cret \
        'header=X-Token: t0ken'
grep -q 'auth="Basic [^"]' "$tmp/nginx-m1.log" &&
  grep -q 'token="t0ken"' "$tmp/nginx-m1.log" ||
  fail "(g) url='s server did not get the credentials"
served_without_secrets "the mirror at another origin" "$tmp/nginx-m2.log"

# location-trusted=true lets url='s redirects take the secrets anywhere,
# not a mirror's: m10 redirects to itself, and must not get them.
start_nginx_named m10 "$dig location = /r/disk.img { return 302 /disk.img; }"
cp -p "$image" "$tmp/nginx-m10/www/disk.img"
copy_ok g2 "$m1_url" "mirror=https://127.0.0.1:$m10_tlsport/r/disk.img" \
        user=alice password=s3cret 'header=X-Token: t0ken' location-trusted=true
served_without_secrets "the redirecting mirror (location-trusted=true)" \
  "$tmp/nginx-m10.log"

# (i) url= stops answering (SIGSTOP) and is dropped; then the mirror's
# object changes (412 to its pin): the mirror's reads go back to the
# dropped url=, which answers once they have, and the copy completes.
# Both at 2 MB/s a connection over 2 connections: about 6 s for the
# copy.
# slow_pair CASE U M: named nginx U serving the image as url= and M as
# its mirror, each at 2 MB/s a connection; nbdkit CASE on both with 2
# connections each, once it uses M.
slow_pair ()
{
  local m_url
  start_nginx_named "$2" "$dig location / { limit_rate 2m; }"
  cp -p "$image" "$tmp/nginx-$2/www/disk.img"
  mirror "$3" 'limit_rate 2m;'
  m_url=$(eval echo "\$${3}_url")
  start_nbdkit "$1" -r -v "$PLUGIN" \
    "https://127.0.0.1:$(eval echo "\$${2}_tlsport")/disk.img" \
    "mirror=$m_url" "$ca" connections=2
  wait_log "$tmp/$1.err" "mirror $m_url: the same object"
}

slow_pair i u m11
timeout "$client_timeout" nbdcopy "$uri" "$tmp/i.img" &
copier=$!
sleep 1
kill -STOP "$u_pid" $(pgrep -P "$u_pid")
wait_log "$tmp/i.err" "source https://127.0.0.1:$u_tlsport/disk.img: too slow"
touch "$tmp/nginx-m11/www/disk.img"
# url= answers again only once the mirror's reads have gone to it.
wait_log "$tmp/i.err" "source $m11_url: .*changed.*: its reads go to the other sources"
kill -CONT "$u_pid" $(pgrep -P "$u_pid")
wait "$copier" || { tail -20 "$tmp/i.err" >&2; fail "(i) the copy failed"; }
stop_nbdkit i
assert_same_file "$image" "$tmp/i.img"
rm -f "$tmp/i.img"

# (j) Two fault servers of the same file (so the same ETag): url=
# answers well, the mirror cuts every GET longer than 1 MiB off half-way.
# One reader of 1 MiB at a time: read-ahead's GETs cut off at the mirror
# go on from the byte where they stopped, and every read gives the
# image's bytes.  url= is 30 ms away behind linkem at 1 Tbit/s, so that
# read-ahead's GETs go to the mirror on loopback, which answers first:
# with both on loopback some runs gave it none.
fault_source ()
{
  local name=$1 mode=$2
  "$PYTHON" "$helpers_srcdir/fault-server.py" --mode "$mode" \
    --file "$image" --log "$tmp/$name.log" --port-file "$tmp/$name.port" \
    </dev/null >"$tmp/$name.out" 2>&1 &
  await_port_file $! "$tmp/$name.port" "$tmp/$name.out" "$name"
}
fault_source fu normal
fault_source fm truncate-long
start_linkem "$(cat "$tmp/fu.port")" 30 --rate 1000000
fu_far=http://127.0.0.1:$linkem_port/disk.img
start_nbdkit j -r -v "$PLUGIN" "$fu_far" mirror-same-etag=true \
  "mirror=http://127.0.0.1:$(cat "$tmp/fm.port")/disk.img"
wait_log "$tmp/j.err" "mirror http://127.0.0.1:.*: the same object"
FILE=$image timeout "$client_timeout" "$PYTHON_NBD" "$tmp/qd1.py" "$uri" ||
  fail "(j) the reads failed"
stop_nbdkit j
grep -q "status=206 sent=" "$tmp/fm.log" || fail "(j) the mirror served nothing"
awk '/going on from byte/ {
       split ($0, a, "bytes "); split (a[2], r, "-"); first = r[1] + 0
       n = split ($0, w, " "); for (i = 1; i <= n; i++)
         if (w[i] == "byte") at = w[i + 1] + 0
       if (at > first) found = 1
     }
     END { exit !found }' "$tmp/j.err" ||
  fail "(j) no read-ahead GET went on from the middle of its range"

# (k) A mirror that never answers (stopped before nbdkit starts) holds
# up neither the other mirror's proof nor nbdkit's exit.
mirror m12
kill -STOP "$m12_pid" $(pgrep -P "$m12_pid")
start_nbdkit k -r -v "$PLUGIN" "$url" "mirror=$m12_url" "mirror=$m1_url" "$ca"
wait_log "$tmp/k.err" "mirror $m1_url: the same object"
t0=$EPOCHREALTIME
stop_nbdkit k
secs=$(seconds_since "$t0")
awk -v s="$secs" 'BEGIN { exit !(s < 5) }' ||
  fail "(k) nbdkit took $secs s to stop with a mirror's probe hanging"
kill -CONT "$m12_pid" $(pgrep -P "$m12_pid")

# (l) url= and a mirror, each at 2 MB/s a connection over 2
# connections, both stop answering (SIGSTOP) in the middle of a copy,
# url= for 2 s and the mirror for 4.5 s: reads hedged at one go to the
# other, which is stalled too, and are hedged again once url= answers
# its probe; none may fail for that, as none would with url= alone.
slow_pair l u2 m13
timeout "$client_timeout" nbdcopy --requests=4 "$uri" "$tmp/l.img" &
copier=$!
sleep 1
u2_all="$u2_pid $(pgrep -P "$u2_pid" | tr '\n' ' ')"
m13_all="$m13_pid $(pgrep -P "$m13_pid" | tr '\n' ' ')"
kill -STOP $u2_all $m13_all
sleep 2
kill -CONT $u2_all
sleep 2.5
kill -CONT $m13_all
wait "$copier" || { tail -20 "$tmp/l.err" >&2; fail "(l) the copy failed"; }
stop_nbdkit l
grep -q "too slow" "$tmp/l.err" || fail "(l) no read was hedged"
assert_same_file "$image" "$tmp/l.img"
rm -f "$tmp/l.img"

# (m) Beside (j)'s url= (a fault server 30 ms away: the mirror on
# loopback, whose wait for a first byte is shorter, is given the first
# reads), one of the same file (so the same ETag) that answers the
# probe's GET and stalls every request after it, as mirror: the reads it
# is given first, before any read was measured, are asked of url= once
# they stall, not after timeout=.
fault_source fs stall-after-probe
start_nbdkit m -r -v "$PLUGIN" "$fu_far" mirror-same-etag=true \
  "mirror=http://127.0.0.1:$(cat "$tmp/fs.port")/disk.img" timeout=30
wait_log "$tmp/m.err" "mirror http://127.0.0.1:.*: the same object"
t0=$EPOCHREALTIME
timeout "$client_timeout" nbdcopy "$uri" "$tmp/m.img" ||
  fail "(m) the copy failed"
secs=$(seconds_since "$t0")
stop_nbdkit m
grep -q "stalled: GET" "$tmp/fs.log" || fail "(m) the mirror was given no read"
awk -v s="$secs" 'BEGIN { exit !(s < 10) }' ||
  fail "(m) the copy took $secs s with a mirror that stalls (timeout=30)"
assert_same_file "$image" "$tmp/m.img"
rm -f "$tmp/m.img"

# (n) Beside (m)'s url=, a fault server of the same file that answers
# the probe at once and every read at about 20 KB/s, as mirror: its
# reads, given to it before any read was measured, are asked of url=
# within about a second each, not left to drip (a 1 MiB read would take
# 50 s there), for nbdcopy and for qd1.py.
fault_source fd drip-after-probe
for client in nbdcopy qd1; do
  start_nbdkit "n_$client" -r -v "$PLUGIN" "$fu_far" mirror-same-etag=true \
    "mirror=http://127.0.0.1:$(cat "$tmp/fd.port")/disk.img"
  wait_log "$tmp/n_$client.err" "mirror http://127.0.0.1:.*: the same object"
  t0=$EPOCHREALTIME
  case $client in
    nbdcopy) timeout "$client_timeout" nbdcopy "$uri" "$tmp/n.img" ;;
    qd1) FILE=$image timeout "$client_timeout" "$PYTHON_NBD" "$tmp/qd1.py" "$uri" ;;
  esac || fail "(n) $client: the copy failed"
  secs=$(seconds_since "$t0")
  stop_nbdkit "n_$client"
  grep -q "drip-after-probe: /disk.img" "$tmp/fd.log" ||
    fail "(n) $client: the mirror was given no read"
  awk -v s="$secs" 'BEGIN { exit !(s < 15) }' ||
    fail "(n) $client: the copy took $secs s with a mirror at 20 KB/s"
  grep -q "too slow" "$tmp/n_$client.err" ||
    fail "(n) $client: no read at the mirror was found too slow"
done
assert_same_file "$image" "$tmp/n.img"
rm -f "$tmp/n.img"

# (o) The mirror is stopped once nbdkit has proven it, on the probe's
# connection of its own: the reads' connections to it are new, and
# their TLS handshakes never end (the kernel accepts them).  The reads
# given to it are asked of url= once their connection is late, not
# after timeout=.  url= is 30 ms away, as in (j), so that the mirror is
# given reads: with both on loopback some runs gave it none.  At
# 200 Mbit/s, the copy lasts longer than a read takes to be found late.
# HTTP/1.1, as on loopback: over HTTP/2 the reads would share the
# probe's connection, already set up.
mirror m14
start_linkem "$tlsport" 30 --rate 200
start_nbdkit o -r -v "$PLUGIN" "https://127.0.0.1:$linkem_port/disk.img" \
  "mirror=$m14_url" "$ca" timeout=30 http-version=1.1
wait_log "$tmp/o.err" "mirror $m14_url: the same object"
kill -STOP "$m14_pid" $(pgrep -P "$m14_pid")
t0=$EPOCHREALTIME
timeout "$client_timeout" nbdcopy "$uri" "$tmp/o.img" ||
  fail "(o) the copy failed"
secs=$(seconds_since "$t0")
stop_nbdkit o
kill -CONT "$m14_pid" $(pgrep -P "$m14_pid")
# The mirror was given work: a read found late (usually for want of a
# connection; one CI run found them late on connections it had), or a
# read-ahead GET whose bytes the reads took elsewhere first.
grep -q "source $m14_url: [1-9][0-9]* requests" "$tmp/o.err" ||
  fail "(o) the stopped mirror was given no request"
grep -q "source $m14_url: too slow: \|read-ahead: $m14_url: .*no longer wanted" \
     "$tmp/o.err" ||
  fail "(o) no request at the stopped mirror was found late or given up"
awk -v s="$secs" 'BEGIN { exit !(s < 10) }' ||
  fail "(o) the copy took $secs s with a mirror stopped (timeout=30)"
assert_same_file "$image" "$tmp/o.img"
rm -f "$tmp/o.img"

# (h)
expect_nbdkit_fails h1 -r "$PLUGIN" "$url" mirror=file:///etc/hostname
grep -q "mirror: file:///etc/hostname: the scheme 'file' is not http or https" \
     "$tmp/h1.err" || fail "(h) a file: mirror was not refused"
expect_nbdkit_fails h2 -r "$PLUGIN" "$url" 'mirror=://nope'
grep -q "mirror: not a valid URL" "$tmp/h2.err" ||
  fail "(h) a mirror that is no URL was not refused"
expect_nbdkit_fails h3 -r "$PLUGIN" "file://$image" "mirror=$m1_url"
grep -q "mirror: url= is a file: URL" "$tmp/h3.err" ||
  fail "(h) mirror= with a file: url= was not refused"
start_nbdkit h4 "$PLUGIN" "$url" "mirror=$m1_url" "$ca"
! nbdsh -u "$uri" -c 'h.pread(1, 0)' 2>"$tmp/h4.out" ||
  fail "(h) a writable connection with mirrors was served"
stop_nbdkit h4
grep -q "mirror= needs a read-only export" "$tmp/h4.err" ||
  fail "(h) no message for the writable connection"
plain=http://127.0.0.1:$(free_port)/disk.img
expect_nbdkit_fails h5 -r "$PLUGIN" "$url" "mirror=$plain" "$ca"
grep -q "mirror: $plain: url= is https, this mirror is not" "$tmp/h5.err" ||
  fail "(h) a plain-http mirror of an https url= was not refused"
start_nbdkit h6 -r "$PLUGIN" "$url" "mirror=$plain" "$ca" \
             insecure-redirect=true
nbdsh -u "$uri" -c 'h.pread(1, 0)' ||
  fail "(h) insecure-redirect=true: a plain-http mirror was refused"
stop_nbdkit h6
