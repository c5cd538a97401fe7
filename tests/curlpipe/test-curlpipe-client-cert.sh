#!/usr/bin/env bash
# test-curlpipe-client-cert.sh: --cert FILE and --key FILE present a
# client certificate: nginx with ssl_verify_client on (and a CA the test
# makes) sees it (its subject comes back in the answer) and takes the
# upload; a FILE holding both certificate and key works with --cert
# alone; without a certificate nginx refuses (400, so 22 with -f).
# --cert FILE:PASSWORD, curl's syntax, gives the password of an
# encrypted key (in --key's file or in FILE), with "\:" for a ':' in
# FILE's name, side by side with curl; the password is never printed
# (not in the message on a file that does not load, nor in
# %{errormsg}) and is blanked in /proc/PID/cmdline.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

make_cert
# A CA of our own and a client certificate it signed.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=curlpipe-test-ca \
        -keyout "$tmp/ca-key.pem" -out "$tmp/ca.pem" 2>"$tmp/openssl.err" ||
  fail "openssl could not make the CA"
openssl req -newkey rsa:2048 -nodes -subj /CN=curlpipe-client \
        -keyout "$tmp/client-key.pem" -out "$tmp/client.csr" \
        2>>"$tmp/openssl.err" || fail "openssl could not make the request"
openssl x509 -req -in "$tmp/client.csr" -CA "$tmp/ca.pem" \
        -CAkey "$tmp/ca-key.pem" -CAcreateserial -days 2 \
        -out "$tmp/client.pem" 2>>"$tmp/openssl.err" ||
  fail "openssl could not sign the client certificate"
cat "$tmp/client.pem" "$tmp/client-key.pem" >"$tmp/client-both.pem"
openssl pkey -in "$tmp/client-key.pem" -aes256 -passout pass:SEKpass \
        -out "$tmp/client-enc.pem" 2>>"$tmp/openssl.err" ||
  fail "openssl could not encrypt the key"
cat "$tmp/client.pem" "$tmp/client-enc.pem" >"$tmp/both:enc.pem"
chmod 644 "$tmp"/*.pem

start_nginx_put 'ssl_client_certificate DIR/ca.pem;
    ssl_verify_client on;
    location = /whoami { return 200 "$ssl_client_s_dn\n"; }'
url=https://127.0.0.1:$tlsport

# run NAME ARGS...: curlpipe -sf --cacert ... ARGS, standard input NAME;
# status in $st, stdout in $tmp/out, stderr in $tmp/err.
run ()
{
  local name=$1
  shift
  st=0
  printf '%s' "$name" |
    curlpipe -sf --cacert "$tmp/cert.pem" "$@" >"$tmp/out" 2>"$tmp/err" ||
    st=$?
}

run pair --cert "$tmp/client.pem" --key "$tmp/client-key.pem" "$url/put/pair"
if [ "$st" -ne 0 ]; then
  problem "--cert and --key: exit status $st: $(cat "$tmp/err")"
else
  [ "$(cat "$tmp/www/pair")" = pair ] || problem "--cert and --key: no upload"
fi
run whoami --cert "$tmp/client.pem" --key "$tmp/client-key.pem" "$url/whoami"
if [ "$st" -ne 0 ]; then
  problem "--cert and --key, /whoami: exit status $st: $(cat "$tmp/err")"
else
  grep -q 'CN=curlpipe-client' "$tmp/out" ||
    problem "nginx saw the client as '$(cat "$tmp/out")'"
fi

run both --cert "$tmp/client-both.pem" "$url/put/both"
if [ "$st" -ne 0 ]; then
  problem "--cert with the key in it: exit status $st: $(cat "$tmp/err")"
else
  [ "$(cat "$tmp/www/both")" = both ] ||
    problem "--cert with the key in it: no upload"
fi

run none "$url/put/none"
[ "$st" -eq 22 ] ||
  problem "no client certificate: exit status $st, not 22: $(cat "$tmp/err")"
[ ! -e "$tmp/www/none" ] || problem "no client certificate: uploaded anyway"

# FILE:PASSWORD, with the key apart and in FILE (whose name has a ':'),
# as curl takes them.
for who in curl curlpipe; do
  for c in "client.pem:SEKpass --key $tmp/client-enc.pem" \
           'both\:enc.pem:SEKpass'; do
    name=$who-${c%%.*}
    name=${name%%\\*}
    st=0
    if [ "$who" = curl ]; then
      printf '%s' "$name" |
        timeout "$client_timeout" curl -sSf -T - --cacert "$tmp/cert.pem" \
          --cert "$tmp/"$c "$url/put/$name" >"$tmp/out" 2>"$tmp/err" ||
        st=$?
    else
      run "$name" --cert "$tmp/"$c "$url/put/$name"
    fi
    [ "$st" -eq 0 ] && [ "$(cat "$tmp/www/$name" 2>/dev/null)" = "$name" ] ||
      problem "$who --cert $c: exit status $st, no upload: $(cat "$tmp/err")"
    ! grep -q SEK "$tmp/err" || problem "$who --cert $c: $(cat "$tmp/err")"
  done
done

# A file that does not load: curl's status, the message names the file
# and not the password.
want=0
timeout "$client_timeout" curl -sS --cacert "$tmp/cert.pem" \
  --cert "$tmp/none.pem:SEKpass" -T /dev/null "$url/put/x" \
  >/dev/null 2>"$tmp/curl.err" || want=$?
st=0
curlpipe -sS --cacert "$tmp/cert.pem" --cert "$tmp/none.pem:SEKpass" \
  -w '%{errormsg}' "$url/put/x" </dev/null >"$tmp/out" 2>"$tmp/err" || st=$?
[ "$st" -eq "$want" ] && [ "$st" -ne 0 ] ||
  problem "--cert none.pem:PASSWORD: exit status $st, curl's $want"
grep -q "none\.pem" "$tmp/err" ||
  problem "--cert none.pem:PASSWORD: the message does not name the file:" \
          "$(cat "$tmp/err")"
cat "$tmp/err" "$tmp/out" >"$tmp/both.txt"
! grep -q SEK "$tmp/both.txt" ||
  problem "--cert none.pem:PASSWORD: the password is printed:" \
          "$(cat "$tmp/both.txt")"

# While it runs (connected, its upload not ended), argv has no password.
rm -f "$tmp/in"
mkfifo "$tmp/in"
"$CURLPIPE" -sf --cacert "$tmp/cert.pem" --cert "$tmp/client.pem:SEKpass" \
  --key "$tmp/client-enc.pem" "$url/put/running" <"$tmp/in" \
  >"$tmp/out" 2>"$tmp/err" &
pid=$!
exec 3>"$tmp/in"
for ((i = 0; i < 200; i++)); do
  ls -l "/proc/$pid/fd" 2>/dev/null | grep -q 'socket:' && break
  sleep 0.05
done
cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || :)
# A subshell: if curlpipe is gone, SIGPIPE ends it, not the test.
(printf running >&3) 2>/dev/null || :
exec 3>&-
st=0
wait "$pid" || st=$?
[ "$st" -eq 0 ] && [ "$(cat "$tmp/www/running")" = running ] ||
  problem "--cert FILE:PASSWORD, running: exit status $st: $(cat "$tmp/err")"
case $cmdline in
  *"--cert $tmp/client.pem:"*) ;;
  *) problem "--cert FILE:PASSWORD: no --cert in cmdline '$cmdline'" ;;
esac
case $cmdline in
  *SEK*) problem "--cert FILE:PASSWORD: the password is in /proc/PID/" \
                 "cmdline: '$cmdline'" ;;
esac

check_problems
