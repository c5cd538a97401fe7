#!/usr/bin/env bash
# test-curl-https-cainfo.sh: over HTTPS (nginx, HTTP/2 offered) with
# cainfo= naming the test's own self-signed certificate, a copy gives the
# served bytes.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy

size=$((2 * 1024 * 1024 + 4321))
make_cert
export_image tls "$size" -r "cainfo=$tmp/cert.pem"
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
stop_nbdkit tls
assert_same_file "$image" "$tmp/out.img"
grep -qE '^[0-9]+ GET bytes=[0-9]+-[0-9]+ 206 ' "$tmp/access.log" ||
  fail "no ranged GET reached nginx"
