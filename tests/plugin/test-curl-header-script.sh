#!/usr/bin/env bash
# test-curl-header-script.sh: header-script's output goes with every
# request, and with header-script-renew it is run again while a client
# keeps reading: nginx (which refuses any request without a well-formed
# token) sees several tokens, each request with one whole set (X-Token
# and X-Token-Check from the same run).  cookie-script and
# cookie-script-renew likewise (several cookies).  A
# script that fails stops nbdkit at start-up, or fails the reads after
# it, with a message naming the script and its exit status.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

serve_image $((1024 * 1024)) 'access_log DIR/headers.log hdrs;
    location / { if ($http_x_token !~ "^tok-[0-9]+$") { return 403; } }'

script='echo "X-Token: tok-$iteration"; sleep 0.2; echo "X-Token-Check: tok-$iteration"'
start_nbdkit hs -r "$PLUGIN" "$url" "header-script=$script" \
  header-script-renew=1 'cookie-script=echo "sess=$iteration"' \
  cookie-script-renew=1
slow_reads 8 || fail "reads with header-script failed"
stop_nbdkit hs

tokens=$(grep -o 'token="tok-[0-9]*"' "$tmp/headers.log" | sort -u | wc -l)
[ "$tokens" -ge 3 ] || {
  cat "$tmp/headers.log" >&2
  fail "header-script was not renewed: $tokens distinct tokens"
}
awk '{ t = $6; c = $7; sub(/^token=/, "", t); sub(/^check=/, "", c)
       if (t != c || $4 != 206 && $4 != 200) { print; bad++ } }
     END { exit bad > 0 }' "$tmp/headers.log" >"$tmp/mixed.out" ||
  fail "requests with a mixed or refused header set: $(cat "$tmp/mixed.out")"
grep -q 'cookie="sess=0"' "$tmp/headers.log" || fail "cookie-script not sent"
cookies=$(grep -o 'cookie="sess=[0-9]*"' "$tmp/headers.log" | sort -u | wc -l)
[ "$cookies" -ge 3 ] || fail "cookie-script was not renewed: $cookies cookies"

# Fails at start-up.
expect_nbdkit_fails bad -r "$PLUGIN" "$url" \
  'header-script=echo oops >&2; exit 3'
assert_grep_i "$tmp/bad.err" "header-script" "exited with status 3"

# Works once, then fails: the reads after the renewal fail with EIO.
script='[ "$iteration" -eq 0 ] || exit 4; echo "X-Token: tok-1"'
start_nbdkit later -r "$PLUGIN" "$url" "header-script=$script" \
  header-script-renew=1
nbdsh -u "$uri" -c '
import errno, time
h.pread(512, 65536)
time.sleep(1.5)
try:
    h.pread(512, 131072)
except nbd.Error as e:
    assert e.errnum == errno.EIO, e.string
else:
    raise SystemExit("a read succeeded after header-script failed")
h.shutdown()
' || fail "the read after a failed renewal did not fail"
stop_nbdkit later
assert_grep_i "$tmp/later.err" "header-script" "exited with status 4"

# A script that never finishes is killed after timeout= seconds, even
# with a background process holding its output open.
start=$SECONDS
expect_nbdkit_fails hang -r "$PLUGIN" "$url" timeout=2 \
  'header-script=sleep 60 & echo "X-Token: tok-1"; wait'
assert_grep_i "$tmp/hang.err" "header-script" "did not finish within 2"
[ $((SECONDS - start)) -lt 15 ] || fail "the hanging script took too long"

# Output that is not headers, or a CR inside a line.
expect_nbdkit_fails garbage -r "$PLUGIN" "$url" \
  'header-script=printf "garbage\nX-Token: tok-1\n"'
assert_grep_i "$tmp/garbage.err" "output line 1" "expected 'Name: value'"
expect_nbdkit_fails cr -r "$PLUGIN" "$url" \
  'header-script=printf "X-Token: tok-1\rX-Evil: 1\n"'
assert_grep_i "$tmp/cr.err" "output line 1" "CR or LF"
