#!/usr/bin/env bash
# test-curl-script-limits.sh: timeout= bounds the whole run of a
# header-script, waiting for it to exit included: a script that prints
# its headers, closes its output and keeps running fails nbdkit's
# start-up, or the read that renewed it, after timeout= seconds instead
# of hanging it.  A script that times out, prints too much or fails is
# stopped together with every process it started (its process group),
# so that nothing it left behind keeps running; output with a NUL byte
# is refused, not cut short.  Output with CRLF line
# ends, a CRLF blank line included, is accepted and reaches the server
# without the CRs.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

# The scripts write the PIDs of the processes they start to
# $tmp/bg-NAME.pid, so that the test can check they are gone.
export tmp

# On a plugin that leaves them behind, do not leave them to outlive the
# test: kill those that are still our sleeps (checked by their command
# line, as an orphan's PID may have been reused), then clean up as usual.
_kill_leftovers ()
{
  local f pid
  for f in "$tmp"/bg-*.pid; do
    [ -s "$f" ] || continue
    pid=$(cat "$f")
    if _alive "$pid" &&
        tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q '^sleep '
    then
      kill -KILL "$pid" 2>/dev/null || :
    fi
  done
}
trap '_st=$?; _kill_leftovers; (exit "$_st"); _cleanup' EXIT

# assert_gone NAME: the process in $tmp/bg-NAME.pid exits within 5 s.
assert_gone ()
{
  local pid n
  [ -s "$tmp/bg-$1.pid" ] || fail "($1) the script did not start its child"
  pid=$(cat "$tmp/bg-$1.pid")
  for ((n = 0; n < 50; n++)); do
    _alive "$pid" || return 0
    sleep 0.1
  done
  fail "($1) process $pid, started by the script, is still running"
}

serve_image $((64 * 1024)) 'access_log DIR/headers.log hdrs;'

# (a) Prints its header, closes its output and keeps running: nbdkit
# must give up at start-up after timeout=2, not wait for it.
start=$SECONDS
expect_nbdkit_fails a -r "$PLUGIN" "$url" timeout=2 \
  'header-script=echo "X-Token: tok-1"; exec >&-;
   sleep 100 & echo $! >"$tmp/bg-a.pid"; wait'
assert_grep_i "$tmp/a.err" "header-script" "timeout="
[ $((SECONDS - start)) -lt 10 ] ||
  fail "(a) nbdkit took $((SECONDS - start)) s to give up on the script"
assert_gone a

# (b) The same at a renewal: the read that runs the script fails with
# EIO after timeout=2, and does not hang.
script='if [ "$iteration" -ge 1 ]; then
          echo "X-Token: tok-$iteration"; exec >&-
          sleep 100 & echo $! >"$tmp/bg-b.pid"; wait
        fi
        echo "X-Token: tok-1"'
start_nbdkit b -r "$PLUGIN" "$url" timeout=2 "header-script=$script" \
  header-script-renew=1
timeout 20 "$PYTHON_NBD" -m nbd -u "$uri" -c '
import errno, time
h.pread(512, 16384)
time.sleep(1.5)
t = time.monotonic()
try:
    h.pread(512, 32768)
except nbd.Error as e:
    assert e.errnum == errno.EIO, e.string
else:
    raise SystemExit("a read succeeded although header-script hung")
took = time.monotonic() - t
assert took < 10, "the failed read took %.1f s" % took
h.shutdown()
' || fail "(b) the read after a hanging renewal did not fail in time"
stop_nbdkit b
assert_grep_i "$tmp/b.err" "header-script" "timeout="
assert_gone b

# (c) The process group is killed.  At start-up, on timeout, with a
# child holding the script's output open:
start=$SECONDS
expect_nbdkit_fails c1 -r "$PLUGIN" "$url" timeout=2 \
  'header-script=sleep 300 & echo $! >"$tmp/bg-c1.pid"; echo "X-Token: t"; wait'
assert_grep_i "$tmp/c1.err" "header-script" "timeout="
[ $((SECONDS - start)) -lt 10 ] ||
  fail "(c1) nbdkit took $((SECONDS - start)) s to give up on the script"
assert_gone c1

# A script that fails, leaving a child behind that does not hold its
# output:
expect_nbdkit_fails c2 -r "$PLUGIN" "$url" \
  'header-script=sleep 300 >/dev/null & echo $! >"$tmp/bg-c2.pid"; exit 5'
assert_grep_i "$tmp/c2.err" "header-script" "exited with status 5"
assert_gone c2

# A cookie-script with too much output:
expect_nbdkit_fails c3 -r "$PLUGIN" "$url" \
  'cookie-script=sleep 300 >/dev/null & echo $! >"$tmp/bg-c3.pid"; yes a=b'
assert_grep_i "$tmp/c3.err" "cookie-script" "bytes of output"
assert_gone c3

# Output with a NUL byte: refused, not cut at the NUL (which would send
# "X-A: v" and drop the rest without a word).
expect_nbdkit_fails c4 -r "$PLUGIN" "$url" \
  'header-script=printf "X-A: v\000rest\n"'
assert_grep_i "$tmp/c4.err" "header-script" "NUL"
expect_nbdkit_fails c5 -r "$PLUGIN" "$url" \
  'cookie-script=printf "a=b\000c=d\n"'
assert_grep_i "$tmp/c5.err" "cookie-script" "NUL"

# (d) CRLF line ends and a CRLF blank line at the end, as a tool that
# prints HTTP headers may end them: accepted, and the server gets the
# values without a CR.
start_nbdkit d -r "$PLUGIN" "$url" \
  'header-script=printf "X-Token: tok-7\r\nX-Token-Check: tok-7\r\n\r\n"' \
  'cookie-script=printf "sess=9\r\n\r\n"'
FILE=$image nbdsh -u "$uri" -c '
import os
data = open(os.environ["FILE"], "rb").read()
assert h.pread(4096, 8192) == data[8192:12288], "the read differs"
h.shutdown()
' || fail "(d) a read with CRLF script output failed"
stop_nbdkit d
grep 'tok-7' "$tmp/headers.log" >"$tmp/d.log" || :
grep -qE ' 20[06] cookie="sess=9" token="tok-7" check="tok-7"$' \
     "$tmp/d.log" || {
  cat "$tmp/headers.log" >&2
  fail "(d) nginx did not get the headers and the cookie from CRLF output"
}
! grep -vE ' 20[06] cookie="sess=9" token="tok-7" check="tok-7"$' \
  "$tmp/d.log" || fail "(d) requests with other values: $(cat "$tmp/d.log")"
