#!/usr/bin/env bash
# test-curlpipe-message-secrets.sh: what curlpipe prints about a URL
# never has its user name, password or query, wherever libcurl put the
# URL: the error message (and -w %{errormsg}) for a proxy from
# http_proxy or ALL_PROXY, with or without a scheme; libcurl's notes in
# -v and --trace-ascii for -x without a scheme or with a quote or a
# space in its password; the note on a redirect ("Issue another request
# to this URL: '...?sig=...'"); and -w %{referer} and %{json}'s
# "referer" with -e ';auto' -L, which are the URL redirected from.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

start_nginx "location = /r { return 302 /sink?sig=SECRETQ; }
    location = /sink { return 200 'referer=\$http_referer\n'; }"
dead=http://127.0.0.1:1/sink

# no_secret FILE WHAT: FILE has no SECRET.
no_secret ()
{
  ! grep -q SECRET "$1" || problem "$2: a secret is shown: $(cat "$1")"
}

# A proxy from the environment, with and without a scheme: the message
# on stderr and %{errormsg} are the same, masked.
for v in "http_proxy=http://eu:ENVPW2SECRET@127.0.0.1:99999" \
         "ALL_PROXY=eu:ENVPW3SECRET@127.0.0.1:99999"; do
  case $v in
    http_proxy=*) shown="http://***@127.0.0.1:99999" ;;
    *) shown="***@127.0.0.1:99999" ;;
  esac
  st=0
  env -u NO_PROXY -u no_proxy -u HTTP_PROXY -u http_proxy -u ALL_PROXY \
      -u all_proxy "$v" \
    timeout "$client_timeout" "$CURLPIPE" -s -w '%{errormsg}' "$dead" \
    </dev/null >"$tmp/out" 2>"$tmp/err" || st=$?
  want="$dead: Unsupported proxy syntax in '$shown'"
  [ "$st" -eq 5 ] || problem "$v: exit status $st, not 5"
  [ "$(cat "$tmp/err")" = "curlpipe: $want" ] ||
    problem "$v: stderr '$(cat "$tmp/err")', expected 'curlpipe: $want'"
  [ "$(cat "$tmp/out")" = "$want" ] ||
    problem "$v: %{errormsg} '$(cat "$tmp/out")', expected '$want'"
done

# -x, shown by -v and --trace-ascii: libcurl's note quotes the proxy.
for x in "u:SECRETPX@127.0.0.1:99999" "http://u:p'SECRETQT@127.0.0.1:99999" \
         "http://u:p SECRETSP@127.0.0.1:99999"; do
  case $x in
    http*) shown="http://***@127.0.0.1:99999" ;;
    *) shown="***@127.0.0.1:99999" ;;
  esac
  curlpipe -s -v -x "$x" "$dead" </dev/null >"$tmp/out" 2>"$tmp/err" || :
  curlpipe -s --trace-ascii "$tmp/trace" -x "$x" "$dead" </dev/null \
    >"$tmp/out" 2>/dev/null || :
  for f in "$tmp/err" "$tmp/trace"; do
    no_secret "$f" "-x '$x' ($(basename "$f"))"
    grep -qxF "* Unsupported proxy syntax in '$shown'" "$f" ||
      problem "-x '$x': no masked note in $(basename "$f"): $(cat "$f")"
  done
done

# A redirect whose URL has a query, from a URL that has one, with the
# automatic Referer: the note, %{referer} and %{json} mask both.
st=0
curlpipe -s -v -L -e ';auto' -o "$tmp/body" \
  -w '%{referer}\n%{json}\n' "http://127.0.0.1:$port/r?sig=SECRETR" \
  </dev/null >"$tmp/out" 2>"$tmp/err" || st=$?
[ "$st" -eq 0 ] || problem "-L -e ';auto': exit status $st: $(cat "$tmp/err")"
curlpipe -s --trace-ascii "$tmp/trace" -L -e ';auto' -o /dev/null \
  "http://127.0.0.1:$port/r?sig=SECRETR" </dev/null 2>/dev/null ||
  problem "-L -e ';auto' --trace-ascii: failed"
for f in "$tmp/err" "$tmp/trace" "$tmp/out"; do
  no_secret "$f" "-L -e ';auto' ($(basename "$f"))"
done
for f in "$tmp/err" "$tmp/trace"; do
  grep -qxF "* Issue another request to this URL: 'http://127.0.0.1:$port/sink?***'" "$f" ||
    problem "-L: no masked redirect note in $(basename "$f"): $(cat "$f")"
done
[ "$(head -1 "$tmp/out")" = "http://127.0.0.1:$port/r?..." ] ||
  problem "-L -e ';auto': %{referer} is '$(head -1 "$tmp/out")'"
grep -qF "\"referer\":\"http://127.0.0.1:$port/r?...\"" "$tmp/out" ||
  problem "-L -e ';auto': %{json}'s referer: $(tail -1 "$tmp/out")"
# The server did get the Referer, query and all.
grep -qxF "referer=http://127.0.0.1:$port/r?sig=SECRETR" "$tmp/body" ||
  problem "-L -e ';auto': the server got no Referer: $(cat "$tmp/body")"

check_problems
