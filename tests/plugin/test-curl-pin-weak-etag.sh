#!/usr/bin/env bash
# test-curl-pin-weak-etag.sh: an object whose ETag is weak (W/"...") is
# still pinned by it.  Apache (mod_headers making its ETag weak) serves
# an image; after a first read the file is replaced by another of the
# same size, modified within the same second, so Last-Modified (and
# If-Unmodified-Since, which has a resolution of one second) cannot tell
# the versions apart while the ETag changes.  The next read must fail
# with EIO and "changed since it was opened", never return the new
# version's bytes: (a) with Last-Modified beside the weak ETag, (b) with
# the weak ETag alone.  No If-Match with a weak ETag reaches Apache.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh
[ -f /usr/lib/apache2/modules/mod_headers.so ] ||
  skip "Apache mod_headers is not installed"

size=$((1024 * 1024))
headers='LoadModule headers_module /usr/lib/apache2/modules/mod_headers.so
LogFormat "%m %U %{Range}i im=%{If-Match}i ius=%{If-Unmodified-Since}i %>s" pin
CustomLog DIR/pin.log pin
Header edit ETag "^\"(.*)\"$" "W/\"$1\""'

# replaced NAME: serve v1, read it, replace it with v2 (same size, same
# second of mtime), read again: that read must fail.
replaced ()
{
  local name=$1
  make_random_file "$tmp/v1.img" "$size"
  make_random_file "$tmp/v2.img" "$size"
  cp "$tmp/v1.img" "$tmp/dav/disk.img"
  chmod a+rw "$tmp/dav/disk.img"
  touch -d @1700000000.1 "$tmp/dav/disk.img"
  start_nbdkit "$name" -r "$PLUGIN" "http://127.0.0.1:$dav_port/disk.img"
  replaced_read "$tmp/v1.img" "$tmp/v2.img" "$tmp/dav/disk.img" \
                1700000000.7 ||
    fail "($name) a read of the replaced object did not fail"
  stop_nbdkit "$name"
  assert_grep_i "$tmp/$name.err" "changed since it was opened" "ETag was W/"
}

# (a) A weak ETag and Last-Modified.
start_apache "$headers"
replaced lm
# Apache was asked with If-Unmodified-Since, never If-Match W/...
grep -q 'ius=[A-Z]' "$tmp/pin.log" ||
  { cat "$tmp/pin.log" >&2; fail "(lm) no If-Unmodified-Since was sent"; }
if grep -q 'im=W/' "$tmp/pin.log"; then
  fail "(lm) a weak ETag was sent in If-Match"
fi
stop_pid "$apache_pid"

# (b) The weak ETag alone.
start_apache "$headers
Header unset Last-Modified"
replaced weak
if grep -q 'im=W/' "$tmp/pin.log"; then
  fail "(weak) a weak ETag was sent in If-Match"
fi
