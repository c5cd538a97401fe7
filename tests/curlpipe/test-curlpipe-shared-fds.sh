#!/usr/bin/env bash
# test-curlpipe-shared-fds.sh: curlpipe shares its standard output with
# a sibling writer, and its standard input with a sibling reader, and
# neither loses a byte: O_NONBLOCK is a flag of the open file
# description, which all of them share, so curlpipe must not set it.
#
# Standard output: curlpipe's echo of 2 MiB of 'B' and `cat` of 2 MiB of
# 'A' go to one pipe whose reader is slow (the pipe fills up); the
# reader must get every 'A' and every 'B', and cat must exit 0 (it
# fails with EAGAIN on a description made non-blocking under it).
#
# Standard input: curlpipe and `cat` read one pipe that the test feeds
# in small pieces; cat must never see EAGAIN (it exits 1 on it), and
# what nginx received plus what cat read must be all that was written.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe
requires cat

start_stream_server
start_nginx_put

timeout "$client_timeout" "$PYTHON" - "$CURLPIPE" \
  "http://127.0.0.1:$stream_port/echo" "http://127.0.0.1:$port/put" \
  "$tmp" <<'PYEOF'
import os, subprocess, sys, time
curlpipe, echo_url, put_url, tmp = sys.argv[1:]
MIB = 1024 * 1024
bad = []

# Standard output shared with cat; the reader takes 32 KiB every 10 ms.
with open(tmp + "/a", "wb") as f:
    f.write(b"A" * (2 * MIB))
with open(tmp + "/b", "wb") as f:
    f.write(b"B" * (2 * MIB))
r, w = os.pipe()
with open(tmp + "/b", "rb") as b_in, open(tmp + "/out.err", "wb") as err:
    cat = subprocess.Popen(["cat", tmp + "/a"], stdout=w, stderr=err)
    cp = subprocess.Popen([curlpipe, "-s", echo_url], stdin=b_in, stdout=w,
                          stderr=err)
os.close(w)
got = bytearray()
end = time.monotonic() + 40
while time.monotonic() < end:
    chunk = os.read(r, 32768)
    if not chunk:
        break
    got += chunk
    time.sleep(0.01)
os.close(r)
for p, name in ((cat, "cat"), (cp, "curlpipe")):
    try:
        if p.wait(timeout=10) != 0:
            bad.append("stdout: %s exited with %d" % (name, p.returncode))
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        bad.append("stdout: %s did not end" % name)
na, nb = got.count(b"A"), got.count(b"B")
if na != 2 * MIB or nb != 2 * MIB or len(got) != 4 * MIB:
    bad.append("stdout: the reader got %d bytes of cat's 'A' and %d of "
               "curlpipe's 'B' (%d in all), not %d of each: %s" %
               (na, nb, len(got), 2 * MIB,
                open(tmp + "/out.err", "rb").read()[:300]))

# Standard input shared with cat: 400 pieces of 1000 bytes, 5 ms apart,
# so that both often wait on an empty pipe.
r, w = os.pipe()
with open(tmp + "/cat.out", "wb") as out, \
     open(tmp + "/in.err", "wb") as err:
    cat = subprocess.Popen(["cat"], stdin=r, stdout=out, stderr=err)
    cp = subprocess.Popen([curlpipe, "-s", "-f", put_url + "/stdin.bin"],
                          stdin=r, stdout=subprocess.DEVNULL, stderr=err)
os.close(r)
piece = b"0123456789" * 100
for i in range(400):
    os.write(w, piece)
    time.sleep(0.005)
os.close(w)
for p, name in ((cat, "cat"), (cp, "curlpipe")):
    try:
        if p.wait(timeout=20) != 0:
            bad.append("stdin: %s exited with %d: %s" %
                       (name, p.returncode,
                        open(tmp + "/in.err", "rb").read()[:300]))
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        bad.append("stdin: %s did not end" % name)
try:
    sent = os.path.getsize(tmp + "/www/stdin.bin")
except OSError:
    sent = 0
read = os.path.getsize(tmp + "/cat.out")
if sent + read != 400 * 1000:
    bad.append("stdin: nginx got %d bytes and cat read %d: %d in all, "
               "not the %d written" % (sent, read, sent + read, 400 * 1000))
if bad:
    sys.exit("; ".join(bad))
print("ok")
PYEOF
