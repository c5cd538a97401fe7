#!/usr/bin/env bash
# test-curlpipe-curl-quirks.sh: small corners where curlpipe reads its
# command line as curl 7.88 does, side by side with curl: -T with a
# backslash in the file name puts what follows the last backslash on a
# URL ending in '/' (curl takes '\' as a separator on every system);
# -w '%\n' and -w '\%{http_code}' write '%' or '\' and the character
# after it as they are, without reading that character again.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe
requires curl

start_nginx_put "location = /ok { return 200 ''; }"

# -T 'dir/back\slash' to /put/: the file is "slash" for both.
mkdir "$tmp/dir"
printf bs >"$tmp/dir/back\\slash"
for who in curl curlpipe; do
  rm -f "$tmp/www/slash"
  (cd "$tmp" && timeout "$client_timeout" "${who/curlpipe/$CURLPIPE}" -sS \
     -T 'dir/back\slash' "http://127.0.0.1:$port/put/" </dev/null) \
    >/dev/null 2>"$tmp/err" || problem "$who -T: failed: $(cat "$tmp/err")"
  [ "$(cat "$tmp/www/slash" 2>/dev/null)" = bs ] ||
    problem "$who -T 'dir/back\\slash' URL/: no file 'slash':" \
            "$(ls "$tmp/www")"
done

# -w: the same bytes as curl's.
for w in '%\n' '\%{http_code}' 'a%xb%%c\qd\n' '%{http_code}\t%'; do
  timeout "$client_timeout" curl -s -o /dev/null -w "$w" \
    "http://127.0.0.1:$port/ok" >"$tmp/curl.out"
  curlpipe -s -o /dev/null -w "$w" "http://127.0.0.1:$port/ok" \
    </dev/null >"$tmp/out" 2>"$tmp/err" || :
  cmp -s "$tmp/curl.out" "$tmp/out" ||
    problem "-w '$w': curlpipe wrote '$(cat "$tmp/out")', curl" \
            "'$(cat "$tmp/curl.out")'"
  [ ! -s "$tmp/err" ] || problem "-w '$w': stderr: $(cat "$tmp/err")"
done

check_problems
