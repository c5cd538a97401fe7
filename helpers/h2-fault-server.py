#!/usr/bin/python3
# helpers/h2-fault-server.py: an HTTP/2 server over TLS that misbehaves
# on demand.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.
#
# fault-server.py's faults are HTTP/1.1's; these are HTTP/2's, where
# many requests share one connection as streams: a stream cut short by
# END_STREAM or RST_STREAM, a stream refused, a connection ended by
# GOAWAY with streams in flight, a stream that never gets its body.  It
# serves one file (--file) at every path over TLS (--cert, --key) and
# offers only "h2" by ALPN: a client that does not pick it is logged and
# closed.  Single ranges get 206 with Content-Range, an exact
# Content-Length, a strong ETag and Last-Modified; several ranges get
# multipart/byteranges; If-Match and If-Unmodified-Since are honoured.
#
#   h2-fault-server.py --file FILE --cert PEM --key PEM --log FILE
#                      --port-file FILE [--mode MODE] [--nth N]
#                      [--lifetime SECONDS]
#
# The kernel picks the port, written to --port-file once the server
# listens.  It exits by itself after --lifetime seconds (default 300).
#
# --mode picks the fault; "the Nth GET" counts the GETs that are not
# the plugin's probe (the object's first 8 KiB, or one byte), over all
# connections, from 1:
#
#   normal          no fault
#   short-once      the Nth GET: half the body, then END_STREAM (the
#                   Content-Length promised all of it)
#   short-always    the same from the Nth GET on
#   short-nolen-once, short-nolen-always  the same without Content-Length
#                   (optional in HTTP/2): only END_STREAM says the end
#   long-nolen      the Nth GET: the body and 100 bytes more (the
#                   object's next, or "x" past its end), without
#                   Content-Length
#   rst-once        the Nth GET: half the body, then RST_STREAM
#                   (INTERNAL_ERROR)
#   rst-always      the same from the Nth GET on
#   refused-once    the Nth GET: RST_STREAM (REFUSED_STREAM) before any
#                   answer, which says it was not processed
#   stall-once      the Nth GET: the headers, then no body ever
#   stall-always    the same from the Nth GET on
#   wrong-range     the Nth GET: the bytes of the range one byte later
#                   (earlier at the object's end), labelled so by
#                   Content-Range (of the last part, for several ranges)
#   wrong-label     the Nth GET: the right bytes, labelled by
#                   Content-Range as the range one byte later (earlier)
#   changed         from the Nth GET on the object is another version
#                   (every byte inverted, another ETag, a later
#                   Last-Modified); a request pinned to the old one by
#                   If-Match or If-Unmodified-Since gets 412
#   changed-ignore-if-match  the same, but the preconditions are
#                   ignored: 206 with the new version's bytes and ETag
#   changed-noval   as changed, but no GET's answer carries a validator
#                   (HEAD's does): only a precondition tells versions
#                   apart
#   goaway          each connection's Nth request (any method, probe
#                   too) is not processed: GOAWAY names the one before
#                   it as the last stream, the streams up to it are
#                   answered, later ones ignored, then the connection
#                   is closed
#   goaway-abrupt   each connection's Nth request: its headers and half
#                   its body, then GOAWAY (INTERNAL_ERROR) naming it as
#                   the last stream, and the connection closed at once,
#                   every answer in flight cut off
#
# --nth is N (default 3).  One log line per event in --log, its first
# word the connection (numbered from 1 in the order accepted):
#
#   conn=1 open alpn=h2
#   conn=1 stream=1 GET /disk.img range=bytes=0-8191 status=206
#     length=8192 sent=8192 fault=-          (one line per answer)
#   conn=1 stream=5 reset-by-client code=8
#   conn=1 stream=7 GET /disk.img range=bytes=0-99 ignored
#                                            (after GOAWAY)
#   conn=1 goaway last-stream=5 code=0
#   conn=1 close requests=4
#
# fault= is short, long, rst, refused, stall, wrong-range, wrong-label,
# changed, precondition (a 412), goaway (the answer cut by
# goaway-abrupt) or "-".  An answer's line comes when it ended: sent all
# its body, or was cut (sent= says how much), or, for a stall, once its
# headers went.  length= is the body's length without the fault (what
# Content-Length promised, when there is one).
#
# Needs python3-h2 (Debian's package: h2, hpack, hyperframe); run with
# the system /usr/bin/python3.

