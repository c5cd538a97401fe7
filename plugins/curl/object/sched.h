/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The scheduler's state, shared by sources.c and hedge.c and seen by no
 * other folder.  sources.c owns and writes it; hedge.c only reads it,
 * under sources_lock, to judge a running request.
 */

#ifndef OBJECT_SCHED_H
#define OBJECT_SCHED_H

#include "object/object.h"

/* Each source's scheduling state, under sources_lock (recv: atomic). */
struct sched {
  enum source_state state;
  int64_t down_until, down_ns;  /* when to ask again, how long after */
  unsigned running;             /* requests out */
  unsigned flowing;             /* ... whose answers are coming */
  uint64_t outstanding;         /* bytes its running requests asked */
  uint64_t recv, recv_sampled;  /* body bytes come (atomic) */
  uint64_t recv_ended;          /* ... for requests that ended */
  int64_t busy_start, busy_total, busy_sampled;  /* ns with requests out */
  double rate;                  /* bytes/ns when busy; 0: unknown */
  int64_t lat_ns;               /* to the first byte, recent */
  uint64_t requests, failures, hedges;
};

extern struct sched sources_sched[MAX_SOURCES];
extern pthread_mutex_t sources_lock;

static inline struct sched *
sched_of (const struct source *s)
{
  return &sources_sched[s->id];
}

/* A request is asked of another source after four times the time it
 * was expected to take, and not before HEDGE_MIN_NS: a round trip to a
 * far server, or a busy one, varies by more than that on its own.
 */
#define HEDGE_MIN_NS (750 * INT64_C (1000000))

/* sources.c's estimates, lock held. */
extern double sources_fastest_locked (const struct source *except);
extern double sources_expected_locked (const struct source *s,
                                       uint64_t bytes, double best);
extern bool sources_usable (const struct source *s,
                            const struct source *avoid);
extern bool sources_other_locked (const struct source *s, bool dropped);

#endif /* OBJECT_SCHED_H */
