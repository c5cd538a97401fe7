#!/usr/bin/env bash
# test-curlpipe-ws-server.sh: the stream server's WebSocket endpoints,
# which curlpipe's ws:// tests and bench/curlpipe-ssh, -run use, checked
# with a client that is not ours (python3-websockets) and with raw
# frames: /ws/echo sends 64 MiB back byte for byte, frame for frame,
# and streams a big frame before it has all of it; /ws/tcp/PORT carries
# 8 MiB to a TCP echo and back, the client's close closes the TCP side
# and the TCP side's end sends close 1000; ping gets pong, close gets
# the same code back, fragments are echoed with a ping between them;
# an unmasked frame, a reserved opcode or RSV bit, a continuation with
# no message and a non-minimal length get close 1002; a bad handshake
# gets 400, a refused tunnel 502, and the Sec-WebSocket-Accept value is
# RFC 6455's own example.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
"$PYTHON" -c 'import websockets' 2>/dev/null ||
  skip "python3-websockets is not installed"

start_stream_server

timeout 60 "$PYTHON" - "$stream_port" "$(free_port)" <<'PYEOF' ||
import asyncio, os, socket, struct, sys, time
import websockets

port = int(sys.argv[1])
refused_port = int(sys.argv[2])
base = "ws://127.0.0.1:%d" % port
problems = []

def problem(msg):
    print("FAIL: " + msg, file=sys.stderr)
    problems.append(msg)

async def echo_bulk():
    # Mixed frame sizes, one of 8 MiB, 64 MiB in all, sent while the
    # answers are read, so a server that buffers would stall.
    sizes, total = [], 0
    rnd = 1
    while total < 64 << 20:
        rnd = (rnd * 1103515245 + 12345) & 0x7fffffff
        n = min(8 << 20 if len(sizes) == 3 else 1 + rnd % (1 << 20),
                (64 << 20) - total)
        sizes.append(n)
        total += n
    blob = os.urandom(total)
    async with websockets.connect(base + "/ws/echo", max_size=None,
                                  compression=None) as ws:
        async def sender():
            off = 0
            for n in sizes:
                await ws.send(blob[off:off + n])
                off += n
        task = asyncio.ensure_future(sender())
        off = 0
        for n in sizes:
            msg = await ws.recv()
            if not isinstance(msg, bytes) or msg != blob[off:off + n]:
                problem("echo: frame at %d (%d bytes) came back different"
                        % (off, n))
                break
            off += n
        await task
        await ws.close()
        if ws.close_code != 1000:
            problem("echo: close answered with %s" % ws.close_code)

async def echo_fragments_ping():
    async with websockets.connect(base + "/ws/echo", compression=None) as ws:
        pong = await ws.ping(b"are you there")
        await asyncio.wait_for(pong, 5)
        await ws.send(["ab", "cd", "ef"])
        msg = await asyncio.wait_for(ws.recv(), 5)
        if msg != b"abcdef":
            problem("echo: fragmented text came back as %r" % (msg,))

async def tunnel():
    eof_seen = asyncio.get_running_loop().create_future()
    async def echo_conn(reader, writer):
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
        if not eof_seen.done():
            eof_seen.set_result(True)
        writer.close()
    server = await asyncio.start_server(echo_conn, "127.0.0.1", 0)
    eport = server.sockets[0].getsockname()[1]
    async def bye_conn(reader, writer):
        writer.write(b"bye\n")
        await writer.drain()
        writer.close()
    bye = await asyncio.start_server(bye_conn, "127.0.0.1", 0)
    bport = bye.sockets[0].getsockname()[1]

    blob = os.urandom(8 << 20)
    async with websockets.connect(base + "/ws/tcp/%d" % eport,
                                  max_size=None, compression=None) as ws:
        async def sender():
            for off in range(0, len(blob), 100000):
                await ws.send(blob[off:off + 100000])
        task = asyncio.ensure_future(sender())
        got = bytearray()
        while len(got) < len(blob):
            got += await asyncio.wait_for(ws.recv(), 10)
        await task
        if got != blob:
            problem("tunnel: 8 MiB came back different")
        await ws.close()
    try:
        await asyncio.wait_for(eof_seen, 5)
    except asyncio.TimeoutError:
        problem("tunnel: the client's close did not close the TCP side")

    async with websockets.connect(base + "/ws/tcp/%d" % bport,
                                  compression=None) as ws:
        msg = await asyncio.wait_for(ws.recv(), 5)
        if msg != b"bye\n":
            problem("tunnel: got %r, not the far side's bye" % (msg,))
        try:
            await asyncio.wait_for(ws.recv(), 5)
            problem("tunnel: more than the far side sent")
        except websockets.ConnectionClosed as e:
            if e.rcvd is None or e.rcvd.code != 1000:
                problem("tunnel: the far side's end sent %s, not close 1000"
                        % (e.rcvd,))
    server.close()
    bye.close()

# Raw frames, for what a correct client never sends.
def raw_connect(path, key="dGhlIHNhbXBsZSBub25jZQ==", extra=""):
    s = socket.create_connection(("127.0.0.1", port), 5)
    s.settimeout(5)
    s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
               "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
               "Sec-WebSocket-Version: 13\r\n%s\r\n"
               % (path, key, extra)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        d = s.recv(1)
        if not d:
            break
        head += d
    return s, head.decode("latin-1")

