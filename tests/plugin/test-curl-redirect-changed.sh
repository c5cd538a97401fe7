#!/usr/bin/env bash
# test-curl-redirect-changed.sh: when the remembered target of url='s
# redirect goes away (404) and url= now leads to another object, the
# new object is held to the pin made at start-up: the read fails with
# EIO and "changed since it was opened", and no byte of the other
# object reaches the client.  The target that went away answered one
# 404, and url= was asked once more.  Four other objects:
#  - the same size, other bytes and ETag, from a server that checks
#    If-Match (nginx answers 412);
#  - another size, from the same server (412 again);
#  - the same size, other bytes and ETag, from a server that ignores
#    If-Match (a proxy that drops it): the plugin's own comparison of
#    the ETag catches it;
#  - another size, from a server that sends no ETag or Last-Modified at
#    all (nothing to pin but the size): the message names the size.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

size=$((1024 * 1024 + 4321))

# The objects' origin.  /a.img answers 404 once DIR/a-gone exists.
# /nopre/ serves the same files through a proxy that drops the
# preconditions, as some caches and object stores do (nginx passes a
# proxied answer on without judging If-Match itself).  /bare/ serves
# them without validators.
start_nginx_named obj 'location = /a.img { if (-f DIR/a-gone) { return 404; } }
    location /nopre/ {
      proxy_pass http://127.0.0.1:PORT/;
      proxy_set_header If-Match "";
      proxy_set_header If-Unmodified-Since "";
      proxy_set_header If-None-Match "";
      proxy_set_header If-Modified-Since "";
      proxy_set_header If-Range "";
    }
    location = /bare/a.img {
      if (-f DIR/a-gone) { return 404; }
      alias DIR/www/a.img;
      etag off;
      add_header Last-Modified "";
    }
    location /bare/ {
      alias DIR/www/;
      etag off;
      add_header Last-Modified "";
    }'
www=$tmp/nginx-obj/www
make_random_file "$www/a.img" "$size"
make_random_file "$www/b.img" "$size"
make_random_file "$www/c.img" $((size + 4096))
# nginx's ETag is the modification time and the size: B must differ in
# time from A, or it would be the same object to any client.
touch -d '2001-02-03 04:05:06' "$www/a.img"
touch -d '2002-03-04 05:06:07' "$www/b.img" "$www/c.img"

# The front: /disk.img to /a.img, or to the object that a flag
# DIR/to-* names; /bare.img to /bare/a.img, or to /bare/c.img.
start_nginx_named front "location = /disk.img {
      if (-f DIR/to-b) { return 302 http://127.0.0.1:$obj_port/b.img; }
      if (-f DIR/to-c) { return 302 http://127.0.0.1:$obj_port/c.img; }
      if (-f DIR/to-nopre-b) {
        return 302 http://127.0.0.1:$obj_port/nopre/b.img;
      }
      return 302 http://127.0.0.1:$obj_port/a.img;
    }
    location = /bare.img {
      if (-f DIR/to-c) { return 302 http://127.0.0.1:$obj_port/bare/c.img; }
      return 302 http://127.0.0.1:$obj_port/bare/a.img;
    }"

# changed NAME PATH FLAG WORD: from the front's PATH, five reads of A,
# then A goes away and the front redirects as FLAG says; the next read
# must fail with EIO, and nbdkit's stderr say "changed since it was
# opened" and WORD.  The other object is the one NAME ends with.
changed ()
{
  local name=$1 path=$2 flag=$3 word=$4 gone front
  rm -f "$tmp/nginx-obj/a-gone" "$tmp/nginx-front"/to-*
  : >"$tmp/nginx-obj.log"
  : >"$tmp/nginx-front.log"
  start_nbdkit "$name" -r -v "$PLUGIN" "http://127.0.0.1:$front_port/$path"
  A=$www/a.img B=$www/${name#*_}.img GONE=$tmp/nginx-obj/a-gone \
    FLAG=$tmp/nginx-front/$flag nbdsh -u "$uri" -c '
import errno, os
a = open(os.environ["A"], "rb").read()
b = open(os.environ["B"], "rb").read()
for i in range(1, 6):
    off = i * 65536
    assert h.pread(4096, off) == a[off:off + 4096], "read %d differs" % i
open(os.environ["FLAG"], "w").close()
open(os.environ["GONE"], "w").close()
off = 7 * 65536
try:
    got = h.pread(4096, off)
except nbd.Error as e:
    assert e.errnum == errno.EIO, "not EIO: %s" % e.string
    print("failed:", e.string)
else:
    if got == b[off:off + 4096]:
        raise SystemExit("the other object'"'"'s bytes were returned")
    raise SystemExit("the read after the change succeeded")
h.shutdown()
' >"$tmp/$name.out" 2>&1 || {
    cat "$tmp/$name.out" >&2
    fail "$name: the read after the change did not fail with EIO"
  }
  stop_nbdkit "$name"

  grep -F "changed since it was opened" "$tmp/$name.err" |
    grep -qF -- "$word" || {
    grep -F 'error' "$tmp/$name.err" >&2
    fail "$name: no 'changed since it was opened' ... '$word' in stderr"
  }
  gone=$(grep -cE " GET (/bare)?/a.img 404 " "$tmp/nginx-obj.log" || :)
  [ "$gone" -eq 1 ] || {
    cat "$tmp/nginx-obj.log" >&2
    fail "$name: A answered $gone 404s, not one: the remembered target" \
         "was not asked"
  }
  # Twice: the probe, and once after the 404 (and a HEAD at start-up
  # when the probe's answer has no validator).
  front=$(grep -c " GET " "$tmp/nginx-front.log" || :)
  [ "$front" -eq 2 ] || {
    cat "$tmp/nginx-front.log" >&2
    fail "$name: url= was asked $front GETs, not two"
  }
  grep -qE "redirect target of .* failed \(.*404.*\): asking" \
       "$tmp/$name.err" || fail "$name: no debug line about the 404"
  echo "$name: $(grep -F 'changed since' "$tmp/$name.err" | head -n 1 |
                 sed 's/.*error: //')"
}

changed same_b disk.img to-b "HTTP 412"
changed size_c disk.img to-c "HTTP 412"
changed nopre_b disk.img to-nopre-b "its ETag was"
changed bare_c bare.img to-c "size was $size, now $((size + 4096))"
