#!/usr/bin/env bash
# test-curl-far.sh: a server 30 ms away (bench/linkem between the plugin
# and nginx) gets its connections opened at start-up, and never more
# than connections= of them; a server on loopback does not.  nginx logs
# $connection, the serial number of the TCP connection, with every
# request.
#  (a) HTTP, default settings: nbdkit says it opens 15 more connections,
#      nginx then sees exactly 16, each new one with a one-byte GET of
#      byte 0; after a copy (byte-exact) and random reads (64 in flight,
#      checked) still exactly 16.  A copy that starts as soon as nbdkit
#      listens, while the connections are still opening, is byte-exact
#      and makes 16 connections too.
#  (b) connections=3: "opening 2 more", exactly 3 connections, also
#      after random reads.
#  (c) HTTPS (cainfo=): 16 connections warmed, byte-exact copy, still 16.
#  (d) nginx on loopback, no link: after start-up and half a second,
#      only the probe's connection and its two requests, no warm-up.
#  (e) a server that answers the probe and then nothing: SIGTERM while
#      every warm-up request waits (timeout=60) ends nbdkit within 3 s,
#      with status 0.
#  (f) connections=4, random reads with 64 in flight: every read's bytes
#      checked, every request's ranges exact and inside the object, some
#      multi-range; then a read alone right after a burst, which waits
#      for company, is answered within a second.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")}/functions.sh"
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

# mark: from here on, conns counts.  conns: the distinct TCP connections
# nginx logged a request on since the mark.
mark ()
{
  first=$(($(wc -l <"$tmp/access.log") + 1))
}

conns ()
{
  tail -n +"$first" "$tmp/access.log" | cut -d' ' -f1 | sort -u | wc -l
}

# expect_conns N WHAT: exactly N connections since the mark.
expect_conns ()
{
  local got
  got=$(conns)
  echo "$2: $got connections"
  [ "$got" -eq "$1" ] || problem "$2: $got connections, expected $1"
}

# warmed N WHAT: once nbdkit said it opens N-1 more, nginx sees N
# connections within 5 s, and no more half a second later; N-1 one-byte
# GETs of byte 0 opened them (the probe asks for the last byte).
warmed ()
{
  local want=$1 what=$2 n warm
  for ((n = 0; n < 50; n++)); do
    [ "$(conns)" -lt "$want" ] || break
    sleep 0.1
  done
  sleep 0.5
  expect_conns "$want" "$what, warmed up"
  warm=$(tail -n +"$first" "$tmp/access.log" |
           grep -c ' GET bytes=0-0 206 1 ' || :)
  [ "$warm" -eq $((want - 1)) ] ||
    problem "$what: $warm one-byte GETs of byte 0, expected $((want - 1))"
}

# (a)
mark
start_nbdkit far -r -v "$PLUGIN" "$http_far"
wait_log "$tmp/far.err" ': answers take [0-9]* ms: opening 15 more connections'
warmed 16 "(a) http"
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
assert_same_file "$image" "$tmp/out.img"
rm -f "$tmp/out.img"
expect_conns 16 "(a) http, after a copy"
random_reads "$uri" "$image" 2000
expect_conns 16 "(a) http, after random reads"
stop_nbdkit far

# (a) The copy starts as soon as nbdkit listens, while the connections
# are still opening: its reads wait for them rather than open their own.
# (start_nbdkit looks every 0.1 s, which can be after the warm-up.)
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
  fail "(a) a copy during the warm-up failed or hung (status $?)"
stop_pid "$early_pid"
[ "$_status" -eq 0 ] || problem "(a) nbdkit exited with status $_status"
grep -q ': opening 15 more connections' "$tmp/early.err" ||
  problem "(a) a copy at once: no warm-up"
assert_same_file "$image" "$tmp/out.img"
rm -f "$tmp/out.img"
expect_conns 16 "(a) http, a copy during the warm-up"

# (b)
mark
start_nbdkit c3 -r -v "$PLUGIN" "$http_far" connections=3
wait_log "$tmp/c3.err" ': answers take [0-9]* ms: opening 2 more connections'
warmed 3 "(b) connections=3"
random_reads "$uri" "$image" 500
expect_conns 3 "(b) connections=3, after random reads"
stop_nbdkit c3

# (c)
mark
start_nbdkit tls -r -v "$PLUGIN" "$https_far" cainfo="$tmp/cert.pem"
wait_log "$tmp/tls.err" ': answers take [0-9]* ms: opening 15 more connections'
warmed 16 "(c) https"
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
assert_same_file "$image" "$tmp/out.img"
rm -f "$tmp/out.img"
expect_conns 16 "(c) https, after a copy"
stop_nbdkit tls

# (d)
mark
start_nbdkit near -r -v "$PLUGIN" "$http_url"
got=$(timeout "$client_timeout" nbdinfo --size "$uri")
[ "$got" -eq "$size" ] || fail "(d) nbdinfo --size: $got, expected $size"
sleep 0.5
! grep -q 'more connections' "$tmp/near.err" ||
  problem "(d) loopback: $(grep 'more connections' "$tmp/near.err")"
expect_conns 1 "(d) loopback, probe only"
reqs=$(tail -n +"$first" "$tmp/access.log" | wc -l)
[ "$reqs" -eq 1 ] ||
  problem "(d) loopback: $reqs requests, expected the probe's one GET"
stop_nbdkit near

# (e)
make_random_file "$tmp/small.img" $((1024 * 1024))
start_fault_server stall-after-probe "$tmp/small.img"
start_linkem "$fault_port" "$rtt"
start_nbdkit stall -r -v "$PLUGIN" "http://127.0.0.1:$linkem_port/small.img" \
             timeout=60
wait_log "$tmp/stall.err" ': opening 15 more connections'
for ((n = 0; n < 50; n++)); do
  [ "$(grep -c '^stalled: GET range=bytes=0-0' "$tmp/fault.log")" -lt 15 ] ||
    break
  sleep 0.1
done
stalled=$(grep -c '^stalled: GET range=bytes=0-0' "$tmp/fault.log" || :)
[ "$stalled" -eq 15 ] || problem "(e) $stalled warm-up GETs waiting, not 15"
term_timed "$nbdkit_pid" 100
echo "(e) nbdkit exited ${secs} s after SIGTERM during the warm-up"
awk -v s="$secs" 'BEGIN { exit !(s < 3) }' ||
  problem "(e) nbdkit took ${secs} s or more to exit during the warm-up"
stop_pid "$nbdkit_pid"
[ "$_status" -eq 0 ] || problem "(e) nbdkit exited with status $_status"

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
