#!/usr/bin/env bash
# test-curl-importers.sh: the pipelines that importers run give the
# served image byte for byte, with nbdkit's own filters above the plugin
# and qemu-img as the client, on nginx.  Each importer's command line is
# copied from its source (the built plugin's path in place of "curl"),
# because the filters change what reaches the plugin (the retry filter
# serializes requests and reopens the plugin after a failure, the cow
# filter reads in blocks) and qemu-img reads a qcow2's metadata and
# clusters in its own order.  Under CDI's retry filter nbdkit's
# readahead filter sends nothing: it warns that the plugin below it is
# not PARALLEL, which the retry filter's thread model makes it.
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
#  (c) CDI's pipeline on the qcow2 over a link of 50 Mbit/s (linkem),
#      so that the import takes a few seconds: once nginx has logged 30 %
#      of the qcow2 as sent, nginx is stopped (SIGTERM to its master),
#      its port refuses connections, and nginx starts again on the same
#      port with the same configuration.  qemu-img must exit 0 with an
#      output identical to the source (the plugin's retries, and the
#      retry filter's above them), and the restart must have come in the
#      middle of the import: qemu-img still running when nginx listened
#      again, and the new nginx asked for part of the qcow2.  A machine
#      so busy that the restart came too late tries again, three times
#      at most.
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
  cmp -s "$raw" "$tmp/$name.img" ||
    fail "($name) the output is not the image's bytes"
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

# (c) A small window keeps linkem from taking in 16 MiB of each
# answer at once.  The kernel's buffers on loopback still take several
# MiB more than the link carried, so nginx's log runs ahead of qemu-img;
# what proves the restart came in time is that the new nginx was asked
# for bytes.
start_linkem "$port" 2 --rate 50 --window 262144
qcow2_size=$(file_size "$tmp/www/half.qcow2")

# sent: what nginx logged as sent of the qcow2 since $tmp/ua.log was
# emptied (a request is logged once its last byte left nginx).
sent ()
{
  awk '$2 == "GET" && $6 == "/half.qcow2" { n += $5 }
       END { print n + 0 }' "$tmp/ua.log"
}

# port_refuses: nothing takes connections on nginx's port.
port_refuses ()
{
  "$PYTHON" -c '
import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()
except ConnectionRefusedError:
    sys.exit(0)
sys.exit(1)' "$port"
}

# restart_import NAME: CDI's import of the qcow2 through the link, with
# nginx stopped once it logged 30 % of the qcow2 as sent and started
# again on the same port.  Whatever the timing, qemu-img must exit 0
# with an output identical to the source.  $missed says why the restart
# did not come in the middle of the import (empty if it did): qemu-img
# had ended before nginx listened again, or the new nginx was asked
# for nothing.
restart_import ()
{
  local name=$1 n s p st=0 t0 mark after qemu_pid
  missed=
  : >"$tmp/ua.log"
  cdi_start "$name" "http://127.0.0.1:$linkem_port/half.qcow2"
  ( exec timeout "$client_timeout" qemu-img convert -t writeback -p \
         -O raw "nbd+unix:///?socket=$sock" "$tmp/$name.img" \
         </dev/null >"$tmp/$name.progress" 2>"$tmp/$name.qemu" ) &
  qemu_pid=$!
  _pids+=("$qemu_pid")
  t0=$EPOCHREALTIME
  for ((n = 0; n < 200; n++)); do
    [ "$(sent)" -lt $((qcow2_size * 3 / 10)) ] || break
    _alive "$qemu_pid" || break
    sleep 0.05
  done
  s=$(sent)
  p=$(tr '\r' '\n' <"$tmp/$name.progress" | grep -o '[0-9.]*/100%' |
        tail -n1)
  if ! _alive "$qemu_pid"; then
    missed="qemu-img ended before nginx was stopped"
  else
    [ "$s" -ge $((qcow2_size * 3 / 10)) ] ||
      fail "($name) nginx sent less than 30 % of the qcow2 in 10 s"
    echo "($name) nginx logged $s of $qcow2_size bytes sent," \
         "$(seconds_since "$t0") s into the import (qemu-img: ${p:-0})"
    stop_pid "$nginx_pid"
    for ((n = 0; n < 50; n++)); do
      port_refuses && break
      sleep 0.1
    done
    [ "$n" -lt 50 ] || fail "($name) nginx's port still takes connections"
    echo "($name) nginx stopped, having logged $(sent) bytes sent"
    mark=$(wc -l <"$tmp/ua.log")
    nginx -p "$tmp" -e "$tmp/nginx-error.log" -c "$tmp/nginx.conf" \
          -g 'daemon off;' </dev/null >>"$tmp/nginx.out" 2>&1 &
    nginx_pid=$!
    _pids+=("$nginx_pid")
    wait_http "http://127.0.0.1:$port/__ready" "$nginx_pid" ||
      fail "($name) nginx did not start again on port $port"
    echo "($name) nginx listens again $(seconds_since "$t0") s into" \
         "the import"
    _alive "$qemu_pid" ||
      missed="qemu-img ended before nginx listened again"
  fi
  wait "$qemu_pid" || st=$?
  _forget_pid "$qemu_pid"
  [ "$st" -eq 0 ] ||
    { cat "$tmp/$name.qemu" "$tmp/$name.err" >&2;
      fail "($name) qemu-img exited $st"; }
  echo "($name) qemu-img convert took $(seconds_since "$t0") s"
  if [ -n "$mark" ]; then
    after=$(tail -n +"$((mark + 1))" "$tmp/ua.log" |
              grep -c '^[^ ]* GET [^ ]* 206 .*/half.qcow2 ' || :)
    echo "($name) the new nginx served $after GETs of the qcow2"
    [ "$after" -ge 1 ] || [ -n "$missed" ] ||
      missed="the new nginx was asked for nothing"
  fi
  interrupt "$name"
  identical "$name" "$tmp/$name.img" "$tmp/www/half.qcow2" qcow2
  cmp -s "$tmp/half.raw" "$tmp/$name.img" ||
    fail "($name) the output is not the image's bytes"
  rm -f "$tmp/$name.img"
}

# A machine so busy that this shell sees nginx's log late can miss the
# middle of the import: then the import is tried again, three times at
# most.
for try in 1 2 3; do
  restart_import "c$try"
  [ -n "$missed" ] || break
  echo "(c$try) the restart missed the import: $missed"
done
[ -z "$missed" ] ||
  fail "(c) three times the restart missed the import: $missed"
