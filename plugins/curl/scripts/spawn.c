/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * One run of a user's script (header-script, cookie-script, url-script;
 * script.c decides when): its output, or an error that says why not.
 *
 * The script runs with /bin/sh -c.  Its environment has $url, and
 * $iteration, 0 for the first run as in upstream nbdkit's plugin.  It has
 * default signal handling, and none of nbdkit's descriptors but its
 * standard ones.  Not every descriptor that nbdkit and libcurl open is
 * close-on-exec, and a background process of the script would keep such a
 * connection open.  The script must exit 0 within timeout= seconds, which
 * bound its whole run.  That is the reading of its output, and then its
 * exit: a script may close its output and go on running.  waitid has no
 * time limit.  So a thread that lives as long as the run waits in it, and
 * closes a pipe when the script has exited; the run polls that pipe.
 *
 * The script runs in a process group of its own.  When it fails, prints too
 * much or runs out of time, the whole group is killed.  So nothing it
 * started goes on running or holds nbdkit's stderr open.  Only then is the
 * script reaped: until then its PID, the group's ID, cannot be reused.  A
 * process that leaves the group (setsid) is beyond reach.
 */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nbdkit-plugin.h>

#include "scripts/scripts.h"

extern char **environ;

/* Output beyond this is a script gone wrong, not a header set. */
#define MAX_OUTPUT (64 * 1024)

/* Milliseconds left of timeout= seconds from start (clock_ns); 0
 * once it is over.
 */
static int
ms_left (int64_t start)
{
  int64_t left = start + cfg.timeout * INT64_C (1000000000) - clock_ns ();

  return left > 0 ? (int) (left / 1000000) + 1 : 0;
}

/* Wait until fd is readable (or at its end), for what is left of
 * timeout= from start.  1 when readable, 0 when the time is over, -1
 * (errno set) when poll fails, -2 when nbdkit is shutting down or the
 * request's client went away (looked at once a second: a renewal that
 * hangs must not hold up nbdkit's exit for timeout= seconds).
 */
static int
wait_readable (int fd, int64_t start)
{
  struct pollfd pfd = { .fd = fd, .events = POLLIN };
  int left_ms, r;

  for (;;) {
    left_ms = ms_left (start);
    if (left_ms == 0)
      return 0;
    r = poll (&pfd, 1, left_ms < 1000 ? left_ms : 1000);
    if (r > 0)
      return 1;
    if (r == -1 && errno != EINTR)
      return -1;
    if (object_stopping ())
      return -2;
  }
}

/* waitid has no time limit, so it runs in a thread of its own, which
 * says that the script has exited by closing fd, and the caller polls
 * for that with what is left of timeout=.  WNOWAIT leaves the script
 * unreaped: see end_script.
 */
struct exit_waiter {
  pid_t pid;
  int fd;                       /* closed once the script has exited */
  int r, err;                   /* waitid's result and errno */
  siginfo_t info;               /* how it exited */
};

static void *
wait_exit (void *arg)
{
  struct exit_waiter *w = arg;

  do
    w->r = waitid (P_PID, w->pid, &w->info, WEXITED | WNOWAIT);
  while (w->r == -1 && errno == EINTR);
  w->err = errno;
  close (w->fd);
  return NULL;
}

/* A pipe whose ends are closed on exec, so that no other script (or
 * anything nbdkit runs) inherits them.  Without pipe2, a spawn in
 * another thread between pipe and fcntl could; close_others still
 * closes them in the script.
 */
static int
cloexec_pipe (int fds[2])
{
#ifdef HAVE_PIPE2
  return pipe2 (fds, O_CLOEXEC);
#else
  if (pipe (fds) == -1)
    return -1;
  fcntl (fds[0], F_SETFD, FD_CLOEXEC);
  fcntl (fds[1], F_SETFD, FD_CLOEXEC);
  return 0;
#endif
}

/* A run's two pipes: the script's output, and one that the thread
 * waiting for its exit closes then.  -1, reported, if either fails.
 */
static int
open_pipes (const char *what, int fds[2], int exitfds[2])
{
  if (cloexec_pipe (fds) == -1) {
    nbdkit_error ("%s: pipe: %m", what);
    return -1;
  }
  if (cloexec_pipe (exitfds) == -1) {
    nbdkit_error ("%s: pipe: %m", what);
    close (fds[0]);
    close (fds[1]);
    return -1;
  }
  return 0;
}

/* The script gets standard input, output and error only: not nbdkit's
 * sockets, libcurl's connections or another script's pipes.  Where the
 * spawn cannot close the rest itself, every descriptor above standard
 * error open now is marked close-on-exec (one opened by another thread
 * after this look may still reach the script).
 */
