#!/usr/bin/env bash
# test-curlpipe-referer.sh: -e as curl reads it: "URL;auto" sends
# "Referer: URL" (not "URL;auto") and turns on the automatic Referer
# of -L's redirects; ";auto" alone sends none at first; a plain URL is
# sent on every request, redirected ones too.  Side by side with curl,
# judged by the Referer nginx received (it answers with it).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe
requires curl

start_nginx "location = /r { return 302 /ref; }
    location = /ref { return 200 'referer=\$http_referer\n'; }"
base=http://127.0.0.1:$port

# same E PATH [-L]: curl and curlpipe with -e E get the same answer
# from PATH, which is WANT (the Referer the last request carried).
same ()
{
  local e=$1 path=$2 want=$3 st=0
  shift 3
  timeout "$client_timeout" curl -s -e "$e" "$@" "$base$path" \
    >"$tmp/curl.out" || problem "curl -e '$e' $* $path failed"
  curlpipe -s -e "$e" "$@" "$base$path" </dev/null >"$tmp/out" \
    2>"$tmp/err" || st=$?
  [ "$st" -eq 0 ] ||
    problem "curlpipe -e '$e' $* $path: exit status $st: $(cat "$tmp/err")"
  [ "$(cat "$tmp/curl.out")" = "referer=$want" ] ||
    problem "curl -e '$e' $* $path: '$(cat "$tmp/curl.out")', not '$want'"
  [ "$(cat "$tmp/out")" = "$(cat "$tmp/curl.out")" ] ||
    problem "curlpipe -e '$e' $* $path: '$(cat "$tmp/out")'; curl:" \
            "'$(cat "$tmp/curl.out")'"
}

same 'http://from.example/;auto' /ref http://from.example/
same 'http://from.example/;auto' /r "$base/r" -L
same ';auto' /r "$base/r" -L
same ';auto' /ref ""
same 'http://from.example/' /r http://from.example/ -L
same 'http://from.example/' /ref http://from.example/

check_problems
