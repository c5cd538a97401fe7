#!/usr/bin/env bash
# test-curl-cache-security.sh: a cache directory that others could write
# into is refused, and nothing planted in one makes nbdkit write outside
# it, hang, or serve a wrong byte.  nbdkit often runs as root: a planted
# symlink followed by an open with O_TRUNC, or a block file put under
# another block's name, would be the attack.
#  (a) Refused at start-up, nbdkit exiting non-zero with a message that
#      names cache-dir: DIR a symlink (to a good directory), a regular
#      file, a directory of mode 0777, 0770 or 0702, a directory under
#      a parent of mode 0777 or 0775 (no sticky bit), missing or there;
#      as root, DIR or a parent owned by another user.  Accepted: a
#      directory under a parent of mode 1777 (as /tmp), which is made
#      with mode 0700.
#  (b) In a filled object directory (a copy of one kept pristine for each
#      case), one thing planted, then a copy through it must be the
#      image's bytes within 20 s, every file outside it unchanged and no
#      new file made there:
#        symlink    a block file replaced by a symlink to a file outside
#        dangling   a block file deleted, a symlink to a path outside
#                   that does not exist put in its place
#        temp       a block file deleted, symlinks to paths outside put
#                   under names its temporary file may take (the real
#                   ones carry the host, PID and a count: never the same
#                   twice, and opened with O_EXCL)
#        claim      a block file deleted, a symlink to a path outside
#                   put as its claim (N.claim), and another block's
#                   claim a FIFO: neither is a live process's claim, so
#                   no read waits for them (nbdkit says "was claimed but
#                   did not come" when one waited its 5 s)
#        hardlink   a block file replaced by a hard link to a file
#                   outside (the block must be written anew, not in
#                   place)
#        fifo       a block file replaced by a FIFO (nobody writes it)
#        moved      a block file replaced by a copy of another block of
#                   the object
#        other      a block file replaced by the same block of another
#                   object in the same directory
#        key        a fresh directory whose object directory holds only
#                   a dangling symlink named key
#        objlink    the object directory a symlink to a directory
#                   outside
#        keytmp     a hard link to a file outside, planted under the
#                   name nbdkit writes the key under before renaming it
#                   (key.HOST.PID.tmp: a slow probe gives the time)
#  (c) Secrets: a url= with user:password@, a token in its query and a
#      presigned signature: none of them is written into the cache
#      directory (the key file shows the query as a digest).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin
requires nbdcopy

size=$((12 * 1024 * 1024 + 777))
# /k/ answers slowly (4 KiB at once, then 4 KiB a second): the probe
# takes a second, time to plant a file where nbdkit will write the key.
serve_image "$size" 'location /k/ { alias DIR/www/; limit_rate 4k; }'
make_random_file "$tmp/www/other.img" "$size"
other_url=http://127.0.0.1:$port/other.img

# ----------------------------------------------------------------------
# (a)

# refused NAME DIR: nbdkit with cache-dir=DIR must not start (if it
# does, --run makes it exit 0 at once), must not crash or hang, and
# must say why in a message "cache-dir: ...".
refused ()
{
  local name=$1 st=0
  timeout 20 "${NBDKIT[@]}" -f -U "$tmp/$name.sock" -r "$PLUGIN" "$url" \
          "cache-dir=$2" --run 'exit 0' </dev/null >"$tmp/$name.out" \
          2>"$tmp/$name.err" || st=$?
  if [ "$st" -eq 0 ]; then
    case_done "$name" "BAD: nbdkit started"
  elif [ "$st" -ge 124 ]; then
    case_done "$name" "BAD: nbdkit hung or crashed (status $st)"
  elif ! grep -q "cache-dir: " "$tmp/$name.err"; then
    case_done "$name" "BAD: refused without a message \"cache-dir: ...\""
  else
    case_done "$name" "refused: $(grep -m1 "cache-dir: " "$tmp/$name.err" |
                                  cut -c1-150)"
  fi
}

mkdir -m 700 "$tmp/good"
ln -s "$tmp/good" "$tmp/link"
refused dir_symlink "$tmp/link"
: >"$tmp/plain"
chmod 600 "$tmp/plain"
refused dir_file "$tmp/plain"
for m in 777 770 702; do
  mkdir -m "$m" "$tmp/mode$m"
  chmod "$m" "$tmp/mode$m"          # whatever the umask
  refused "dir_mode$m" "$tmp/mode$m"
done
for m in 777 775; do
  mkdir "$tmp/parent$m"
  chmod "$m" "$tmp/parent$m"
  refused "parent${m}_new" "$tmp/parent$m/cache"
  mkdir -m 700 "$tmp/parent$m/there"
  refused "parent${m}_there" "$tmp/parent$m/there"
done
if [ "$(id -u)" -eq 0 ] && id nobody >/dev/null 2>&1; then
  mkdir -m 700 "$tmp/theirs"
  chown nobody "$tmp/theirs"
  refused dir_owner "$tmp/theirs"
  mkdir -m 755 "$tmp/theirparent"
  mkdir -m 700 "$tmp/theirparent/cache"
  chown nobody "$tmp/theirparent"
  refused parent_owner "$tmp/theirparent/cache"
