/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * pipe-driver: the measuring end of bench/curlpipe-run.  It runs a
 * command with its standard input and output on pipes it holds, feeds
 * the input, reads the output, and prints one line of JSON.  The command
 * is what is measured (curlpipe, curl, relay); the driver does the same
 * work for every one of them, so differences are the command's.
 *
 *   pipe-driver MODE ARGS [OPTIONS] -- COMMAND ARGS...
 *
 *   bulk BYTES       write BYTES of the pattern as fast as the command
 *                    takes them, close, keep what it prints (the sink's
 *                    "ok BYTES"); with --echo, check that the output is
 *                    the input instead
 *   rtt BLOCK SECS   write BLOCK bytes, read them back, again, for SECS
 *   idle SECS        one 64-byte round trip, SECS of nothing, another
 *   burst BYTES      16 KiB every 100 us on a fixed schedule, reading
 *                    the echo back as it comes
 *
 * Options: --nonblock-stdin makes the command's standard input (the
 * pipe's read end) non-blocking before exec, as when the program before
 * it in a pipeline set O_NONBLOCK; --stall SECS (default 30) is how long
 * no progress at all is allowed before the command is killed and the
 * run is reported as "stalled" (exit 3).  Every byte that comes back
 * (all modes but bulk without --echo) is checked against the pattern;
 * a mismatch prints its offset and exits 1.
 *
 * The pattern is pattern.h's, shared with stream-server.c:
 * byte i of a stream is (i * 7 + i / 65536) & 0xff.
 *
 * Linux only: the command's CPU time and context switches come from
 * /proc, and the command is killed if the driver dies.
 */

#define _GNU_SOURCE

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pattern.h"

#define READ_SIZE (256 * 1024)
#define MAX_WRITE (64 * 1024)
#define CAPTURE_MAX 256
#define BURST_BLOCK (16 * 1024)
#define BURST_INTERVAL_NS 100000

enum result { RES_OK = 0, RES_ERROR = 1, RES_STALLED = 3 };

static pid_t child = -1;
static int to_child = -1, from_child = -1;
static bool from_eof;
static _Atomic uint64_t sent;
/* Raised to the end of a write before it is made: in burst mode the
 * echo of a write can come back before the producer thread has added
 * it to sent, so "more output than input" is judged against this.
 */
static _Atomic uint64_t write_limit;
static uint64_t received;
static double stall_s = 30;
static unsigned char rbuf[READ_SIZE];
static char captured[CAPTURE_MAX + 1];
static size_t captured_len;
static char err_msg[256];
static bool mismatch;
static uint64_t mismatch_offset;

