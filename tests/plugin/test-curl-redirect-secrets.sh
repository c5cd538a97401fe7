#!/usr/bin/env bash
# test-curl-redirect-secrets.sh: secrets stay with the origin (scheme,
# host, port) of url=.  Server A redirects to server B, which serves the
# file to anyone: the copy works, A receives cookie=, every header=,
# header-script's headers, cookie-script's cookie and user=/password=,
# and B none of them.  With location-trusted=true B receives them all.
# A redirect to another path of A keeps sending them.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy

start_nginx_named b
make_random_file "$tmp/nginx-b/www/disk.img" $((1024 * 1024 + 77))
start_nginx_named a "location = /disk.img {
      return 302 http://127.0.0.1:$b_port/disk.img;
    }
    location = /a/disk.img { return 302 http://127.0.0.1:PORT/here/disk.img; }
    location /here/ { alias DIR/www/; }"
cp "$tmp/nginx-b/www/disk.img" "$tmp/nginx-a/www/disk.img"

printf 'session=COOKIESECRET123' >"$tmp/cookie"
printf 'PASSWORDSECRET' >"$tmp/password"
b64=$(printf 'alice:PASSWORDSECRET' | base64)

# Two sets of secrets, since cookie= and cookie-script= exclude each
# other.  Each is named by the strings that must (or must not) arrive.
set1=("cookie=+$tmp/cookie" "header=X-Token: HEADERSECRET456"
      'header-script=echo "X-Script: SCRIPTSECRET789"'
      user=alice "password=+$tmp/password")
secrets1=(COOKIESECRET123 HEADERSECRET456 SCRIPTSECRET789 "$b64")
set2=('cookie-script=echo "scripted=COOKIESCRIPT321"')
secrets2=(COOKIESCRIPT321)

# copy_via NAME URL PLUGIN-ARGS...: a whole copy through nbdkit; what
# each server logged for it in $tmp/NAME-a.txt and $tmp/NAME-b.txt.
copy_via ()
{
  local name=$1 url=$2
  shift 2
  : >"$tmp/nginx-a.log"
  : >"$tmp/nginx-b.log"
  start_nbdkit "$name" -r "$PLUGIN" "$url" "$@"
  timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
  stop_nbdkit "$name"
  assert_same_file "$tmp/nginx-b/www/disk.img" "$tmp/out.img"
  rm -f "$tmp/out.img"
  cp "$tmp/nginx-a.log" "$tmp/$name-a.txt"
  cp "$tmp/nginx-b.log" "$tmp/$name-b.txt"
}

url_a=http://127.0.0.1:$a_port/disk.img
a_req="^http $a_port [A-Z]+ /disk.img 302 "
b_get="^http $b_port GET /disk.img 206 "

# By default: A gets the secrets, B serves the file without them.
copy_via s1 "$url_a" "${set1[@]}"
on_every "$tmp/s1-a.txt" "$a_req" "${secrets1[@]}"
on_every "$tmp/s1-b.txt" "$b_get"
on_none "$tmp/s1-b.txt" "${secrets1[@]}" PASSWORDSECRET
copy_via s2 "$url_a" "${set2[@]}"
on_every "$tmp/s2-a.txt" "$a_req" "${secrets2[@]}"
on_every "$tmp/s2-b.txt" "$b_get"
on_none "$tmp/s2-b.txt" "${secrets2[@]}"

# location-trusted=true: B gets them too, on every request.
copy_via t1 "$url_a" "${set1[@]}" location-trusted=true
on_every "$tmp/t1-b.txt" "$b_get" "${secrets1[@]}"
on_every "$tmp/t1-b.txt" . "${secrets1[@]}"
copy_via t2 "$url_a" "${set2[@]}" location-trusted=true
on_every "$tmp/t2-b.txt" "$b_get" "${secrets2[@]}"
on_every "$tmp/t2-b.txt" . "${secrets2[@]}"

# Same origin: A's redirect to another of its paths keeps them.
url_same=http://127.0.0.1:$a_port/a/disk.img
same_get="^http $a_port GET /here/disk.img 206 "
copy_via o1 "$url_same" "${set1[@]}"
on_every "$tmp/o1-a.txt" . "${secrets1[@]}"
on_every "$tmp/o1-a.txt" "$same_get" "${secrets1[@]}"
copy_via o2 "$url_same" "${set2[@]}"
on_every "$tmp/o2-a.txt" . "${secrets2[@]}"
on_every "$tmp/o2-a.txt" "$same_get" "${secrets2[@]}"
if [ -s "$tmp/o1-b.txt" ] || [ -s "$tmp/o2-b.txt" ]; then
  fail "a same-origin redirect reached B"
fi
