#!/usr/bin/env python3
# helpers/raw-server.py: a raw-socket HTTP/1.1 server for curlpipe's tests,
# whose answers are written byte for byte (framing that a real server
# would not send).  Standard library only.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.
#
#   raw-server.py --port-file FILE --log FILE [--lifetime SECONDS]
#
# Listens on 127.0.0.1 (a free port, written to --port-file once it
# listens), answers each connection in a thread, and exits after
# --lifetime seconds (default 60).  The last component of the request
# target is the mode (a proxy's absolute-form target works too):
#
#   /slow-length   Content-Length: 1000000, sent as 10 pieces of
#                  100,000 bytes 50 ms apart; then holds the connection
#   /chunked-capital  "Transfer-Encoding: Chunked" (capital C), the body
#                  "hello" in one chunk and the last chunk; holds
#   /chunk-junk    a chunked answer whose chunk-size line is "5 abc"
#                  (junk after the size), then "hello" and the last
#                  chunk; holds
#   /chunk-huge    a chunk size of 17 hex digits (FFFFFFFFFFFFFFFFF)
#                  followed by 6000 bytes of "HUGEDATA"; holds
#   /chunk-2e63    "hello" in one chunk, then a chunk size of 2^63
#                  (16 hex digits, more than libcurl's signed 64 bits
#                  hold) and 6000 bytes of "HUGEDATA"; holds
#   /chunk-0x5     a chunk-size line "0x5" (the last chunk, with junk),
#                  then "hello" where a trailer line belongs; holds
#   /chunk-bad-size  a chunk-size line "ZZ"; holds
#   /te-gzip       "Transfer-Encoding: gzip, chunked": a gzip stream in
#                  one chunk and the last chunk; holds
#   /te-chunked-twice  "Transfer-Encoding: chunked" in two header lines
#                  (chunked twice): a body chunked twice; holds
#   /status-header a chunked answer, "hello" and the last chunk, whose
#                  header block has, after its Transfer-Encoding, a
#                  header "HTTP/1.1 200 OK: x" (a header, not a status
#                  line: only an answer's first line is one; libcurl
#                  refuses a header line without a colon); holds
#   /status-colon  the same with a header "HTTP/x: y"; holds
#   /hello-close   Content-Length: 5, "hello", and closes the connection
#                  at once without reading the request body
#   /ok            Content-Length: 3, "ok\n"; holds
#   /read-1m       reads 1 MiB of the request body (or less if the
#                  client stops sending), answers 200 with
#                  Content-Length: 3 "ok\n" (no "Connection: close"),
#                  then closes without reading the rest
#   /count         reads the request body until the connection is quiet
#                  for 1 s, ends or 5 s have passed, logs
#                  "count BYTES" (every byte that came after the request
#                  head on the connection), then answers "ok\n" and
#                  closes
#   /count-late    as /count, after 2 s of reading nothing (the client's
#                  sends fill the socket buffers and wait); logs
#                  "count-late" at once, then "count BYTES"
#
# "Holds" means: reads (and discards) the rest of the upload until the
# client closes the connection or 20 s have passed.  In the log, a line
# "accept" for each connection as it is accepted, then one line for its
# request: "MODE" ("count BYTES" for /count; "no-head" when the
# connection ended, or 10 s passed, before a whole request head).

import argparse
import gzip
import os
import socket
import sys
import threading
import time

HOLD_SECONDS = 20


def log(msg):
    with log_lock:
        with open(args.log, "a") as f:
            f.write(msg + "\n")


