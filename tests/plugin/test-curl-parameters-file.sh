#!/usr/bin/env bash
# test-curl-parameters-file.sh: every parameter in `nbdkit PLUGIN --help`,
# each with a valid value, on a file: URL and no server at all (like
# nbdkit's test-curl-options).  nbdkit must start and a copy of the
# whole export must equal the file.
# Nothing in settings/config.c refuses a parameter because the URL is file:, and
# libcurl's file: handler uses no network, so these are accepted and
# have no effect here: proxy, proxy-user, proxy-password, proxy-cainfo,
# proxy-capath (a proxy that nothing listens on still gives the file's
# bytes), unix-socket-path (a socket that does not exist), resolve,
# ipresolve, tcp-keepalive,
# tcp-nodelay, sslverify, cainfo, capath, ssl-version, ssl-cipher-list,
# tls13-ciphers, header, user, password, cookie, cookiefile, user-agent,
# aws-sigv4, followlocation, location-trusted, insecure-redirect,
# pin-object (not used for file:, object/object.c), mirror-same-etag (no
# mirrors: nothing to prove), readahead, readahead-size
# (no read-ahead for file:, read/readahead.c), checksum (the file's own: the
# copy reads it in order), cache-dir, cache-size and cache-fill (a file:
# URL has no ETag, so nothing is kept: cache/cache.c), http-version where
# libcurl has that version.  cookiejar is written at exit (libcurl's header, no
# cookies).  The scripts of header-script= and cookie-script= run at
# start-up even for file: (script_init does not look at the scheme).
# Refused at start-up, with a message naming the cause:
#   - mirror= ("mirror: url= is a file: URL; mirrors are for http and
#     https");
#   - protocols= without file ("url: the scheme 'file' of ... is not in
#     protocols=http");
#   - an http-version= this libcurl was built without ("this libcurl
#     (7.88.1) was built without HTTP/3": 3 and 3only on Debian 12).
# A parameter in --help that no case below uses fails the test: a new
# parameter gets a case here before it ships.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy

make_random_file "$tmp/disk.img" $((1024 * 1024 + 4321))
file_url=file://$tmp/disk.img
# A port that nothing listens on, for the proxy and resolve cases.
dead_port=$(free_port)
make_cert
mkdir "$tmp/capath"
cp "$tmp/cert.pem" "$tmp/capath/"
printf 'pa55word' >"$tmp/pw"
printf '127.0.0.1\tFALSE\t/\tFALSE\t0\tjar\tyes\n' >"$tmp/jar-in"

tested=()

# run NAME ARGS...: nbdkit on the plugin with ARGS copies the export
# with nbdcopy; status in $st, stderr in $tmp/NAME.err, the copy in
# $tmp/NAME.img.  The KEY of each KEY=VALUE in ARGS counts as tested.
run ()
{
  local name=$1 p
  shift
  for p in "$@"; do
    [ "${p%%=*}" = "$p" ] || tested+=("${p%%=*}")
  done
  rm -f "$tmp/$name.img"
  st=0
  OUT=$tmp/$name.img timeout 60 "${NBDKIT[@]}" -f -U - "$PLUGIN" "$@" \
    --run 'nbdcopy "$uri" "$OUT"' </dev/null >"$tmp/$name.out" \
    2>"$tmp/$name.err" || st=$?
  assert_no_crash "$tmp/$name.err" "$st"
}

# ok NAME PARAMS...: accepted, and the copy is the file.
ok ()
{
  local name=$1
  run "$name" "$file_url" "${@:2}"
  if [ "$st" -ne 0 ]; then
    problem "($name) ${*:2}: nbdkit exited with $st:" \
            "$(tail -n 3 "$tmp/$name.err")"
  elif ! cmp -s "$tmp/disk.img" "$tmp/$name.img"; then
    problem "($name) ${*:2}: the copy differs from the file"
  fi
}

# refused NAME MESSAGE PARAMS...: nbdkit exits non-zero at start-up and
# says MESSAGE.
refused ()
{
  local name=$1 msg=$2
  shift 2
  run "$name" "$file_url" "$@"
  if [ "$st" -eq 0 ]; then
    problem "($name) $*: accepted, expected a refusal"
  elif ! grep -qF -- "$msg" "$tmp/$name.err"; then
    problem "($name) $*: no '$msg' in: $(tail -n 3 "$tmp/$name.err")"
  fi
}

# ok_or_built_without NAME FEATURE PARAMS...: as ok where libcurl has
# FEATURE, else refused with "was built without FEATURE".
ok_or_built_without ()
{
  local name=$1 feature=$2
  shift 2
  run "$name" "$file_url" "$@"
  if [ "$st" -eq 0 ]; then
    cmp -s "$tmp/disk.img" "$tmp/$name.img" ||
      problem "($name) $*: the copy differs from the file"
  elif ! grep -qF "was built without $feature" "$tmp/$name.err"; then
    problem "($name) $*: exited with $st: $(tail -n 3 "$tmp/$name.err")"
  fi
}

# The URL as a key (the others give it as the first bare value).
run url "url=$file_url"
[ "$st" -eq 0 ] && cmp -s "$tmp/disk.img" "$tmp/url.img" ||
  problem "(url) url=$file_url: status $st: $(tail -n 3 "$tmp/url.err")"

