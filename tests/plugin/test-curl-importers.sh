#!/usr/bin/env bash
# test-curl-importers.sh: the pipelines that importers run give the
# served image byte for byte, with nbdkit's own filters above the plugin
# and qemu-img as the client, on nginx.  Each importer's command line is
# copied from its source, because the filters change what reaches the
# plugin (the readahead filter's cache requests, the retry filter's
# reopening, the cow filter's block-sized reads) and qemu-img reads a
# qcow2's metadata and clusters in its own order.
#  (a) KubeVirt CDI (pkg/image/nbdkit.go, qemu.go): nbdkit --foreground
#      --readonly --exit-with-parent -U SOCK --pidfile PIDFILE
#      --filter=readahead --filter=retry -r curl 'header=User-Agent:
#      cdi-nbdkit-importer' retry-exponential=no url=URL, waited for by
#      its PID file, then qemu-img convert -t writeback -p -O raw
#      nbd+unix:///?socket=SOCK disk.img (no -f: qemu-img probes the
#      format), then SIGINT, on which nbdkit exits 0 within 5 s.  A
#      32 MiB qcow2 that is half random data, half holes, and a 32 MiB
#      random raw image, over HTTP and over HTTPS with HTTP/2 (cainfo=,
#      as CDI passes a CA; a link of 5 ms, linkem, in front of nginx's
#      HTTPS port, since the plugin keeps HTTP/1.1 for a server that
#      answers within 2 ms): qemu-img compare calls the output identical
#      to the source, the output is the raw image's bytes, every request
#      nginx logged carried CDI's User-Agent, and over HTTPS every one
#      was HTTP/2.
#  (b) virt-v2v's input (input/nbdkit_curl.ml, lib/nbdkit.ml): curl with
#      timeout=2000, the retry filter next to the plugin and the cow
#      filter above it, cow-on-read=true, over HTTPS (sslverify=false,
#      which virt-v2v passes on for a self-signed server); qemu-img
#      convert -f raw -O raw gives the image byte for byte.
#  (c) CDI's pipeline on the qcow2 over a link of 60 Mbit/s (linkem),
#      so that the import takes about two seconds: once nginx has logged
#      40 % of the qcow2 as sent, nginx is stopped, the port refuses
#      connections, and nginx starts again on the same port.  qemu-img
#      was still running when nginx stopped and when it started again,
#      nginx had logged less than the whole qcow2 as sent, the new nginx
#      served GETs of it, and qemu-img exits 0 with an output identical
#      to the source (the plugin's retries, and the retry filter's above
#      them).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires qemu-img
requires nginx
for f in readahead retry cow; do
  requires nbdkit --filter="$f" null --version
done

mib=$((1024 * 1024))
size=$((32 * mib))
make_cert

# start_nginx with a second access log, $tmp/ua.log, one line per
# request: PROTOCOL METHOD RANGE STATUS BYTES URI "USER-AGENT".  The
# format must be declared at the http level, which start_nginx's EXTRA
# does not reach.
# shellcheck disable=SC2016
ua_format='$server_protocol $request_method $http_range $status '\
'$body_bytes_sent $request_uri "$http_user_agent"'
_ua_conf ()
{
  _nginx_conf | sed "s|^http {|http {\\n  log_format ua '$ua_format';|"
}
_nginx_extra="access_log $tmp/access.log ranges;
    access_log $tmp/ua.log ua;"
mkdir -p "$tmp/www" "$tmp/nginx-tmp"
: >"$tmp/ua.log"
_nginx_run nginx "$tmp" "$tmp/access.log" _ua_conf
port=$_nginx_port tlsport=$_nginx_tlsport nginx_pid=$_nginx_pid

# The images.  disk.raw: random bytes.  half.raw: 1 MiB of random bytes
# in every other MiB, holes between; half.qcow2 made from it by qemu-img,
# which leaves the holes unallocated.
make_random_file "$tmp/www/disk.raw" "$size"
truncate -s "$size" "$tmp/half.raw"
for ((i = 0; i < size / mib; i += 2)); do
  head -c "$mib" /dev/urandom |
    dd of="$tmp/half.raw" bs="$mib" seek="$i" conv=notrunc status=none
