#!/usr/bin/env bash
# test-curl-head-start.sh: the head start.  While the start-up probe's
# GET is on its way to a distant HTTP/2 server, the plugin asks for the
# object's first 12 MiB right behind it, on the same connection, and
# serves the client's first reads from those answers once they are
# judged against the object the probe found.
#  (a) nginx with HTTP/2 30 ms away (helpers/linkem): the head start's
#      eight GETs, exactly 0-12582911 in all, come to nginx on the
#      probe's TCP connection less than a round trip after the probe's,
#      so before its answer could have reached the plugin; a copy is byte-exact on that one
#      connection, all of its first 12 MiB served from the head start
#      (nbdcopy's 1 MiB reads, several waiting on one GET, some coming
#      behind others), and nginx is asked for none of them again.
#  (b) the same nginx on loopback, http-version=2TLS: no head start (nbdkit
#      says the server is near), only the probe's GET before the client's
#      reads.
#  (c) a writable connection (no -r) ends the pin, but the head start was
#      judged against the object the probe found: it is served (writes
#      drop what read-ahead holds of their ranges), and the copy is
#      byte-exact.
#  (d) an object smaller than the head start (1 MiB + 7): byte-exact, and
#      the GETs past its end are refused unjudged.
#  (f) through a slow link (60 Mbit/s), two reads of 1 MiB in the head
#      start's GET of 2-4 MiB and two of 2 MiB in its GET of 4-8 MiB,
#      the later one of each pair sent first: all wait for their GET and
#      are served from it, and nginx is asked for none of them (before,
#      the first of a pair to be served freed the other's bytes).
#  (g) url= on a near HTTPS nginx that answers 302 to the far one: the
#      first hop gets no head start (a near server), the second does,
#      and the copy is byte-exact with the head start's 12 MiB served.
#  (h) url= on a far HTTP/2 nginx that answers the probe's range with a
#      302 to the image, and every other range with a file of its own of
#      the same size and date (so the same ETag and Last-Modified): the
#      head start went to that first hop, and nothing of it is served;
#      the copy is the image's.
#  (e) faults on the head start's GETs (helpers/h2-fault-server.py 20 ms
#      away; its Nth GET after the probe is the head start's Nth): one
#      cut short, reset, stalled, answered with other bytes than asked
#      for, or cut off with every other answer on its connection by an
#      abrupt GOAWAY (at each connection's 8th request) is not served,
#      and the copy is byte-exact; the object
#      replaced from the head start's first GET on (with and without
#      If-Match honoured, and with validators only on HEAD's answer, so
#      that the head start's answers, asked without a precondition, show
#      no version) fails the copy as changed, with no wrong byte
#      written; with pin-object=false there is no head start (its answers
#      could not be checked).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy

rtt=30
size=$((32 * 1024 * 1024 + 321))
make_cert
serve_image "$size" 'access_log DIR/access.log ranges;
                     access_log DIR/timing.log timing;'
start_linkem "$tlsport" "$rtt"
far=https://127.0.0.1:$linkem_port/disk.img

mark ()
{
  first=$(($(wc -l <"$tmp/access.log") + 1))
}

since_mark ()
{
  tail -n +"$first" "$tmp/access.log"
}

# served ERR: the bytes read-ahead served, from its totals at unload.
served ()
{
  sed -n 's/.*read-ahead: .* fetched [0-9]* bytes and served \([0-9]*\);.*/\1/p' \
      "$1" | tail -1
}

said_before ()
{
  local err=$1 a=$2 b=$3 la lb
  la=$(grep -n -m1 -F -- "$a" "$err" | cut -d: -f1)
  lb=$(grep -n -m1 -F -- "$b" "$err" | cut -d: -f1)
  [ -n "$la" ] && [ -n "$lb" ] && [ "$la" -lt "$lb" ]
}

# copy_and_stop NAME [IMAGE]: nbdcopy from nbdkit NAME (start_nbdkit),
# byte-exact against IMAGE ($image), then NAME stopped; $got is what
# read-ahead served, from its totals.
copy_and_stop ()
{
  timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
  assert_same_file "${2:-$image}" "$tmp/out.img"
  rm -f "$tmp/out.img"
  stop_nbdkit "$1"
  got=$(served "$tmp/$1.err")
}

