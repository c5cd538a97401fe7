/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Which source a read goes to, when mirror= names more than url=: the one
 * expected to answer it first.  Each source is taken for a pipe: a wait L
 * for a first byte, then a speed R, both measured as its answers come.  R
 * is their bytes over the time some were coming, however short each answer.
 * A request of B bytes, asked of a source whose running requests still wait
 * for Q bytes, is expected at
 *
 *     max (L, Q / R) + B / R
 *
 * It goes out at once, and its bytes follow those queued or the wait,
 * whichever is longer.  So a mirror four times slower gets a fifth of the
 * bytes, not half, and one that falls behind gets less until it catches up.
 * An even split would let the slowest source set the pace.  Over HTTP/1.1
 * a source takes at most connections= requests at once (cap).  A request
 * that takes much longer than expected, or whose bytes stop coming, is
 * stopped and asked of another source (hedge.c).  A source that fails,
 * changes or stalls is dropped.  ops/mirrors.c asks it again later, with a
 * longer wait each time it fails again.  When every source is down, reads
 * go to the dropped one that is due first, and fail as they would with url=
 * alone.  One lock guards the scheduling fields (struct sched), which only
 * this file touches.  A request takes it as it begins, at its first byte,
 * at most every CHECK_NS to see whether it is too slow, and as it ends.
 * Pieces of body are counted without it, by an atomic add (sources_got).
 */

#include <config.h>

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>

#include <nbdkit-plugin.h>

#include "object/sched.h"

unsigned nsources = 1;
struct source sources[MAX_SOURCES];

struct sched sources_sched[MAX_SOURCES];
pthread_mutex_t sources_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond;     /* CLOCK_MONOTONIC: sources_start */
static bool stopping;           /* see sources_stop */
/* Over HTTP/1.1 a request in flight is a connection, which connections=
 * bounds at each origin: at most cap run at a source (0: no bound).
 */
static unsigned cap;
static pthread_cond_t room_cond = PTHREAD_COND_INITIALIZER;

/* A source's speed is sampled over at least this much of the time some
 * answer of its was coming, or once this many bytes came (answers of a
 * millisecond each, a near url='s, took 50 MB): bytes that came in that
 * time, over it.
 */
#define SAMPLE_NS (100 * INT64_C (1000000))
#define SAMPLE_BYTES (1024 * 1024)
/* Dropped sources are asked again after 2 s, then 4, 8... at most 60. */
#define DOWN_FIRST_NS (2000 * INT64_C (1000000))
#define DOWN_MAX_NS (60000 * INT64_C (1000000))
/* config_complete: source s starts in state (ops/mirrors.c). */
void
sources_add (struct source *s, enum source_state state)
{
  sched_of (s)->state = state;
}

/* .after_fork: url='s wait for a first byte, as the probe measured it. */
void
sources_round_trip (int64_t ns)
{
  sources_sched[0].lat_ns = ns;
}

bool
sources_many (void)
{
  return nsources > 1;
}

/* ops/mirrors.c, once the transport is chosen: see cap. */
void
sources_cap (unsigned per_source)
{
  LOCK_FOR_SCOPE (&sources_lock);

  cap = per_source;
}

/* How many sources serve reads (at least one): over HTTP/1.1 the pool
 * holds connections= handles for each.  Two mirrors that shared url='s
 * kept no more in flight than url= alone, and the one with fewer looked
 * slower and got less.
 */
unsigned
sources_up (void)
{
  unsigned i, up = 0;

  if (nsources == 1)             /* the pool asks at each read */
    return 1;
  LOCK_FOR_SCOPE (&sources_lock);
  for (i = 0; i < nsources; i++)
    up += sched_of (&sources[i])->state == SOURCE_UP;
  return up > 0 ? up : 1;
}

/* How many more requests the sources up take before one waits
 * (split.c): UINT_MAX without a cap.
 */
unsigned
sources_room (void)
{
  unsigned i, room = 0;
  LOCK_FOR_SCOPE (&sources_lock);

  if (cap == 0)
    return UINT_MAX;
  for (i = 0; i < nsources; i++) {
    const struct sched *d = sched_of (&sources[i]);

    if (d->state == SOURCE_UP && d->running < cap)
      room += cap - d->running;
  }
  return room;
}

static bool
full_locked (const struct source *s)
{
  return cap != 0 && sched_of (s)->running >= cap;
}

/* Take in what s delivered since its last sample, once it has been
 * busy long enough: its speed, averaged with the samples before.
 */
