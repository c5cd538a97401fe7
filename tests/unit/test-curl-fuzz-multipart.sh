#!/usr/bin/env bash
# test-curl-fuzz-multipart.sh: the multipart/byteranges parser against a
# few thousand mutated answers (tests/unit/fuzz-multipart.c): each is refused
# or gives every read exactly the object's bytes, parts 1 or 2 bytes off
# their Content-Range are refused, legal answers accepted.  A failure
# names the seed and case and leaves the answer in
# fuzz-multipart-SEED-CASE.body in the current directory.
#
# Longer runs: FUZZ_SEED=7 FUZZ_COUNT=500000 make check \
#   TESTS=unit/test-curl-fuzz-multipart.sh
# (or run tests/unit/fuzz-multipart).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"

fuzz=$abs_top_builddir/tests/unit/fuzz-multipart
[ -x "$fuzz" ] || fail "fuzz-multipart not built: $fuzz"

# Bounded: the default run takes seconds, also under ASan.
st=0
timeout 600 "$fuzz" "${FUZZ_SEED:-1}" "${FUZZ_COUNT:-10000}" \
        >"$tmp/fuzz.out" 2>"$tmp/fuzz.err" || st=$?
cat "$tmp/fuzz.out"
[ "$st" -eq 0 ] || {
  head -n 40 "$tmp/fuzz.err" >&2
  fail "fuzz-multipart failed (exit status $st)"
}
grep -q '^fuzz-multipart: seed .* random cases' "$tmp/fuzz.out" ||
  fail "fuzz-multipart printed no summary"
