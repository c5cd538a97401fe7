#!/usr/bin/env bash
# test-curl-far.sh: a server 30 ms away (helpers/linkem between the plugin
# and nginx) gets the pool's other connections opened while the start-up
# probe waits for its answer, by TCP alone (no request), and never more
# than connections= of them; a server on loopback gets none kept.  nginx
# logs $connection, the serial number of the TCP connection, with every
# request; linkem -v logs every TCP connection it carried when it ends.
#  (a) HTTP, default settings: nbdkit says 15 spare connections opened
#      beside the probe's and are open; nginx then sees requests on the
#      probe's connection only.  After a copy (byte-exact) and random
#      reads (64 in flight, checked), requests on at most 16 connections,
#      and linkem carried exactly 16 in all (the copy opened none of its
#      own).  A copy that starts as soon as nbdkit listens is byte-exact
#      and makes 16 connections too.
#  (b) connections=3: 2 spares, exactly 3 connections in all, also after
#      random reads.
#  (c) HTTPS (cainfo=) with http-version=1.1: byte-exact copy, 16
#      connections in all; by default, nginx offering HTTP/2: no spare
#      opened, a byte-exact copy, and one TCP connection in all.
#  (d) nginx on loopback, no link: the spares are closed once the probe
#      has answered; only the probe's connection and its one request.
#  (e) a server that closes connections that send no request within half
#      a second: a copy that starts a second later does not use the
#      closed spares (no request fails, none is retried) and is
#      byte-exact.
#  (g) url= answers 302 to the image on another origin (each behind its
#      own link): the spares follow the probe there.  Once nbdkit runs,
#      it holds 16 TCP connections to the image's link and at most one
#      to the front's; a copy is byte-exact, the front answers one
#      request and the image's origin sees 16 connections.
#  (h) 6 s after start-up, with no client yet, the spares are older than
#      5 s and closed (only the probe's connection is open); a copy then
#      opens new ones, at most 15 (linkem carries the 15 closed spares,
#      and every other connection it carried sent nginx a request).
#  (i) a redirect loop between two links to one nginx (each answer a
#      302 to the other): start-up fails, and the spares moved at most
#      three times, not at each of the 20 hops: linkem carries at most
#      3 x 16 + 4 connections.
#  (f) connections=4, random reads with 64 in flight: every read's bytes
#      checked, every request's ranges exact and inside the object, some
#      multi-range; then a read alone right after a burst, which waits
#      for company, is answered within a second.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy
requires nbdinfo
requires_nbdsh

rtt=30
size=$((32 * 1024 * 1024 + 321))
make_cert
serve_image "$size"
start_linkem "$port" "$rtt"
http_far=http://127.0.0.1:$linkem_port/disk.img
start_linkem "$tlsport" "$rtt"
https_far=https://127.0.0.1:$linkem_port/disk.img

# mark: from here on, conns and carried count.  conns: the distinct TCP
# connections nginx logged a request on since the mark.  linkem logs a
# connection when its end has crossed the link, half a round trip after
# the nbdkit before has exited: the mark waits until its log has been
# still for 0.3 s (at most 3 s), or the last part's connections would
# count in this one's.
mark ()
{
  local n m k
  first=$(($(wc -l <"$tmp/access.log") + 1))
  touch "$tmp/linkem.log"
  n=$(wc -l <"$tmp/linkem.log")
  for ((k = 0; k < 10; k++)); do
    sleep 0.3
    m=$(wc -l <"$tmp/linkem.log")
    [ "$m" -ne "$n" ] || break
    n=$m
  done
  lk_first=$((n + 1))
}

conns ()
{
  tail -n +"$first" "$tmp/access.log" | cut -d' ' -f1 | sort -u | wc -l
}

# used_conns N WHAT: requests on 2 to N connections since the mark.  A
# copy takes as many of the spares as its reads happen to need at once
# (all 16 usually, fewer on a slow build such as ThreadSanitizer's);
# that it opened none of its own is carried's exact count.
used_conns ()
{
  local got
  got=$(conns)
  echo "$2: $got connections"
  [ "$got" -ge 2 ] && [ "$got" -le "$1" ] ||
    problem "$2: $got connections, expected 2 to $1"
}

