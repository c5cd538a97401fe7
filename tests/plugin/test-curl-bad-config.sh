#!/usr/bin/env bash
# test-curl-bad-config.sh: each bad configuration makes nbdkit exit
# non-zero at start-up, within a bounded time, without crashing, with a
# message naming the problem.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin

# Nothing listens here (checked just now); each case but the last two
# fails on its parameters before any connection is tried.
dead_port=$(free_port)
url=http://127.0.0.1:$dead_port/disk.img

# case_ NAME WORDS -- NBDKIT-PLUGIN-ARGS...: nbdkit must fail (see
# expect_nbdkit_fails) and every WORD (case-insensitive) must appear in its
# stderr.  A wrong message is counted and the next case still runs, so one
# run shows every bad message.
bad=0
case_ ()
{
  local name=$1 words=() w
  shift
  while [ "$1" != -- ]; do words+=("$1"); shift; done
  shift
  expect_nbdkit_fails "$name" "$PLUGIN" "$@"
  for w in "${words[@]}"; do
    grep -qiF -- "$w" "$tmp/$name.err" || {
      echo "BAD: $name ($*): expected '$w' in: $(cat "$tmp/$name.err")" >&2
      bad=$((bad + 1))
      return 0
    }
  done
  echo "ok: $name: $(head -n1 "$tmp/$name.err")"
}

case_ no_url url required --
case_ ftp protocols -- ftp://127.0.0.1/x
case_ proto_https protocols -- "https://127.0.0.1:$dead_port/x" protocols=http
case_ timeout_abc timeout abc -- "$url" timeout=abc
case_ timeout_neg timeout -- "$url" timeout=-1
case_ connections_0 connections 0 -- "$url" connections=0
case_ connections_257 connections 257 -- "$url" connections=257
case_ sslverify sslverify maybe -- "$url" sslverify=maybe
case_ retries_101 retries 101 -- "$url" retries=101
case_ retry_delay retry-delay -1 -- "$url" retry-delay=-1
case_ retry_delay_big retry-delay 3601 -- "$url" retry-delay=3601
case_ pin_object pin-object maybe -- "$url" pin-object=maybe
case_ http3 http-version "without HTTP/3" -- "$url" http-version=3
case_ http4 http-version 4 "one of" -- "$url" http-version=4
case_ sslv3 ssl-version sslv3 -- "$url" ssl-version=sslv3
case_ tls9 ssl-version tlsv9 "one of" -- "$url" ssl-version=tlsv9
case_ ipresolve ipresolve v5 -- "$url" ipresolve=v5
case_ resolve resolve HOST:PORT:ADDRESS -- "$url" resolve=nocolons
case_ tcp_keepalive tcp-keepalive maybe -- "$url" tcp-keepalive=maybe
case_ renew_alone header-script-renew "needs header-script" -- "$url" \
  header-script-renew=5
case_ cookie_twice cookie-script "together" -- "$url" cookie=a=1 \
  'cookie-script=echo a=2'
case_ sigv4_nokey aws-sigv4 "user=" -- "$url" aws-sigv4=aws:amz:x:s3
printf 'a=1\r\nX-Evil: 1' >"$tmp/two-lines"
case_ cookie_crlf cookie "CR or LF" -- "$url" "cookie=+$tmp/two-lines"
case_ password_crlf password "CR or LF" -- "$url" user=alice \
  "password=+$tmp/two-lines"
case_ user_agent_crlf user-agent "CR or LF" -- "$url" \
  "user-agent=nbdkit"$'\r\n'"X-Evil: 1"
# A header that would smuggle another one in; its value (a token) must
# not be printed.
case_ header_crlf header "CR or LF" -- "$url" \
  "header=Authorization: Bearer s3cret-token"$'\r\n'"X-Evil: 1"
if grep -qF s3cret-token "$tmp/header_crlf.err"; then
  echo "BAD: header_crlf: the header's value was printed" >&2
  bad=$((bad + 1))
fi
# Headers the plugin sets itself for the ranges it asks for, the
# validators it pins and the bodies it sends: a header= of that name
# would replace them, whatever the case of its name.
for h in Range If-Match if-unmodified-since If-None-Match \
         If-Modified-Since If-Range Content-Range content-length \
         Transfer-Encoding Expect Accept-Encoding; do
  case_ "header_$h" header "$h" "sets it" -- "$url" "header=$h: x"
done
# ... in libcurl's form for an empty value too, and with blanks.
case_ header_semicolon header "Range" "sets it" -- "$url" "header=Range;"
# A blank before the colon: servers refuse it (RFC 9112 5.1).
case_ header_blank header "not a valid token" -- "$url" \
  "header=Content-Length : 0"
case_ header_blank2 header "not a valid token" -- "$url" "header=X-Foo :v"
# A name that is not a token, e.g. a line folded into the previous one.
case_ header_fold header "not a valid token" -- "$url" "header= Range: x"
case_ header_space header "not a valid token" -- "$url" \
  "header=Content Length: 0"
case_ header_semicolon_more header "nothing after" -- "$url" \
  "header=X-Empty; x"
# libcurl sends nothing at all for "Name; ".
case_ header_semicolon_blank header "nothing after" -- "$url" \
  "header=X-Empty; "
# No name at all, or what stands before ':' or ';' is no name: it may
# be a value (a token), and is not printed.
case_ header_no_name header "got no ':'" -- "$url" "header=s3cret-token"
case_ header_cookie_like header "not a valid token" -- "$url" \
  "header=session=s3cret-token; lang=en"
case_ header_no_colon_name header "not a valid token" -- "$url" \
  "header=Authorization Bearer s3cret-token:x"
for c in header_no_name header_cookie_like header_no_colon_name; do
  if grep -qF s3cret-token "$tmp/$c.err"; then
    echo "BAD: $c: the header's value was printed" >&2
    bad=$((bad + 1))
  fi
done

# nbdkit or the plugin may phrase this one.
expect_nbdkit_fails unknown "$PLUGIN" "$url" foo=1
if grep -qiE 'unknown (parameter|key)' "$tmp/unknown.err" &&
     grep -qF foo "$tmp/unknown.err"; then
  echo "ok: unknown: $(head -n1 "$tmp/unknown.err")"
else
  echo "BAD: unknown: expected 'unknown parameter' and 'foo' in:" \
       "$(cat "$tmp/unknown.err")" >&2
  bad=$((bad + 1))
fi

# Nothing listening: the message names the URL and the failure.
case_ refused "$url" connect -- "$url"
# The same with a password in the URL and a presigned URL's signature in
# its query: the message names the host and port, never those.
secret_url="http://alice:PASSWORDINURL@127.0.0.1:$dead_port/disk.img"
secret_url+="?X-Amz-Signature=SIGINURL"
case_ refused_secrets "127.0.0.1:$dead_port" connect -- "$secret_url"
for secret in alice@ PASSWORDINURL SIGINURL; do
  if grep -qF "$secret" "$tmp/refused_secrets.err"; then
    echo "BAD: refused_secrets: $secret was printed:" \
         "$(grep -F "$secret" "$tmp/refused_secrets.err")" >&2
    bad=$((bad + 1))
  fi
done

[ "$bad" -eq 0 ] || fail "$bad bad error messages"
