/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * header-script and cookie-script: shell scripts whose output becomes
 * request headers (one per line) or the cookie, for tokens that expire.
 *
 * Each runs once before the first request (in .get_ready, so a failing
 * script stops nbdkit at start-up), and again when a request finds its
 * output older than the -renew interval.  That request's thread runs
 * the script while every other request goes on with the previous
 * output; the new output replaces the old under a lock only once it is
 * complete, and requests copy what they use under the same lock, so no
 * request ever sees half of one set and half of another.  No lasting
 * thread of the plugin's own is needed, which keeps nbdkit's fork safe.
 *
 * The script runs with /bin/sh -c, with $url and $iteration (1 for the
 * first run) in its environment, default signal handling, and none of
 * nbdkit's descriptors but its standard ones (libcurl's sockets are not
 * close-on-exec, and a background process of the script would keep the
 * connections open).  It must exit 0 within timeout= seconds, which
 * bound its whole run: the reading of its output, and then its exit (a
 * script may close its output and go on running).  waitid has no time
 * limit, so a thread that lives as long as the run waits in it and
 * closes a pipe when the script has exited; the run polls that pipe.
 *
 * It runs in a process group of its own.  When it fails, prints too
 * much or runs out of time, the whole group is killed, so that nothing
 * it started goes on running or holds nbdkit's stderr open, and only
 * then is the script reaped: until then its PID, the group's ID, cannot
 * be reused.  A process that leaves the group (setsid) is beyond reach.
 */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nbdkit-plugin.h>

#include "curldefs.h"

extern char **environ;

/* Output beyond this is a script gone wrong, not a header set. */
#define MAX_OUTPUT (64 * 1024)

struct script {
  const char *what;             /* "header-script", for messages */
  const char **script;          /* &cfg.header_script: set after load */
  unsigned *renew;
  char *output;                 /* the last complete output, or NULL */
  unsigned iteration;
  struct timespec ran;          /* when output was made */
  bool running;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct script headers = {
  .what = "header-script", .script = &cfg.header_script,
  .renew = &cfg.header_script_renew,
};
static struct script cookie = {
  .what = "cookie-script", .script = &cfg.cookie_script,
  .renew = &cfg.cookie_script_renew,
};

static double
age (const struct timespec *t)
{
  struct timespec now;

  clock_gettime (CLOCK_MONOTONIC, &now);
  return (now.tv_sec - t->tv_sec) + (now.tv_nsec - t->tv_nsec) / 1e9;
}

/* Milliseconds left of timeout= seconds from *start; 0 once it is over. */
static int
ms_left (const struct timespec *start)
{
  double left = cfg.timeout - age (start);

  return left > 0 ? (int) (left * 1000) + 1 : 0;
}

/* Wait until fd is readable (or at its end), for what is left of
 * timeout= from *start.  1 when readable, 0 when the time is over, -1
 * (errno set) when poll fails, -2 when nbdkit is shutting down or the
 * request's client went away (looked at once a second: a renewal that
 * hangs must not hold up nbdkit's exit for timeout= seconds).
 */
static int
wait_readable (int fd, const struct timespec *start)
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
    if (engine_stopping ())
      return -2;
  }
}

