#!/usr/bin/env bash
# test-curl-tls13-ciphers.sh: tls13-ciphers= chooses the TLS 1.3 suites:
# one nginx (OpenSSL's defaults) offers works, one it does not enable
# (TLS_AES_128_CCM_SHA256) stops nbdkit at start-up with a TLS reason.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy

make_cert
serve_image $((1024 * 1024 + 1)) 'ssl_protocols TLSv1.3;'

start_nbdkit ok -r "$PLUGIN" "$url" "cainfo=$tmp/cert.pem" \
  tls13-ciphers=TLS_AES_256_GCM_SHA384
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
stop_nbdkit ok
assert_same_file "$image" "$tmp/out.img"

expect_nbdkit_fails ccm -r "$PLUGIN" "$url" "cainfo=$tmp/cert.pem" \
  tls13-ciphers=TLS_AES_128_CCM_SHA256
grep -qiE 'ssl|tls|handshake' "$tmp/ccm.err" ||
  fail "tls13-ciphers: no TLS reason in: $(cat "$tmp/ccm.err")"
