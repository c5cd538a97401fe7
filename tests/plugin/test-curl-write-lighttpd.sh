#!/usr/bin/env bash
# test-curl-write-lighttpd.sh: the same partial writes as
# test-curl-write-dav.sh, to lighttpd mod_webdav with partial PUT enabled
# (which copies and replaces the file for each write): exactly the
# written bytes change, and each write is one PUT with its exact range.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

size=$((128 * 1024 + 1001))
start_lighttpd
make_random_file "$tmp/lwww/disk.img" "$size"
chmod a+rw "$tmp/lwww/disk.img"
cp "$tmp/lwww/disk.img" "$tmp/expected.img"

start_nbdkit rw "$PLUGIN" "http://127.0.0.1:$lighttpd_port/disk.img"
writes="0:1 4095:2 70000:5000 $((size - 1)):1"
pattern_writes "$uri" "$tmp/expected.img" "$writes"
stop_nbdkit rw
# lighttpd buffers its access log until it stops.
stop_pid "$lighttpd_pid"

assert_same_file "$tmp/expected.img" "$tmp/lwww/disk.img"
assert_put_log "$tmp/lighttpd-access.log" /disk.img "$writes"
