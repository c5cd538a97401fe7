#!/usr/bin/env bash
# test-curl-https-untrusted.sh: by default (no cainfo=, sslverify true)
# a self-signed certificate is refused at start-up, with a message about
# the certificate, and no data request is made.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin

make_cert
serve_image 65536

expect_nbdkit_fails tls -r "$PLUGIN" "$url"
grep -qiE 'certificate|SSL' "$tmp/tls.err" || {
  cat "$tmp/tls.err" >&2
  fail "the error does not mention the certificate"
}
# The TLS handshake failed, so nginx logged no request at all.
if grep -q . "$tmp/access.log"; then
  cat "$tmp/access.log" >&2
  fail "a request went through over an untrusted connection"
fi