static double
now (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/* Points iov at the pattern bytes [off, off + len), at most 3 pieces. */
static int
pattern_iov (struct iovec *iov, uint64_t off, size_t len)
{
  int n = 0;

  while (len > 0 && n < 3) {
    size_t phase = pattern_phase (off);
    size_t k = PATTERN_BLOCK - (size_t) (off % PATTERN_BLOCK);
    if (k > len)
      k = len;
    iov[n].iov_base = pattern_table + phase;
    iov[n].iov_len = k;
    n++;
    off += k;
    len -= k;
  }
  return n;
}

static void
set_nonblock (int fd)
{
  int flags = fcntl (fd, F_GETFL);

  if (flags == -1 || fcntl (fd, F_SETFL, flags | O_NONBLOCK) == -1) {
    perror ("pipe-driver: fcntl");
    exit (EXIT_FAILURE);
  }
}

static void
spawn (char **argv, bool nonblock_stdin)
{
  int in[2], out[2];

  if (pipe2 (in, O_CLOEXEC) == -1 || pipe2 (out, O_CLOEXEC) == -1) {
    perror ("pipe-driver: pipe2");
    exit (EXIT_FAILURE);
  }
  child = fork ();
  if (child == -1) {
    perror ("pipe-driver: fork");
    exit (EXIT_FAILURE);
  }
  if (child == 0) {
    /* A driver that dies (timeout, Ctrl-C) must not leave the command
     * running on a benchmark machine.
     */
    prctl (PR_SET_PDEATHSIG, SIGKILL);
    signal (SIGPIPE, SIG_DFL);
    if (dup2 (in[0], STDIN_FILENO) == -1 ||
        dup2 (out[1], STDOUT_FILENO) == -1)
      _exit (127);
    if (nonblock_stdin)
      set_nonblock (STDIN_FILENO);
    execvp (argv[0], argv);
    fprintf (stderr, "pipe-driver: %s: %s\n", argv[0], strerror (errno));
    _exit (127);
  }
  close (in[0]);
  close (out[1]);
  to_child = in[1];
  from_child = out[0];
  set_nonblock (to_child);
  set_nonblock (from_child);
}

/* utime + stime of the whole process (all threads), in seconds. */
static double
child_cpu (void)
{
  char path[64], text[1024], *p;
  unsigned long long ut, st;
  FILE *fp;
  size_t n;

  snprintf (path, sizeof path, "/proc/%d/stat", (int) child);
  fp = fopen (path, "r");
  if (!fp)
    return -1;
  n = fread (text, 1, sizeof text - 1, fp);
  fclose (fp);
  text[n] = '\0';
  p = strrchr (text, ')');
  if (!p ||
      sscanf (p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
              &ut, &st) != 2)
    return -1;
  return (double) (ut + st) / (double) sysconf (_SC_CLK_TCK);
}

/* Voluntary plus involuntary context switches over all threads. */
static long long
child_ctxsw (void)
{
  char path[300], line[256];
  struct dirent *d;
  long long total = 0;
  DIR *dir;

  snprintf (path, sizeof path, "/proc/%d/task", (int) child);
  dir = opendir (path);
  if (!dir)
    return -1;
  for (;;) {
    FILE *fp;
    d = readdir (dir);
    if (!d)
      break;
    if (d->d_name[0] == '.')
      continue;
    snprintf (path, sizeof path, "/proc/%d/task/%.20s/status",
              (int) child, d->d_name);
    fp = fopen (path, "r");
    if (!fp)
      continue;
    while (fgets (line, sizeof line, fp)) {
      long long v;
      if (sscanf (line, "voluntary_ctxt_switches: %lld", &v) == 1 ||
          sscanf (line, "nonvoluntary_ctxt_switches: %lld", &v) == 1)
        total += v;
    }
    fclose (fp);
  }
  closedir (dir);
  return total;
}

/* Takes what the command printed: checked against the pattern, or kept
 * (the first CAPTURE_MAX bytes).  Returns false on a mismatch.
 */
static bool
take_output (const unsigned char *buf, size_t len, bool verify)
{
  if (verify) {
    size_t i = pattern_check (buf, received, len);
    uint64_t limit = write_limit;
    if (i < len || received + len > limit) {
      mismatch = true;
      mismatch_offset = received + (i < len ? i : limit - received);
      snprintf (err_msg, sizeof err_msg,
                i < len ? "output differs from the input at offset %" PRIu64
                : "more output than input at offset %" PRIu64,
                mismatch_offset);
      return false;
    }
  }
  else {
    size_t k = CAPTURE_MAX - captured_len;
    if (k > len)
      k = len;
    memcpy (captured + captured_len, buf, k);
    captured_len += k;
  }
  received += len;
  return true;
}

/* Writes the pattern up to stream offset send_to while reading output,
 * until the output reaches recv_to as well.  Returns RES_OK, RES_ERROR
 * (err_msg says why) or RES_STALLED.
 */
static enum result
pump (uint64_t send_to, uint64_t recv_to, bool verify)
{
  double last = now ();

  while (sent < send_to || received < recv_to) {
    struct pollfd pfd[2];
    int n = 0, w = -1, r = -1, ret;
    bool progress = false;

    if (sent < send_to) {
      pfd[n].fd = to_child;
      pfd[n].events = POLLOUT;
      w = n++;
    }
    if (!from_eof) {
      pfd[n].fd = from_child;
      pfd[n].events = POLLIN;
      r = n++;
    }
    ret = poll (pfd, (nfds_t) n, 100);
    if (ret == -1 && errno != EINTR) {
      snprintf (err_msg, sizeof err_msg, "poll: %s", strerror (errno));
      return RES_ERROR;
    }
    if (ret > 0 && w >= 0 && pfd[w].revents) {
      struct iovec iov[3];
      uint64_t left = send_to - sent;
      ssize_t k;
      size_t len = left > MAX_WRITE ? MAX_WRITE : (size_t) left;
      int cnt = pattern_iov (iov, sent, len);
      write_limit = sent + len;
      k = writev (to_child, iov, cnt);
      if (k > 0) {
        sent += (uint64_t) k;
        progress = true;
      }
      else if (k < 0 && errno != EAGAIN && errno != EINTR) {
        snprintf (err_msg, sizeof err_msg,
                  "writing the command's input at offset %" PRIu64 ": %s",
                  (uint64_t) sent, strerror (errno));
        return RES_ERROR;
      }
    }
    if (ret > 0 && r >= 0 && pfd[r].revents) {
      ssize_t k = read (from_child, rbuf, sizeof rbuf);
      if (k > 0) {
        if (!take_output (rbuf, (size_t) k, verify))
          return RES_ERROR;
        progress = true;
      }
      else if (k == 0) {
        from_eof = true;
        if (received < recv_to) {
          snprintf (err_msg, sizeof err_msg,
                    "the command's output ended at offset %" PRIu64,
                    received);
          return RES_ERROR;
        }
      }
      else if (errno != EAGAIN && errno != EINTR) {
        snprintf (err_msg, sizeof err_msg, "reading the output: %s",
                  strerror (errno));
        return RES_ERROR;
      }
    }
    if (progress)
      last = now ();
    else if (now () - last > stall_s) {
      snprintf (err_msg, sizeof err_msg,
                "no progress for %.0f s (input at %" PRIu64
                ", output at %" PRIu64 ")",
                stall_s, (uint64_t) sent, received);
      return RES_STALLED;
    }
  }
  return RES_OK;
}

/* Closes the input, reads the output to EOF and waits for the command,
 * each bounded by the stall time; the command is killed if it does not
 * finish.  Returns its exit status (128 + signal if killed by one).
 */
static int
finish (bool verify, struct rusage *ru, enum result *res)
{
  double start;
  int status = 0;
  pid_t p;

  if (to_child >= 0) {
    close (to_child);
    to_child = -1;
  }
  if (*res == RES_OK) {
    start = now ();
    while (!from_eof && now () - start <= stall_s) {
      struct pollfd pfd = { .fd = from_child, .events = POLLIN };
      ssize_t k;
      if (poll (&pfd, 1, 100) <= 0)
        continue;
      k = read (from_child, rbuf, sizeof rbuf);
      if (k == 0)
        from_eof = true;
      else if (k > 0) {
        if (!take_output (rbuf, (size_t) k, verify)) {
          *res = RES_ERROR;
          break;
        }
        start = now ();
      }
      else if (errno != EAGAIN && errno != EINTR)
        break;
    }
    if (!from_eof && *res == RES_OK) {
      snprintf (err_msg, sizeof err_msg,
                "the command's output did not end within %.0f s of its "
                "input's end", stall_s);
      *res = RES_STALLED;
    }
  }

  if (*res != RES_OK)
    kill (child, SIGKILL);
  start = now ();
  for (;;) {
    p = wait4 (child, &status, *res == RES_OK ? WNOHANG : 0, ru);
    if (p == child)
      break;
    if (p == -1 && errno != EINTR) {
      perror ("pipe-driver: wait4");
      exit (EXIT_FAILURE);
    }
    if (*res == RES_OK && now () - start > stall_s) {
      kill (child, SIGKILL);
      snprintf (err_msg, sizeof err_msg,
                "the command did not exit within %.0f s", stall_s);
      *res = RES_STALLED;
      continue;
    }
    {
      struct timespec ts = { .tv_nsec = 5 * 1000 * 1000 };
      nanosleep (&ts, NULL);
    }
  }
  close (from_child);
  from_child = -1;
  if (WIFEXITED (status))
    return WEXITSTATUS (status);
  return 128 + WTERMSIG (status);
}

static const char *
status_name (enum result res)
{
  if (mismatch)
    return "mismatch";
  switch (res) {
  case RES_OK: return "ok";
  case RES_STALLED: return "stalled";
  default: return "error";
  }
}

static void
print_json_string (const char *s, size_t len)
{
  size_t i;

  putchar ('"');
  for (i = 0; i < len; i++) {
    unsigned char ch = (unsigned char) s[i];
    if (ch == '"' || ch == '\\')
      printf ("\\%c", ch);
    else if (ch < 0x20 || ch >= 0x7f)
      printf ("\\u%04x", ch);
    else
      putchar (ch);
  }
  putchar ('"');
}

/* The fields every line ends with. */
static void
print_tail (int exit_status, enum result res)
{
  printf (",\"exit\":%d,\"status\":\"%s\"", exit_status, status_name (res));
  if (mismatch)
    printf (",\"offset\":%" PRIu64, mismatch_offset);
  if (err_msg[0]) {
    printf (",\"error\":");
    print_json_string (err_msg, strlen (err_msg));
  }
  printf ("}\n");
  fflush (stdout);
  if (err_msg[0])
    fprintf (stderr, "pipe-driver: %s\n", err_msg);
}

static int
exit_code (enum result res, int exit_status)
{
  if (res == RES_STALLED)
    return 3;
  if (res != RES_OK || exit_status != 0)
    return 1;
  return 0;
}

static int
run_bulk (uint64_t bytes, bool echo)
{
  struct rusage ru;
  double t0 = now (), secs, cpu;
  enum result res;
  int status;
  char expect[64];
  size_t out_len;

  res = pump (bytes, echo ? bytes : 0, echo);
  status = finish (echo, &ru, &res);
  secs = now () - t0;
  cpu = (double) ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
    (double) ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;

  out_len = captured_len;
  while (out_len > 0 && captured[out_len - 1] == '\n')
    out_len--;
  snprintf (expect, sizeof expect, "ok %" PRIu64, bytes);
  if (res == RES_OK && !echo &&
      (out_len != strlen (expect) || memcmp (captured, expect, out_len))) {
    snprintf (err_msg, sizeof err_msg, "the output is not \"%s\"", expect);
    res = RES_ERROR;
  }
  if (res == RES_OK && echo && received != bytes) {
    snprintf (err_msg, sizeof err_msg, "%" PRIu64 " bytes came back",
              received);
    res = RES_ERROR;
  }

  printf ("{\"mode\":\"bulk\",\"bytes\":%" PRIu64 ",\"seconds\":%.4f,"
          "\"mib_per_s\":%.1f,\"child_cpu_s\":%.3f,\"echo\":%s,"
          "\"output\":",
          bytes, secs, (double) bytes / 1048576.0 / secs, cpu,
          echo ? "true" : "false");
  print_json_string (captured, out_len);
  print_tail (status, res);
  return exit_code (res, status);
}

static int
run_rtt (uint64_t block, double seconds)
{
  struct rusage ru;
  double t0, t1, cpu0, cpu1, secs, cpu;
  uint64_t trips = 0;
  enum result res;
  int status;

  /* One round trip outside the window: connecting is not measured. */
  res = pump (block, block, true);
  t0 = now ();
  cpu0 = child_cpu ();
  t1 = t0;
  while (res == RES_OK && t1 - t0 < seconds) {
    res = pump (sent + block, sent + block, true);
    if (res == RES_OK)
      trips++;
    t1 = now ();
  }
  cpu1 = child_cpu ();
  status = finish (true, &ru, &res);
  secs = t1 - t0;
  cpu = cpu1 - cpu0;

  printf ("{\"mode\":\"rtt\",\"block\":%" PRIu64 ",\"seconds\":%.3f,"
          "\"round_trips\":%" PRIu64 ",\"per_s\":%.1f,"
          "\"child_cpu_s\":%.3f,\"rt_per_cpu_s\":",
          block, secs, trips, secs > 0 ? (double) trips / secs : 0.0, cpu);
  /* CPU time comes in clock ticks; under one tick the quotient means
   * nothing, so it is given against one tick and flagged.
   */
  if (cpu > 0)
    printf ("%.1f", (double) trips / cpu);
  else
    printf ("%.1f,\"cpu_below_tick\":true",
            (double) trips * (double) sysconf (_SC_CLK_TCK));
  print_tail (status, res);
  return exit_code (res, status);
}

static int
run_idle (double seconds)
{
  struct rusage ru;
  struct timespec ts;
  double t0, t1, cpu0, cpu1;
  long long sw0, sw1;
  enum result res;
  int status;

  res = pump (64, 64, true);
  t0 = now ();
  cpu0 = child_cpu ();
  sw0 = child_ctxsw ();
  if (res == RES_OK) {
    ts.tv_sec = (time_t) seconds;
    ts.tv_nsec = (long) ((seconds - (double) ts.tv_sec) * 1e9);
    while (clock_nanosleep (CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
      ;
  }
  cpu1 = child_cpu ();
  sw1 = child_ctxsw ();
  t1 = now ();
  if (res == RES_OK)
    res = pump (sent + 64, sent + 64, true);
  status = finish (true, &ru, &res);

  printf ("{\"mode\":\"idle\",\"seconds\":%.3f,\"child_cpu_s\":%.3f,"
          "\"cpu_percent\":%.2f,\"ctxsw\":%lld,\"wakeups_per_s\":%.1f",
          t1 - t0, cpu1 - cpu0, 100 * (cpu1 - cpu0) / (t1 - t0),
          sw1 - sw0, (double) (sw1 - sw0) / (t1 - t0));
  print_tail (status, res);
  return exit_code (res, status);
}

struct burst {
  uint64_t bytes;
  struct timespec start;
  double max_behind;
  atomic_bool stop;
  atomic_int result;
};

static void
ts_add_ns (struct timespec *ts, long long ns)
{
  ts->tv_sec += (time_t) (ns / 1000000000);
  ts->tv_nsec += (long) (ns % 1000000000);
  if (ts->tv_nsec >= 1000000000) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000;
  }
}

/* The producer: block k is due at start + k * 100 us.  A late block is
 * written at once, so the schedule is caught up when the command lets
 * it; how far behind it fell is recorded.
 */
static void *
producer (void *arg)
{
  struct burst *b = arg;
  uint64_t k = 0;

  while (sent < b->bytes && !atomic_load (&b->stop)) {
    struct timespec due = b->start, t;
    uint64_t end = sent + BURST_BLOCK;
    double behind, last;

    if (end > b->bytes)
      end = b->bytes;
    ts_add_ns (&due, (long long) (k * BURST_INTERVAL_NS));
    while (clock_nanosleep (CLOCK_MONOTONIC, TIMER_ABSTIME, &due, NULL) ==
           EINTR)
      ;
    clock_gettime (CLOCK_MONOTONIC, &t);
    behind = (double) (t.tv_sec - due.tv_sec) +
      (double) (t.tv_nsec - due.tv_nsec) / 1e9;
    if (behind > b->max_behind)
      b->max_behind = behind;

    last = now ();
    while (sent < end && !atomic_load (&b->stop)) {
      struct pollfd pfd = { .fd = to_child, .events = POLLOUT };
      struct iovec iov[3];
      int cnt = pattern_iov (iov, sent, (size_t) (end - sent));
      ssize_t w;
      write_limit = end;
      w = writev (to_child, iov, cnt);
      if (w > 0) {
        sent += (uint64_t) w;
        last = now ();
        continue;
      }
      if (w < 0 && errno != EAGAIN && errno != EINTR) {
        snprintf (err_msg, sizeof err_msg,
                  "writing the command's input at offset %" PRIu64 ": %s",
                  (uint64_t) sent, strerror (errno));
        atomic_store (&b->result, RES_ERROR);
        return NULL;
      }
      if (now () - last > stall_s) {
        snprintf (err_msg, sizeof err_msg,
                  "the command took no input for %.0f s at offset %"
                  PRIu64, stall_s, (uint64_t) sent);
        atomic_store (&b->result, RES_STALLED);
        return NULL;
      }
      poll (&pfd, 1, 100);
    }
    k++;
  }
  return NULL;
}

static int
run_burst (uint64_t bytes)
{
  struct burst b = { .bytes = bytes };
  struct rusage ru;
  pthread_t thread;
  double t0, t1, cpu0, cpu1, last, secs, sched;
  enum result res = RES_OK;
  int status, err = 0;
  bool started = false;

  /* Connect first, as in the other modes, then start from offset 0 of
   * the schedule with what is left.
   */
  res = pump (64, 64, true);
  b.bytes = bytes + 64;
  clock_gettime (CLOCK_MONOTONIC, &b.start);
  t0 = now ();
  cpu0 = child_cpu ();
  if (res == RES_OK) {
    err = pthread_create (&thread, NULL, producer, &b);
    if (err != 0) {
      errno = err;
      perror ("pipe-driver: pthread_create");
      exit (EXIT_FAILURE);
    }
    started = true;
  }
  last = t0;
  t1 = t0;
  while (res == RES_OK && received < b.bytes) {
    struct pollfd pfd = { .fd = from_child, .events = POLLIN };
    ssize_t k;

    if (atomic_load (&b.result) != RES_OK)
      break;
    if (poll (&pfd, 1, 100) > 0) {
      k = read (from_child, rbuf, sizeof rbuf);
      if (k > 0) {
        if (!take_output (rbuf, (size_t) k, true))
          res = RES_ERROR;
        last = t1 = now ();
        continue;
      }
      if (k == 0) {
        from_eof = true;
        snprintf (err_msg, sizeof err_msg,
                  "the command's output ended at offset %" PRIu64, received);
        res = RES_ERROR;
      }
      else if (errno != EAGAIN && errno != EINTR) {
        snprintf (err_msg, sizeof err_msg, "reading the output: %s",
                  strerror (errno));
        res = RES_ERROR;
      }
    }
    if (now () - last > stall_s) {
      snprintf (err_msg, sizeof err_msg,
                "nothing came back for %.0f s (input at %" PRIu64
                ", output at %" PRIu64 ")",
                stall_s, (uint64_t) sent, received);
      res = RES_STALLED;
    }
  }
  cpu1 = child_cpu ();
  if (started) {
    if (res != RES_OK)
      atomic_store (&b.stop, true);
    pthread_join (thread, NULL);
    if (res == RES_OK)
      res = (enum result) atomic_load (&b.result);
  }
  status = finish (true, &ru, &res);

  secs = t1 - t0;
  sched = (double) BURST_BLOCK / 1048576.0 / (BURST_INTERVAL_NS / 1e9);
  printf ("{\"mode\":\"burst\",\"bytes\":%" PRIu64 ",\"block\":%d,"
          "\"interval_us\":%d,\"seconds\":%.3f,\"received\":%" PRIu64 ","
          "\"schedule_mib_per_s\":%.2f,\"achieved_mib_per_s\":%.2f,"
          "\"ratio\":%.4f,\"max_behind_ms\":%.2f,\"child_cpu_s\":%.3f,"
          "\"in_order\":%s",
          bytes, BURST_BLOCK, BURST_INTERVAL_NS / 1000, secs, received,
          sched, secs > 0 ? (double) received / 1048576.0 / secs : 0.0,
          secs > 0 ? (double) received / 1048576.0 / secs / sched : 0.0,
          b.max_behind * 1000, cpu1 - cpu0,
          !mismatch && received == b.bytes ? "true" : "false");
  print_tail (status, res);
  return exit_code (res, status);
}

static void
usage (void)
{
  fprintf (stderr,
           "usage: pipe-driver bulk BYTES [--echo] [OPTIONS] -- COMMAND...\n"
           "       pipe-driver rtt BLOCK SECONDS [OPTIONS] -- COMMAND...\n"
           "       pipe-driver idle SECONDS [OPTIONS] -- COMMAND...\n"
           "       pipe-driver burst BYTES [OPTIONS] -- COMMAND...\n"
           "options: --nonblock-stdin  --stall SECONDS\n"
           "BYTES may end in K, M or G (powers of 1024).\n");
  exit (2);
}

static uint64_t
parse_size (const char *s)
{
  char *end;
  unsigned long long v;

  errno = 0;
  v = strtoull (s, &end, 10);
  if (errno || end == s || *s == '-')
    usage ();
  switch (*end) {
  case 'K': case 'k': v <<= 10; end++; break;
  case 'M': case 'm': v <<= 20; end++; break;
  case 'G': case 'g': v <<= 30; end++; break;
  }
  if (*end != '\0' || v == 0 || v > ((uint64_t) 1 << 50))
    usage ();
  return v;
}

static double
parse_seconds (const char *s)
{
  char *end;
  double v = strtod (s, &end);

  if (end == s || *end != '\0' || !(v > 0) || v > 86400)
    usage ();
  return v;
}

int
main (int argc, char *argv[])
{
  const char *mode;
  uint64_t size = 0;
  double seconds = 0;
  bool nonblock = false, echo = false;
  int i = 2;

  if (argc < 3)
    usage ();
  mode = argv[1];
  if (strcmp (mode, "bulk") == 0 || strcmp (mode, "burst") == 0)
    size = parse_size (argv[i++]);
  else if (strcmp (mode, "rtt") == 0) {
    if (argc < 4)
      usage ();
    size = parse_size (argv[i++]);
    seconds = parse_seconds (argv[i++]);
  }
  else if (strcmp (mode, "idle") == 0)
    seconds = parse_seconds (argv[i++]);
  else
    usage ();

  for (; i < argc && strcmp (argv[i], "--") != 0; i++) {
    if (strcmp (argv[i], "--nonblock-stdin") == 0)
      nonblock = true;
    else if (strcmp (argv[i], "--echo") == 0 && strcmp (mode, "bulk") == 0)
      echo = true;
    else if (strcmp (argv[i], "--stall") == 0 && i + 1 < argc)
      stall_s = parse_seconds (argv[++i]);
    else
      usage ();
  }
  if (i + 1 >= argc)
    usage ();

  pattern_init ("pipe-driver");
  signal (SIGPIPE, SIG_IGN);
  spawn (&argv[i + 1], nonblock);

  if (strcmp (mode, "bulk") == 0)
    return run_bulk (size, echo);
  if (strcmp (mode, "rtt") == 0)
    return run_rtt (size, seconds);
  if (strcmp (mode, "idle") == 0)
    return run_idle (seconds);
  return run_burst (size);
}
