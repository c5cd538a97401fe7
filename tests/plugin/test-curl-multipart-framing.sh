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

for mode in multipart-lf \
            multipart-short1-crlf multipart-short2-crlf \
            multipart-long1-crlf multipart-long2-crlf \
            multipart-short1-lf multipart-short2-lf \
            multipart-long1-lf multipart-long2-lf \
            multipart-endless-epilogue multipart-endless-headers; do
  start_fault_server "$mode" "$tmp/disk.img"
  # -v: the fallback is reported by a debug line.
  start_nbdkit ro -r -v "$PLUGIN" "http://127.0.0.1:$fault_port/disk.img" \
               connections=$connections
  echo "$mode: reading" >&2
  random_reads "$uri" "$tmp/disk.img" 1000
  stop_nbdkit ro
  stop_pid "$fault_pid"
  mv "$tmp/fault.log" "$tmp/fault-$mode.log"
  mv "$tmp/ro.err" "$tmp/nbdkit-$mode.err"

  # range= has a comma only in a multi-range request.
  multi=$(grep -c '^GET .* range=bytes=[0-9-]*,' "$tmp/fault-$mode.log" || :)
  # The fallback must come from the multipart parser's refusal.
  fellback=$(grep -c 'multipart answer: .*asking for one range per request' \
                  "$tmp/nbdkit-$mode.err" || :)
  echo "$mode: $multi multi-range requests, $fellback fallbacks"
  case $mode in
    multipart-lf)
      [ "$fellback" -eq 0 ] || {
        grep 'asking for one range' "$tmp/nbdkit-$mode.err" >&2
        fail "$mode: a legal LF-framed answer was refused"
      }
      [ "$multi" -ge 10 ] ||
        fail "$mode: only $multi multi-range requests" ;;
    *)
      [ "$fellback" -ge 1 ] ||
        fail "$mode: the plugin took the answer (no fallback)"
      [ "$multi" -ge 1 ] || fail "$mode: no multi-range request was made"
      [ "$multi" -le "$connections" ] ||
        fail "$mode: $multi multi-range requests, more than one per" \
             "connection after the first bad answer" ;;
  esac
done
