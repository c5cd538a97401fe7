#!/usr/bin/python3
# tests/fault-server.py: an HTTP/1.1 server that misbehaves on demand.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.
#
# Real servers (nginx, Apache) cover the normal cases; this one makes the
# faults no real server makes when asked.  It serves one file (--file) at
# every path, with keep-alive and a Content-Length on every answer, and
# logs one line per request to --log:
#
#   PUT /disk.img range=- content-range="bytes 0-511/*" status=204 sent=0
#
# --mode picks a behaviour.  Each mode is a subclass of Handler that
# overrides only the step it breaks, registered in MODES; add a fault by
# adding a subclass.  The port is chosen by the kernel and written to
# --port-file once the server listens, so tests never race for a port.
#
# Standard library only; run with the system /usr/bin/python3.

import argparse
import http.server
import os
import re
import sys
import threading

# One lock for the served file: requests run on many threads.
file_lock = threading.Lock()
log_lock = threading.Lock()
args = None
log_file = None


def log(line):
    with log_lock:
        log_file.write(line + "\n")
        log_file.flush()


def parse_range(value, size):
    """Parse a single 'bytes=A-B' range.  Returns (start, end) inclusive,
    None when absent or unparsable (serve the whole object, as RFC 9110
    allows), or 'unsatisfiable'."""
    if not value:
        return None
    m = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*", value)
    if not m or (m.group(1) == "" and m.group(2) == ""):
        return None
    if m.group(1) == "":                      # bytes=-N: the last N bytes
        n = int(m.group(2))
        if n == 0:
            return "unsatisfiable"
        return (max(0, size - n), size - 1)
    start = int(m.group(1))
    end = int(m.group(2)) if m.group(2) else size - 1
    if start >= size or end < start:
        return "unsatisfiable"
    return (start, min(end, size - 1))


def parse_ranges(value, size):
    """Parse 'bytes=A-B,C-D,...' with at least two ranges, each A-B with
    both ends given and inside the object.  Returns the list of (start,
    end) or None."""
    if not value or "," not in value:
        return None
    m = re.fullmatch(r"\s*bytes=([\d,\s-]+)", value)
    if not m:
        return None
    out = []
    for spec in m.group(1).split(","):
        a, _, b = spec.strip().partition("-")
        if not a.isdigit() or not b.isdigit() or int(b) < int(a) or \
           int(b) >= size:
            return None
        out.append((int(a), int(b)))
    return out


def parse_content_range(value):
    """'bytes A-B/TOTAL' or 'bytes A-B/*' -> (A, B), else None."""
    if not value:
        return None
    m = re.fullmatch(r"\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*", value)
    if not m:
        return None
    return (int(m.group(1)), int(m.group(2)))


