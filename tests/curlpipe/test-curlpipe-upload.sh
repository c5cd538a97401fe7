#!/usr/bin/env bash
# test-curlpipe-upload.sh: curlpipe PUTs standard input to nginx (dav
# PUT) byte for byte: 256 MiB from a blocking pipe and from a
# non-blocking pipe (both sent chunked), from a regular file (sent with
# its Content-Length, from the current offset), and /dev/null (an empty
# body).  nginx's log shows the framing each one used.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_curlpipe

start_nginx_put
url=http://127.0.0.1:$port/put
make_random_file "$tmp/in.img" $((256 * 1024 * 1024))

# A blocking pipe.
cat "$tmp/in.img" | curlpipe -sf "$url/pipe.img"
assert_same_file "$tmp/in.img" "$tmp/www/pipe.img"

# A non-blocking pipe: curlpipe must not take EAGAIN for an error or
# end of file, nor spin on it.
cat "$tmp/in.img" | "$PYTHON" -c '
import fcntl, os, sys
fcntl.fcntl(0, fcntl.F_SETFL, fcntl.fcntl(0, fcntl.F_GETFL) | os.O_NONBLOCK)
os.execv(sys.argv[1], sys.argv[1:])' "$CURLPIPE" -sf "$url/nonblock.img"
assert_same_file "$tmp/in.img" "$tmp/www/nonblock.img"

# A regular file, 1000 bytes of it already read: the rest is the body.
{
  dd bs=1000 count=1 of=/dev/null status=none
  curlpipe -sf "$url/file.img"
} < "$tmp/in.img"
tail -c +1001 "$tmp/in.img" > "$tmp/rest.img"
assert_same_file "$tmp/rest.img" "$tmp/www/file.img"

curlpipe -sf "$url/empty.img" < /dev/null
[ -f "$tmp/www/empty.img" ] && [ ! -s "$tmp/www/empty.img" ] ||
  fail "PUT from /dev/null did not make an empty file"

# Log: CONNECTION METHOD RANGE STATUS BODY_BYTES URI te=TE cl=CL
framing ()
{
  awk -v uri="/put/$1" '$2 == "PUT" && $6 == uri { print $4, $7, $8 }' \
      "$tmp/access.log"
}
for f in pipe nonblock empty; do
  [ "$(framing $f.img)" = "201 te=chunked cl=-" ] ||
    fail "$f.img: expected one chunked PUT answered 201, log: $(framing $f.img)"
done
[ "$(framing file.img)" = "201 te=- cl=$(( 256 * 1024 * 1024 - 1000 ))" ] ||
  fail "file.img: expected Content-Length, log: $(framing file.img)"
