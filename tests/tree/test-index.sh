#!/usr/bin/env bash
# test-index.sh: tests/INDEX.md, the index from parameter, option and
# behaviour to test, stays true to the tree:
#  - every parameter in plugins/curl/settings/params.h (the rows of CURL_PARAMS)
#    has one row under "Plugin parameters", and that section names no
#    other;
#  - every long option of curlpipe/curlpipe.pod ("=item ... B<--NAME>")
#    has one row under "curlpipe options", and that section names no
#    other;
#  - every row of those two sections names a test or says "no test";
#  - every test that tests/Makefile.am runs (its *_TESTS lists) is named
#    in the index, and every test the index names exists.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"

index=$abs_top_srcdir/tests/INDEX.md
[ -f "$index" ] || fail "no index: $index"

"$PYTHON" - "$abs_top_srcdir" <<'EOF' || fail "tests/INDEX.md: see above"
import glob, os, re, sys

top = sys.argv[1]
tests = os.path.join(top, "tests")
index = open(os.path.join(tests, "INDEX.md")).read()
problems = []

# The index's sections, by their "## " headings.
sections = {}
name = None
for line in index.splitlines():
    if line.startswith("## "):
        name = line[3:].strip()
        sections[name] = []
    elif name is not None:
        sections[name].append(line)

def rows(section):
    """The first column (without its backquotes) and the rest of each
    table row of SECTION."""
    if section not in sections:
        problems.append("no section '## %s'" % section)
        return []
    out = []
    for line in sections[section]:
        m = re.match(r"\|\s*`([^`]+)`\s*\|(.*)\|\s*$", line)
        if m:
            out.append((m.group(1), m.group(2)))
    return out

def check_rows(section, want, what):
    seen = {}
    for key, rest in rows(section):
        seen[key] = seen.get(key, 0) + 1
        if not re.search(r"\b(plugin|curlpipe|unit|tree)/", rest) and \
           "no test" not in rest:
            problems.append("%s: %s %s names no test (or 'no test')" %
                            (section, what, key))
    for key in sorted(want):
        if key not in seen:
            problems.append("%s: no row for the %s %s" % (section, what, key))
    for key in sorted(seen):
        if key not in want:
            problems.append("%s: a row for %s, which is no %s" %
                            (section, key, what))
        elif seen[key] > 1:
            problems.append("%s: %d rows for %s" % (section, seen[key], key))
    print("%s: %d %ss, %d rows" % (section, len(want), what, len(seen)))

params_h = open(os.path.join(top, "plugins/curl/settings/params.h")).read()
params = set(re.findall(r'^\s*P \("([a-z0-9-]+)"', params_h, re.M))
if len(params) < 10:
    problems.append("found only %d parameters in params.h" % len(params))
check_rows("Plugin parameters", params, "parameter")

options = set()
for line in open(os.path.join(top, "curlpipe/curlpipe.pod")):
    if line.startswith("=item "):
        options.update(re.findall(r"B<(--[a-z][a-z0-9.-]*)>", line))
if len(options) < 10:
    problems.append("found only %d options in curlpipe.pod" % len(options))
check_rows("curlpipe options", options, "option")

# The tests named in the index (a "*" matches as in the shell).
named = set(re.findall(r"\b((?:plugin|curlpipe|unit|tree)/(?:test|fuzz)-"
                       r"[A-Za-z0-9._*-]*[A-Za-z0-9*])", index))
for path in sorted(named):
    if not glob.glob(os.path.join(tests, path)):
        problems.append("the index names %s, which does not exist" % path)

# The tests make check runs: the words of every *_TESTS variable.
makefile = open(os.path.join(tests, "Makefile.am")).read()
makefile = makefile.replace("\\\n", " ")
run = set()
for m in re.finditer(r"^([A-Z_]+_TESTS)\s*=(.*)$", makefile, re.M):
    run.update(w for w in m.group(2).split() if "/" in w)
if len(run) < 10:
    problems.append("found only %d tests in tests/Makefile.am" % len(run))
for test in sorted(run):
    if test not in named and test + ".c" not in named:
        problems.append("%s (tests/Makefile.am) is not in the index" % test)
print("tests: %d in tests/Makefile.am, %d named in the index" %
      (len(run), len(named)))

for p in problems:
    print("INDEX.md: " + p, file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
