#!/usr/bin/env bash
# test-curl-script-fds.sh: header-script and cookie-script get standard
# input, output and error only, not nbdkit's sockets, libcurl's
# connections or another script's pipes: a script that keeps a copy of
# a connection could read or write the HTTP stream, and one that lives
# on would hold the connection open.  The scripts record the
# descriptors they have, at start-up and while a client reads
# (header-script-renew=1 runs the header script again then, with the
# pool's connections open).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

serve_image $((1024 * 1024))

# Each run leaves a file fds.KIND.PID listing the descriptors it was
# started with, and what they are: the script execs python3, which
# inherits them as they are (a shell keeps copies of its own).
mkdir "$tmp/fds"
cat >"$tmp/record.py" <<'PY'
import os, sys
kind, out = sys.argv[1], sys.argv[2]
here = "/proc/%d/fd" % os.getpid()
lines = []
for fd in sorted(int(f) for f in os.listdir(here)):
    try:
        target = os.readlink("%s/%d" % (here, fd))
    except OSError:
        continue                # listdir's own descriptor, closed now
    lines.append("%d %s\n" % (fd, target))
with open("%s/fds.%s.%d" % (out, kind, os.getpid()), "w") as f:
    f.writelines(lines)
print("X-A: b" if kind == "header" else "c=d")
PY
record="exec $PYTHON $tmp/record.py"
start_nbdkit fds -r "$PLUGIN" "$url" connections=4 header-script-renew=1 \
  "header-script=$record header $tmp/fds" \
  "cookie-script=$record cookie $tmp/fds"
slow_reads 6 || fail "reads with the scripts failed"
stop_nbdkit fds

runs=$(ls "$tmp/fds" | grep -c '^fds\.header\.' || true)
[ "$runs" -ge 2 ] ||
  fail "the header script ran $runs times (expected a renewal too)"
ls "$tmp/fds" | grep -q '^fds\.cookie\.' || fail "the cookie script did not run"
# 0 is /dev/null, 1 the pipe to nbdkit, 2 nbdkit's stderr; nothing else.
for f in "$tmp"/fds/fds.*; do
  extra=$(awk '$1 > 2 { printf "%s -> %s; ", $1, $2 }' "$f")
  [ -z "$extra" ] || problem "$(basename "$f"): other descriptors: $extra"
  grep -qx '0 /dev/null' "$f" && grep -q '^1 pipe:' "$f" ||
    problem "$(basename "$f"): standard input or output: $(cat "$f")"
done
check_problems
