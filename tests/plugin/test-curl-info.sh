#!/usr/bin/env bash
# test-curl-info.sh: nbdinfo sees the object's size, and multi-conn is
# offered only to a read-only (-r) export.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdinfo

size=$((3 * 1024 * 1024 + 777))
serve_image "$size"

# nbdinfo prints lines like "<TAB>can_multi_conn: true".
info_has ()
{
  grep -qE "^[[:space:]]*$2\$" "$1" || {
    cat "$1" >&2
    fail "nbdinfo output $(basename "$1") lacks '$2'"
  }
}

start_nbdkit ro -r "$PLUGIN" "$url"
timeout "$client_timeout" nbdinfo "$uri" >"$tmp/info-ro.out"
info_has "$tmp/info-ro.out" "can_multi_conn: true"
info_has "$tmp/info-ro.out" "is_read_only: true"
info_has "$tmp/info-ro.out" "export-size: $size( \(.*\))?"
# Any byte range can be read; 1 MiB requests are preferred.
info_has "$tmp/info-ro.out" "block_size_minimum: 1"
info_has "$tmp/info-ro.out" "block_size_preferred: 1048576"
[ "$(timeout "$client_timeout" nbdinfo --size "$uri")" -eq "$size" ] ||
  fail "nbdinfo --size is not $size"
stop_nbdkit ro

start_nbdkit rw "$PLUGIN" "$url"
timeout "$client_timeout" nbdinfo "$uri" >"$tmp/info-rw.out"
info_has "$tmp/info-rw.out" "can_multi_conn: false"
info_has "$tmp/info-rw.out" "export-size: $size( \(.*\))?"
stop_nbdkit rw