static void
sample_locked (struct source *s, int64_t now)
{
  struct sched *d = sched_of (s);
  uint64_t recv = __atomic_load_n (&d->recv, __ATOMIC_RELAXED);
  int64_t busy = d->busy_total + (d->flowing > 0 ? now - d->busy_start : 0);
  double r;

  if (busy <= d->busy_sampled ||
      (busy - d->busy_sampled < SAMPLE_NS &&
       recv - d->recv_sampled < SAMPLE_BYTES))
    return;
  r = (double) (recv - d->recv_sampled) / (busy - d->busy_sampled);
  d->rate = d->rate == 0 ? r : 0.7 * d->rate + 0.3 * r;
  d->recv_sampled = recv;
  d->busy_sampled = busy;
}

/* Before any source's speed was measured, each is taken to deliver a
 * byte a nanosecond (1 GB/s), so that its bytes still to come count
 * against it as well as its wait, and one whose wait is a little longer
 * still gets its share.
 */
#define NOMINAL_RATE 1.0

/* The speed of the fastest source up but except (0: none measured). */
double
sources_fastest_locked (const struct source *except)
{
  double fastest = 0;
  unsigned i;

  for (i = 0; i < nsources; i++)
    if (&sources[i] != except && sched_of (&sources[i])->state == SOURCE_UP &&
        sched_of (&sources[i])->rate > fastest)
      fastest = sched_of (&sources[i])->rate;
  return fastest;
}

/* The bytes the sources up could have on their way at once (split.c):
 * each one's speed (not measured: the fastest's, or NOMINAL_RATE) times
 * its wait for a first byte, summed; 0 with fewer than two up.
 */
uint64_t
sources_window (void)
{
  double fastest, sum = 0;
  unsigned i, up = 0;
  LOCK_FOR_SCOPE (&sources_lock);

  fastest = sources_fastest_locked (NULL);
  for (i = 0; i < nsources; i++) {
    const struct sched *d = sched_of (&sources[i]);

    if (d->state != SOURCE_UP)
      continue;
    up++;
    sum += (d->rate != 0 ? d->rate : fastest != 0 ? fastest : NOMINAL_RATE)
      * d->lat_ns;
  }
  return up < 2 ? 0 : (uint64_t) sum;
}

/* The bytes s's running requests still wait for. */
static uint64_t
to_come_locked (const struct source *s)
{
  const struct sched *d = sched_of (s);
  uint64_t come = __atomic_load_n (&d->recv, __ATOMIC_RELAXED)
    - d->recv_ended;

  return d->outstanding - min64 (come, d->outstanding);
}

/* How long a request of bytes at s would take (ns).  A source not yet
 * measured is taken to be as fast as the fastest that is; one left idle
 * at least an eighth as fast, so that one measured slow is tried again.
 */
double
sources_expected_locked (const struct source *s, uint64_t bytes, double best)
{
  const struct sched *d = sched_of (s);
  double rate = d->rate != 0 ? d->rate : best != 0 ? best : NOMINAL_RATE;
  uint64_t to_come = to_come_locked (s);
  double queued;

  if (d->running == 0 && rate < best / 8)
    rate = best / 8;
  if (rate <= 0)
    return (double) d->lat_ns;
  queued = to_come / rate;
  return (queued > d->lat_ns ? queued : (double) d->lat_ns) + bytes / rate;
}

bool
sources_usable (const struct source *s, const struct source *avoid)
{
  return s != avoid && sched_of (s)->state == SOURCE_UP;
}

/* A source dropped after it was proven the same object: when none is
 * up, better than the one that just failed.
 */
static bool
fallback (const struct source *s, const struct source *avoid)
{
  return s != avoid && sched_of (s)->state == SOURCE_DOWN && s->proven;
}

/* A source whose speed is not measured yet while another's is, and
 * which has a round trip's worth of bytes to come at the fastest's
 * speed, and the bytes that measure it: it gets more only when no other
 * source would do.  Taken to be as fast as the fastest, a mirror of a
 * quarter of its speed once got 12 MB at once as it joined, the reads at
 * its end of them were late (hedge_due) and it was dropped.
 */
#define TRIAL_PENALTY_NS 6e10

static bool
on_trial_locked (const struct source *s, double fastest)
{
  return sched_of (s)->rate == 0 && fastest != 0 &&
    to_come_locked (s) >= max64 ((uint64_t) (fastest * sched_of (s)->lat_ns),
                                 SAMPLE_BYTES);
}

/* The source expected to answer a request of bytes first (not avoid,
 * the one that just failed it, when another is up).  A full one takes
 * it only once one of its requests ended, and then a round trip later.
 */
