#!/usr/bin/env bash
# test-curl-redirect-single-use.sh: a redirector that hands out a fresh
# link per answer, each good for a few requests (single-use tokens
# behave so), fails no read (issue 37, point 13).  url= is
# helpers/redirector.py, which redirects to nginx with token=N, a new N
# per answer; nginx asks the redirector (auth_request) whether the token
# has uses left (USES of them) and answers 403 once it has none.  A read
# refused at the remembered target renews it; another read may then use
# up the new link before this one gets to it, and a second refusal
# failed the read (EIO, 1-7 MiB into the copy).  A read refused twice
# must follow url= itself, and after a few such short-lived targets the
# plugin stops remembering one (said in -v).
#  (a) USES=3, nbdcopy with 8 requests in flight (readahead=false, so
#      that each is a request of its own): the copy is byte-exact, and
#      nbdkit says it follows url= for every read.
#  (b) USES=2, 64 random reads in flight: all byte-exact.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh
requires nbdcopy

start_redirector rd
touch "$tmp/rd/tokens"
start_nginx_named tok "location = /disk.img { auth_request /__auth; }
    location = /__auth {
      internal;
      proxy_pass http://127.0.0.1:$rd_port/check;
      proxy_pass_request_body off;
      proxy_set_header Content-Length \"\";
      proxy_set_header X-Original-URI \$request_uri;
    }"
image=$tmp/nginx-tok/www/disk.img
make_random_file "$image" $((32 * 1024 * 1024 + 513))
echo "http://127.0.0.1:$tok_port/disk.img" >"$tmp/rd/target"

# (a)
echo 3 >"$tmp/rd/uses"
start_nbdkit a -r -v "$PLUGIN" "http://127.0.0.1:$rd_port/disk.img" \
             readahead=false
timeout "$client_timeout" nbdcopy --requests=8 --connections=1 \
        "$uri" "$tmp/out.img" 2>"$tmp/a.copy" || {
  cat "$tmp/a.copy" >&2
  fail "(a) the copy failed"
}
stop_nbdkit a
assert_same_file "$image" "$tmp/out.img"
refused=$(grep -c "^CHECK .* 403" "$tmp/rd.log" || :)
links=$(grep -c " 302$" "$tmp/rd.log" || :)
echo "(a) $links links handed out, $refused uses refused"
[ "$refused" -ge 1 ] || fail "(a) no link was used up: the test tests nothing"
grep -q "keep failing soon after they are found: from now on every read" \
     "$tmp/a.err" ||
  fail "(a) nbdkit did not say that it stopped remembering a target"

# (b)
: >"$tmp/rd.log"
echo 2 >"$tmp/rd/uses"
start_nbdkit b -r "$PLUGIN" "http://127.0.0.1:$rd_port/disk.img"
random_reads "$uri" "$image" 1000
stop_nbdkit b
refused=$(grep -c "^CHECK .* 403" "$tmp/rd.log" || :)
links=$(grep -c " 302$" "$tmp/rd.log" || :)
[ "$refused" -ge 1 ] || fail "(b) no link was used up: the test tests nothing"
echo "(b) 1000 random reads: $links links handed out, $refused uses refused"
