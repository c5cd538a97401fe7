#!/usr/bin/env bash
# test-curl-verbose-secrets.sh: under -v -D curl.verbose=1 the plugin
# shows each request's headers but never a password, the user name
# (for aws-sigv4 it is the access key id; libcurl's own notes, such as
# "Server auth using Basic with user '...'", name it), the Authorization
# header libcurl builds from them, a Cookie, or a header= value (any name
# may carry a token): those lines say "***"; Range and the like show.
# (nbdkit 1.32 itself prints each parameter's value with -v, user= too;
# that line, "config key=...", is nbdkit's and not checked here, and
# password=+FILE keeps the secret out of it.)
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdinfo

printf 'hunter2' >"$tmp/pw"
user=us3r-n4me-zz9
b64=$(printf '%s:hunter2' "$user" | base64)

export_image ro 65536 -r -v -Dcurl.verbose=1 "user=$user" "password=+$tmp/pw" \
  "header=Cookie: session=c00kie-value" "header=X-Auth-Token: t0ken-value"
timeout "$client_timeout" nbdinfo --size "$uri" >/dev/null
stop_nbdkit ro

grep -v 'config key=' "$tmp/ro.err" >"$tmp/plugin.err"
for secret in hunter2 "$user" "$b64" c00kie-value t0ken-value; do
  if grep -qF -- "$secret" "$tmp/plugin.err"; then
    grep -F -- "$secret" "$tmp/plugin.err" >&2
    fail "a secret was printed: $secret"
  fi
done
grep -qF '> Authorization: ***' "$tmp/plugin.err" ||
  fail "no masked Authorization line: was the request shown at all?"
grep -qF '> Cookie: ***' "$tmp/plugin.err" || fail "no masked Cookie line"
grep -qF '> X-Auth-Token: ***' "$tmp/plugin.err" ||
  fail "no masked X-Auth-Token line"
grep -qF '> Range: bytes=' "$tmp/plugin.err" || fail "Range not shown"
grep -qF '< HTTP/1.1 206' "$tmp/plugin.err" || fail "answers not shown"

# A redirect whose Location carries a user name and password: the
# Location line shows the URL without them (and libcurl's notes do not
# name them either).
stop_pid "$nginx_pid"
make_random_file "$tmp/disk.img" 65536
start_fault_server redirect-userinfo "$tmp/disk.img"
start_nbdkit loc -r -v -D curl.verbose=1 "$PLUGIN" \
  "http://127.0.0.1:$fault_port/disk.img"
timeout "$client_timeout" nbdinfo --size "$uri" >/dev/null
stop_nbdkit loc
grep -qi '< Location: http://' "$tmp/loc.err" ||
  fail "the redirect's Location line was not shown"
for secret in LOCPW LOCUSER; do
  if grep -qF -- "$secret" "$tmp/loc.err"; then
    grep -F -- "$secret" "$tmp/loc.err" >&2
    fail "the Location's credentials were printed: $secret"
  fi
done

# An '@' in the URL's query is no user name's end: the message names
# the host connected to, not what follows the '@'.
dead=$(free_port)
expect_nbdkit_fails at -r "$PLUGIN" \
  "http://127.0.0.1:$dead/x?e=me@example.com"
grep -qF "http://127.0.0.1:$dead/x?..." "$tmp/at.err" ||
  fail "a query with '@': the message does not name the URL:" \
       "$(cat "$tmp/at.err")"
! grep -q example "$tmp/at.err" ||
  fail "a query with '@': the message names the query's host:" \
       "$(cat "$tmp/at.err")"

# Cookies the server sets, in Set-Cookie and in the obsolete Set-Cookie2
# (RFC 2965): the answer's lines say "***".
start_nginx 'location /set/ { alias DIR/www/;
      add_header Set-Cookie "srv=sc00kie-one";
      add_header Set-Cookie2 "srv2=sc00kie-two"; }'
make_random_file "$tmp/www/disk.img" 65536
start_nbdkit sc -r -v -D curl.verbose=1 "$PLUGIN" \
  "http://127.0.0.1:$port/set/disk.img"
timeout "$client_timeout" nbdinfo --size "$uri" >/dev/null
stop_nbdkit sc
for secret in sc00kie-one sc00kie-two; do
  if grep -qF -- "$secret" "$tmp/sc.err"; then
    grep -F -- "$secret" "$tmp/sc.err" >&2
    fail "a cookie the server set was printed: $secret"
  fi
done
grep -qi '< Set-Cookie2: \*\*\*' "$tmp/sc.err" ||
  fail "no masked Set-Cookie2 line: $(grep -i '^.*< set-cookie' "$tmp/sc.err")"
