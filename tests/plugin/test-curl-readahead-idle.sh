#!/usr/bin/env bash
# test-curl-readahead-idle.sh: read-ahead for a client that stopped
# reading ends, and read-ahead in progress does not keep nbdkit from
# exiting.  nginx serves a 48 MiB image, and the same from /far/, whose
# answers to GETs of ranges that start 2,000,000 bytes or more into the
# image come at 64 KiB/s, and from /slow/, whose answers after their
# first MiB come at 1 KiB/s.
#  (a) A client reads 26 x 64 KiB sequentially at QD1 from /far/, from
#      0 to 1.625 MiB (on loopback a stream starts at the 17th read, at
#      1 MiB, and reads ahead, slowly past 2,000,000), then stays
#      connected without reading.  nginx is then
#      answering read-ahead GETs (its stub_status counts the connections
#      writing an answer), and within 3 s none any more (but the status
#      request's own): the read-ahead GETs were cut off.
#  (b) SIGTERM while a client that reads sequentially is connected, a
#      stream open: nbdkit exits with status 0 within 5 s, and unloads
#      the read-ahead (its last debug line).
#  (c) The same while a read waits for a stream's bytes that do not
#      come (from /slow/).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh
requires nginx
nginx -V 2>&1 | grep -q -- --with-http_stub_status_module ||
  skip "nginx has no stub_status module"

size=$((48 * 1024 * 1024))
serve_image "$size" 'location = /status { stub_status; access_log off; }
    location /far/ {
      alias DIR/www/;
      if ($http_range ~ "^bytes=([2-9][0-9]{6}|[1-9][0-9]{7,})-") {
        set $limit_rate 64k;
      }
    }
    location /slow/ {
      alias DIR/www/;
      limit_rate_after 1m;
      limit_rate 1k;
    }'

# reader NAME URL-PATH HOLD: in the background, through nbdkit NAME, a
# client that reads 64 KiB at a time at QD1 from 0 on, comparing each
# read with the image; after 26 reads it makes $tmp/NAME.mark, then
# either stops reading and stays connected for HOLD seconds (HOLD > 0),
# or reads on until its connection ends (HOLD 0).  Its PID is $reader.
reader ()
{
  local name=$1 path=$2 hold=$3 n
  start_nbdkit "$name" -r -v -D curl.readahead=1 "$PLUGIN" \
               "http://127.0.0.1:$port/$path"
  FILE=$image MARK=$tmp/$name.mark HOLD=$hold \
    timeout "$client_timeout" "$PYTHON_NBD" -m nbd -u "$uri" -c '
import os, time
data = open(os.environ["FILE"], "rb").read()
off, i = 0, 0
while True:
    assert h.pread(65536, off) == data[off:off + 65536], \
        "read at %d differs" % off
    off += 65536
    i += 1
    if i == 26:
        open(os.environ["MARK"], "w").close()
        if int(os.environ["HOLD"]) > 0:
            time.sleep(int(os.environ["HOLD"]))
            break
h.shutdown()
' >"$tmp/$name.out" 2>&1 &
  reader=$!
  _pids+=("$reader")
  for ((n = 0; n < 100; n++)); do
    [ ! -e "$tmp/$name.mark" ] || return 0
    _alive "$reader" || break
    sleep 0.1
  done
  cat "$tmp/$name.out" >&2
  fail "($name) the client did not make its 26 reads"
}

# writing: the connections nginx is writing an answer on, less the
# status request's own.
writing ()
{
  local w
  w=$(curl -s -m 5 "http://127.0.0.1:$port/status" |
      sed -n 's/.*Writing: \([0-9]*\).*/\1/p')
  [ -n "$w" ] || fail "no answer from nginx's stub_status"
  echo $((w - 1))
}

# (a)
reader idle far/disk.img 4
t0=$EPOCHREALTIME
w=$(writing)
[ "$w" -ge 1 ] ||
  problem "(a) no read-ahead GET on its way when the client stopped reading"
for ((n = 0; n < 30; n++)); do
  w=$(writing)
  [ "$w" -ne 0 ] || break
  sleep 0.1
done
secs=$(seconds_since "$t0")
if [ "$w" -ne 0 ]; then
  cat "$tmp/access.log" >&2
  problem "(a) 3 s after the last read, nginx still writes $w answer(s)"
elif ! _alive "$reader"; then
  problem "(a) the client was gone before read-ahead ended"
else
  echo "(a) read-ahead ended ${secs} s after the last read"
fi
# The client stays connected 4 s after its last read, then leaves.
st=0
wait "$reader" || st=$?
_forget_pid "$reader"
[ "$st" -eq 0 ] || { cat "$tmp/idle.out" >&2; fail "(a) the client failed"; }
stop_nbdkit idle
grep -q "read-ahead: stream from" "$tmp/idle.err" ||
  fail "(a) no stream started"

# (b) The client reads on (from the stream) while nbdkit is stopped.
reader term disk.img 0
grep -q "read-ahead: stream from" "$tmp/term.err" ||
  fail "(b) no stream started"
stop_nbdkit term
grep -qE "read-ahead: 1 streams.* fetched [0-9]+ bytes" "$tmp/term.err" ||
  fail "(b) no 'read-ahead: 1 streams ... fetched' line at unload"
stop_pid "$reader"

# (c) A GET stalls 1 MiB after its start, the reads soon after: by
# 0.5 s after the 26th, a read waits for bytes that do not come.
reader slow slow/disk.img 0
sleep 0.5
grep -q "read-ahead: stream from" "$tmp/slow.err" ||
  fail "(c) no stream started"
t0=$EPOCHREALTIME
stop_nbdkit slow
echo "(c) nbdkit exited $(seconds_since "$t0") s after SIGTERM"
stop_pid "$reader"

check_problems