# expect_conns N WHAT: exactly N connections since the mark.
expect_conns ()
{
  local got
  got=$(conns)
  echo "$2: $got connections"
  [ "$got" -eq "$1" ] || problem "$2: $got connections, expected $1"
}

# carried N WHAT: once nbdkit has exited, linkem ended exactly N TCP
# connections since the mark (each one line; they end a one-way delay
# after nbdkit closed them).
carried ()
{
  local got n
  for ((n = 0; n < 30; n++)); do
    got=$(tail -n +"$lk_first" "$tmp/linkem.log" |
            grep -c '^linkem: connection [0-9]* ' || :)
    [ "$got" -lt "$1" ] || break
    sleep 0.1
  done
  sleep 0.2
  got=$(tail -n +"$lk_first" "$tmp/linkem.log" |
          grep -c '^linkem: connection [0-9]* ' || :)
  echo "$2: linkem carried $got TCP connections"
  [ "$got" -eq "$1" ] || problem "$2: $got TCP connections, expected $1"
}

# (a)
mark
# No head start: its GETs would go out on the spares (see (j)).
start_nbdkit far -r -v -D curl.headstart=0 "$PLUGIN" "$http_far"
wait_log "$tmp/far.err" ': answers take [0-9]* ms: 15 spare connections open'
grep -q ': 15 spare connections opening beside the probe' "$tmp/far.err" ||
  problem "(a) no spares opened during the probe"
sleep 0.3
expect_conns 1 "(a) http, after start-up: the spares sent nothing"
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
assert_same_file "$image" "$tmp/out.img"
rm -f "$tmp/out.img"
used_conns 16 "(a) http, after a copy"
random_reads "$uri" "$image" 2000
used_conns 16 "(a) http, after random reads"
stop_nbdkit far
carried 16 "(a) http"

# (a) The copy starts as soon as nbdkit listens.
# (start_nbdkit looks every 0.1 s.)
mark
sock=$tmp/early.sock
( exec "${NBDKIT[@]}" -f --exit-with-parent -r -v -U "$sock" "$PLUGIN" \
       "$http_far" ) 2>"$tmp/early.err" &
early_pid=$!
_pids+=("$early_pid")
for ((n = 0; n < 2000; n++)); do
  [ ! -S "$sock" ] || break
  _alive "$early_pid" || fail "(a) nbdkit exited at start-up"
  sleep 0.005
done
timeout "$client_timeout" nbdcopy "nbd+unix:///?socket=$sock" "$tmp/out.img" ||
  fail "(a) a copy at once failed or hung (status $?)"
stop_pid "$early_pid"
[ "$_status" -eq 0 ] || problem "(a) nbdkit exited with status $_status"
grep -q ': 15 spare connections open$' "$tmp/early.err" ||
  problem "(a) a copy at once: no spares"
assert_same_file "$image" "$tmp/out.img"
rm -f "$tmp/out.img"
used_conns 16 "(a) http, a copy at once"
carried 16 "(a) http, a copy at once"

# (b)
mark
start_nbdkit c3 -r -v "$PLUGIN" "$http_far" connections=3
wait_log "$tmp/c3.err" ': answers take [0-9]* ms: 2 spare connections open'
random_reads "$uri" "$image" 500
expect_conns 3 "(b) connections=3, after random reads"
stop_nbdkit c3
carried 3 "(b) connections=3"

# (c)
mark
start_nbdkit tls -r -v "$PLUGIN" "$https_far" cainfo="$tmp/cert.pem" \
  http-version=1.1
wait_log "$tmp/tls.err" ': answers take [0-9]* ms: 15 spare connections open'
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
assert_same_file "$image" "$tmp/out.img"
rm -f "$tmp/out.img"
used_conns 16 "(c) https, HTTP/1.1, after a copy"
stop_nbdkit tls
carried 16 "(c) https, HTTP/1.1"