import argparse
import email.utils
import os
import re
import select
import socket
import ssl
import sys
import threading
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
from hyperframe.frame import GoAwayFrame

args = None
log_file = None
log_lock = threading.Lock()
count_lock = threading.Lock()
gets = 0                        # non-probe GETs so far, all connections
conns = 0                       # connections accepted so far

# The plugin's probe asks for the object's first 8 KiB (FIRST_BYTES in
# plugins/curl/object/object.h); the check after a write for one byte.
PROBE_BYTES = 8192
# Body bytes sent at most per turn of a connection's loop, so that it
# reads the client's frames (WINDOW_UPDATE, RST_STREAM) between sends.
TURN_BYTES = 256 * 1024
# A connection whose client is quiet this long is closed.
IDLE_SECONDS = 60
# Inverts every byte: the "changed" object's bytes.
INVERT = bytes(range(255, -1, -1))


def log(line):
    with log_lock:
        log_file.write(line + "\n")
        log_file.flush()


def probe_range(start, end):
    return end == start or (start == 0 and end < PROBE_BYTES)


def parse_ranges(value, size):
    """'bytes=A-B[,C-D...]' -> [(start, end)] inclusive, inside the
    object (an end past it is cut to it, RFC 9110 14.1.1); None when
    absent or unparsable (serve the whole object); [] when no range is
    satisfiable.  A missing first or last position is read as RFC 9110
    says, for a client that sends one."""
    if not value:
        return None
    m = re.fullmatch(r"\s*bytes=([\d,\s-]+)", value)
    if not m:
        return None
    out = []
    for spec in m.group(1).split(","):
        a, sep, b = spec.strip().partition("-")
        if not sep or (not a and not b) or \
           (a and not a.isdigit()) or (b and not b.isdigit()):
            return None
        if not a:
            n = int(b)
            if n == 0:
                continue
            out.append((max(0, size - n), size - 1))
            continue
        start = int(a)
        end = int(b) if b else size - 1
        if start >= size or end < start:
            continue
        out.append((start, min(end, size - 1)))
    return out


class Version:
    """The object's bytes and validators: the file's, or (changed) the
    other version's."""

    def __init__(self, path, other):
        st = os.stat(path)
        self.path = path
        self.size = st.st_size
        self.other = other
        mtime = int(st.st_mtime) + (10 if other else 0)
        self.etag = '"%x-%x%s"' % (st.st_size, st.st_mtime_ns,
                                   "-v2" if other else "")
        self.last_modified = email.utils.formatdate(mtime, usegmt=True)
        self.mtime = mtime

    def bytes(self, start, end):
        with open(self.path, "rb") as f:
            data = os.pread(f.fileno(), end - start + 1, start)
        return data.translate(INVERT) if self.other else data

    def validators(self):
        return [("etag", self.etag), ("last-modified", self.last_modified)]

    def precondition_failed(self, headers):
        """If-Match / If-Unmodified-Since (RFC 9110 13.1.1, 13.1.4)."""
        im = headers.get("if-match")
        if im is not None:
            tags = [t.strip() for t in im.split(",")]
            return "*" not in tags and self.etag not in tags
        ius = headers.get("if-unmodified-since")
        if ius is not None:
            try:
                since = email.utils.parsedate_to_datetime(ius).timestamp()
            except (TypeError, ValueError):
                return False
            return self.mtime > since
        return False


class Answer:
    """One stream's answer on its way: the body, how many bytes of it go
    before the fault (cut) and what happens then (then: "end" for the
    normal end or END_STREAM early, "rst", "stall", "goaway")."""

    def __init__(self, sid, line, length, body, cut=None, then="end",
                 fault="-"):
        self.sid = sid
        self.line = line
        self.length = length
        self.body = body
        self.pos = 0
        self.cut = len(body) if cut is None else cut
        self.then = then
        self.fault = fault
        self.stalled = False
        self.logged = False


