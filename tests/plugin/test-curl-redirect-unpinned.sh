#!/usr/bin/env bash
# test-curl-redirect-unpinned.sh: while nothing pins the object (no
# validator the server checks: none at all, or only a weak ETag), a
# renewed redirect chain that lands on another target fails the read
# with EIO and a message naming both targets and why, rather than give
# bytes of whatever the new target holds (issue 37, point 6).  The
# objects are two files of the same size served by nginx without
# validators; the front redirects to A, then (after A answers 404) to B.
#  (a) No validators: ten reads of A, byte-exact; then A goes and the
#      front moves to B: the next read fails (EIO), the message names
#      /bare/a.img and /bare/b.img and says nothing pins the object; no
#      read returns B's bytes.
#  (b) Only a weak ETag, the same on A and B: the same.
#  (ver) The same with presigned links (Expires=, Signature=) to one
#      path whose query names the version (S3's versionId=): the front
#      moves from versionId=v1 to versionId=v2: the next read fails, the
#      message says that the query differs.  The parameters that only
#      sign or time a URL are left out of the comparison, not the whole
#      query (which served v2's bytes).
#  (c) A renewal that lands on the same target goes on: a presigned
#      link (Expires=, Signature=, checked by nginx's secure_link) to an
#      object without validators, renewed before it expires every 5 s:
#      reads over 8 s all succeed, with 2 or more links.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh
requires_secure_link

size=$((1024 * 1024 + 999))
secret=up-$RANDOM$RANDOM
# /bare/X and /weak/X serve DIR/www/X without validators (and with a
# weak ETag); A answers 404 once DIR/a-gone exists.  /ver/obj serves
# A or B by its versionId= (v1, v2).  /signed/disk.img is A behind
# nginx's secure_link check.
start_nginx_named obj "location = /bare/a.img {
      if (-f DIR/a-gone) { return 404; }
      alias DIR/www/a.img; etag off; add_header Last-Modified \"\";
    }
    location /bare/ {
      alias DIR/www/; etag off; add_header Last-Modified \"\";
    }
    location = /weak/a.img {
      if (-f DIR/a-gone) { return 404; }
      alias DIR/www/a.img; etag off; add_header Last-Modified \"\";
      add_header ETag 'W/\"v1\"';
    }
    location /weak/ {
      alias DIR/www/; etag off; add_header Last-Modified \"\";
      add_header ETag 'W/\"v1\"';
    }
    location = /ver/obj {
      if (\$arg_versionId = v1) { rewrite ^ /bare/a.img last; }
      if (\$arg_versionId = v2) { rewrite ^ /bare/b.img last; }
      return 404;
    }
    location = /signed/disk.img {
      secure_link \$arg_Signature,\$arg_Expires;
      secure_link_md5 \"\$secure_link_expires\$uri $secret\";
      if (\$secure_link = \"\") { return 403; }
      if (\$secure_link = \"0\") { return 410; }
      alias DIR/www/a.img; etag off; add_header Last-Modified \"\";
    }"
www=$tmp/nginx-obj/www
make_random_file "$www/a.img" "$size"
make_random_file "$www/b.img" "$size"
# Presigned links that never expire (2100) to a version of /ver/obj.
ver=http://127.0.0.1:$obj_port/ver/obj
start_nginx_named front "location ~ ^/(bare|weak)\\.img\$ {
      if (-f DIR/to-b) { return 302 http://127.0.0.1:$obj_port/\$1/b.img; }
      return 302 http://127.0.0.1:$obj_port/\$1/a.img;
    }
    location = /ver.img {
      if (-f DIR/to-b) {
        return 302 '$ver?versionId=v2&Expires=4102444800&Signature=s2';
      }
      return 302 '$ver?versionId=v1&Expires=4102444800&Signature=s1';
    }"

# The validators the objects are served with, as the plugin sees them.
curl -sI "http://127.0.0.1:$obj_port/bare/a.img" >"$tmp/bare.head"
if grep -qiE "^(etag|last-modified):" "$tmp/bare.head"; then
  cat "$tmp/bare.head" >&2
  fail "nginx serves /bare/ with validators: the test tests nothing"
fi

for kind in bare weak ver; do
  name=$kind
  rm -f "$tmp/nginx-obj/a-gone" "$tmp/nginx-front/to-b"
  start_nbdkit "$name" -r -v "$PLUGIN" "http://127.0.0.1:$front_port/$kind.img"
  A=$www/a.img B=$www/b.img GONE=$tmp/nginx-obj/a-gone \
    MOVED=$tmp/nginx-front/to-b nbdsh -u "$uri" -c '
import errno, os
a = open(os.environ["A"], "rb").read()
b = open(os.environ["B"], "rb").read()
for i in range(1, 11):
    off = i * 65536 + 17
    assert h.pread(5000, off) == a[off:off + 5000], "read %d differs" % i
open(os.environ["GONE"], "w").close()
open(os.environ["MOVED"], "w").close()
for i in range(11, 14):
    off = i * 65536 + 17
    try:
        got = h.pread(5000, off)
    except nbd.Error as e:
        assert e.errnum == errno.EIO, e.string
    else:
        raise SystemExit("read %d after the move succeeded, with %s bytes" %
                         (i, "B'"'"'s" if got == b[off:off + 5000] else
                          "A'"'"'s" if got == a[off:off + 5000] else "other"))
h.shutdown()
' >"$tmp/$name.out" 2>&1 || {
    cat "$tmp/$name.out" >&2
    fail "($name) a read after the move did not fail with EIO"
  }
  stop_nbdkit "$name"
  at=http://127.0.0.1:$obj_port/$kind
  if [ "$kind" = ver ]; then
    pattern="ends at $ver[?][.]*, not at $ver[?][.]*, which the reads came"
    pattern+=" from [(]the same path, but query parameters .* differ[)]:"
    pattern+=" nothing pins"
  else
    pattern="ends at $at/b.img, not at $at/a.img.*nothing pins"
  fi
  grep -E "error: .*$pattern" "$tmp/$name.err" >"$tmp/$name.msg" || {
    cat "$tmp/$name.err" >&2
    fail "($name) no error naming both targets and why"
  }
  echo "($name) $(head -1 "$tmp/$name.msg" | sed 's/.*error: //')"
done

# (c) The signing redirector: links to /signed/disk.img for 5 s.
start_redirector rd
echo "http://127.0.0.1:$obj_port/signed/disk.img" >"$tmp/rd/target"
echo "$secret 5 Signature" >"$tmp/rd/sign"
: >"$tmp/nginx-obj.log"
image=$www/a.img
start_nbdkit signed -r "$PLUGIN" "http://127.0.0.1:$rd_port/disk.img"
slow_reads 16 >"$tmp/signed.out" 2>&1 || {
  cat "$tmp/signed.out" >&2
  fail "(c) reads of a presigned link renewed failed"
}
stop_nbdkit signed
links=$(sed -n 's/.*Expires=\([0-9]*\)&.*/\1/p' "$tmp/nginx-obj.log" |
          sort -u | wc -l)
bad=$(grep -cE " (403|410) " "$tmp/nginx-obj.log" || :)
[ "$links" -ge 2 ] && [ "$bad" -eq 0 ] || {
  cat "$tmp/nginx-obj.log" >&2
  fail "(c) $links links used, $bad refused: expected 2 or more, none"
}
echo "(c) 16 reads over 8 s through $links presigned links"
