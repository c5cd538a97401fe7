#!/usr/bin/env bash
# test-curlpipe-stdin-stolen.sh: a standard input that curlpipe cannot
# open again (a pipe made by another user: EACCES on /proc/self/fd/0),
# shared with a sibling reader that takes bytes whenever it can, never
# blocks the event loop: poll saying "readable" and a blocking read()
# after it would wait in read() once the sibling took the bytes in
# between, and nothing else (here -m's timeout) would happen.  curlpipe
# runs as nobody on a pipe root made, a sibling `cat` reads the same
# pipe, bytes trickle in; curlpipe must end at -m 3 with 28, its loop
# never seen waiting in read() on descriptor 0, and the sibling's
# description keeps its flags (no O_NONBLOCK).  And an upload from such
# a pipe arrives whole.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe
requires setpriv
[ "$(id -u)" -eq 0 ] || skip "needs root to run curlpipe as another user"
[ -r /proc/self/syscall ] || skip "no /proc/PID/syscall"
setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$CURLPIPE" ||
  skip "curlpipe cannot be run as uid 65534"

start_stream_server

timeout 60 "$PYTHON" - "$CURLPIPE" "http://127.0.0.1:$stream_port/echo" \
  "$tmp" <<'PYEOF'
import os, subprocess, sys, time
curlpipe, url, tmp = sys.argv[1:]
bad = []

r, w = os.pipe()
sibling = subprocess.Popen(["cat"], stdin=r, stdout=subprocess.DEVNULL)
out = open(os.path.join(tmp, "out"), "wb")
err = open(os.path.join(tmp, "curlpipe.err"), "wb")
start = time.monotonic()
p = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534",
                      "--clear-groups", curlpipe, "-s", "-m", "3", url],
                     stdin=r, stdout=out, stderr=err)
os.close(r)

def in_read_0():
    try:
        f = open("/proc/%d/syscall" % p.pid).read().split()
    except OSError:
        return False
    return len(f) > 1 and f[0] == "0" and f[1] == "0x0"

# Bytes trickle in, both readers compete; stop once curlpipe's loop is
# seen waiting in read(0) (which the sibling's theft causes at once in
# the old design), or after 2 s.
stuck = False
while time.monotonic() - start < 2 and not stuck and p.poll() is None:
    os.write(w, b"x")
    time.sleep(0.02)
    stuck = in_read_0() and (time.sleep(0.2) or in_read_0())
if stuck:
    bad.append("curlpipe's loop waits in read() on standard input")
flags = [l for l in open("/proc/%d/fdinfo/0" % sibling.pid)
         if l.startswith("flags:")]
if not flags or int(flags[0].split()[1], 8) & os.O_NONBLOCK:
    bad.append("the sibling's standard input was changed: %r" % flags)
try:
    st = p.wait(timeout=8)
    if st != 28:
        bad.append("exit status %d, not 28 (-m 3): %r" %
                   (st, open(os.path.join(tmp, "curlpipe.err")).read()))
except subprocess.TimeoutExpired:
    bad.append("curlpipe did not end at -m 3 (still running after %.1f s)"
               % (time.monotonic() - start))
    p.kill()
    p.wait()
os.close(w)
sibling.wait(timeout=10)
if bad:
    sys.exit("\n".join(bad))
print("ok")
PYEOF

# Through the reader thread, a whole upload arrives, unchanged.
make_random_file "$tmp/body" 3000000
cat "$tmp/body" |
  timeout "$client_timeout" setpriv --reuid=65534 --regid=65534 \
    --clear-groups "$CURLPIPE" -sS "http://127.0.0.1:$stream_port/echo" \
    >"$tmp/echoed" 2>"$tmp/echo.err" ||
  fail "as nobody from a pipe: $(cat "$tmp/echo.err")"
assert_same_file "$tmp/body" "$tmp/echoed"
