#!/usr/bin/env bash
# test-curlpipe-upload-file-name.sh: -T FILE to a URL whose path ends in
# '/' uploads to that URL with FILE's base name appended, as curl does
# (URL-encoded; a query stays after it); a URL that names a file is
# used as it is.  Checked by what nginx wrote, side by side with curl.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

start_nginx_put
base=http://127.0.0.1:$port/put

mkdir "$tmp/src"
make_random_file "$tmp/src/disk.img" 70000
make_random_file "$tmp/src/a b.img" 1000

st=0
curlpipe -sf -T "$tmp/src/disk.img" "$base/" 2>"$tmp/err" || st=$?
[ "$st" -eq 0 ] || problem "-T FILE URL/: exit status $st: $(cat "$tmp/err")"
if [ -f "$tmp/www/disk.img" ]; then
  cmp -s "$tmp/src/disk.img" "$tmp/www/disk.img" ||
    problem "-T FILE URL/: the uploaded file differs"
else
  problem "-T FILE URL/: nothing at URL/disk.img; nginx's log:" \
          "$(tail -2 "$tmp/access.log" 2>/dev/null)"
fi

# A name that needs encoding, and a query after the path.
st=0
curlpipe -sf -T "$tmp/src/a b.img" "$base/?x=1" 2>"$tmp/err" || st=$?
[ "$st" -eq 0 ] && cmp -s "$tmp/src/a b.img" "$tmp/www/a b.img" ||
  problem "-T 'a b.img' URL/?x=1: exit status $st, file" \
          "$(ls "$tmp/www")"
grep -q ' PUT .* /put/a%20b.img?x=1 ' "$tmp/access.log" ||
  problem "-T 'a b.img' URL/?x=1: not PUT /put/a%20b.img?x=1:" \
          "$(tail -1 "$tmp/access.log")"

# A URL that names a file: used as it is.
st=0
curlpipe -sf -T "$tmp/src/disk.img" "$base/other.img" 2>"$tmp/err" || st=$?
[ "$st" -eq 0 ] && cmp -s "$tmp/src/disk.img" "$tmp/www/other.img" ||
  problem "-T FILE URL/NAME: exit status $st, or not uploaded to NAME"

# curl does the same.
if command -v curl >/dev/null; then
  mkdir "$tmp/www/c"
  chmod 777 "$tmp/www/c"
  timeout "$client_timeout" curl -sf -T "$tmp/src/a b.img" "$base/c/?x=1" ||
    problem "curl -T 'a b.img' URL/ failed"
  [ -f "$tmp/www/c/a b.img" ] ||
    problem "curl does not upload to 'a b.img': $(ls "$tmp/www/c")"
fi

check_problems
