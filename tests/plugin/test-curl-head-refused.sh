#!/usr/bin/env bash
# test-curl-head-refused.sh: a URL that refuses HEAD (like a presigned
# URL signed for GET only) works, and costs nothing: the probe is one
# ranged GET (the first 8 KiB, which give the size, the validators and
# the proof that ranges work), no HEAD is sent, and the copy gives the
# bytes.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy

size=$((1024 * 1024 + 4097))
serve_image "$size"

start_nbdkit ro -r "$PLUGIN" "http://127.0.0.1:$port/nohead/disk.img"
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
stop_nbdkit ro
assert_same_file "$image" "$tmp/out.img"

# Log fields: CONNECTION METHOD RANGE STATUS BODY_BYTES URI.
if grep -qE '^[0-9]+ HEAD ' "$tmp/access.log"; then
  cat "$tmp/access.log" >&2
  fail "a HEAD was sent, though the probe's GET gave all"
fi
head -n1 "$tmp/access.log" | grep -qE '^[0-9]+ GET bytes=0-8191 206 8192 ' || {
  cat "$tmp/access.log" >&2
  fail "the first request was not the probe's GET of bytes=0-8191"
}
