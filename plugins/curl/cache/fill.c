/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The fill (cache-fill=true): the blocks no one has read yet, fetched
 * into the cache in the background.  A VM booted from a URL then comes
 * to read from local disk only, and keeps running if the origin goes.
 * WORKERS threads take runs of RUN blocks in order, each a read of its
 * own down the links below the cache, so several are in flight: enough
 * to fill a long link.  Clients go first.  While one has read in the last
 * IDLE_NS, one worker alone fetches one block at a time, in reads of
 * TRICKLE bytes, each GAP_NS after a client's read began: a client's read
 * then finds at most that much of the fill ahead of it on the link, not
 * all of the runs.  A
 * worker claims its blocks as a client's read would (store/claim.c), so
 * fills in several processes share the work.
 */

#include <config.h>

#include <inttypes.h>
#include <stdio.h>

#include <nbdkit-plugin.h>

#include "cache/cache.h"

#define WORKERS 4
#define RUN 4                           /* blocks a worker asks for at once */
#define IDLE_NS (INT64_C (500) * 1000000)
#define GAP_NS (INT64_C (5) * 1000000)
#define TRICKLE (256 * 1024)            /* beside a client, a read's bytes */

static struct {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  const struct read_link *below;
  pthread_t thread[WORKERS];
  unsigned nthreads, running;
  unsigned fetching;                    /* workers in a fetch now */
  bool stop;
  uint64_t next;                        /* the next block to look at */
  unsigned pass;                        /* 0, then 1 */
  uint64_t filled, shown;               /* blocks this fill wrote */
  int64_t start_ns;
} fill = {
  .lock = PTHREAD_MUTEX_INITIALIZER,
};

static int64_t last_read_ns;    /* a client's last read: 0 before */

/* A client reads now (cache.c): the fill gives way. */
void
fill_note_read (void)
{
  __atomic_store_n (&last_read_ns, clock_ns (), __ATOMIC_RELAXED);
}

/* Wait for this worker's turn: *run gets how many blocks it may fetch
 * (RUN with no client about, else 1), and it counts as fetching until
 * fetched.  False if stopped.
 */
static bool
wait_turn (unsigned *run)
{
  struct timespec ts;
  int64_t last, now, wake;
  bool stop;

  pthread_mutex_lock (&fill.lock);
  for (;;) {
    if (fill.stop)
      break;
    last = __atomic_load_n (&last_read_ns, __ATOMIC_RELAXED);
    now = clock_ns ();
    if (last == 0 || now - last >= IDLE_NS) {
      *run = RUN;
      break;
    }
    if (fill.fetching == 0 && now - last >= GAP_NS) {
      *run = 1;
      break;
    }
    wake = fill.fetching == 0 ? last + GAP_NS : last + IDLE_NS;
    ts = clock_at (wake);
    pthread_cond_timedwait (&fill.cond, &fill.lock, &ts);
  }
  stop = fill.stop;
  if (!stop)
    fill.fetching++;
  pthread_mutex_unlock (&fill.lock);
  return !stop;
}

static void
fetched (void)
{
  LOCK_FOR_SCOPE (&fill.lock);
  fill.fetching--;
  pthread_cond_broadcast (&fill.cond);
}

/* The next run of blocks not on disk, up to max, claimed: its first
 * and count.  0 at the end of the second pass, which takes the blocks
 * that other processes claimed in the first and did not bring.
 */
static unsigned
take_run (uint64_t *first, unsigned max)
{
  unsigned n = 0;
  enum store_claim c;

  LOCK_FOR_SCOPE (&fill.lock);
  while (fill.next < store.nblocks && store_has (fill.next))
    fill.next++;
  if (fill.next == store.nblocks && fill.pass == 0) {
    fill.pass++;
    fill.next = 0;
    while (fill.next < store.nblocks && store_has (fill.next))
      fill.next++;
  }
  *first = fill.next;
  while (n < max && fill.next < store.nblocks && !store_has (fill.next) &&
         store_may_write ()) {
    c = store_claim (fill.next);
    if (c == CLAIM_OTHERS) {
      if (n > 0)
        break;
      *first = ++fill.next;     /* another process fetches it */
      continue;
    }
    fill.next++;
    n++;
  }
  return n;
}

static void
progress (void)
{
  uint64_t have = 0, b;

  for (b = 0; b < store.nblocks; b++)
    have += store_has (b);
  nbdkit_debug ("cache fill: %" PRIu64 " of %" PRIu64 " MiB cached "
                "(%" PRIu64 "%%), %.1f s",
                min64 (have * STORE_BLOCK, store.size) >> 20,
                store.size >> 20, 100 * have / store.nblocks,
                (clock_ns () - fill.start_ns) / 1e9);
}

