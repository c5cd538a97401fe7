#!/usr/bin/env bash
# test-curlpipe-write-out-vars.sh: -w expands every variable of curl
# 7.88's list (%{time_connect}, %{speed_upload}, %{url_effective},
# %{errormsg}, %{json} ...), %header{name}, %% and \n, never leaving
# one as literal text; each value has the shape curl gives it (run side
# by side with curl on the same server when curl is installed).  An
# unknown variable is written as nothing, with a warning on standard
# error.  -w @FILE and -w @- read the format (its lines joined, as curl
# does).  %{url} and %{url_effective} show no user name, password or
# query; %{errormsg} and %{onerror} work on a failure, %{stderr}
# switches the output to standard error.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

start_stream_server
url=http://127.0.0.1:$stream_port/echo

# name=shape: the regular expression each value must match.
int='^[0-9]+$'
secs='^[0-9]+\.[0-9]{6}$'
shapes=(
  "certs=^$" "content_type=^application/octet-stream$" "errormsg=^$"
  "exitcode=^0$" "filename_effective=^$" "ftp_entry_path=^$"
  "http_code=^200$" "http_connect=^000$" "http_version=^1\.1$"
  "local_ip=^127\.0\.0\.1$" "local_port=$int" "method=^PUT$"
  "num_certs=^0$" "num_connects=^1$" "num_headers=^2$"
  "num_redirects=^0$" "proxy_ssl_verify_result=^0$" "redirect_url=^$"
  "referer=^$" "remote_ip=^127\.0\.0\.1$" "remote_port=^$stream_port$"
  "response_code=^200$" "scheme=^HTTP$" "size_download=^5$"
  "size_header=$int" "size_request=$int" "size_upload=^5$"
  "speed_download=$int" "speed_upload=$int" "ssl_verify_result=^0$"
  "time_appconnect=$secs" "time_connect=$secs" "time_namelookup=$secs"
  "time_pretransfer=$secs" "time_redirect=$secs"
  "time_starttransfer=$secs" "time_total=$secs"
  "url=^http://127\.0\.0\.1:$stream_port/echo$"
  "url_effective=^http://127\.0\.0\.1:$stream_port/echo$" "urlnum=^0$"
)
format=
for s in "${shapes[@]}"; do
  format+="${s%%=*}=%{${s%%=*}}\\n"
done