def read_head(c):
    """The request head and the bytes after it, or (None, b"")."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        if len(buf) > 65536:
            return None, b""
        d = c.recv(65536)
        if not d:
            return None, b""
        buf += d
    head, rest = buf.split(b"\r\n\r\n", 1)
    return head, rest


def hold(c):
    c.settimeout(1)
    end = time.monotonic() + HOLD_SECONDS
    while time.monotonic() < end:
        try:
            if not c.recv(65536):
                return
        except socket.timeout:
            continue
        except OSError:
            return


def chunked(body_lines):
    return (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
            body_lines)


def serve(c):
    c.settimeout(10)
    head, rest = read_head(c)
    if head is None:
        log("no-head")
        return
    target = head.split(b"\r\n", 1)[0].split(b" ")
    mode = target[1].decode("latin-1") if len(target) > 1 else ""
    mode = mode.split("?", 1)[0].rsplit("/", 1)[-1]
    if mode != "count":
        log(mode)
    if mode == "slow-length":
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n")
        for _ in range(10):
            time.sleep(0.05)
            c.sendall(b"a" * 100000)
        hold(c)
    elif mode == "chunked-capital":
        c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n"
                  b"5\r\nhello\r\n0\r\n\r\n")
        hold(c)
    elif mode == "chunk-junk":
        c.sendall(chunked(b"5 abc\r\nhello\r\n0\r\n\r\n"))
        hold(c)
    elif mode == "chunk-huge":
        c.sendall(chunked(b"FFFFFFFFFFFFFFFFF\r\n" + b"HUGEDATA" * 750))
        hold(c)
    elif mode == "chunk-2e63":
        c.sendall(chunked(b"5\r\nhello\r\n8000000000000000\r\n" +
                          b"HUGEDATA" * 750))
        hold(c)
    elif mode == "chunk-0x5":
        c.sendall(chunked(b"0x5\r\nhello\r\n0\r\n\r\n"))
        hold(c)
    elif mode == "chunk-bad-size":
        c.sendall(chunked(b"ZZ\r\nhello\r\n0\r\n\r\n"))
        hold(c)
    elif mode == "te-gzip":
        z = gzip.compress(b"hello world\n")
        c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n"
                  b"\r\n" + b"%x\r\n" % len(z) + z + b"\r\n0\r\n\r\n")
        hold(c)
    elif mode == "te-chunked-twice":
        inner = b"5\r\nhello\r\n0\r\n\r\n"
        c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n"
                  + b"%x\r\n" % len(inner) + inner + b"\r\n0\r\n\r\n")
        hold(c)
    elif mode in ("status-header", "status-colon"):
        line = (b"HTTP/1.1 200 OK: x" if mode == "status-header"
                else b"HTTP/x: y")
        c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n" +
                  line + b"\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        hold(c)
    elif mode == "hello-close":
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
    elif mode == "ok":
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
        hold(c)
    elif mode == "read-1m":
        got = len(rest)
        while got < 1024 * 1024:
            d = c.recv(min(65536, 1024 * 1024 - got))
            if not d:
                break
            got += len(d)
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
    elif mode in ("count", "count-late"):
        if mode == "count-late":
            time.sleep(2)
        got = len(rest)
        c.settimeout(1)
        end = time.monotonic() + 5
        while time.monotonic() < end:
            try:
                d = c.recv(65536)
            except socket.timeout:
                break
            except OSError:
                break
            if not d:
                break
            got += len(d)
        log("count %d" % got)
        try:
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
        except OSError:
            pass
    else:
        c.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
        hold(c)


def connection(c):
    try:
        serve(c)
    except OSError:
        pass
    finally:
        c.close()


p = argparse.ArgumentParser()
p.add_argument("--port-file", required=True)
p.add_argument("--log", required=True)
p.add_argument("--lifetime", type=float, default=60)
args = p.parse_args()
log_lock = threading.Lock()

s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.bind(("127.0.0.1", 0))
s.listen(64)
with open(args.port_file + ".tmp", "w") as f:
    f.write("%d\n" % s.getsockname()[1])
os.rename(args.port_file + ".tmp", args.port_file)

deadline = time.monotonic() + args.lifetime
s.settimeout(0.5)
while time.monotonic() < deadline:
    try:
        c, _ = s.accept()
    except socket.timeout:
        continue
    log("accept")
    threading.Thread(target=connection, args=(c,), daemon=True).start()
sys.exit(0)
