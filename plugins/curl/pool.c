/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Who gets a connection when: the pool of easy handles, and the queue
 * of NBD reads waiting for one.
 *
 * The pool holds up to connections= easy handles, each keeping its own
 * keep-alive connection, so the number of TCP (or TLS) connections never
 * exceeds connections=.  A request borrows a handle and runs it in the
 * calling nbdkit thread; the idle handles are a LIFO stack, so the most
 * recently used (warm) connection is reused first.
 *
 * Reads are batched.  Each NBD read joins a queue; a thread that finds
 * its read queued and a handle free takes the whole queue (up to
 * MAX_BATCH reads) and asks for all of it in one request, then wakes
 * the threads whose reads it carried.  With nothing queued that is one
 * read per request, as before; under load (a client with many requests
 * in flight) it is one request per batch.  Reads that touch or overlap
 * are merged into one range; separate ranges go in one multi-range
 * request ("Range: bytes=A-B,C-D"), answered as multipart/byteranges.
 * The cost of an HTTP request is mostly per request, not per byte:
 * nginx spent 83 us of CPU per single 4 KiB range here and 19 us per
 * range in requests of 16 (8,000 random ranges each way with curl -K).
 * A server that does not answer a multi-range request with exactly the
 * parts asked for (S3 answers 200 with the whole object, some servers
 * merge ranges) is asked one range per request from then on.
 */

#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-plugin.h>

#include "curldefs.h"

/* -D curl.batch=N: at most N reads per request (1 turns batching off). */
NBDKIT_DLL_PUBLIC int curl_debug_batch = 64;

#define MAX_BATCH 64
/* A batch's bytes all arrive before any of its reads is answered, so
 * keep batches of big reads short: 8 MiB is 8 of nbdcopy's 1 MiB reads.
 */
#define MAX_BATCH_BYTES (8 * 1024 * 1024)

static struct {
  pthread_mutex_t lock;
  pthread_cond_t cond;          /* a handle came back (for pool_get) */
  struct conn **free;           /* stack of idle handles */
  unsigned nr_free;
  unsigned nr_made;             /* at most cfg.connections */
  struct read_req *head, *tail; /* reads waiting for a handle */
  bool multirange;              /* the server answers multi-range GETs */
} pool = {
  .lock = PTHREAD_MUTEX_INITIALIZER,
  .cond = PTHREAD_COND_INITIALIZER,
};

int
pool_init (void)
{
  pool.free = calloc (cfg.connections, sizeof pool.free[0]);
  if (pool.free == NULL) {
    nbdkit_error ("calloc: %m");
    return -1;
  }
  /* libcurl's file:// handler reads one range only. */
  pool.multirange = !cfg.is_file;
  return 0;
}

void
pool_unload (void)
{
  unsigned i;

  /* Called once no request runs, so every handle is back on the stack. */
  for (i = 0; i < pool.nr_free; i++)
    engine_conn_free (pool.free[i]);
  free (pool.free);
  pool.free = NULL;
  pool.nr_free = pool.nr_made = 0;
}

static bool
available_locked (void)
{
  return pool.nr_free > 0 || pool.nr_made < cfg.connections;
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
  c = engine_conn_new ();
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

/* For requests that are not batched (HEAD, PUT). */
struct conn *
pool_get (void)
{
  LOCK_FOR_SCOPE (&pool.lock);

  while (!available_locked ())
    pthread_cond_wait (&pool.cond, &pool.lock);
  return take_locked ();
}

void
pool_put (struct conn *c)
{
  LOCK_FOR_SCOPE (&pool.lock);

  put_locked (c);
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
      return;
    }
  }
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

  if (max < 1)
    max = 1;
  if (max > MAX_BATCH)
    max = MAX_BATCH;
  unqueue_locked (me);
  me->state = REQ_RUNNING;
  batch[n++] = me;
  while (pool.head != NULL && n < max &&
         bytes + pool.head->count <= MAX_BATCH_BYTES) {
    struct read_req *r = pool.head;

    pool.head = r->next;
    if (pool.head == NULL)
      pool.tail = NULL;
    r->state = REQ_RUNNING;
    bytes += r->count;
    batch[n++] = r;
  }
  return n;
}

