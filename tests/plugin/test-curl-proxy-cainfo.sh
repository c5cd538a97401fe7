#!/usr/bin/env bash
# test-curl-proxy-cainfo.sh: an HTTPS proxy (proxy=https://...) whose
# certificate a private CA signed is trusted through proxy-cainfo=FILE
# or proxy-capath=DIR: with either, every request for a plain http URL
# goes to the origin through the proxy (nginx, TLS to the plugin,
# forwarding absolute-form requests), whose log shows each ranged GET,
# and a copy gives the served bytes.  With neither, or with only
# cainfo= (which is for the origin's certificate, not the proxy's), the
# plugin stops at start-up on the proxy's certificate and no request
# gets through.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy
requires openssl

# The origin: plain HTTP only, since no certificate exists yet.
serve_image $((3 * 1024 * 1024 + 17))

# A private CA ($tmp/ca.pem) and a certificate it signed for 127.0.0.1.
# It goes where make_cert would put its self-signed one ($tmp/cert.pem,
# key $tmp/key.pem), so _nginx_run gives it to the proxy's TLS listener.
# A CA, not make_cert's self-signed certificate, as in the setup these
# parameters are for: what the plugin trusts is the proxy's issuer.
# EC keys, because RSA key generation floods openssl.err with progress
# dots, which a failure would print.
ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
openssl req -x509 "${ec[@]}" -days 2 -subj "/CN=Test proxy CA" \
        -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -keyout "$tmp/ca-key.pem" -out "$tmp/ca.pem" 2>"$tmp/openssl.err" ||
  fail "openssl could not make the CA"
openssl req -new "${ec[@]}" -subj /CN=127.0.0.1 \
        -keyout "$tmp/key.pem" -out "$tmp/proxy.csr" 2>>"$tmp/openssl.err" ||
  fail "openssl could not make the proxy's key"
printf '%s\n' "subjectAltName=IP:127.0.0.1" "basicConstraints=CA:FALSE" \
       "extendedKeyUsage=serverAuth" >"$tmp/proxy-ext.cnf"
openssl x509 -req -in "$tmp/proxy.csr" -CA "$tmp/ca.pem" \
        -CAkey "$tmp/ca-key.pem" -CAcreateserial -days 2 \
        -extfile "$tmp/proxy-ext.cnf" -out "$tmp/cert.pem" \
        2>>"$tmp/openssl.err" ||
  fail "openssl could not sign the proxy's certificate"
chmod 644 "$tmp/key.pem" "$tmp/cert.pem" "$tmp/ca.pem"

# proxy-capath= wants a directory of CA certificates under their
# subject-hash names (HASH.0), as openssl rehash makes them.
mkdir "$tmp/capath"
cp "$tmp/ca.pem" "$tmp/capath/test-ca.pem"
openssl rehash "$tmp/capath" 2>>"$tmp/openssl.err" ||
  fail "openssl rehash failed"
compgen -G "$tmp/capath/*.0" >/dev/null || fail "openssl rehash made no HASH.0"

