#!/usr/bin/env bash
# test-curlpipe-usage-secrets.sh: a usage error names the option or the
# header, never the value, which may be a secret: a header with a stray
# CR (-H $'Authorization: Bearer T\r'), a malformed one (-H 'X;y: T', -H
# 'T'), an ambiguous abbreviation (--prox=http://user:T@host), an
# unknown option with a value (--bogus=T), --data-binary with a value
# instead of @FILE.  Each exits 2 with exactly the expected message.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

try="Try 'curlpipe --help'."

# usage_error MESSAGE ARGS...: curlpipe ARGS exits 2 with stderr
# "curlpipe: MESSAGE" and the hint, nothing on stdout, no SECRET.
usage_error ()
{
  local want="curlpipe: $1" st=0
  shift
  curlpipe "$@" </dev/null >"$tmp/out" 2>"$tmp/err" || st=$?
  [ "$st" -eq 2 ] || problem "curlpipe $*: exit status $st, not 2"
  [ "$(cat "$tmp/err")" = "$want"$'\n'"$try" ] ||
    problem "curlpipe $*: stderr '$(cat "$tmp/err")', expected '$want'"
  ! grep -q SECRET "$tmp/err" "$tmp/out" ||
    problem "curlpipe $*: a secret is shown: $(cat "$tmp/err")"
  [ ! -s "$tmp/out" ] || problem "curlpipe $*: stdout '$(cat "$tmp/out")'"
}

url=http://127.0.0.1:1/x
usage_error "-H Authorization: not one 'Name: value' or 'Name;' header (its value is not shown)" \
  -H $'Authorization: Bearer SECRETH\r' "$url"
usage_error "-H X: not one 'Name: value' or 'Name;' header (its value is not shown)" \
  -H 'X;y: SECRETSEMI' "$url"
usage_error "-H: not one 'Name: value' or 'Name;' header (not shown)" \
  -H 'SECRETNONAME' "$url"
usage_error "-H: not one 'Name: value' or 'Name;' header (not shown)" \
  -H $'X\rSECRETCR: v' "$url"
usage_error "--prox: unknown or ambiguous option, or missing value" \
  --prox=http://u:SECRETAMB@127.0.0.1:1 "$url"
usage_error "--bogus: unknown or ambiguous option, or missing value" \
  --bogus=SECRETUNK "$url"
usage_error "--data-binary: only @- (standard input) or @FILE; the body is standard input (the value is not shown)" \
  --data-binary SECRETDATA "$url"

check_problems
