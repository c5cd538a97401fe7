#!/usr/bin/env bash
# test-curlpipe-post-redirect.sh: --data-binary @- -L follows a 301,
# 302 or 303 as curl 7.88 does: the redirected request is a GET without
# a body (curl's CURLOPT_POSTREDIR default), not the POST again, and a
# 307 keeps the POST and its body.  Run side by side with curl, from a
# file and from a pipe, and judged by nginx's log of what it received:
# method, Transfer-Encoding and Content-Length of each request.  The
# Content-Type curl gives a POST (application/x-www-form-urlencoded)
# goes with the POST only: the GET after a 301, 302 or 303 has none, and
# a 307's POST keeps it, as the target server sees them.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe
requires curl

start_nginx "
    location = /m301 { return 301 /target; }
    location = /m302 { return 302 /target; }
    location = /m303 { return 303 /target; }
    location = /m307 { return 307 /put/m307.img; }
    location = /target { return 200 'target'; }
    location = /c302 { return 302 /ctarget; }
    location = /c307 { return 307 /ctarget; }
    location = /ctarget { return 200 '\$request_method ct=\$content_type'; }
    location /put/ { dav_methods PUT; alias DIR/www/; }"
chmod 777 "$tmp/www"
make_random_file "$tmp/body" 5000

# requests PATH: what nginx got for PATH since the log was emptied, one
# line each: "METHOD te=TE cl=CL".
requests ()
{
  awk -v p="$1" '$6 == p { print $2, $7, $8 }' "$tmp/access.log"
}

# run WHO FROM CODE: WHO (curl or curlpipe) POSTs the body from FROM
# (file or pipe) to /mCODE with -L; prints what /target got.
run ()
{
  local who=$1 from=$2 code=$3 st=0 cmd
  : >"$tmp/access.log"
  if [ "$who" = curl ]; then
    cmd=(timeout "$client_timeout" curl)
  else
    cmd=(curlpipe)
  fi
  if [ "$from" = file ]; then
    "${cmd[@]}" -sS --data-binary @- -L "http://127.0.0.1:$port/m$code" \
      <"$tmp/body" >"$tmp/out" 2>"$tmp/err" || st=$?
  else
    cat "$tmp/body" | "${cmd[@]}" -sS --data-binary @- -L \
      "http://127.0.0.1:$port/m$code" >"$tmp/out" 2>"$tmp/err" || st=$?
  fi
  [ "$st" -eq 0 ] && [ "$(cat "$tmp/out")" = target ] ||
    problem "$who --data-binary @- -L ($from) to a $code: exit status" \
            "$st, stdout '$(head -c 100 "$tmp/out")': $(cat "$tmp/err")"
  requests /m"$code" | grep -q '^POST ' ||
    problem "$who ($from) $code: the first request was no POST:" \
            "$(cat "$tmp/access.log")"
  requests /target
}

for code in 301 302 303; do
  for from in file pipe; do
    want=$(run curl "$from" "$code")
    got=$(run curlpipe "$from" "$code")
    [ "$want" = "GET te=- cl=-" ] ||
      problem "curl ($from) $code: /target got '$want', expected a GET"
    [ "$got" = "$want" ] ||
      problem "curlpipe ($from) $code: /target got '$got'; curl's: '$want'"
  done
done

# A 307 keeps the POST and its body (from a file, which can be sent
# again), as in curl.
: >"$tmp/access.log"
st=0
curlpipe -sS --data-binary @- -L "http://127.0.0.1:$port/m307" \
  <"$tmp/body" >"$tmp/out" 2>"$tmp/err" || st=$?
got=$(requests /put/m307.img)
[ "$got" = "POST te=- cl=5000" ] ||
  problem "curlpipe (file) 307: /put/m307.img got '$got', expected the" \
          "POST with its 5000 bytes: exit status $st: $(cat "$tmp/err")"

# The Content-Type the target got: curl's and curlpipe's the same.
for code in 302 307; do
  case $code in
    302) want="GET ct=" ;;
    307) want="POST ct=application/x-www-form-urlencoded" ;;
  esac
  for who in curl curlpipe; do
    if [ "$who" = curl ]; then
      cmd=(timeout "$client_timeout" curl)
    else
      cmd=(curlpipe)
    fi
    st=0
    "${cmd[@]}" -sS --data-binary @- -L "http://127.0.0.1:$port/c$code" \
      <"$tmp/body" >"$tmp/out" 2>"$tmp/err" || st=$?
    [ "$st" -eq 0 ] && [ "$(cat "$tmp/out")" = "$want" ] ||
      problem "$who --data-binary @- -L to a $code: the target got" \
              "'$(head -c 100 "$tmp/out")', expected '$want': exit" \
              "status $st: $(cat "$tmp/err")"
  done
done

check_problems
