#!/usr/bin/env bash
# test-curlpipe-url-at.sh: a URL's user name ends at an '@' inside its
# authority, which ends at the first '/', '?' or '#'.  An '@' in the
# path or the query ("?email=me@example.com") is no user name's end:
# messages, -w '%{url}' and '%{url_effective}', and the URLs libcurl
# quotes in its notes, name the right host.  And a Location the server
# sends with a user name and password, protocol-relative ("//u:pw@h/"),
# with "://" in its query, or with no slash after the scheme
# ("http:u:pw@h/", which libcurl follows), shows none of them in -v and
# --trace-ascii.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

start_nginx "location = /pr { absolute_redirect off;
      return 302 '//u:SEKpw1@h.invalid:1/next?sig=SEKsig1'; }
    location = /pq { absolute_redirect off;
      return 302 '//u:SEKpw2@h.invalid/?r=http://x.invalid/'; }
    location = /ns { absolute_redirect off;
      return 302 'http:u:SEKpw3@h.invalid/next'; }
    location = /r { return 302 /a@b; }
    location = /a@b { return 200 'ok\n'; }"
dead=127.0.0.1:1

# An '@' in the query, and one in the path: the error message (stderr
# and %{errormsg}), %{url} and %{url_effective}.
for path in "x?email=me@example.com" "a@b"; do
  url="http://$dead/$path"
  case $path in
    *\?*) shown="http://$dead/${path%%\?*}?..." ;;
    *) shown=$url ;;
  esac
  st=0
  curlpipe -s -w '%{url}|%{url_effective}|%{errormsg}' "$url" </dev/null \
    >"$tmp/out" 2>"$tmp/err" || st=$?
  msg="Failed to connect to 127.0.0.1 port 1 after"
  [ "$st" -eq 7 ] || problem "$url: exit status $st, not 7"
  case $(cat "$tmp/err") in
    "curlpipe: $shown: $msg "*) ;;
    *) problem "$url: stderr '$(cat "$tmp/err")', expected" \
               "'curlpipe: $shown: $msg ...'" ;;
  esac
  case $(cat "$tmp/out") in
    "$shown|$shown|$shown: $msg "*) ;;
    *) problem "$url: -w '$(cat "$tmp/out")', expected '$shown' twice" \
               "and the message" ;;
  esac
done

# A URL libcurl quotes in a note: -L to a path with an '@' in it.
st=0
curlpipe -s -v -L -o /dev/null "http://127.0.0.1:$port/r" </dev/null \
  >"$tmp/out" 2>"$tmp/err" || st=$?
[ "$st" -eq 0 ] || problem "-L to /a@b: exit status $st: $(cat "$tmp/err")"
grep -qxF "* Issue another request to this URL: 'http://127.0.0.1:$port/a@b'" \
  "$tmp/err" || problem "-L to /a@b: the note is not as sent: $(cat "$tmp/err")"

# The server's Location: the user name, the password and the query are
# masked; the host shows.
for r in "pr ***@h.invalid:1/next?***" "pq ***@h.invalid/?***" \
         "ns ***@h.invalid/next"; do
  path=${r%% *} want=${r#* }
  curlpipe -s -v -o /dev/null "http://127.0.0.1:$port/$path" </dev/null \
    >"$tmp/out" 2>"$tmp/err" || problem "/$path: curlpipe -v failed"
  curlpipe -s --trace-ascii "$tmp/trace" -o /dev/null \
    "http://127.0.0.1:$port/$path" </dev/null >"$tmp/out" 2>/dev/null ||
    problem "/$path: curlpipe --trace-ascii failed"
  for f in "$tmp/err" "$tmp/trace"; do
    ! grep -q SEK "$f" ||
      problem "/$path ($(basename "$f")): a secret is shown:" \
              "$(grep SEK "$f")"
    grep -qF "< Location: " "$f" ||
      problem "/$path ($(basename "$f")): no Location line: $(cat "$f")"
    case $(grep -F "< Location: " "$f") in
      *"$want") ;;
      *) problem "/$path ($(basename "$f")): Location shown as" \
                 "'$(grep -F "< Location: " "$f")', expected '...$want'" ;;
    esac
  done
done

check_problems
