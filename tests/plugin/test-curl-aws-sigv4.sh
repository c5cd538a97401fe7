#!/usr/bin/env bash
# test-curl-aws-sigv4.sh: aws-sigv4= against a real S3-compatible server
# (s3rver 3, installed by scripts/deps): a private object is copied
# byte for byte with the right access key, an unknown key stops nbdkit
# at start-up with the server's 403, and writes are refused (the export
# is read-only even without -r: S3 has no partial PUT).  Without -r too
# reads stay pinned: an object replaced between two reads fails the
# second (412), never gives the new bytes.  s3rver checks the access
# key and requires x-amz-content-sha256, but not the signature itself.
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

# upload FILE URL: FILE uploaded with curl's own SigV4 signing.
upload ()
{
  local n st
  for ((n = 0; n < 100; n++)); do
    st=$(curl -s -o /dev/null -w '%{http_code}' \
           --aws-sigv4 aws:amz:us-east-1:s3 --user S3RVER:S3RVER \
           -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
           -T "$1" "$2" || :)
    [ "$st" = 200 ] && return 0
    sleep 0.1
  done
  cat "$tmp/s3rver.out" >&2
  fail "could not upload $1: $st"
}
make_random_file "$tmp/disk.img" $((5 * 1024 * 1024 + 3))
upload "$tmp/disk.img" "$url"

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

# Without -r, an object replaced between two reads: the second (past
# the head start's 12 MiB) fails with EIO, as with -r, never gives the
# new bytes.
make_random_file "$tmp/v1.img" $((24 * 1024 * 1024))
make_random_file "$tmp/v2.img" $((24 * 1024 * 1024))
for ro in ro rw; do
  opts=()
  [ "$ro" = ro ] && opts=(-r)
  upload "$tmp/v1.img" "${url%/*}/v.img"
  start_nbdkit "replaced_$ro" "${opts[@]}" "$PLUGIN" "${url%/*}/v.img" \
    "${sign[@]}"
  V1=$tmp/v1.img V2=$tmp/v2.img URL=${url%/*}/v.img nbdsh -u "$uri" -c '
import errno, os, subprocess
v1 = open(os.environ["V1"], "rb").read()
v2 = open(os.environ["V2"], "rb").read()
assert h.pread(65536, 0) == v1[:65536], "the first read is not v1"
subprocess.run(["curl", "-sf", "-o", "/dev/null", "--aws-sigv4",
                "aws:amz:us-east-1:s3", "--user", "S3RVER:S3RVER",
                "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                "-T", os.environ["V2"], os.environ["URL"]], check=True)
off = 20 * 1024 * 1024
try:
    got = h.pread(1 << 20, off)
except nbd.Error as e:
    assert e.errnum == errno.EIO, e.string
else:
    which = "v2" if got == v2[off:off + (1 << 20)] else "v1" \
        if got == v1[off:off + (1 << 20)] else "other"
    raise SystemExit("a read after the replacement returned %s bytes" % which)
h.shutdown()
' >"$tmp/replaced_$ro.out" 2>&1 ||
    { cat "$tmp/replaced_$ro.out" >&2; fail "($ro) a replaced object was read"; }
  stop_nbdkit "replaced_$ro"
  grep -q "412\|changed" "$tmp/replaced_$ro.err" ||
    fail "($ro) nbdkit did not say the object changed"
done
