/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Stand-ins for the nbdkit functions that the plugin's request layer
 * and the folders below it call (see stub-nbdkit.h).  Messages go to a
 * bounded log instead of stderr, so a passing test stays quiet.
 */

#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nbdkit-plugin.h>

#include "stub-nbdkit.h"

/* Enough for every message of a few requests; later ones are dropped,
 * and the log says so.
 */
#define LOG_SIZE (256 * 1024)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char log_text[LOG_SIZE];
static size_t log_len;
static bool log_full;
static char last_error[1024];
static unsigned errors;

static void
keep (const char *kind, const char *fs, va_list args)
{
  char msg[1024];
  int n;

  vsnprintf (msg, sizeof msg, fs, args);
  pthread_mutex_lock (&lock);
  if (strcmp (kind, "error") == 0) {
    snprintf (last_error, sizeof last_error, "%s", msg);
    errors++;
  }
  n = snprintf (log_text + log_len, sizeof log_text - log_len, "%s: %s\n",
                kind, msg);
  if (n < 0 || (size_t) n >= sizeof log_text - log_len)
    log_full = true;
  else
    log_len += n;
  pthread_mutex_unlock (&lock);
}

void
nbdkit_debug (const char *fs, ...)
{
  va_list args;
  int saved = errno;            /* %m in a later message */

  va_start (args, fs);
  keep ("debug", fs, args);
  va_end (args);
  errno = saved;
}

void
nbdkit_error (const char *fs, ...)
{
  va_list args;
  int saved = errno;

  va_start (args, fs);
  keep ("error", fs, args);
  va_end (args);
  errno = saved;
}

/* Only the value itself: the tests give no password by file or fd. */
int
nbdkit_read_password (const char *value, char **password)
{
  if (value[0] == '-' || value[0] == '+') {
    nbdkit_error ("stub: nbdkit_read_password: only plain values");
    return -1;
  }
  *password = strdup (value);
  return *password == NULL ? -1 : 0;
}

/* Digits with an optional K, M or G (powers of 1024). */
int64_t
nbdkit_parse_size (const char *str)
{
  char *end;
  long long n;

  errno = 0;
  n = strtoll (str, &end, 10);
  if (errno != 0 || end == str || n < 0)
    goto bad;
  switch (*end) {
  case 'K': n *= 1024; end++; break;
  case 'M': n *= 1024 * 1024; end++; break;
  case 'G': n *= 1024 * 1024 * 1024; end++; break;
  default: break;
  }
  if (*end == '\0')
    return n;
 bad:
  nbdkit_error ("stub: could not parse size: %s", str);
  return -1;
}

/* nbdkit never stops in a unit test: the whole sleep, and 0. */
int
nbdkit_nanosleep (unsigned sec, unsigned nsec)
{
  struct timespec ts = { .tv_sec = sec, .tv_nsec = nsec };

  while (nanosleep (&ts, &ts) == -1 && errno == EINTR)
    ;
  return 0;
}

const char *
stub_last_error (void)
{
  return last_error;
}

unsigned
stub_errors (void)
{
  return errors;
}

void
stub_clear (void)
{
  pthread_mutex_lock (&lock);
  log_len = 0;
  log_text[0] = '\0';
  log_full = false;
  last_error[0] = '\0';
  errors = 0;
  pthread_mutex_unlock (&lock);
}

void
stub_print_log (void)
{
  pthread_mutex_lock (&lock);
  fprintf (stderr, "%.*s%s", (int) log_len, log_text,
           log_full ? "(the log is full: later messages were dropped)\n"
           : "");
  pthread_mutex_unlock (&lock);
}
