# tests/functions.sh: the parts every test shares.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.
#
# Sourced (never run) by the tests in tests/*/, which use `set -e`.  On sourcing
# it makes a private temporary directory $tmp and installs a trap that, on
# any exit, stops every process the test started (by the PID it recorded,
# never by name), fails the test if a sanitizer wrote a report, prints the
# tail of the logs when the test failed, and removes $tmp.
#
# Servers run in the foreground as children of the test shell (nginx with
# "daemon off", apache2 -DFOREGROUND, nbdkit -f), so the PID we hold is the
# PID of the process to stop and cannot be recycled before we reap it.
#
# Exit status 77 means SKIP: only for a missing tool.  CI installs every
# tool, so CI skips nothing.

# make check exports these (tests/Makefile.am); srcdir is tests/, the
# folder of this file.  The defaults let a test run by hand from an
# in-tree build: cd tests && ./plugin/test-curl-info.sh
: "${srcdir:=$(dirname "$0")/..}"
abs_srcdir=$(cd "$srcdir" && pwd)
: "${abs_top_srcdir:=$(cd "$abs_srcdir/.." && pwd)}"
: "${abs_top_builddir:=$abs_top_srcdir}"
: "${PLUGIN:=$abs_top_builddir/plugins/curl/.libs/nbdkit-curl-plugin.so}"
: "${CURLPIPE:=$abs_top_builddir/curlpipe/curlpipe}"
# The servers and link emulator the tests start (helpers/): the Python
# ones run from the source tree, the C ones are built by make.
helpers_srcdir=$abs_top_srcdir/helpers
helpers_builddir=$abs_top_builddir/helpers
: "${ASAN_RUNTIME:=}"
export LC_ALL=C

# Everything a test runs is bounded in time.  These are the ceilings for
# one client command and for a server to become ready.
client_timeout=60
ready_tries=100                 # times 0.1 s

fail ()
{
  echo "FAIL: $(basename "$0"): $*" >&2
  exit 1
}

skip ()
{
  echo "SKIP: $(basename "$0"): $*" >&2
  exit 77
}

# A test of many independent cases reports every case that fails, not
# only the first: problem MESSAGE notes one and carries on, and
# check_problems (at the end) fails the test if any were noted.
_problems=0

problem ()
{
  local msg="$*"
  echo "FAIL: $(basename "$0"): ${msg//$'\n'/ | }" >&2
  _problems=$((_problems + 1))
}

check_problems ()
{
  [ "$_problems" -eq 0 ] || fail "$_problems problem(s), listed above"
}

