#!/usr/bin/env bash
# test-curl-url-script-mirror.sh: with url-script, the user's secrets
# belong to the origin of the URL the script prints, and no mirror has
# them (issue 37, point 17).  url= is at server A (the script finds it in
# $url), the script prints a URL at server B, and mirror= is at A, the
# same object (a copy with the same modification time, so the same
# ETag, taken with mirror-same-etag=true).  With user=, password= and
# header=: B sees them; A, the mirror, is asked (its probe, then reads)
# and sees none of them.  Without the fix A had them: a mirror was
# trusted at url='s origin.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy

start_nginx_named a
start_nginx_named b
image=$tmp/nginx-b/www/disk.img
make_random_file "$image" $((4 * 1024 * 1024 + 5))
cp -p "$image" "$tmp/nginx-a/www/disk.img"

cat >"$tmp/print.sh" <<EOF
#!/bin/sh
echo "http://127.0.0.1:$b_port/disk.img"
EOF
chmod +x "$tmp/print.sh"

start_nbdkit m -r "$PLUGIN" "http://127.0.0.1:$a_port/disk.img" \
             "url-script=$tmp/print.sh" \
             "mirror=http://127.0.0.1:$a_port/disk.img" mirror-same-etag=true \
             user=alice password=s3cret 'header=X-Token: t0ken'
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
stop_nbdkit m
assert_same_file "$image" "$tmp/out.img"

a_asked=$(wc -l <"$tmp/nginx-a.log")
[ "$a_asked" -ge 1 ] ||
  fail "the mirror was never asked: the test tests nothing"
if grep -E 'auth="Basic|token="t0ken' "$tmp/nginx-a.log" >"$tmp/leaked"; then
  head -3 "$tmp/leaked" >&2
  fail "the mirror at url='s origin received the user's secrets" \
       "($(wc -l <"$tmp/leaked") of its $a_asked requests)"
fi
grep -q 'auth="Basic .* token="t0ken"' "$tmp/nginx-b.log" ||
  fail "the script's URL's origin did not receive the user's secrets"
echo "the mirror (url='s origin) asked $a_asked times without secrets;" \
     "the script's URL's origin $(wc -l <"$tmp/nginx-b.log") times with them"
