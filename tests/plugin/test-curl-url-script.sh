#!/usr/bin/env bash
# test-curl-url-script.sh: url-script prints the URL to use, for
# presigned URLs that expire.  nginx checks signed links with its
# secure_link module (403 for a bad signature, 410 once the time in
# Expires has passed); the script signs them with openssl.
#  (a) No url=: the script's URL is used, byte-exact, and its query (a
#      secret) appears in none of nbdkit's messages.
#  (b) The URL expires every 4 s: reads spread over 10 s all succeed,
#      the script ran again before each expiry (a few runs, not one per
#      read), and nginx never answered 410.
#  (c) The first URL the script prints is refused (403): it is run
#      again at once and nbdkit starts with the new URL.
#  (d) A URL that does not expire: the script runs once for reads over
#      6 s, and with url-script-renew=2 again every 2 s or so.
#  (e) With url= as well, a failure names the script's URL (which was
#      asked), not url=.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh
requires openssl
requires_secure_link

secret=us-$RANDOM$RANDOM
start_signed_nginx "$secret"
image=$tmp/nginx-signed/www/disk.img
make_random_file "$image" $((2 * 1024 * 1024 + 77))

# The signing script: a link for now + LIFE seconds; BAD=N makes the
# first N runs sign with a wrong secret.  Each run is counted in
# $tmp/runs.
cat >"$tmp/sign.sh" <<EOF
#!/bin/sh
echo run >>"$tmp/runs"
runs=\$(wc -l <"$tmp/runs")
key=$secret
[ "\$runs" -gt "\${BAD:-0}" ] || key=wrong
exp=\$((\$(date +%s) + \${LIFE:-3600}))
sig=\$(printf '%s' "\$exp/disk.img \$key" | openssl md5 -binary |
      openssl base64 | tr +/ -_ | tr -d =)
echo "http://127.0.0.1:$signed_port/disk.img?Expires=\$exp&md5=\$sig"
EOF
chmod +x "$tmp/sign.sh"

# (a)
: >"$tmp/runs"
start_nbdkit a -r "$PLUGIN" "url-script=$tmp/sign.sh"
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
stop_nbdkit a
assert_same_file "$image" "$tmp/out.img"
grep -q 'md5=' "$tmp/nginx-signed.log" || fail "(a) no signed request"
if grep -q 'md5=' "$tmp/a.err"; then
  fail "(a) the URL's query appears in nbdkit's messages"
fi

# (b)
: >"$tmp/runs"
: >"$tmp/nginx-signed.log"
LIFE=4 start_nbdkit b -r "$PLUGIN" "url-script=$tmp/sign.sh" connections=2
slow_reads 20 || fail "(b) a read failed while the URL expired"
stop_nbdkit b
runs=$(wc -l <"$tmp/runs")
expired=$(grep -c ' 410 ' "$tmp/nginx-signed.log" || :)
[ "$expired" -eq 0 ] || fail "(b) nginx answered 410 $expired times"
[ "$runs" -ge 3 ] && [ "$runs" -le 8 ] ||
  fail "(b) the script ran $runs times over 10 s of 4 s links"
echo "(b) $runs runs of the script, no 410"

# (c)
: >"$tmp/runs"
: >"$tmp/nginx-signed.log"
BAD=1 start_nbdkit c -r "$PLUGIN" "url-script=$tmp/sign.sh"
FILE=$image nbdsh -u "$uri" -c '
import os
data = open(os.environ["FILE"], "rb").read()
assert h.pread(4096, 65536) == data[65536:69632], "the read differs"
' || fail "(c) a read failed"
stop_nbdkit c
runs=$(wc -l <"$tmp/runs")
[ "$runs" -eq 2 ] || fail "(c) the script ran $runs times, not 2"
[ "$(grep -c ' 403 ' "$tmp/nginx-signed.log")" -eq 1 ] || {
  cat "$tmp/nginx-signed.log" >&2
  fail "(c) nginx did not refuse exactly one request"
}

# (d)
for renew in 0 2; do
  : >"$tmp/runs"
  start_nbdkit d -r "$PLUGIN" "url-script=$tmp/sign.sh" \
    "url-script-renew=$renew"
  slow_reads 12 || fail "(d) url-script-renew=$renew: a read failed"
  stop_nbdkit d
  runs=$(wc -l <"$tmp/runs")
  echo "(d) url-script-renew=$renew: $runs runs of the script in 6 s"
  if [ "$renew" -eq 0 ]; then
    [ "$runs" -eq 1 ] || fail "(d) without renewal the script ran $runs times"
  else
    [ "$runs" -ge 3 ] && [ "$runs" -le 8 ] ||
      fail "(d) url-script-renew=2: the script ran $runs times in 6 s"
  fi
done

# (e) Two ports where nothing listens.
p1=$(free_port)
p2=$(free_port)
expect_nbdkit_fails e -r "$PLUGIN" "http://127.0.0.1:$p1/disk.img" \
  "url-script=echo http://127.0.0.1:$p2/disk.img"
grep -q "GET: http://127.0.0.1:$p2/disk.img" "$tmp/e.err" ||
  fail "(e) the failure does not name the script's URL: $(cat "$tmp/e.err")"
