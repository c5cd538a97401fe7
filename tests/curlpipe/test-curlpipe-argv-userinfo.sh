#!/usr/bin/env bash
# test-curlpipe-argv-userinfo.sh: the user name and password of a URL
# are blanked from curlpipe's argv (/proc/PID/cmdline, which every user
# can read) in every form curl takes: a proxy without a scheme (-x
# user:pw@host:port), a URL without a scheme (user:pw@host/path), and a
# token given as the user name without a password (http://TOKEN@host,
# also for -x and --url).  The rest of each argument stays, and the
# server (or proxy) still gets the credentials: checked in the request
# head it received.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe
[ -r /proc/self/cmdline ] || skip "no /proc"

PYTHONPATH=$helpers_srcdir timeout "$client_timeout" "$PYTHON" - \
  "$CURLPIPE" <<'PYEOF'
import base64, os, socket, subprocess, sys, time
from procfs import wait_connected
curlpipe = sys.argv[1]
bad = []

# A server that takes the connection and reads the request head, and
# never answers: curlpipe waits, connected, while its cmdline is read.
lsock = socket.socket()
lsock.bind(("127.0.0.1", 0))
lsock.listen(8)
hostport = "127.0.0.1:%d" % lsock.getsockname()[1]

def basic(userpw):
    return base64.b64encode(userpw.encode()).decode()

# run(ARGS, SECRETS, KEPT, SENT): curlpipe -s ARGS with an idle pipe as
# standard input; once connected, its cmdline has none of SECRETS and
# all of KEPT, and the request head received has the line SENT.
def run(args, secrets, kept, sent):
    r, w = os.pipe()
    p = subprocess.Popen([curlpipe, "-s"] + args, stdin=r,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.close(r)
    wait_connected(p.pid)
    cmdline = open("/proc/%d/cmdline" % p.pid, "rb").read().decode()
    lsock.settimeout(10)
    head = b""
    try:
        conn, _ = lsock.accept()
        conn.settimeout(10)
        while b"\r\n\r\n" not in head:
            more = conn.recv(4096)
            if not more:
                break
            head += more
        conn.close()
    except OSError as e:
        bad.append("%r: no request came: %s" % (args, e))
    os.close(w)
    p.communicate(timeout=20)
    shown = cmdline.replace("\0", " ")
    for s in secrets:
        if s in cmdline:
            bad.append("%r is in /proc/PID/cmdline: %r" % (s, shown))
    for k in kept:
        if k not in cmdline:
            bad.append("%r is no longer in /proc/PID/cmdline: %r" %
                       (k, shown))
    lines = head.decode(errors="replace").split("\r\n")
    if sent not in lines:
        bad.append("%r: the server did not get %r: %r" % (args, sent, lines))

run(["-x", "puser:PPASS1@" + hostport, "http://%s/sink" % hostport],
    ["puser", "PPASS1"], ["-x", "@" + hostport, "http://%s/sink" % hostport],
    "Proxy-Authorization: Basic " + basic("puser:PPASS1"))
run(["uuser:UPASS2@%s/sink" % hostport],
    ["uuser", "UPASS2"], ["@%s/sink" % hostport],
    "Authorization: Basic " + basic("uuser:UPASS2"))
run(["http://TOKEN3@%s/sink" % hostport],
    ["TOKEN3"], ["http://", "@%s/sink" % hostport],
    "Authorization: Basic " + basic("TOKEN3:"))
run(["--url", "TOKEN4@%s/sink" % hostport],
    ["TOKEN4"], ["--url", "@%s/sink" % hostport],
    "Authorization: Basic " + basic("TOKEN4:"))
run(["-x", "http://PTOKEN5@" + hostport, "http://%s/sink" % hostport],
    ["PTOKEN5"], ["http://", "@" + hostport],
    "Proxy-Authorization: Basic " + basic("PTOKEN5:"))
if bad:
    sys.exit("\n".join(bad))
print("ok")
PYEOF