static struct source *
first_locked (uint64_t bytes, const struct source *avoid, double fastest)
{
  struct source *best = NULL;
  double e, best_e = 0;
  unsigned i;

  for (i = 0; i < nsources; i++) {
    if (!sources_usable (&sources[i], avoid))
      continue;
    e = sources_expected_locked (&sources[i], bytes, fastest);
    if (on_trial_locked (&sources[i], fastest))
      e += TRIAL_PENALTY_NS;
    if (full_locked (&sources[i]))
      e += sched_of (&sources[i])->lat_ns;
    if (best == NULL || e < best_e)
      best = &sources[i], best_e = e;
  }
  /* None up: the one dropped that is due to be asked again first (url=
   * on a tie), else the one that just failed.
   */
  for (i = 0; i < nsources; i++)
    if ((best == NULL || sched_of (best)->state != SOURCE_UP) &&
        fallback (&sources[i], avoid) &&
        (best == NULL ||
         sched_of (&sources[i])->down_until < sched_of (best)->down_until))
      best = &sources[i];
  if (best == NULL)
    best = avoid != NULL ? (struct source *) avoid : &sources[0];
  return best;
}

/* The source for a request of bytes (first_locked), counted as running
 * there until sources_end; k: the request's clock, from now (its
 * late_ns: when it is late, once anything was measured).
 */
struct source *
sources_pick (uint64_t bytes, const struct source *avoid,
              struct source_clock *k)
{
  int64_t now;
  struct source *s;
  double fastest, e;
  unsigned i;
  LOCK_FOR_SCOPE (&sources_lock);

  for (;;) {
    now = clock_ns ();
    for (i = 0; i < nsources; i++)
      sample_locked (&sources[i], now);
    fastest = sources_fastest_locked (NULL);
    s = first_locked (bytes, avoid, fastest);
    /* Full even so: it waits for one of its requests to end (each
     * within timeout=, none waiting for this one).  Sent to any source
     * with room, a mirror at a quarter of url='s rate got reads far
     * slower; always waiting, two equal mirrors waited for the full one.
     */
    if (!full_locked (s))
      break;
    pthread_cond_wait (&room_cond, &sources_lock);
  }
  sched_of (s)->running++;
  sched_of (s)->outstanding += bytes;
  sched_of (s)->requests++;
  /* Nothing measured yet (a new connection's slow start, the first
   * requests): no time to hold it to.
   */
  e = sources_expected_locked (s, 0, fastest);
  *k = (struct source_clock) { .picked_ns = now, .asked = bytes };
  if (sched_of (s)->rate != 0 || fastest != 0)
    k->late_ns = now + (int64_t) (4 * e) > now + HEDGE_MIN_NS
      ? now + (int64_t) (4 * e) : now + HEDGE_MIN_NS;
  return s;
}

/* k's request went out to s (callbacks.c): its wait begins. */
void
sources_sent (const struct source *s, struct source_clock *k)
{
  k->sent_ns = k->last_byte_ns = clock_ns ();
  k->recv_sent = __atomic_load_n (&sched_of (s)->recv, __ATOMIC_RELAXED);
}

/* n bytes of body came from s (callbacks.c, on each piece); first: the
 * first of a request's answer, which from now on is coming.
 */
void
sources_got (struct source *s, size_t n, bool first)
{
  __atomic_add_fetch (&sched_of (s)->recv, n, __ATOMIC_RELAXED);
  if (first) {
    LOCK_FOR_SCOPE (&sources_lock);

    if (sched_of (s)->flowing++ == 0)
      sched_of (s)->busy_start = clock_ns ();
  }
}

/* A request to s for asked bytes ended, with got of them, its first
 * byte first_byte_ns after it was sent (0: none came).
 */
void
sources_end (struct source *s, uint64_t asked, uint64_t got,
             int64_t first_byte_ns)
{
  struct sched *d = sched_of (s);
  int64_t now = clock_ns ();
  LOCK_FOR_SCOPE (&sources_lock);

  sample_locked (s, now);
  d->recv_ended += got;
  d->running--;
  if (cap != 0 && d->running + 1 == cap)
    pthread_cond_broadcast (&room_cond);
  if (got > 0 && --d->flowing == 0)
    d->busy_total += now - d->busy_start;
  d->outstanding -= asked < d->outstanding ? asked : d->outstanding;
  /* The wait for a first byte is a round trip and the server's time,
   * and over HTTP/2 also the bytes of other streams sent before it:
   * those the speed counts already.  So the estimate follows the
   * shortest waits at once, and longer ones slowly.
   */
  if (first_byte_ns > 0 && (d->lat_ns == 0 || first_byte_ns < d->lat_ns))
    d->lat_ns = first_byte_ns;
  else if (first_byte_ns > 0)
    d->lat_ns += (first_byte_ns - d->lat_ns) / 32;
}

/* Whether some source other than s is up (or, with dropped, one that
 * was dropped would do).
 */
