#!/usr/bin/env bash
# test-curlpipe-docs.sh: curlpipe's help text and man page say the same
# thing: every long option in `curlpipe --help` has an "=item" entry in
# curlpipe.pod, every such entry is in --help, and both list the same
# exit statuses.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

pod=$abs_top_srcdir/curlpipe/curlpipe.pod
[ -f "$pod" ] || fail "no man page: $pod"
curlpipe --help >"$tmp/help.out" || fail "curlpipe --help failed"

grep -oE -- '--[a-z][a-z0-9.-]*' "$tmp/help.out" | sort -u >"$tmp/help-opts"
[ "$(wc -l <"$tmp/help-opts")" -ge 14 ] ||
  fail "found only $(wc -l <"$tmp/help-opts") options in --help"
# "=item B<-X>, B<--request> METHOD" and "=item B<--http2>".
sed -nE 's/^=item .*B<(--[a-z][a-z0-9.-]*)>.*/\1/p' "$pod" |
  sort -u >"$tmp/pod-opts"
diff -u "$tmp/help-opts" "$tmp/pod-opts" >"$tmp/diff" || {
  cat "$tmp/diff" >&2
  fail "options in --help (-) and in curlpipe.pod (+) differ"
}

# "Exit status: 0 success, 1 ..., 2 ..., 22 ..." and "=item B<22>".
help_codes=$(sed -n '/^Exit status/,/^$/p' "$tmp/help.out" |
               grep -oE '(^|[ :,]) ?[0-9]+ [A-Za-z]' | grep -oE '[0-9]+' |
               sort -n | tr '\n' ' ')
pod_codes=$(sed -nE 's/^=item B<([0-9]+)>$/\1/p' "$pod" | sort -n |
              tr '\n' ' ')
[ -n "$help_codes" ] && [ "$help_codes" = "$pod_codes" ] ||
  fail "exit statuses: --help has '$help_codes', the man page '$pod_codes'"
