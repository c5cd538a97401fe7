#!/usr/bin/env bash
# test-curl-multi-range-fallback.sh: servers that answer a multi-range
# request with something other than exactly the parts asked for (the whole
# object with 200, like S3; one merged range; a part for the wrong range)
# cost at most one such request per connection: the plugin then asks one
# range per request, and every read still gets its own bytes.  A server
# that answers multipart/byteranges correctly but unlike nginx (quoted
# boundary, preamble, parts in reverse order) keeps getting multi-range
# requests.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

size=$((4 * 1024 * 1024 + 321))
connections=4

# The cases, one a row: NAME | MODE | EXPECT
#   MODE    the fault server's --mode (helpers/fault-server.py)
#   EXPECT  kept: at least 10 multi-range requests (the answers are
#           used);
#           fell-back: at least one multi-range request, and no more
#           than one per connection (the first bad answer ends them)
# In every case 1500 random reads through nbdkit give the object's
# bytes.
cases=(
  "normal               | normal               | fell-back"
  "merge-ranges         | merge-ranges         | fell-back"
  "multipart-wrong-part | multipart-wrong-part | fell-back"
  "multipart            | multipart            | kept"
)

for row in "${cases[@]}"; do
  case_row "$row" name mode expect
  echo "case $name: mode $mode, expect $expect"
  fault_export "$mode" "$size" connections=$connections
  random_reads "$uri" "$tmp/disk.img" 1500
  stop_nbdkit ro
  stop_pid "$fault_pid"
  mv "$tmp/fault.log" "$tmp/fault-$name.log"

  # range= has a comma only in a multi-range request.
  multi=$(grep -c '^GET .* range=bytes=[0-9-]*,' "$tmp/fault-$name.log" || :)
  result="$multi multi-range requests"
  case $expect in
    kept)
      [ "$multi" -ge 10 ] ||
        result="BAD: only $result: multipart answers were not used" ;;
    fell-back)
      if [ "$multi" -lt 1 ]; then
        result="BAD: no multi-range request was made"
      elif [ "$multi" -gt "$connections" ]; then
        result="BAD: $result, more than one per connection after"
        result="$result the first bad answer"
      fi ;;
    *) result="BAD: unknown EXPECT '$expect'" ;;
  esac
  case_done "$name" "$result"
done
cases_end
