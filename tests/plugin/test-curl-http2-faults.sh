#!/usr/bin/env bash
# test-curl-http2-faults.sh: nbdcopy through the plugin over HTTP/2 from
# the HTTP/2 fault server (helpers/h2-fault-server.py, which speaks
# only h2), one fault at a time.  Transient faults (a stream ended
# early by END_STREAM, with and without Content-Length, or by
# RST_STREAM; a stream refused; a stream that never gets its body,
# until timeout=; a connection ended by GOAWAY, gracefully or with
# streams in flight) must be retried to a byte-exact copy; the same
# faults on every answer, and the permanent ones (a Content-Range that
# is not the range asked for, whether the bytes are its or the ones
# asked for; a body longer than the range; the object replaced, with
# and without If-Match honoured), must end with a non-zero exit and a
# message naming the cause, within a bounded time.  Never exit 0 with
# wrong bytes, never write wrong bytes before failing, never hang.
# Each case runs twice, both times with the plugin multiplexing its
# requests as HTTP/2 streams: with http-version=2TLS on loopback
# ("@2TLS"), and with the default (auto) through a 20 ms link
# (helpers/linkem), far enough for auto to take HTTP/2 ("@far"), both
# with readahead=false: else the head start's GETs, sent beside the
# probe to a server whose TLS set-up took 20 ms (far, or busy), would be
# the first to meet each fault, and the reads' own answers none
# (test-curl-head-start.sh injects faults into those).  Each
# prints a line "case NAME@RUN ok|FAIL" with its time and outcome.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy
requires_h2
make_cert

size=$((8 * 1024 * 1024 + 4097))
make_random_file "$tmp/orig.img" "$size"
fast=(retry-delay=0.05 timeout=1)

# The cases, one a row: NAME | MODE | NTH | EXPECT | ALSO | PLUGIN-ARGS
#   MODE, NTH    the fault server's --mode and --nth
#   EXPECT       copy: nbdcopy exits 0 and the copy is byte-exact;
#                fail:WORDS[;WORDS...]: nbdkit or nbdcopy fails, nbdkit's
#                stderr has each WORDS (case-insensitive), and every
#                4 KiB block nbdcopy wrote is the image's; never exit 0
#   ALSO         further checks of this case, or "-":
#                injected:FAULT: the fault server's log shows the fault
#                  (fault=FAULT on an answer; goaway: a GOAWAY sent;
#                  ignored: a stream left unanswered after it);
#                retried: every range whose answer was cut, refused or
#                  left unanswered was asked again and answered in full;
#                slower:S: it took at least S seconds (timeout= waited);
#                conns:N: the server accepted at most N connections
#   PLUGIN-ARGS  after url=, cainfo=, retry-delay=0.05 timeout=1
#                readahead=false (and http-version=2TLS in the 2TLS run)
# Every case ends within 60 s.
cases=(
  "normal             | normal          | 3 | copy | conns:1           |"
  # Transient faults: retried to a byte-exact copy.
  "short-once         | short-once      | 3 | copy | injected:short retried |"
  "short-nolen-once   | short-nolen-once | 3 | copy | injected:short retried |"
  "rst-once           | rst-once        | 3 | copy | injected:rst retried |"
  "refused-once       | refused-once    | 3 | copy | injected:refused retried |"
  "stall-once         | stall-once      | 3 | copy | injected:stall retried slower:1 |"
  # Each connection ended at its 4th request by a GOAWAY that leaves
  # the later streams unanswered (a server's limit of requests on a
  # connection), or at its 8th by one that cuts every answer in flight.
  # Cut at its 4th, each new connection dies with the retries of every
  # stream in flight on it, and the 5 retries ran out in 1 of 6 runs:
  # all streams share the fate of their connection.
  "goaway             | goaway          | 4 | copy | injected:goaway injected:ignored retried |"
  "goaway-abrupt      | goaway-abrupt   | 8 | copy | injected:goaway retried |"
  # The same on every answer from the 3rd on: an error once retries=
  # are spent.
  "short-always       | short-always    | 3 | fail:short body;retries exhausted | injected:short |"
  "short-nolen-always | short-nolen-always | 3 | fail:short body;retries exhausted | injected:short |"
  "rst-always         | rst-always      | 3 | fail:HTTP/2 stream;retries exhausted | injected:rst |"
  "stall-always       | stall-always    | 3 | fail:timeout;retries exhausted | injected:stall slower:1 |"
  # Answers that are not the bytes asked for, and a changed object.
  "wrong-range        | wrong-range     | 3 | fail:Content-Range;not the requested range | injected:wrong-range |"
  "wrong-label        | wrong-label     | 3 | fail:Content-Range;not the requested range | injected:wrong-label |"
  "long-nolen         | long-nolen      | 3 | fail:more than the | injected:long |"
  "changed            | changed         | 3 | fail:changed since it was opened | injected:precondition |"
  "changed-ignore-if-match | changed-ignore-if-match | 3 | fail:changed since it was opened;ETag | injected:changed |"
)

# The runs: 2TLS on loopback, the default through the link.  (With the
# default on loopback the plugin reads over HTTP/1.1, which this server
# does not speak.)
runs=(2TLS far)
rtt=20

