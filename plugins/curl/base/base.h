/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The base: small helpers, the clock (clock.c) and lists of byte
 * intervals (intervals.c).  Every folder may use it.  It uses nothing
 * of the plugin's.
 */

#ifndef BASE_H
#define BASE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <pthread.h>
#include <time.h>

#include <curl/curl.h>

static inline uint64_t
min64 (uint64_t a, uint64_t b)
{
  return a < b ? a : b;
}

static inline uint64_t
max64 (uint64_t a, uint64_t b)
{
  return a > b ? a : b;
}

/* Whether the n bytes at s are word, ignoring case. */
static inline bool
is_word (const char *word, const char *s, size_t n)
{
  return strlen (word) == n && strncasecmp (word, s, n) == 0;
}

/* Scope-based cleanup. */
static inline void
cleanup_free (void *ptr)
{
  free (* (void **) ptr);
}
#define CLEANUP_FREE __attribute__ ((cleanup (cleanup_free)))

static inline void
cleanup_slist (struct curl_slist **list)
{
  curl_slist_free_all (*list);
}
#define CLEANUP_SLIST __attribute__ ((cleanup (cleanup_slist)))

static inline void
cleanup_unlock (pthread_mutex_t **lock)
{
  pthread_mutex_unlock (*lock);
}
#define LOCK_FOR_SCOPE(m)                                               \
  __attribute__ ((cleanup (cleanup_unlock)))                            \
  pthread_mutex_t *scope_lock_ = (m);                                   \
  pthread_mutex_lock (scope_lock_)

/* intervals.c: sorted byte intervals [start, end), merged as they
 * touch, in a list of fixed room.
 */
#define INTERVALS_MAX 4096

struct interval {
  uint64_t start, end;
};

struct intervals {
  struct interval r[INTERVALS_MAX];
  unsigned n;
};

extern bool intervals_note (struct intervals *l, uint64_t start,
                            uint64_t end, bool over);
extern void intervals_trim (struct intervals *l, uint64_t pos);
extern uint64_t intervals_total (const struct intervals *l);

/* clock.c: CLOCK_MONOTONIC in nanoseconds, and back to a timespec for
 * pthread_cond_timedwait.
 */
extern int64_t clock_ns (void);
extern struct timespec clock_at (int64_t ns);

#endif /* BASE_H */
