#!/usr/bin/env bash
# test-curl-comments.sh: the plugin's comments stay readable and true to
# the tree:
#  - the top comments (each file's first comment, without its copyright
#    lines) of plugins/curl average at most MAX_WORDS words a sentence;
#    a sentence ends at ". ", and indented lines (tables, diagrams,
#    formulas) are not prose, so they are left out;
#  - every file that a comment names (name.c, folder/name.h) exists: a
#    bare name somewhere under plugins/curl, a path from plugins/curl or
#    from the top of the tree.
# Prints the files with the longest sentences, for whoever goes over.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"

"$PYTHON" - "$abs_top_srcdir" <<'EOF' || fail "plugins/curl comments: see above"
import glob, os, re, sys

MAX_WORDS = 22
top = sys.argv[1]
plugin = os.path.join(top, "plugins", "curl")
files = sorted(glob.glob(os.path.join(plugin, "**", "*.[ch]"),
                         recursive=True))
basenames = {os.path.basename(f) for f in files}
problems = []

def prose(comment):
    """The comment's text, without its stars, copyright and tables."""
    lines = []
    for line in comment.split("\n"):
        line = re.sub(r"^\s*(/\*|\*/|\*)? ?", "", line).rstrip()
        line = re.sub(r"\*/$", "", line).rstrip()
        if line.startswith("  "):
            continue
        if re.search(r"nbdkit-curl-plugin$|Copyright|SPDX", line):
            continue
        lines.append(line)
    return re.sub(r"\s+", " ", " ".join(lines)).strip()

words = sentences = 0
rows = []
for f in files:
    text = open(f).read()
    name = os.path.relpath(f, plugin)
    first = re.search(r"/\*.*?\*/", text, re.S)
    if first is not None:
        body = prose(first.group(0))
        s = [x for x in re.split(r"\.\s+|\.$", body) if x.strip()]
        if s:
            w = sum(len(x.split()) for x in s)
            words += w
            sentences += len(s)
            rows.append((w / len(s), name))
    for c in re.finditer(r"/\*.*?\*/", text, re.S):
        line = text.count("\n", 0, c.start()) + 1
        for ref in re.findall(r"(?<![\w./-])((?:[\w-]+/)*[\w-]+\.[ch])\b",
                              c.group(0)):
            if "/" in ref:
                ok = (os.path.exists(os.path.join(plugin, ref)) or
                      os.path.exists(os.path.join(top, ref)))
            else:
                ok = ref in basenames
            if not ok:
                problems.append("%s:%d: names %s, which does not exist"
                                % (name, line, ref))

average = words / sentences if sentences else 0
print("top comments: %d files, %d sentences, %d words: %.1f words a "
      "sentence (at most %d)" % (len(rows), sentences, words, average,
                                 MAX_WORDS))
for avg, name in sorted(rows, reverse=True)[:5]:
    print("  %5.1f  %s" % (avg, name))
if average > MAX_WORDS:
    problems.append("top comments average %.1f words a sentence, over %d"
                    % (average, MAX_WORDS))
for p in problems:
    print(p)
sys.exit(1 if problems else 0)
EOF
