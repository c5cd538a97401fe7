#!/usr/bin/python3
# helpers/fault-server.py: an HTTP/1.1 server that misbehaves on demand.
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
import base64
import email.utils
import hashlib
import http.server
import os
import random
import re
import socket
import struct
import sys
import threading
import time

# One lock for the served file: requests run on many threads.
file_lock = threading.Lock()
log_lock = threading.Lock()
count_lock = threading.Lock()
gets = 0                        # ranged GETs of more than one byte so far
requests = 0                    # requests so far (stall-after-probe)
args = None
log_file = None


def log(line):
    with log_lock:
        log_file.write(line + "\n")
        log_file.flush()


# The plugin's probe asks for the object's first 8 KiB (FIRST_BYTES in
# plugins/curl/object/object.h); the check after a write asks for one
# byte.  Modes that fault the reads answer these correctly.
PROBE_BYTES = 8192


def probe_range(start, end):
    return end == start or (start == 0 and end < PROBE_BYTES)


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


class FileBytes:
    """The served file as a read-only bytes-like object that reads only
    the slices asked for: a load test makes hundreds of range requests,
    and reading the whole object for each is what made it slow."""

    def __init__(self, path):
        self.path = path
        self.size = os.stat(path).st_size

    def __len__(self):
        return self.size

    def __getitem__(self, key):
        start, stop, _ = key.indices(self.size)
        with open(self.path, "rb") as f:
            return os.pread(f.fileno(), max(0, stop - start), start)


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
        if isinstance(body, FileBytes):
            body = body[0:len(body)]
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
        """Those of the bytes this request serves (see do_GET)."""
        if getattr(self, "snapshot", None):
            return self.snapshot
        st = os.stat(args.file)
        return [("Last-Modified",
                 self.date_time_string(int(st.st_mtime))),
                ("ETag", '"%x-%x"' % (st.st_size, st.st_mtime_ns))] + \
            [tuple(h.split(": ", 1)) for h in args.header]

    def nth_get(self, start, end):
        """Count ranged GETs that are not the probe's (probe_range);
        returns this one's number from 1, or 0 for others."""
        global gets
        if probe_range(start, end):
            return 0
        with count_lock:
            gets += 1
            return gets

    def precondition_failed(self, vals):
        """If-Match / If-Unmodified-Since (RFC 9110 13.1.1, 13.1.4)."""
        etag = dict(vals)["ETag"]
        im = self.headers.get("If-Match")
        if im is not None:
            tags = [t.strip() for t in im.split(",")]
            return "*" not in tags and etag not in tags
        ius = self.headers.get("If-Unmodified-Since")
        if ius is not None:
            try:
                since = email.utils.parsedate_to_datetime(ius)
                lm = email.utils.parsedate_to_datetime(
                    dict(vals)["Last-Modified"])
            except (TypeError, ValueError):
                return False
            return lm > since
        return False

    honour_preconditions = True
    # Modes that change the object read it whole, under the lock, so that
    # bytes and validators are of one version; the others read only the
    # bytes they send.
    read_whole = False

    # --- the steps a mode may override -----------------------------------

    def do_HEAD(self):
        self.snapshot = None          # left by an earlier GET
        self.answer(200, headers=[("Accept-Ranges", "bytes")]
                    + self.validators(),
                    send_body=False, length=self.object_size())

    def do_GET(self):
        # The bytes and their validators from one moment, in case the
        # object is replaced meanwhile.
        with file_lock:
            if self.read_whole:
                with open(args.file, "rb") as f:
                    data = f.read()
            else:
                data = FileBytes(args.file)
            self.snapshot = None
            self.snapshot = self.validators()
        if self.honour_preconditions and \
           self.precondition_failed(self.snapshot):
            self.answer(412, b"precondition failed\n")
            return
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
    The probe's ranges are answered correctly, so the fault reaches the
    reads."""

    def serve_range(self, data, start, end):
        if not probe_range(start, end) and end + 1 < len(data):
            start, end = start + 1, end + 1
        super().serve_range(data, start, end)


class ShortBody(Handler):
    """206 answers that promise the requested range but end the body
    halfway and close the connection.  The probe's ranges are answered
    correctly, so the fault reaches the reads."""

    def serve_range(self, data, start, end):
        if probe_range(start, end):
            super().serve_range(data, start, end)
            return
        self.send_response(206)
        self.send_header("Content-Range",
                         "bytes %d-%d/%d" % (start, end, len(data)))
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Connection", "close")
        for k, v in self.validators():
            self.send_header(k, v)
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
    """A multipart answer whose last part is for a range one byte off
    (its bytes too): none of its bytes may be used."""

    def serve_ranges(self, data, ranges):
        # One byte later, or earlier when it ends at the last byte: every
        # answer is wrong.
        a, b = ranges[-1]
        d = 1 if b + 1 < len(data) else -1
        ranges = ranges[:-1] + [(a + d, b + d)]
        self.multipart(data, ranges)


class HeadZero(Handler):
    """HEAD says Content-Length: 0 for an object that is not empty; GET
    is correct.  A client that trusts HEAD serves an empty disk."""

    def do_HEAD(self):
        self.answer(200, headers=[("Accept-Ranges", "bytes")]
                    + self.validators(), send_body=False, length=0)


class ControlValidators(Handler):
    """Validators with a CR and a second header smuggled in after it.
    A client that copies them into If-Match / If-Unmodified-Since sends
    that header too; the log says so (injected=yes)."""

    def validators(self):
        st = os.stat(args.file)
        return [("Last-Modified",
                 self.date_time_string(int(st.st_mtime))
                 + "\rX-Injected: lm"),
                ("ETag", '"%x"\rX-Injected: etag' % st.st_size)]

    def log_request_line(self, status, sent):
        raw = str(self.headers)
        bad = "x-injected" in raw.lower() or any(
            ch in v for v in self.headers.values() for ch in "\r\n\x7f")
        log("%s %s range=%s injected=%s status=%d sent=%d" % (
            self.command, self.path, self.headers.get("Range") or "-",
            "yes" if bad else "no", status, sent))


class Unavailable503Long(Handler):
    """Every ranged GET of more than one byte: 503 with Retry-After: 30,
    so a client that sleeps through its back-off holds up a shutdown."""

    def serve_range(self, data, start, end):
        if self.nth_get(start, end):
            self.answer(503, b"busy\n", headers=[("Retry-After", "30")])
        else:
            super().serve_range(data, start, end)
class MultipartFraming(Handler):
    """Multipart answers framed by NEWLINE (CRLF like every real server,
    or a bare LF, which RFC 2046 does not allow but a lenient client may
    take) whose last part carries DELTA more bytes than its own
    Content-Range says: fewer when negative (the line break that follows
    then lands where its last bytes should be), the next bytes of the
    object when positive.  DELTA 0 is a legal answer.  The last part is
    the one followed by the close delimiter, where trailing bytes are
    easiest to overlook.  Registered below for each DELTA and NEWLINE."""

    newline = b"\r\n"
    delta = 0

    def serve_ranges(self, data, ranges):
        nl = self.newline
        body = b""
        for i, (a, b) in enumerate(ranges):
            part = data[a:b + 1]
            if i == len(ranges) - 1 and self.delta < 0:
                part = part[:max(0, len(part) + self.delta)]
            elif i == len(ranges) - 1 and self.delta > 0:
                extra = data[b + 1:b + 1 + self.delta]
                part += extra + b"x" * (self.delta - len(extra))
            body += (b"--BOUNDARY" + nl +
                     b"Content-Type: application/octet-stream" + nl +
                     b"Content-Range: bytes %d-%d/%d" % (a, b, len(data)) +
                     nl + nl + part + nl)
        body += b"--BOUNDARY--" + nl
        self.answer(206, body,
                    headers=[("Content-Type",
                              "multipart/byteranges; boundary=BOUNDARY")]
                    + self.validators())


class FuzzAnswers(Handler):
    """Answers to ranged GETs of more than one byte, mutated at random:
    the status, Content-Range (first, last or total off by one,
    malformed, missing, twice), Content-Length (off by one, twice), a
    body shorter or longer than declared with and without the connection
    closed, chunked or not, a foreign ETag.  About half the answers are
    correct, and some of the mutations are legal too (100 Continue
    first, no Content-Length and a close, chunked, extra white space).
    The client must get the right bytes or an error, never wrong bytes.

    The answer depends only on FAULT_SEED (environment, default 1) and
    the range, so a read that went wrong can be replayed; the log gets
    one line per answer: "fuzz-answers: bytes=A-B: KIND"."""

    KINDS = [
        "ok-100-continue", "ok-no-length-close", "ok-chunked", "ok-spaces",
        "200-whole", "200-range", "204", "404", "416", "500",
        "302-no-location",
        "first+1", "first-1", "last+1", "last-1", "total+1", "total-1",
        "total-star", "cr-malformed", "cr-missing",
        "cl+1", "cl-1", "dup-cl-same", "dup-cl-differ",
        "short-close", "short-keepalive", "short-no-length-close",
        "short-chunked", "long-keepalive", "long-no-length-close",
        "long-chunked",
        "dup-cr-same", "dup-cr-right-then-wrong", "dup-cr-wrong-then-right",
        "dup-cr-malformed-then-right",
        "etag-other",
    ]

    MALFORMED = ["bytes %d-%d", "bytes=%d-%d/%d", "%d-%d/%d",
                 "bytes %d - %d/%d", "bytes %d-%d/%d junk",
                 "bytes %d-%d/%d, bytes 0-0/%d", "bytes -%d-%d/%d"]

    def serve_range(self, data, start, end):
        if probe_range(start, end):
            super().serve_range(data, start, end)
            return
        rnd = random.Random("%s:%d-%d" % (os.environ.get("FAULT_SEED", "1"),
                                          start, end))
        kind = "ok" if rnd.random() < 0.5 else rnd.choice(self.KINDS)
        size = len(data)
        # One byte later, or earlier at the object's end.
        d = 1 if end + 1 < size else -1
        if kind in ("first+1", "last+1") and end + 1 >= size or \
           kind == "first-1" and start == 0:
            kind = "ok"
        log("fuzz-answers: bytes=%d-%d: %s" % (start, end, kind))

        status = 206
        f, l, total = start, end, "%d" % size
        body = None                 # None: the bytes of f-l
        length = "auto"             # Content-Length: "auto", None or a number
        close = chunked = False
        pre = b""
        crs = None                  # None: one Content-Range of f-l/total
        extra = []
        tweak = 0                   # bytes added to (or cut from) the body

        if kind == "ok-100-continue":
            pre = b"HTTP/1.1 100 Continue\r\n\r\n"
        elif kind == "ok-no-length-close":
            length, close = None, True
        elif kind == "ok-chunked":
            length, chunked = None, True
        elif kind == "ok-spaces":
            crs = ["   bytes %d-%d/%d \t" % (f, l, size)]
        elif kind == "200-whole":
            status, crs, f, l = 200, [], 0, size - 1
        elif kind == "200-range":
            status = 200
        elif kind in ("204", "404", "500", "302-no-location"):
            status, crs, body = int(kind[:3]), [], b""
            if kind == "404":
                body = b"not found\n"
        elif kind == "416":
            status, crs, body = 416, ["bytes */%d" % size], b""
        elif kind == "first+1":
            f, l = start + 1, end + 1
        elif kind == "first-1":
            f, l = start - 1, end - 1
        elif kind == "last+1":
            l = end + 1
        elif kind == "last-1":
            l = end - 1
        elif kind == "total+1":
            total = "%d" % (size + 1)
        elif kind == "total-1":
            total = "%d" % (size - 1)
        elif kind == "total-star":
            total = "*"
        elif kind == "cr-malformed":
            fmt = rnd.choice(self.MALFORMED)
            crs = [fmt % (f, l, size, size)[:fmt.count("%d")]]
        elif kind == "cr-missing":
            crs = []
        elif kind == "cl+1":
            length = end - start + 2
        elif kind == "cl-1":
            length = end - start
        elif kind == "dup-cl-same":
            extra = [("Content-Length", "%d" % (end - start + 1))]
        elif kind == "dup-cl-differ":
            extra = [("Content-Length", "%d" % (end - start + 2))]
        elif kind.startswith("short-"):
            tweak = -rnd.choice([1, 2, (end - start + 1) // 2])
            if kind == "short-close":
                close = True
            elif kind == "short-no-length-close":
                length, close = None, True
            elif kind == "short-chunked":
                length, chunked = None, True
        elif kind.startswith("long-"):
            tweak = rnd.choice([1, 2, 100])
            if kind == "long-no-length-close":
                length, close = None, True
            elif kind == "long-chunked":
                length, chunked = None, True
        elif kind == "dup-cr-same":
            crs = ["bytes %d-%d/%d" % (f, l, size)] * 2
        elif kind == "dup-cr-right-then-wrong":
            crs = ["bytes %d-%d/%d" % (f, l, size),
                   "bytes %d-%d/%d" % (f + d, l + d, size)]
        elif kind == "dup-cr-wrong-then-right":
            crs = ["bytes %d-%d/%d" % (f + d, l + d, size),
                   "bytes %d-%d/%d" % (f, l, size)]
            f, l = f + d, l + d
        elif kind == "dup-cr-malformed-then-right":
            # The bytes of the malformed one's range: which is meant?
            crs = ["bytes %d-%d/%d junk" % (f + d, l + d, size),
                   "bytes %d-%d/%d" % (f, l, size)]
            f, l = f + d, l + d
        elif kind == "etag-other":
            extra = [("ETag", '"someone-else"')]

        if body is None:
            body = data[f:l + 1]
            if tweak < 0:
                body = body[:max(0, len(body) + tweak)]
            elif tweak > 0:
                # The object's next bytes, or junk at its end.
                more = data[l + 1:l + 1 + tweak]
                body += more + b"\r\n" * tweak
                body = body[:l - f + 1 + tweak]
        if crs is None:
            crs = ["bytes %d-%d/%s" % (f, l, total)]
        if length == "auto":
            length = l - f + 1 if status == 206 else len(body)

        head = [("Content-Range", v) for v in crs]
        if not any(k == "ETag" for k, _ in extra):
            head += self.validators()
        head += extra
        if length is not None:
            head.append(("Content-Length", "%d" % length))
        if chunked:
            head.append(("Transfer-Encoding", "chunked"))
        if close:
            head.append(("Connection", "close"))
        out = pre + b"HTTP/1.1 %d Fuzz\r\n" % status
        for k, v in head:
            out += ("%s: %s\r\n" % (k, v)).encode()
        out += b"\r\n"
        if chunked:
            if body:
                out += b"%x\r\n" % len(body) + body + b"\r\n"
            out += b"0\r\n\r\n"
        else:
            out += body
        try:
            self.wfile.write(out)
            self.wfile.flush()
        finally:
            self.log_request_line(status, len(body))
        if close:
            self.close_connection = True


class First503Once(Handler):
    """The first request is answered 503 (a server busy at boot), then
    all is well: the probe retries it."""

    served = False

    def busy_or(self, serve, send_body):
        with count_lock:
            first = not First503Once.served
            First503Once.served = True
        if first:
            self.answer(503, b"busy\n", send_body=send_body)
        else:
            serve()

    def do_HEAD(self):
        self.busy_or(super().do_HEAD, False)

    def do_GET(self):
        self.busy_or(super().do_GET, True)


class Silent(Handler):
    """Ranged GETs of more than one byte are never answered (the server
    hangs for a minute), the size probe is."""

    def serve_range(self, data, start, end):
        if self.nth_get(start, end):
            log("silent: %s range=%s" % (self.path,
                                         self.headers.get("Range")))
            time.sleep(60)
            self.close_connection = True
        else:
            super().serve_range(data, start, end)


class StallAfterProbe(Handler):
    """The probe (its one GET) is answered; every request after it hangs
    (a minute, then the connection closes): a server that stops
    answering just after nbdkit's start-up."""

    def stall_or(self, serve):
        global requests
        with count_lock:
            requests += 1
            n = requests
        if n <= 1:
            serve()
            return
        log("stalled: %s range=%s" % (self.command,
                                      self.headers.get("Range") or "-"))
        time.sleep(60)
        self.close_connection = True

    def do_HEAD(self):
        self.stall_or(super().do_HEAD)

    def do_GET(self):
        self.stall_or(super().do_GET)