done
qemu-img convert -f raw -O qcow2 "$tmp/half.raw" "$tmp/www/half.qcow2"
chmod 644 "$tmp/www/half.qcow2"

# cdi_start NAME URL [PLUGIN-ARGS...]: nbdkit as CDI runs it, with
# PLUGIN-ARGS where CDI puts cainfo=, on $tmp/NAME.sock, its output in
# $tmp/NAME.err; waits for the PID file as CDI does.  Sets $nbdkit_pid
# and $sock.
cdi_start ()
{
  local name=$1 url=$2 n
  shift 2
  sock=$tmp/$name.sock
  local pidfile=$tmp/$name.pid
  rm -f "$sock" "$pidfile"
  "${NBDKIT[@]}" --foreground --readonly --exit-with-parent -U "$sock" \
                 --pidfile "$pidfile" --filter=readahead --filter=retry \
                 -r "$PLUGIN" 'header=User-Agent: cdi-nbdkit-importer' \
                 "$@" retry-exponential=no "url=$url" \
                 </dev/null >"$tmp/$name.err" 2>&1 &
  nbdkit_pid=$!
  _pids+=("$nbdkit_pid")
  for ((n = 0; n < ready_tries; n++)); do
    [ -s "$pidfile" ] && return 0
    _alive "$nbdkit_pid" || break
    sleep 0.1
  done
  cat "$tmp/$name.err" >&2
  fail "($name) nbdkit did not write its PID file"
}

# cdi_convert NAME: CDI's qemu-img on $sock into $tmp/NAME.img, its
# progress in $tmp/NAME.progress and messages in $tmp/NAME.qemu.
cdi_convert ()
{
  timeout "$client_timeout" qemu-img convert -t writeback -p -O raw \
          "nbd+unix:///?socket=$sock" "$tmp/$1.img" \
          </dev/null >"$tmp/$1.progress" 2>"$tmp/$1.qemu"
}

# interrupt NAME: SIGINT to nbdkit NAME ($nbdkit_pid), as CDI stops it:
# it must exit with status 0 within 5 s.
interrupt ()
{
  local name=$1 n st=0 t0=$EPOCHREALTIME
  kill -INT "$nbdkit_pid"
  for ((n = 0; n < 50; n++)); do
    _alive "$nbdkit_pid" || break
    sleep 0.1
  done
  if _alive "$nbdkit_pid"; then
    cat "$tmp/$name.err" >&2
    fail "($name) nbdkit still runs $(seconds_since "$t0") s after SIGINT"
  fi
  wait "$nbdkit_pid" || st=$?
  _forget_pid "$nbdkit_pid"
  [ "$st" -eq 0 ] ||
    { cat "$tmp/$name.err" >&2; fail "($name) nbdkit exited $st on SIGINT"; }
  echo "($name) nbdkit exited 0 $(seconds_since "$t0") s after SIGINT"
}

# identical NAME OUT SOURCE FORMAT: qemu-img compare says OUT (raw) and
# SOURCE (of FORMAT) are identical.
identical ()
{
  qemu-img compare -f raw -F "$4" "$2" "$3" >"$tmp/$1.compare" 2>&1 ||
    { cat "$tmp/$1.compare" >&2; fail "($1) output and source differ"; }
  grep -q 'Images are identical' "$tmp/$1.compare" ||
    { cat "$tmp/$1.compare" >&2; fail "($1) qemu-img compare said no match"; }
}

