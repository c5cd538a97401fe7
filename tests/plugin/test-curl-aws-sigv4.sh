#!/usr/bin/env bash
# test-curl-aws-sigv4.sh: aws-sigv4= against a real S3-compatible server
# (s3rver 3, installed by scripts/deps): a private object is copied
# byte for byte with the right access key, an unknown key stops nbdkit
# at start-up with the server's 403, and writes are refused (the export
# is read-only even without -r: S3 has no partial PUT).  s3rver checks
# the access key and requires x-amz-content-sha256, but not the
# signature itself.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy
requires_nbdsh
s3rver=${S3RVER_DIR:-/var/tmp/nbdkit-curl-s3rver}/node_modules/.bin/s3rver
[ -x "$s3rver" ] || skip "s3rver is not installed (scripts/deps installs it)"

s3_port=$(free_port)
mkdir -p "$tmp/s3"
"$s3rver" -d "$tmp/s3" --address 127.0.0.1 --port "$s3_port" \
  --configure-bucket disks --silent >"$tmp/s3rver.out" 2>&1 &
_pids+=($!)
sign=(aws-sigv4=aws:amz:us-east-1:s3 user=S3RVER password=S3RVER)
url=http://127.0.0.1:$s3_port/disks/disk.img

# Upload the object with curl's own SigV4 signing.
make_random_file "$tmp/disk.img" $((5 * 1024 * 1024 + 3))
for ((n = 0; n < 100; n++)); do
  st=$(curl -s -o /dev/null -w '%{http_code}' \
         --aws-sigv4 aws:amz:us-east-1:s3 --user S3RVER:S3RVER \
         -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
         -T "$tmp/disk.img" "$url" || :)
  [ "$st" = 200 ] && break
  sleep 0.1
done
[ "$st" = 200 ] || { cat "$tmp/s3rver.out" >&2; fail "could not upload: $st"; }

start_nbdkit s3 -r "$PLUGIN" "$url" "${sign[@]}"
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
stop_nbdkit s3
assert_same_file "$tmp/disk.img" "$tmp/out.img"

expect_nbdkit_fails badkey -r "$PLUGIN" "$url" \
  aws-sigv4=aws:amz:us-east-1:s3 user=NOSUCHKEY password=S3RVER
assert_grep_i "$tmp/badkey.err" "403"

# Without -r: the export is still read-only.
start_nbdkit rw "$PLUGIN" "$url" "${sign[@]}"
nbdsh -u "$uri" -c '
import errno
assert h.is_read_only(), "the export is writable"
try:
    h.pwrite(b"x" * 512, 0)
except nbd.Error as e:
    print("write refused:", e.string)
else:
    raise SystemExit("a write succeeded")
h.shutdown()
' || fail "writes were not refused"
stop_nbdkit rw
