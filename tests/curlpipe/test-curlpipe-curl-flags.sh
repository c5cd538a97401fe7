#!/usr/bin/env bash
# test-curlpipe-curl-flags.sh: the flags of ordinary curl scripts work
# with the name changed, with curl's meaning where it applies to a
# stream: -fsSL; -L after a 307 (from a file and from a pipe: libcurl's
# "Expect: 100-continue" lets the server redirect before the body goes)
# and --max-redirs 0 (47); --fail-with-body (22, the body on stdout);
# --retry N --retry-delay S (accepted: nothing is retried); -X POST
# --data-binary @- (and --data-binary alone: POST with curl's
# Content-Type); --url; --capath; -e; --compressed; --trace-ascii FILE;
# --trace FILE;
# -#; -O (the answer in the URL's file name); --connect-timeout 0; and
# -u USER without a password: with no terminal the password is empty,
# with one it is asked on /dev/tty.  Checked by what the servers got.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

make_cert
start_nginx_put "location = /moved { return 307 /put/moved.img; }"
start_stream_server
echo_url=http://127.0.0.1:$stream_port/echo
hdr_url=http://127.0.0.1:$stream_port/headers

# echoes ARGS...: "hello" through the echo with curlpipe ARGS (URL is
# the echo's URL), back unchanged, exit 0.
echoes ()
{
  local args=() a st=0
  for a in "$@"; do
    [ "$a" = URL ] && a=$echo_url
    args+=("$a")
  done
  printf hello | curlpipe "${args[@]}" >"$tmp/out" 2>"$tmp/err" || st=$?
  [ "$st" -eq 0 ] && [ "$(cat "$tmp/out")" = hello ] ||
    problem "curlpipe $*: exit status $st, stdout '$(cat "$tmp/out")':" \
            "$(head -c 300 "$tmp/err")"
}

echoes -fsSL URL
echoes -s --retry 3 --retry-delay 1 --retry-max-time 10 URL
echoes -s --retry 2 --retry-connrefused --retry-all-errors URL
echoes -s --compressed URL
echoes -s -# URL
echoes -# --progress-bar -s URL
echoes -s --connect-timeout 0 URL
echoes -s --url URL
echoes -s -X POST --data-binary @- URL
grep -q '^POST /echo ' "$tmp/stream.log" ||
  problem "-X POST --data-binary @-: no POST in: $(tail -2 "$tmp/stream.log")"

# -L: a 307 before the body, from a file and from a pipe.
make_random_file "$tmp/body" 100000
st=0
curlpipe -sS -L -T - "http://127.0.0.1:$port/moved" <"$tmp/body" \
  2>"$tmp/err" || st=$?
[ "$st" -eq 0 ] && cmp -s "$tmp/body" "$tmp/www/moved.img" ||
  problem "-L from a file: exit status $st: $(cat "$tmp/err")"
rm -f "$tmp/www/moved.img"
# From a pipe the body cannot be sent twice.  nginx may answer "100
# Continue" before its 307 (it does when it discards a body), and then
# whether any of the body left before the 307 came is a matter of
# timing: curl itself then fails with 65.  Either the upload arrives
# whole at the new location, or curlpipe exits 65 saying why; never
# anything else.
st=0
cat "$tmp/body" | curlpipe -sS -L "http://127.0.0.1:$port/moved" \
  2>"$tmp/err" || st=$?
if [ "$st" -eq 0 ]; then
  cmp -s "$tmp/body" "$tmp/www/moved.img" ||
    problem "-L from a pipe: exit 0 but the upload differs"
elif [ "$st" -ne 65 ] || ! grep -q 'cannot replay' "$tmp/err"; then
  problem "-L from a pipe: exit status $st: $(cat "$tmp/err")"
fi
st=0
curlpipe -sS -L --max-redirs 0 "http://127.0.0.1:$port/moved" \
  <"$tmp/body" 2>"$tmp/err" || st=$?
[ "$st" -eq 47 ] || problem "-L --max-redirs 0: exit status $st, not 47"

# --fail-with-body: 22, and the error's body on standard output.
st=0
printf x | curlpipe -s --fail-with-body \
  "http://127.0.0.1:$stream_port/status/404" >"$tmp/out" 2>"$tmp/err" ||
  st=$?
[ "$st" -eq 22 ] && [ -s "$tmp/out" ] ||
  problem "--fail-with-body on a 404: exit status $st, stdout" \
          "'$(cat "$tmp/out")' (expected 22 and the body)"