# also CHECK SECS: the further check CHECK of the case just run (the
# fault server's log in $tmp/h2.log).
also ()
{
  local check=$1 secs=$2 n
  case $check in
    injected:goaway)
      grep -q ' goaway last-stream=' "$tmp/h2.log" ||
        echo "BAD: no GOAWAY sent" ;;
    injected:ignored)
      grep -q ' ignored$' "$tmp/h2.log" ||
        echo "BAD: no stream left unanswered after a GOAWAY" ;;
    injected:*)
      grep -q " fault=${check#injected:}\$" "$tmp/h2.log" ||
        echo "BAD: injected no fault (${check#injected:})" ;;
    retried)
      # A range is done when an answer to it was sent whole after the
      # last time it was cut or refused.  One left unanswered after a
      # GOAWAY needs a whole answer anywhere in the log: the client asks
      # again once the GOAWAY names it, and the old connection's thread,
      # under load, may log the stream it ignores after that answer.
      awk '
        $3 != "GET" { next }
        { r = $5 }
        / ignored$/ { ign[r] = 1; next }
        / fault=(short|rst|refused|stall|goaway)$/ ||
        ($6 == "status=206" && $8 != "sent=" substr($7, 8)) {
          cut[r] = 1; next
        }
        $6 == "status=206" && $NF == "fault=-" { delete cut[r]; whole[r] = 1 }
        END {
          for (r in ign) if (!(r in whole)) cut[r] = 1
          for (r in cut) { print "never answered in full: " r; bad++ }
          exit bad > 0
        }' "$tmp/h2.log" >"$tmp/retried.out" ||
        echo "BAD: $(head -3 "$tmp/retried.out" | tr '\n' ' ')" ;;
    slower:*)
      awk -v s="$secs" -v min="${check#slower:}" 'BEGIN { exit !(s >= min) }' ||
        echo "BAD: took $secs s, less than timeout=" ;;
    conns:*)
      n=$(grep -c ' open alpn=' "$tmp/h2.log" || :)
      [ "$n" -le "${check#conns:}" ] ||
        echo "BAD: $n connections, not at most ${check#conns:}" ;;
    -) ;;
    *) echo "BAD: unknown check '$check'" ;;
  esac
}

for run in "${runs[@]}"; do
  vargs=(readahead=false)
  [ "$run" != 2TLS ] || vargs+=(http-version=2TLS)
  for row in "${cases[@]}"; do
    case_row "$row" name mode nth expect checks args
    name=$name@$run
    : >"$tmp/h2.log"
    start_h2_fault_server "$mode" "$tmp/orig.img" "$nth"
    port=$h2_port
    if [ "$run" = far ]; then
      start_linkem "$h2_port" "$rtt"
      port=$linkem_port
    fi
    t0=$EPOCHREALTIME
    rm -f "$tmp/out.img"
    st=0
    nbdkit_st=0
    # shellcheck disable=SC2086 # PLUGIN-ARGS are words
    if fault_nbdkit -- "https://127.0.0.1:$port/disk.img" \
                    cainfo="$tmp/cert.pem" "${vargs[@]}" "${fast[@]}" $args
    then
      timeout 120 nbdcopy "$uri" "$tmp/out.img" 2>"$tmp/nbdcopy.err" ||
        st=$?
      stop_pid "$nbdkit_pid"
      nbdkit_st=$_status
    else
      st=start
    fi
    secs=$(seconds_since "$t0")
    [ "$run" != far ] || stop_pid "$linkem_pid"
    stop_pid "$h2_pid"

    result=$(fault_outcome "$expect" "$st")
    verdict=ok
    [[ $result != BAD* ]] || verdict=FAIL
    if [ "${secs%.*}" -gt 60 ]; then
      result="BAD: took $secs s; $result"
      verdict=FAIL
    fi
    more=
    # nbdkit before 1.33.10 may abort (SIGABRT, 134) when a client hangs
    # up while replies are queued (nbdkit commit 9d82aa4f, "server:
    # Don't assert on send if client hangs up early"), as nbdcopy does
    # after a failed read: nbdkit's own race, not the plugin's.
    if [ "$nbdkit_st" = 134 ] &&
       grep -q "raw_send_socket: Assertion \`sock >= 0' failed" \
            "$tmp/nbdkit.err"; then
      result="$result (nbdkit's abort on a client's hang-up)"
    elif [ "$nbdkit_st" != 0 ]; then
      more="BAD: nbdkit exited with status $nbdkit_st"
    fi
    grep -q ' open alpn=h2$' "$tmp/h2.log" &&
      ! grep -q ' open alpn=none$' "$tmp/h2.log" ||
      more+="${more:+; }BAD: not every connection spoke HTTP/2"
    for c in $checks; do
      m=$(also "$c" "$secs")
      [ -z "$m" ] || more+="${more:+; }$m"
    done
    [ -z "$more" ] || { result="$result; $more"; verdict=FAIL; }
    [ $verdict = ok ] || [[ $result == BAD* ]] || result="BAD: $result"
    case_done "$name" "$result ($secs s)"
    mv "$tmp/h2.log" "$tmp/h2-$name.log"
    mv "$tmp/nbdkit.err" "$tmp/nbdkit-$name.err"
  done
done
cases_end
