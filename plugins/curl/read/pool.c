/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The queue, the last link of the read chain, and the pool of connections
 * that it lends.
 *
 * Over HTTP/1.1 the pool holds up to connections= easy handles, each with
 * its own keep-alive connection.  So the TCP or TLS connections to one
 * origin never exceed connections=.  A handle keeps one to url='s origin,
 * and one to a redirect's target on another.  Over HTTP/2 the pool holds up
 * to the transport's slots, whose requests are streams on a shared
 * connection instead.  A request borrows a handle and runs in the calling
 * nbdkit thread.  The idle handles are a LIFO stack, so the most recently
 * used, warm connection is reused first.  The probe, writes and
 * read-ahead's segments borrow their handles here too.
 *
 * Reads are batched.  Each NBD read joins a queue.  A thread that finds its
 * read queued and a handle free takes the queue, up to MAX_BATCH reads.  It
 * asks for all of them in one request (batch.c), then wakes the threads
 * whose reads it carried.  With nothing queued that is one read per
 * request.  Under load, with a client that keeps many requests in flight,
 * it is one request per batch.  An HTTP request costs mostly per request,
 * not per byte.  Here nginx spent 83 us of CPU per single 4 KiB range, and
 * 19 us per range in requests of 16.  That was 8,000 random ranges each
 * way, with curl -K.
 */

#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nbdkit-plugin.h>

#include "read/batch.h"

/* -D curl.batch=N: at most N reads per request (1 turns batching off). */
NBDKIT_DLL_PUBLIC int curl_debug_batch = 64;

/* A batch's bytes all arrive before any of its reads is answered, so
 * keep batches of big reads short: 8 MiB is 8 of nbdcopy's 1 MiB reads.
 */
#define MAX_BATCH_BYTES (8 * 1024 * 1024)

/* A server at least SLOW_NS away (transport/transport.h) gets all
 * connections= and gathering (see limit_locked and gather_locked); one
 * at least FAR_NS away keeps the connections opened during the probe
 * (pool_start).
 */
#define FAR_NS (10 * 1000000)

/* Gathering waits at most 1/GATHER_FRACTION of an answer's delay,
 * never more than GATHER_MAX_NS.
 */
#define GATHER_FRACTION 64
#define GATHER_MAX_NS (2 * 1000000)

/* See limit_locked. */
#define NEAR_CONNECTIONS 4

static struct {
  pthread_mutex_t lock;
  pthread_cond_t cond;          /* a handle came back (for pool_get) */
  struct conn **free;           /* stack of idle handles */
  unsigned nr_free;
  unsigned nr_made;             /* at most cfg.connections */
  struct read_req *head, *tail; /* reads waiting for a handle */
  unsigned nr_queued;           /* reads in the queue */
  unsigned nr_running;          /* reads in batches being fetched */
  bool slow;                    /* the server is SLOW_NS or more away */
  int64_t wait_ns;              /* moving average of answers' delay */
  unsigned depth;               /* reads in flight lately, at most */
  int64_t depth_at;             /* when depth was last raised */
} pool = {
  .lock = PTHREAD_MUTEX_INITIALIZER,
  .cond = PTHREAD_COND_INITIALIZER,
};

/* Each read's condition variable waits on CLOCK_MONOTONIC (for
 * gather_locked's deadlines): the attribute is made once, not per read.
 */
static pthread_condattr_t read_cond_attr;
static bool read_cond_attr_made;

int
pool_init (void)
{
  pthread_condattr_init (&read_cond_attr);
  pthread_condattr_setclock (&read_cond_attr, CLOCK_MONOTONIC);
  read_cond_attr_made = true;
  pool.free = calloc (transport_slots_max (), sizeof pool.free[0]);
  if (pool.free == NULL) {
    nbdkit_error ("calloc: %m");
    return -1;
  }
  return 0;
}

