#!/usr/bin/env bash
# test-curl-fuzz-answers.sh: answers to single-range GETs mutated at
# random by the fault server (mode fuzz-answers: status, Content-Range,
# Content-Length, body length, connection close, duplicated headers;
# about half correct).  Every read through nbdkit returns either exactly
# the object's bytes or an error, never wrong bytes, and the legal
# answers among them give the bytes.  retries=0, so each answer counts;
# one connection and one read at a time, so each read is one GET of
# exactly its range and a run repeats.
#
# FUZZ_SEED (default 1) picks the answers, FUZZ_READS (300) the number of
# reads; the run also stops after 45 s.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

size=$((1024 * 1024 + 77))
make_random_file "$tmp/disk.img" "$size"
export FAULT_SEED=${FUZZ_SEED:-1} FILE=$tmp/disk.img
export READS=${FUZZ_READS:-300} OUTCOMES=$tmp/outcomes
start_fault_server fuzz-answers "$tmp/disk.img"
# timeout=1: an answer that stops short on an open connection costs a
# second, not a minute.
start_nbdkit ro -r "$PLUGIN" "http://127.0.0.1:$fault_port/disk.img" \
             retries=0 timeout=1 connections=1

st=0
nbdsh -u "$uri" -c '
import os, random, time
data = open(os.environ["FILE"], "rb").read()
size = len(data)
rnd = random.Random(int(os.environ["FAULT_SEED"]))
deadline = time.monotonic() + 45     # nbdsh () allows 60 s
right = errors = 0
wrong = []
outcomes = open(os.environ["OUTCOMES"], "w")
for i in range(int(os.environ["READS"])):
    if time.monotonic() > deadline:
        break
    n = rnd.choice([2, 3, 512, 4096, rnd.randrange(2, 70000)])
    off = rnd.randrange(size - n + 1)
    try:
        got = h.pread(n, off)
    except nbd.Error:
        errors += 1
        outcomes.write("bytes=%d-%d error\n" % (off, off + n - 1))
        continue
    outcomes.write("bytes=%d-%d %s\n" % (off, off + n - 1,
                   "right" if got == data[off:off + n] else "WRONG"))
    if got == data[off:off + n]:
        right += 1
    else:
        k = next(j for j in range(n) if got[j] != data[off + j])
        wrong.append("bytes=%d-%d (byte %d differs)" % (off, off + n - 1, k))
print("%d reads: %d right, %d errors, %d wrong" %
      (right + errors + len(wrong), right, errors, len(wrong)))
for w in wrong:
    print("WRONG: " + w)
if right < 20 or errors < 20:
    raise SystemExit("too few right answers or errors: the fuzz did not run")
if wrong:
    raise SystemExit(1)
' >"$tmp/reads.out" 2>&1 || st=$?
cat "$tmp/reads.out"

# Each kind of answer the server gave and what the reads got from it.
# Legal answers must give the bytes, not an error, unless the answer
# before left bytes on the connection (a body longer than its
# Content-Length: libcurl then closes the connection, but the next
# answer may already have read them).
"$PYTHON" - "$tmp/fault.log" "$tmp/outcomes" >"$tmp/kinds.out" <<'EOF' ||
import collections, sys
legal = {"ok", "ok-100-continue", "ok-no-length-close", "ok-chunked",
         "ok-spaces", "dup-cr-same", "dup-cl-same"}
leftover = {"long-keepalive", "dup-cl-differ"}
kind = {}
for line in open(sys.argv[1]):
    if line.startswith("fuzz-answers: "):
        _, r, k = line.split()
        kind[r.rstrip(":")] = k
table = collections.defaultdict(collections.Counter)
refused, prev = [], None
for line in open(sys.argv[2]):
    r, outcome = line.split()
    k = kind.get(r, "?")
    table[k][outcome] += 1
    if k in legal and outcome == "error" and prev not in leftover:
        refused.append("%s (%s)" % (r, k))
    prev = k
for k in sorted(table, key=lambda k: -sum(table[k].values())):
    print("%-26s %s" % (k, " ".join("%s %d" % (o, n)
                                    for o, n in sorted(table[k].items()))))
for r in refused:
    print("LEGAL ANSWER REFUSED: " + r)
sys.exit(1 if refused else 0)
EOF
  st=1
cat "$tmp/kinds.out"
if [ "$st" -ne 0 ]; then
  for r in $(sed -n 's/^WRONG: \(bytes=[0-9-]*\) .*/\1/p' "$tmp/reads.out"); do
    grep "fuzz-answers: $r:" "$tmp/fault.log" >&2 || :
  done
  fail "wrong bytes, a legal answer refused, or the reads failed" \
       "(FUZZ_SEED=$FAULT_SEED)"
fi
stop_nbdkit ro
