#!/usr/bin/env bash
# test-curl-multi-range.sh: reads that wait together are asked for in one
# multi-range request, and nginx's multipart/byteranges answers give every
# read its own bytes: random, odd-sized, duplicate, adjacent, overlapping
# and tail reads, 64 in flight.  Each request's ranges are in order,
# separate (touching reads are merged), and inside the object; at least
# 10 requests carry several ranges.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

size=$((8 * 1024 * 1024 + 777))
# 4 connections for 64 reads in flight, so that reads wait together.
export_image ro "$size" -r connections=4
random_reads "$uri" "$image" 3000
stop_nbdkit ro

assert_nginx_ranges "$size" 10
