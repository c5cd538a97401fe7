#!/usr/bin/env bash
# test-curlpipe-stdin-kinds.sh: standard input may be a socket (end of
# file when the peer shuts down its side) or a terminal (end of file at
# ^D); either way curlpipe uploads exactly what was written, and leaves
# the descriptor's blocking mode as it found it.  So it does when a
# signal it does not otherwise handle (SIGUSR1, SIGALRM; and SIGTERM)
# kills it while it waits on an idle pipe: O_NONBLOCK is a property of
# the open file description, which it shares with whoever else holds
# the pipe (here the test itself), so it must not be left set on
# standard input or standard output.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

start_nginx_put
url=http://127.0.0.1:$port/put

timeout "$client_timeout" "$PYTHON" - "$CURLPIPE" "$url" "$tmp" <<'PYEOF'
import fcntl, os, pty, socket, subprocess, sys, termios
curlpipe, url, tmp = sys.argv[1:]

# A socket: 3 MiB in pieces, then shutdown(SHUT_WR).
data = bytes(i * 13 % 256 for i in range(3 * 1024 * 1024 + 7))
ours, theirs = socket.socketpair()
p = subprocess.Popen([curlpipe, "-sf", url + "/socket.img"], stdin=theirs)
theirs.close()
for i in range(0, len(data), 100000):
    ours.sendall(data[i:i + 100000])
ours.shutdown(socket.SHUT_WR)
if p.wait(timeout=30) != 0:
    sys.exit("socket: curlpipe exited with %d" % p.returncode)
if open(tmp + "/www/socket.img", "rb").read() != data:
    sys.exit("socket: the uploaded file differs")

# A terminal in canonical mode: two lines, then ^D.
master, slave = pty.openpty()
attrs = termios.tcgetattr(slave)
attrs[3] &= ~termios.ECHO
termios.tcsetattr(slave, termios.TCSANOW, attrs)
p = subprocess.Popen([curlpipe, "-sf", url + "/tty.img"], stdin=slave)
os.write(master, b"hello\nworld\n")
os.write(master, b"\x04")
if p.wait(timeout=30) != 0:
    sys.exit("terminal: curlpipe exited with %d" % p.returncode)
if open(tmp + "/www/tty.img", "rb").read() != b"hello\nworld\n":
    sys.exit("terminal: the uploaded file differs: %r" %
             open(tmp + "/www/tty.img", "rb").read())
if fcntl.fcntl(slave, fcntl.F_GETFL) & os.O_NONBLOCK:
    sys.exit("terminal: left non-blocking after curlpipe exited")
print("ok")
PYEOF

# Killed by a signal while standard input (a pipe whose writer stays
# silent) and standard output (a pipe) are both pipes the test holds
# too: the flags of the test's own descriptors are those of curlpipe's.
PYTHONPATH=$helpers_srcdir timeout "$client_timeout" "$PYTHON" - "$CURLPIPE" \
  "$url" <<'PYEOF' ||
import fcntl, os, signal, subprocess, sys, time
from procfs import has_socket
curlpipe, url = sys.argv[1:]

def nonblocking(fd):
    return bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK)

bad = []
for sig in (signal.SIGUSR1, signal.SIGALRM, signal.SIGTERM):
    r0, w0 = os.pipe()
    r1, w1 = os.pipe()
    p = subprocess.Popen([curlpipe, "-s", url + "/signal.img"],
                         stdin=r0, stdout=w1)
    # Until it is connected and waiting (it has a socket, and has made
    # its descriptors non-blocking if it does that): at most 6 s.
    end = time.monotonic() + 5
    while time.monotonic() < end and not has_socket(p.pid):
        time.sleep(0.05)
    end = time.monotonic() + 1
    while (time.monotonic() < end and
           not (nonblocking(r0) and nonblocking(w1))):
        time.sleep(0.05)
    time.sleep(0.2)
    if p.poll() is not None:
        bad.append("%s: curlpipe exited with %d before the signal" %
                   (sig.name, p.returncode))
    else:
        p.send_signal(sig)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            bad.append("%s: curlpipe still running 10 s after it" % sig.name)
    for fd, what in ((r0, "standard input"), (w1, "standard output")):
        if nonblocking(fd):
            bad.append("%s: %s left O_NONBLOCK" % (sig.name, what))
    for fd in (r0, w0, r1, w1):
        os.close(fd)
if bad:
    sys.exit("; ".join(bad))
print("ok")
PYEOF
  fail "after a signal: see above"