/* waitid has no time limit, so it runs in a thread of its own, which
 * says that the script has exited by closing fd, and the caller polls
 * for that with what is left of timeout=.  WNOWAIT leaves the script
 * unreaped: see run.
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

/* Run the script; its standard output in *out.  Reports errors. */
static int
run (struct script *s, unsigned iteration, char **out)
{
  CLEANUP_FREE char *url_env = NULL;
  CLEANUP_FREE char *iter_env = NULL;
  CLEANUP_FREE char **envp = NULL;
  char *argv[] = { (char *) "sh", (char *) "-c", (char *) *s->script, NULL };
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  sigset_t none, all;
  char *buf = NULL;
  size_t n = 0, len = 0;
  int fds[2], exitfds[2], err = 0, r = -1, w;
  bool timed_out = false, waiting = false, exited = false, ok = false;
  bool stopped = false;
  const char *failed = NULL;    /* a call that failed, its errno in err */
  struct exit_waiter waiter = { .r = -1 };
  pthread_t thread;
  struct timespec start;
  siginfo_t info;
  ssize_t got;
  pid_t pid;

  /* The environment, made before the spawn: $url and $iteration. */
  for (n = 0; environ[n] != NULL; n++)
    ;
  envp = calloc (n + 3, sizeof envp[0]);
  if (envp == NULL ||
      asprintf (&url_env, "url=%s", cfg.url) == -1 ||
      asprintf (&iter_env, "iteration=%u", iteration) == -1) {
    nbdkit_error ("%s: out of memory", s->what);
    return -1;
  }
  for (n = 0, len = 0; environ[n] != NULL; n++)
    if (strncmp (environ[n], "url=", 4) != 0 &&
        strncmp (environ[n], "iteration=", 10) != 0)
      envp[len++] = environ[n];
  envp[len++] = url_env;
  envp[len++] = iter_env;
  envp[len] = NULL;

  if (pipe2 (fds, O_CLOEXEC) == -1) {
    nbdkit_error ("%s: pipe: %m", s->what);
    return -1;
  }
  if (pipe2 (exitfds, O_CLOEXEC) == -1) {
    nbdkit_error ("%s: pipe: %m", s->what);
    close (fds[0]);
    close (fds[1]);
    return -1;
  }
  posix_spawn_file_actions_init (&fa);
  posix_spawn_file_actions_adddup2 (&fa, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen (&fa, STDIN_FILENO, "/dev/null",
                                    O_RDONLY, 0);
  posix_spawn_file_actions_addclosefrom_np (&fa, STDERR_FILENO + 1);
  sigemptyset (&none);
  sigfillset (&all);
  posix_spawnattr_init (&attr);
  posix_spawnattr_setsigmask (&attr, &none);
  posix_spawnattr_setsigdefault (&attr, &all);
  /* Its own process group, so that it can be killed with everything it
   * started.
   */
  posix_spawnattr_setpgroup (&attr, 0);
  posix_spawnattr_setflags (&attr, POSIX_SPAWN_SETSIGMASK |
                            POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  clock_gettime (CLOCK_MONOTONIC, &start);
  err = posix_spawn (&pid, "/bin/sh", &fa, &attr, argv, envp);
  posix_spawnattr_destroy (&attr);
  posix_spawn_file_actions_destroy (&fa);
  close (fds[1]);
  if (err != 0) {
    close (fds[0]);
    close (exitfds[0]);
    close (exitfds[1]);
    nbdkit_error ("%s: cannot run /bin/sh: %s", s->what, strerror (err));
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
    failed = "pthread_create";
  }

  /* Read it all (the script's stderr goes to nbdkit's) within timeout=
   * seconds.
   */
  len = 0;
  buf = malloc (MAX_OUTPUT + 1);
  while (buf != NULL && failed == NULL && len < MAX_OUTPUT) {
    w = wait_readable (fds[0], &start);
    if (w == 0 || w == -2) {
      timed_out = w == 0;
      stopped = w == -2;
      break;
    }
    if (w == -1) {
      failed = "poll";
      err = errno;
      break;
    }
    got = read (fds[0], buf + len, MAX_OUTPUT - len);
    if (got == -1 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (got == -1) {
      failed = "read";
      err = errno;
      break;
    }
    if (got == 0)
      break;
    len += got;
  }
  close (fds[0]);

  /* The end of its output is not its exit: a script may close its
   * standard output and go on running.  Its exit counts against the same
   * timeout=.
   */
  if (buf != NULL && failed == NULL && !timed_out && !stopped &&
      len < MAX_OUTPUT) {
    w = wait_readable (exitfds[0], &start);
    if (w == 1)
      exited = true;
    else if (w == 0)
      timed_out = true;
    else if (w == -2)
      stopped = true;
    else {
      failed = "poll";
      err = errno;
    }
  }

  /* The whole group, and before the script is reaped: until then its
   * PID, the group's ID, cannot be reused, so this reaches no one else.
   * If it is still running the waiter returns once it is dead.
   */
  if (!exited)
    kill (-pid, SIGKILL);
  if (waiting)
    pthread_join (thread, NULL);
  close (exitfds[0]);
  if (exited && waiter.r == -1 && failed == NULL) {
    failed = "waitid";
    err = waiter.err;
  }
  ok = exited && waiter.r == 0 && waiter.info.si_code == CLD_EXITED &&
    waiter.info.si_status == 0;
  if (exited && waiter.r == 0 && !ok)
    kill (-pid, SIGKILL);       /* what a failed script left behind */
  /* Only after its exit or SIGKILL, so this does not block for long. */
  do
    w = waitid (P_PID, pid, &info, WEXITED);
  while (w == -1 && errno == EINTR);
  if (w == -1 && failed == NULL) {
    failed = "waitid";
    err = errno;
  }

  if (buf == NULL)
    nbdkit_error ("%s: out of memory", s->what);
  else if (failed)
    nbdkit_error ("%s: %s: %s: %s", s->what, *s->script, failed,
                  strerror (err));
  else if (timed_out)
    nbdkit_error ("%s: %s: did not finish within %u seconds (timeout=)",
                  s->what, *s->script, cfg.timeout);
  else if (stopped)
    nbdkit_error ("%s: %s: stopped: nbdkit is shutting down or the client "
                  "disconnected", s->what, *s->script);
  else if (len >= MAX_OUTPUT)
    nbdkit_error ("%s: more than %d bytes of output", s->what, MAX_OUTPUT);
  else if (info.si_code == CLD_EXITED && info.si_status != 0)
    nbdkit_error ("%s: %s: exited with status %d", s->what, *s->script,
                  info.si_status);
  else if (info.si_code != CLD_EXITED)
    nbdkit_error ("%s: %s: killed by signal %d", s->what, *s->script,
                  info.si_status);
  else {
    buf[len] = '\0';
    *out = buf;
    buf = NULL;
    r = 0;
  }
  free (buf);
  return r;
}

/* Check the output as the thing it is.  Values are never printed: they
 * are tokens.
 */
static int
check_output (struct script *s, char *out)
{
  char *line, *end, *stop;
  unsigned n = 0;

  if (s == &cookie) {
    out[strcspn (out, "\n")] = '\0';          /* the first line */
    n = strlen (out);
    if (n > 0 && out[n - 1] == '\r')
      out[n - 1] = '\0';
    if (strchr (out, '\r') != NULL || out[0] == '\0') {
      nbdkit_error ("%s: the cookie must be one non-empty line", s->what);
      return -1;
    }
    return 0;
  }
  for (line = out; *line; line = end + (*end != '\0')) {
    end = line + strcspn (line, "\n");
    n++;
    /* A CRLF line end: the line stops before the CR, which becomes an
     * LF, an empty line that script_headers skips.  So a CRLF blank
     * line is an empty line too, as an LF one is.
     */
    stop = end;
    if (stop > line && stop[-1] == '\r') {
      stop--;
      *stop = '\n';
    }
    if (stop > line && memchr (line, ':', stop - line) == NULL) {
      nbdkit_error ("%s: output line %u is not a 'Name: value' header",
                    s->what, n);
      return -1;
    }
    /* A CR inside a line would end the header early on the wire. */
    if (memchr (line, '\r', stop - line) != NULL) {
      nbdkit_error ("%s: output line %u has a carriage return in it",
                    s->what, n);
      return -1;
    }
  }
  return 0;
}

/* Run the script if it has no output yet or its output is due for
 * renewal and no other thread is running it.
 */
static int
refresh (struct script *s)
{
  char *out = NULL;
  unsigned iteration;
  int r;

  {
    LOCK_FOR_SCOPE (&lock);
    if (s->running ||
        (s->output != NULL && (*s->renew == 0 || age (&s->ran) < *s->renew)))
      return 0;
    s->running = true;
    iteration = ++s->iteration;
  }
  r = run (s, iteration, &out);
  if (r == 0)
    r = check_output (s, out);
  if (r == 0)
    nbdkit_debug ("%s: run %u done", s->what, iteration);

  LOCK_FOR_SCOPE (&lock);
  s->running = false;
  if (r == 0) {
    free (s->output);
    s->output = out;
    clock_gettime (CLOCK_MONOTONIC, &s->ran);
  }
  else
    free (out);
  return r;
}

int
script_init (void)
{
  if (cfg.header_script && refresh (&headers) == -1)
    return -1;
  if (cfg.cookie_script && refresh (&cookie) == -1)
    return -1;
  return 0;
}

/* Append the current headers to *list.  A renewal that fails is an
 * error for the request that ran it (the token may have expired).
 */
int
script_headers (struct curl_slist **list)
{
  const char *line, *end;
  struct curl_slist *n;
  char *copy;

  if (cfg.header_script == NULL)
    return 0;
  if (refresh (&headers) == -1)
    return -1;
  LOCK_FOR_SCOPE (&lock);
  if (headers.output == NULL)
    return -1;                  /* the first run failed and said why */
  for (line = headers.output; *line; line = end + (*end != '\0')) {
    end = line + strcspn (line, "\n");
    if (end == line)
      continue;
    copy = strndup (line, end - line);
    n = copy ? curl_slist_append (*list, copy) : NULL;
    free (copy);
    if (n == NULL) {
      nbdkit_error ("%s: out of memory", headers.what);
      return -1;
    }
    *list = n;
  }
  return 0;
}

/* The current cookie, or NULL without cookie-script; -1 on errors. */
int
script_cookie (char **out)
{
  *out = NULL;
  if (cfg.cookie_script == NULL)
    return 0;
  if (refresh (&cookie) == -1)
    return -1;
  LOCK_FOR_SCOPE (&lock);
  if (cookie.output == NULL)
    return -1;
  *out = strdup (cookie.output);
  if (*out == NULL) {
    nbdkit_error ("%s: out of memory", cookie.what);
    return -1;
  }
  return 0;
}

void
script_unload (void)
{
  free (headers.output);
  headers.output = NULL;
  free (cookie.output);
  cookie.output = NULL;
  headers.iteration = cookie.iteration = 0;
}
