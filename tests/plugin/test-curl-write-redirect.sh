#!/usr/bin/env bash
# test-curl-write-redirect.sh: a write (PUT) to a URL that Apache
# redirects.  307 and 308 keep the method and the body (RFC 9110
# 15.4.8, 15.4.9): the same bytes are sent again to the new location,
# land in the target file at their offset, and the write is reported
# done.  301, 302 and 303 let a client turn the request into a GET
# (RFC 9110 15.4.2-15.4.4), which for a write would drop the data and
# report success: the NBD write must fail, the file stay unchanged, and
# Apache see no GET because of that write.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires_nbdsh

[ -f /usr/lib/apache2/modules/mod_alias.so ] ||
  skip "Apache mod_alias is not installed"

# mod_alias answers every method, PUT and HEAD too, with these statuses;
# /disk.img itself is served by mod_dav, which takes partial PUT.
rules='LoadModule alias_module /usr/lib/apache2/modules/mod_alias.so'
for st in 301 302 303 307 308; do
  rules+="
Redirect $st /r$st/disk.img http://127.0.0.1:PORT/disk.img"
done
start_apache "$rules"

size=$((128 * 1024 + 4321))
make_random_file "$tmp/disk.img" "$size"

# fresh_target: the served file back to the original bytes.
fresh_target ()
{
  cp "$tmp/disk.img" "$tmp/dav/disk.img"
  chmod a+rw "$tmp/dav/disk.img"
}

# 307 and 308: every write reaches /disk.img with its exact range, after
# a redirected PUT for each, and reads back through the plugin.
for st in 307 308; do
  fresh_target
  cp "$tmp/disk.img" "$tmp/expected.img"
  : >"$tmp/dav-access.log"
  start_nbdkit "w$st" "$PLUGIN" "http://127.0.0.1:$dav_port/r$st/disk.img"
  writes="0:512 4090:12 $((size - 1000)):1000"
  pattern_writes "$uri" "$tmp/expected.img" "$writes"
  stop_nbdkit "w$st"
  cp "$tmp/dav-access.log" "$tmp/log$st.txt"

  assert_same_file "$tmp/expected.img" "$tmp/dav/disk.img"
  for w in $writes; do
    off=${w%:*} n=${w#*:}
    cr="bytes $off-$((off + n - 1))/\\*"
    grep -qE "^PUT /r$st/disk.img - $cr $st\$" "$tmp/log$st.txt" || {
      cat "$tmp/log$st.txt" >&2
      fail "$st: no redirected PUT of $w"
    }
    grep -qE "^PUT /disk.img - $cr 20[0-9]\$" "$tmp/log$st.txt" || {
      cat "$tmp/log$st.txt" >&2
      fail "$st: the PUT of $w was not sent again to the new location"
    }
  done
done

# 301, 302 and 303: the write fails; nothing reaches the file.
for st in 301 302 303; do
  fresh_target
  before=$(sha "$tmp/dav/disk.img")
  : >"$tmp/dav-access.log"
  start_nbdkit "w$st" "$PLUGIN" "http://127.0.0.1:$dav_port/r$st/disk.img"
  # The probe's ranged GET ends nbdkit's start-up, but Apache logs a
  # request only after answering it: wait for that line, so that the
  # log from the mark on holds only what the write caused.
  for ((i = 0; i < ready_tries; i++)); do
    grep -qE '^GET /disk.img bytes=[0-9]+-[0-9]+ - 206$' \
         "$tmp/dav-access.log" && break
    sleep 0.1
  done
  [ "$i" -lt "$ready_tries" ] || {
    cat "$tmp/dav-access.log" >&2
    fail "$st: the probe's ranged GET of /disk.img is not in the log"
  }
  mark=$(wc -l <"$tmp/dav-access.log")
  nbdsh -u "$uri" -c '
try:
    h.pwrite(b"\x5a" * 4096, 8192)
except nbd.Error as e:
    print("write failed:", e.string)
else:
    raise SystemExit("the write was reported done")
' >"$tmp/nbdsh$st.out" 2>&1 || {
    cat "$tmp/nbdsh$st.out" "$tmp/w$st.err" >&2
    fail "$st: a redirected write was not an error"
  }
  stop_nbdkit "w$st"
  tail -n +"$((mark + 1))" "$tmp/dav-access.log" >"$tmp/log$st.txt"

  [ "$(sha "$tmp/dav/disk.img")" = "$before" ] ||
    fail "$st: the file changed"
  grep -qE "^PUT /r$st/disk.img - bytes 8192-12287/\\* $st\$" \
       "$tmp/log$st.txt" || {
    cat "$tmp/log$st.txt" >&2
    fail "$st: Apache did not see (and redirect) the PUT"
  }
  ! grep -q '^GET ' "$tmp/log$st.txt" || {
    cat "$tmp/log$st.txt" >&2
    fail "$st: the redirected write was turned into a GET"
  }
done