# (c) By default nginx's HTTP/2 is taken: no spare, one connection.
mark
start_nbdkit tls2 -r -v "$PLUGIN" "$https_far" cainfo="$tmp/cert.pem"
wait_log "$tmp/tls2.err" 'HTTP/2: requests as streams on one connection'
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
assert_same_file "$image" "$tmp/out.img"
rm -f "$tmp/out.img"
! grep -q 'spare connections' "$tmp/tls2.err" ||
  problem "(c) https, HTTP/2: $(grep 'spare connections' "$tmp/tls2.err")"
expect_conns 1 "(c) https, HTTP/2, after a copy"
stop_nbdkit tls2
carried 1 "(c) https, HTTP/2"

# (d)
mark
start_nbdkit near -r -v "$PLUGIN" "$http_url"
got=$(timeout "$client_timeout" nbdinfo --size "$uri")
[ "$got" -eq "$size" ] || fail "(d) nbdinfo --size: $got, expected $size"
sleep 0.5
! grep -q 'spare connections open$' "$tmp/near.err" ||
  problem "(d) loopback: $(grep 'spare connections open$' "$tmp/near.err")"
expect_conns 1 "(d) loopback, probe only"
reqs=$(tail -n +"$first" "$tmp/access.log" | wc -l)
[ "$reqs" -eq 1 ] ||
  problem "(d) loopback: $reqs requests, expected the probe's one GET"
stop_nbdkit near

# (e)
start_fault_server close-idle "$image"
start_linkem "$fault_port" "$rtt"
start_nbdkit idle -r -v "$PLUGIN" "http://127.0.0.1:$linkem_port/disk.img"
wait_log "$tmp/idle.err" ': answers take [0-9]* ms: 15 spare connections open'
for ((n = 0; n < 50; n++)); do
  [ "$(grep -c '^close-idle: closed' "$tmp/fault.log")" -lt 16 ] || break
  sleep 0.1
done
closed=$(grep -c '^close-idle: closed' "$tmp/fault.log" || :)
[ "$closed" -ge 15 ] ||
  problem "(e) the server closed $closed idle connections, not 15 or more"
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img" ||
  fail "(e) a copy after the spares were closed failed (status $?)"
assert_same_file "$image" "$tmp/out.img"
rm -f "$tmp/out.img"
if grep -E 'retry [0-9]+ of|asking again|(^|: )error: ' "$tmp/idle.err"; then
  problem "(e) a closed spare was used: a request failed"
fi
stop_nbdkit idle

# (g)
start_nginx_named front "location = /disk.img {
      return 302 $http_far;
    }"
