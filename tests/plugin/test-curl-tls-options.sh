#!/usr/bin/env bash
# test-curl-tls-options.sh: http-version=2.0 and none speak HTTP/2 to
# nginx over TLS, 1.0 HTTP/1.0, 1.1 HTTP/1.1 (nginx logs the protocol),
# each with a byte-exact copy; the default (auto) asks the probe's GET
# over HTTP/2 and, the server being on loopback, every read over
# HTTP/1.1 (see "HTTP version" in the manual; all of them over HTTP/2
# if the probe measured the server 2 ms away or more).  TLS settings the server refuses stop nbdkit at start-up
# with libcurl's reason: ssl-version=tlsv1.3 against a TLS 1.2 server,
# and a TLS 1.2 cipher list the server does not offer.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy

make_cert
serve_image $((2 * 1024 * 1024 + 9)) 'access_log DIR/headers.log hdrs;
    ssl_protocols TLSv1.2;
    ssl_ciphers ECDHE-RSA-AES256-GCM-SHA384;'

# none: libcurl's choice, HTTP/2 by ALPN where nginx offers it.
for v in 2.0 none 1.0 1.1 default; do
  args=("cainfo=$tmp/cert.pem")
  [ "$v" = default ] || args+=("http-version=$v")
  rm -f "$tmp/out.img"
  : >"$tmp/headers.log"
  start_nbdkit "h${v//./_}" -r -v "$PLUGIN" "$url" "${args[@]}"
  timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
  stop_nbdkit "h${v//./_}"
  assert_same_file "$image" "$tmp/out.img"
  case $v in
    2.0|none) want=HTTP/2.0 ;;
    1.0) want=HTTP/1.0 ;;
    *) want=HTTP/1.1 ;;
  esac
  # The default's probe: its first GET, and only that one, over HTTP/2;
  # unless the probe's answer took 2 ms or more (a loaded machine, a
  # sanitizer build), and the plugin says it kept HTTP/2 for everything.
  if [ "$v" = default ] &&
     grep -q 'HTTP/2: requests as streams' "$tmp/hdefault.err"; then
    want=HTTP/2.0
  elif [ "$v" = default ]; then
    head -1 "$tmp/headers.log" | grep -q '^GET HTTP/2.0 ' &&
      [ "$(grep -c '^GET HTTP/2.0 ' "$tmp/headers.log")" -eq 1 ] || {
      cat "$tmp/headers.log" >&2
      fail "http-version=default: expected the probe's GET (only) over HTTP/2"
    }
    sed -i 1d "$tmp/headers.log"
  fi
  n=$(grep -c "^GET $want " "$tmp/headers.log" || :)
  other=$(grep '^GET ' "$tmp/headers.log" | grep -vc "^GET $want " || :)
  [ "$n" -ge 2 ] && [ "$other" -eq 0 ] || {
    cat "$tmp/headers.log" >&2
    fail "http-version=$v: expected every GET over $want"
  }
done

expect_nbdkit_fails tls13 -r "$PLUGIN" "$url" "cainfo=$tmp/cert.pem" \
  ssl-version=tlsv1.3
assert_grep_i "$tmp/tls13.err" "$url"
grep -qiE 'ssl|tls|protocol' "$tmp/tls13.err" ||
  fail "ssl-version=tlsv1.3: no TLS reason in: $(cat "$tmp/tls13.err")"

expect_nbdkit_fails cipher -r "$PLUGIN" "$url" "cainfo=$tmp/cert.pem" \
  ssl-cipher-list=ECDHE-RSA-AES128-GCM-SHA256
grep -qiE 'ssl|tls|handshake|cipher' "$tmp/cipher.err" ||
  fail "ssl-cipher-list: no TLS reason in: $(cat "$tmp/cipher.err")"

# And a matching cipher works.
start_nbdkit cipherok -r "$PLUGIN" "$url" "cainfo=$tmp/cert.pem" \
  ssl-cipher-list=ECDHE-RSA-AES256-GCM-SHA384 ssl-version=tlsv1.2
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out2.img"
stop_nbdkit cipherok
assert_same_file "$image" "$tmp/out2.img"
