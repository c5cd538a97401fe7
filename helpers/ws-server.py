#!/usr/bin/python3
# helpers/ws-server.py: a WebSocket server (RFC 6455) for curlpipe's
# ws:// tests, on Debian's python3-websockets (10.4, its asyncio API).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.
#
# The library does the real work: the handshake, framing, and the
# checks a server makes of a client's frames (each must be masked: an
# unmasked frame fails the connection with 1002).  What it cannot be
# made to send, the faults, is written as raw frames on its transport
# after its handshake, or as an HTTP answer of ours instead of it.  The
# request's path picks the behaviour:
#
#   /echo           each message sent back as it came (binary or text)
#   /tcp/PORT       a bridge to 127.0.0.1:PORT (a real sshd): messages
#                   to it, its bytes back as binary messages
#   /ping           a ping "curlpipe-ping", its pong awaited (logged
#                   "pong ok" or "pong missing"), then "pong ok\n" as a
#                   text message, then a close 1000
#   /fragments      a text message in 3 fragments with a ping between
#                   them (its pong awaited and logged), a binary one in
#                   2, then a close 1000
#   /close/CODE     "bye\n", then a close with CODE and a reason; the
#                   code the client sent back is logged ("echoed CODE")
#   /wait-close     an echo; the client's close code is logged
#   /masked         a masked text frame (a server must not mask)
#   /rsv            a frame with RSV1 set (no extension was agreed)
#   /big-ping       a ping of 126 bytes (over 125)
#   /drop           "partial\n", then TCP closed without a close frame
#   /drop-mid       half a frame, then TCP closed
#   /bad-accept     101 with a wrong Sec-WebSocket-Accept
#   /early          101 (ours, right), "early\n" and a close 1000 in
#                   the same write as the headers, then TCP closed
#   /status/NNN     HTTP NNN with a body, no upgrade
#
# Every connection logs "PATH authorization=VALUE user-agent=VALUE"
# (the headers the client sent, or "-") to --log.  The port is chosen by the kernel and
# written to --port-file once listening; the server exits by itself
# after --lifetime seconds.

import argparse
import asyncio
import base64
import hashlib
import http
import os
import struct
import sys

import websockets

args = None
log_file = None


def log(line):
    log_file.write(line + "\n")
    log_file.flush()


