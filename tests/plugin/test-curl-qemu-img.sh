#!/usr/bin/env bash
# test-curl-qemu-img.sh: qemu-img, a client with its own NBD code, sees
# the right size and converts the export to the served bytes.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires qemu-img --version

# A multiple of 512: qemu-img rounds an export up to 512 bytes.
size=$((4 * 1024 * 1024 + 3 * 512))
export_image ro "$size" -r
timeout "$client_timeout" qemu-img info "$uri" >"$tmp/info.out"
grep -qE "virtual size: .*\($size bytes\)" "$tmp/info.out" || {
  cat "$tmp/info.out" >&2
  fail "qemu-img info does not show $size bytes"
}
timeout "$client_timeout" qemu-img convert -f raw "$uri" -O raw "$tmp/out.img"
stop_nbdkit ro
assert_same_file "$image" "$tmp/out.img"
