# Shell functions the bench scripts share (sourced, not run).  The
# caller defines die () and, for make_image and make_cert, log () and
# $tmp.
#
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

# check_int NAME VALUE LO HI: VALUE is a whole number in LO..HI.
check_int ()
{
  local name=$1 value=$2 lo=$3 hi=$4
  [[ "$value" =~ ^[0-9]+$ ]] ||
    die "$name=$value: not a whole number"
  if [ "$value" -lt "$lo" ] || [ "$value" -gt "$hi" ]; then
    die "$name=$value: out of range $lo..$hi"
  fi
}

# stop_pid PID: SIGTERM, up to 10 s to go, then SIGKILL; reaps it.
stop_pid ()
{
  local pid=$1 i
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for i in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# A loopback TCP port that is free now (the caller retries on a race).
free_port ()
{
  python3 -c 'import socket
s = socket.socket ()
s.bind (("127.0.0.1", 0))
print (s.getsockname ()[1])'
}

# make_image PATH MIB: MIB MiB of random data (nothing compresses,
# nothing is sparse), made once and kept.
make_image ()
{
  local path=$1 mib=$2
  if [ -f "$path" ] && [ "$(stat -c %s "$path")" -eq $((mib * 1048576)) ]
  then
    return 0
  fi
  log "making $path ($mib MiB of random data, cached for next time)"
  head -c $((mib * 1048576)) /dev/urandom > "$path.tmp.$$"
  chmod 644 "$path.tmp.$$"
  mv -f "$path.tmp.$$" "$path"
}

# make_cert: a self-signed certificate for localhost and 127.0.0.1 in
# $tmp/cert.pem (key $tmp/key.pem), readable by nginx's workers; sets
# $ca to it.
make_cert ()
{
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    -keyout "$tmp/key.pem" -out "$tmp/cert.pem" > "$tmp/openssl.log" 2>&1 ||
    { cat "$tmp/openssl.log" >&2; die "openssl could not make a certificate"; }
  chmod 644 "$tmp/key.pem" "$tmp/cert.pem"
  ca=$tmp/cert.pem
}

elapsed ()
{
  awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f", b - a }'
}

# plugin_connections SO: the connections= default that the plugin's
# --help names (empty if it names none).
plugin_connections ()
{
  nbdkit "$1" --help 2>/dev/null |
    sed -n 's/^connections=.*(default \([0-9]*\)).*/\1/p' | head -1
}

# use_helpers NAME...: the programs of helpers/ a benchmark starts
# (linkem, stream-server, relay, pipe-driver, first-read) are built by
# make with the rest of the project, under its warnings; no bench script
# compiles them.  They are taken from BUILDDIR/helpers/ (BUILDDIR as in
# scripts/build: relative to the top of the tree, default build).  Sets
# $helpers to that directory, or dies naming the command that builds
# what is missing.
use_helpers ()
{
  local top dir name note= missing=()
  top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  dir=${BUILDDIR:-build}
  case "$dir" in
    /*) ;;
    *) dir=$top/$dir ;;
  esac
  for name in "$@"; do
    [ -x "$dir/helpers/$name" ] || missing+=("$name")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    case " ${missing[*]} " in
      *" first-read "*)
        note=" (first-read only when configure finds libnbd-dev)" ;;
    esac
    die "not built: ${missing[*]} (in $dir/helpers); build with:" \
        "cd $top && BUILDDIR=${BUILDDIR:-build} bash scripts/build$note"
  fi
  helpers=$dir/helpers
}