def process_request(path, headers):
    """Answers that are not a normal upgrade, before the library's."""
    log("%s authorization=%s user-agent=%s" %
        (path, headers.get("Authorization", "-"),
         headers.get("User-Agent", "-")))
    if path.startswith("/status/"):
        code = int(path.split("/")[2])
        body = b"no upgrade here: %d\n" % code
        return (http.HTTPStatus(code),
                [("Content-Type", "text/plain"),
                 ("Content-Length", str(len(body)))], body)
    if path == "/early":
        # The upgrade's answer, a text frame and a close in one write.
        key = headers.get("Sec-WebSocket-Key", "")
        accept = base64.b64encode(hashlib.sha1(
            (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
        return (http.HTTPStatus.SWITCHING_PROTOCOLS,
                [("Upgrade", "websocket"), ("Connection", "Upgrade"),
                 ("Sec-WebSocket-Accept", accept.decode())],
                raw_frame(0x1, b"early\n") +
                raw_frame(0x8, struct.pack("!H", 1000)))
    if path == "/bad-accept":
        return (http.HTTPStatus.SWITCHING_PROTOCOLS,
                [("Upgrade", "websocket"), ("Connection", "Upgrade"),
                 ("Sec-WebSocket-Accept", "d3JvbmcgYWNjZXB0IHZhbHVlIQ==")],
                b"")
    return None


def raw_frame(opcode, payload, fin=True, rsv=0, mask=None):
    """One frame's bytes, as a server must not always send them."""
    head = bytes([(0x80 if fin else 0) | rsv | opcode])
    n = len(payload)
    bit = 0x80 if mask else 0
    if n < 126:
        head += bytes([bit | n])
    elif n < 65536:
        head += bytes([bit | 126]) + struct.pack("!H", n)
    else:
        head += bytes([bit | 127]) + struct.pack("!Q", n)
    if mask:
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        head += mask
    return head + payload


async def echo(ws):
    try:
        async for message in ws:
            await ws.send(message)
    except websockets.ConnectionClosed:
        pass            # a close came while echoing: the library answered


async def await_pong(ws, data):
    try:
        waiter = await ws.ping(data)
        await asyncio.wait_for(waiter, 5)
        log("pong ok")
        return True
    except (asyncio.TimeoutError, websockets.ConnectionClosed):
        log("pong missing")
        return False


async def bridge(ws, port):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)

    async def up():
        async for message in ws:
            if isinstance(message, str):
                message = message.encode()
            writer.write(message)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()

    async def down():
        while True:
            data = await reader.read(256 * 1024)
            if not data:
                break
            await ws.send(data)
        await ws.close()

    tasks = [asyncio.ensure_future(up()), asyncio.ensure_future(down())]
    try:
        await asyncio.gather(*tasks)
    except (websockets.ConnectionClosed, ConnectionError):
        pass
    finally:
        for t in tasks:
            t.cancel()
        writer.close()


async def fragments(ws):
    t = ws.transport
    t.write(raw_frame(0x1, b"hel", fin=False))
    await await_pong(ws, b"between fragments")
    t.write(raw_frame(0x0, b"lo, ", fin=False))
    t.write(raw_frame(0x0, b"world\n"))
    t.write(raw_frame(0x2, b"\x00\x01", fin=False))
    t.write(raw_frame(0x0, b"\x02\n"))
    await ws.close(1000, "done")


async def handler(ws, path=None):
    path = ws.path
    if path == "/echo":
        await echo(ws)
    elif path.startswith("/tcp/"):
        await bridge(ws, int(path.split("/")[2]))
    elif path == "/ping":
        await await_pong(ws, b"curlpipe-ping")
        await ws.send("pong ok\n")
        await ws.close(1000, "done")
    elif path == "/fragments":
        await fragments(ws)
    elif path.startswith("/close/"):
        code = int(path.split("/")[2])
        await ws.send("bye\n")
        await ws.close(code, "reason for %d" % code)
        log("echoed %s" % ws.close_code)
    elif path == "/wait-close":
        await echo(ws)
        log("client closed %s" % ws.close_code)
    elif path == "/masked":
        ws.transport.write(raw_frame(0x1, b"masked\n", mask=b"\x01\x02\x03\x04"))
        await ws.wait_closed()
        log("client closed %s" % ws.close_code)
    elif path == "/rsv":
        ws.transport.write(raw_frame(0x2, b"rsv\n", rsv=0x40))
        await ws.wait_closed()
        log("client closed %s" % ws.close_code)
    elif path == "/big-ping":
        ws.transport.write(raw_frame(0x9, b"x" * 126))
        await ws.wait_closed()
        log("client closed %s" % ws.close_code)
    elif path == "/drop":
        await ws.send(b"partial\n")
        ws.transport.close()
    elif path == "/drop-mid":
        ws.transport.write(raw_frame(0x2, b"y" * 100)[:12])
        ws.transport.close()
    else:
        await ws.close(4004, "no such path")


async def main():
    global log_file
    log_file = open(args.log, "a")
    async with websockets.serve(handler, "127.0.0.1", 0, max_size=None,
                                compression=None,
                                process_request=process_request) as server:
        port = server.sockets[0].getsockname()[1]
        with open(args.port_file + ".tmp", "w") as f:
            f.write("%d\n" % port)
        os.rename(args.port_file + ".tmp", args.port_file)
        await asyncio.sleep(args.lifetime)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--port-file", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--lifetime", type=float, default=300)
    args = p.parse_args()
    asyncio.run(main())
    sys.exit(0)