ok connections connections=4
ok timeout timeout=30
ok timeout-0 timeout=0
ok retries retries=0
ok retry-delay retry-delay=0.25
ok pin-object pin-object=false
ok readahead readahead=false
ok readahead-size readahead-size=4M
ok readahead-size-0 readahead-size=0
ok checksum "checksum=sha256:$(sha256sum <"$tmp/disk.img" | cut -d' ' -f1)"
ok cache-dir "cache-dir=$tmp/cachedir"
ok cache-size "cache-dir=$tmp/cachedir" cache-size=16M
ok cache-fill "cache-dir=$tmp/cachedir" cache-fill=true
refused cache-size-alone "cache-size= and cache-fill= need cache-dir=" \
  cache-size=16M
ok sslverify sslverify=false
ok cainfo "cainfo=$tmp/cert.pem"
ok capath "capath=$tmp/capath"
ok header "header=X-Test: 1" "header=X-Other: 2"
ok user user=alice
ok password user=alice "password=+$tmp/pw"
ok followlocation followlocation=false
ok location-trusted location-trusted=true
ok insecure-redirect insecure-redirect=true
ok protocols protocols=file
ok protocols-all protocols=http,https,file
refused protocols-http "is not in protocols=http" protocols=http
refused mirror "mirror: url= is a file: URL" mirror=http://127.0.0.1:9/disk.img
ok mirror-same-etag mirror-same-etag=true
ok user-agent user-agent=nbdkit-test/1
ok cookie cookie=session=abc
ok cookiefile "cookiefile=$tmp/jar-in"
ok cookiefile-empty cookiefile=
ok cookiejar "cookiejar=$tmp/jar-out"
[ -f "$tmp/jar-out" ] || problem "cookiejar: no $tmp/jar-out written at exit"
ok cookie-script "cookie-script=touch $tmp/cookie-ran; echo c=1" \
  cookie-script-renew=60
[ -f "$tmp/cookie-ran" ] || problem "cookie-script did not run for file:"
ok header-script "header-script=touch $tmp/header-ran; echo X-A: 1" \
  header-script-renew=60
ok redirect-cache redirect-cache=false
# url-script is for http(s) URLs that expire; with a file: URL it is
# refused, and its -renew needs it.
refused url-script "url= is a file: URL" "url-script=echo $file_url"
refused url-script-renew "needs url-script" url-script-renew=5
[ -f "$tmp/header-ran" ] || problem "header-script did not run for file:"
ok proxy "proxy=http://127.0.0.1:$dead_port" proxy-user=bob \
  "proxy-password=+$tmp/pw"
ok proxy-ca "proxy=https://127.0.0.1:$dead_port" \
  "proxy-cainfo=$tmp/cert.pem" "proxy-capath=$tmp/capath"
for v in none 1.0 1.1; do
  ok "http-$v" "http-version=$v"
done
for v in 2.0 2TLS 2-prior-knowledge; do
  ok_or_built_without "http-$v" HTTP/2 "http-version=$v"
done
for v in 3 3only; do
  ok_or_built_without "http-$v" HTTP/3 "http-version=$v"
done
for v in default tlsv1 tlsv1.0 tlsv1.1 tlsv1.2 tlsv1.3; do
  ok "ssl-$v" "ssl-version=$v"
done
ok ssl-cipher-list ssl-cipher-list=ECDHE-RSA-AES256-GCM-SHA384
ok tls13-ciphers tls13-ciphers=TLS_AES_256_GCM_SHA384
ok tcp-keepalive tcp-keepalive=true
ok tcp-nodelay tcp-nodelay=false
ok unix-socket-path "unix-socket-path=$tmp/nobody.sock"
ok resolve "resolve=example.test:$dead_port:127.0.0.1"
for v in any v4 v6; do
  ok "ipresolve-$v" "ipresolve=$v"
done
ok aws-sigv4 aws-sigv4=aws:amz:us-east-1:s3 user=AKIDEXAMPLE \
  "password=+$tmp/pw"

# Every key of --help has a case above, and every case's key is in
# --help.  Keys are at the start of the lines after "plugin: NAME".
nbdkit "$PLUGIN" --help >"$tmp/help.out" 2>&1 ||
  { cat "$tmp/help.out" >&2; fail "nbdkit PLUGIN --help failed"; }
sed -n '/^plugin: /,$p' "$tmp/help.out" |
  sed -nE 's/^[[:space:]]*([A-Za-z][A-Za-z0-9_-]*)=.*/\1/p' |
  sort -u >"$tmp/help-keys"
[ "$(wc -l <"$tmp/help-keys")" -ge 10 ] ||
  fail "found only $(wc -l <"$tmp/help-keys") keys in --help"
printf '%s\n' "${tested[@]}" | sort -u >"$tmp/tested-keys"
untested=$(comm -23 "$tmp/help-keys" "$tmp/tested-keys")
[ -z "$untested" ] ||
  problem "in --help but not tried on a file: URL here:" $untested
unknown=$(comm -13 "$tmp/help-keys" "$tmp/tested-keys")
[ -z "$unknown" ] || problem "tried here but not in --help:" $unknown

check_problems
echo "$(wc -l <"$tmp/tested-keys") parameters tried on a file: URL"
