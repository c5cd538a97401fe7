#!/usr/bin/env bash
# test-curl-request-options.sh: parameters that only change what a
# request carries or how it is checked, each shown by the server's
# answer to it:
#  (a) user-agent=: a location that answers 403 to any other agent is
#      served with it, and refused without it (start-up fails naming
#      the 403);
#  (b) followlocation=false: a 302 is not followed: start-up fails with
#      a message that names the redirect and the parameter, and nginx
#      sees no request for the redirect's target; by default it is;
#  (c) capath=: a directory holding the test's certificate (hashed with
#      openssl rehash) makes its HTTPS server trusted, byte-exact copy.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy
requires nbdinfo
requires openssl

size=$((1024 * 1024 + 17))
make_cert
serve_image "$size" '
    location = /ua/disk.img {
      if ($http_user_agent != "probe-agent/1.0") { return 403; }
      alias DIR/www/disk.img;
    }
    location = /moved { return 302 /disk.img; }'
base=http://127.0.0.1:$port

# (a)
nbdkit -r -U - "$PLUGIN" "$base/ua/disk.img" user-agent=probe-agent/1.0 \
       --run 'nbdcopy "$uri" "'"$tmp/ua.img"'"' ||
  fail "(a) a copy with user-agent= failed"
assert_same_file "$image" "$tmp/ua.img"
if nbdkit -r -U - "$PLUGIN" "$base/ua/disk.img" \
          --run 'nbdinfo --size "$uri"' 2>"$tmp/noua.err"; then
  fail "(a) started without user-agent= where the server wants it"
fi
grep -q 'HTTP 403' "$tmp/noua.err" ||
  { cat "$tmp/noua.err"; fail "(a) the failure does not name the 403"; }

# (b)
mark=$(wc -l <"$tmp/access.log")
if nbdkit -r -U - "$PLUGIN" "$base/moved" followlocation=false \
          --run 'nbdinfo --size "$uri"' 2>"$tmp/nofollow.err"; then
  fail "(b) started through a redirect with followlocation=false"
fi
grep -q 'HTTP 302 .*followlocation=false' "$tmp/nofollow.err" ||
  { cat "$tmp/nofollow.err"; fail "(b) the failure does not say why"; }
tail -n +"$((mark + 1))" "$tmp/access.log" | grep -q ' /disk.img ' &&
  fail "(b) the redirect's target was asked for"
got=$(nbdkit -r -U - "$PLUGIN" "$base/moved" --run 'nbdinfo --size "$uri"')
[ "$got" = "$size" ] || fail "(b) by default: size '$got', expected $size"

# (c)
mkdir "$tmp/ca"
cp "$tmp/cert.pem" "$tmp/ca/"
openssl rehash "$tmp/ca" 2>"$tmp/rehash.err" ||
  { cat "$tmp/rehash.err"; fail "(c) openssl rehash failed"; }
nbdkit -r -U - "$PLUGIN" "https://127.0.0.1:$tlsport/disk.img" \
       "capath=$tmp/ca" --run 'nbdcopy "$uri" "'"$tmp/ca.img"'"' ||
  fail "(c) a copy with capath= failed"
assert_same_file "$image" "$tmp/ca.img"
if nbdkit -r -U - "$PLUGIN" "https://127.0.0.1:$tlsport/disk.img" \
          "capath=$tmp/www" --run 'nbdinfo --size "$uri"' \
          2>"$tmp/noca.err"; then
  fail "(c) trusted with a capath= that lacks the certificate"
fi
echo "user-agent=, followlocation=false and capath= took effect"