def frame(op, payload, fin=True, mask=True, rsv=0, long_len=False):
    b0 = (0x80 if fin else 0) | rsv | op
    n = len(payload)
    mbit = 0x80 if mask else 0
    if long_len:
        h = struct.pack("!BBQ", b0, mbit | 127, n)
    elif n < 126:
        h = struct.pack("!BB", b0, mbit | n)
    elif n < 65536:
        h = struct.pack("!BBH", b0, mbit | 126, n)
    else:
        h = struct.pack("!BBQ", b0, mbit | 127, n)
    if not mask:
        return h + payload
    key = b"\x12\x34\x56\x78"
    return h + key + bytes(c ^ key[i & 3] for i, c in enumerate(payload))

def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        d = s.recv(n - len(buf))
        if not d:
            raise EOFError("closed after %d of %d bytes" % (len(buf), n))
        buf += d
    return buf

def read_frame(s):
    b0, b1 = recv_exact(s, 2)
    n = b1 & 0x7f
    if n == 126:
        n = struct.unpack("!H", recv_exact(s, 2))[0]
    elif n == 127:
        n = struct.unpack("!Q", recv_exact(s, 8))[0]
    if b1 & 0x80:
        raise ValueError("the server masked a frame")
    return b0 & 0x80 != 0, b0 & 0x0f, n

def raw_checks():
    s, head = raw_connect("/ws/echo")
    if "101" not in head.split("\r\n")[0] or \
       "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" not in head:
        problem("handshake: not RFC 6455's example accept: %r" % head)
    # A big frame is streamed: its header and first bytes come back
    # before the rest of it is sent.
    s.sendall(frame(2, b"x" * 65536 * 16)[:2 + 8 + 4 + 1000])
    try:
        fin, op, n = read_frame(s)
        first = recv_exact(s, 1000)
        if (fin, op, n) != (True, 2, 65536 * 16) or first != b"x" * 1000:
            problem("stream: echoed header %r" % ((fin, op, n),))
    except (socket.timeout, EOFError, ValueError) as e:
        problem("stream: a big frame's start did not come back (%s)" % e)
    s.close()

    # A ping between the fragments of a message, then a close 1001.
    s, head = raw_connect("/ws/echo")
    s.sendall(frame(1, b"one", fin=False) + frame(9, b"p") +
              frame(0, b"two") + frame(8, struct.pack("!H", 1001) + b"bye"))
    want = [(False, 2, b"one"), (True, 10, b"p"), (True, 0, b"two"),
            (True, 8, struct.pack("!H", 1001))]
    try:
        for w in want:
            fin, op, n = read_frame(s)
            got = (fin, op, recv_exact(s, n))
            if got != w:
                problem("fragments: got %r, wanted %r" % (got, w))
        if s.recv(10) != b"":
            problem("close: the connection stayed open after the close")
    except (socket.timeout, EOFError, ValueError) as e:
        problem("fragments: %s" % e)
    s.close()

    bad = [("unmasked", frame(2, b"hi", mask=False)),
           ("reserved opcode", frame(3, b"hi")),
           ("RSV1", frame(2, b"hi", rsv=0x40)),
           ("lone continuation", frame(0, b"hi")),
           ("non-minimal length", frame(2, b"hi", long_len=True)),
           ("fragmented ping", frame(9, b"hi", fin=False)),
           ("close of 1 byte", frame(8, b"\x03")),
           ("new message inside one", frame(2, b"a", fin=False) +
            frame(2, b"b"))]
    for name, data in bad:
        s, head = raw_connect("/ws/echo")
        s.sendall(data)
        try:
            while True:
                fin, op, n = read_frame(s)
                payload = recv_exact(s, n)
                if op == 8:
                    break
            code = struct.unpack("!H", payload[:2])[0] if n >= 2 else None
            if code != 1002:
                problem("%s: close %s, not 1002" % (name, code))
        except (socket.timeout, EOFError, ValueError) as e:
            problem("%s: no close 1002 (%s)" % (name, e))
        s.close()

    for name, path, key, extra, want in [
            ("no key", "/ws/echo", "", "", "400"),
            ("short key", "/ws/echo", "c2hvcnQ=", "", "400"),
            ("version 8", "/ws/echo", "dGhlIHNhbXBsZSBub25jZQ==",
             "Sec-WebSocket-Version: 8\r\n", "400"),
            ("refused tunnel", "/ws/tcp/%d" % refused_port,
             "dGhlIHNhbXBsZSBub25jZQ==", "", "502"),
            ("unknown path", "/ws/nowhere", "dGhlIHNhbXBsZSBub25jZQ==", "",
             "404")]:
        s, head = raw_connect(path, key, extra)
        status = head.split("\r\n")[0]
        if status.split(" ")[1:2] != [want]:
            problem("%s: %r, not %s" % (name, status, want))
        s.close()
    # A plain GET without the upgrade.
    s = socket.create_connection(("127.0.0.1", port), 5)
    s.settimeout(5)
    s.sendall(b"GET /ws/echo HTTP/1.1\r\nHost: x\r\n\r\n")
    if not s.recv(100).startswith(b"HTTP/1.1 400 "):
        problem("no upgrade: not 400")
    s.close()

t0 = time.monotonic()
asyncio.run(echo_bulk())
t1 = time.monotonic()
asyncio.run(echo_fragments_ping())
asyncio.run(tunnel())
raw_checks()
print("64 MiB echo %.2f s, all %.2f s" % (t1 - t0, time.monotonic() - t0))
sys.exit(1 if problems else 0)
PYEOF
  fail "the WebSocket checks failed (see above)"

# The server logged each upgrade with the payload bytes it received.
grep -q '^GET /ws/echo framing=none bytes=67108864 status=101$' \
  "$tmp/stream.log" || fail "no log line for the 64 MiB echo"
