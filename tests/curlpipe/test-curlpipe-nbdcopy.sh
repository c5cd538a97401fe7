#!/usr/bin/env bash
# test-curlpipe-nbdcopy.sh: the pipeline curlpipe is for, with the
# project's plugin as the source: nbdkit serves an image from nginx,
# `nbdcopy $uri - | curlpipe URL` streams it to a dav PUT location,
# and the uploaded file equals the source.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_curlpipe
requires nbdcopy

size=$((32 * 1024 * 1024 + 512))
start_nginx_put
make_random_file "$tmp/www/src.img" "$size"

start_nbdkit ro -r "$PLUGIN" "http://127.0.0.1:$port/src.img"
set +e
timeout "$client_timeout" nbdcopy "$uri" - |
  curlpipe -sf "http://127.0.0.1:$port/put/dst.img"
status=("${PIPESTATUS[@]}")
set -e
stop_nbdkit ro
[ "${status[0]}" -eq 0 ] || fail "nbdcopy exited with ${status[0]}"
[ "${status[1]}" -eq 0 ] || fail "curlpipe exited with ${status[1]}"
assert_same_file "$tmp/www/src.img" "$tmp/www/dst.img"
