#!/usr/bin/env bash
# test-curl-pin-head-validators.sh: the object's validators are taken
# from whichever start-up answer carries them.  Apache answers HEAD
# without ETag and Last-Modified (mod_headers), and GET with both; the
# size comes from HEAD.  Reads must still be pinned: after the file is
# replaced by another of the same size, a read fails with EIO and
# "changed since it was opened" (Apache answers If-Match with 412), and
# never returns the new version's bytes.  Apache's log shows that the
# reads carried If-Match.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh
requires curl
[ -f /usr/lib/apache2/modules/mod_headers.so ] ||
  skip "Apache mod_headers is not installed"

size=$((1024 * 1024))
start_apache 'LoadModule headers_module /usr/lib/apache2/modules/mod_headers.so
LogFormat "%m %U %{Range}i im=%{If-Match}i %>s" pin
CustomLog DIR/pin.log pin
Header unset ETag "expr=%{REQUEST_METHOD} == '"'HEAD'"'"
Header unset Last-Modified "expr=%{REQUEST_METHOD} == '"'HEAD'"'"'
make_random_file "$tmp/v1.img" "$size"
make_random_file "$tmp/v2.img" "$size"
cp "$tmp/v1.img" "$tmp/dav/disk.img"
chmod a+rw "$tmp/dav/disk.img"
# Apache makes the ETag of a file modified within the last second weak.
touch -d @1690000000 "$tmp/dav/disk.img"

# The server really answers so: HEAD bare, GET with validators.
curl -sfI "http://127.0.0.1:$dav_port/disk.img" >"$tmp/head.txt"
curl -sf -r 0-0 -D "$tmp/get.txt" -o /dev/null \
  "http://127.0.0.1:$dav_port/disk.img"
if grep -qi '^etag:' "$tmp/head.txt" || ! grep -qi '^etag:' "$tmp/get.txt"
then
  cat "$tmp/head.txt" "$tmp/get.txt" >&2
  fail "Apache's answers are not as this test needs them"
fi

start_nbdkit ro -r "$PLUGIN" "http://127.0.0.1:$dav_port/disk.img"
replaced_read "$tmp/v1.img" "$tmp/v2.img" "$tmp/dav/disk.img" 1700000000 ||
  fail "a read of the replaced object did not fail"
stop_nbdkit ro
assert_grep_i "$tmp/ro.err" "changed since it was opened"
# (Apache's log writes a quote as \".)
grep -qE '^GET /disk.img bytes=524288-589823 im=\\?"[0-9a-f-]+\\?" 412$' \
     "$tmp/pin.log" || {
  cat "$tmp/pin.log" >&2
  fail "the read after the replacement did not carry If-Match, or got no 412"
}