void
pool_unload (void)
{
  unsigned i;

  connection_stop ();
  /* Before the handles: the multi handle's connections are closed
   * through the callbacks of the handle that opened each.
   */
  transport_unload ();

  /* Called once no request runs, so every handle is back on the stack. */
  for (i = 0; i < pool.nr_free; i++)
    connection_free (pool.free[i]);
  free (pool.free);
  pool.free = NULL;
  if (read_cond_attr_made)
    pthread_condattr_destroy (&read_cond_attr);
  read_cond_attr_made = false;
  pool.nr_free = pool.nr_made = 0;
}

static bool slow_locked (void);

/* How many handles the pool may hold now.  For a server less than
 * SLOW_NS away (loopback, a LAN) reads that wait are batched
 * instead, and NEAR_CONNECTIONS measured best there (see
 * connections= in the manual: over TLS on loopback 4 connections copied
 * 1 GiB in 1.98-2.27 s, 16 in 2.38-2.74 s).  Further away all
 * connections= are used, to keep requests in flight over the round trip.
 */
static unsigned
limit_locked (void)
{
  unsigned slots = transport_slots ();

  if (transport_shared () || slow_locked () || slots < NEAR_CONNECTIONS)
    return slots;
  return NEAR_CONNECTIONS;
}

static bool
available_locked (void)
{
  return pool.nr_free > 0 || pool.nr_made < limit_locked ();
}

static void wake_leader_locked (void);

/* An idle handle, else a new one.  Only when available_locked().  When
 * a new one cannot be made, the slot is still free: the next waiter is
 * woken to try for itself rather than wait for a handle to come back.
 */
static struct conn *
take_locked (void)
{
  struct conn *c;

  if (pool.nr_free > 0)
    return pool.free[--pool.nr_free];
  c = connection_new ();
  if (c == NULL) {
    pthread_cond_signal (&pool.cond);
    wake_leader_locked ();
    return NULL;
  }
  pool.nr_made++;
  return c;
}

/* A queued read can run now: wake the oldest, which leads the batch. */
static void
wake_leader_locked (void)
{
  if (pool.head != NULL && available_locked ())
    pthread_cond_signal (&pool.head->cond);
}

static void
put_locked (struct conn *c)
{
  pool.free[pool.nr_free++] = c;
  pthread_cond_signal (&pool.cond);
  wake_leader_locked ();
}

/* Once nbdkit runs: how far the server is decides how the pool works.
 * Over a long round trip a new connection costs one round trip for TCP
 * (and one or two more for TLS) before its first request, and a client
 * that starts with 16 reads in flight would pay that on each; so the
 * pool's other connections were opened during the probe's round trip
 * (the spares of spares.c), and a read that needs a connection
 * takes one at once.  qemu-img at 100 ms, nbdkit's start included,
 * took 1.47-1.51 s where opening them with a one-byte GET each once
 * the probe had answered took 1.63-1.64 s (upstream: 1.54 s).  Near
 * the server, opening on demand costs little: the spares are closed.
 */
void
pool_start (void)
{
  int64_t rtt = timing_round_trip ();

  if (!cfg.is_file)
    nbdkit_debug ("%s: the probe's answer came %" PRIi64 ".%03" PRIi64
                  " ms after its request: %s server", cfg.shown_url,
                  rtt / 1000000, rtt / 1000 % 1000,
                  rtt >= SLOW_NS ? "a distant" : "a near");
  if (rtt < FAR_NS)
    spares_drop ();
  else if (spares_count () > 0) {
    nbdkit_debug ("%s: answers take %" PRIi64 " ms: %u spare connections "
                  "open", cfg.shown_url, rtt / 1000000, spares_count ());
    spares_start_timer ();
  }
  LOCK_FOR_SCOPE (&pool.lock);
  pool.slow = rtt >= SLOW_NS;
  pool.wait_ns = rtt;
}

/* For requests that are not batched (the probe's, PUT, the write
 * check's).
 */
struct conn *
pool_get (void)
{
  LOCK_FOR_SCOPE (&pool.lock);

  while (!available_locked ())
    pthread_cond_wait (&pool.cond, &pool.lock);
  return take_locked ();
}