class Handler(http.server.BaseHTTPRequestHandler):
    """A correct server: ranges on GET, partial PUT in place."""

    protocol_version = "HTTP/1.1"
    server_version = "fault-server"

    # --- helpers ---------------------------------------------------------

    def log_message(self, format, *a):
        pass                                  # our own log, not stderr

    def log_request_line(self, status, sent):
        log("%s %s range=%s content-range=\"%s\" status=%d sent=%d" % (
            self.command, self.path,
            self.headers.get("Range") or "-",
            self.headers.get("Content-Range") or "-",
            status, sent))

    def read_body(self):
        """Read the whole request body (Content-Length or chunked), so
        the connection stays usable for the next request."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = b""
            while True:
                line = self.rfile.readline(1024)
                n = int(line.split(b";")[0].strip() or b"0", 16)
                if n == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n",
                                                           b""):
                        pass
                    return body
                body += self.rfile.read(n)
                self.rfile.readline(1024)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def answer(self, status, body=b"", headers=(), send_body=True,
               length=None):
        """Send a complete answer, always with Content-Length."""
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length",
                         str(len(body) if length is None else length))
        self.end_headers()
        sent = 0
        try:
            if send_body and body:
                self.wfile.write(body)
                sent = len(body)
            self.wfile.flush()
        finally:
            # Also when the client hung up: a client that stops reading a
            # wrong answer is what some tests look for.
            self.log_request_line(status, sent)

    def object_bytes(self):
        with file_lock:
            with open(args.file, "rb") as f:
                return f.read()

    def object_size(self):
        return os.stat(args.file).st_size

    def validators(self):
        st = os.stat(args.file)
        return [("Last-Modified",
                 self.date_time_string(int(st.st_mtime))),
                ("ETag", '"%x-%x"' % (st.st_size, st.st_mtime_ns))]

    # --- the steps a mode may override -----------------------------------

    def do_HEAD(self):
        self.answer(200, headers=[("Accept-Ranges", "bytes")]
                    + self.validators(),
                    send_body=False, length=self.object_size())

    def do_GET(self):
        data = self.object_bytes()
        many = parse_ranges(self.headers.get("Range"), len(data))
        if many is not None:
            self.serve_ranges(data, many)
            return
        r = parse_range(self.headers.get("Range"), len(data))
        if r == "unsatisfiable":
            self.answer(416, headers=[("Content-Range",
                                       "bytes */%d" % len(data))])
        elif r is None:
            self.serve_whole(data)
        else:
            self.serve_range(data, r[0], r[1])

    def serve_whole(self, data):
        self.answer(200, data, headers=[("Accept-Ranges", "bytes")]
                    + self.validators())

    def serve_range(self, data, start, end):
        self.answer(206, data[start:end + 1],
                    headers=[("Content-Range", "bytes %d-%d/%d" %
                              (start, end, len(data)))]
                    + self.validators())

    def serve_ranges(self, data, ranges):
        # Like S3: a request for several ranges gets the whole object.
        self.serve_whole(data)

    def multipart(self, data, parts, boundary="BOUNDARY", quote=False,
                  preamble=b""):
        """A multipart/byteranges answer with the (start, end) parts."""
        body = preamble
        for a, b in parts:
            body += (b"\r\n--%s\r\nContent-Type: application/octet-stream"
                     b"\r\nContent-Range: bytes %d-%d/%d\r\n\r\n" %
                     (boundary.encode(), a, b, len(data))) + data[a:b + 1]
        body += b"\r\n--%s--\r\n" % boundary.encode()
        ctype = "multipart/byteranges; boundary=" + \
            ('"%s"' % boundary if quote else boundary)
        self.answer(206, body, headers=[("Content-Type", ctype)]
                    + self.validators())

    def do_PUT(self):
        body = self.read_body()
        cr = self.headers.get("Content-Range")
        if cr is None:
            self.replace_whole(body)
            return
        r = parse_content_range(cr)
        if r is None or r[1] - r[0] + 1 != len(body):
            self.answer(400, b"bad Content-Range\n")
            return
        self.write_range(r[0], body)

    def replace_whole(self, body):
        with file_lock:
            with open(args.file, "wb") as f:
                f.write(body)
        self.answer(204)

    def write_range(self, offset, body):
        with file_lock:
            with open(args.file, "r+b") as f:
                f.seek(offset)
                f.write(body)
        self.answer(204)


class IgnoreContentRange(Handler):
    """A PUT replaces the whole object with the body, whatever its
    Content-Range says (what RFC 9110 servers that do not know partial PUT
    may do): one NBD block write would destroy the disk."""

    def write_range(self, offset, body):
        self.replace_whole(body)


class IgnoreRange(Handler):
    """No range support: GET always answers 200 with the whole object,
    HEAD does not offer Accept-Ranges."""

    def do_HEAD(self):
        self.answer(200, send_body=False, length=self.object_size())

    def serve_range(self, data, start, end):
        self.answer(200, data)


class RefuseHead(Handler):
    """HEAD answers 403, like a presigned URL signed for GET only."""

    def do_HEAD(self):
        self.answer(403, send_body=False)


class RefusePartialPut(Handler):
    """A PUT with Content-Range answers 501 (what nginx's dav module
    does)."""

    def write_range(self, offset, body):
        self.answer(501, b"partial PUT not implemented\n")


class WrongContentRange(Handler):
    """206 answers whose Content-Range and body are for the wrong offset
    (one byte later, when possible): the client must not accept them.
    A 1-byte range (a size probe) is answered correctly, so the fault
    reaches the reads."""

    def serve_range(self, data, start, end):
        if end > start and end + 1 < len(data):
            start, end = start + 1, end + 1
        super().serve_range(data, start, end)


class ShortBody(Handler):
    """206 answers that promise the requested range but end the body
    halfway and close the connection.  A 1-byte range (a size probe) is
    answered correctly, so the fault reaches the reads."""

    def serve_range(self, data, start, end):
        if end == start:
            super().serve_range(data, start, end)
            return
        self.send_response(206)
        self.send_header("Content-Range",
                         "bytes %d-%d/%d" % (start, end, len(data)))
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Connection", "close")
        self.end_headers()
        chunk = data[start:end + 1]
        chunk = chunk[:len(chunk) // 2]
        self.wfile.write(chunk)
        self.wfile.flush()
        self.close_connection = True
        self.log_request_line(206, len(chunk))


class Multipart(Handler):
    """Several ranges in one answer, correctly but unlike nginx: a quoted
    boundary, a preamble, the parts in reverse order (RFC 9110 14.6
    allows all three)."""

    def serve_ranges(self, data, ranges):
        self.multipart(data, reversed(ranges), boundary="a'b(c)+_,-./:=?",
                       quote=True, preamble=b"This is a preamble.")


class MergeRanges(Handler):
    """A request for several ranges gets one 206 covering all of them,
    first to last (RFC 9110 lets a server coalesce ranges)."""

    def serve_ranges(self, data, ranges):
        self.serve_range(data, ranges[0][0], ranges[-1][1])


class MultipartWrongPart(Handler):
    """A multipart answer whose last part is for the range one byte later
    than asked (its bytes too): none of its bytes may be used."""

    def serve_ranges(self, data, ranges):
        a, b = ranges[-1]
        if b + 1 < len(data):
            ranges = ranges[:-1] + [(a + 1, b + 1)]
        self.multipart(data, ranges)


MODES = {
    "normal": Handler,
    "multipart": Multipart,
    "merge-ranges": MergeRanges,
    "multipart-wrong-part": MultipartWrongPart,
    "ignore-content-range": IgnoreContentRange,
    "ignore-range": IgnoreRange,
    "refuse-head": RefuseHead,
    "refuse-partial-put": RefusePartialPut,
    "wrong-content-range": WrongContentRange,
    "short-body": ShortBody,
}


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    global args, log_file
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--mode", choices=sorted(MODES), default="normal")
    p.add_argument("--file", required=True, help="the object to serve")
    p.add_argument("--log", required=True, help="request log")
    p.add_argument("--port", type=int, default=0, help="0: kernel picks")
    p.add_argument("--port-file", help="write the port here when ready")
    args = p.parse_args()
    log_file = open(args.log, "a")
    server = Server(("127.0.0.1", args.port), MODES[args.mode])
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % server.server_address[1])
        os.rename(tmp, args.port_file)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
