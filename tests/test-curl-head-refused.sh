#!/usr/bin/env bash
# test-curl-head-refused.sh: a URL that refuses HEAD (like a presigned
# URL signed for GET only) still works: the plugin falls back to
# "GET Range: bytes=0-0" for the size, and the copy gives the bytes.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")}/functions.sh"
requires_plugin
requires nbdcopy

size=$((1024 * 1024 + 4097))
serve_image "$size"

start_nbdkit ro -r "$PLUGIN" "http://127.0.0.1:$port/nohead/disk.img"
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
stop_nbdkit ro
assert_same_file "$image" "$tmp/out.img"

# Log fields: CONNECTION METHOD RANGE STATUS BODY_BYTES URI.
head_line=$(grep -nE '^[0-9]+ HEAD - 403 ' "$tmp/access.log" |
            head -n1 | cut -d: -f1)
get_line=$(grep -nE '^[0-9]+ GET bytes=0-0 206 1 ' "$tmp/access.log" |
           head -n1 | cut -d: -f1)
[ -n "$head_line" ] || fail "nginx saw no HEAD answered 403"
[ -n "$get_line" ] || fail "nginx saw no GET bytes=0-0 answered 206"
[ "$head_line" -lt "$get_line" ] ||
  fail "the bytes=0-0 GET did not follow the refused HEAD"
