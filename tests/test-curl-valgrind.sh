#!/usr/bin/env bash
# test-curl-valgrind.sh: a whole read-only copy under valgrind: no memory
# errors and no definite leaks in nbdkit with the plugin (load, probe,
# parallel reads, close, unload), with the parameters that allocate:
# header and cookie scripts (renewed), the cookie engine, resolve=,
# header=.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")}/functions.sh"
requires_plugin
requires valgrind
requires nbdcopy
# valgrind and ASan cannot share a process.
[ -z "$ASAN_RUNTIME" ] || skip "built with sanitizers"

size=$((4 * 1024 * 1024 + 123))
start_nginx
make_random_file "$tmp/www/disk.img" "$size"

# NBDKIT_VALGRIND=1 keeps the plugin loaded at exit so its stack frames
# resolve.  valgrind traces nbdkit only, not the --run client.
st=0
NBDKIT_VALGRIND=1 COPIED=$tmp/copied timeout 120 \
  valgrind --leak-check=full --errors-for-leak-kinds=definite \
           --error-exitcode=99 --log-file="$tmp/valgrind.log" \
  nbdkit -f -r -U - "$PLUGIN" "http://127.0.0.1:$port/disk.img" \
         'header-script=echo "X-Token: $iteration"' header-script-renew=1 \
         'cookie-script=echo "c=$iteration"' cookiefile= \
         "resolve=example.test:$port:127.0.0.1" "header=X-A: 1" \
         --run 'nbdcopy "$uri" null: && echo copied >"$COPIED"' \
  >"$tmp/nbdkit.out" 2>"$tmp/nbdkit.err" || st=$?
[ "$st" -ne 99 ] || fail "valgrind found errors (see valgrind.log above)"
[ "$st" -eq 0 ] || fail "nbdkit under valgrind exited with status $st"
[ -f "$tmp/copied" ] || fail "nbdcopy did not run"
grep -q 'ERROR SUMMARY: 0 errors' "$tmp/valgrind.log" ||
  fail "valgrind reports errors"
grep -qE '^[0-9]+ GET bytes=[0-9]+-[0-9]+ 206 ' "$tmp/access.log" ||
  fail "no ranged GET reached nginx"
