#!/usr/bin/env bash
# test-curlpipe-progress.sh: with standard error on a terminal curlpipe
# shows a progress line with the bytes sent and received; with -s, or
# when standard error is not a terminal, it does not.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

start_stream_server
head -c $((4 * 1024 * 1024)) /dev/zero >"$tmp/in"

# progress ARGS...: curlpipe's stderr, from a pseudo-terminal.
progress ()
{
  timeout "$client_timeout" "$PYTHON" - "$CURLPIPE" "$@" <<'PYEOF'
import os, pty, subprocess, sys
master, slave = os.openpty()
p = subprocess.Popen(sys.argv[1:], stdin=open(os.environ["IN"], "rb"),
                     stdout=subprocess.DEVNULL, stderr=slave)
os.close(slave)
out = b""
while True:
    try:
        b = os.read(master, 4096)
    except OSError:         # EIO: the terminal's last writer is gone
        break
    if not b:
        break
    out += b
sys.stdout.write(out.decode(errors="replace"))
sys.exit(p.wait())
PYEOF
}

export IN=$tmp/in
progress "http://127.0.0.1:$stream_port/echo" >"$tmp/tty"
grep -q 'curlpipe: sent 4\.0 MiB .*, received 4\.0 MiB' "$tmp/tty" || {
  cat "$tmp/tty" >&2
  fail "no final progress line on a terminal"
}
progress -s "http://127.0.0.1:$stream_port/echo" >"$tmp/tty"
[ ! -s "$tmp/tty" ] || fail "-s: output on the terminal: $(cat "$tmp/tty")"
curlpipe "http://127.0.0.1:$stream_port/echo" <"$tmp/in" >/dev/null \
  2>"$tmp/err"
[ ! -s "$tmp/err" ] || fail "progress on a non-terminal: $(cat "$tmp/err")"
