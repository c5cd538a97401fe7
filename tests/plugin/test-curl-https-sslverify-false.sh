#!/usr/bin/env bash
# test-curl-https-sslverify-false.sh: sslverify=false accepts a
# certificate nobody trusts, and the copy gives the served bytes.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy

size=$((2 * 1024 * 1024 + 99))
make_cert
export_image tls "$size" -r sslverify=false
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
stop_nbdkit tls
assert_same_file "$image" "$tmp/out.img"