/* A handle if one is free or may be made now, else NULL at once: for
 * read-ahead's segments (segment.c), which must never make a read wait.
 */
struct conn *
pool_try_get (void)
{
  LOCK_FOR_SCOPE (&pool.lock);

  if (!available_locked () || pool.head != NULL)
    return NULL;
  return take_locked ();
}

void
pool_put (struct conn *c)
{
  bool surplus;

  pthread_mutex_lock (&pool.lock);
  /* More handles than the pool may hold now (the head start's, made
   * while HTTP/2 allowed more, once a near server went back to
   * HTTP/1.1): freed, so that HTTP/1.1 never opens more connections
   * than its limit.  Never while the multi handle runs: a connection in
   * its cache may have been opened by this handle (see pool_unload).
   */
  surplus = !transport_shared () && pool.nr_made > limit_locked ();
  if (surplus)
    pool.nr_made--;
  else
    put_locked (c);
  pthread_mutex_unlock (&pool.lock);
  if (surplus)
    connection_free (c);
}

static void
unqueue_locked (struct read_req *r)
{
  struct read_req **p, *prev = NULL;

  for (p = &pool.head; *p != NULL; prev = *p, p = &(*p)->next) {
    if (*p == r) {
      *p = r->next;
      if (pool.tail == r)
        pool.tail = prev;
      pool.nr_queued--;
      return;
    }
  }
}

/* Over a long round trip a handle taken by a lone read is busy for the
 * whole round trip, while the reads that arrive microseconds later (a
 * client got a batch of answers and sends the next reads one by one)
 * wait a whole round trip more for a handle to come back.  With 64
 * reads in flight on 16 handles at 100 ms, fio made 362 reads/s where
 * 640 is the ceiling: the handles freed by one batch of answers were
 * each taken by one read, and the reads after them piled up behind.
 * So when answers are slow to come, a read waits a little for company:
 * a batch goes when it holds its share of the reads in flight (those
 * in flight lately over all handles), or when its oldest read has
 * waited 1/GATHER_FRACTION of an answer's delay.  On loopback, where
 * answers come in microseconds, nothing waits.
 */
/* Not from answers during a copy: on loopback under load those took
 * over 2 ms, and gathering there cut fio's reads by a third.
 */
/* Over HTTP/2 no read waits for company: with a stream for each read in
 * flight, fio 4 KiB at 20 ms made 3,040 reads a second over 4 NBD
 * connections, HTTP/1.1's gathered batches 2,955.
 */
static bool
slow_locked (void)
{
  return pool.slow && !transport_shared ();
}

/* One handle's share of the reads in flight.  With more reads than
 * handles, shared over three quarters of them: the rest stay free, so
 * that a batch that has gathered its share never waits for a handle
 * (fio 4 KiB QD64 at 20 ms: 2,772 reads/s shared over all 16, 2,865
 * over 12, where nbdkit's own ceiling, measured with its delay filter,
 * is 3,120).
 */
static unsigned
share_locked (void)
{
  unsigned ready = cfg.connections;

  if (pool.depth <= ready)
    return 1;
  ready -= ready / 4;
  return (pool.depth + ready - 1) / ready;
}

/* A read arrived: the depth is the most reads in flight at once within
 * the last few answer delays.
 */
static void
note_depth_locked (int64_t now)
{
  unsigned d = pool.nr_running + pool.nr_queued;

  if (d >= pool.depth || now - pool.depth_at > 4 * pool.wait_ns) {
    pool.depth = d;
    pool.depth_at = now;
  }
}

/* True (with the deadline in *until) when the queue should wait. */
static bool
gather_locked (int64_t *until)
{
  int64_t wait;

  if (!slow_locked () || !object_multirange () || pool.head == NULL ||
      pool.nr_queued >= share_locked ())
    return false;
  wait = pool.wait_ns / GATHER_FRACTION;
  *until = pool.head->queued_ns + (wait < GATHER_MAX_NS ? wait : GATHER_MAX_NS);
  return clock_ns () < *until;
}

