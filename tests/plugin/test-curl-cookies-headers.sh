#!/usr/bin/env bash
# test-curl-cookies-headers.sh: what cookie=, cookiefile= and header=
# say reaches nginx on every request (nginx logs the request headers);
# cookie= is read from a file (+FILE) or a descriptor (-FD); with the
# cookie engine on, a cookie nginx sets is sent back on later requests
# and written to cookiejar= at exit.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy

serve_image $((2 * 1024 * 1024 + 5)) 'access_log DIR/headers.log hdrs;
    location /set/ { alias DIR/www/; add_header Set-Cookie "srv=from-nginx"; }'

# copy_with NAME ARGS...: a whole copy with these plugin parameters; the
# request lines nginx logged for it in $tmp/NAME.log.
copy_with ()
{
  local name=$1
  shift
  : >"$tmp/headers.log"
  start_nbdkit "$name" -r "$PLUGIN" "$url" "$@"
  timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
  stop_nbdkit "$name"
  assert_same_file "$image" "$tmp/out.img"
  cp "$tmp/headers.log" "$tmp/$name.log"
}

# every LOG WORD: every GET line of LOG has WORD.
every ()
{
  local n bad
  n=$(grep -c '^GET ' "$1" || :)
  bad=$(grep '^GET ' "$1" | grep -cvF -- "$2" || :)
  [ "$n" -ge 2 ] && [ "$bad" -eq 0 ] || {
    cat "$1" >&2
    fail "$(basename "$1"): $bad of $n GETs without $2"
  }
}

printf 'session=s3cret-cookie\n' >"$tmp/cookie"
copy_with plain "cookie=+$tmp/cookie" "header=X-Token: abc"
every "$tmp/plain.log" 'cookie="session=s3cret-cookie"'
every "$tmp/plain.log" 'token="abc"'

# A Netscape cookie file: domain, subdomains, path, secure, expiry,
# name, value.
printf '127.0.0.1\tFALSE\t/\tFALSE\t0\tfromfile\tyes\n' >"$tmp/jar-in"
copy_with file "cookiefile=$tmp/jar-in"
every "$tmp/file.log" 'cookie="fromfile=yes"'

exec 3<"$tmp/cookie"
copy_with fd "cookie=-3"
exec 3<&-
every "$tmp/fd.log" 'cookie="session=s3cret-cookie"'

# nginx sets a cookie on every answer under /set/: after the first
# answer, every request carries it, and the jar has it at exit.
url=http://127.0.0.1:$port/set/disk.img
copy_with jar cookiefile= "cookiejar=$tmp/jar-out"
n=$(grep -c '^GET .*cookie="srv=from-nginx"' "$tmp/jar.log" || :)
[ "$n" -ge 2 ] || { cat "$tmp/jar.log" >&2; fail "the set cookie was not sent back"; }
grep -qP '\tsrv\tfrom-nginx$' "$tmp/jar-out" ||
  fail "cookiejar: no srv cookie in $(cat "$tmp/jar-out")"