# (a)
# a_start: nbdkit "far" started and its head start checked; fails
# (status 1) only if the GETs came a round trip or more after the probe.
a_start ()
{
  mark
  : > "$tmp/timing.log"
  start_nbdkit far -r -v -D curl.readahead=1 "$PLUGIN" "$far" \
    cainfo="$tmp/cert.pem"
  grep -q 'a head start of 12288 KiB goes beside the probe' "$tmp/far.err" ||
    fail "(a) no head start: $(grep -i 'head start\|HTTP/2' "$tmp/far.err" | head -3)"
  # nginx logs a request when it has answered it: the probe's and the
  # head start's eight, within 10 s.
  for ((n = 0; n < 100; n++)); do
    [ "$(since_mark | wc -l)" -lt 9 ] || break
    sleep 0.1
  done
  since_mark > "$tmp/a-start.log"
  cp "$tmp/timing.log" "$tmp/a-timing.log"
  probe_conn=$(awk '$3 == "bytes=0-8191" { print $1; exit }' "$tmp/a-start.log")
  [ -n "$probe_conn" ] || fail "(a) nginx logged no probe: $(cat "$tmp/a-start.log")"
  # The head start's GETs: every one but the probe's before the client.
  awk -v c="$probe_conn" '
    $2 != "GET" || $3 == "bytes=0-8191" { next }
    $1 != c { print "another connection: " $0; bad++ }
    $4 != 206 { print "not 206: " $0; bad++ }
    { split(substr($3, 7), r, "-")
      if (r[1] != next_byte) { print "not contiguous: " $0; bad++ }
      next_byte = r[2] + 1; n++ }
    BEGIN { next_byte = 0 }
    END {
      if (n != 8) { print n " GETs, not 8"; bad++ }
      if (next_byte != 12582912) { print "up to " next_byte ", not 12582912"; bad++ }
      exit bad > 0
    }' "$tmp/a-start.log" > "$tmp/a-check.out" ||
    fail "(a) the head start's GETs: $(tr '\n' ' ' < "$tmp/a-check.out")"
  # ... which came to nginx less than a round trip after the probe's (each
  # came at $msec less $request_time): one sent after the probe's answer
  # had come back would come a round trip after it, or later.
  awk -v rtt="$rtt" '
    { came = $3 - $4 }
    $2 == "bytes=0-8191" { probe = came; next }
    $2 ~ /^bytes=/ { n++; if (came > last) last = came }
    END {
      gap = (last - probe) * 1000
      printf "%d GETs, the last %.0f ms after the probe'"'"'s\n", n, gap
      exit !(n == 8 && gap < rtt)
    }' "$tmp/a-timing.log" > "$tmp/a-timing.out"
}
# A loaded machine once delayed the GETs by 52 ms: one more try.
if ! a_start; then
  echo "(a) $(cat "$tmp/a-timing.out"): once more"
  stop_nbdkit far
  a_start ||
    fail "(a) the head start did not ride the probe's flight: $(cat "$tmp/a-timing.out")"
fi
echo "(a) $(cat "$tmp/a-timing.out")"
copy_and_stop far
conns=$(since_mark | cut -d' ' -f1 | sort -u | wc -l)
[ "$conns" -eq 1 ] || problem "(a) requests on $conns connections, not 1"
# Every read of the first 12 MiB was served from the head start, those
# that came behind others too: nginx was asked for none of it again.
since_mark | tail -n +$(($(wc -l < "$tmp/a-start.log") + 1)) |
  awk '$2 == "GET" { split(substr($3, 7), r, "-"); if (r[1] < 12582912) print }' \
  > "$tmp/a-again.log"
[ ! -s "$tmp/a-again.log" ] ||
  problem "(a) asked again after the head start: $(head -3 "$tmp/a-again.log" | tr '\n' ' ')"
[ "${got:-0}" -ge 12582912 ] ||
  problem "(a) read-ahead served ${got:-nothing}, not the head start's 12 MiB"

# (b)
mark
start_nbdkit near -r -v "$PLUGIN" "$url" cainfo="$tmp/cert.pem" \
  http-version=2TLS
grep -q 'HTTP/2: requests as streams on one connection' "$tmp/near.err" ||
  fail "(b) not HTTP/2 on loopback with 2TLS"
grep -q ': no head start: a near server$' "$tmp/near.err" &&
  ! grep -q 'a head start of' "$tmp/near.err" ||
  problem "(b) loopback: $(grep -m1 'head start' "$tmp/near.err")"
