/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * header-script, cookie-script and url-script: shell scripts whose output
 * becomes request headers (one per line), the cookie, or the URL to ask
 * (its first line).  They are for tokens and presigned URLs that expire.
 *
 * Each runs once before the first request, in .get_ready, so that a failing
 * script stops nbdkit at start-up.  It runs again when a request finds its
 * output older than the -renew interval.  url-script also runs again near
 * its URL's expiry, and once its URL was refused.  That request's thread
 * runs the script, while every other request goes on with the previous
 * output.  Only a URL that was refused or has expired makes the others wait
 * for the run.  The new output replaces the old under a lock only once it
 * is complete.  Requests copy what they use under the same lock, so no
 * request ever sees half of one set and half of another.  No lasting thread
 * of the plugin's own is needed, which keeps nbdkit's fork safe.  Reads
 * that go straight to the remembered target of url-script's redirects run
 * it too when due (script_url_serial).  A run that prints another URL
 * replaces that target (request/route.c).
 *
 * How one run goes is spawn.c's: the shell, the environment, the
 * descriptors, the time limit and the process group.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <nbdkit-plugin.h>

#include "scripts/scripts.h"
#include "secrets.h"

struct script {
  const char *what;             /* "header-script", for messages */
  const char **script;          /* &cfg.header_script: set after load */
  unsigned *renew;
  char *output;                 /* the last complete output, or NULL */
  unsigned iteration;
  int64_t ran;                  /* when output was made: clock_ns */
  bool running;
  /* url-script: its URL's own expiry (presigned_expiry, -1 if none), in
   * seconds since the epoch, and when it was made; expired: it was
   * refused (401, 403), so run the script again before using it.
   */
  int64_t expires, made;
  bool expired;
  unsigned serial;              /* url-script: the runs that printed a
                                 * new URL, for target_given */
  unsigned runs;                /* runs ended, and whether the last one */
  bool failed;                  /* failed: those waiting fail with it */
  /* url-script: after a failed run, the URL not usable, no new run
   * before retry (clock_ns), backoff seconds after the last.
   */
  int64_t retry;
  unsigned backoff;
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
 * URL's own expiry (as early as presigned_renew_margin says: a run may
 * take up to timeout=), and once the URL was refused.
 */
static bool
due_locked (const struct script *s)
{
  int64_t now, margin;

  if (s->output == NULL || s->expired)
    return true;
  if (*s->renew != 0 &&
      clock_ns () - s->ran >= *s->renew * INT64_C (1000000000))
    return true;
  if (s->expires < 0)
    return false;
  now = (int64_t) time (NULL);
  margin = presigned_renew_margin (s->expires - s->made, cfg.timeout);
  return now >= s->expires - margin;
}

/* Run the script if its output is due for renewal and no other thread
 * is running it.  Meanwhile other requests go on with the previous
 * output, except for a URL that was refused or has expired, whose run
 * they wait for and whose outcome they share: if it fails, -2 (not
 * reported: the run was, by the request that ran it), rather than one
 * more run each, one after another; so do the requests that come
 * during the back-off after it.
 */
static int
refresh (struct script *s)
{
  char *out = NULL;
  unsigned iteration;
  int r;

  {
    LOCK_FOR_SCOPE (&lock);
    unsigned seen = s->runs;

    while (s == &urls && s->running && (s->expired || s->output == NULL))
      pthread_cond_wait (&ran_cond, &lock);
    if (s->runs != seen && s->failed) {
      nbdkit_debug ("%s: run %u, which this request waited for, failed",
                    s->what, s->iteration - 1);
      return -2;
    }
    if (s == &urls && s->failed && (s->expired || s->output == NULL) &&
        clock_ns () < s->retry) {
      nbdkit_debug ("%s: run %u failed, and the next waits %u s", s->what,
                    s->iteration - 1, s->backoff);
      return -2;
    }
    if (s->running || !due_locked (s))
      return 0;
    s->running = true;
    iteration = s->iteration++;
  }
  r = spawn_run (s->what, *s->script, iteration, &out);
  if (r == 0)
    r = check_output (s, out);
  if (r == 0)
    nbdkit_debug ("%s: run %u done", s->what, iteration);

  LOCK_FOR_SCOPE (&lock);
  s->running = false;
  s->runs++;
  s->failed = r != 0;
  s->backoff = r == 0 ? 0 : redirect_backoff_next (s->backoff);
  s->retry = clock_ns () + s->backoff * INT64_C (1000000000);
  if (r == 0) {
    if (s->output == NULL || strcmp (s->output, out) != 0)
      s->serial++;
    free (s->output);
    s->output = out;
    s->ran = clock_ns ();
    s->made = (int64_t) time (NULL);
    s->expires = s == &urls ? presigned_expiry (out) : -1;
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
  /* Messages name the URL asked, the script's first, shown without its
   * secrets (url=, if given too, is only $url for the script).  Before
   * any thread runs.
   */
  if (cfg.url_script != NULL) {
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

/* url-script's URL, run again when due: which one it is in *serial (it
 * changes when a run prints another URL).  -1 on errors, reported; -2
 * if the run this request waited for failed (see refresh).
 */
int
script_url_serial (unsigned *serial)
{
  int r = refresh (&urls);

  if (r < 0)
    return r;
  LOCK_FOR_SCOPE (&lock);
  if (urls.output == NULL || urls.expired)
    return -1;                  /* the run failed and said why */
  *serial = urls.serial;
  return 0;
}

/* The URL to ask (url-script's output, run again when due), or url=:
 * a copy into *out, and with url-script which one it is in *serial
 * (if not NULL; see script_url_serial).  -1 on errors, reported; -2 if
 * the run this request waited for failed (see refresh).
 */
int
script_url (char **out, unsigned *serial)
{
  int r;

  *out = NULL;
  if (cfg.url_script == NULL) {
    *out = strdup (cfg.url);
  }
  else {
    r = refresh (&urls);
    if (r < 0)
      return r;
    LOCK_FOR_SCOPE (&lock);
    if (urls.output == NULL || urls.expired)
      return -1;                /* the run failed and said why */
    *out = strdup (urls.output);
    if (serial != NULL)
      *serial = urls.serial;
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
