#!/usr/bin/env bash
# test-curlpipe-duplex.sh: full duplex through the project's streaming
# echo server.  A driver writes a block to curlpipe's standard input and
# waits for that block to come back on its standard output before it
# writes the next, so curlpipe must send each block as soon as it has it
# and write each piece of the answer as soon as it arrives, while the
# upload is still open.  Small and large blocks, with standard input
# blocking and non-blocking; then a reader that is slower than the
# writer (standard output blocks): every byte comes back, in order.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

start_stream_server
url=http://127.0.0.1:$stream_port/echo

for nonblock in 0 1; do
  NONBLOCK=$nonblock timeout "$client_timeout" "$PYTHON" - "$CURLPIPE" \
    "$url" <<'PYEOF' || fail "echo round trips failed (non-blocking $nonblock)"
import fcntl, os, select, subprocess, sys, time

def child_setup():
    # Hand curlpipe a standard input that is already non-blocking.
    if os.environ["NONBLOCK"] == "1":
        fcntl.fcntl(0, fcntl.F_SETFL,
                    fcntl.fcntl(0, fcntl.F_GETFL) | os.O_NONBLOCK)

p = subprocess.Popen([sys.argv[1], "-s", sys.argv[2]],
                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                     preexec_fn=child_setup)
# Our end of the pipe (a file description of its own): never block on
# it, select() says when it takes more.
fd = p.stdin.fileno()
fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
out = p.stdout.fileno()
seq = 0
def block(n):
    global seq
    b = bytes((seq + i) * 31 % 251 for i in range(n))
    seq += n
    return b
for size, count in ((1, 50), (64, 50), (4096, 20), (262144, 8),
                    (1048576, 2)):
    for _ in range(count):
        b = block(size)
        view = memoryview(b)
        got = bytearray()
        deadline = time.time() + 20
        while len(got) < size:
            if time.time() > deadline:
                sys.exit("block of %d bytes: %d came back in 20 s" %
                         (size, len(got)))
            wl = [p.stdin] if view else []
            rl, wr, _ = select.select([out], wl, [], 1)
            if wr:
                try:
                    n = os.write(p.stdin.fileno(), view[:65536])
                    view = view[n:]
                except BlockingIOError:
                    pass
            if rl:
                chunk = os.read(out, size - len(got))
                if not chunk:
                    sys.exit("curlpipe's output ended early")
                got += chunk
        if bytes(got) != b:
            sys.exit("block of %d bytes came back different" % size)
p.stdin.close()
if p.stdout.read() != b"":
    sys.exit("bytes after the last echo")
sys.exit(p.wait(timeout=20))
PYEOF
done

# A slow reader: 16 MiB in, read back in small pieces with pauses, so
# curlpipe's standard output blocks many times.
"$PYTHON" -c '
import os, sys
for i in range(256):
    os.write(1, bytes([i]) * 65536)' > "$tmp/pattern"
curlpipe -s "$url" < "$tmp/pattern" |
  "$PYTHON" -c '
import sys, time
n = 0
while True:
    b = sys.stdin.buffer.read(4096)
    if not b:
        break
    n += len(b)
    if n % (1024 * 1024) == 0:
        time.sleep(0.05)
    sys.stdout.buffer.write(b)' > "$tmp/echoed"
assert_same_file "$tmp/pattern" "$tmp/echoed"
