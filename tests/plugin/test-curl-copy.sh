#!/usr/bin/env bash
# test-curl-copy.sh: nbdcopy of a whole read-only export gives the served
# bytes, for a size that is not a multiple of 4096; every read asks for
# exact ranges that nginx answers 206, and none reaches past the last byte.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy

size=$((10 * 1024 * 1024 + 1234))
export_image ro "$size" -r
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
stop_nbdkit ro
assert_same_file "$image" "$tmp/out.img"

assert_nginx_ranges "$size" 0
