#!/usr/bin/env bash
# test-curlpipe-s3.sh: --aws-sigv4 against a real S3-compatible server
# (s3rver 3, installed by scripts/deps).  A stream of unknown size from
# a pipe goes as a multipart upload in 1 MiB parts (the test's size),
# byte-exact when read back, each part's Content-MD5 right and the
# completion listing every part's ETag in order (the multipart ETag
# computed from them); parts spooled to a temporary file, an empty
# stream, and a known-size file (one PUT, plain MD5 ETag).  Failures: an
# unknown key (22, message, nothing left), a part corrupted once and a
# part answered 500 once (retried, byte-exact), a part refused every
# time (22, "part 3: HTTP 500 ... after 4 tries", aborted, no parts
# left), standard input failing (26, aborted), an invalid UploadId, a
# part without ETag, a 200 <Error> completion, -w refused (2), SIGTERM
# mid-upload (143, aborted).  The secret is never in -v output, messages
# or /proc/PID/cmdline, nor the signature.
#
# s3rver checks the access key but not the signature, so an unknown key
# stands for a wrong secret.  It also lacks what S3 does for parts: it
# neither checks Content-MD5 nor implements the abort, nor lists
# uploads.  A small proxy of the test's own in front of it does both,
# and injects the faults: it refuses a part whose body does not match
# its Content-MD5 (400 BadDigest, as S3), and aborts by removing the
# upload's folder from s3rver's store.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe
requires curl
s3rver=${S3RVER_DIR:-/var/tmp/nbdkit-curl-s3rver}/node_modules/.bin/s3rver
[ -x "$s3rver" ] || skip "s3rver is not installed (scripts/deps installs it)"

s3_port=$(free_port)
mkdir -p "$tmp/s3"
"$s3rver" -d "$tmp/s3" --address 127.0.0.1 --port "$s3_port" \
  --configure-bucket b --silent >"$tmp/s3rver.out" 2>&1 &
_pids+=($!)
wait_http "http://127.0.0.1:$s3_port/" "$!" || fail "s3rver did not start"
uploads=$tmp/s3/b/._S3rver_uploads

cat >"$tmp/proxy.py" <<'PY'
# The fault proxy: forwards to s3rver, checks each part's Content-MD5,
# implements the abort, logs parts, and injects the faults of its mode.
import base64, hashlib, http.client, http.server, os, shutil, sys
import threading, time
from urllib.parse import urlsplit, parse_qs

upstream, store, log, modefile = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
kind, arg, seen = "plain", "", {}
aborted = set()
# Parts being forwarded, by upload: the abort waits for them (10 s at
# most), as a store's own abort would, so none lands after it.
lock = threading.Condition()
forwarding = {}

def note(line):
    with open(log, "a") as f:
        f.write(line + "\n")