bool
sources_other_locked (const struct source *s, bool dropped)
{
  unsigned i;

  for (i = 0; i < nsources; i++)
    if (sources_usable (&sources[i], s) ||
        (dropped && fallback (&sources[i], s)))
      return true;
  return false;
}

/* s is down: asked again after twice as long as the last time, from
 * DOWN_FIRST_NS up to DOWN_MAX_NS.
 */
static void
drop_locked (struct source *s, int64_t now)
{
  struct sched *d = sched_of (s);

  d->down_ns = d->down_ns == 0 ? DOWN_FIRST_NS
    : d->down_ns * 2 > DOWN_MAX_NS ? DOWN_MAX_NS : d->down_ns * 2;
  d->down_until = now + d->down_ns;
  d->state = SOURCE_DOWN;
  pthread_cond_broadcast (&cond);
}

/* A request to s failed (why), or was too slow (hedged): s is dropped
 * for a while when another source can take its reads (true: ask
 * there), even one dropped before, which may answer again (not for a
 * hedge: that one was slower still).  With no other it stays, and the
 * caller retries as with url= alone.  Counted either way.
 */
bool
sources_fail (struct source *s, const char *why, bool hedged)
{
  int64_t now = clock_ns ();
  LOCK_FOR_SCOPE (&sources_lock);

  sched_of (s)->failures++;
  sched_of (s)->hedges += hedged;
  if (!sources_other_locked (s, !hedged))
    return false;
  if (sched_of (s)->state == SOURCE_UP) {
    drop_locked (s, now);
    nbdkit_debug ("source %s: %s: its reads go to the other sources, "
                  "and it is asked again in %" PRIi64 " ms", s->shown, why,
                  sched_of (s)->down_ns / 1000000);
  }
  return true;
}

/* mirrors.c: s's probe waited wait_ns for its first byte: what its
 * reads are held to until they measure their own wait.
 */
void
sources_probed (struct source *s, int64_t wait_ns)
{
  LOCK_FOR_SCOPE (&sources_lock);

  if (sched_of (s)->lat_ns == 0 && wait_ns > 0)
    sched_of (s)->lat_ns = wait_ns;
}

/* mirrors.c: s was proven the same object (SOURCE_UP), or refused. */
void
sources_set (struct source *s, enum source_state state, const char *why)
{
  LOCK_FOR_SCOPE (&sources_lock);

  if (state == SOURCE_UP && sched_of (s)->state == SOURCE_DOWN)
    nbdkit_debug ("source %s: answers again: back in use", s->shown);
  if (state == SOURCE_UP) {
    s->proven = true;
    if (sched_of (s)->state != SOURCE_DOWN)
      sched_of (s)->down_ns = 0;
    pthread_cond_broadcast (&room_cond);
  }
  else if (state == SOURCE_DOWN) {
    drop_locked (s, clock_ns ());
    nbdkit_debug ("source %s: %s: asked again in %" PRIi64 " ms", s->shown,
                  why, sched_of (s)->down_ns / 1000000);
  }
  sched_of (s)->state = state;
}

/* mirrors.c's thread for s: waits until s is to be probed (new, or
 * dropped and due): true, or false once nbdkit unloads the plugin.
 */
bool
sources_await (struct source *s)
{
  struct timespec ts;
  LOCK_FOR_SCOPE (&sources_lock);

  for (;;) {
    if (__atomic_load_n (&stopping, __ATOMIC_RELAXED))
      return false;
    if (sched_of (s)->state == SOURCE_PROBING ||
        (sched_of (s)->state == SOURCE_DOWN &&
         sched_of (s)->down_until <= clock_ns ()))
      return true;
    if (sched_of (s)->state != SOURCE_DOWN)
      pthread_cond_wait (&cond, &sources_lock);
    else {
      ts = clock_at (sched_of (s)->down_until);
      pthread_cond_timedwait (&cond, &sources_lock, &ts);
    }
  }
}

/* .after_fork, with mirrors: the condition mirrors.c's threads wait on
 * (sources_await), signalled when a source is dropped.
 */
void
sources_start (void)
{
  pthread_condattr_t attr;

  pthread_condattr_init (&attr);
  pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
  pthread_cond_init (&cond, &attr);
  pthread_condattr_destroy (&attr);
}

/* nbdkit unloads the plugin: mirrors.c's probes stop (callbacks.c) and
 * their threads end.
 */
void
sources_stop (void)
{
  LOCK_FOR_SCOPE (&sources_lock);

  __atomic_store_n (&stopping, true, __ATOMIC_RELAXED);
  pthread_cond_broadcast (&cond);
}

bool
sources_stopping (void)
{
  return __atomic_load_n (&stopping, __ATOMIC_RELAXED);
}