static void
close_others (posix_spawn_file_actions_t *fa)
{
#ifdef HAVE_POSIX_SPAWN_FILE_ACTIONS_ADDCLOSEFROM_NP
  posix_spawn_file_actions_addclosefrom_np (fa, STDERR_FILENO + 1);
#else
  long max = sysconf (_SC_OPEN_MAX);
  int fd;

  if (max < 0 || max > 65536)
    max = 65536;
  for (fd = STDERR_FILENO + 1; fd < max; fd++)
    fcntl (fd, F_SETFD, FD_CLOEXEC);
#endif
}

/* The script's environment: nbdkit's, with $url and $iteration
 * replaced.  NULL when out of memory; free *envp, *url_env, *iter_env.
 */
static char **
script_env (unsigned iteration, char **url_env, char **iter_env)
{
  char **envp;
  size_t n, len;

  for (n = 0; environ[n] != NULL; n++)
    ;
  envp = calloc (n + 3, sizeof envp[0]);
  if (envp == NULL ||
      asprintf (url_env, "url=%s", cfg.url ? cfg.url : "") == -1 ||
      asprintf (iter_env, "iteration=%u", iteration) == -1)
    return envp;
  for (n = 0, len = 0; environ[n] != NULL; n++)
    if (strncmp (environ[n], "url=", 4) != 0 &&
        strncmp (environ[n], "iteration=", 10) != 0)
      envp[len++] = environ[n];
  envp[len++] = *url_env;
  envp[len++] = *iter_env;
  envp[len] = NULL;
  return envp;
}

/* Start "sh -c SCRIPT" with its standard output on out_fd, standard
 * input /dev/null, no other descriptor, no blocked or ignored signal,
 * and a process group of its own, so that it can be killed with
 * everything it started.  posix_spawn's error number, 0 on success.
 */