# ua_checked NAME PROTOCOL: every request in $tmp/ua.log (emptied before
# the case) came with CDI's User-Agent and PROTOCOL, and there were GETs.
ua_checked ()
{
  local name=$1 proto=$2 gets bad
  cp "$tmp/ua.log" "$tmp/ua-$name.log"
  gets=$(grep -c '^[^ ]* GET ' "$tmp/ua.log" || :)
  [ "$gets" -ge 1 ] || fail "($name) nginx logged no GET"
  bad=$(grep -vc " \"cdi-nbdkit-importer\"\$" "$tmp/ua.log" || :)
  [ "$bad" -eq 0 ] ||
    { cat "$tmp/ua.log" >&2;
      fail "($name) $bad requests without CDI's User-Agent"; }
  bad=$(grep -vc "^$proto " "$tmp/ua.log" || :)
  [ "$bad" -eq 0 ] ||
    { cat "$tmp/ua.log" >&2; fail "($name) $bad requests not over $proto"; }
  echo "($name) $gets GETs, all $proto with CDI's User-Agent"
}

# (a)
start_linkem "$tlsport" 5
http=http://127.0.0.1:$port
https=https://127.0.0.1:$linkem_port
ca=cainfo=$tmp/cert.pem
while read -r name url proto file format raw args; do
  : >"$tmp/ua.log"
  # shellcheck disable=SC2086
  cdi_start "$name" "$url" $args
  st=0
  t0=$EPOCHREALTIME
  cdi_convert "$name" || st=$?
  [ "$st" -eq 0 ] ||
    { cat "$tmp/$name.qemu" "$tmp/$name.err" >&2;
      fail "($name) qemu-img convert exited $st"; }
  echo "($name) qemu-img convert took $(seconds_since "$t0") s"
  grep -q '100.00/100%' "$tmp/$name.progress" ||
    fail "($name) qemu-img's progress did not reach 100 %"
  interrupt "$name"
  identical "$name" "$tmp/$name.img" "$tmp/www/$file" "$format"
  assert_same_file "$raw" "$tmp/$name.img"
  ua_checked "$name" "$proto"
  rm -f "$tmp/$name.img"
done <<EOF
a_qcow2_http $http/half.qcow2 HTTP/1.1 half.qcow2 qcow2 $tmp/half.raw
a_raw_http $http/disk.raw HTTP/1.1 disk.raw raw $tmp/www/disk.raw
a_qcow2_https $https/half.qcow2 HTTP/2.0 half.qcow2 qcow2 $tmp/half.raw $ca
a_raw_https $https/disk.raw HTTP/2.0 disk.raw raw $tmp/www/disk.raw $ca
EOF

# (b) virt-v2v's command line but for its --name, --selinux-label and
# debug flags: the filters in the order it gives them (cow first, so
# outermost; retry next to the plugin), the plugin's parameters in its
# order.
rm -f "$tmp/b.sock" "$tmp/b.pid"
"${NBDKIT[@]}" --exit-with-parent --foreground --pidfile "$tmp/b.pid" \
               --unix "$tmp/b.sock" --threads 16 \
               --filter cow --filter retry "$PLUGIN" \
               "url=https://127.0.0.1:$tlsport/disk.raw" timeout=2000 \
               sslverify=false cow-on-read=true \
               </dev/null >"$tmp/b.err" 2>&1 &
nbdkit_pid=$!
_pids+=("$nbdkit_pid")
for ((n = 0; n < ready_tries; n++)); do
  [ -s "$tmp/b.pid" ] && break
  _alive "$nbdkit_pid" || { cat "$tmp/b.err" >&2; fail "(b) nbdkit exited"; }
  sleep 0.1
done
[ -s "$tmp/b.pid" ] || fail "(b) nbdkit did not write its PID file"
t0=$EPOCHREALTIME
timeout "$client_timeout" qemu-img convert -f raw -O raw \
        "nbd+unix:///?socket=$tmp/b.sock" "$tmp/b.img" 2>"$tmp/b.qemu" ||
  { cat "$tmp/b.qemu" >&2; fail "(b) qemu-img convert failed"; }
echo "(b) qemu-img convert took $(seconds_since "$t0") s"
stop_pid "$nbdkit_pid"
[ "$_status" -eq 0 ] || fail "(b) nbdkit exited $_status on SIGTERM"
cmp "$tmp/www/disk.raw" "$tmp/b.img" ||
  fail "(b) the output is not the image's bytes"