class CloseIdle(Handler):
    """A connection that sends no request for half a second is closed,
    as servers close connections that were opened and never used."""

    timeout = 0.5

    def handle_one_request(self):
        try:
            super().handle_one_request()
        except TimeoutError:
            self.close_connection = True
        if self.close_connection:
            log("close-idle: closed port %d" % self.client_address[1])


class DropIdleFirst(Handler):
    """A connection whose first request comes more than 0.2 s after it
    was accepted is closed unanswered (reset: the request is left
    unread), as a server closes a connection that stayed idle while
    the close crosses the client's request."""

    def setup(self):
        super().setup()
        self.accepted = time.monotonic()
        self.first = True

    def handle_one_request(self):
        if self.first:
            self.first = False
            self.rfile.peek(1)
            if time.monotonic() - self.accepted > 0.2:
                log("drop-idle-first: closed port %d unanswered" %
                    self.client_address[1])
                self.close_connection = True
                return
        super().handle_one_request()


class Serial(Handler):
    """One connection at a time (see SerialServer), each closed after
    one answer, as a simple single-threaded server does."""

    protocol_version = "HTTP/1.0"

    def handle_one_request(self):
        super().handle_one_request()
        log("serial: answered port %d" % self.client_address[1])


class MultipartEndless(Handler):
    """A correct multipart answer, without a length, that then goes on
    for ever (until the client hangs up, or 30 s): an endless epilogue
    after the close delimiter, or (headers=True) endless header lines
    in its first part.  The bytes keep moving, so no stall timeout ends
    it: the client must bound what it reads."""

    headers_mode = False

    def serve_ranges(self, data, ranges):
        self.send_response(206)
        self.send_header("Content-Type",
                         "multipart/byteranges; boundary=BOUNDARY")
        for k, v in self.validators():
            self.send_header(k, v)
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        body = b""
        for a, b in ranges:
            body += (b"--BOUNDARY\r\nContent-Range: bytes %d-%d/%d\r\n" %
                     (a, b, len(data)))
            if self.headers_mode:
                break
            body += b"\r\n" + data[a:b + 1] + b"\r\n"
        if not self.headers_mode:
            body += b"--BOUNDARY--\r\n"
        filler = (b"X-Pad: 0123456789abcdef\r\n" if self.headers_mode
                  else b"epilogue " * 100 + b"\r\n")
        t0 = time.time()
        try:
            self.wfile.write(body)
            while time.time() - t0 < 30:
                self.wfile.write(filler * 16)
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.log_request_line(206, len(body))