/* The leader's own read first (so that it never stays queued, where a
 * wake-up meant for the queue's head would reach a thread that is not
 * waiting), then reads from the head of the queue.
 */
static unsigned
take_batch_locked (struct read_req *me, struct read_req **batch)
{
  unsigned n = 0, max = curl_debug_batch;
  uint64_t bytes = me->count;

  /* Over a long round trip, share the reads out when other handles
   * are free (see gather_locked); and one read per request when the
   * server takes one range per request, which a batch would ask for
   * one after another, a round trip each.
   */
  if (me->alone || (slow_locked () && !object_multirange ()))
    max = 1;
  else if (slow_locked () && available_locked () && max > share_locked ())
    max = share_locked ();
  if (max < 1)
    max = 1;
  if (max > MAX_BATCH)
    max = MAX_BATCH;
  unqueue_locked (me);
  me->state = REQ_RUNNING;
  batch[n++] = me;
  while (pool.head != NULL && n < max && !pool.head->alone &&
         bytes + pool.head->count <= MAX_BATCH_BYTES) {
    struct read_req *r = pool.head;

    pool.head = r->next;
    if (pool.head == NULL)
      pool.tail = NULL;
    pool.nr_queued--;
    r->state = REQ_RUNNING;
    bytes += r->count;
    batch[n++] = r;
  }
  pool.nr_running += n;
  return n;
}

static void
timed_wait (pthread_cond_t *cond, int64_t until)
{
  struct timespec ts = clock_at (until);

  pthread_cond_timedwait (cond, &pool.lock, &ts);
}

/* After a batch: its reads are answered and its handle goes back. */
static void
batch_done_locked (struct conn *c, struct read_req *me,
                   struct read_req **batch, unsigned n)
{
  int64_t wait = timing_answer_wait_ns (c);
  unsigned i;

  for (i = 0; i < n; i++) {
    batch[i]->state = REQ_DONE;
    if (batch[i] != me)
      pthread_cond_signal (&batch[i]->cond);
  }
  pool.nr_running -= n;
  if (wait > 0)
    pool.wait_ns += (wait - pool.wait_ns) / 8;
  put_locked (c);
}

/* The last link: one read, queued until a connection is free, then
 * asked alone or in a batch.  A piece of a split read (op->alone) is
 * asked on its own at once, never in a batch with others, which would
 * put it back at the source of the others.
 */
int
pool_link (const struct read_link *self, const struct read_op *op)
{
  struct read_req me = {
    .offset = op->offset, .count = op->count, .buf = op->buf,
    .state = REQ_QUEUED, .queued_ns = clock_ns (), .alone = op->alone,
  };
  bool alone = op->alone;
  struct read_req *batch[MAX_BATCH];
  struct conn *c;
  int64_t until;
  unsigned n;

  (void) self;
  pthread_cond_init (&me.cond, &read_cond_attr);
  pthread_mutex_lock (&pool.lock);
  if (pool.tail)
    pool.tail->next = &me;
  else
    pool.head = &me;
  pool.tail = &me;
  pool.nr_queued++;
  note_depth_locked (me.queued_ns);

  while (me.state != REQ_DONE) {
    if (me.state != REQ_QUEUED || !available_locked ()) {
      pthread_cond_wait (&me.cond, &pool.lock);
      continue;
    }
    if (!alone && gather_locked (&until)) {
      timed_wait (&me.cond, until);
      continue;
    }
    c = take_locked ();
    if (c == NULL) {
      /* connection_new reported why. */
      unqueue_locked (&me);
      me.state = REQ_DONE;
      me.failed = true;
      break;
    }
    n = take_batch_locked (&me, batch);
    wake_leader_locked ();      /* more queued and another handle idle */
    pthread_mutex_unlock (&pool.lock);

    batch_run (c, batch, n);

    pthread_mutex_lock (&pool.lock);
    batch_done_locked (c, &me, batch, n);
  }
  pthread_mutex_unlock (&pool.lock);
  pthread_cond_destroy (&me.cond);

  if (me.failed) {
    errno = EIO;
    return -1;
  }
  return 0;
}