# --data-binary @- alone: POST with curl's Content-Type; -e: Referer.
st=0
printf x | curlpipe -s --data-binary @- -e http://from.example/ \
  "$hdr_url" >"$tmp/out" 2>"$tmp/err" || st=$?
grep -qx 'Content-Type: application/x-www-form-urlencoded' "$tmp/out" ||
  problem "--data-binary @-: no form Content-Type: $(cat "$tmp/out")"
grep -qx 'Referer: http://from.example/' "$tmp/out" ||
  problem "-e URL: no Referer: $(cat "$tmp/out")"
tail -1 "$tmp/stream.log" | grep -q '^POST /headers' ||
  problem "--data-binary @-: not a POST: $(tail -1 "$tmp/stream.log")"

# --capath DIR: a hashed directory with the server's certificate.
if command -v openssl >/dev/null; then
  mkdir "$tmp/capath"
  cp "$tmp/cert.pem" "$tmp/capath/"
  openssl rehash "$tmp/capath" 2>/dev/null || c_rehash "$tmp/capath" \
    >/dev/null 2>&1 || :
  st=0
  printf capath | curlpipe -sS --capath "$tmp/capath" \
    "https://127.0.0.1:$tlsport/put/capath.img" 2>"$tmp/err" || st=$?
  [ "$st" -eq 0 ] && [ "$(cat "$tmp/www/capath.img")" = capath ] ||
    problem "--capath: exit status $st: $(cat "$tmp/err")"
fi

# --trace-ascii FILE: the exchange in FILE.
printf x | curlpipe -s --trace-ascii "$tmp/trace" "$echo_url" >/dev/null ||
  problem "--trace-ascii: failed"
grep -q '^> PUT /echo' "$tmp/trace" 2>/dev/null ||
  problem "--trace-ascii FILE: no request line in FILE"
# --trace FILE: the same (curlpipe dumps no bodies).
printf x | curlpipe -s --trace "$tmp/trace2" "$echo_url" >/dev/null ||
  problem "--trace: failed"
grep -q '^> PUT /echo' "$tmp/trace2" 2>/dev/null ||
  problem "--trace FILE: no request line in FILE"

# -O: the answer in ./echo.
mkdir "$tmp/o"
st=0
(cd "$tmp/o" && printf remote | curlpipe -s -O "$echo_url") || st=$?
[ "$st" -eq 0 ] && [ "$(cat "$tmp/o/echo" 2>/dev/null)" = remote ] ||
  problem "-O: exit status $st, files: $(ls "$tmp/o")"

# -u USER: no terminal (a new session), an empty password; a terminal,
# the password asked there.
timeout "$client_timeout" "$PYTHON" - "$CURLPIPE" "$hdr_url" <<'PYEOF' ||
import base64, os, pty, select, subprocess, sys, time
curlpipe, url = sys.argv[1:]
bad = []
p = subprocess.run([curlpipe, "-s", "-u", "alice", url],
                   stdin=subprocess.DEVNULL, capture_output=True,
                   start_new_session=True, timeout=20)
want = "Authorization: Basic " + base64.b64encode(b"alice:").decode()
if want not in p.stdout.decode().splitlines():
    bad.append("-u USER, no terminal: %r not in %r %r" %
               (want, p.stdout, p.stderr))
r, w = os.pipe()
pid, master = pty.fork()
if pid == 0:
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(w, 1)
    os.execv(curlpipe, [curlpipe, "-s", "-u", "alice", url])
os.close(w)
seen = b""
end = time.monotonic() + 10
while b"password" not in seen and time.monotonic() < end:
    if select.select([master], [], [], 0.5)[0]:
        seen += os.read(master, 1024)
os.write(master, b"TTYSECRET\n")
out = b""
while True:
    chunk = os.read(r, 65536)
    if not chunk:
        break
    out += chunk
os.waitpid(pid, 0)
want = "Authorization: Basic " + base64.b64encode(b"alice:TTYSECRET").decode()
if b"Enter host password for user 'alice'" not in seen:
    bad.append("-u USER on a terminal: no prompt: %r" % seen)
if b"TTYSECRET" in seen:
    bad.append("-u USER on a terminal: the password was echoed: %r" % seen)
if want not in out.decode().splitlines():
    bad.append("-u USER on a terminal: %r not in %r" % (want, out))
if bad:
    sys.exit("\n".join(bad))
PYEOF
  problem "-u USER: see above"

check_problems