class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def answer(self, code, body=b"", headers=()):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def error(self, code, name):
        self.answer(code, ("<?xml version=\"1.0\"?><Error><Code>%s</Code>"
                           "</Error>" % name).encode())

    def handle_any(self):
        global kind, arg, seen
        mode = open(modefile).read().strip()
        if mode != kind + ":" + arg:
            kind, _, arg = mode.partition(":")
            seen = {}
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        url = urlsplit(self.path)
        q = parse_qs(url.query, keep_blank_values=True)
        if len(body) < n:
            return                  # the client went away
        if kind == "badid" and self.command == "POST" and "uploads" in q:
            return self.answer(200, b"<InitiateMultipartUploadResult>"
                               b"<UploadId>a<b</UploadId>"
                               b"</InitiateMultipartUploadResult>")
        if kind == "createerr" and self.command == "POST" and "uploads" in q:
            return self.answer(200, b"<Error><Code>InternalError</Code>"
                               b"<UploadId>x</UploadId></Error>")
        if kind == "stall" and self.command == "POST" and arg in q:
            note("stalled " + arg)
            time.sleep(30)
            return
        if kind == "err200" and self.command == "POST" and "uploadId" in q:
            note("complete refused")
            return self.answer(200, b"<Error><Code>InternalError</Code>"
                               b"</Error>")
        if self.command == "PUT" and "partNumber" in q:
            part = int(q["partNumber"][0])
            seen[part] = seen.get(part, 0) + 1
            if kind == "slow":
                time.sleep(float(arg))
            with lock:
                if q["uploadId"][0] in aborted:
                    return self.error(404, "NoSuchUpload")
                uid = q["uploadId"][0]
                forwarding[uid] = forwarding.get(uid, 0) + 1
            try:
                return self.part(q, part, body)
            finally:
                with lock:
                    forwarding[uid] -= 1
                    lock.notify_all()
        self.forward(q, url, body)

    def part(self, q, part, body):
        if kind == "corrupt" and part == int(arg) and seen[part] == 1:
            body = bytes([body[0] ^ 1]) + body[1:]
        if (kind == "fail500" and part == int(arg) and seen[part] == 1) \
           or (kind == "refuse" and part == int(arg)):
            note("part %d refused" % part)
            return self.error(500, "InternalError")
        md5 = hashlib.md5(body).digest()
        if base64.b64encode(md5).decode() != self.headers.get("Content-MD5"):
            note("part %d baddigest" % part)
            return self.error(400, "BadDigest")
        note("part %d %d %s" % (part, len(body), md5.hex()))
        self.forward(q, urlsplit(self.path), body)

    def forward(self, q, url, body):
        if self.command == "DELETE" and "uploadId" in q:
            bucket = url.path.split("/")[1]
            uid = q["uploadId"][0]
            d = os.path.join(store, bucket, "._S3rver_uploads", uid)
            with lock:
                if not os.path.isdir(d):
                    return self.error(404, "NoSuchUpload")
                aborted.add(uid)
                lock.wait_for(lambda: forwarding.get(uid, 0) == 0, 10)
            shutil.rmtree(d)
            note("abort %s" % uid)
            return self.answer(204)
        if self.command == "POST" and "uploadId" in q:
            note("complete " + body.decode())
        if self.command == "PUT" and "partNumber" not in q:
            note("put %d" % len(body))
        c = http.client.HTTPConnection("127.0.0.1", upstream)
        hdrs = {k: v for k, v in self.headers.items()
                if k.lower() not in ("content-length", "connection")}
        hdrs["Content-Length"] = str(len(body))
        c.request(self.command, self.path, body, hdrs)
        r = c.getresponse()
        data = r.read()
        drop = ["content-length", "connection", "transfer-encoding"]
        if kind == "noetag" and "partNumber" in q and \
           int(q["partNumber"][0]) == int(arg):
            drop.append("etag")
        self.answer(r.status, data,
                    [(k, v) for k, v in r.getheaders()
                     if k.lower() not in drop])
        c.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any

server = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[5])), H)
server.serve_forever()
PY

# The fault proxy: its URL base in $proxy, its log in $plog.
proxy_port=$(free_port)
plog=$tmp/proxy.log
echo plain: >"$tmp/mode"
"$PYTHON" "$tmp/proxy.py" "$s3_port" "$tmp/s3" "$plog" "$tmp/mode" \
  "$proxy_port" 2>"$tmp/proxy.err" &
_pids+=($!)
wait_http "http://127.0.0.1:$proxy_port/" "$!" || fail "the proxy did not start"
proxy=http://127.0.0.1:$proxy_port

# proxy_mode MODE: the proxy's faults from now on (plain:, corrupt:N,
# fail500:N, refuse:N, slow:SECONDS), with its log emptied.
proxy_mode ()
{
  echo "$1" >"$tmp/mode"
  : >"$plog"
}

secret=TopSecret-7fq2
sign=(--aws-sigv4 aws:amz:us-east-1:s3 -u "S3RVER:$secret")
export CURLPIPE_S3_PART_SIZE=1M     # s3rver takes parts under 5 MiB

