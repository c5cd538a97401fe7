#!/usr/bin/env bash
# test-curl-faults.sh: nbdcopy through the plugin from the fault server,
# one fault at a time.  Transient faults (resets, truncated bodies, 503,
# 429 with Retry-After, stalls past timeout=, a redirect) must be retried
# to a byte-exact copy; permanent ones (the object replaced mid-copy,
# with and without If-Match support, and with its new ETag missing, too
# long or followed by the old one, or an ETag of "*"; ETags that change
# on every answer, unless pin-object=false; a redirect to file://; 401
# without credentials) must end with a non-zero exit and a message
# naming the cause, within a bounded time.  Never exit 0 with wrong
# bytes; never hang.  The cases are the table below, one a row; each
# prints a line "case NAME ok|FAIL" with its time and outcome.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy

size=$((8 * 1024 * 1024 + 4097))
make_random_file "$tmp/orig.img" "$size"
fast=(retry-delay=0.05 timeout=1)

# The cases, one a row: NAME | MODE | EXPECT | ALSO | PLUGIN-ARGS
#   MODE         the fault server's --mode (helpers/fault-server.py)
#   EXPECT       copy: nbdcopy exits 0 and the copy is byte-exact;
#                fail:WORDS: nbdkit or nbdcopy fails, nbdkit's stderr
#                has WORDS (case-insensitive), and every 4 KiB block
#                nbdcopy wrote is the image's; never exit 0
#                (fault_outcome in functions.sh)
#   ALSO         further checks of this case, or "-":
#                injected:503, injected:429, injected:short: the fault
#                  server's log shows the fault injected (a 503, a 429,
#                  a 206 whose body was cut short);
#                retry-logged: nbdkit -v printed a debug line for a
#                  retry, naming the range, the cause and the delay;
#                retry-after: it took at least 1 s, as the 429's
#                  Retry-After: 1 asked, although retry-delay=0.05
#   PLUGIN-ARGS  after url= and retry-delay=0.05 timeout=1; "-v" runs
#                nbdkit with -v
# Every case ends within 60 s.
cases=(
  # Transient faults: retried to a byte-exact copy.
  "reset-some         | reset-some      | copy | injected:short |"
  "truncate-some      | truncate-some   | copy | injected:short |"
  "503-some           | 503-some        | copy | injected:503 retry-logged | -v"
  "429-some           | 429-some        | copy | injected:429 retry-after |"
  "stall-some         | stall-some      | copy | injected:short |"
  "redirect           | redirect        | copy | -            |"
  "auth               | auth            | copy | -            | user=alice password=secret"
  # The object replaced mid-copy, with and without If-Match support.
  "replace-after      | replace-after   | fail:changed since it was opened | - |"
  "replace-ignore-precondition | replace-ignore-precondition | fail:changed since it was opened | - |"
  # The same, with the new validator in a form that is easy to
  # overlook: no ETag (only a newer Last-Modified), a strong ETag longer
  # than 255 characters, an ETag header line longer than 1100 bytes, or
  # the new ETag followed by a second ETag header with the old one.
  "replace-drop-etag  | replace-drop-etag     | fail:changed since it was opened | - |"
  "replace-no-validators | replace-no-validators | fail:changed since it was opened | - |"
  "replace-long-etag  | replace-long-etag     | fail:changed since it was opened | - |"
  "replace-huge-etag  | replace-huge-etag     | fail:changed since it was opened | - |"
  "replace-dup-etag   | replace-dup-etag      | fail:changed since it was opened | - |"
  # An ETag that is no entity-tag ("*") is not used: If-Match: * would
  # match any version.  Last-Modified pins instead.
  "replace-star-etag  | replace-star-etag     | fail:changed since it was opened | - |"
  # The ETag on HEAD only, Last-Modified on GET: the new bytes without
  # validators are refused for the Last-Modified the first GETs carried.
  "replace-head-only-etag | replace-head-only-etag | fail:carries no Last-Modified | - |"
  # ETags that change on every answer, unless pin-object=false.
  "unstable-etag      | unstable-etag   | fail:changed since it was opened | - |"
  "unstable-etag-unpinned | unstable-etag | copy | - | pin-object=false"
  "redirect-file      | redirect-file   | fail:protocol     | - |"
  "auth-no-credentials | auth           | fail:HTTP 401     | - |"
  "ignore-range       | ignore-range    | fail:does not support range requests | - |"
  "wrong-content-range | wrong-content-range | fail:not the requested range | - |"
)

# also CHECK SECS: the further check CHECK of the case just run (its
# fault log in $tmp/fault.log, nbdkit's stderr in $tmp/nbdkit.err).
also ()
{
  local check=$1 secs=$2 n
  case $check in
    injected:*)
      n=$(awk -v k="${check#injected:}" '
            k == "503" && /status=503/ { n++ }
            k == "429" && /status=429/ { n++ }
            k == "short" && /status=206/ {
              split($NF, a, "="); split($3, r, "[=-]")
              if (a[2] + 0 < r[4] - r[3] + 1) n++ }
            END { print n + 0 }' "$tmp/fault.log")
      [ "$n" -ge 1 ] || echo "BAD: injected no fault (${check#injected:})" ;;
    retry-logged)
      grep -qE 'pread: .*: bytes [0-9]+-[0-9]+: the server answered HTTP 503 .*: retry 1 of 5 in 50 ms' \
           "$tmp/nbdkit.err" || echo "BAD: no debug message for a retry" ;;
    retry-after)
      awk -v s="$secs" 'BEGIN { exit !(s >= 1.0) }' ||
        echo "BAD: took $secs s: Retry-After was ignored" ;;
    -) ;;
    *) echo "BAD: unknown check '$check'" ;;
  esac
}

for row in "${cases[@]}"; do
  case_row "$row" name mode expect checks args
  flags=()
  plugin_args=("${fast[@]}")
  for a in $args; do
    case $a in
      -*) flags+=("$a") ;;
      *) plugin_args+=("$a") ;;
    esac
  done

  cp "$tmp/orig.img" "$tmp/disk.img"
  : >"$tmp/fault.log"
  start_fault_server "$mode" "$tmp/disk.img"
  t0=$EPOCHREALTIME
  rm -f "$tmp/out.img"
  st=0
  if fault_nbdkit "${flags[@]}" -- \
                  "http://127.0.0.1:$fault_port/disk.img" "${plugin_args[@]}"
  then
    timeout 120 nbdcopy "$uri" "$tmp/out.img" 2>"$tmp/nbdcopy.err" ||
      st=$?
    stop_pid "$nbdkit_pid"
  else
    st=start
  fi
  secs=$(seconds_since "$t0")
  stop_pid "$fault_pid"

  result=$(fault_outcome "$expect" "$st")
  verdict=ok
  [[ $result != BAD* ]] || verdict=FAIL
  if [ "${secs%.*}" -gt 60 ]; then
    result="BAD: took $secs s; $result"
    verdict=FAIL
  fi
  for c in $checks; do
    more=$(also "$c" "$secs")
    [ -z "$more" ] || { result="$result; $more"; verdict=FAIL; }
  done
  [ $verdict = ok ] || [[ $result == BAD* ]] || result="BAD: $result"
  case_done "$name" "$result ($secs s)"
  mv "$tmp/fault.log" "$tmp/fault-$name.log"
  mv "$tmp/nbdkit.err" "$tmp/nbdkit-$name.err"
done
cases_end
