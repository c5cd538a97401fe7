#!/usr/bin/env bash
# test-curl-docs.sh: the help text and the man page say the same thing:
# every key in `nbdkit PLUGIN --help` has an "=item B<key=...>" entry in
# nbdkit-curl-plugin.pod, and every such entry is in --help.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")}/functions.sh"
requires_plugin

pod=$abs_top_srcdir/plugins/curl/nbdkit-curl-plugin.pod
[ -f "$pod" ] || fail "no man page: $pod"

nbdkit "$PLUGIN" --help >"$tmp/help.out" 2>&1 ||
  { cat "$tmp/help.out" >&2; fail "nbdkit PLUGIN --help failed"; }

# The plugin's section follows nbdkit's own, after the "plugin: NAME"
# line; keys are at the start of lines "key=<VALUE>   description".
sed -n '/^plugin: /,$p' "$tmp/help.out" |
  sed -nE 's/^[[:space:]]*([A-Za-z][A-Za-z0-9_-]*)=.*/\1/p' |
  sort -u >"$tmp/help-keys"
n=$(wc -l <"$tmp/help-keys")
[ "$n" -ge 10 ] || {
  cat "$tmp/help.out" >&2
  fail "found only $n keys in --help"
}

# "=item B<key=>VALUE", "=item B<key=false>", "=item [B<url=>]URL".
sed -nE 's/^=item \[?B<([A-Za-z][A-Za-z0-9_-]*)(=[^>]*)?>.*/\1/p' "$pod" |
  sort -u >"$tmp/pod-keys"

missing=$(comm -23 "$tmp/help-keys" "$tmp/pod-keys")
[ -z "$missing" ] || fail "in --help but not in $(basename "$pod"):" $missing
extra=$(comm -13 "$tmp/help-keys" "$tmp/pod-keys")
[ -z "$extra" ] || fail "in $(basename "$pod") but not in --help:" $extra
echo "$n keys documented: $(tr '\n' ' ' <"$tmp/help-keys")"
