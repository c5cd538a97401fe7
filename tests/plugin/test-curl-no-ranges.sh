#!/usr/bin/env bash
# test-curl-no-ranges.sh: a server that ignores Range (nginx with
# "max_ranges 0" answers 200 with the whole file) is refused at start-up
# with a message about ranges, and the plugin does not download the whole
# object to find out.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin

# Large enough that the socket buffers on loopback cannot take it all, so
# a client that aborts leaves nginx with a partial body.  Sparse: no disk.
size=$((64 * 1024 * 1024))
start_nginx 'location /norange/ { max_ranges 0; alias DIR/www/; }'
truncate -s "$size" "$tmp/www/disk.img"
chmod 644 "$tmp/www/disk.img"

expect_nbdkit_fails ro -r "$PLUGIN" "http://127.0.0.1:$port/norange/disk.img"
assert_grep_i "$tmp/ro.err" range

# Log fields: CONNECTION METHOD RANGE STATUS BODY_BYTES URI.
if awk -v size="$size" '$2 == "GET" && $5 >= size' "$tmp/access.log" |
     grep -q .; then
  cat "$tmp/access.log" >&2
  fail "the plugin downloaded the whole object"
fi
