#!/usr/bin/env bash
# test-curlpipe-argv-secrets.sh: secrets given on the command line are
# blanked from curlpipe's argv once parsed, as curl blanks -u's, so
# /proc/PID/cmdline (what ps shows every user, for as long as a
# ProxyCommand runs) no longer has them: -u USER:PASS, --proxy-user,
# --oauth2-bearer, the value of -H 'Authorization: ...' (and of any
# header that may carry a token, by -v's rule), and the password in the
# URL and in -x's URL.  The option names, header names and the rest of
# the URLs stay.  The server still gets the credentials.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe
[ -r /proc/self/cmdline ] || skip "no /proc"

start_stream_server

PYTHONPATH=$helpers_srcdir timeout "$client_timeout" "$PYTHON" - "$CURLPIPE" \
  "127.0.0.1:$stream_port" "$(free_port)" <<'PYEOF'
import base64, os, subprocess, sys, time
from procfs import wait_connected
curlpipe, hostport, dead = sys.argv[1:]
bad = []

# run(ARGS, SECRETS, KEPT, SENT): curlpipe ARGS with an idle pipe as
# standard input; once it is connected, its cmdline has none of SECRETS
# and all of KEPT; then the body ends, and the server's copy of the
# request headers (/headers) has every line of SENT.
def run(args, secrets, kept, sent):
    r, w = os.pipe()
    p = subprocess.Popen([curlpipe, "-s"] + args, stdin=r,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.close(r)
    wait_connected(p.pid)
    cmdline = open("/proc/%d/cmdline" % p.pid, "rb").read().decode()
    os.close(w)
    out, err = p.communicate(timeout=20)
    for s in secrets:
        if s in cmdline:
            bad.append("%r is in /proc/PID/cmdline: %r" % (s, cmdline))
    for k in kept:
        if k not in cmdline.split("\0") and k not in cmdline:
            bad.append("%r is no longer in /proc/PID/cmdline: %r" %
                       (k, cmdline))
    headers = out.decode(errors="replace").splitlines()
    for h in sent:
        if h not in headers:
            bad.append("the server did not get %r: %r %r" % (h, headers, err))

url = "http://%s/headers" % hostport
b64 = base64.b64encode(b"alice:PWSECRET").decode()
run(["-u", "alice:PWSECRET", "-H", "Authorization-X: AXSECRET",
     "-H", "X-Api-Key: KEYSECRET", "-H", "Accept: text/plain", url],
    ["PWSECRET", "AXSECRET", "KEYSECRET", "alice"],
    ["-u", "X-Api-Key:", "Accept: text/plain", url],
    ["Authorization: Basic " + b64, "X-Api-Key: KEYSECRET"])
run(["-H", "Authorization: Bearer HDRSECRET", url],
    ["HDRSECRET"], ["-H"], ["Authorization: Bearer HDRSECRET"])
run(["--oauth2-bearer", "OAUTHSECRET", url],
    ["OAUTHSECRET"], ["--oauth2-bearer"], ["Authorization: Bearer OAUTHSECRET"])
b64 = base64.b64encode(b"bob:URLSECRET").decode()
run(["--proxy-user", "pu:PROXYSECRET", "--noproxy", "*",
     "-x", "http://px:PROXYURLSECRET@127.0.0.1:" + dead,
     "http://bob:URLSECRET@%s/headers" % hostport],
    ["PROXYSECRET", "PROXYURLSECRET", "URLSECRET"],
    ["--proxy-user", "http://", "@127.0.0.1:" + dead,
     "@%s/headers" % hostport],
    ["Authorization: Basic " + b64])
if bad:
    sys.exit("\n".join(bad))
print("ok")
PYEOF
