#!/usr/bin/env bash
# test-curlpipe-argv-blocking.sh: every secret on the command line, the
# URL's password too, is blanked in argv before curlpipe does anything
# that can wait: opening -T FILE or --data-binary @FILE (a FIFO waits
# for its writer), reading -w @FILE or -w @- (standard input).  While it
# waits, /proc/PID/cmdline (readable by every user) has none of them,
# wherever they come on the command line; once the wait ends, the
# server gets them all.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe
[ -r /proc/self/syscall ] || skip "no /proc/PID/syscall"
[ "$(uname -m)" = x86_64 ] || skip "system call numbers are x86_64's"

start_stream_server

PYTHONPATH=$helpers_srcdir timeout "$client_timeout" "$PYTHON" - "$CURLPIPE" \
  "127.0.0.1:$stream_port" "$tmp" <<'PYEOF'
import base64, os, subprocess, sys, time
from procfs import wait_connected
curlpipe, hostport, tmp = sys.argv[1:]
bad = []
url = "http://u:SEKurl@%s/headers" % hostport
basic = "Authorization: Basic " + base64.b64encode(b"u:SEKpw").decode()

# The system call PID waits in ("read", "openat"), or None once it
# waits in none of those or has not got there within 10 s.
def waiting(pid):
    names = {"0": "read", "257": "openat"}
    end = time.monotonic() + 10
    while time.monotonic() < end:
        try:
            state = open("/proc/%d/stat" % pid).read().split(")")[-1].split()[0]
            call = open("/proc/%d/syscall" % pid).read().split()[0]
        except OSError:
            return None
        if state == "S" and call in names:
            return names[call]
        time.sleep(0.02)
    return None

# run(WHAT, ARGS, FEED, STDIN_PIPE, SECRETS, SENT, OUT_END): curlpipe
# ARGS waits (in WHAT); its cmdline has none of SECRETS; FEED(writer)
# ends the wait; the server's copy of the request headers (/headers)
# has SENT and standard output ends with OUT_END.
def run(what, args, feed, stdin_pipe, secrets, sent, out_end):
    fifo = os.path.join(tmp, "fifo")
    if os.path.exists(fifo):
        os.unlink(fifo)
    os.mkfifo(fifo)
    args = [a.replace("FIFO", fifo) for a in args]
    if stdin_pipe:
        r, w = os.pipe()
    else:
        r, w = os.open("/dev/null", os.O_RDONLY), None
    p = subprocess.Popen([curlpipe, "-s"] + args, stdin=r,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.close(r)
    call = waiting(p.pid)
    cmdline = open("/proc/%d/cmdline" % p.pid, "rb").read().decode()
    if call != what:
        bad.append("%s: waits in %s, not %s" % (args, call, what))
    for s in secrets:
        if s in cmdline:
            bad.append("%s: %r is in /proc/PID/cmdline while it waits "
                       "in %s: %r" % (args, s, call, cmdline))
    if w is None:
        w = os.open(fifo, os.O_WRONLY)
    feed(w)
    # The FIFO's writer stays until curlpipe has connected, by when it
    # has opened standard input again (fdmodes.c): Linux never reports
    # the end of a FIFO to a reader that opened it non-blocking once no
    # writer was left (fs/pipe.c, fifo_open), a case not tested here.
    wait_connected(p.pid)
    os.close(w)
    out, err = p.communicate(timeout=20)
    text = out.decode(errors="replace")
    if p.returncode != 0:
        bad.append("%s: exit status %d: %r" % (args, p.returncode, err))
    if sent not in text.splitlines():
        bad.append("%s: the server did not get %r: %r" % (args, sent, text))
    if not text.endswith(out_end):
        bad.append("%s: the output does not end in %r: %r" %
                   (args, out_end, text))

def nothing(w):
    pass

def body(w):
    os.write(w, b"body")

def fmt(w):
    os.write(w, b"%{http_code}\n")

run("openat", ["-T", "FIFO", "--oauth2-bearer", "SEKtok", url], body, False,
    ["SEKtok", "SEKurl"], "Authorization: Bearer SEKtok", "\n")
run("read", ["-w", "@-", "-u", "u:SEKpw", "-H", "Authorization: Bearer SEKhdr",
             url], fmt, True,
    ["SEKpw", "SEKhdr", "SEKurl"], "Authorization: Bearer SEKhdr", "200")
run("openat", ["--data-binary", "@FIFO", "-u", "u:SEKpw", url], body, False,
    ["SEKpw", "SEKurl"], basic, "\n")
run("openat", ["-w", "@FIFO", "-u", "u:SEKpw", url], fmt, False,
    ["SEKpw", "SEKurl"], basic, "200")

for b in bad:
    print(b)
sys.exit(1 if bad else 0)
PYEOF