/* One second, or less if stopped: false if stopped. */
static bool
pause_a_second (void)
{
  struct timespec ts = clock_at (clock_ns () + INT64_C (1000000000));
  bool stop;

  pthread_mutex_lock (&fill.lock);
  if (!fill.stop)
    pthread_cond_timedwait (&fill.cond, &fill.lock, &ts);
  stop = fill.stop;
  pthread_mutex_unlock (&fill.lock);
  return !stop;
}

/* Sleep until GAP_NS after a client's last read began. */
static void
after_gap (void)
{
  int64_t wake = __atomic_load_n (&last_read_ns, __ATOMIC_RELAXED) + GAP_NS;
  struct timespec ts;

  if (clock_ns () < wake) {
    ts = clock_at (wake);
    pthread_mutex_lock (&fill.lock);
    pthread_cond_timedwait (&fill.cond, &fill.lock, &ts);
    pthread_mutex_unlock (&fill.lock);
  }
}

/* Fetch one run and keep its blocks: false if the read failed.  Beside
 * a client (one block), in reads of TRICKLE bytes, each after a gap.
 */
static bool
fetch_run (struct ra_client *own, char *buf, uint64_t first, unsigned n,
           bool beside)
{
  struct read_op op = { .client = own, .buf = buf, .offset =
                        first * STORE_BLOCK };
  uint64_t b, end;
  bool ok = true;

  end = op.offset + min64 ((uint64_t) n * STORE_BLOCK,
                           store.size - op.offset);
  for (; ok && op.offset < end; op.offset += op.count, op.buf += op.count) {
    op.count = min64 (beside ? TRICKLE : end - op.offset, end - op.offset);
    if (beside)
      after_gap ();
    ok = read_next (fill.below, &op) == 0;
  }
  for (b = first; b < first + n; b++) {
    if (!ok)
      store_unclaim (b);
    else if (store_put (b, buf + (b - first) * STORE_BLOCK)) {
      LOCK_FOR_SCOPE (&fill.lock);
      fill.filled++;
    }
  }
  return ok;
}

static void *
worker (void *arg)
{
  struct ra_client own = { 0 };
  char *buf = malloc ((size_t) RUN * STORE_BLOCK);
  uint64_t first;
  unsigned n, run, failures = 0;

  object_piece_thread (&fill.stop);
  while (buf != NULL && failures < 3 && wait_turn (&run)) {
    /* The disk full or nearly: wait, as for a client, then look again. */
    if (!store_may_write ()) {
      fetched ();
      if (__atomic_load_n (&store.no_writes, __ATOMIC_RELAXED) ||
          !pause_a_second ())
        break;                  /* writes failed for good, or stopped */
      continue;
    }
    n = take_run (&first, run);
    if (n > 0 && !fetch_run (&own, buf, first, n, run == 1))
      failures++;
    fetched ();
    if (n == 0)
      break;
    pthread_mutex_lock (&fill.lock);
    if (fill.filled >= fill.shown + store.nblocks / 10 + 1) {
      fill.shown = fill.filled;
      pthread_mutex_unlock (&fill.lock);
      progress ();
    }
    else
      pthread_mutex_unlock (&fill.lock);
  }
  free (buf);
  readahead_close (&own);
  pthread_mutex_lock (&fill.lock);
  if (--fill.running == 0 && !fill.stop) {
    pthread_mutex_unlock (&fill.lock);
    store_write_flush ();
    progress ();
    nbdkit_debug ("cache fill: done%s", failures ? " (some reads failed)"
                  : "");
  }
  else
    pthread_mutex_unlock (&fill.lock);
  return NULL;
}

/* Once nbdkit runs, with cache-fill=true: the workers, reading through
 * the links below the cache link, below.
 */
void
fill_start (const struct read_link *below)
{
  pthread_condattr_t attr;
  unsigned i;

  if (!cfg.cache_fill || !store_on ())
    return;
  pthread_condattr_init (&attr);
  pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
  pthread_cond_init (&fill.cond, &attr);
  pthread_condattr_destroy (&attr);
  fill.below = below;
  fill.start_ns = clock_ns ();
  LOCK_FOR_SCOPE (&fill.lock);
  for (i = 0; i < WORKERS; i++) {
    if (pthread_create (&fill.thread[i], NULL, worker, NULL) != 0)
      break;
    fill.nthreads++;
    fill.running++;
  }
  nbdkit_debug ("cache fill: %u threads fetch what is not cached yet",
                fill.nthreads);
}

void
fill_stop (void)
{
  unsigned i;

  if (fill.nthreads == 0)
    return;
  pthread_mutex_lock (&fill.lock);
  __atomic_store_n (&fill.stop, true, __ATOMIC_RELAXED);
  pthread_cond_broadcast (&fill.cond);
  pthread_mutex_unlock (&fill.lock);
  for (i = 0; i < fill.nthreads; i++)
    pthread_join (fill.thread[i], NULL);
  fill.nthreads = 0;
  pthread_cond_destroy (&fill.cond);
}
