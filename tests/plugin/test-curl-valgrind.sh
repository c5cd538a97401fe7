#!/usr/bin/env bash
# test-curl-valgrind.sh: a whole read-only copy under valgrind: no memory
# errors and no definite leaks in nbdkit with the plugin (load, probe,
# parallel reads, close, unload), with the parameters that allocate:
# header and cookie scripts (renewed), the cookie engine, resolve=,
# header=; and the cache (cache-dir=, its fill and eviction threads,
# blocks made of pieces), cold then warm.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_valgrind
requires nbdcopy

size=$((4 * 1024 * 1024 + 123))
serve_image "$size"

# valgrind traces nbdkit only, not the --run client.
st=0
nbdkit_valgrind copy
COPIED=$tmp/copied timeout 120 \
  "${vg[@]}" -U - "$PLUGIN" "$url" \
         'header-script=echo "X-Token: $iteration"' header-script-renew=1 \
         'cookie-script=echo "c=$iteration"' cookiefile= \
         "resolve=example.test:$port:127.0.0.1" "header=X-A: 1" \
         --run 'nbdcopy "$uri" null: && echo copied >"$COPIED"' \
  >"$tmp/nbdkit.out" 2>"$tmp/nbdkit.err" || st=$?
valgrind_clean copy "$st"
[ -f "$tmp/copied" ] || fail "nbdcopy did not run"
grep -qE '^[0-9]+ GET bytes=[0-9]+-[0-9]+ 206 ' "$tmp/access.log" ||
  fail "no ranged GET reached nginx"

# The cache (cache-dir=): its fill and eviction threads, blocks made of
# pieces (reads of 64 KiB), then a run served from disk; both unload
# clean.
for run in cache-cold cache-warm; do
  st=0
  rm -f "$tmp/copied"
  nbdkit_valgrind "$run"
  req=--request-size=65536
  [ "$run" = cache-warm ] && req=
  COPIED=$tmp/copied timeout 120 \
    "${vg[@]}" -U - "$PLUGIN" "$url" cache-dir="$tmp/cache" \
           cache-fill=true cache-size=3M \
           --run "nbdcopy $req \"\$uri\" null: && echo copied >\"\$COPIED\"" \
    >"$tmp/nbdkit.out" 2>"$tmp/nbdkit.err" || st=$?
  valgrind_clean "$run" "$st"
  [ -f "$tmp/copied" ] || fail "nbdcopy did not run ($run)"
done
[ -n "$(find "$tmp/cache" -name '*.blk')" ] || fail "no block was kept"
