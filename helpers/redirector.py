#!/usr/bin/python3
# helpers/redirector.py: a redirector (url= of the redirect renewal
# tests) that answers every request with a 302 to a target, and
# misbehaves when told to.  Files in --dir steer it, read at each
# request, so a test changes its behaviour by creating or removing them:
#
#   target   the Location's base URL (required before the first request)
#   sign     "SECRET LIFE [NAME]": append Expires=now+LIFE and NAME=
#            (default md5=) as nginx's secure_link_md5
#            "$secure_link_expires$uri SECRET" checks
#   tokens   append token=N, a new N per answer (single-use links)
#   hang     read the request and never answer, while the file exists
#            (at most 60 s), then close the connection
#   fail     answer 503
#
# GET /check is for nginx's auth_request: the token in the original
# request (X-Original-URI) is allowed the number of uses in --dir/uses
# (default 3), then refused with 403.  One log line per request in
# --log: "GET /disk.img 302", "GET /disk.img 503", "GET /disk.img hang",
# "CHECK 7 204".  The port is written to --port-file once it listens.
# Standard library only.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

import argparse
import base64
import hashlib
import http.server
import os
import re
import threading
import time

args = None
lock = threading.Lock()
next_token = [0]
uses = {}


def read(name):
    try:
        with open(os.path.join(args.dir, name)) as f:
            return f.read().strip()
    except FileNotFoundError:
        return None


def log(line):
    with lock:
        with open(args.log, "a") as f:
            f.write(line + "\n")


class Redirector(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *a):
        pass

    def answer(self, status, headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def check(self):
        m = re.search(r"[?&]token=(\d+)",
                      self.headers.get("X-Original-URI", ""))
        allowed = int(read("uses") or 3)
        status = 403
        if m:
            with lock:
                n = uses[m.group(1)] = uses.get(m.group(1), 0) + 1
            status = 204 if n <= allowed else 403
        log("CHECK %s %d" % (m.group(1) if m else "-", status))
        self.answer(status)

    def do_GET(self):
        if self.path.startswith("/check"):
            return self.check()
        if read("hang") is not None:
            log("%s %s hang" % (self.command, self.path))
            deadline = time.monotonic() + 60
            while read("hang") is not None and time.monotonic() < deadline:
                time.sleep(0.1)
            self.close_connection = True
            return
        if read("fail") is not None:
            log("%s %s 503" % (self.command, self.path))
            return self.answer(503)
        loc, query = read("target"), []
        sign = read("sign")
        if sign is not None:
            secret, life, name = (sign.split() + ["md5"])[:3]
            expires = int(time.time()) + int(life)
            path = re.sub(r"^[a-z]+://[^/]*", "", loc)
            text = "%d%s %s" % (expires, path, secret)
            sig = base64.urlsafe_b64encode(hashlib.md5(text.encode()).digest())
            query += ["Expires=%d" % expires,
                      name + "=" + sig.decode().rstrip("=")]
        if read("tokens") is not None:
            with lock:
                next_token[0] += 1
                query.append("token=%d" % next_token[0])
        if query:
            loc += "?" + "&".join(query)
        log("%s %s 302" % (self.command, self.path))
        self.answer(302, [("Location", loc)])

    do_HEAD = do_GET


def main():
    global args
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--port-file", required=True)
    args = p.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirector)
    server.daemon_threads = True
    with open(args.port_file + ".new", "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.rename(args.port_file + ".new", args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
