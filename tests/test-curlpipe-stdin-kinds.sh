#!/usr/bin/env bash
# test-curlpipe-stdin-kinds.sh: standard input may be a socket (end of
# file when the peer shuts down its side) or a terminal (end of file at
# ^D); either way curlpipe uploads exactly what was written, and leaves
# the descriptor's blocking mode as it found it.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")}/functions.sh"
requires_curlpipe

start_nginx 'location /put/ { dav_methods PUT; alias DIR/www/; }'
chmod 777 "$tmp/www"
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
