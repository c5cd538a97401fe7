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
for mode in normal merge-ranges multipart-wrong-part multipart; do
  fault_export "$mode" "$size" connections=$connections
  random_reads "$uri" "$tmp/disk.img" 1500
  stop_nbdkit ro
  stop_pid "$fault_pid"
  mv "$tmp/fault.log" "$tmp/fault-$mode.log"

  # range= has a comma only in a multi-range request.
  multi=$(grep -c '^GET .* range=bytes=[0-9-]*,' "$tmp/fault-$mode.log" || :)
  echo "$mode: $multi multi-range requests"
  case $mode in
    multipart)
      [ "$multi" -ge 10 ] ||
        fail "$mode: only $multi multi-range requests: multipart answers" \
             "were not used" ;;
    *)
      [ "$multi" -ge 1 ] || fail "$mode: no multi-range request was made"
      [ "$multi" -le "$connections" ] ||
        fail "$mode: $multi multi-range requests, more than one per" \
             "connection after the first bad answer" ;;
  esac
done
