#!/usr/bin/env bash
# test-curl-url-script-renew.sh: url-script-renew= is kept while a
# redirect target is remembered (issue 37, point 20): the script runs
# again when due, and a new URL it prints is followed at once; the
# same URL keeps the target.  The script's URLs are at a front (nginx)
# that redirects /one to server T1 and /two to T2 (copies of one image,
# the same object to the pin).
#  (a) The first run prints /one, every later run /two;
#      url-script-renew=1, ten reads over 5 s: the script ran at least 3
#      times (it ran once without the fix), T2 served reads after the
#      change, and every read is byte-exact.
#  (b) Every run prints /one: the script runs again as often, and the
#      front is asked for /one at most twice (the target is kept).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

start_nginx_named t1
start_nginx_named t2
image=$tmp/nginx-t1/www/disk.img
make_random_file "$image" $((2 * 1024 * 1024 + 11))
cp -p "$image" "$tmp/nginx-t2/www/disk.img"
start_nginx_named front "location = /one {
      return 302 http://127.0.0.1:$t1_port/disk.img;
    }
    location = /two {
      return 302 http://127.0.0.1:$t2_port/disk.img;
    }"

cat >"$tmp/pick.sh" <<EOF
#!/bin/sh
echo run >>"$tmp/runs"
if [ "\${SAME:-0}" = 1 ] || [ "\$(wc -l <"$tmp/runs")" -le 1 ]; then
  echo "http://127.0.0.1:$front_port/one"
else
  echo "http://127.0.0.1:$front_port/two"
fi
EOF
chmod +x "$tmp/pick.sh"

# (a)
: >"$tmp/runs"
start_nbdkit a -r -v "$PLUGIN" "url-script=$tmp/pick.sh" url-script-renew=1
: >"$tmp/nginx-t2.log"
slow_reads 10 >"$tmp/a.out" 2>&1 || {
  cat "$tmp/a.out" >&2
  fail "(a) reads failed"
}
stop_nbdkit a
runs=$(wc -l <"$tmp/runs")
t2_reads=$(grep -c " GET /disk.img 206 " "$tmp/nginx-t2.log" || :)
echo "(a) the script ran $runs times in 5 s; T2 served $t2_reads reads"
[ "$runs" -ge 3 ] ||
  fail "(a) url-script-renew=1: the script ran $runs times in 5 s"
[ "$t2_reads" -ge 3 ] ||
  fail "(a) the new URL's target served $t2_reads reads"
grep -q "url-script printed another URL" "$tmp/a.err" ||
  fail "(a) no debug line about the new URL"

# (b)
: >"$tmp/runs"
: >"$tmp/nginx-front.log"
SAME=1 start_nbdkit b -r "$PLUGIN" "url-script=$tmp/pick.sh" \
                    url-script-renew=1
slow_reads 10 >"$tmp/b.out" 2>&1 || {
  cat "$tmp/b.out" >&2
  fail "(b) reads failed"
}
stop_nbdkit b
runs=$(wc -l <"$tmp/runs")
asked=$(grep -c " /one " "$tmp/nginx-front.log" || :)
echo "(b) the script ran $runs times in 5 s; the front was asked $asked times"
[ "$runs" -ge 3 ] ||
  fail "(b) url-script-renew=1: the script ran $runs times in 5 s"
[ "$asked" -le 2 ] || fail "(b) the same URL: the front was asked $asked times"
