#!/usr/bin/env bash
# test-curl-write-dav.sh: writes through the plugin to Apache mod_dav
# (which takes partial PUT) change exactly the written bytes of the file
# on disk, keep its size, and reach Apache as one PUT each with the exact
# "Content-Range: bytes A-B/*".  The writes include the first and the
# very last byte and ones that cross a 4096-byte boundary.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

size=$((256 * 1024 + 4321))
start_apache
make_random_file "$tmp/dav/disk.img" "$size"
chmod a+rw "$tmp/dav/disk.img"
cp "$tmp/dav/disk.img" "$tmp/expected.img"

start_nbdkit rw "$PLUGIN" "http://127.0.0.1:$dav_port/disk.img"
writes="0:512 4090:12 8191:2 65536:7000 $((size - 4096)):100 $((size - 1)):1"
pattern_writes "$uri" "$tmp/expected.img" "$writes"
stop_nbdkit rw

assert_same_file "$tmp/expected.img" "$tmp/dav/disk.img"
assert_put_log "$tmp/dav-access.log" /disk.img "$writes"
