#!/usr/bin/env bash
# test-curl-readahead-redirect.sh: read-ahead's GETs follow url='s
# redirect to another origin by the same rules as reads, secrets
# included.  Server A (url=) redirects to server B; a sequential reader
# at QD1 (64 reads of 64 KiB) gets the image's bytes, and B, which served
# them in far fewer GETs than reads (read-ahead ran there: on loopback
# after one GET for each of the first 16 reads), received
# none of cookie=, header=, header-script's header and user=/password=
# on any request, while A received them all on every request.  With
# location-trusted=true B receives them on every request too.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

size=$((8 * 1024 * 1024 + 77))
start_nginx_named b
image=$tmp/nginx-b/www/disk.img
make_random_file "$image" "$size"
start_nginx_named a "location = /disk.img {
      return 302 http://127.0.0.1:$b_port/disk.img;
    }"

printf 'session=COOKIESECRET123' >"$tmp/cookie"
printf 'PASSWORDSECRET' >"$tmp/password"
b64=$(printf 'alice:PASSWORDSECRET' | base64)
params=("cookie=+$tmp/cookie" "header=X-Token: HEADERSECRET456"
        'header-script=echo "X-Script: SCRIPTSECRET789"'
        user=alice "password=+$tmp/password")
secrets=(COOKIESECRET123 HEADERSECRET456 SCRIPTSECRET789 "$b64")

# run_case NAME PLUGIN-ARGS...: the sequential reads; what A and B
# logged is in $tmp/NAME-{a,b}.txt.
run_case ()
{
  local name=$1 s
  shift
  for s in a b; do : >"$tmp/nginx-$s.log"; done
  start_nbdkit "$name" -r -v -D curl.readahead=1 "$PLUGIN" \
    "http://127.0.0.1:$a_port/disk.img" "${params[@]}" "$@"
  read_in_turn "$image" $((1024 * 1024)) 64 65536 >"$tmp/$name.out" 2>&1 || {
    cat "$tmp/$name.out" >&2
    fail "$name: the reads failed"
  }
  stop_nbdkit "$name"
  for s in a b; do cp "$tmp/nginx-$s.log" "$tmp/$name-$s.txt"; done
  grep -q 'read-ahead: stream from' "$tmp/$name.err" ||
    fail "$name: no stream of read-ahead started"
  gets=$(grep -c ' GET /disk.img 206 ' "$tmp/$name-b.txt" || :)
  [ "$gets" -ge 2 ] && [ "$gets" -le 48 ] || {
    cat "$tmp/$name-b.txt" >&2
    fail "$name: B answered $gets GETs for 64 reads (read-ahead: 2 to 48)"
  }
  echo "$name: B answered $gets GETs for 64 reads"
}

run_case plain
on_every "$tmp/plain-a.txt" . "${secrets[@]}"
on_none "$tmp/plain-b.txt" "${secrets[@]}" PASSWORDSECRET alice

run_case trusted location-trusted=true
on_every "$tmp/trusted-a.txt" . "${secrets[@]}"
on_every "$tmp/trusted-b.txt" . "${secrets[@]}"