# requires CMD [ARGS...]: skip unless CMD exists (one word) or the whole
# command line succeeds (several words), e.g. `requires qemu-img --version`.
requires ()
{
  if [ $# -eq 1 ]; then
    command -v "$1" >/dev/null 2>&1 || skip "$1 is not installed"
  else
    "$@" >/dev/null 2>&1 || skip "'$*' failed"
  fi
}

# The plugin must exist: make check builds it first, so its absence is a
# failure, not a skip.
requires_plugin ()
{
  [ -f "$PLUGIN" ] || fail "plugin not built: $PLUGIN"
  requires nbdkit
}

requires_curlpipe ()
{
  [ -x "$CURLPIPE" ] || fail "curlpipe not built: $CURLPIPE"
}

# curlpipe ARGS...: the built curlpipe, bounded in time.
curlpipe ()
{
  timeout "$client_timeout" "$CURLPIPE" "$@"
}

# The python3 that can `import nbd` (python3-libnbd).  nbdsh runs whatever
# python3 comes first in $PATH, which on a machine with pyenv or a virtualenv
# is not the system one that has the module, so we find it ourselves.
PYTHON_NBD=
for _p in python3 /usr/bin/python3; do
  if "$_p" -c 'import nbd' >/dev/null 2>&1; then
    PYTHON_NBD=$_p
    break
  fi
done
unset _p

# The fault server and the port picker need only the standard library.
PYTHON=python3
[ ! -x /usr/bin/python3 ] || PYTHON=/usr/bin/python3

requires_nbdsh ()
{
  [ -n "$PYTHON_NBD" ] || skip "python3-libnbd (nbdsh) is not installed"
}

# nbdsh ARGS...: nbdsh with the right python3, bounded in time.  (A
# function, so `timeout nbdsh` would run the other one: do not.)
nbdsh ()
{
  timeout "$client_timeout" "$PYTHON_NBD" -m nbd "$@"
}

# seconds_since T0: the time since $EPOCHREALTIME was T0, in seconds
# with one decimal.
seconds_since ()
{
  awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'
}

# term_timed PID TENTHS: SIGTERM to PID, then wait at most TENTHS tenths
# of a second for it to exit (it may still be running after); $secs is
# how long that took.
term_timed ()
{
  local pid=$1 max=$2 n t0=$EPOCHREALTIME

  kill -TERM "$pid"
  for ((n = 0; n < max; n++)); do
    _alive "$pid" || break
    sleep 0.1
  done
  secs=$(seconds_since "$t0")
}

# slow_reads N: N reads of 4 KiB from $uri, 64 KiB apart and 0.5 s apart
# (so spread over N/2 s), each compared with $image's bytes.
slow_reads ()
{
  FILE=$image N=$1 nbdsh -u "$uri" -c '
import os, time
data = open(os.environ["FILE"], "rb").read()
for i in range(int(os.environ["N"])):
    off = i * 65536
    assert h.pread(4096, off) == data[off:off + 4096], "read %d differs" % i
    time.sleep(0.5)
h.shutdown()
'
}

# ----------------------------------------------------------------------
# Tables of cases: a test lists its cases as rows "NAME | A | B" and runs
# each in one loop.
#   case_row ROW VAR...   the row's fields, split at "|" and trimmed, into
#                         the variables named (missing fields: empty)
#   case_done NAME RESULT prints "case NAME ok: RESULT", or FAIL when
#                         RESULT starts with "BAD", and counts it
#   cases_end             fails the test naming every case that failed
case_row ()
{
  local row=$1 var v i=0
  local -a fields
  shift
  IFS='|' read -r -a fields <<<"$row"
  for var in "$@"; do
    v=${fields[i]-}
    i=$((i + 1))
    v=${v#"${v%%[! ]*}"}
    printf -v "$var" %s "${v%"${v##*[! ]}"}"
  done
}

_bad_cases=()
case_done ()
{
  case $2 in
    BAD*) echo "case $1 FAIL: $2"; _bad_cases+=("$1") ;;
    *) echo "case $1 ok: $2" ;;
  esac
}

cases_end ()
{
  [ ${#_bad_cases[@]} -eq 0 ] ||
    fail "${#_bad_cases[@]} cases ended badly: ${_bad_cases[*]}"
}

# ----------------------------------------------------------------------
# Private directory, process bookkeeping, cleanup.

# The servers' workers run as an unprivileged user, so the directory must
# be world-readable (and so must every directory above it: /tmp is).
tmp=$(mktemp -d "${TMPDIR:-/tmp}/nbdkit-curl-test.XXXXXX")
chmod 755 "$tmp"

_pids=()

_alive ()
{
  # A child that exited but was not reaped yet is a zombie: not alive.
  [ -r "/proc/$1/stat" ] || return 1
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

_forget_pid ()
{
  local i
  for i in "${!_pids[@]}"; do
    [ "${_pids[i]}" != "$1" ] || unset '_pids[i]'
  done
}

# stop_pid PID: TERM, wait up to 5 s, then KILL; reap it.  Only ever
# called with PIDs this test started.  Leaves the exit status in $_status.
# Tenths of a second a process gets to exit after SIGTERM: ThreadSanitizer
# makes nbdkit's shutdown with many connections several times slower.
stop_tries=50
[ -z "${TSAN_RUNTIME:-}" ] || stop_tries=300

stop_pid ()
{
  local pid=$1 n
  _status=0
  if _alive "$pid"; then
    kill -TERM "$pid" 2>/dev/null || :
    for ((n = 0; n < stop_tries; n++)); do
      _alive "$pid" || break
      sleep 0.1
    done
    if _alive "$pid"; then
      echo "$(basename "$0"): PID $pid ignored SIGTERM, killing it" >&2
      kill -KILL "$pid" 2>/dev/null || :
    fi
  fi
  wait "$pid" 2>/dev/null || _status=$?
  _forget_pid "$pid"
}

_cleanup ()
{
  local status=$? i f idx
  set +e
  # Stop in the reverse order of starting (nbdkit before its server).
  # The array has holes where stop_pid forgot a PID.
  idx=("${!_pids[@]}")
  for ((i = ${#idx[@]} - 1; i >= 0; i--)); do
    stop_pid "${_pids[idx[i]]}"
  done
  for f in "$tmp"/asan.* "$tmp"/ubsan.* "$tmp"/tsan.*; do
    [ -f "$f" ] || continue
    echo "FAIL: $(basename "$0"): sanitizer report $f:" >&2
    cat "$f" >&2
    status=1
  done
  if [ "$status" -ne 0 ] && [ "$status" -ne 77 ]; then
    for f in "$tmp"/*.log "$tmp"/*.err; do
      [ -s "$f" ] || continue
      echo "----- last lines of $(basename "$f") -----" >&2
      tail -n 40 "$f" >&2
    done
  fi
  if [ -n "${KEEP_TEST_TMP:-}" ]; then
    echo "kept $tmp" >&2
  else
    rm -rf "$tmp"
  fi
  exit "$status"
}
trap _cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ----------------------------------------------------------------------
# Small helpers.

# free_port: print a TCP port on 127.0.0.1 that nothing listens on now.
# It stays below Linux's ephemeral range (32768-60999) so an outgoing
# connection does not take it meanwhile.  Two tests can still pick the
# same port; the start_* functions retry with another port if the bind
# fails.
free_port ()
{
  "$PYTHON" - <<'EOF'
import random, socket
for _ in range(200):
    port = random.randint(20000, 32000)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    break
else:
    raise SystemExit("free_port: no free port found")
EOF
}

# wait_http URL PID: wait until URL answers (any HTTP status) while PID
# lives.  Returns 1 if PID died or the server never answered.
wait_http ()
{
  local url=$1 pid=$2 n code
  for ((n = 0; n < ready_tries; n++)); do
    _alive "$pid" || return 1
    code=$(curl -k -s -o /dev/null -m 2 -w '%{http_code}' "$url" || :)
    [ "$code" = 000 ] || [ -z "$code" ] || return 0
    sleep 0.1
  done
  return 1
}

# wait_log FILE PATTERN: until FILE has a line matching PATTERN (10 s).
wait_log ()
{
  local n
  for ((n = 0; n < 100; n++)); do
    grep -q -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  fail "no '$2' in $(basename "$1")"
}

# requires_valgrind: valgrind, and a build without sanitizers (valgrind
# and ASan cannot share a process).
requires_valgrind ()
{
  requires valgrind
  [ -z "$ASAN_RUNTIME" ] || skip "built with sanitizers"
}

# nbdkit_valgrind NAME: in "${vg[@]}" the start of a command line that
# runs nbdkit -f -r -v under valgrind (errors exit 99, definite leaks are
# errors), its log in $tmp/valgrind-NAME.log.  NBDKIT_VALGRIND=1 keeps
# the plugin loaded at exit so its stack frames resolve.
nbdkit_valgrind ()
{
  vg=(env NBDKIT_VALGRIND=1
      valgrind --leak-check=full --errors-for-leak-kinds=definite
               --error-exitcode=99 --log-file="$tmp/valgrind-$1.log"
               nbdkit -f -r -v)
}

# valgrind_clean NAME STATUS: nbdkit_valgrind NAME's run exited with
# STATUS 0 and its log has no errors.
valgrind_clean ()
{
  [ "$2" -ne 99 ] || fail "($1) valgrind found errors (valgrind-$1.log)"
  [ "$2" -eq 0 ] || fail "($1) nbdkit under valgrind exited with status $2"
  grep -q 'ERROR SUMMARY: 0 errors' "$tmp/valgrind-$1.log" ||
    fail "($1) valgrind reports errors (valgrind-$1.log)"
}

# make_cert: a self-signed certificate for localhost and 127.0.0.1 in
# $tmp/cert.pem (key in $tmp/key.pem).
make_cert ()
{
  requires openssl
  [ -f "$tmp/cert.pem" ] && return 0
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
          -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
          -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>"$tmp/openssl.err" ||
    fail "openssl could not make a certificate"
  chmod 644 "$tmp/key.pem" "$tmp/cert.pem"
}

# make_random_file FILE BYTES: BYTES of random data.
make_random_file ()
{
  head -c "$2" /dev/urandom >"$1"
  chmod 644 "$1"
  [ "$(stat -c %s "$1")" -eq "$2" ] || fail "could not make $1"
}

file_size ()
{
  stat -c %s "$1"
}

sha ()
{
  sha256sum <"$1" | cut -d' ' -f1
}

# assert_same_file A B: same size and bytes.
assert_same_file ()
{
  [ "$(file_size "$1")" -eq "$(file_size "$2")" ] ||
    fail "$2 has $(file_size "$2") bytes, expected $(file_size "$1") like $1"
  [ "$(sha "$1")" = "$(sha "$2")" ] || fail "$2 differs from $1"
}

# assert_grep_i FILE WORD...: FILE contains every WORD (case-insensitive).
assert_grep_i ()
{
  local f=$1 w
  shift
  for w in "$@"; do
    grep -qiF -- "$w" "$f" || {
      echo "--- $f:" >&2
      cat "$f" >&2
      fail "expected '$w' in $(basename "$f")"
    }
  done
}

# assert_no_crash FILE STATUS: an exit status and stderr that show no
# crash (signal, sanitizer abort).
assert_no_crash ()
{
  local f=$1 st=$2
  [ "$st" -lt 124 ] ||
    { cat "$f" >&2; fail "exit status $st (signal or timeout)"; }
  ! grep -qE 'Segmentation|Aborted|AddressSanitizer|runtime error:' "$f" ||
    { cat "$f" >&2; fail "crash in $(basename "$f")"; }
}

# ----------------------------------------------------------------------
# nbdkit.
#
# When the plugin is built with --enable-sanitizers, the ASan runtime must
# be loaded into nbdkit (which is not instrumented) before anything else.
# Only nbdkit gets it: clients run outside, against nbdkit's socket.
# Reports go to $tmp/asan.PID and $tmp/ubsan.PID, which _cleanup turns
# into a failure.  Leak checking is valgrind's job (test-curl-valgrind.sh).
# With --enable-tsan the ThreadSanitizer runtime is preloaded the same
# way, reports in $tmp/tsan.PID.
if [ -n "${TSAN_RUNTIME:-}" ]; then
  NBDKIT=(env "LD_PRELOAD=$TSAN_RUNTIME"
          "TSAN_OPTIONS=halt_on_error=1:log_path=$tmp/tsan"
          nbdkit)
elif [ -n "$ASAN_RUNTIME" ]; then
  NBDKIT=(env "LD_PRELOAD=${ASAN_PRELOAD:-$ASAN_RUNTIME}"
          "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:log_path=$tmp/asan"
          "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$tmp/ubsan"
          nbdkit)
else
  # "env" so that the array never names the shell function below.
  NBDKIT=(env nbdkit)
fi
# The C helpers are built with the same sanitizers (linked in, nothing
# to preload): HELPER_ENV sends their reports to $tmp too, so that a
# fault in a test's server fails the test like one in nbdkit.
if [ -n "${TSAN_RUNTIME:-}" ]; then
  HELPER_ENV=(env "TSAN_OPTIONS=halt_on_error=1:log_path=$tmp/tsan")
elif [ -n "$ASAN_RUNTIME" ]; then
  HELPER_ENV=(env "ASAN_OPTIONS=abort_on_error=1:log_path=$tmp/asan"
              "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$tmp/ubsan")
else
  HELPER_ENV=(env)
fi

nbdkit ()
{
  "${NBDKIT[@]}" "$@"
}

# start_nbdkit NAME NBDKIT-ARGS...: nbdkit in the background serving on
# $tmp/NAME.sock, its stderr in $tmp/NAME.err.  Sets $uri and
# $nbdkit_pid.  Fails the test if nbdkit exits before it is ready.
#   start_nbdkit ro -r "$PLUGIN" "$url" connections=2
start_nbdkit ()
{
  local name=$1 n
  shift
  local sock=$tmp/$name.sock pidfile=$tmp/$name.pid err=$tmp/$name.err
  rm -f "$sock" "$pidfile"
  ( exec "${NBDKIT[@]}" -f --exit-with-parent -U "$sock" -P "$pidfile" \
         "$@" ) 2>"$err" &
  nbdkit_pid=$!
  _pids+=("$nbdkit_pid")
  eval "_nbdkit_pid_$name=$nbdkit_pid"
  # nbdkit writes its PID file once it listens, after the plugin's
  # start-up (so after the size and range probe).
  for ((n = 0; n < ready_tries; n++)); do
    [ -s "$pidfile" ] && [ -S "$sock" ] && break
    if ! _alive "$nbdkit_pid"; then
      stop_pid "$nbdkit_pid"
      cat "$err" >&2
      fail "nbdkit ($name) exited with status $_status before it was ready"
    fi
    sleep 0.1
  done
  [ -S "$sock" ] || fail "nbdkit ($name) did not become ready"
  uri="nbd+unix:///?socket=$sock"
}

# stop_nbdkit NAME: stop it and check that it was still running (did not
# crash while serving) and that it exited cleanly on SIGTERM.
stop_nbdkit ()
{
  local name=$1 pid
  eval "pid=\${_nbdkit_pid_$name:-}"
  [ -n "$pid" ] || fail "stop_nbdkit: no nbdkit called $name"
  _alive "$pid" || {
    wait "$pid" 2>/dev/null && _status=0 || _status=$?
    _forget_pid "$pid"
    cat "$tmp/$name.err" >&2
    fail "nbdkit ($name) died while serving, status $_status"
  }
  stop_pid "$pid"
  [ "$_status" -eq 0 ] || {
    cat "$tmp/$name.err" >&2
    fail "nbdkit ($name) exited with status $_status on SIGTERM"
  }
}

# expect_nbdkit_fails NAME NBDKIT-ARGS...: nbdkit must refuse to start:
# exit non-zero, within 20 s, without crashing.  Its stderr is left in
# $tmp/NAME.err for the caller to check the message.
expect_nbdkit_fails ()
{
  local name=$1 st=0
  shift
  local err=$tmp/$name.err
  # If nbdkit wrongly starts, the --run command makes it exit 0 at once.
  timeout 20 "${NBDKIT[@]}" -f -U "$tmp/$name.sock" "$@" \
          --run 'exit 0' </dev/null >"$tmp/$name.out" 2>"$err" || st=$?
  [ "$st" -ne 0 ] ||
    { cat "$err" >&2; fail "nbdkit ($name) started but should fail"; }
  [ "$st" -ne 124 ] ||
    { cat "$err" >&2; fail "nbdkit ($name) hung (killed after 20 s)"; }
  assert_no_crash "$err" "$st"
}

# ----------------------------------------------------------------------
# nginx, the part start_nginx and start_nginx_named share.
#   _nginx_run LABEL PREFIX ACCESS-LOG CONF-FUNCTION
# Picks $p (and $tp when make_cert ran first, with $tls_listen and
# $tls_conf for the server block), has CONF-FUNCTION (which sees those
# four) write PREFIX/nginx.conf, runs nginx -p PREFIX in the foreground
# with the error log $tmp/LABEL-error.log and its output in
# $tmp/LABEL.out, and waits until /__ready answers on both ports.  A bind
# that fails (another test took the port) is retried on other ports.
# Leaves the ports and the PID in $_nginx_port, $_nginx_tlsport and
# $_nginx_pid.  The HTTPS port offers HTTP/2 by ALPN unless
# nginx_http2 is set empty (nginx_http2= start_nginx): HTTP/1.1 only.
_nginx_run ()
{
  requires nginx
  local label=$1 prefix=$2 log=$3 conf_fn=$4 tries p tp pid
  local tls_listen= tls_conf=
  local errlog=$tmp/$label-error.log out=$tmp/$label.out
  for ((tries = 0; tries < 5; tries++)); do
    p=$(free_port)
    tp=
    if [ -f "$tmp/cert.pem" ]; then
      tp=$(free_port)
      tls_listen="listen 127.0.0.1:$tp ssl ${nginx_http2-http2};"
      tls_conf="ssl_certificate $tmp/cert.pem;
    ssl_certificate_key $tmp/key.pem;"
    fi
    "$conf_fn" >"$prefix/nginx.conf"
    : >"$log"
    nginx -p "$prefix" -e "$errlog" -c "$prefix/nginx.conf" \
          -g 'daemon off;' </dev/null >"$out" 2>&1 &
    pid=$!
    _pids+=("$pid")
    if wait_http "http://127.0.0.1:$p/__ready" "$pid"; then
      if [ -z "$tp" ] || wait_http "https://127.0.0.1:$tp/__ready" "$pid"
      then
        _nginx_port=$p _nginx_tlsport=$tp _nginx_pid=$pid
        return 0
      fi
    fi
    stop_pid "$pid"
    grep -q 'in use' "$errlog" "$out" 2>/dev/null ||
      { cat "$out" "$errlog" >&2; fail "$label did not start"; }
    rm -f "$errlog"
  done
  fail "$label: no free port after $tries tries"
}

# ----------------------------------------------------------------------
# nginx: HTTP on $port, HTTPS (and HTTP/2) on $tlsport when make_cert ran
# first, files from $tmp/www, access log $tmp/access.log with one line per
# request:
#   CONNECTION METHOD RANGE STATUS BODY_BYTES URI te=TE cl=CL
# (RANGE is "-" when absent, e.g. "5 GET bytes=0-0 206 1 /disk.img";
# TE and CL are the request's Transfer-Encoding and Content-Length).
# /nohead/ serves the same files but refuses HEAD with 403.  Its PID is
# in $nginx_pid.
#   start_nginx ['EXTRA SERVER DIRECTIVES']
# e.g. start_nginx 'location /put/ { dav_methods PUT; alias DIR/www/; }'
# where DIR is replaced by $tmp.
start_nginx ()
{
  _nginx_extra=${1:-}
  mkdir -p "$tmp/www" "$tmp/nginx-tmp"
  _nginx_run nginx "$tmp" "$tmp/access.log" _nginx_conf
  port=$_nginx_port tlsport=$_nginx_tlsport nginx_pid=$_nginx_pid
}

_nginx_conf ()
{
  cat <<EOF
worker_processes 1;
pid $tmp/nginx.pid;
error_log $tmp/nginx-error.log;
events { worker_connections 256; }
http {
  log_format ranges '\$connection \$request_method \$http_range \$status '
                    '\$body_bytes_sent \$request_uri '
                    'te=\$http_transfer_encoding cl=\$http_content_length';
  client_max_body_size 0;
  # For tests that look at request headers: access_log DIR/headers.log hdrs;
  log_format hdrs '\$request_method \$server_protocol \$host \$status '
                  'cookie="\$http_cookie" token="\$http_x_token" '
                  'check="\$http_x_token_check"';
  # For tests that look at the HTTP version and the TCP connection of
  # each request: access_log DIR/proto.log proto;
  log_format proto '\$connection \$server_protocol \$request_method '
                   '\$http_range \$status \$body_bytes_sent';
  # For tests that look at when each request came (\$msec is its end,
  # \$request_time how long it took): access_log DIR/timing.log timing;
  log_format timing '\$connection \$http_range \$msec \$request_time';
  access_log $tmp/access.log ranges;
  client_body_temp_path $tmp/nginx-tmp; proxy_temp_path $tmp/nginx-tmp;
  fastcgi_temp_path $tmp/nginx-tmp; uwsgi_temp_path $tmp/nginx-tmp;
  scgi_temp_path $tmp/nginx-tmp;
  keepalive_requests 1000000;
  # Debian's default nginx.conf: the plugin must work well with it.
  sendfile on;
  tcp_nopush on;
  server {
    listen 127.0.0.1:$p;
    $tls_listen
    $tls_conf
    root $tmp/www;
    location = /__ready { access_log off; return 204; }
    location /nohead/ {
      if (\$request_method = HEAD) { return 403; }
      alias $tmp/www/;
    }
    ${_nginx_extra//DIR/$tmp}
  }
}
EOF
}

# start_nginx_put ['EXTRA SERVER DIRECTIVES']: start_nginx with a
# location /put/ that takes PUT (whole files, written to $tmp/www), for
# curlpipe's uploads.  nginx's workers run as an unprivileged user, so
# $tmp/www is made writable by everyone.
start_nginx_put ()
{
  start_nginx "location /put/ { dav_methods PUT; alias DIR/www/; }
    ${1:-}"
  chmod 777 "$tmp/www"
}

# serve_image SIZE ['EXTRA SERVER DIRECTIVES']: start_nginx EXTRA and a
# random SIZE-byte image, $image ($tmp/www/disk.img), that it serves at
# $url: https://127.0.0.1:$tlsport/disk.img when make_cert ran first,
# else http://127.0.0.1:$port/disk.img.  $http_url is always the plain
# HTTP one.
serve_image ()
{
  start_nginx "${2:-}"
  image=$tmp/www/disk.img
  make_random_file "$image" "$1"
  http_url=http://127.0.0.1:$port/disk.img
  url=$http_url
  [ -z "$tlsport" ] || url=https://127.0.0.1:$tlsport/disk.img
}

# export_image NAME SIZE [NBDKIT-OPTIONS...] [PLUGIN-PARAMETERS...]:
# serve_image SIZE, then start_nbdkit NAME on the plugin with $url.
# Arguments that start with '-' are nbdkit options, put before the
# plugin (so -D takes its value in the same word: -Dcurl.verbose=1); the
# others are plugin parameters, put after the URL.  Sets $uri.
#   export_image ro "$size" -r connections=4
export_image ()
{
  local name=$1 size=$2 a
  local opts=() params=()
  shift 2
  for a in "$@"; do
    case $a in
      -*) opts+=("$a") ;;
      *) params+=("$a") ;;
    esac
  done
  serve_image "$size"
  start_nbdkit "$name" "${opts[@]}" "$PLUGIN" "$url" "${params[@]}"
}

# ----------------------------------------------------------------------
# Apache mod_dav: partial PUT (Content-Range) on $dav_port, files in
# $tmp/dav (the served file must be chmod a+rw by the caller), access log
# $tmp/dav-access.log with one line per request:
#   METHOD URI RANGE CONTENT-RANGE STATUS
#   start_apache ['EXTRA CONFIGURATION']
# EXTRA is appended to httpd.conf with DIR replaced by $tmp and PORT by
# $dav_port, e.g. (mod_alias answers every method, PUT too):
#   'LoadModule alias_module /usr/lib/apache2/modules/mod_alias.so
#    Redirect 307 /r307/disk.img http://127.0.0.1:PORT/disk.img'
start_apache ()
{
  requires apache2
  [ -f /usr/lib/apache2/modules/mod_dav_fs.so ] ||
    skip "Apache mod_dav_fs is not installed"
  local extra=${1:-} tries conf_extra
  mkdir -p "$tmp/dav" "$tmp/lock" "$tmp/apache-run"
  chmod 777 "$tmp/dav" "$tmp/lock"
  # As root, Apache hands its workers to User; without one it picks
  # uid -1 and complains.  The served file must be writable by it.
  local user=
  if [ "$(id -u)" -eq 0 ] && id www-data >/dev/null 2>&1; then
    user="User www-data
Group www-data"
  fi
  for ((tries = 0; tries < 5; tries++)); do
    dav_port=$(free_port)
    conf_extra=${extra//DIR/$tmp}
    conf_extra=${conf_extra//PORT/$dav_port}
    cat >"$tmp/httpd.conf" <<EOF
ServerRoot "$tmp"
$user
ServerName localhost
Listen 127.0.0.1:$dav_port
PidFile $tmp/httpd.pid
DefaultRuntimeDir $tmp/apache-run
Mutex file:$tmp/apache-run default
ErrorLog $tmp/apache-error.log
LogFormat "%m %U %{Range}i %{Content-Range}i %>s" dav
CustomLog $tmp/dav-access.log dav
KeepAliveTimeout 30
MaxKeepAliveRequests 0
LoadModule mpm_event_module /usr/lib/apache2/modules/mod_mpm_event.so
LoadModule authz_core_module /usr/lib/apache2/modules/mod_authz_core.so
LoadModule dav_module /usr/lib/apache2/modules/mod_dav.so
LoadModule dav_fs_module /usr/lib/apache2/modules/mod_dav_fs.so
DavLockDB $tmp/lock/DavLock
DocumentRoot $tmp/dav
<Directory $tmp/dav>
  Dav On
  Require all granted
</Directory>
$conf_extra
EOF
    rm -f "$tmp/apache-error.log"
    apache2 -f "$tmp/httpd.conf" -DFOREGROUND </dev/null \
            >"$tmp/apache.out" 2>&1 &
    apache_pid=$!
    _pids+=("$apache_pid")
    wait_http "http://127.0.0.1:$dav_port/" "$apache_pid" && return 0
    stop_pid "$apache_pid"
    grep -q 'in use' "$tmp/apache-error.log" "$tmp/apache.out" 2>/dev/null ||
      { cat "$tmp/apache.out" "$tmp/apache-error.log" >&2 2>/dev/null;
        fail "apache2 did not start"; }
  done
  fail "apache2: no free port after $tries tries"
}

# ----------------------------------------------------------------------
# The fault server (helpers/fault-server.py): serves FILE at every path on
# $fault_port, one log line per request in $tmp/fault.log.
#   start_fault_server MODE FILE
start_fault_server ()
{
  local mode=$1 file=$2
  rm -f "$tmp/fault.port"
  "$PYTHON" "$helpers_srcdir/fault-server.py" --mode "$mode" --file "$file" \
            --log "$tmp/fault.log" --port-file "$tmp/fault.port" \
            </dev/null >"$tmp/fault.out" 2>&1 &
  fault_pid=$!
  await_port_file "$fault_pid" "$tmp/fault.port" "$tmp/fault.out" \
                  "fault server"
  fault_port=$(cat "$tmp/fault.port")
}

# await_port_file PID FILE OUT NAME: wait until the server PID (started in
# the background, its output in OUT) has written its port to FILE.  The
# server's PID joins those stopped at exit.  (Not in $(...): _pids and
# fail must act in the test's own shell.)
await_port_file ()
{
  local pid=$1 file=$2 out=$3 name=$4 n
  _pids+=("$pid")
  for ((n = 0; n < ready_tries; n++)); do
    [ -s "$file" ] && break
    _alive "$pid" || { cat "$out" >&2; fail "$name did not start"; }
    sleep 0.1
  done
  [ -s "$file" ] || fail "$name did not become ready"
}

# ----------------------------------------------------------------------
# The raw server (helpers/raw-server.py): answers written byte for byte,
# chosen by the request's path (the list is at the top of the script),
# on $raw_port; one log line per request in $tmp/raw.log.  It exits by
# itself after a minute.
start_raw_server ()
{
  rm -f "$tmp/raw.port"
  "$PYTHON" "$helpers_srcdir/raw-server.py" --port-file "$tmp/raw.port" \
            --log "$tmp/raw.log" </dev/null >"$tmp/raw.out" 2>&1 &
  raw_pid=$!
  await_port_file "$raw_pid" "$tmp/raw.port" "$tmp/raw.out" "raw server"
  raw_port=$(cat "$tmp/raw.port")
}

# ----------------------------------------------------------------------
# The WebSocket server (helpers/ws-server.py, on python3-websockets):
# echo, a bridge to a TCP port, and faults, chosen by the request's path
# (the list is at the top of the script), on $ws_port, its PID in
# $ws_pid; one log line per connection (and per event) in $tmp/ws.log.
requires_websockets ()
{
  "$PYTHON" -c 'import websockets' >/dev/null 2>&1 ||
    skip "python3-websockets is not installed"
}

start_ws_server ()
{
  requires_websockets
  rm -f "$tmp/ws.port"
  "$PYTHON" "$helpers_srcdir/ws-server.py" --port-file "$tmp/ws.port" \
            --log "$tmp/ws.log" </dev/null >"$tmp/ws.out" 2>&1 &
  ws_pid=$!
  await_port_file "$ws_pid" "$tmp/ws.port" "$tmp/ws.out" "WebSocket server"
  ws_port=$(cat "$tmp/ws.port")
}

# ----------------------------------------------------------------------
# A private sshd for the ssh-through-curlpipe tests: run as a child (-D)
# on a free port, with its own configuration, host key and authorized
# key (the client's is $tmp/id) in $tmp, never the system's service.  As
# root it logs in as root with that key only (PermitRootLogin
# prohibit-password) and needs /run/sshd, its privilege separation
# directory, which Debian's service unit creates at start: it is
# created the same way when missing.  Sets $ssh_port and $sshd_pid (log
# $tmp/sshd.log).
start_sshd ()
{
  local tries n sftp_server=/usr/lib/openssh/sftp-server
  requires ssh
  requires scp
  requires ssh-keygen
  [ -x /usr/sbin/sshd ] || skip "sshd (openssh-server) is not installed"
  if [ "$(id -u)" -eq 0 ] && [ ! -d /run/sshd ]; then
    mkdir -m 755 /run/sshd
  fi
  ssh-keygen -q -t ed25519 -N '' -C curlpipe-test-host \
    -f "$tmp/ssh_host_ed25519_key" || fail "ssh-keygen (host key) failed"
  ssh-keygen -q -t ed25519 -N '' -C curlpipe-test-client -f "$tmp/id" ||
    fail "ssh-keygen (client key) failed"
  cp "$tmp/id.pub" "$tmp/authorized_keys"
  [ -x "$sftp_server" ] || sftp_server=internal-sftp
  cat >"$tmp/sshd_config" <<EOF
ListenAddress 127.0.0.1
HostKey $tmp/ssh_host_ed25519_key
PidFile $tmp/sshd.pid
AuthorizedKeysFile $tmp/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PrintMotd no
Subsystem sftp $sftp_server
LogLevel VERBOSE
EOF
  for ((tries = 0; tries < 5; tries++)); do
    ssh_port=$(free_port)
    /usr/sbin/sshd -D -e -f "$tmp/sshd_config" -p "$ssh_port" \
      </dev/null 2>"$tmp/sshd.log" &
    sshd_pid=$!
    _pids+=("$sshd_pid")
    for ((n = 0; n < ready_tries; n++)); do
      _alive "$sshd_pid" || break
      # Ready when it greets: "SSH-2.0-OpenSSH_...".
      "$PYTHON" -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)
s.settimeout(2)
sys.exit(0 if s.recv(4) == b"SSH-" else 1)' "$ssh_port" 2>/dev/null &&
        return 0
      sleep 0.1
    done
    stop_pid "$sshd_pid"
    grep -q 'in use' "$tmp/sshd.log" ||
      { cat "$tmp/sshd.log" >&2; fail "sshd did not start"; }
  done
  fail "sshd: no free port after $tries tries"
}

# ----------------------------------------------------------------------
# The HTTP/2 fault server (helpers/h2-fault-server.py): serves FILE at
# every path over TLS with ALPN "h2" only (make_cert first: its
# certificate is $tmp/cert.pem) on $h2_port, the fault of MODE on the
# Nth GET after the probe (--nth, 3 if not given), one log line per
# answer and per connection event in $tmp/h2.log; its PID in $h2_pid.
#   start_h2_fault_server MODE FILE [N]
requires_h2 ()
{
  "$PYTHON" -c 'import h2.connection' >/dev/null 2>&1 ||
    skip "python3-h2 is not installed"
}

start_h2_fault_server ()
{
  requires_h2
  rm -f "$tmp/h2.port"
  "$PYTHON" "$helpers_srcdir/h2-fault-server.py" --mode "$1" --file "$2" \
            --nth "${3:-3}" --cert "$tmp/cert.pem" --key "$tmp/key.pem" \
            --log "$tmp/h2.log" --port-file "$tmp/h2.port" \
            </dev/null >"$tmp/h2.out" 2>&1 &
  h2_pid=$!
  await_port_file "$h2_pid" "$tmp/h2.port" "$tmp/h2.out" \
                  "HTTP/2 fault server"
  h2_port=$(cat "$tmp/h2.port")
}

# ----------------------------------------------------------------------
# The streaming server (helpers/stream-server.c, built by make) on
# $stream_port: /echo sends each piece of a request body back as it
# arrives, /sink checks a byte pattern, /status/NNN answers NNN,
# /headers answers with the request's headers, /tcp/PORT tunnels to a
# local TCP port, and more (the list is at the top of stream-server.c);
# one log line per request in $tmp/stream.log.
start_stream_server ()
{
  local server=$helpers_builddir/stream-server
  [ -x "$server" ] || fail "stream-server not built: $server"
  rm -f "$tmp/stream.port"
  "${HELPER_ENV[@]}" "$server" --port-file "$tmp/stream.port" --log "$tmp/stream.log" \
            </dev/null >"$tmp/stream.out" 2>&1 &
  stream_pid=$!
  await_port_file "$stream_pid" "$tmp/stream.port" "$tmp/stream.out" \
                  stream-server
  stream_port=$(cat "$tmp/stream.port")
}

# ----------------------------------------------------------------------
# linkem (helpers/linkem.c, built by make): a wide-area link between
# the plugin and a loopback server, RTT_MS long (half each way, and one
# round trip more before a connection's first bytes), on $linkem_port,
# its PID in $linkem_pid; one line per closed connection goes to
# $tmp/linkem.log.  Several may run at once.
#   start_linkem TARGET_PORT RTT_MS [MORE LINKEM ARGS]
start_linkem ()
{
  local linkem=$helpers_builddir/linkem target=$1 rtt=$2
  shift 2
  [ -x "$linkem" ] || fail "linkem not built: $linkem"
  rm -f "$tmp/linkem.port"
  "${HELPER_ENV[@]}" "$linkem" -v --rtt "$rtt" --port-file "$tmp/linkem.port" "$@" \
            0 127.0.0.1 "$target" </dev/null >>"$tmp/linkem.log" 2>&1 &
  linkem_pid=$!
  await_port_file "$linkem_pid" "$tmp/linkem.port" "$tmp/linkem.log" linkem
  linkem_port=$(cat "$tmp/linkem.port")
}

# ----------------------------------------------------------------------
# lighttpd mod_webdav with partial PUT enabled, on $lighttpd_port, files
# in $tmp/lwww (the served file must be chmod a+rw by the caller), access
# log $tmp/lighttpd-access.log in the same format as Apache's above:
#   METHOD URI RANGE CONTENT-RANGE STATUS
# lighttpd buffers that log: stop_pid "$lighttpd_pid" before reading it.
start_lighttpd ()
{
  requires lighttpd
  [ -f /usr/lib/lighttpd/mod_webdav.so ] ||
    skip "lighttpd mod_webdav is not installed"
  local tries
  mkdir -p "$tmp/lwww" "$tmp/lup"
  chmod 777 "$tmp/lwww" "$tmp/lup"
  for ((tries = 0; tries < 5; tries++)); do
    lighttpd_port=$(free_port)
    cat >"$tmp/lighttpd.conf" <<EOF2
server.document-root = "$tmp/lwww"
server.port = $lighttpd_port
server.bind = "127.0.0.1"
server.modules = ("mod_webdav", "mod_accesslog")
server.upload-dirs = ("$tmp/lup")
server.errorlog = "$tmp/lighttpd-error.log"
accesslog.filename = "$tmp/lighttpd-access.log"
accesslog.format = "%m %U %{Range}i %{Content-Range}i %>s"
webdav.activate = "enable"
webdav.is-readonly = "disable"
webdav.opts = ("partial-put-copy-modify" => "enable")
EOF2
    rm -f "$tmp/lighttpd-error.log"
    lighttpd -f "$tmp/lighttpd.conf" -D </dev/null >"$tmp/lighttpd.out" 2>&1 &
    lighttpd_pid=$!
    _pids+=("$lighttpd_pid")
    wait_http "http://127.0.0.1:$lighttpd_port/" "$lighttpd_pid" && return 0
    stop_pid "$lighttpd_pid"
    grep -q 'in use' "$tmp/lighttpd-error.log" "$tmp/lighttpd.out" \
         2>/dev/null ||
      { cat "$tmp/lighttpd.out" "$tmp/lighttpd-error.log" >&2 2>/dev/null;
        fail "lighttpd did not start"; }
  done
  fail "lighttpd: no free port after $tries tries"
}

# ----------------------------------------------------------------------
# Writes through the plugin, for the servers that take partial PUT.
#
# pattern_writes URI EXPECTED "OFFSET:LENGTH ...": through nbdsh, write at
# each OFFSET a LENGTH-byte pattern that differs from write to write and
# from byte to byte (so a shifted or reordered write shows), read it back
# through the plugin, and apply the same writes to the local file
# EXPECTED.  Fails the test on any error.
pattern_writes ()
{
  requires_nbdsh
  SIZE=$(file_size "$2") EXPECTED=$2 WRITES=$3 nbdsh -u "$1" -c '
import os
size = int(os.environ["SIZE"])
assert h.get_size() == size, "export size %d, not %d" % (h.get_size(), size)
assert not h.is_read_only(), "the export is read-only"
exp = open(os.environ["EXPECTED"], "r+b")
for i, w in enumerate(os.environ["WRITES"].split()):
    off, n = map(int, w.split(":"))
    buf = bytes((off + 7 * i + k * 13 + 1) % 256 for k in range(n))
    h.pwrite(buf, off)
    exp.seek(off)
    exp.write(buf)
    got = h.pread(n, off)
    assert got == buf, "read back at %d differs" % off
exp.close()
if h.can_flush():
    h.flush()
h.shutdown()
' >"$tmp/nbdsh.out" 2>&1 || {
    cat "$tmp/nbdsh.out" >&2
    fail "writes through nbdsh failed"
  }
}

# assert_put_log LOG URI-PATH "OFFSET:LENGTH ...": the server's log
# ("METHOD URI RANGE CONTENT-RANGE STATUS") shows one 2xx PUT per write
# with its exact inclusive Content-Range, and no other PUT.
assert_put_log ()
{
  local log=$1 path=$2 w off n puts
  for w in $3; do
    off=${w%:*} n=${w#*:}
    grep -qE "^PUT $path - bytes $off-$((off + n - 1))/\\* 20[0-9]\$" "$log" ||
      fail "no 2xx PUT with Content-Range: bytes $off-$((off + n - 1))/*"
  done
  puts=$(grep -c '^PUT ' "$log" || :)
  [ "$puts" -eq "$(wc -w <<<"$3")" ] ||
    fail "$puts PUT requests for $(wc -w <<<"$3") writes"
}

# assert_nginx_ranges SIZE MIN_MULTI: every GET in nginx's log
# ($tmp/access.log: CONNECTION METHOD RANGE STATUS BODY_BYTES URI) asked
# for exact inclusive ranges ("bytes=A-B" or "bytes=A-B,C-D,..." in order,
# separate) inside a SIZE-byte object and was answered 206, a single
# range with exactly its length; some range ended at the last byte (a
# range one byte too long is a classic bug); and at least MIN_MULTI
# requests asked for several ranges.
assert_nginx_ranges ()
{
  awk -v size="$1" -v min_multi="$2" '
    $2 != "GET" { next }
    {
      gets++
      if ($3 !~ /^bytes=[0-9]+-[0-9]+(,[0-9]+-[0-9]+)*$/) {
        print "GET without exact ranges: " $0; bad++; next
      }
      if ($4 != 206) { print "not answered 206: " $0; bad++ }
      n = split(substr($3, 7), r, ",")
      if (n > 1) multi++
      prev = -2
      for (i = 1; i <= n; i++) {
        split(r[i], ab, "-"); a = ab[1] + 0; b = ab[2] + 0
        if (b < a) { print "empty or reversed range: " $0; bad++ }
        if (b >= size) { print "past the last byte " size - 1 ": " $0; bad++ }
        if (a <= prev + 1) { print "ranges not separate, in order: " $0; bad++ }
        if (b == size - 1) tail++
        prev = b
      }
      if (n == 1 && $5 != b - a + 1) {
        print "body is not the range length: " $0; bad++
      }
    }
    END {
      if (gets < 2) { print "only " gets " GET requests"; bad++ }
      if (!tail) { print "no range ended at the last byte " size - 1; bad++ }
      if (multi < min_multi) {
        print "only " multi + 0 " multi-range requests"; bad++
      }
      exit bad > 0
    }' "$tmp/access.log" >"$tmp/ranges.out" || {
    cat "$tmp/ranges.out" >&2
    fail "nginx access log shows bad ranges"
  }
}

# random_reads URI FILE COUNT: COUNT reads through nbdsh with up to 64 in
# flight (random 4 KiB blocks, odd sizes and offsets, duplicates, reads
# next to and overlapping the previous one, the last bytes), each
# compared with FILE.  Many reads waiting at once is what makes the
# plugin batch them into multi-range requests.
random_reads ()
{
  requires_nbdsh
  FILE=$2 COUNT=$3 nbdsh -u "$1" -c '
import os, random
data = open(os.environ["FILE"], "rb").read()
size = len(data)
assert h.get_size() == size, "export size %d, not %d" % (h.get_size(), size)
rnd = random.Random(7)
reads, prev = [], (0, 4096)
for i in range(int(os.environ["COUNT"])):
    kind = rnd.randrange(6)
    if kind == 0:
        off, n = rnd.randrange(size // 4096) * 4096, 4096
    elif kind == 1:
        n = rnd.randrange(1, 20000)
        off = rnd.randrange(size - n)
    elif kind == 2:
        off, n = prev
    elif kind == 3:
        off, n = min(prev[0] + prev[1], size - 1), 4096
    elif kind == 4:
        off, n = prev[0] + prev[1] // 2, 8192
    else:
        n = rnd.randrange(1, 5000)
        off = size - n
    n = min(n, size - off)
    reads.append((off, n))
    prev = (off, n)
inflight, done = {}, 0
while reads or inflight:
    while reads and len(inflight) < 64:
        off, n = reads.pop()
        buf = nbd.Buffer(n)
        inflight[h.aio_pread(buf, off)] = (buf, off, n)
    h.poll(-1)
    for c in [c for c in inflight if h.aio_command_completed(c)]:
        buf, off, n = inflight.pop(c)
        if buf.to_bytearray() != data[off:off + n]:
            raise SystemExit("read of %d bytes at %d: wrong data" % (n, off))
        done += 1
print("%d reads ok" % done)
h.shutdown()
' >"$tmp/reads.out" 2>&1 || {
    cat "$tmp/reads.out" >&2
    fail "random reads through $1 failed"
  }
}

# fault_export MODE SIZE [PLUGIN-ARGS...]: a random SIZE-byte
# $tmp/disk.img served by the fault server in MODE and exported read-only
# by nbdkit (name "ro"), for tests that check each read's answer with
# nbdsh; SIZE and FILE are exported for the nbdsh script.
fault_export ()
{
  make_random_file "$tmp/disk.img" "$2"
  start_fault_server "$1" "$tmp/disk.img"
  start_nbdkit ro -r "$PLUGIN" "http://127.0.0.1:$fault_port/disk.img" \
               "${@:3}"
  export SIZE=$2 FILE=$tmp/disk.img
}

# ----------------------------------------------------------------------
# Another nginx, for tests that need several origins (a redirect from
# one server to another).  Everything it has is under its own name:
# configuration and files in $tmp/nginx-NAME (files served from
# $tmp/nginx-NAME/www), HTTP on ${NAME}_port, HTTPS on ${NAME}_tlsport
# when make_cert ran first (empty otherwise), its PID in ${NAME}_pid,
# and an access log $tmp/nginx-NAME.log of the headers that carry
# secrets, one line per request:
#   SCHEME PORT METHOD URI STATUS cookie="..." auth="..." token="..."
#     script="..."
# (the Cookie, Authorization, X-Token and X-Script headers, "" when
# absent), and $tmp/nginx-NAME/access.log as start_nginx's (CONNECTION
# METHOD RANGE STATUS BYTES URI).  In EXTRA, DIR is replaced by $tmp/nginx-NAME, TLSPORT by its
# HTTPS port and PORT by its HTTP port.  NAME is a shell identifier.
#   start_nginx_named NAME ['EXTRA SERVER DIRECTIVES']
# e.g. start_nginx_named a 'location = /a/x { return 302 /x; }'
start_nginx_named ()
{
  local name=$1
  _nginx_extra=${2:-} _nginx_dir=$tmp/nginx-$name
  _nginx_log=$tmp/nginx-$name.log _nginx_errlog=$tmp/nginx-$name-error.log
  mkdir -p "$_nginx_dir/www" "$_nginx_dir/tmp"
  _nginx_run "nginx-$name" "$_nginx_dir" "$_nginx_log" _nginx_named_conf
  printf -v "${name}_port" %s "$_nginx_port"
  printf -v "${name}_tlsport" %s "$_nginx_tlsport"
  printf -v "${name}_pid" %s "$_nginx_pid"
}

# requires_secure_link: nginx with the secure_link module (expiring
# signed links), or the test is skipped.
requires_secure_link ()
{
  requires nginx
  nginx -V 2>&1 | grep -q -- --with-http_secure_link_module ||
    skip "nginx has no secure_link module"
}

# start_signed_nginx SECRET: start_nginx_named signed, serving
# /disk.img only with a link signed as nginx's secure_link_md5
# "$secure_link_expires$uri SECRET" in md5= with its end in Expires=
# (403 for a bad signature, 410 once expired).  Its files go in
# $tmp/nginx-signed/www.
start_signed_nginx ()
{
  start_nginx_named signed "location = /disk.img {
      secure_link \$arg_md5,\$arg_Expires;
      secure_link_md5 \"\$secure_link_expires\$uri $1\";
      if (\$secure_link = \"\") { return 403; }
      if (\$secure_link = \"0\") { return 410; }
    }"
}

# start_redirector NAME: helpers/redirector.py on $NAME_port, steered by
# the files in $tmp/NAME (target, sign, tokens, hang, fail, uses: see
# the helper), its log in $tmp/NAME.log.
start_redirector ()
{
  local name=$1 port
  mkdir -p "$tmp/$name"
  : >"$tmp/$name.log"
  rm -f "$tmp/$name.port"
  "$PYTHON" "$helpers_srcdir/redirector.py" --dir "$tmp/$name" \
            --log "$tmp/$name.log" --port-file "$tmp/$name.port" \
            </dev/null >"$tmp/$name.out" 2>&1 &
  await_port_file "$!" "$tmp/$name.port" "$tmp/$name.out" "redirector"
  port=$(cat "$tmp/$name.port")
  printf -v "${name}_port" %s "$port"
}

# reads_moved_at_11 NAME STRIDE SKEW LEN MOVED GONE: 20 reads of LEN
# bytes at i * STRIDE + SKEW (i = 1..20) through $uri, each compared
# with $image; before the 11th the files MOVED and GONE are made (the
# redirect tests' nginx turn their answers with them).  Fails NAME.
reads_moved_at_11 ()
{
  local name=$1
  FILE=$image STRIDE=$2 SKEW=$3 LEN=$4 MOVED=$5 GONE=$6 nbdsh -u "$uri" -c '
import os
data = open(os.environ["FILE"], "rb").read()
stride, skew, n = (int(os.environ[k]) for k in ("STRIDE", "SKEW", "LEN"))
for i in range(1, 21):
    if i == 11:
        open(os.environ["MOVED"], "w").close()
        open(os.environ["GONE"], "w").close()
    off = i * stride + skew
    assert h.pread(n, off) == data[off:off + n], "read %d differs" % i
h.shutdown()
' >"$tmp/$name.out" 2>&1 || {
    cat "$tmp/$name.out" >&2
    fail "$name: reads failed"
  }
}

_nginx_named_conf ()
{
  local dir=$_nginx_dir conf
  conf=${_nginx_extra//DIR/$dir}
  conf=${conf//TLSPORT/$tp}
  conf=${conf//PORT/$p}
  cat <<EOF
worker_processes 1;
pid $dir/nginx.pid;
error_log $_nginx_errlog;
events { worker_connections 256; }
http {
  log_format secrets '\$scheme \$server_port \$request_method \$request_uri '
                     '\$status cookie="\$http_cookie" '
                     'auth="\$http_authorization" token="\$http_x_token" '
                     'script="\$http_x_script"';
  access_log $_nginx_log secrets;
  # As start_nginx's access.log: CONNECTION METHOD RANGE STATUS BYTES URI
  log_format ranges '\$connection \$request_method \$http_range \$status '
                    '\$body_bytes_sent \$request_uri';
  access_log $dir/access.log ranges;
  client_body_temp_path $dir/tmp; proxy_temp_path $dir/tmp;
  fastcgi_temp_path $dir/tmp; uwsgi_temp_path $dir/tmp;
  scgi_temp_path $dir/tmp;
  server {
    listen 127.0.0.1:$p;
    $tls_listen
    $tls_conf
    root $dir/www;
    location = /__ready { access_log off; return 204; }
    $conf
  }
}
EOF
}

# ----------------------------------------------------------------------
# tinyproxy, a forward proxy, on 127.0.0.1:$proxy_port, its PID in
# $proxy_pid, its log in $tmp/NAME.log with a line per request:
#   ... Request (file descriptor N): METHOD URL HTTP/1.1
# ("CONNECT HOST:PORT" for https through it).
#   start_tinyproxy NAME ['EXTRA CONFIGURATION LINE']
# e.g. start_tinyproxy auth 'BasicAuth alice pr0xy'
start_tinyproxy ()
{
  requires tinyproxy
  local name=$1 n
  proxy_port=$(free_port)
  : >"$tmp/$name.log"
  chmod 666 "$tmp/$name.log"
  cat >"$tmp/$name.conf" <<EOF2
Port $proxy_port
Listen 127.0.0.1
Timeout 60
LogFile "$tmp/$name.log"
LogLevel Info
MaxClients 50
Allow 127.0.0.1
${2:-}
EOF2
  tinyproxy -d -c "$tmp/$name.conf" >"$tmp/$name.out" 2>&1 &
  proxy_pid=$!
  _pids+=("$proxy_pid")
  for ((n = 0; n < ready_tries; n++)); do
    _alive "$proxy_pid" ||
      { cat "$tmp/$name.out" >&2; fail "tinyproxy ($name) exited"; }
    "$PYTHON" -c '
import socket, sys
socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()' \
      "$proxy_port" 2>/dev/null && return 0
    sleep 0.1
  done
  cat "$tmp/$name.out" >&2
  fail "tinyproxy ($name) did not start"
}

# ----------------------------------------------------------------------
# read_fails OFFSET COUNT: a read of COUNT bytes at OFFSET from $uri must
# fail with EIO (never give bytes).
read_fails ()
{
  OFF=$1 N=$2 nbdsh -u "$uri" -c '
import errno, os
try:
    h.pread(int(os.environ["N"]), int(os.environ["OFF"]))
except nbd.Error as e:
    assert e.errnum == errno.EIO, e.string
else:
    raise SystemExit("a read that must fail gave bytes")
h.shutdown()
'
}

# replaced_read V1 V2 FILE MTIME: through $uri, read 64 KiB at 0 (must
# be V1's), replace FILE (served by a web server) by a copy of V2 of
# the same size with the modification time MTIME (seconds since the
# epoch, decimals allowed), renamed over it as a new version would be,
# then read 64 KiB at 512 KiB: that read must fail with EIO, never give
# V2's (or any) bytes.
replaced_read ()
{
  V1=$1 V2=$2 DISK=$3 MTIME=$4 nbdsh -u "$uri" -c '
import errno, os, shutil
v1 = open(os.environ["V1"], "rb").read()
v2 = open(os.environ["V2"], "rb").read()
assert h.pread(65536, 0) == v1[:65536], "the first read is not v1"
tmp = os.environ["DISK"] + ".new"
shutil.copyfile(os.environ["V2"], tmp)
os.chmod(tmp, 0o666)
ns = round(float(os.environ["MTIME"]) * 1e9)
os.utime(tmp, ns=(ns, ns))
os.rename(tmp, os.environ["DISK"])
try:
    got = h.pread(65536, 524288)
except nbd.Error as e:
    assert e.errnum == errno.EIO, e.string
else:
    which = "v2" if got == v2[524288:589824] else "other"
    raise SystemExit("a read after the replacement returned %s bytes" % which)
h.shutdown()
'
}

# ----------------------------------------------------------------------
# probe_said NAME: $said is what nbdkit NAME (started with -v) said at
# start-up of its probe's answer: "the probe's answer came N ms after
# its request: a near server" (or "a distant server").
probe_said ()
{
  wait_log "$tmp/$1.err" "the probe's answer came .* server"
  said=$(grep -o "the probe's answer came .* server" "$tmp/$1.err")
}

# stream_lead NAME: $lead is how many reads of a run nbdkit NAME (started
# with -v) answers before a read-ahead stream may start: 2 when its
# probe measured a distant server, 16 for a near one (loopback, unless
# the machine is busy enough that an answer took 2 ms or more).
stream_lead ()
{
  probe_said "$1"
  case $said in
    *"a near server") lead=16 ;;
    *) lead=2 ;;
  esac
}

# ----------------------------------------------------------------------
# read_in_turn FILE OFFSET COUNT SIZE: through $uri, COUNT reads of SIZE
# bytes one after another (one in flight) from OFFSET on, each compared
# with FILE's bytes there; the client's output goes to stdout.
read_in_turn ()
{
  FILE=$1 OFF=$2 N=$3 BS=$4 nbdsh -u "$uri" -c '
import os
data = open(os.environ["FILE"], "rb").read()
off, bs = int(os.environ["OFF"]), int(os.environ["BS"])
for i in range(int(os.environ["N"])):
    assert h.pread(bs, off) == data[off:off + bs], "read at %d differs" % off
    off += bs
h.shutdown()
'
}

# ----------------------------------------------------------------------
# gets_besides_probe NAME: $gets is the GETs in nginx's $tmp/access.log
# but the probe's of the first 8 KiB; the log is kept as
# $tmp/access-NAME.log.
gets_besides_probe ()
{
  local probe
  gets=$(grep -c ' GET ' "$tmp/access.log" || :)
  probe=$(grep -c ' GET bytes=0-8191 ' "$tmp/access.log" || :)
  gets=$((gets - probe))
  cp "$tmp/access.log" "$tmp/access-$1.log"
}

# For the tests of which origin sees the user's secrets, on the logs of
# start_nginx_named (one line per request, the secret headers in it).
#
# on_every LOG PATTERN SECRET...: every line of LOG that matches the
# extended regular expression PATTERN has every SECRET, and some do.
on_every ()
{
  local log=$1 pat=$2 s n bad
  shift 2
  n=$(grep -cE -- "$pat" "$log" || :)
  [ "$n" -ge 1 ] || { cat "$log" >&2; fail "$(basename "$log"): no $pat"; }
  for s in "$@"; do
    bad=$(grep -E -- "$pat" "$log" | grep -cvF -- "$s" || :)
    [ "$bad" -eq 0 ] || {
      cat "$log" >&2
      fail "$(basename "$log"): $bad of $n requests ($pat) without $s"
    }
  done
}

# on_none LOG SECRET...: no SECRET anywhere in LOG.
on_none ()
{
  local log=$1 s
  shift
  for s in "$@"; do
    if grep -qF -- "$s" "$log"; then
      grep -F -- "$s" "$log" >&2
      fail "$(basename "$log"): $s was sent to another origin"
    fi
  done
}

# ----------------------------------------------------------------------
# The tables of faults (plugin/test-curl-faults.sh and
# test-curl-http2-faults.sh): each case copies $tmp/orig.img into
# $tmp/out.img through nbdkit and judges the copy.
#
# fault_nbdkit NBDKIT-FLAGS... -- PLUGIN-ARGS...: nbdkit -r on the
# plugin, on $tmp/nbdkit.sock with its stderr in $tmp/nbdkit.err; sets
# $nbdkit_pid and $uri; false if nbdkit exits before it listens.
fault_nbdkit ()
{
  local n flags=()
  while [ "$1" != -- ]; do
    flags+=("$1")
    shift
  done
  shift
  rm -f "$tmp/nbdkit.sock" "$tmp/nbdkit.pid"
  ( exec "${NBDKIT[@]}" -f --exit-with-parent -r -U "$tmp/nbdkit.sock" \
         -P "$tmp/nbdkit.pid" "${flags[@]}" "$PLUGIN" "$@" ) \
    2>"$tmp/nbdkit.err" &
  nbdkit_pid=$!
  _pids+=("$nbdkit_pid")
  for ((n = 0; n < ready_tries; n++)); do
    [ -s "$tmp/nbdkit.pid" ] && [ -S "$tmp/nbdkit.sock" ] && break
    _alive "$nbdkit_pid" || { stop_pid "$nbdkit_pid"; return 1; }
    sleep 0.1
  done
  uri="nbd+unix:///?socket=$tmp/nbdkit.sock"
}

# fault_wrong_blocks: how many 4 KiB blocks of $tmp/out.img are neither
# the image's nor all zero (never written by nbdcopy).
fault_wrong_blocks ()
{
  "$PYTHON" - "$tmp/orig.img" "$tmp/out.img" <<'EOF2'
import sys
a = open(sys.argv[1], "rb").read()
try:
    b = open(sys.argv[2], "rb").read()
except FileNotFoundError:
    b = b""
bad = 0
for off in range(0, len(b), 4096):
    got = b[off:off + 4096]
    if got != a[off:off + 4096] and got.count(0) != len(got):
        bad += 1
print(bad)
EOF2
}

# fault_outcome EXPECT STATUS: what the copy (nbdcopy's exit STATUS)
# says about EXPECT, a line starting "BAD" if it is not that:
#   copy               nbdcopy exits 0 and the copy is byte-exact;
#   fail:WORDS[;...]   nbdkit or nbdcopy fails, nbdkit's stderr has each
#                      WORDS (case-insensitive), and every 4 KiB block
#                      nbdcopy wrote is the image's; never exit 0.
fault_outcome ()
{
  local expect=$1 st=$2 words w bad missing=
  case $expect in
    copy)
      if [ "$st" = 0 ] && cmp -s "$tmp/orig.img" "$tmp/out.img"; then
        echo "byte-exact copy"
      else
        echo "BAD: exit $st, copy $(cmp "$tmp/orig.img" "$tmp/out.img" \
                                      2>&1 | head -1)"
        cat "$tmp/nbdkit.err" >&2
      fi ;;
    fail:*)
      bad=$(fault_wrong_blocks)
      IFS=';' read -r -a words <<<"${expect#fail:}"
      for w in "${words[@]}"; do
        grep -qiF -- "$w" "$tmp/nbdkit.err" || missing+=" '$w'"
      done
      if [ "$st" = 0 ]; then
        if cmp -s "$tmp/orig.img" "$tmp/out.img"; then
          echo "BAD: exit 0"
        else
          echo "BAD: exit 0 with wrong bytes"
        fi
      elif [ "$bad" != 0 ]; then
        echo "BAD: failed ($st) but wrote $bad blocks of wrong bytes first"
      elif [ -n "$missing" ]; then
        echo "BAD: failed ($st) without$missing"
      else
        echo "failed ($st): $(grep -iF -m1 -- "${words[0]}" \
                                "$tmp/nbdkit.err" | cut -c1-200)"
      fi ;;
    *) echo "BAD: unknown EXPECT '$expect'" ;;
  esac
}