# check_shapes FILE WHO: every line NAME=VALUE of FILE has its shape.
check_shapes ()
{
  local s name re line
  for s in "${shapes[@]}"; do
    name=${s%%=*} re=${s#*=}
    line=$(grep "^$name=" "$1" || :)
    [[ ${line#*=} =~ $re ]] ||
      problem "$2 -w '%{$name}': '${line:-no line}' does not match '$re'"
  done
}

st=0
printf 'hello' | curlpipe -s -o /dev/null -w "$format" "$url" >"$tmp/out" \
  2>"$tmp/err" || st=$?
[ "$st" -eq 0 ] || problem "-w, every variable: exit status $st"
! grep -q '%{' "$tmp/out" ||
  problem "-w left variables as text: $(grep '%{' "$tmp/out" | head -3)"
[ ! -s "$tmp/err" ] ||
  problem "-w, known variables: a warning: $(cat "$tmp/err")"
# -o /dev/null: curl's filename_effective is the file.
sed -i 's|^filename_effective=/dev/null$|filename_effective=|' "$tmp/out"
check_shapes "$tmp/out" curlpipe

# The same format with curl, for the shapes' sake (curl -T - sends
# "hello" chunked too; its size_upload counts the chunked framing).
if command -v curl >/dev/null; then
  printf 'hello' | timeout "$client_timeout" curl -s -T - -o /dev/null \
    -w "$format" "$url" >"$tmp/curl.out" 2>&1 || :
  sed -i -e 's|^filename_effective=/dev/null$|filename_effective=|' \
         -e 's|^size_upload=.*|size_upload=5|' "$tmp/curl.out"
  check_shapes "$tmp/curl.out" curl
fi

# %%, %header{name}, an unknown variable, \t; %{json} and
# %{header_json} are JSON.
st=0
printf 'hello' | curlpipe -s -o /dev/null \
  -w '100%%|%header{content-type}|%{nosuchvar}|a\tb|%{json}\n%{header_json}' \
  "$url" >"$tmp/out" 2>"$tmp/err" || st=$?
[ "$(head -1 "$tmp/out" | cut -d'|' -f1-4)" = \
  "100%|application/octet-stream||a	b" ] ||
  problem "-w '100%%|%header{content-type}|%{nosuchvar}|a\\tb': stdout is" \
          "'$(head -1 "$tmp/out" | cut -d'|' -f1-4)'"
grep -q "nosuchvar" "$tmp/err" ||
  problem "-w '%{nosuchvar}': no warning on stderr: '$(cat "$tmp/err")'"
head -1 "$tmp/out" | cut -d'|' -f5- |
  "$PYTHON" -c 'import json, sys; d = json.load(sys.stdin);
assert d["http_code"] == 200 and d["method"] == "PUT" and \
  d["size_upload"] == 5 and "time_connect" in d, d' 2>"$tmp/json.err" ||
  problem "%{json}: $(cat "$tmp/json.err")"
tail -n +2 "$tmp/out" |
  "$PYTHON" -c 'import json, sys; d = json.load(sys.stdin);
assert d["transfer-encoding"] == ["chunked"], d' 2>"$tmp/json.err" ||
  problem "%{header_json}: $(cat "$tmp/json.err")"

# -w @FILE (lines joined) and -w @- (the format from standard input,
# which is then all read: the body is empty).
printf '%s\n' 'code=%{http_code}' ' up=%{size_upload}' >"$tmp/format"
out=$(printf 'hello' | curlpipe -s -o /dev/null -w "@$tmp/format" "$url")
[ "$out" = "code=200 up=5" ] ||
  problem "-w @FILE: stdout is '$out', not 'code=200 up=5'"
out=$(printf 'm=%%{method}\n' | curlpipe -s -w @- "$url")
[ "$out" = "m=PUT" ] || problem "-w @-: stdout is '$out', not 'm=PUT'"

# Secrets: %{url} and %{url_effective} without user, password, query.
out=$(printf 'x' | curlpipe -s -o /dev/null -w '%{url} %{url_effective}' \
        "http://alice:PWSECRET@127.0.0.1:$stream_port/echo?sig=SIGSECRET")
[[ $out != *SECRET* && $out != *alice* ]] ||
  problem "-w '%{url} %{url_effective}' shows a secret: $out"
[[ $out == "http://127.0.0.1:$stream_port/echo?..."* ]] ||
  problem "-w '%{url}': '$out'"

# A failure: %{errormsg} says why, %{onerror} goes on, %{stderr}.
dead=$(free_port)
st=0
curlpipe -s -w '%{exitcode}:%{errormsg}%{onerror}|more%{stderr}ERR' \
  "http://127.0.0.1:$dead/x" </dev/null >"$tmp/out" 2>"$tmp/err" || st=$?
[ "$st" -eq 7 ] || problem "refused: exit status $st, not 7"
[[ $(cat "$tmp/out") == 7:*"127.0.0.1:$dead"*"|more" ]] ||
  problem "-w on a refused connection: stdout is '$(cat "$tmp/out")'"
grep -q 'ERR' "$tmp/err" ||
  problem "-w '%{stderr}ERR': not on standard error: $(cat "$tmp/err")"
out=$(printf x | curlpipe -s -o /dev/null -w 'a%{onerror}b' "$url")
[ "$out" = a ] || problem "-w 'a%{onerror}b' on success: '$out', not 'a'"

check_problems