static int
compare_offsets (const void *a, const void *b)
{
  const struct read_req *x = * (struct read_req *const *) a;
  const struct read_req *y = * (struct read_req *const *) b;

  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Sort the batch and merge reads that touch or overlap into spans. */
static unsigned
make_spans (struct read_req **batch, unsigned n, struct span *spans)
{
  unsigned i, ns = 0;

  qsort (batch, n, sizeof batch[0], compare_offsets);
  for (i = 0; i < n; i++) {
    struct read_req *r = batch[i];
    uint64_t last = r->offset + r->count - 1;

    if (ns > 0 && r->offset <= spans[ns - 1].last + 1) {
      if (last > spans[ns - 1].last)
        spans[ns - 1].last = last;
      spans[ns - 1].nreqs++;
      continue;
    }
    spans[ns].first = r->offset;
    spans[ns].last = last;
    spans[ns].reqs = &batch[i];
    spans[ns].nreqs = 1;
    ns++;
  }
  return ns;
}

static void
fail_span (const struct span *s)
{
  unsigned i;

  for (i = 0; i < s->nreqs; i++)
    s->reqs[i]->failed = true;
}

/* Run one batch on handle c: one request when possible, else one per
 * span.
 */
static void
run_batch (struct conn *c, struct read_req **batch, unsigned n)
{
  struct span spans[MAX_BATCH];
  unsigned ns, i, j, k;
  bool multi;
  int r;

  ns = make_spans (batch, n, spans);
  {
    LOCK_FOR_SCOPE (&pool.lock);
    multi = pool.multirange;
  }

  /* Groups of at most MAX_SPANS ranges per request. */
  for (i = 0; i < ns; i += k) {
    k = ns - i < MAX_SPANS ? ns - i : MAX_SPANS;
    if (k == 1 || !multi) {
      k = 1;
      if (engine_get_spans (c, &spans[i], 1) == -1)
        fail_span (&spans[i]);
      continue;
    }
    r = engine_get_spans (c, &spans[i], k);
    if (r == 0)
      continue;
    if (r == -1) {
      for (j = i; j < i + k; j++)
        fail_span (&spans[j]);
      continue;
    }
    /* -2: the answer was not the parts asked for. */
    {
      LOCK_FOR_SCOPE (&pool.lock);
      pool.multirange = multi = false;
    }
    for (j = i; j < i + k; j++)
      if (engine_get_spans (c, &spans[j], 1) == -1)
        fail_span (&spans[j]);
  }
}

int
pool_pread (void *buf, uint32_t count, uint64_t offset)
{
  struct read_req me = {
    .offset = offset, .count = count, .buf = buf, .state = REQ_QUEUED,
  };
  struct read_req *batch[MAX_BATCH];
  struct conn *c;
  unsigned n, i;

  pthread_cond_init (&me.cond, NULL);
  pthread_mutex_lock (&pool.lock);
  if (pool.tail)
    pool.tail->next = &me;
  else
    pool.head = &me;
  pool.tail = &me;

  while (me.state != REQ_DONE) {
    if (me.state != REQ_QUEUED || !available_locked ()) {
      pthread_cond_wait (&me.cond, &pool.lock);
      continue;
    }
    c = take_locked ();
    if (c == NULL) {
      /* engine_conn_new reported why. */
      unqueue_locked (&me);
      me.state = REQ_DONE;
      me.failed = true;
      break;
    }
    n = take_batch_locked (&me, batch);
    wake_leader_locked ();      /* more queued and another handle idle */
    pthread_mutex_unlock (&pool.lock);

    run_batch (c, batch, n);

    pthread_mutex_lock (&pool.lock);
    for (i = 0; i < n; i++) {
      batch[i]->state = REQ_DONE;
      if (batch[i] != &me)
        pthread_cond_signal (&batch[i]->cond);
    }
    put_locked (c);
  }
  pthread_mutex_unlock (&pool.lock);
  pthread_cond_destroy (&me.cond);

  if (me.failed) {
    errno = EIO;
    return -1;
  }
  return 0;
}
