#!/usr/bin/env bash
# test-curl-multipart-framing.sh: a multipart/byteranges part whose data
# is 1 or 2 bytes shorter or longer than its own Content-Range says is
# refused, with CRLF framing and with bare LF framing: every read gets
# the object's bytes (never the line break that follows a short part),
# and the plugin falls back to one range per request.  A legal answer
# framed with bare LFs keeps getting multi-range requests.  An answer
# that goes on for ever after its parts (an endless epilogue, or endless
# header lines in a part) is refused too, not read until the server
# stops (the bytes keep moving, so no stall timeout would end it).
#
# The object is rich in CR, LF and '-', so that parts often end in CR or
# LF: "data ending in CR, then LF framing" must be told apart from "one
# byte short, then CRLF framing".
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

size=$((1024 * 1024 + 321))
connections=4
"$PYTHON" -c '
import random, sys
rnd = random.Random(11)
alphabet = b"\r\n-" + bytes(range(256))
n = int(sys.argv[1])
sys.stdout.buffer.write(bytes(rnd.choices(alphabet, k=n)))
' "$size" >"$tmp/disk.img"
chmod 644 "$tmp/disk.img"
[ "$(file_size "$tmp/disk.img")" -eq "$size" ] ||
  fail "could not make the object"

# The cases, one a row: NAME | MODE | EXPECT
#   MODE    the fault server's --mode (helpers/fault-server.py)
#   EXPECT  kept: no fallback and at least 10 multi-range requests (a
#           legal answer is used);
#           refused: the multipart parser refused an answer (nbdkit -v
#           says it falls back to one range per request), after at
#           least one multi-range request and no more than one per
#           connection
# In every case 1000 random reads through nbdkit give the object's
# bytes.
cases=(
  "multipart-lf               | multipart-lf               | kept"
  "multipart-short1-crlf      | multipart-short1-crlf      | refused"
  "multipart-short2-crlf      | multipart-short2-crlf      | refused"
  "multipart-long1-crlf       | multipart-long1-crlf       | refused"
  "multipart-long2-crlf       | multipart-long2-crlf       | refused"
  "multipart-short1-lf        | multipart-short1-lf        | refused"
  "multipart-short2-lf        | multipart-short2-lf        | refused"
  "multipart-long1-lf         | multipart-long1-lf         | refused"
  "multipart-long2-lf         | multipart-long2-lf         | refused"
  "multipart-endless-epilogue | multipart-endless-epilogue | refused"
  "multipart-endless-headers  | multipart-endless-headers  | refused"
)

for row in "${cases[@]}"; do
  case_row "$row" name mode expect
  echo "case $name: mode $mode, expect $expect"
  start_fault_server "$mode" "$tmp/disk.img"
  # -v: the fallback is reported by a debug line.
  start_nbdkit ro -r -v "$PLUGIN" "http://127.0.0.1:$fault_port/disk.img" \
               connections=$connections
  random_reads "$uri" "$tmp/disk.img" 1000
  stop_nbdkit ro
  stop_pid "$fault_pid"
  mv "$tmp/fault.log" "$tmp/fault-$name.log"
  mv "$tmp/ro.err" "$tmp/nbdkit-$name.err"

  # range= has a comma only in a multi-range request.
  multi=$(grep -c '^GET .* range=bytes=[0-9-]*,' "$tmp/fault-$name.log" || :)
  # The fallback must come from the multipart parser's refusal.
  fellback=$(grep -c 'multipart answer: .*asking for one range per request' \
                  "$tmp/nbdkit-$name.err" || :)
  result="$multi multi-range requests, $fellback fallbacks"
  case $expect in
    kept)
      if [ "$fellback" -ne 0 ]; then
        grep 'asking for one range' "$tmp/nbdkit-$name.err" >&2
        result="BAD: $result: a legal answer was refused"
      elif [ "$multi" -lt 10 ]; then
        result="BAD: only $result"
      fi ;;
    refused)
      if [ "$fellback" -lt 1 ]; then
        result="BAD: $result: the plugin took the answer (no fallback)"
      elif [ "$multi" -lt 1 ]; then
        result="BAD: no multi-range request was made"
      elif [ "$multi" -gt "$connections" ]; then
        result="BAD: $result, more than one multi-range request per"
        result="$result connection after the first bad answer"
      fi ;;
    *) result="BAD: unknown EXPECT '$expect'" ;;
  esac
  case_done "$name" "$result"
done
cases_end