rm -f "$tmp/b.img"

# (c)
start_linkem "$port" 2 --rate 60
: >"$tmp/ua.log"
cdi_start c "http://127.0.0.1:$linkem_port/half.qcow2"
( exec timeout "$client_timeout" qemu-img convert -t writeback -p -O raw \
       "nbd+unix:///?socket=$sock" "$tmp/c.img" \
       </dev/null >"$tmp/c.progress" 2>"$tmp/c.qemu" ) &
qemu_pid=$!
_pids+=("$qemu_pid")
t0=$EPOCHREALTIME
# sent: what nginx logged as sent of the qcow2.  A read-ahead request
# is logged once its last byte left nginx, so nginx is ahead of what
# reached nbdkit by the requests on the link, never by what it has not
# been asked yet.
qcow2_size=$(file_size "$tmp/www/half.qcow2")
sent ()
{
  awk '$2 == "GET" && $6 == "/half.qcow2" { n += $5 }
       END { print n + 0 }' "$tmp/ua.log"
}
for ((n = 0; n < 200; n++)); do
  [ "$(sent)" -lt $((qcow2_size * 2 / 5)) ] || break
  _alive "$qemu_pid" || break
  sleep 0.05
done
s=$(sent)
p=$(tr '\r' '\n' <"$tmp/c.progress" | grep -o '[0-9.]*/100%' | tail -n1)
echo "(c) nginx logged $s of $qcow2_size bytes sent," \
     "$(seconds_since "$t0") s into the import (qemu-img: ${p:-0})"
_alive "$qemu_pid" || fail "(c) qemu-img ended before nginx was stopped"
[ "$s" -ge $((qcow2_size * 2 / 5)) ] ||
  fail "(c) nginx sent less than 40 % of the qcow2 in 10 s"
stop_pid "$nginx_pid"
for ((n = 0; n < 50; n++)); do
  "$PYTHON" -c '
import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()
except ConnectionRefusedError:
    sys.exit(0)
sys.exit(1)' "$port" && break
  sleep 0.1
done
[ "$n" -lt 50 ] || fail "(c) nginx's port still takes connections"
_alive "$qemu_pid" || fail "(c) qemu-img ended while nginx was stopped"
s=$(sent)
echo "(c) nginx stopped, having logged $s bytes sent"
[ "$s" -lt "$qcow2_size" ] ||
  fail "(c) nginx had sent the whole qcow2 before it stopped"
mark=$(wc -l <"$tmp/ua.log")
nginx -p "$tmp" -e "$tmp/nginx-error.log" -c "$tmp/nginx.conf" \
      -g 'daemon off;' </dev/null >>"$tmp/nginx.out" 2>&1 &
nginx_pid=$!
_pids+=("$nginx_pid")
wait_http "http://127.0.0.1:$port/__ready" "$nginx_pid" ||
  fail "(c) nginx did not start again on port $port"
echo "(c) nginx listens again $(seconds_since "$t0") s into the import"
_alive "$qemu_pid" || fail "(c) qemu-img ended before nginx started again"
st=0
wait "$qemu_pid" || st=$?
_forget_pid "$qemu_pid"
[ "$st" -eq 0 ] ||
  { cat "$tmp/c.qemu" "$tmp/c.err" >&2; fail "(c) qemu-img exited $st"; }
echo "(c) qemu-img convert took $(seconds_since "$t0") s"
after=$(tail -n +"$((mark + 1))" "$tmp/ua.log" |
          grep -c '^[^ ]* GET [^ ]* 206 .*/half.qcow2 ' || :)
[ "$after" -ge 1 ] ||
  { cat "$tmp/ua.log" >&2;
    fail "(c) the new nginx served no GET: the import did not need it"; }
echo "(c) the new nginx served $after GETs"
interrupt c
identical c "$tmp/c.img" "$tmp/www/half.qcow2" qcow2
assert_same_file "$tmp/half.raw" "$tmp/c.img"