def reset(handler):
    """Close the connection with an RST (SO_LINGER 0), not a FIN."""
    handler.wfile.flush()
    handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                  struct.pack("ii", 1, 0))
    handler.close_connection = True


def range_headers(handler, data, start, end):
    """The headers of a 206 that promises the range, whole."""
    handler.send_response(206)
    handler.send_header("Content-Range",
                        "bytes %d-%d/%d" % (start, end, len(data)))
    handler.send_header("Content-Length", str(end - start + 1))
    for k, v in handler.validators():
        handler.send_header(k, v)
    handler.end_headers()


def half_answer(handler, data, start, end, then):
    """206 headers promising the range, half its bytes, then 'then'."""
    range_headers(handler, data, start, end)
    chunk = data[start:end + 1][:(end - start + 1) // 2]
    handler.wfile.write(chunk)
    handler.wfile.flush()
    handler.log_request_line(206, len(chunk))
    then()
    handler.close_connection = True


class ResetSome(Handler):
    """Every third ranged GET: half the body, then a connection reset."""

    def serve_range(self, data, start, end):
        if self.nth_get(start, end) % 3 == 1:
            half_answer(self, data, start, end, lambda: reset(self))
        else:
            super().serve_range(data, start, end)


class TruncateSome(Handler):
    """Every third ranged GET: half the body, then the connection closes."""

    def serve_range(self, data, start, end):
        if self.nth_get(start, end) % 3 == 1:
            half_answer(self, data, start, end, lambda: None)
        else:
            super().serve_range(data, start, end)


class TruncateLong(Handler):
    """Ranged GETs of more than 1 MiB (read-ahead's, longer than a
    client's reads of 1 MiB): half the body, then the connection
    closes."""

    def serve_range(self, data, start, end):
        if end - start + 1 > 1024 * 1024:
            half_answer(self, data, start, end, lambda: None)
        else:
            super().serve_range(data, start, end)


class Unavailable503Some(Handler):
    """Every third ranged GET: 503 Service Unavailable."""

    def serve_range(self, data, start, end):
        if self.nth_get(start, end) % 3 == 1:
            self.answer(503, b"busy\n")
        else:
            super().serve_range(data, start, end)


class TooMany429Some(Handler):
    """Every fourth ranged GET: 429 Too Many Requests, Retry-After: 1."""

    def serve_range(self, data, start, end):
        if self.nth_get(start, end) % 4 == 1:
            self.answer(429, b"slow down\n", headers=[("Retry-After", "1")])
        else:
            super().serve_range(data, start, end)


class StallSome(Handler):
    """Every fifth ranged GET: half the body, then nothing for 4 s (run
    the plugin with timeout=1), then the connection closes."""

    def serve_range(self, data, start, end):
        if self.nth_get(start, end) % 5 == 1:
            half_answer(self, data, start, end, lambda: time.sleep(4))
        else:
            super().serve_range(data, start, end)


class StallHalf(Handler):
    """Every ranged GET, the probe's too: half the body at once, then
    nothing for a minute, then the connection closes (a server that
    hangs in the middle of an answer)."""

    def serve_range(self, data, start, end):
        half_answer(self, data, start, end, lambda: time.sleep(60))


class StallHalfAfterProbe(Handler):
    """The probe's ranges are answered whole; every other ranged GET
    gets half its body in four pieces 0.3 s apart, then nothing for a
    minute, then the connection closes (a stall after bytes that kept
    coming for a while)."""

    def serve_range(self, data, start, end):
        if probe_range(start, end):
            super().serve_range(data, start, end)
            return
        range_headers(self, data, start, end)
        half = data[start:start + (end - start + 1) // 2]
        step = (len(half) + 3) // 4
        try:
            for i in range(0, len(half), step):
                if i > 0:
                    time.sleep(0.3)
                self.wfile.write(half[i:i + step])
                self.wfile.flush()
            self.log_request_line(206, len(half))
            time.sleep(60)
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True


class ReplaceAfter(Handler):
    """The third ranged GET finds the object replaced by other bytes (a
    new ETag and mtime), so If-Match fails with 412 from then on."""

    read_whole = True

    def do_GET(self):
        r = parse_range(self.headers.get("Range"), self.object_size())
        if isinstance(r, tuple) and self.nth_get(r[0], r[1]) == 3:
            with file_lock:
                with open(args.file, "r+b") as f:
                    head = f.read(4096)
                    f.seek(0)
                    f.write(bytes(b ^ 0xff for b in head))
                st = os.stat(args.file)
                os.utime(args.file, ns=(st.st_atime_ns,
                                        st.st_mtime_ns + 7 * 10**9))
        super().do_GET()


class ReplaceIgnorePrecondition(ReplaceAfter):
    """The same, from a server that ignores If-Match: the new bytes come
    with the new ETag."""

    honour_preconditions = False


class ReplaceStarEtag(ReplaceAfter):
    """ReplaceAfter, from a server whose ETag is always "*", which is no
    entity-tag: "If-Match: *" matches any version, so a client that
    sends it back pins nothing.  Last-Modified changes with the
    replacement."""

    def validators(self):
        if getattr(self, "snapshot", None):
            return self.snapshot
        return [(k, "*" if k == "ETag" else v)
                for k, v in super().validators()]


class ReplaceHeadOnlyEtag(ReplaceIgnorePrecondition):
    """HEAD answers with ETag and Last-Modified, GETs with Last-Modified
    only; the object is replaced (If-Match ignored, as the GETs never
    showed an ETag) and the new bytes come with no validators at all,
    without the Last-Modified every GET carried until then."""

    first = None

    def validators(self):
        if getattr(self, "snapshot", None):
            return self.snapshot
        vals = super().validators()
        if self.command == "HEAD":
            return vals
        with count_lock:
            if ReplaceHeadOnlyEtag.first is None:
                ReplaceHeadOnlyEtag.first = vals
            first = ReplaceHeadOnlyEtag.first
        if vals != first:
            return []
        return [(k, v) for k, v in vals if k != "ETag"]


class UnstableEtag(Handler):
    """Same bytes, but a different ETag in every answer (servers behind a
    load balancer that compute ETags per machine), and If-Match ignored."""

    honour_preconditions = False

    def validators(self):
        with count_lock:
            self.__class__.serial += 1
            n = self.__class__.serial
        return [("ETag", '"machine-%d"' % n)]

    serial = 0


class Stale416(Handler):
    """A cache on the way with a short copy: the first request for each
    range of more than one byte gets 416 (with the object's right size,
    "bytes */SIZE"); asked again, the range is served.  Each ranged GET
    also logs "port P range=A-B", the client's port, so that a test can
    tell which connection asked."""

    seen = set()
    always = False

    def serve_range(self, data, start, end):
        log("port %d range=%d-%d" % (self.client_address[1], start, end))
        if not probe_range(start, end):
            with count_lock:
                first = (start, end) not in Stale416.seen
                Stale416.seen.add((start, end))
            if first or self.always:
                self.answer(416, b"range not satisfiable\n",
                            headers=[("Content-Range",
                                      "bytes */%d" % len(data))]
                            + self.validators())
                return
        super().serve_range(data, start, end)


class Redirect(Handler):
    """/disk.img redirects (302) to /real/disk.img, which serves it."""

    def location(self):
        return "/real" + self.path

    def redirect_or(self, serve):
        if not self.path.startswith("/real/"):
            self.answer(302, headers=[("Location", self.location())])
        else:
            serve()

    def do_HEAD(self):
        self.redirect_or(super().do_HEAD)

    def do_GET(self):
        self.redirect_or(super().do_GET)


class RedirectUserinfo(Redirect):
    """As redirect, with a user name and password in the Location's
    authority (LOCUSER:LOCPW@), which a debug log must not show."""

    def location(self):
        return "http://LOCUSER:LOCPW@127.0.0.1:%d/real%s" % (
            self.server.server_address[1], self.path)


class RedirectFile(Handler):
    """Every request redirects to file:///etc/passwd."""

    def do_HEAD(self):
        self.answer(302, headers=[("Location", "file:///etc/passwd")])

    do_GET = do_HEAD


class Auth(Handler):
    """401 unless basic credentials alice:secret are sent."""

    def authorized(self):
        want = "Basic " + base64.b64encode(b"alice:secret").decode()
        if self.headers.get("Authorization") == want:
            return True
        self.answer(401, b"who are you?\n",
                    headers=[("WWW-Authenticate", 'Basic realm="disk"')])
        return False

    def do_HEAD(self):
        if self.authorized():
            super().do_HEAD()

    def do_GET(self):
        if self.authorized():
            super().do_GET()


class Flaky(Handler):
    """About 3% of ranged GETs fail transiently: a 503, a reset or a
    truncated body, chosen at random (seeded, so runs repeat).  Requests
    for several ranges get multipart answers, as faulty.  At 1% the
    seeded rolls gave only 2 faults in the first 179 GETs, and read-ahead
    makes some runs ask for no more."""

    rng = random.Random(1)

    def serve_ranges(self, data, ranges):
        """Multipart answers, faulty as often as single ranges: a 503, or
        the body cut in the middle by a reset or a close."""
        n = self.nth_get(0, 1)
        with count_lock:
            roll = self.rng.random()
        if roll >= 0.03:
            self.multipart(data, ranges)
        elif n % 3 == 0:
            self.answer(503, b"busy\n")
        else:
            whole = []
            self.answer = lambda status, body, headers: whole.append(
                (status, body, headers))
            self.multipart(data, ranges)
            del self.answer
            status, body, headers = whole[0]
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[:len(body) // 2])
            self.log_request_line(status, len(body) // 2)
            if n % 3 == 1:
                reset(self)
            self.close_connection = True

    def serve_range(self, data, start, end):
        n = self.nth_get(start, end)
        with count_lock:
            roll = self.rng.random()
        if n and roll < 0.03:
            kind = n % 3
            if kind == 0:
                self.answer(503, b"busy\n")
            elif kind == 1:
                half_answer(self, data, start, end, lambda: reset(self))
            else:
                half_answer(self, data, start, end, lambda: None)
        else:
            super().serve_range(data, start, end)


class ReplaceDisguised(ReplaceIgnorePrecondition):
    """ReplaceIgnorePrecondition, but the answers that carry the new
    bytes disguise their new validator in a form a client may fail to
    compare (disguise, overridden by each mode below).  Until the object
    is replaced every answer (HEAD, the first GETs) has the normal
    validators, so the client pins the object as usual."""

    first = None                # the validators the object was opened with

    def validators(self):
        if getattr(self, "snapshot", None):
            return self.snapshot
        vals = super().validators()
        with count_lock:
            if ReplaceDisguised.first is None:
                ReplaceDisguised.first = vals
            first = ReplaceDisguised.first
        if vals == first:
            return vals
        return self.disguise(vals, dict(first)["ETag"])

    @staticmethod
    def padded_etag(vals, length):
        """A strong ETag of LENGTH characters, quotes included, that
        starts like the real new one."""
        inner = dict(vals)["ETag"].strip('"') + "-"
        inner += "x" * (length - 2 - len(inner))
        return '"%s"' % inner


class ReplaceDropEtag(ReplaceDisguised):
    """The new bytes come with no ETag at all, only a newer
    Last-Modified."""

    def disguise(self, vals, old_etag):
        return [(k, v) for k, v in vals if k != "ETag"]


class ReplaceNoValidators(ReplaceDisguised):
    """The new bytes come with no ETag and no Last-Modified: nothing to
    compare."""

    def disguise(self, vals, old_etag):
        return []


class ReplaceLongEtag(ReplaceDisguised):
    """The new bytes come with a strong ETag of 300 characters: longer
    than a client may keep, but on a header line of ordinary length."""

    def disguise(self, vals, old_etag):
        return [(k, self.padded_etag(vals, 300) if k == "ETag" else v)
                for k, v in vals]


class ReplaceHugeEtag(ReplaceDisguised):
    """The new bytes come with an ETag header line of more than 1100
    bytes: longer than a client may read a header line."""

    def disguise(self, vals, old_etag):
        return [(k, self.padded_etag(vals, 1200) if k == "ETag" else v)
                for k, v in vals]


class ReplaceDupEtag(ReplaceDisguised):
    """The new bytes come with two ETag headers: the new one, then the
    one the object was opened with.  ETag is a singleton field (RFC 9110
    8.8.3); a client that keeps the last one sees the old object."""

    def disguise(self, vals, old_etag):
        return vals + [("ETag", old_etag)]


class HeadZeroChunked(HeadZero):
    """HEAD says Content-Length: 0 (as HeadZero).  The probe's GET (and
    the check after a write, of bytes=0-0) is answered 200 with
    Content-Length: 0 and also
    Transfer-Encoding: chunked, which wins (RFC 9112 6.3): the body is
    the whole object in chunks.  A client that reads "200 and
    Content-Length: 0" as the proof of an empty object serves an empty
    disk.  Other ranges are answered correctly."""

    def serve_range(self, data, start, end):
        if not probe_range(start, end):
            super().serve_range(data, start, end)
            return
        body = data[0:len(data)]
        self.send_response(200)
        for k, v in self.validators():
            self.send_header(k, v)
        self.send_header("Content-Length", "0")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sent = 0
        try:
            for i in range(0, len(body), 65536):
                chunk = body[i:i + 65536]
                self.wfile.write(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
                sent += len(chunk)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            self.log_request_line(200, sent)


def drip(handler, status, headers, length):
    """Headers promising a LENGTH-byte body, then that body at two bytes
    a second (so a client that waits for it all waits LENGTH / 2 s), and
    the connection closed.  Stops when the client hangs up."""
    handler.send_response(status)
    for k, v in headers:
        handler.send_header(k, v)
    handler.send_header("Content-Length", str(length))
    handler.end_headers()
    # Logged now: the request's own line comes only when the drip ends.
    log("drip: %s %s range=%s content-range=\"%s\": HTTP %d, %d bytes "
        "at 2 a second" % (handler.command, handler.path,
                           handler.headers.get("Range") or "-",
                           handler.headers.get("Content-Range") or "-",
                           status, length))
    sent = 0
    try:
        handler.wfile.flush()
        while sent < length:
            time.sleep(1)
            handler.wfile.write(b"." * min(2, length - sent))
            handler.wfile.flush()
            sent += min(2, length - sent)
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        handler.close_connection = True
        handler.log_request_line(status, sent)


class RedirectDrip(Handler):
    """/disk.img redirects (302) to /real/disk.img, which serves it; the
    redirect to a GET has a 200-byte body that takes 100 s to arrive
    (the one to a HEAD says Content-Length: 200 too, but a HEAD answer
    has no body).  A client ignores that body, but must not wait for
    all of it."""

    def do_HEAD(self):
        if self.path.startswith("/real/"):
            super().do_HEAD()
        else:
            self.answer(302, headers=[("Location", "/real" + self.path)],
                        send_body=False, length=200)

    def do_GET(self):
        if self.path.startswith("/real/"):
            super().do_GET()
        else:
            drip(self, 302, [("Location", "/real" + self.path)], 200)


class PutDrip(Handler):
    """A partial PUT is applied, then answered 200 with a 200-byte body
    that takes 100 s to arrive."""

    def write_range(self, offset, body):
        with file_lock:
            with open(args.file, "r+b") as f:
                f.seek(offset)
                f.write(body)
        drip(self, 200, [], 200)


# Read-ahead asks for ranges longer than a read (its segments); the
# reads in the tests that use these modes are 64 KiB at most.
LARGE_RANGE = 64 * 1024


class ShortBodyLarge(Handler):
    """A range longer than LARGE_RANGE: half the body, then the connection
    closes (a proxy that cuts long answers).  Shorter ranges, the
    probe's among them, are answered correctly."""

    def serve_range(self, data, start, end):
        if end - start + 1 > LARGE_RANGE:
            half_answer(self, data, start, end, lambda: None)
        else:
            super().serve_range(data, start, end)


class DripLarge(Handler):
    """A range longer than LARGE_RANGE is sent at about 20 KB/s (2000
    bytes every 0.1 s: a 256 KiB answer takes 13 s); shorter ranges, the
    probe's among them, at once.  Stops when the client hangs up."""

    drip = 2000                 # bytes every 0.1 s

    def dripped(self, start, end):
        return end - start + 1 > LARGE_RANGE

    def serve_range(self, data, start, end):
        if not self.dripped(start, end):
            super().serve_range(data, start, end)
            return
        range_headers(self, data, start, end)
        log("%s: %s range=%s" % (args.mode, self.path,
                                 self.headers.get("Range")))
        body = data[start:end + 1]
        sent = 0
        try:
            self.wfile.flush()
            while sent < len(body):
                self.wfile.write(body[sent:sent + self.drip])
                self.wfile.flush()
                sent += len(body[sent:sent + self.drip])
                if sent < len(body):
                    time.sleep(0.1)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            self.log_request_line(206, sent)


class DripAfterProbe(DripLarge):
    """The probe's ranges are answered at once, every other range at
    about 20 KB/s: a mirror that is proven the same object and then
    serves reads a hundred times slower than a link would."""

    def dripped(self, start, end):
        return not probe_range(start, end)


class IgnoreContentRangeHead503(IgnoreContentRange):
    """A PUT replaces the whole object (as IgnoreContentRange), and every
    HEAD after the first PUT answers 503, so a client that checks its
    first write with a HEAD learns nothing.  HEAD before any PUT is
    correct, so start-up works."""

    put_seen = False

    def do_PUT(self):
        IgnoreContentRangeHead503.put_seen = True
        super().do_PUT()

    def do_HEAD(self):
        if IgnoreContentRangeHead503.put_seen:
            self.answer(503, send_body=False)
        else:
            super().do_HEAD()


class IgnoreContentRangePut502(Handler):
    """A PUT replaces the whole object (as IgnoreContentRange) and is
    then answered 502, as by a gateway whose origin did the write but
    answered too late: the client cannot tell whether it was done."""

    def write_range(self, offset, body):
        with file_lock:
            with open(args.file, "wb") as f:
                f.write(body)
        self.answer(502, b"bad gateway\n")


class StatusHeader(Handler):
    """Every answer's header block ends with headers named like status
    lines ("HTTP/x: y", "HTTP/1.1 200 OK: x"): headers all the same,
    since only an answer's first line is its status line (libcurl and
    curl take them as headers).  A client that takes one for a status
    line starts the answer afresh and loses the status, Content-Length
    and Content-Range before it."""

    def end_headers(self):
        self.send_header("HTTP/x", "y")
        self.send_header("HTTP/1.1 200 OK", "x")
        super().end_headers()


class DigestOnly(Handler):
    """No ETag and no Last-Modified: every answer states the object's
    Repr-Digest (sha-256) instead, as a mirror proven by its digest
    alone does.  The digest of each version (size and mtime) is
    computed once, at its first answer (a HEAD computes it ahead)."""

    honour_preconditions = False
    digests = {}                # (size, mtime_ns) -> base64 sha-256

    def validators(self):
        if getattr(self, "snapshot", None):
            return self.snapshot
        st = os.stat(args.file)
        key = (st.st_size, st.st_mtime_ns)
        with count_lock:
            d = DigestOnly.digests.get(key)
        if d is None:
            with open(args.file, "rb") as f:
                d = base64.b64encode(
                    hashlib.sha256(f.read()).digest()).decode()
            with count_lock:
                DigestOnly.digests[key] = d
        return [("Repr-Digest", "sha-256=:%s:" % d)]


MODES = {
    "normal": Handler,
    "digest-only": DigestOnly,
    "reset-some": ResetSome,
    "truncate-some": TruncateSome,
    "truncate-long": TruncateLong,
    "503-some": Unavailable503Some,
    "429-some": TooMany429Some,
    "stall-some": StallSome,
    "stall-half": StallHalf,
    "stall-half-after-probe": StallHalfAfterProbe,
    "replace-after": ReplaceAfter,
    "replace-ignore-precondition": ReplaceIgnorePrecondition,
    "replace-star-etag": ReplaceStarEtag,
    "replace-head-only-etag": ReplaceHeadOnlyEtag,
    "unstable-etag": UnstableEtag,
    "stale-416": Stale416,
    "always-416": type("Always416", (Stale416,), {"always": True}),
    "redirect": Redirect,
    "redirect-file": RedirectFile,
    "redirect-userinfo": RedirectUserinfo,
    "auth": Auth,
    "flaky": Flaky,
    "multipart": Multipart,
    "merge-ranges": MergeRanges,
    "multipart-wrong-part": MultipartWrongPart,
    "ignore-content-range": IgnoreContentRange,
    "ignore-range": IgnoreRange,
    "refuse-head": RefuseHead,
    "refuse-partial-put": RefusePartialPut,
    "wrong-content-range": WrongContentRange,
    "short-body": ShortBody,
    "head-zero": HeadZero,
    "control-validators": ControlValidators,
    "503-long": Unavailable503Long,
    "first-503-once": First503Once,
    "silent": Silent,
    "stall-after-probe": StallAfterProbe,
    "close-idle": CloseIdle,
    "serial": Serial,
    "drop-idle-first": DropIdleFirst,
    "multipart-endless-epilogue": MultipartEndless,
    "multipart-endless-headers": type("MultipartEndlessHeaders",
                                      (MultipartEndless,),
                                      {"headers_mode": True}),
    "fuzz-answers": FuzzAnswers,
    "replace-drop-etag": ReplaceDropEtag,
    "replace-no-validators": ReplaceNoValidators,
    "replace-long-etag": ReplaceLongEtag,
    "replace-huge-etag": ReplaceHugeEtag,
    "replace-dup-etag": ReplaceDupEtag,
    "head-zero-chunked": HeadZeroChunked,
    "redirect-drip": RedirectDrip,
    "put-drip": PutDrip,
    "ignore-content-range-head-503": IgnoreContentRangeHead503,
    "ignore-content-range-put-502": IgnoreContentRangePut502,
    "short-body-large": ShortBodyLarge,
    "drip-large": DripLarge,
    "drip-after-probe": DripAfterProbe,
    "status-header": StatusHeader,
    # A mirror that drips at 5 kB/s once proven.
    "drip-5k-after-probe": type("Drip5kAfterProbe", (DripAfterProbe,),
                                {"drip": 500}),
}

# multipart-lf: legal, bare LF framing.  multipart-{short,long}{1,2}-
# {crlf,lf}: the last part 1 or 2 bytes short or long.
MODES["multipart-lf"] = type("MultipartLF", (MultipartFraming,),
                             {"newline": b"\n"})
for _nl, _nlname in ((b"\r\n", "crlf"), (b"\n", "lf")):
    for _delta in (-2, -1, 1, 2):
        _name = "multipart-%s%d-%s" % ("short" if _delta < 0 else "long",
                                        abs(_delta), _nlname)
        MODES[_name] = type("MultipartFraming", (MultipartFraming,),
                            {"newline": _nl, "delta": _delta})


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # The plugin opens connections= (16) at once; socketserver's 5
    # would leave some unaccepted for a while.
    request_queue_size = 64


class SerialServer(http.server.HTTPServer):
    """Accepts the next connection only once the last one is closed."""
    allow_reuse_address = True
    request_queue_size = 64


def main():
    global args, log_file
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--mode", choices=sorted(MODES), default="normal")
    p.add_argument("--file", required=True, help="the object to serve")
    p.add_argument("--log", required=True, help="request log")
    p.add_argument("--port", type=int, default=0, help="0: kernel picks")
    p.add_argument("--port-file", help="write the port here when ready")
    p.add_argument("--header", action="append", default=[],
                   help="'NAME: VALUE' sent with every answer's validators")
    args = p.parse_args()
    log_file = open(args.log, "a")
    kind = SerialServer if args.mode == "serial" else Server
    server = kind(("127.0.0.1", args.port), MODES[args.mode])
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