class Connection:
    """One client connection: its own loop on its own thread."""

    def __init__(self, sock, number):
        self.sock = sock
        self.number = number
        config = h2.config.H2Configuration(client_side=False,
                                           header_encoding="utf-8")
        self.h2 = h2.connection.H2Connection(config=config)
        self.answers = {}       # stream id -> Answer
        self.requests = 0
        self.last_sid = 0       # the last stream answered or being so
        self.goaway_last = None
        self.closing = False

    def say(self, what):
        log("conn=%d %s" % (self.number, what))

    def flush(self):
        out = self.h2.data_to_send()
        if out:
            self.sock.sendall(out)

    def goaway(self, last, code):
        """GOAWAY, written by hand: h2 would refuse to send anything on
        the connection after its own close_connection, and the streams
        up to LAST are still to be answered."""
        self.flush()
        frame = GoAwayFrame(0)
        frame.last_stream_id = last
        frame.error_code = code
        self.sock.sendall(frame.serialize())
        self.goaway_last = last
        self.say("goaway last-stream=%d code=%d" % (last, code))

    def run(self, deadline):
        try:
            self.h2.initiate_connection()
            self.h2.update_settings({
                h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 128})
            self.flush()
            self.loop(deadline)
            if self.goaway_last is not None and not self.closing:
                self.linger()
        except (OSError, ssl.SSLError, h2.exceptions.ProtocolError) as e:
            self.say("error %s" % type(e).__name__)
        finally:
            for a in self.answers.values():
                self.finish(a)
            self.say("close requests=%d" % self.requests)
            try:
                self.sock.close()
            except OSError:
                pass

    def linger(self):
        """After a graceful GOAWAY, once every stream it kept is answered:
        the end of our side, then what the client still sends is read
        (for 2 s at most) rather than reset by closing with it unread."""
        self.flush()
        self.sock.shutdown(socket.SHUT_WR)
        end = time.monotonic() + 2
        while time.monotonic() < end:
            if not select.select([self.sock], [], [], 0.1)[0]:
                continue
            if not self.sock.recv(65536):
                break

    def loop(self, deadline):
        quiet_since = time.monotonic()
        while not self.closing:
            if self.goaway_last is not None and not self.answers:
                return              # all answered that GOAWAY promised
            sent = self.pump()
            self.flush()
            if self.closing:
                return
            now = time.monotonic()
            if now > deadline or now - quiet_since > IDLE_SECONDS:
                return
            ready = self.sock.pending() or \
                select.select([self.sock], [], [], 0 if sent else 1)[0]
            if not ready:
                continue
            data = self.sock.recv(65536)
            if not data:
                return
            quiet_since = time.monotonic()
            for event in self.h2.receive_data(data):
                self.handle(event)
            self.flush()

    def handle(self, event):
        if isinstance(event, h2.events.RequestReceived):
            self.request(event.stream_id, dict(event.headers))
        elif isinstance(event, h2.events.StreamReset):
            a = self.answers.pop(event.stream_id, None)
            self.say("stream=%d reset-by-client code=%d" % (
                event.stream_id, event.error_code))
            if a is not None:
                self.finish(a)
        elif isinstance(event, h2.events.DataReceived):
            self.h2.acknowledge_received_data(
                event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.closing = True

    def request(self, sid, headers):
        self.requests += 1
        method = headers.get(":method", "")
        path = headers.get(":path", "")
        rng = headers.get("range")
        line = "stream=%d %s %s range=%s" % (sid, method, path,
                                             (rng or "-").replace(" ", ""))
        if args.mode == "goaway" and self.requests == args.nth:
            self.goaway(self.last_sid, 0)
        if self.goaway_last is not None and sid > self.goaway_last:
            self.say("%s ignored" % line)
            return
        self.last_sid = sid
        if method == "HEAD":
            v = Version(args.file, False)
            self.start(Answer(sid, line, v.size, b""), 200,
                       [("content-length", str(v.size)),
                        ("accept-ranges", "bytes")] + v.validators())
            return
        if method != "GET":
            self.start(Answer(sid, line, 0, b""), 405,
                       [("content-length", "0")])
            return
        self.get(sid, line, headers, rng)

    def get(self, sid, line, headers, rng):
        global gets
        size = os.stat(args.file).st_size
        ranges = parse_ranges(rng, size)
        n = 0
        if ranges and not (len(ranges) == 1 and probe_range(*ranges[0])):
            with count_lock:
                gets += 1
                n = gets
        mode = args.mode
        nth = n == args.nth
        from_nth = n >= args.nth
        changed = mode.startswith("changed") and from_nth
        v = Version(args.file, changed)
        # changed-ignore-if-match checks no precondition once changed.
        if (mode != "changed-ignore-if-match" or not changed) and \
           v.precondition_failed(headers):
            body = b"precondition failed\n"
            self.start(Answer(sid, line, len(body), body,
                              fault="precondition" if changed else "-"),
                       412, [("content-length", str(len(body)))])
            return
        if ranges is None:
            body = v.bytes(0, size - 1) if size else b""
            self.start(Answer(sid, line, size, body), 200,
                       [("content-length", str(size)),
                        ("accept-ranges", "bytes")] + v.validators())
            return
        if not ranges:
            self.start(Answer(sid, line, 0, b""), 416,
                       [("content-range", "bytes */%d" % size),
                        ("content-length", "0")])
            return
        if mode == "refused-once" and nth:
            self.h2.reset_stream(sid, h2.errors.ErrorCodes.REFUSED_STREAM)
            self.say("%s status=- length=- sent=0 fault=refused" % line)
            return
        # Which range's bytes go, and with which label (the last part's,
        # for several ranges).
        shift_bytes = shift_label = 0
        fault = "changed" if changed else "-"
        if mode in ("wrong-range", "wrong-label") and nth:
            a, b = ranges[-1]
            d = 1 if b + 1 < size else -1
            if a + d < 0:
                d = 0           # the whole object: no other range
            if mode == "wrong-range":
                shift_bytes = shift_label = d
            else:
                shift_label = d
            fault = mode
        ctype, body = self.render(v, ranges, size, shift_bytes, shift_label)
        head = [("content-type", ctype)]
        if mode != "changed-noval":
            head += v.validators()
        if len(ranges) == 1:
            a, b = ranges[0]
            head.insert(0, ("content-range", "bytes %d-%d/%d" % (
                a + shift_label, b + shift_label, size)))
        length = len(body)
        kind = mode.rsplit("-", 1)[0]
        if mode == "long-nolen" and nth:
            # The object's next bytes, or junk at its end.
            b = ranges[-1][1]
            more = v.bytes(b + 1, min(b + 100, size - 1)) \
                if b + 1 < size else b""
            body += more + b"x" * (100 - len(more))
            fault = "long"
        answer = Answer(sid, line, length, body, fault=fault)
        if (mode.endswith("-once") and nth) or \
           (mode.endswith("-always") and from_nth):
            if kind in ("short", "short-nolen", "rst"):
                answer.cut = len(body) // 2
                answer.then = "rst" if kind == "rst" else "end"
                answer.fault = "rst" if kind == "rst" else "short"
            elif kind == "stall":
                answer.cut, answer.then, answer.fault = 0, "stall", "stall"
        if mode == "goaway-abrupt" and self.requests == args.nth:
            answer.cut, answer.then, answer.fault = \
                len(body) // 2, "goaway", "goaway"
        # HTTP/2 frames the body itself (END_STREAM): Content-Length is
        # optional, and without it only the client's own count of the
        # bytes tells a short or long body.
        if "-nolen" not in mode:
            head.append(("content-length", str(length)))
        self.start(answer, 206, head)

    @staticmethod
    def render(v, ranges, size, shift_bytes, shift_label):
        """The body for RANGES, the last one's bytes and label shifted:
        (content type, body)."""
        if len(ranges) == 1:
            a, b = ranges[0]
            return "application/octet-stream", \
                v.bytes(a + shift_bytes, b + shift_bytes)
        body = b""
        for i, (a, b) in enumerate(ranges):
            last = i == len(ranges) - 1
            sb = shift_bytes if last else 0
            sl = shift_label if last else 0
            body += (b"\r\n--BOUNDARY\r\nContent-Type: "
                     b"application/octet-stream\r\nContent-Range: "
                     b"bytes %d-%d/%d\r\n\r\n" % (a + sl, b + sl, size)) + \
                v.bytes(a + sb, b + sb)
        body += b"\r\n--BOUNDARY--\r\n"
        return "multipart/byteranges; boundary=BOUNDARY", body

    def start(self, answer, status, headers):
        no_body = not answer.body and answer.then == "end"
        self.h2.send_headers(answer.sid, [(":status", str(status))]
                             + headers, end_stream=no_body)
        answer.line += " status=%d" % status
        if no_body:
            self.finish(answer)
            return
        self.answers[answer.sid] = answer

    def finish(self, a):
        """Log A's line, once: when it ended, or (a stall) began."""
        if not a.logged:
            a.logged = True
            self.say("%s length=%d sent=%d fault=%s" % (
                a.line, a.length, a.pos, a.fault))

    def pump(self):
        """Send what the flow-control windows let, at most TURN_BYTES;
        act on the answers that reached their cut.  The bytes sent."""
        total = 0
        for a in list(self.answers.values()):
            if a.stalled:
                continue
            while a.pos < a.cut and total < TURN_BYTES:
                n = min(self.h2.local_flow_control_window(a.sid),
                        self.h2.max_outbound_frame_size, a.cut - a.pos,
                        TURN_BYTES - total)
                if n <= 0:
                    break
                end = a.then == "end" and a.pos + n == a.cut
                self.h2.send_data(a.sid, a.body[a.pos:a.pos + n],
                                  end_stream=end)
                a.pos += n
                total += n
            if a.pos < a.cut:
                continue
            if a.then == "end":
                if a.cut == 0:
                    self.h2.end_stream(a.sid)
                del self.answers[a.sid]
                self.finish(a)
            elif a.then == "rst":
                self.h2.reset_stream(a.sid,
                                     h2.errors.ErrorCodes.INTERNAL_ERROR)
                del self.answers[a.sid]
                self.finish(a)
            elif a.then == "stall":
                a.stalled = True
                self.finish(a)
            elif a.then == "goaway":
                # Every answer cut is logged before the client can know
                # and ask again elsewhere.
                for b in self.answers.values():
                    self.finish(b)
                self.answers.clear()
                self.goaway(a.sid, h2.errors.ErrorCodes.INTERNAL_ERROR)
                self.closing = True
                return total
        return total


def serve(sock, number, deadline):
    sock.settimeout(30)
    # As real servers do: no Nagle delay between an answer's frames, which
    # would make the plugin's probe measure 40 ms on loopback.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock = tls.wrap_socket(sock, server_side=True)
    except (OSError, ssl.SSLError) as e:
        log("conn=%d handshake-failed %s" % (number, type(e).__name__))
        sock.close()
        return
    alpn = sock.selected_alpn_protocol()
    log("conn=%d open alpn=%s" % (number, alpn or "none"))
    if alpn != "h2":
        sock.close()
        return
    Connection(sock, number).run(deadline)


def main():
    global args, log_file, conns, tls
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--mode", default="normal", choices=[
        "normal", "short-once", "short-always", "rst-once", "rst-always",
        "short-nolen-once", "short-nolen-always", "long-nolen",
        "refused-once", "stall-once", "stall-always", "wrong-range",
        "wrong-label", "changed", "changed-ignore-if-match", "changed-noval",
        "goaway", "goaway-abrupt"])
    p.add_argument("--nth", type=int, default=3)
    p.add_argument("--file", required=True, help="the object to serve")
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--log", required=True, help="request log")
    p.add_argument("--port-file", required=True,
                   help="the port is written here when ready")
    p.add_argument("--lifetime", type=float, default=300)
    args = p.parse_args()
    log_file = open(args.log, "a")
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(args.cert, args.key)
    tls.set_alpn_protocols(["h2"])
    # RFC 9113 9.2: TLS 1.2 at least, no renegotiation.
    tls.minimum_version = ssl.TLSVersion.TLSv1_2
    tls.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % listener.getsockname()[1])
    os.rename(tmp, args.port_file)
    deadline = time.monotonic() + args.lifetime
    listener.settimeout(1)
    while time.monotonic() < deadline:
        try:
            sock, _ = listener.accept()
        except socket.timeout:
            continue
        with count_lock:
            conns += 1
            number = conns
        threading.Thread(target=serve, args=(sock, number, deadline),
                         daemon=True).start()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(0)
