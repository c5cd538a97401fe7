#!/usr/bin/env bash
# test-layout.sh: no two source files depend on each other, directly or
# through others, in the plugin or in curlpipe: a file that calls into
# another (uses a symbol it defines) is below it, and nothing below calls
# back up.  Read from the built objects (nm), so it sees every call the
# compiler kept, not what a grep of the sources guesses.  Prints the
# files each one calls, and the cycles, if any.
# The README's Layout section lists the plugin's files in that order,
# each above those it calls: checked here against the same calls, so
# that the list names every file and no file above one that calls it.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
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
  local readme=$abs_top_srcdir/README.md
  "$PYTHON" - "$what" "$tmp/$what.nm" "$readme" <<'PY' || problem "$what: see above"
import re, sys
what, path, readme = sys.argv[1], sys.argv[2], sys.argv[3]
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
# The README's list of the plugin's files, in its order.
order_bad = False
if what == "plugin":
    text = open(readme).read()
    block = re.search(r"\n    plugins/curl/(.*?)\n    \S", text, re.S)
    listed = []
    for name in re.findall(r"\b([a-z_]+)\.c\b", block.group(1) if block else ""):
        if name not in listed:
            listed.append(name)
    print("%s: the README's Layout lists: %s" % (what, " ".join(listed)))
    files = set(calls) - {"secrets"}
    for f in sorted(files - set(listed)):
        print("README's Layout does not name %s.c" % f, file=sys.stderr)
        order_bad = True
    for f in sorted(set(listed) - files):
        print("README's Layout names %s.c, which is not built" % f,
              file=sys.stderr)
        order_bad = True
    for f in sorted(files & set(listed)):
        for g in calls[f]:
            if g in listed and listed.index(g) < listed.index(f):
                print("README's Layout lists %s.c above %s.c, which calls it"
                      % (g, f), file=sys.stderr)
                order_bad = True
sys.exit(1 if bad or order_bad else 0)
PY
}

shopt -s nullglob
check_program plugin "$abs_top_builddir"/plugins/curl/.libs/*.o \
  "$abs_top_builddir"/common/.libs/nbdkit_curl_plugin_la-*.o
check_program curlpipe "$abs_top_builddir"/curlpipe/curlpipe-*.o \
  "$abs_top_builddir"/common/curlpipe-*.o
check_problems