reqs=$(since_mark | wc -l)
[ "$reqs" -eq 1 ] ||
  problem "(b) loopback: $reqs requests before the client, not the probe's one"
stop_nbdkit near

# (c)
start_nbdkit rw -v -D curl.readahead=1 "$PLUGIN" "$far" cainfo="$tmp/cert.pem"
grep -q 'a head start of 12288 KiB' "$tmp/rw.err" || fail "(c) no head start"
copy_and_stop rw
grep -q 'a writable connection: reads no longer pinned' "$tmp/rw.err" ||
  fail "(c) the connection was not writable: nothing tested"
[ "${got:-0}" -ge 12582912 ] ||
  problem "(c) a writable connection: read-ahead served ${got:-nothing}, not the head start's 12 MiB"

# (d)
small=$tmp/www/small.img
make_random_file "$small" $((1024 * 1024 + 7))
start_nbdkit small -r -v -D curl.readahead=1 "$PLUGIN" \
  "https://127.0.0.1:$linkem_port/small.img" cainfo="$tmp/cert.pem"
copy_and_stop small "$small"
grep -q "head start: .*: bytes 1048576-2097151: past the object's end" \
     "$tmp/small.err" ||
  problem "(d) the GET past the end was not refused: $(grep 'head start' "$tmp/small.err" | tail -3)"

# (f)
requires_nbdsh
start_linkem "$tlsport" "$rtt" --rate 60
mark
start_nbdkit slow -r -v -D curl.readahead=1 "$PLUGIN" \
  "https://127.0.0.1:$linkem_port/disk.img" cainfo="$tmp/cert.pem"
grep -q 'a head start of 12288 KiB' "$tmp/slow.err" || fail "(f) no head start"
skip_lines=$(since_mark | wc -l)
FILE=$image nbdsh -u "$uri" -c '
import os, time
data = open(os.environ["FILE"], "rb").read()
M = 1024 * 1024
bufs = {}
for off, n in ((3 * M, M), (2 * M, M), (6 * M, 2 * M), (4 * M, 2 * M)):
    buf = nbd.Buffer(n)
    bufs[h.aio_pread(buf, off)] = (buf, off, n)
    # Each on its way (and waiting in the plugin) before the next.
    end = time.monotonic() + 0.15
    while time.monotonic() < end:
        h.poll(10)
# Answers that came while the others were sent are taken first: poll
# would wait for nothing more to come.
while bufs:
    for cookie in list(bufs):
        if h.aio_command_completed(cookie):
            buf, o, n = bufs.pop(cookie)
            assert buf.to_bytearray() == data[o:o + n], "read at %d differs" % o
    if bufs:
        h.poll(-1)
h.shutdown()
' >"$tmp/f.out" 2>&1 || { cat "$tmp/f.out" >&2; fail "(f) the reads failed"; }
stop_nbdkit slow
grep -q 'read-ahead: stream from 0 asks for 2097152-4194303' "$tmp/slow.err" &&
  grep -q 'read-ahead: stream from 0 asks for 4194304-8388607' "$tmp/slow.err" ||
  fail "(f) the head start did not ask for 2-4 MiB and 4-8 MiB in one GET each"
since_mark | tail -n +$((skip_lines + 1)) |
  awk '$2 == "GET" { split(substr($3, 7), r, "-"); if (r[1] < 8388608) print }' \
  > "$tmp/f-again.log"
[ ! -s "$tmp/f-again.log" ] ||
  problem "(f) asked again: $(head -3 "$tmp/f-again.log" | tr '\n' ' ')"

# (g)
start_nginx_named front "location = /r.img { return 302 $far; }"
start_nbdkit redir -r -v -D curl.readahead=1 "$PLUGIN" \
  "https://127.0.0.1:$front_tlsport/r.img" cainfo="$tmp/cert.pem"
said=$(grep -E ': no head start: |: a head start of ' "$tmp/redir.err" |
       sed 's/.*: \(no head start: [a-z ]*\|a head start of [0-9]* KiB\).*/\1/' |
       tr '\n' ';')
[ "$said" = "no head start: a near server;a head start of 12288 KiB;" ] ||
  fail "(g) redirected: not a head start from the second hop: $said"
copy_and_stop redir
[ "${got:-0}" -ge 12582912 ] ||
  problem "(g) redirected: read-ahead served ${got:-nothing}, not the head start's 12 MiB"