# The proxy: nginx's HTTP core takes absolute-form request targets
# ("GET http://host:port/path"), so a location that proxy_passes
# everything to the origin is a forward proxy for this one origin.  Its
# log, one line per request:
#   HTTPS PORT "REQUEST-LINE" range=RANGE STATUS BODY_BYTES
# HTTPS is "on" for the TLS listener.
_proxy_conf ()
{
  local dir=$tmp/proxy
  cat <<EOF
worker_processes 1;
pid $dir/nginx.pid;
error_log $tmp/proxy-error.log;
events { worker_connections 256; }
http {
  log_format proxied '\$https \$server_port "\$request" '
                     'range=\$http_range \$status \$body_bytes_sent';
  access_log $tmp/proxy.log proxied;
  client_body_temp_path $dir/tmp; proxy_temp_path $dir/tmp;
  fastcgi_temp_path $dir/tmp; uwsgi_temp_path $dir/tmp;
  scgi_temp_path $dir/tmp;
  server {
    listen 127.0.0.1:$p;
    $tls_listen
    $tls_conf
    location = /__ready { access_log off; return 204; }
    location / { proxy_pass http://127.0.0.1:$port; }
  }
}
EOF
}
mkdir -p "$tmp/proxy/tmp"
_nginx_run proxy "$tmp/proxy" "$tmp/proxy.log" _proxy_conf
proxy_tlsport=$_nginx_tlsport
proxy=https://127.0.0.1:$proxy_tlsport

# assert_proxied NAME: since the logs were emptied, every request the
# origin got came through the proxy's TLS listener, as an absolute-form
# request for the image; every GET asked for a range and was answered
# 206; and there were at least 4 GETs.
assert_proxied ()
{
  local name=$1 via at
  awk -v tp="$proxy_tlsport" -v url="$http_url" '
    $1 != "on" || $2 != tp { print "not on the TLS port: " $0; bad++ }
    $4 != url { print "not an absolute-form request: " $0; bad++ }
    $3 == "\"GET" {
      gets++
      if ($6 !~ /^range=bytes=[0-9]+-[0-9]+(,[0-9]+-[0-9]+)*$/) {
        print "GET without a range: " $0; bad++
      }
      if ($7 != 206) { print "not answered 206: " $0; bad++ }
    }
    END {
      if (gets < 4) { print "only " gets + 0 " GETs"; bad++ }
      exit bad > 0
    }' "$tmp/proxy.log" >"$tmp/proxied.out" || {
    cat "$tmp/proxied.out" "$tmp/proxy.log" >&2
    fail "($name) the proxy's log does not show the copy"
  }
  via=$(grep -c '^on [0-9]* "GET ' "$tmp/proxy.log" || :)
  at=$(grep -c '^[0-9]* GET ' "$tmp/access.log" || :)
  [ "$via" -eq "$at" ] || {
    cat "$tmp/proxy.log" "$tmp/access.log" >&2
    fail "($name) the origin got $at GETs, the proxy forwarded $via"
  }
}

# copy_through NAME PLUGIN-PARAMETERS...: a copy of the image through
# the proxy, byte for byte, and the logs show every request took it.
copy_through ()
{
  local name=$1
  shift
  : >"$tmp/proxy.log"
  : >"$tmp/access.log"
  rm -f "$tmp/out.img"
  start_nbdkit "$name" -r "$PLUGIN" "$http_url" "proxy=$proxy" "$@"
  timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
  stop_nbdkit "$name"
  assert_same_file "$image" "$tmp/out.img"
  assert_proxied "$name"
}

# refused NAME PLUGIN-PARAMETERS...: the plugin stops at start-up on
# the proxy's certificate, and nothing reached the proxy's HTTP layer
# or the origin.
refused ()
{
  local name=$1
  shift
  : >"$tmp/proxy.log"
  : >"$tmp/access.log"
  expect_nbdkit_fails "$name" -r "$PLUGIN" "$http_url" "proxy=$proxy" "$@"
  assert_grep_i "$tmp/$name.err" "SSL certificate problem" \
    "unable to get local issuer certificate"
  [ ! -s "$tmp/proxy.log" ] || {
    cat "$tmp/proxy.log" >&2
    fail "($name) a request got through the untrusted proxy"
  }
  [ ! -s "$tmp/access.log" ] || fail "($name) a request reached the origin"
}

copy_through cainfo "proxy-cainfo=$tmp/ca.pem"
copy_through capath "proxy-capath=$tmp/capath"

# Only the system's CAs: the private CA is unknown.
refused system
# cainfo= is for the origin (here it has no TLS): libcurl keeps the
# proxy's CA settings apart, so it must not make the proxy trusted.
refused origin-cainfo "cainfo=$tmp/ca.pem"
