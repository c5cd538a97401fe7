#!/usr/bin/env bash
# test-curl-redirect-target-moves.sh: the remembered redirect target
# itself answers with a redirect (two nginx origins: a front that
# redirects to an image origin).
#  (a) The target moves on within its origin (302 to a copy): reads
#      follow it, byte-exact, and go straight to the new place after;
#      the front is not asked again.
#  (b) The target redirects back to url=, which redirects to the target:
#      a loop; reads fail with "more than 20 redirects", and nbdkit keeps
#      serving (it once crashed here).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

size=$((1024 * 1024 + 123))
start_nginx_named img "location = /disk.img {
      if (-f DIR/moved) { return 302 /moved.img; }
      if (-f DIR/loop) { return 302 \$arg_back; }
    }"
make_random_file "$tmp/nginx-img/www/disk.img" "$size"
cp -p "$tmp/nginx-img/www/disk.img" "$tmp/nginx-img/www/moved.img"
image=$tmp/nginx-img/www/disk.img
start_nginx_named front "location = /disk.img {
      return 302 http://127.0.0.1:${img_port}/disk.img?back=http://127.0.0.1:PORT/disk.img;
    }"

# reads FIRST N: N reads of 4 KiB from offset FIRST on, compared.
reads ()
{
  FILE=$image FIRST=$1 N=$2 nbdsh -u "$uri" -c '
import os
data = open(os.environ["FILE"], "rb").read()
first = int(os.environ["FIRST"])
for i in range(int(os.environ["N"])):
    off = first + i * 16384
    assert h.pread(4096, off) == data[off:off + 4096], "read at %d differs" % off
h.shutdown()
'
}

# (a)
start_nbdkit a -r "$PLUGIN" "http://127.0.0.1:$front_port/disk.img" \
  connections=1
reads 65536 4 || fail "(a) reads before the move failed"
touch "$tmp/nginx-img/moved"
reads 262144 8 || fail "(a) reads after the target moved failed"
stop_nbdkit a
front=$(grep -c ' GET ' "$tmp/nginx-front.log" || :)
moved=$(grep -c ' /disk.img?back=[^ ]* 302 ' "$tmp/nginx-img.log" || :)
new=$(grep -c ' /moved.img 206 ' "$tmp/nginx-img.log" || :)
[ "$front" -eq 1 ] || fail "(a) the front was asked $front times, not once"
[ "$moved" -eq 1 ] ||
  { cat "$tmp/nginx-img.log" >&2; fail "(a) $moved redirects from the target, not 1"; }
[ "$new" -eq 8 ] || fail "(a) $new reads at the new place, not 8"
rm -f "$tmp/nginx-img/moved"

# (b)
start_nbdkit b -r "$PLUGIN" "http://127.0.0.1:$front_port/disk.img" \
  connections=1
reads 65536 2 || fail "(b) reads before the loop failed"
touch "$tmp/nginx-img/loop"
read_fails 524288 4096 || fail "(b) the read through the loop did not fail"
stop_nbdkit b
assert_grep_i "$tmp/b.err" "more than 20 redirects"