# (h)
front=$tmp/nginx-other/www
mkdir -p "$front"
make_random_file "$front/disk.img" "$size"
touch -r "$image" "$front/disk.img"
start_nginx_named other \
  "location = /disk.img { if (\$http_range = \"bytes=0-8191\") { return 302 $far; } }"
[ -f "$tmp/nginx-other/www/disk.img" ] || fail "(h) the other image is not served"
start_linkem "$other_tlsport" "$rtt"
start_nbdkit other -r -v -D curl.readahead=1 "$PLUGIN" \
  "https://127.0.0.1:$linkem_port/disk.img" cainfo="$tmp/cert.pem"
grep -q 'a head start of 12288 KiB' "$tmp/other.err" ||
  fail "(h) no head start at the first hop: nothing tested"
# The copy is the image's (the first hop's file is another), and the
# head start's GETs were refused for their hop.  (Read-ahead's total
# served bytes also counts the streams nbdcopy's first reads start on
# a loaded machine.)
copy_and_stop other
refused='head start: .*: bytes [0-9-]*: its URL answered the probe with a'
grep -q "$refused redirect" "$tmp/other.err" ||
  problem "(h) no GET of the head start was refused for its hop"

# (e) NAME | MODE | NTH | EXPECT | FAULT | PLUGIN-ARGS: the fault
# server's --mode and --nth, fault_outcome's EXPECT (as in
# test-curl-http2-faults.sh), and the fault its log must show ("-": the
# case has none, and no byte of the head start may be served; "none":
# there must be no head start).
requires_h2
check_problems
fsize=$((8 * 1024 * 1024 + 4097))
make_random_file "$tmp/orig.img" "$fsize"
cases=(
  "short          | short-once      | 3 | copy | short |"
  "rst            | rst-once        | 2 | copy | rst |"
  "stall          | stall-once      | 1 | copy | stall |"
  "wrong-range    | wrong-range     | 1 | copy | wrong-range |"
  "wrong-label    | wrong-label     | 4 | copy | wrong-label |"
  "goaway-abrupt  | goaway-abrupt   | 8 | copy | goaway |"
  "changed        | changed         | 1 | fail:changed | - |"
  "changed-ignore | changed-ignore-if-match | 1 | fail:changed | - |"
  "changed-noval  | changed-noval   | 1 | fail:changed | - |"
  "unpinned       | normal          | 1 | copy | none | pin-object=false"
)
for row in "${cases[@]}"; do
  case_row "$row" name mode nth expect fault args
  : >"$tmp/h2.log"
  start_h2_fault_server "$mode" "$tmp/orig.img" "$nth"
  start_linkem "$h2_port" 20
  t0=$EPOCHREALTIME
  rm -f "$tmp/out.img"
  st=0
  # shellcheck disable=SC2086 # PLUGIN-ARGS are words
  if fault_nbdkit -v -D curl.readahead=1 -- \
       "https://127.0.0.1:$linkem_port/disk.img" cainfo="$tmp/cert.pem" \
       retry-delay=0.05 timeout=1 $args; then
    timeout 120 nbdcopy "$uri" "$tmp/out.img" 2>"$tmp/nbdcopy.err" || st=$?
    stop_pid "$nbdkit_pid"
  else
    st=start
  fi
  secs=$(seconds_since "$t0")
  stop_pid "$linkem_pid"
  stop_pid "$h2_pid"
  result=$(fault_outcome "$expect" "$st")
  got=$(served "$tmp/nbdkit.err")
  if [ "$fault" = none ]; then
    grep -q 'no head start: pin-object=false' "$tmp/nbdkit.err" ||
      result="BAD: not 'no head start: pin-object=false'; $result"
  elif ! grep -q 'a head start of 12288 KiB' "$tmp/nbdkit.err"; then
    result="BAD: no head start; $result"
  elif [ "$fault" = - ]; then
    [ "${got:-0}" -eq 0 ] || result="BAD: served $got bytes; $result"
  else
    grep -q " fault=$fault\$" "$tmp/h2.log" ||
      result="BAD: injected no fault; $result"
  fi
  [ "${secs%.*}" -le 60 ] || result="BAD: took $secs s; $result"
  case_done "$name" "$result (served ${got:-0}, $secs s)"
  mv "$tmp/h2.log" "$tmp/h2-$name.log"
  mv "$tmp/nbdkit.err" "$tmp/nbdkit-$name.err"
done
cases_end