else
  echo "cases owner, parent_owner: not run (they need root)"
fi

# A parent with the sticky bit, as /tmp: accepted, DIR made 0700.
mkdir "$tmp/sticky"
chmod 1777 "$tmp/sticky"
start_nbdkit sticky -r "$PLUGIN" "$url" "cache-dir=$tmp/sticky/cache"
timeout "$client_timeout" nbdcopy "$uri" "$tmp/sticky.out" ||
  problem "(sticky) nbdcopy failed"
stop_nbdkit sticky
if ! cmp -s "$image" "$tmp/sticky.out"; then
  case_done sticky "BAD: the copy differs from the image"
elif [ "$(stat -c %a "$tmp/sticky/cache" 2>/dev/null)" != 700 ]; then
  case_done sticky "BAD: cache-dir made with mode $(stat -c %a \
                                                   "$tmp/sticky/cache" 2>&1)"
else
  case_done sticky "accepted under a sticky parent, made with mode 0700"
fi
rm -f "$tmp/sticky.out"

# ----------------------------------------------------------------------
# (b) The pristine directory: both objects wholly cached.
# copy NAME URL FILE: a copy through URL with cache-dir=$tmp/pristine
# must be FILE's bytes.
copy ()
{
  local name=$1
  start_nbdkit "$name" -r -v "$PLUGIN" "$2" "cache-dir=$tmp/pristine"
  timeout "$client_timeout" nbdcopy "$uri" "$tmp/$name.out" ||
    fail "($name) nbdcopy failed"
  stop_nbdkit "$name"
  cmp -s "$3" "$tmp/$name.out" || fail "($name) the copy differs"
  rm -f "$tmp/$name.out"
}

# objects: the object directories of $tmp/pristine, one a line.
objects ()
{
  find "$tmp/pristine" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' |
    grep -E '^[0-9a-f]{64}$' || :
}

copy fill "$url" "$image"
hash=$(objects)
[[ $hash =~ ^[0-9a-f]{64}$ ]] ||
  fail "the cache directory holds '$hash', not one object directory"
copy fill_other "$other_url" "$tmp/www/other.img"
hash_other=$(objects | grep -vx "$hash" || :)
[[ $hash_other =~ ^[0-9a-f]{64}$ ]] ||
  fail "the second object's directory is '$hash_other'"
for k in 3 5 7 8 9; do
  [ -f "$tmp/pristine/$hash/$k.blk" ] ||
    fail "no $k.blk in the object directory after a whole copy"
done

# Outside: victims with known contents, and paths that must not come
# to exist.  Its listing before the cases is compared after each.
mkdir "$tmp/outside"
for v in v1 v2 v3 v4 v5 v6; do
  make_random_file "$tmp/outside/$v" 1052672
done
mkdir -m 700 "$tmp/outside/dir"
outside_list ()
{
  (cd "$tmp/outside" && find . -printf '%p %s %T@\n' | sort &&
     sha256sum v*)
}
outside_list >"$tmp/outside.before"

plant_symlink ()   { ln -sf "$tmp/outside/v1" "$1/3.blk"; }
plant_dangling ()  { rm "$1/5.blk"; ln -s "$tmp/outside/new-blk" "$1/5.blk"; }
plant_temp ()
{
  local n
  rm "$1/5.blk"
  for n in 5.tmp 5.blk.tmp .5.blk.tmp 5.blk.1.tmp; do
    ln -s "$tmp/outside/new-$n" "$1/$n"
  done
}
plant_claim ()
{
  rm "$1/5.blk" "$1/6.blk"
  ln -s "$tmp/outside/new-claim" "$1/5.claim"
  mkfifo "$1/6.claim"
}
plant_hardlink ()  { rm "$1/7.blk"; ln "$tmp/outside/v2" "$1/7.blk"; }
plant_fifo ()      { rm "$1/8.blk"; mkfifo "$1/8.blk"; }
plant_moved ()     { cp "$1/5.blk" "$1/7.blk"; }
plant_other ()     { cp "$1/../$hash_other/9.blk" "$1/9.blk"; }
plant_key ()
{
  rm -rf "$1"
  mkdir -m 700 "$1"
  ln -s "$tmp/outside/new-key" "$1/key"
  ln -s "$tmp/outside/new-0" "$1/0.blk"
}
plant_objlink ()
{
  rm -rf "$1"
  ln -s "$tmp/outside/dir" "$1"
}

# whole DIR K: DIR/K.blk is a regular file of its own (not a link, no
# other name) holding block K of the image after its 4096-byte header.
whole ()
{
  local f=$1/$2.blk
  [ -f "$f" ] && [ ! -L "$f" ] && [ "$(stat -c %h "$f")" -eq 1 ] &&
    cmp -s <(tail -c +4097 "$f") \
           <(dd if="$image" bs=1M skip="$2" count=1 status=none)
}

