#!/usr/bin/env bash
# test-layout.sh: no two source files depend on each other, directly or
# through others, in the plugin or in curlpipe: a file that calls into
# another (uses a symbol it defines) is below it, and nothing below calls
# back up.  Read from the built objects (nm), so it sees every call the
# compiler kept, not what a grep of the sources guesses.  Prints the
# files each one calls, and the cycles, if any.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")}/functions.sh"
requires nm

check_program ()
{
  local what=$1 objs
  shift
  objs=("$@")
  [ -e "${objs[0]}" ] || fail "$what: no objects (${objs[0]}): not built?"
  for o in "${objs[@]}"; do
    echo "== $(basename "$o" .o)"
    nm -g --defined-only "$o" | awk '{ print "D", $3 }'
    nm -u "$o" | awk '{ print "U", $2 }'
  done >"$tmp/$what.nm"
  "$PYTHON" - "$what" "$tmp/$what.nm" <<'PY' || problem "$what: a cycle"
import sys
what, path = sys.argv[1], sys.argv[2]
defs, uses, cur = {}, {}, None
for line in open(path):
    kind, name = line.split()
    if kind == "==":
        # libtool's and automake's prefixes: nbdkit_curl_plugin_la-X, curlpipe-X
        cur = name.split("-", 1)[-1]
        uses[cur] = set()
    elif kind == "D":
        defs[name] = cur
    else:
        uses[cur].add(name)
calls = {f: sorted({defs[s] for s in u if s in defs and defs[s] != f})
         for f, u in uses.items()}
for f in sorted(calls):
    print("%s: %s -> %s" % (what, f, " ".join(calls[f]) or "-"))
# Strongly connected components (Tarjan): any with two files is a cycle.
index, low, stack, on, sccs, n = {}, {}, [], set(), [], [0]
def visit(v):
    index[v] = low[v] = n[0]; n[0] += 1
    stack.append(v); on.add(v)
    for w in calls[v]:
        if w not in index:
            visit(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        c = []
        while True:
            w = stack.pop(); on.discard(w); c.append(w)
            if w == v:
                break
        sccs.append(c)
for v in sorted(calls):
    if v not in index:
        visit(v)
bad = [c for c in sccs if len(c) > 1]
for c in bad:
    print("%s: these files call each other: %s" % (what, " ".join(sorted(c))),
          file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

shopt -s nullglob
check_program plugin "$abs_top_builddir"/plugins/curl/.libs/*.o \
  "$abs_top_builddir"/common/.libs/nbdkit_curl_plugin_la-*.o
check_program curlpipe "$abs_top_builddir"/curlpipe/curlpipe-*.o \
  "$abs_top_builddir"/common/curlpipe-*.o
check_problems
