#!/usr/bin/env bash
# test-curl-protocols-file.sh: protocols=file alone works: a file:// URL
# is served and a copy gives the file's bytes (redirects, which never
# go to file, then have no protocol left, and that must not stop
# nbdkit).  An http:// URL with protocols=file is refused at start-up
# with a message naming protocols, before any request is made.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy

make_random_file "$tmp/disk.img" $((1024 * 1024 + 333))
start_nbdkit file -r "$PLUGIN" "file://$tmp/disk.img" protocols=file
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
stop_nbdkit file
assert_same_file "$tmp/disk.img" "$tmp/out.img"

start_nginx
cp "$tmp/disk.img" "$tmp/www/disk.img"
expect_nbdkit_fails http -r "$PLUGIN" "http://127.0.0.1:$port/disk.img" \
  protocols=file
assert_grep_i "$tmp/http.err" protocols http
if grep -q disk.img "$tmp/access.log"; then
  cat "$tmp/access.log" >&2
  fail "a request reached nginx"
fi