# Each case: its name, and the blocks whose files must be whole after
# the copy (what was planted there was not served but rewritten).
cases=(
  "symlink  | 3"
  "dangling | 5"
  "temp     | 5"
  "claim    | 5 6"
  "hardlink | 7"
  "fifo     | 8"
  "moved    | 7"
  "other    | 9"
  "key      | 0 12"
  "objlink  |"
)
for row in "${cases[@]}"; do
  case_row "$row" name blocks
  d=$tmp/d-$name
  cp -a "$tmp/pristine" "$d"
  "plant_$name" "$d/$hash"
  start_nbdkit "$name" -r -v "$PLUGIN" "$url" "cache-dir=$d"
  t0=$EPOCHREALTIME
  st=0
  timeout 20 nbdcopy "$uri" "$tmp/$name.out" || st=$?
  secs=$(seconds_since "$t0")
  stop_pid "$nbdkit_pid"
  outside_list >"$tmp/outside.after"
  notwhole=
  for k in $blocks; do
    whole "$d/$hash" "$k" || notwhole+=" $k.blk"
  done
  if [ "$st" -eq 124 ]; then
    case_done "$name" "BAD: the copy hung (stopped after 20 s)"
  elif [ "$st" -ne 0 ]; then
    case_done "$name" "BAD: nbdcopy failed ($st)"
  elif ! cmp -s "$image" "$tmp/$name.out"; then
    case_done "$name" "BAD: the copy differs from the image"
  elif ! cmp -s "$tmp/outside.before" "$tmp/outside.after"; then
    case_done "$name" "BAD: files outside changed or appeared: $(
              diff "$tmp/outside.before" "$tmp/outside.after" |
                grep '^[<>]' | tr '\n' ' ' | cut -c1-300)"
  elif [ "$_status" -ne 0 ]; then
    case_done "$name" "BAD: nbdkit exited with status $_status"
  elif grep -q "was claimed but did not come" "$tmp/$name.err"; then
    case_done "$name" "BAD: a read waited for a planted claim ($secs s)"
  elif [ -n "$notwhole" ]; then
    case_done "$name" "BAD: not rewritten as whole blocks:$notwhole"
  else
    case_done "$name" "byte-exact in $secs s, nothing outside touched$(
              [ -z "$blocks" ] || echo ", rewritten: $blocks")"
  fi
  rm -f "$tmp/$name.out"
done

# keytmp: nbdkit writes the key under the name key.HOST.PID.tmp, then
# renames it to key.  A hard link to a file outside planted under that
# name (nbdkit's PID is known once it runs, its probe is slow here) must
# not be truncated or written.  A first run finds the object directory.
start_nbdkit keylearn -r "$PLUGIN" "http://127.0.0.1:$port/k/disk.img" \
             "cache-dir=$tmp/dk"
stop_nbdkit keylearn
hk=$(cd "$tmp/dk" && ls)
host=$(uname -n | tr -c 'A-Za-z0-9-\n' _)
rm -f "$tmp/dk/$hk"/*
( exec "${NBDKIT[@]}" -f --exit-with-parent -U "$tmp/keytmp.sock" \
       -P "$tmp/keytmp.pid" -r "$PLUGIN" "http://127.0.0.1:$port/k/disk.img" \
       "cache-dir=$tmp/dk" ) 2>"$tmp/keytmp.err" &
pid=$!
_pids+=("$pid")
ln "$tmp/outside/v3" "$tmp/dk/$hk/key.$host.$pid.tmp"
early=no
[ ! -e "$tmp/dk/$hk/key" ] || early=yes
for ((n = 0; n < ready_tries; n++)); do
  [ ! -s "$tmp/keytmp.pid" ] && _alive "$pid" || break
  sleep 0.1
done
stop_pid "$pid"
outside_list >"$tmp/outside.after"
if [ "$early" = yes ]; then
  case_done keytmp "not run: nbdkit wrote its key before the plant"
elif ! cmp -s "$tmp/outside.before" "$tmp/outside.after"; then
  got=$(head -c 60 "$tmp/outside/v3" | tr -c '[:print:]' .)
  case_done keytmp "BAD: the file outside was truncated and written: $got"
else
  case_done keytmp "the outside file kept its bytes"
fi

# ----------------------------------------------------------------------
# (c) No secret of the URL goes to disk.
surl="http://u:pw-s3cr1t@127.0.0.1:$port/disk.img?token=tok-s3cr1t"
surl="$surl&X-Amz-Expires=600&X-Amz-Signature=sig-s3cr1t"
timeout "$client_timeout" "${NBDKIT[@]}" -r -U - "$PLUGIN" "$surl" \
  cache-dir="$tmp/ds" --run 'nbdcopy "$uri" null:' 2>"$tmp/secrets.err" ||
  fail "(c) the copy failed: $(tail -3 "$tmp/secrets.err")"
[ -n "$(find "$tmp/ds" -name '*.blk')" ] || fail "(c) nothing was kept"
if grep -rl s3cr1t "$tmp/ds" >/dev/null; then
  case_done secrets "BAD: a secret is in $(grep -rl s3cr1t "$tmp/ds")"
else
  case_done secrets "no password, token or signature in the directory"
fi

cases_end
check_problems
