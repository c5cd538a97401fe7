#!/usr/bin/env bash
# test-layout.sh: the plugin's folders are layers, and no two source files
# depend on each other, directly or through others.
#
# Calls are read from the built objects (nm), so the test sees every call
# the compiler kept, not what a grep of the sources guesses.  A file calls
# another when it uses a symbol the other defines.
#
# The plugin (plugins/curl) is checked by folder.  From the top down:
#
#     top (curl.c, chain.c) > ops | cache > read > request
#     > scripts | transport | store > object > settings > rules > base
#
# A folder calls only folders below it.  Folders side by side (ops/ and
# cache/; scripts/, transport/ and store/) never call each other.  Everyone may call common/ (shared
# with curlpipe), which calls nothing of the plugin's.  Besides:
#  - no two files call each other, directly or through others;
#  - only transport/ calls mux_*, only read/ calls segment_* and stream_*;
#  - a file includes headers of its own folder and, of a folder below, only
#    that folder's header (ops/ops.h...); the rules include only rules/ and
#    base/ headers and system headers;
#  - every .c file is at the top or in one of those folders, and built;
#    at most 2 at the top and 8 in a folder;
#  - README.md's Layout table names every folder, top down, and the
#    folders each row says it uses are below it.
# It prints the files each file calls, and the folders each folder calls
# with the number of calls between their files.
#
# curlpipe is checked for cycles between its files only.
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
    # An object whose source is gone (a file moved since that build)
    # is left over, not part of the program.
    local rel=${o#"$abs_top_builddir"/} src
    src=${rel/\/.libs\//\/}
    src=${src%.o}.c
    src=${src/nbdkit_curl_plugin_la-/}
    src=${src/curlpipe-/}
    [ -e "$abs_top_srcdir/$src" ] || continue
    echo "== $rel"
    nm -g --defined-only "$o" | awk '{ print "D", $3 }'
    nm -u "$o" | awk '{ print "U", $2 }'
  done >"$tmp/$what.nm"
  if ! "$PYTHON" - "$what" "$tmp/$what.nm" "$abs_top_srcdir" <<'PY'
import os, re, sys
what, path, top = sys.argv[1], sys.argv[2], sys.argv[3]
problems = []

# The plugin's layers, top down; folders in one layer are side by side.
LAYERS = [["top"], ["ops", "cache"], ["read"], ["request"],
          ["scripts", "transport", "store"],
          ["object"], ["settings"], ["rules"], ["base"], ["common"]]
level = {f: i for i, layer in enumerate(LAYERS) for f in layer}
FOLDERS = [f for layer in LAYERS for f in layer if f not in ("top", "common")]
# Functions only their own folder may call, by prefix.
PRIVATE = {"mux_": "transport", "segment_": "read", "stream_": "read"}
MAX_C = {"top": 2}

def file_of(label):
    """A file's name and folder from its object's path: libtool's and
    automake's prefixes nbdkit_curl_plugin_la-X and curlpipe-X dropped,
    "read/pool" for the plugin, "pool" for curlpipe."""
    d, base = os.path.split(label)
    name = base[:-2].split("-", 1)[-1]
    if what != "plugin":
        return name, None
    d = d.replace("/.libs", "")
    if d == "plugins/curl":
        folder = "top"
    elif d.startswith("plugins/curl/"):
        folder = d[len("plugins/curl/"):]
    else:
        folder = d
    return folder + "/" + name, folder

defs, uses, folder_of, cur = {}, {}, {}, None
for line in open(path):
    kind, name = line.split()
    if kind == "==":
        cur, folder = file_of(name)
        folder_of[cur] = folder
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
for c in sccs:
    if len(c) > 1:
        problems.append("these files call each other: %s"
                        % " ".join(sorted(c)))

def check_folder_calls():
    """Each folder calls only folders below it; print the folder graph."""
    arrows = {}
    for f in sorted(calls):
        a = folder_of[f]
        if a not in level:
            problems.append("%s is in %s/, which is no layer" % (f, a))
            continue
        for g in calls[f]:
            b = folder_of[g]
            if a == b or b not in level:
                continue
            arrows.setdefault(a, {}).setdefault(b, 0)
            arrows[a][b] += 1
            if level[b] <= level[a]:
                used = sorted(s for s in uses[f] if defs.get(s) == g)
                how = "up" if level[b] < level[a] else "side by side"
                problems.append("%s calls %s (%s): %s/ calls %s/, %s"
                                % (f, g, " ".join(used), a, b, how))
        for s in sorted(uses[f]):
            for prefix, owner in PRIVATE.items():
                if s.startswith(prefix) and a != owner:
                    problems.append("%s calls %s: only %s/ calls %s*"
                                    % (f, s, owner, prefix))
    present = set(folder_of.values())
    floor = {}
    for layer in reversed(LAYERS):
        for a in layer:
            if a not in present:
                continue
            below = [floor[b] for b in arrows.get(a, {}) if b in floor]
            floor[a] = 1 + max(below, default=0)
    for layer in LAYERS:
        for a in layer:
            if a in present:
                print("%s: folder %s/ -> %s" % (what, a, " ".join(
                    "%s/(%d)" % (b, k) for b, k in sorted(
                        arrows.get(a, {}).items(),
                        key=lambda x: level[x[0]])) or "-"))
    print("%s: %d folders, %d floors, %d arrows between folders"
          % (what, len(floor), max(floor.values()),
             sum(len(t) for t in arrows.values())))

def check_sources():
    """Each .c is at the top or in a layer's folder, and built; each
    include goes down or stays in its folder."""
    src = os.path.join(top, "plugins/curl")
    counts = {}
    for d, dirs, files in os.walk(src):
        rel = os.path.relpath(d, src)
        folder = "top" if rel == "." else rel
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            where = "plugins/curl/" + ("" if rel == "." else rel + "/")
            if folder not in level or folder == "common":
                problems.append("%s%s is in no layer's folder" % (where, name))
                continue
            if name.endswith(".c"):
                counts[folder] = counts.get(folder, 0) + 1
                if folder + "/" + name[:-2] not in calls:
                    problems.append("%s%s is not built" % (where, name))
            check_includes(folder, where + name, os.path.join(d, name))
    for folder, k in sorted(counts.items()):
        if k > MAX_C.get(folder, 8):
            problems.append("%s/ has %d .c files (at most %d)"
                            % (folder, k, MAX_C.get(folder, 8)))
    return counts

def check_includes(folder, name, path):
    for line in open(path):
        m = re.match(r'\s*#\s*include\s*([<"])([^>"]+)[>"]', line)
        if not m:
            continue
        quoted, inc = m.group(1) == '"', m.group(2)
        head = inc.split("/")[0] if "/" in inc else None
        if not quoted:
            if head in FOLDERS:
                problems.append("%s includes <%s>: plugin headers are "
                                "included with quotes" % (name, inc))
            continue
        if head is None:
            owner = {"chain.h": "top", "secrets.h": "common"}.get(inc)
        else:
            owner = head if head in FOLDERS else None
        if owner is None:
            problems.append("%s includes \"%s\", which is no folder's "
                            "header" % (name, inc))
        elif folder == "rules" and owner not in ("rules", "base"):
            problems.append("%s includes \"%s\": the rules include only "
                            "the base" % (name, inc))
        elif owner != folder and level[owner] <= level[folder]:
            problems.append("%s includes \"%s\", a folder above or beside "
                            "its own" % (name, inc))
        elif head and owner != folder and inc != "%s/%s.h" % (head, head):
            problems.append("%s includes \"%s\": from outside %s/, only "
                            "%s/%s.h" % (name, inc, head, head, head))

def check_readme(counts):
    """README's Layout: a table whose rows name each folder, top down."""
    text = open(os.path.join(top, "README.md")).read()
    m = re.search(r"^## Layout\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    rows = []
    for line in (m.group(1) if m else "").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 3:
            continue
        f = re.match(r"`([a-z]+)/`", cells[0])
        t = re.match(r"`[a-z]+\.c`", cells[0])
        if f or t:
            rows.append((f.group(1) if f else "top", cells[2]))
    named = [r[0] for r in rows]
    print("%s: README's Layout names %s" % (what, " ".join(named)))
    for folder in sorted(set(counts) - set(named)):
        problems.append("README's Layout does not name %s" % (
            "the top (a row for its .c files)" if folder == "top"
            else folder + "/"))
    for folder in sorted(set(named) - set(counts)):
        problems.append("README's Layout names %s/, which has no .c file"
                        % folder)
    for a, b in zip(named, named[1:]):
        if a in level and b in level and level[b] < level[a]:
            problems.append("README's Layout lists %s/ above %s/, a "
                            "folder above it" % (a, b))
    for a, used in rows:
        for b in re.findall(r"`([a-z]+)/`", used):
            if a in level and (b not in level or level[b] <= level[a]):
                problems.append("README's Layout says %s/ uses %s/, "
                                "which is not below it" % (a, b))

if what == "plugin":
    check_folder_calls()
    check_readme(check_sources())
for p in problems:
    print("%s: %s" % (what, p), file=sys.stderr)
sys.exit(1 if problems else 0)
PY
  then
    problem "$what: see above"
  fi
}

shopt -s nullglob
check_program plugin "$abs_top_builddir"/plugins/curl/.libs/*.o \
  "$abs_top_builddir"/plugins/curl/*/.libs/*.o \
  "$abs_top_builddir"/common/.libs/nbdkit_curl_plugin_la-*.o
check_program curlpipe "$abs_top_builddir"/curlpipe/curlpipe-*.o \
  "$abs_top_builddir"/common/curlpipe-*.o
check_problems
