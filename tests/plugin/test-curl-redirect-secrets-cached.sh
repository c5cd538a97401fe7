#!/usr/bin/env bash
# test-curl-redirect-secrets-cached.sh: the remembered target of url='s
# redirect is held to the same origin rules as a redirect followed on
# each read.  Server A (url=) redirects to server B; the plugin asks A
# once and then reads from B directly, through a whole copy and many
# single reads.  B then refuses (403) and A redirects to server C, which
# serves the rest.  A receives cookie=, header=, header-script's header
# and user=/password= every time it is asked; B and C receive none of
# them, on any request.  With location-trusted=true B and C receive
# them all on every request.  A chain that leaves A's origin and comes
# back to it (A, B, A again) ends at A's origin, which gets them.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh
requires nbdcopy

size=$((3 * 1024 * 1024 + 999))
start_nginx_named b 'location = /disk.img { if (-f DIR/gone) { return 403; } }'
make_random_file "$tmp/nginx-b/www/disk.img" "$size"
image=$tmp/nginx-b/www/disk.img
start_nginx_named c
# B2 sends a request back to the port its query names (A's).
start_nginx_named b2 'location = /back.img {
      return 302 http://127.0.0.1:$arg_to/here/disk.img;
    }'
# The same modification time and size: the same ETag, the same object.
cp -p "$image" "$tmp/nginx-c/www/disk.img"
start_nginx_named a "location = /disk.img {
      if (-f DIR/moved) { return 302 http://127.0.0.1:$c_port/disk.img; }
      return 302 http://127.0.0.1:$b_port/disk.img;
    }
    location = /loop.img {
      return 302 http://127.0.0.1:$b2_port/back.img?to=PORT;
    }
    location /here/ { alias DIR/www/; }"
# A serves the file itself too, for the chain that comes back to it.
cp -p "$image" "$tmp/nginx-a/www/disk.img"

printf 'session=COOKIESECRET123' >"$tmp/cookie"
printf 'PASSWORDSECRET' >"$tmp/password"
b64=$(printf 'alice:PASSWORDSECRET' | base64)
# readahead=false: the counts below are of one request per read.  Read-
# ahead may serve a single read from what it fetched from B before the
# move (the same object), and its GETs go through the same rules (see
# test-curl-readahead-redirect.sh).
params=("cookie=+$tmp/cookie" "header=X-Token: HEADERSECRET456"
        'header-script=echo "X-Script: SCRIPTSECRET789"'
        user=alice "password=+$tmp/password" readahead=false)
secrets=(COOKIESECRET123 HEADERSECRET456 SCRIPTSECRET789 "$b64")

# run_case NAME URL PLUGIN-ARGS...: a whole copy by nbdcopy, then ten
# single reads, then B refuses and A moves to C, then ten more single
# reads; every byte checked.  What each server logged for it is in
# $tmp/NAME-{a,b,c,b2}.txt.
run_case ()
{
  local name=$1 url=$2 s
  shift 2
  rm -f "$tmp/nginx-b/gone" "$tmp/nginx-a/moved"
  for s in a b c b2; do : >"$tmp/nginx-$s.log"; done
  start_nbdkit "$name" -r -v "$PLUGIN" "$url" "$@"
  timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
  assert_same_file "$image" "$tmp/out.img"
  rm -f "$tmp/out.img"
  reads_moved_at_11 "$name" 131072 5 6000 "$tmp/nginx-a/moved" \
    "$tmp/nginx-b/gone"
  stop_nbdkit "$name"
  for s in a b c b2; do cp "$tmp/nginx-$s.log" "$tmp/$name-$s.txt"; done
}

# lines LOG ERE: how many lines of LOG match.
lines ()
{
  grep -cE -- "$2" "$1" || :
}

# at_least LOG ERE N WHAT: LOG has N or more lines that match ERE.
at_least ()
{
  local n
  n=$(lines "$1" "$2")
  [ "$n" -ge "$3" ] || {
    cat "$1" >&2
    fail "$(basename "$1"): $n $4, expected at least $3"
  }
}