# run EXPECTED-STATUS ARGS...: curlpipe with standard input as given;
# stdout in $tmp/out, stderr in $tmp/err.
run ()
{
  local want=$1 st=0
  shift
  curlpipe "$@" >"$tmp/out" 2>"$tmp/err" || st=$?
  [ "$st" -eq "$want" ] || {
    cat "$tmp/err" >&2
    fail "curlpipe $*: exit status $st, expected $want"
  }
  ! grep -qF "$secret" "$tmp/out" "$tmp/err" ||
    fail "curlpipe $*: the secret is in its output"
}

# get NAME FILE: the object, read back with curl's own signing.
get ()
{
  curl -sSf --aws-sigv4 aws:amz:us-east-1:s3 -u "S3RVER:$secret" \
    -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -o "$2" \
    "http://127.0.0.1:$s3_port/b/$1"
}

# no_uploads_left: s3rver's store holds no upload, nor any part.
no_uploads_left ()
{
  local left
  left=$(find "$uploads" -mindepth 1 2>/dev/null | head -5)
  [ -z "$left" ] || fail "uploads or parts left behind: $left"
}

# check_parts FILE: the proxy's log shows FILE's 1 MiB parts, in order,
# each once, and a completion that lists their ETags in order.
check_parts ()
{
  "$PYTHON" - "$1" "$plog" <<'PY' || fail "the parts do not match $1"
import hashlib, re, sys
data = open(sys.argv[1], "rb").read()
size = 1 << 20
chunks = [data[i:i + size] for i in range(0, len(data), size)] or [b""]
stored = {}
complete = None
for line in open(sys.argv[2]):
    w = line.split()
    if w[0] == "part" and len(w) == 4:
        stored[int(w[1])] = (int(w[2]), w[3])
    elif w[0] == "complete":
        complete = line
want = {i + 1: (len(c), hashlib.md5(c).hexdigest()) for i, c in enumerate(chunks)}
assert stored == want, (stored, want)
listed = re.findall(r"<Part><PartNumber>(\d+)</PartNumber><ETag>\"([0-9a-f]+)\"</ETag></Part>", complete)
assert [(int(n), e) for n, e in listed] == [(n, want[n][1]) for n in sorted(want)], listed
etag = hashlib.md5(b"".join(hashlib.md5(c).digest() for c in chunks)).hexdigest()
print("multipart ETag %s-%d" % (etag, len(chunks)))
PY
}

# A stream of unknown size, from a pipe: 6 full 1 MiB parts and a short
# last one, through the proxy that checks each part's Content-MD5.
make_random_file "$tmp/data" $((6 * 1024 * 1024 + 7))
proxy_mode plain:
cat "$tmp/data" | run 0 -sS "${sign[@]}" -T - "$proxy/b/stream"
assert_grep_i "$tmp/out" "CompleteMultipartUploadResult" "<Key>stream</Key>"
check_parts "$tmp/data"
get stream "$tmp/back"
assert_same_file "$tmp/data" "$tmp/back"
no_uploads_left

# Straight to s3rver, each part spooled to a temporary file (no memory
# part), with -v: each request shown, no secret, no signature.
TMPDIR=$tmp CURLPIPE_S3_MEMORY_PART=0 \
  run 0 -v "${sign[@]}" -T - "http://127.0.0.1:$s3_port/b/spooled" \
  < <(cat "$tmp/data")
get spooled "$tmp/back"
assert_same_file "$tmp/data" "$tmp/back"
[ "$(grep -c '^> PUT /b/spooled?' "$tmp/err")" -eq 7 ] ||
  fail "-v does not show the 7 parts' PUTs"
assert_grep_i "$tmp/err" "> POST /b/spooled?" "> Authorization: ***"
! grep -qi "Signature=" "$tmp/err" || fail "-v shows the signature"
[ -z "$(find "$tmp" -maxdepth 1 -name 'curlpipe-s3-*')" ] ||
  fail "a temporary part file was left"