start_linkem "$front_port" "$rtt"
front_far=http://127.0.0.1:$linkem_port/disk.img
image_link=${http_far#http://127.0.0.1:}
image_link=${image_link%%/*}
# established PORT: this machine's TCP connections to PORT (only nbdkit
# connects to a link's port).
established ()
{
  ss -Htn state established "( dport = :$1 )" | wc -l
}
mark
: >"$tmp/nginx-front.log"
start_nbdkit redir -r -v "$PLUGIN" "$front_far"
wait_log "$tmp/redir.err" ': 15 spare connections open$'
to_image=$(established "$image_link")
to_front=$(established "$linkem_port")
echo "(g) after start-up: $to_image connections to the image's link," \
     "$to_front to the front's"
[ "$to_image" -eq 16 ] ||
  problem "(g) $to_image connections to the image's origin, expected 16"
[ "$to_front" -le 1 ] ||
  problem "(g) $to_front connections to the front, expected at most 1"
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
assert_same_file "$image" "$tmp/out.img"
rm -f "$tmp/out.img"
stop_nbdkit redir
used_conns 16 "(g) the image's origin, after a copy through the 302"
front_reqs=$(wc -l <"$tmp/nginx-front.log")
[ "$front_reqs" -eq 1 ] ||
  problem "(g) the front answered $front_reqs requests, expected 1"

# (h)
mark
start_nbdkit old -r -v -D curl.headstart=0 "$PLUGIN" "$http_far"
wait_log "$tmp/old.err" ': 15 spare connections open$'
sleep 6
# Closed by then with no client to need them: only the probe's is open.
idle=$(established "$image_link")
echo "(h) 6 s after start-up, no client yet: $idle connections open"
[ "$idle" -eq 1 ] ||
  problem "(h) $idle connections open 6 s after start-up, expected 1"
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
assert_same_file "$image" "$tmp/out.img"
rm -f "$tmp/out.img"
grep -q ': 15 spare connections unused for 5 s: closed' "$tmp/old.err" ||
  problem "(h) spares 6 s old were not closed"
stop_nbdkit old
# Every connection but the 15 closed spares sent nginx a request: the
# probe's and those the copy opened (as many as its reads needed at
# once: 15 usually, fewer under ThreadSanitizer).
used_conns 16 "(h) the probe's and the copy's"
carried $((15 + $(conns))) "(h) the probe's, 15 spares unused, the copy's"

# (i) The ports ride in the query: L1/a?p=L2&q=L1 -> L2/a?p=L1&q=L2 -> ...
start_nginx_named loop 'location = /a {
      return 302 http://127.0.0.1:$arg_p/a?p=$arg_q&q=$arg_p;
    }'
start_linkem "$loop_port" "$rtt"
l1=$linkem_port
start_linkem "$loop_port" "$rtt"
l2=$linkem_port
mark
st=0
timeout 60 "${NBDKIT[@]}" -r -U - -v "$PLUGIN" \
  "http://127.0.0.1:$l1/a?p=$l2&q=$l1" --run true \
  </dev/null >"$tmp/loop.out" 2>"$tmp/loop.err" || st=$?
[ "$st" -ne 0 ] || problem "(i) a redirect loop: nbdkit exited 0"
grep -qi 'redirect' "$tmp/loop.err" ||
  problem "(i) no redirect in the error: $(grep error "$tmp/loop.err")"
n=$(tail -n +"$lk_first" "$tmp/linkem.log" 2>/dev/null | wc -l)
for ((k = 0; k < 20; k++)); do
  sleep 0.1
  m=$(tail -n +"$lk_first" "$tmp/linkem.log" | wc -l)
  [ "$m" -ne "$n" ] || break
  n=$m
done
carried_n=$(tail -n +"$lk_first" "$tmp/linkem.log" |
              grep -c '^linkem: connection [0-9]* ' || :)
echo "(i) a redirect loop: linkem carried $carried_n TCP connections"
[ "$carried_n" -le 52 ] ||
  problem "(i) a redirect loop made $carried_n TCP connections, expected at most 52"

# (f) Then 64 reads at once and, as soon as they are answered, one read
# alone: it finds every handle free but the reads in flight lately more
# than a handle's share, so it waits for company, and must stop waiting
# (1/32 of a round trip at most).
: >"$tmp/access.log"
mark
start_nbdkit g4 -r "$PLUGIN" "$http_far" connections=4
random_reads "$uri" "$image" 3000
FILE=$image nbdsh -u "$uri" -c '
import os, time
data = open(os.environ["FILE"], "rb").read()
inflight = {}
for i in range(64):
    off = i * 131071 % (len(data) - 4096)
    buf = nbd.Buffer(4096)
    inflight[h.aio_pread(buf, off)] = (buf, off)
while inflight:
    h.poll(-1)
    for c in [c for c in inflight if h.aio_command_completed(c)]:
        buf, off = inflight.pop(c)
        assert buf.to_bytearray() == data[off:off + 4096], "burst: wrong data"
t = time.monotonic()
got = h.pread(4096, 12345)
t = time.monotonic() - t
assert got == data[12345:12345 + 4096], "lone read: wrong data"
print("a lone read after a burst took %.3f s" % t)
assert t < 1, "a lone read after a burst took %.3f s" % t
h.shutdown()
' >"$tmp/lone.out" 2>&1 ||
  problem "(f) a burst, then a lone read: failed or hung:" \
          "$(cat "$tmp/lone.out")"
cat "$tmp/lone.out"
stop_nbdkit g4
expect_conns 4 "(f) connections=4"
assert_nginx_ranges "$size" 1

check_problems
