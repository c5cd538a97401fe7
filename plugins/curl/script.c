/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * header-script, cookie-script and url-script: shell scripts whose
 * output becomes request headers (one per line), the cookie, or the URL
 * to ask (its first line), for tokens and presigned URLs that expire.
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
 * The script runs with /bin/sh -c, with $url and $iteration (0 for the
 * first run, as in upstream nbdkit's plugin) in its environment,
 * default signal handling, and none of nbdkit's descriptors but its
 * standard ones (libcurl's sockets are not close-on-exec, and a
 * background process of the script would keep the connections open).
 * It must exit 0 within timeout= seconds, which bound its whole run:
 * the reading of its output, and then its exit (a script may close its
 * output and go on running).  waitid has no time limit, so a thread
 * that lives as long as the run waits in it and closes a pipe when the
 * script has exited; the run polls that pipe.
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
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nbdkit-plugin.h>

#include "curldefs.h"
#include "redirect.h"
#include "secrets.h"

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
  /* url-script: its URL's own expiry (redirect_expiry, -1 if none), in
   * seconds since the epoch, and when it was made; expired: it was
   * refused (401, 403), so run the script again before using it.
   */
  int64_t expires, made;
  bool expired;
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
static struct script urls = {
  .what = "url-script", .script = &cfg.url_script,
  .renew = &cfg.url_script_renew, .expires = -1,
};
/* A url-script run ended: requests that must not use the old URL wait
 * for it (see refresh).
 */
static pthread_cond_t ran_cond = PTHREAD_COND_INITIALIZER;

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
    if (remote_stopping ())
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
spawn_script (struct script *s, char **envp, int out_fd, pid_t *pid)
{
  char *argv[] = { (char *) "sh", (char *) "-c", (char *) *s->script, NULL };
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
 * timeout= seconds of *start, then wait, within the same time, for its
 * exit: the end of its output is not its exit, since a script may close
 * its standard output and go on running.
 */
static void
read_output (int out_fd, int exit_fd, const struct timespec *start,
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
judge_run (struct script *s, struct outcome *o, char **out)
{
  if (o->buf == NULL)
    nbdkit_error ("%s: out of memory", s->what);
  else if (o->failed)
    nbdkit_error ("%s: %s: %s: %s", s->what, *s->script, o->failed,
                  strerror (o->err));
  else if (o->timed_out)
    nbdkit_error ("%s: %s: did not finish within %u seconds (timeout=)",
                  s->what, *s->script, cfg.timeout);
  else if (o->stopped)
    nbdkit_error ("%s: %s: stopped: nbdkit is shutting down or the client "
                  "disconnected", s->what, *s->script);
  else if (o->len >= MAX_OUTPUT)
    nbdkit_error ("%s: more than %d bytes of output", s->what, MAX_OUTPUT);
  else if (o->info.si_code == CLD_EXITED && o->info.si_status != 0)
    nbdkit_error ("%s: %s: exited with status %d", s->what, *s->script,
                  o->info.si_status);
  else if (o->info.si_code != CLD_EXITED)
    nbdkit_error ("%s: %s: killed by signal %d", s->what, *s->script,
                  o->info.si_status);
  else {
    o->buf[o->len] = '\0';
    *out = o->buf;
    o->buf = NULL;
    return 0;
  }
  return -1;
}

/* Run the script; its standard output in *out.  Reports errors. */
static int
run (struct script *s, unsigned iteration, char **out)
{
  CLEANUP_FREE char *url_env = NULL;
  CLEANUP_FREE char *iter_env = NULL;
  CLEANUP_FREE char **envp = NULL;
  struct outcome o = { .failed = NULL };
  struct exit_waiter waiter = { .r = -1 };
  bool waiting = false;
  pthread_t thread;
  struct timespec start;
  int fds[2], exitfds[2], err, r;
  pid_t pid;

  envp = script_env (iteration, &url_env, &iter_env);
  if (envp == NULL || url_env == NULL || iter_env == NULL) {
    nbdkit_error ("%s: out of memory", s->what);
    return -1;
  }
  if (cloexec_pipe (fds) == -1) {
    nbdkit_error ("%s: pipe: %m", s->what);
    return -1;
  }
  if (cloexec_pipe (exitfds) == -1) {
    nbdkit_error ("%s: pipe: %m", s->what);
    close (fds[0]);
    close (fds[1]);
    return -1;
  }
  clock_gettime (CLOCK_MONOTONIC, &start);
  err = spawn_script (s, envp, fds[1], &pid);
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
    o.failed = "pthread_create";
    o.err = err;
  }
  read_output (fds[0], exitfds[0], &start, &o);
  close (fds[0]);
  end_script (pid, waiting, thread, &waiter, &o);
  close (exitfds[0]);
  r = judge_run (s, &o, out);
  free (o.buf);
  return r;
}

/* url-script's first line: a URL whose scheme protocols= allows, and
 * not file:.  Never printed: a presigned URL is a secret.
 */
static int
check_url (struct script *s, char *out)
{
  CURLUcode rc;
  char *scheme;
  size_t n, i;
  int r = -1;

  out[strcspn (out, "\n")] = '\0';
  n = strlen (out);
  if (n > 0 && out[n - 1] == '\r')
    out[--n] = '\0';
  for (i = 0; i < n; i++)
    if ((unsigned char) out[i] <= ' ' || out[i] == 0x7f) {
      nbdkit_error ("%s: the URL must be one line without blanks or "
                    "control characters", s->what);
      return -1;
    }
  scheme = config_url_scheme (out, &rc);
  if (scheme != NULL && strcasecmp (scheme, "file") != 0 &&
      config_allows_scheme (scheme))
    r = 0;
  else
    nbdkit_error ("%s: the output is not a URL whose scheme protocols=%s "
                  "allows (file: is not taken)", s->what, cfg.protocols);
  curl_free (scheme);
  return r;
}

/* Check the output as the thing it is.  Values are never printed: they
 * are tokens.
 */
static int
check_output (struct script *s, char *out)
{
  char *line, *end, *stop;
  const char *why;
  int name_len;
  unsigned n = 0;

  if (s == &urls)
    return check_url (s, out);
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
    /* The same rule as header= (a CR inside a line would end the header
     * early on the wire; a header the plugin sets itself would undo its
     * checks), at every run: a renewal may print what the first did not.
     */
    why = stop > line ? headers_refused (line, stop - line, &name_len)
      : NULL;
    if (why != NULL) {
      nbdkit_error ("%s: output line %u: %.*s%s%s", s->what, n, name_len,
                    line, name_len > 0 ? ": " : "", why);
      return -1;
    }
  }
  return 0;
}

/* Is the output due for a new run?  url-script's is also before its
 * URL's own expiry (a tenth of its life before, at least a second), and
 * once the URL was refused.
 */
static bool
due_locked (const struct script *s)
{
  int64_t now, margin;

  if (s->output == NULL || s->expired)
    return true;
  if (*s->renew != 0 && age (&s->ran) >= *s->renew)
    return true;
  if (s->expires < 0)
    return false;
  now = (int64_t) time (NULL);
  margin = (s->expires - s->made) / 10;
  return now >= s->expires - (margin < 1 ? 1 : margin);
}

/* Run the script if its output is due for renewal and no other thread
 * is running it.  Meanwhile other requests go on with the previous
 * output, except for a URL that was refused or has expired, whose run
 * they wait for.
 */
static int
refresh (struct script *s)
{
  char *out = NULL;
  unsigned iteration;
  int r;

  {
    LOCK_FOR_SCOPE (&lock);
    while (s == &urls && s->running && (s->expired || s->output == NULL))
      pthread_cond_wait (&ran_cond, &lock);
    if (s->running || !due_locked (s))
      return 0;
    s->running = true;
    iteration = s->iteration++;
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
    s->made = (int64_t) time (NULL);
    s->expires = s == &urls ? redirect_expiry (out) : -1;
    /* Already past (clocks differ): not run again at every request;
     * a refusal (401, 403) runs it again instead.
     */
    if (s->expires >= 0 && s->expires <= s->made + 1)
      s->expires = -1;
    s->expired = false;
  }
  else
    free (out);
  pthread_cond_broadcast (&ran_cond);
  return r;
}

int
script_init (void)
{
  if (cfg.header_script && refresh (&headers) == -1)
    return -1;
  if (cfg.cookie_script && refresh (&cookie) == -1)
    return -1;
  if (cfg.url_script && refresh (&urls) == -1)
    return -1;
  /* Without url=, messages name the script's first URL, shown without
   * its secrets.  Before any thread runs.
   */
  if (cfg.url == NULL) {
    char *shown = shown_url (urls.output);

    if (shown == NULL) {
      nbdkit_error ("url-script: out of memory");
      return -1;
    }
    free (cfg.shown_url);
    cfg.shown_url = shown;
  }
  return 0;
}

/* The URL to ask (url-script's output, run again when due), or url=:
 * a copy into *out.  -1 on errors, reported.
 */
int
script_url (char **out)
{
  *out = NULL;
  if (cfg.url_script == NULL) {
    *out = strdup (cfg.url);
  }
  else {
    if (refresh (&urls) == -1)
      return -1;
    LOCK_FOR_SCOPE (&lock);
    if (urls.output == NULL || urls.expired)
      return -1;                /* the run failed and said why */
    *out = strdup (urls.output);
  }
  if (*out == NULL) {
    nbdkit_error ("url-script: out of memory");
    return -1;
  }
  return 0;
}

/* The URL that url-script printed (url, as script_url gave it) was
 * refused: the next request runs the script again first (unless it has
 * printed another URL meanwhile).  False if there is no url-script.
 */
bool
script_url_refused (const char *url)
{
  LOCK_FOR_SCOPE (&lock);

  if (cfg.url_script == NULL)
    return false;
  if (urls.output != NULL && strcmp (urls.output, url) == 0)
    urls.expired = true;
  return true;
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
  free (urls.output);
  urls.output = NULL;
  headers.iteration = cookie.iteration = urls.iteration = 0;
}