static int
spawn_sh (const char *script, char **envp, int out_fd, pid_t *pid)
{
  char *argv[] = { (char *) "sh", (char *) "-c", (char *) script, NULL };
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  sigset_t none, all;
  int err;

  posix_spawn_file_actions_init (&fa);
  posix_spawn_file_actions_adddup2 (&fa, out_fd, STDOUT_FILENO);
  posix_spawn_file_actions_addopen (&fa, STDIN_FILENO, "/dev/null",
                                    O_RDONLY, 0);
  close_others (&fa);
  sigemptyset (&none);
  sigfillset (&all);
  posix_spawnattr_init (&attr);
  posix_spawnattr_setsigmask (&attr, &none);
  posix_spawnattr_setsigdefault (&attr, &all);
  posix_spawnattr_setpgroup (&attr, 0);
  posix_spawnattr_setflags (&attr, POSIX_SPAWN_SETSIGMASK |
                            POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  err = posix_spawn (pid, "/bin/sh", &fa, &attr, argv, envp);
  posix_spawnattr_destroy (&attr);
  posix_spawn_file_actions_destroy (&fa);
  return err;
}

/* How a run of a script went. */
struct outcome {
  char *buf;                    /* its output (NULL: out of memory) */
  size_t len;
  bool timed_out, stopped, exited;
  const char *failed;           /* a call that failed, its errno in err */
  int err;
  siginfo_t info;               /* how it exited, once reaped */
};

/* Read all the script's output (its stderr goes to nbdkit's) within
 * timeout= seconds of start, then wait, within the same time, for its
 * exit: the end of its output is not its exit, since a script may close
 * its standard output and go on running.
 */
static void
read_output (int out_fd, int exit_fd, int64_t start,
             struct outcome *o)
{
  ssize_t got;
  int w;

  o->buf = malloc (MAX_OUTPUT + 1);
  while (o->buf != NULL && o->failed == NULL && o->len < MAX_OUTPUT) {
    w = wait_readable (out_fd, start);
    if (w == 0 || w == -2) {
      o->timed_out = w == 0;
      o->stopped = w == -2;
      return;
    }
    if (w == -1) {
      o->failed = "poll";
      o->err = errno;
      return;
    }
    got = read (out_fd, o->buf + o->len, MAX_OUTPUT - o->len);
    if (got == -1 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (got == -1) {
      o->failed = "read";
      o->err = errno;
      return;
    }
    if (got == 0)
      break;
    o->len += got;
  }
  if (o->buf == NULL || o->failed != NULL || o->len >= MAX_OUTPUT)
    return;
  w = wait_readable (exit_fd, start);
  if (w == 1)
    o->exited = true;
  else if (w == 0)
    o->timed_out = true;
  else if (w == -2)
    o->stopped = true;
  else {
    o->failed = "poll";
    o->err = errno;
  }
}

/* Kill the script's whole group unless it exited well, and reap it.
 * The group is killed before the script is reaped: until then its PID,
 * the group's ID, cannot be reused, so this reaches no one else.  If it
 * is still running the waiter (waiting: its thread runs) returns once it
 * is dead.
 */
static void
end_script (pid_t pid, bool waiting, pthread_t thread,
            const struct exit_waiter *waiter, struct outcome *o)
{
  bool ok;
  int w;

  if (!o->exited)
    kill (-pid, SIGKILL);
  if (waiting)
    pthread_join (thread, NULL);
  if (o->exited && waiter->r == -1 && o->failed == NULL) {
    o->failed = "waitid";
    o->err = waiter->err;
  }
  ok = o->exited && waiter->r == 0 && waiter->info.si_code == CLD_EXITED &&
    waiter->info.si_status == 0;
  if (o->exited && waiter->r == 0 && !ok)
    kill (-pid, SIGKILL);       /* what a failed script left behind */
  /* Only after its exit or SIGKILL, so this does not block for long. */
  do
    w = waitid (P_PID, pid, &o->info, WEXITED);
  while (w == -1 && errno == EINTR);
  if (w == -1 && o->failed == NULL) {
    o->failed = "waitid";
    o->err = errno;
  }
}

/* The message for a run that failed; 0 and the output in *out when it
 * did not.
 */
static int
judge_run (const char *what, const char *script, struct outcome *o,
           char **out)
{
  if (o->buf == NULL)
    nbdkit_error ("%s: out of memory", what);
  else if (o->failed)
    nbdkit_error ("%s: %s: %s: %s", what, script, o->failed,
                  strerror (o->err));
  else if (o->timed_out)
    nbdkit_error ("%s: %s: did not finish within %u seconds (timeout=)",
                  what, script, cfg.timeout);
  else if (o->stopped)
    nbdkit_error ("%s: %s: stopped: nbdkit is shutting down or the client "
                  "disconnected", what, script);
  else if (o->len >= MAX_OUTPUT)
    nbdkit_error ("%s: more than %d bytes of output", what, MAX_OUTPUT);
  else if (o->info.si_code == CLD_EXITED && o->info.si_status != 0)
    nbdkit_error ("%s: %s: exited with status %d", what, script,
                  o->info.si_status);
  else if (o->info.si_code != CLD_EXITED)
    nbdkit_error ("%s: %s: killed by signal %d", what, script,
                  o->info.si_status);
  /* Its output is text: a NUL would cut a header, a cookie or the URL
   * short without a word.
   */
  else if (memchr (o->buf, '\0', o->len) != NULL)
    nbdkit_error ("%s: a NUL byte in its output", what);
  else {
    o->buf[o->len] = '\0';
    *out = o->buf;
    o->buf = NULL;
    return 0;
  }
  return -1;
}

/* Run "sh -c SCRIPT" (WHAT names it in messages) with $iteration set
 * to ITERATION; its standard output in *out.  Reports errors.
 */
int
spawn_run (const char *what, const char *script, unsigned iteration,
           char **out)
{
  CLEANUP_FREE char *url_env = NULL;
  CLEANUP_FREE char *iter_env = NULL;
  CLEANUP_FREE char **envp = NULL;
  struct outcome o = { .failed = NULL };
  struct exit_waiter waiter = { .r = -1 };
  bool waiting = false;
  pthread_t thread;
  int64_t start;
  int fds[2], exitfds[2], err, r;
  pid_t pid;

  envp = script_env (iteration, &url_env, &iter_env);
  if (envp == NULL || url_env == NULL || iter_env == NULL) {
    nbdkit_error ("%s: out of memory", what);
    return -1;
  }
  if (open_pipes (what, fds, exitfds) == -1)
    return -1;
  start = clock_ns ();
  err = spawn_sh (script, envp, fds[1], &pid);
  close (fds[1]);
  if (err != 0) {
    close (fds[0]);
    close (exitfds[0]);
    close (exitfds[1]);
    nbdkit_error ("%s: cannot run /bin/sh: %s", what, strerror (err));
    return -1;
  }

  /* Joined before this function returns, so no thread outlives it into
   * nbdkit's fork.  (Not a pidfd in poll: Debian 12's valgrind does not
   * know pidfd_open.)
   */
  waiter.pid = pid;
  waiter.fd = exitfds[1];
  err = pthread_create (&thread, NULL, wait_exit, &waiter);
  if (err == 0)
    waiting = true;
  else {
    close (exitfds[1]);
    o.failed = "pthread_create";
    o.err = err;
  }
  read_output (fds[0], exitfds[0], start, &o);
  close (fds[0]);
  end_script (pid, waiting, thread, &waiter, &o);
  close (exitfds[0]);
  r = judge_run (what, script, &o, out);
  free (o.buf);
  return r;
}
