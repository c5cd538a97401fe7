#!/usr/bin/env bash
# test-curl-style.sh: the mechanical style rules (scripts/check-style).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"

script=$abs_top_srcdir/scripts/check-style
[ -f "$script" ] || skip "scripts/check-style does not exist yet"
[ -x "$script" ] || fail "$script is not executable"
(cd "$abs_top_srcdir" && "$script")
