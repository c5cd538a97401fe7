#!/usr/bin/env bash
# test-curl-socket-options.sh: the options the plugin sets on each TCP
# connection to the server, seen with strace: TCP_USER_TIMEOUT of
# timeout= seconds (a connection whose peer stops acknowledging is
# closed then, not after TCP's minutes of retransmissions: over HTTP/2
# libcurl keeps a connection whose streams timed out), on every one
# libcurl makes or adopts; TCP_NODELAY by default, and
# not with tcp-nodelay=false.  A path that drops everything cannot be
# made on loopback here, so the option is what is checked.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdinfo
requires strace -f -o /dev/null true

serve_image $((1024 * 1024 + 3))

# traced NAME PLUGIN-ARGS...: nbdinfo --size through nbdkit under
# strace; the TCP sockets' setsockopt calls in $tmp/NAME.trace.
traced ()
{
  local name=$1
  shift
  timeout 60 strace -f -qq -e trace=setsockopt -o "$tmp/$name.trace" \
    "${NBDKIT[@]}" -r -U - "$PLUGIN" "$http_url" "$@" \
    --run 'nbdinfo --size "$uri"' >"$tmp/$name.out" 2>"$tmp/$name.err" ||
    fail "$name: nbdkit under strace failed: $(tail -3 "$tmp/$name.err")"
  [ "$(cat "$tmp/$name.out")" = $((1024 * 1024 + 3)) ] ||
    fail "$name: nbdinfo --size gave '$(cat "$tmp/$name.out")'"
}

traced default timeout=7
n=$(grep -c 'TCP_USER_TIMEOUT, \[7000\]' "$tmp/default.trace" || :)
[ "$n" -ge 1 ] ||
  fail "timeout=7: no TCP_USER_TIMEOUT of 7000 ms: $(grep -c . "$tmp/default.trace") calls"
other=$(grep 'TCP_USER_TIMEOUT' "$tmp/default.trace" | grep -vc '\[7000\]' || :)
[ "$other" -eq 0 ] || fail "timeout=7: another TCP_USER_TIMEOUT value"
# (nbdkit and libnbd try TCP_NODELAY on their Unix sockets too, which
# fails: only the calls that succeeded are the plugin's.)
grep -q 'TCP_NODELAY, \[1\], 4) = 0' "$tmp/default.trace" ||
  fail "default: no TCP_NODELAY"

traced nodelay tcp-nodelay=false
grep -q 'TCP_USER_TIMEOUT, \[60000\]' "$tmp/nodelay.trace" ||
  fail "the default timeout: no TCP_USER_TIMEOUT of 60000 ms"
! grep -q 'TCP_NODELAY, \[1\], 4) = 0' "$tmp/nodelay.trace" ||
  fail "tcp-nodelay=false: TCP_NODELAY was set"