# asked_twice NAME: A answered the probe's GET and one GET after B's
# 403, nothing more (HEAD and PUT go to url= too, but none are sent:
# nginx gives the probe validators, and the export is read-only).
asked_twice ()
{
  local n
  n=$(lines "$tmp/$1-a.txt" "^http $a_port GET /disk.img 302 ")
  [ "$n" -eq 2 ] && [ "$(wc -l <"$tmp/$1-a.txt")" -eq 2 ] || {
    cat "$tmp/$1-a.txt" >&2
    fail "$1: A was asked $(wc -l <"$tmp/$1-a.txt") times ($n GETs)," \
         "not twice"
  }
  [ "$(lines "$tmp/$1-b.txt" " GET /disk.img 403 ")" -eq 1 ] || {
    cat "$tmp/$1-b.txt" >&2
    fail "$1: B did not answer exactly one 403"
  }
}

url_a=http://127.0.0.1:$a_port/disk.img

# By default: A gets the secrets, B and C serve without them.
run_case plain "$url_a" "${params[@]}"
asked_twice plain
on_every "$tmp/plain-a.txt" . "${secrets[@]}"
at_least "$tmp/plain-b.txt" " GET /disk.img 206 " 12 "reads from B"
at_least "$tmp/plain-c.txt" " GET /disk.img 206 " 10 "reads from C"
on_none "$tmp/plain-b.txt" "${secrets[@]}" PASSWORDSECRET alice
on_none "$tmp/plain-c.txt" "${secrets[@]}" PASSWORDSECRET alice
echo "plain: A $(wc -l <"$tmp/plain-a.txt") requests with the secrets," \
     "B $(wc -l <"$tmp/plain-b.txt") and C $(wc -l <"$tmp/plain-c.txt")" \
     "without"

# location-trusted=true: B and C get them on every request.
run_case trusted "$url_a" "${params[@]}" location-trusted=true
asked_twice trusted
for s in a b c; do
  on_every "$tmp/trusted-$s.txt" . "${secrets[@]}"
done
at_least "$tmp/trusted-b.txt" " GET /disk.img 206 " 12 "reads from B"
at_least "$tmp/trusted-c.txt" " GET /disk.img 206 " 10 "reads from C"
echo "trusted: B $(wc -l <"$tmp/trusted-b.txt") and" \
     "C $(wc -l <"$tmp/trusted-c.txt") requests, all with the secrets"

# A, then B, then A's own origin again: the hop to B has none of the
# secrets, the remembered target on A's origin has them all, and A's
# /loop.img was asked once.
for s in a b c b2; do : >"$tmp/nginx-$s.log"; done
start_nbdkit loop -r -v "$PLUGIN" "http://127.0.0.1:$a_port/loop.img" \
             "${params[@]}"
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
assert_same_file "$image" "$tmp/out.img"
random_reads "$uri" "$image" 200
stop_nbdkit loop
[ "$(lines "$tmp/nginx-a.log" " GET /loop.img 302 ")" -eq 1 ] &&
  [ "$(lines "$tmp/nginx-b2.log" " GET /back.img[?]to=$a_port 302 ")" -eq 1 ] &&
  [ "$(wc -l <"$tmp/nginx-b2.log")" -eq 1 ] || {
  cat "$tmp/nginx-a.log" "$tmp/nginx-b2.log" >&2
  fail "loop: the chain was followed more than once"
}
on_none "$tmp/nginx-b2.log" "${secrets[@]}" PASSWORDSECRET alice
grep " /here/disk.img " "$tmp/nginx-a.log" >"$tmp/loop-here.txt" || :
at_least "$tmp/loop-here.txt" " GET /here/disk.img 206 " 10 "reads from A"
on_every "$tmp/loop-here.txt" . "${secrets[@]}"
on_every "$tmp/nginx-a.log" . "${secrets[@]}"
echo "loop: $(wc -l <"$tmp/loop-here.txt") reads on A's origin with the" \
     "secrets, one hop through B2 without"
