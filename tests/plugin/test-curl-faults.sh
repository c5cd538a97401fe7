#!/usr/bin/env bash
# test-curl-faults.sh: nbdcopy through the plugin from the fault server,
# one fault at a time.  Transient faults (resets, truncated bodies, 503,
# 429 with Retry-After, stalls past timeout=, a redirect) must be retried
# to a byte-exact copy; permanent ones (the object replaced mid-copy,
# with and without If-Match support, and with its new ETag missing, too
# long or followed by the old one, or an ETag of "*"; ETags that change
# on every answer, unless pin-object=false; a redirect to file://; 401
# without credentials) must end with a non-zero exit and a message
# naming the cause, within a bounded time.  Never exit 0 with wrong bytes; never
# hang.  One line per mode with its outcome and time goes to the log.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy

size=$((8 * 1024 * 1024 + 4097))
make_random_file "$tmp/orig.img" "$size"
fast=(retry-delay=0.05 timeout=1)
bad=0
declare -A took

# run MODE EXPECT [PLUGIN-ARGS...]: EXPECT is "copy" (byte-exact, exit 0)
# or "fail:WORDS" (nbdcopy or nbdkit fails, stderr has WORDS).
run ()
{
  local mode=$1 expect=$2 t0 st=0 secs outcome
  shift 2
  cp "$tmp/orig.img" "$tmp/disk.img"
  : >"$tmp/fault.log"
  start_fault_server "$mode" "$tmp/disk.img"
  t0=$EPOCHREALTIME
  rm -f "$tmp/out.img"
  if expect_start "$mode" "http://127.0.0.1:$fault_port/disk.img" "$@"; then
    timeout 120 nbdcopy "$uri" "$tmp/out.img" 2>"$tmp/nbdcopy.err" ||
      st=$?
    stop_pid "$nbdkit_pid"
  else
    st=start
  fi
  secs=$(seconds_since "$t0")
  took[$mode]=$secs
  stop_pid "$fault_pid"

  case $expect in
    copy)
      if [ "$st" = 0 ] && cmp -s "$tmp/orig.img" "$tmp/out.img"; then
        outcome="byte-exact copy"
      else
        outcome="BAD: exit $st, copy $(cmp "$tmp/orig.img" "$tmp/out.img" \
                                        2>&1 | head -1)"
        cat "$tmp/nbdkit.err" >&2
      fi ;;
    fail:*)
      if [ "$st" = 0 ]; then
        outcome="BAD: exit 0"
        cmp -s "$tmp/orig.img" "$tmp/out.img" ||
          outcome="BAD: exit 0 with wrong bytes"
      elif grep -qiF -- "${expect#fail:}" "$tmp/nbdkit.err"; then
        outcome="failed ($st): $(grep -iF -m1 -- "${expect#fail:}" \
                                   "$tmp/nbdkit.err" | cut -c1-150)"
      else
        outcome="BAD: failed ($st) without '${expect#fail:}'"
        cat "$tmp/nbdkit.err" >&2
      fi ;;
  esac
  [ "${secs%.*}" -le 60 ] || outcome="BAD: took $secs s; $outcome"
  case $outcome in BAD*) bad=$((bad + 1)) ;; esac
  printf '%-28s %6s s  %s\n' "$mode" "$secs" "$outcome"
  mv "$tmp/fault.log" "$tmp/fault-$mode.log"
}

# expect_start NAME URL ARGS...: start nbdkit; false if it exits first.
expect_start ()
{
  local name=$1 n
  shift
  rm -f "$tmp/nbdkit.sock" "$tmp/nbdkit.pid"
  ( exec "${NBDKIT[@]}" -f --exit-with-parent -r -U "$tmp/nbdkit.sock" \
         -P "$tmp/nbdkit.pid" ${verbose:+-v} "$PLUGIN" "$@" ) \
    2>"$tmp/nbdkit.err" &
  nbdkit_pid=$!
  _pids+=("$nbdkit_pid")
  for ((n = 0; n < ready_tries; n++)); do
    [ -s "$tmp/nbdkit.pid" ] && [ -S "$tmp/nbdkit.sock" ] && break
    _alive "$nbdkit_pid" || { stop_pid "$nbdkit_pid"; return 1; }
    sleep 0.1
  done
  uri="nbd+unix:///?socket=$tmp/nbdkit.sock"
}

run reset-some copy "${fast[@]}"
run truncate-some copy "${fast[@]}"
verbose=1 run 503-some copy "${fast[@]}"
# Each retry is a debug message naming the range, the cause and the delay.
grep -qE 'pread: .*: bytes [0-9]+-[0-9]+: the server answered HTTP 503 .*: retry 1 of 5 in 50 ms' \
     "$tmp/nbdkit.err" || {
  echo "BAD: 503-some: no debug message for a retry"; bad=$((bad + 1))
}
run 429-some copy "${fast[@]}"
run stall-some copy "${fast[@]}"
run redirect copy "${fast[@]}"
run auth copy "${fast[@]}" user=alice password=secret
run replace-after fail:"changed since it was opened" "${fast[@]}"
run replace-ignore-precondition fail:"changed since it was opened" \
  "${fast[@]}"
# The same, with the new validator in a form that is easy to overlook:
# no ETag (only a newer Last-Modified), a strong ETag longer than 255
# characters, an ETag header line longer than 1100 bytes, or the new
# ETag followed by a second ETag header with the old one.
run replace-drop-etag fail:"changed since it was opened" "${fast[@]}"
run replace-no-validators fail:"changed since it was opened" "${fast[@]}"
run replace-long-etag fail:"changed since it was opened" "${fast[@]}"
run replace-huge-etag fail:"changed since it was opened" "${fast[@]}"
run replace-dup-etag fail:"changed since it was opened" "${fast[@]}"
# An ETag that is no entity-tag ("*") is not used: If-Match: * would
# match any version.  Last-Modified pins instead.
run replace-star-etag fail:"changed since it was opened" "${fast[@]}"
# The ETag on HEAD only, Last-Modified on GET: the new bytes without
# validators are refused for the Last-Modified the first GETs carried.
run replace-head-only-etag fail:"carries no Last-Modified" "${fast[@]}"
run unstable-etag fail:"changed since it was opened" "${fast[@]}"
run unstable-etag copy "${fast[@]}" pin-object=false
run redirect-file fail:"protocol" "${fast[@]}"
run auth fail:"HTTP 401" "${fast[@]}"
run ignore-range fail:"does not support range requests" "${fast[@]}"
run wrong-content-range fail:"not the requested range" "${fast[@]}"

# The 429s asked for a second (Retry-After: 1) and got it, although
# retry-delay was 0.05 s.
awk -v s="${took[429-some]}" 'BEGIN { exit !(s >= 1.0) }' || {
  echo "BAD: 429-some took ${took[429-some]} s: Retry-After was ignored"
  bad=$((bad + 1))
}
# Every transient mode really injected its fault.
for m in reset-some truncate-some 503-some 429-some stall-some; do
  n=$(awk -v m="$m" '
        m == "503-some" && /status=503/ { n++ }
        m == "429-some" && /status=429/ { n++ }
        m ~ /reset|truncate|stall/ && /status=206/ {
          split($NF, a, "="); split($3, r, "[=-]")
          if (a[2] + 0 < r[4] - r[3] + 1) n++ }
        END { print n + 0 }' "$tmp/fault-$m.log")
  [ "$n" -ge 1 ] || { echo "BAD: $m injected no fault"; bad=$((bad + 1)); }
done
[ "$bad" -eq 0 ] || fail "$bad fault modes ended badly"