# An empty stream: one empty part, an empty object.
proxy_mode plain:
run 0 -sS "${sign[@]}" "$proxy/b/empty" </dev/null
get empty "$tmp/back"
[ "$(file_size "$tmp/back")" -eq 0 ] || fail "the empty object is not empty"
grep -q "^part 1 0 d41d8cd98f00b204e9800998ecf8427e$" "$plog" ||
  fail "no empty part 1"

# A known size (a regular file) stays one PUT, whose ETag is the plain MD5.
make_random_file "$tmp/small" $((3 * 1024 * 1024 + 1))
proxy_mode plain:
run 0 -sS "${sign[@]}" -T "$tmp/small" "$proxy/b/"
grep -q "^put $((3 * 1024 * 1024 + 1))$" "$plog" || fail "not one PUT"
! grep -q "^part" "$plog" || fail "a known size was sent in parts"
etag=$(curl -sSf -I --aws-sigv4 aws:amz:us-east-1:s3 -u "S3RVER:$secret" \
         -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
         "http://127.0.0.1:$s3_port/b/small" | tr -d '\r' |
         sed -n 's/^[Ee][Tt]ag: "\(.*\)"$/\1/p')
[ "$etag" = "$(md5sum <"$tmp/small" | cut -d' ' -f1)" ] ||
  fail "the single PUT's ETag $etag is not the file's MD5"

# An unknown access key: 22, the step and the server's 403; nothing left.
head -c 1000 "$tmp/data" |
  run 22 -sS --aws-sigv4 aws:amz:us-east-1:s3 -u "NOSUCHKEY:$secret" \
  "$proxy/b/badkey"
assert_grep_i "$tmp/err" "creating the upload: HTTP 403"
no_uploads_left

# Part 2 corrupted on its way once: refused by its Content-MD5 (400
# BadDigest), sent again, the object byte-exact.
proxy_mode corrupt:2
cat "$tmp/data" | run 0 -sS "${sign[@]}" "$proxy/b/corrupt"
grep -q "^part 2 baddigest$" "$plog" || fail "part 2 was not corrupted"
check_parts "$tmp/data"
get corrupt "$tmp/back"
assert_same_file "$tmp/data" "$tmp/back"

# Part 2 answered 500 once: sent again.
proxy_mode fail500:2
cat "$tmp/data" | run 0 -sS "${sign[@]}" "$proxy/b/fail500"
grep -q "^part 2 refused$" "$plog" || fail "part 2 was not refused"
get fail500 "$tmp/back"
assert_same_file "$tmp/data" "$tmp/back"

# Part 3 refused every time: 4 tries, then the upload aborted, no part
# left, no object.
proxy_mode refuse:3
cat "$tmp/data" | run 22 -sS "${sign[@]}" "$proxy/b/refused"
assert_grep_i "$tmp/err" "part 3: HTTP 500 (InternalError) after 4 tries"
[ "$(grep -c '^part 3 refused$' "$plog")" -eq 4 ] || fail "not 4 tries"
grep -q "^abort " "$plog" || fail "the upload was not aborted"
! grep -q "^complete" "$plog" || fail "a failed upload was completed"
no_uploads_left
! get refused "$tmp/back" 2>/dev/null || fail "a failed upload left an object"

# Standard input that fails to read (a directory): 26, aborted.
run 26 -sS "${sign[@]}" "$proxy/b/readerr" <"$tmp"
assert_grep_i "$tmp/err" "reading standard input"
grep -q "^abort " "$plog" || fail "the upload was not aborted"
no_uploads_left

