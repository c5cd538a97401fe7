#!/usr/bin/env bash
# test-curl-docs.sh: the help text and the man page say the same thing:
# every key in `nbdkit PLUGIN --help` (params.h's table) has an
# "=item B<key=...>" entry in nbdkit-curl-plugin.pod, and every such
# entry is in --help; every parameter the table marks as going only to
# url='s origin (--dump-plugin's curl_origin_only) says so in its entry.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
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

# The origin-only parameters: the text of each one's entry (its group of
# =item lines and the paragraphs up to the next entry) names the origin.
nbdkit "$PLUGIN" --dump-plugin >"$tmp/dump.out" 2>&1 ||
  { cat "$tmp/dump.out" >&2; fail "nbdkit PLUGIN --dump-plugin failed"; }
only=$(sed -n 's/^curl_origin_only=//p' "$tmp/dump.out" | tr ',' ' ')
[ -n "$only" ] || fail "--dump-plugin has no curl_origin_only line"
for k in $only; do
  grep -qx "$k" "$tmp/help-keys" || fail "curl_origin_only names $k, not in --help"
  awk -v k="$k" '
    /^=item / { if (on && text) exit; if ($0 ~ "^=item \\[?B<" k "(=|>)") on = 1; next }
    /^=(head|back)/ { if (on) exit }
    on && /[^[:space:]]/ { text = 1; print }
  ' "$pod" >"$tmp/entry-$k"
  [ -s "$tmp/entry-$k" ] || fail "no entry text for $k= in $(basename "$pod")"
  grep -qi "origin" "$tmp/entry-$k" ||
    fail "$k= goes only to url's origin (curl_origin_only), its entry does not say so"
done
echo "origin only, each entry says so: $only"