# Hostile answers: an UploadId with markup in it (8, nothing sent); a
# part answered without an ETag (8, aborted); a completion answered 200
# with an <Error> body (4 tries, then 22, aborted).
proxy_mode badid:
head -c 1000 "$tmp/data" | run 8 -sS "${sign[@]}" "$proxy/b/badid"
assert_grep_i "$tmp/err" "creating the upload: no valid UploadId"
proxy_mode noetag:2
cat "$tmp/data" | run 8 -sS "${sign[@]}" "$proxy/b/noetag"
assert_grep_i "$tmp/err" "part 2: the answer has no ETag"
grep -q "^abort " "$plog" || fail "no ETag: the upload was not aborted"
no_uploads_left
proxy_mode err200:
cat "$tmp/data" | run 22 -sS "${sign[@]}" "$proxy/b/err200"
assert_grep_i "$tmp/err" \
  "completing the upload: HTTP 200 (InternalError) in a 200 answer after 4 tries"
[ "$(grep -c '^complete refused$' "$plog")" -eq 4 ] || fail "not 4 tries"
grep -q "^abort " "$plog" || fail "err200: the upload was not aborted"
no_uploads_left

# A 200 with an <Error> to the create is no upload, even with an
# UploadId in it.
proxy_mode createerr:
head -c 1000 "$tmp/data" | run 8 -sS "${sign[@]}" "$proxy/b/createerr"
assert_grep_i "$tmp/err" "creating the upload: no valid UploadId"

# -m bounds the create and the completion too: a server that never
# answers them gives 28 in about -m's time, and the parts are aborted.
for step in uploads uploadId; do
  proxy_mode "stall:$step"
  t0=$SECONDS
  head -c $((3 * 1024 * 1024)) "$tmp/data" |
    run 28 -sS -m 2 "${sign[@]}" "$proxy/b/stall$step"
  [ $((SECONDS - t0)) -le 6 ] ||
    fail "-m 2 with the $step step stalled took $((SECONDS - t0)) s"
  grep -q "^stalled $step" "$plog" || fail "the $step step did not stall"
done
grep -q "^abort " "$plog" || fail "stalled completion: the upload not aborted"
no_uploads_left

# Options that describe one exchange are refused for a multipart upload.
head -c 1000 "$tmp/data" | run 2 -sS "${sign[@]}" -w '%{http_code}' \
  "$proxy/b/refusedopt"
assert_grep_i "$tmp/err" "-w: not supported in an S3 multipart upload"

# SIGTERM mid-upload (parts slowed down): 143, the upload aborted, no
# part left; meanwhile the secret is not in /proc/PID/cmdline.
proxy_mode slow:0.3
mkfifo "$tmp/fifo"
"$CURLPIPE" -sS "${sign[@]}" "$proxy/b/term" <"$tmp/fifo" \
  >"$tmp/out" 2>"$tmp/err" &
cp_pid=$!
_pids+=($cp_pid)
exec 7>"$tmp/fifo"
cat "$tmp/data" >&7
for ((n = 0; n < 100; n++)); do
  grep -q "^part 1 " "$plog" && break
  sleep 0.05
done
grep -q "^part 1 " "$plog" || fail "no part was sent"
! tr '\0' ' ' <"/proc/$cp_pid/cmdline" | grep -qF "$secret" ||
  fail "the secret is in /proc/PID/cmdline"
kill -TERM "$cp_pid"
for ((n = 0; n < 100; n++)); do
  _alive "$cp_pid" || break
  sleep 0.05
done
_alive "$cp_pid" && fail "SIGTERM: curlpipe did not end within 5 s"
st=0
wait "$cp_pid" || st=$?
_forget_pid "$cp_pid"
exec 7>&-
[ "$st" -eq 143 ] || { cat "$tmp/err" >&2; fail "SIGTERM: status $st"; }
assert_grep_i "$tmp/err" "interrupted by SIGTERM"
grep -q "^abort " "$plog" || fail "SIGTERM: the upload was not aborted"
no_uploads_left
! grep -qF "$secret" "$tmp/err" || fail "the secret is in a message"
