/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Read-ahead's GETs, called segments.  Each asks for one range, on a
 * connection of the pool, in a thread of its own.  It keeps the answer's
 * bytes in blocks of BLOCK bytes as they come, freed as the reads go past
 * them.  What to ask for, and which reads a segment serves, is stream.c's.
 * seg_lock guards read-ahead's state in all three files.
 *
 * A segment's answer is judged as every read's is, by callbacks.c and
 * rules/verdict.c.  A segment that stopped early or failed holds nothing a
 * read may take: stream.c serves a segment only once its GET ended well.
 * It stops when nbdkit does, and when it or its stream was abandoned.  It
 * stops too when no read has used its stream for IDLE_NS and none waits on
 * it.  A client that stopped reading would never read the rest of the
 * answer, so its connection is closed instead.  But when little of the
 * answer is left to come (DRAIN_MAX), it is read and thrown away, so that
 * the connection stays open.  Over HTTP/2 only the stream is reset, and the
 * connection stays open either way.  Draining costs little there too.
 */

#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-plugin.h>

#include "read/segment.h"

/* -D curl.readahead=1: each stream's start and end, what it fetched and
 * served, and the memory in use (stream.c prints most of it).
 */
NBDKIT_DLL_PUBLIC int curl_debug_readahead = 0;

pthread_mutex_t seg_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t seg_cond;        /* on CLOCK_MONOTONIC: see segment_init */
struct seg seg_table[MAX_SEGS];
unsigned seg_blocks, seg_peak_blocks;   /* allocated, all segments */
uint64_t seg_started, seg_fetched;      /* totals, for debug */

/* See must_stop_locked. */
#define DRAIN_MAX (1024 * 1024)
#define DRAIN_NS (500 * INT64_C (1000000))

/* Freed blocks kept for reuse, up to SPARE_BLOCKS (16 MiB).  A block
 * that malloc gets anew (256 KiB: mmap's, or the heap's once trimmed)
 * faults its pages in at its first bytes.  With one spare kept, a copy
 * of 256 MiB on loopback that a stream served took 14,900 page faults;
 * with these, 10,400.
 */
#define SPARE_BLOCKS 64
static char *spare_blocks[SPARE_BLOCKS];
static unsigned nr_spare_blocks;
static bool stopping;           /* nbdkit unloads the plugin */
/* Threads may start (nbdkit has forked): before, a segment (the head
 * start: readahead.c) is begun on mux.c's multi handle, and its thread
 * starts in segment_after_fork_locked.
 */
static bool threads_ok;

static void
free_block_locked (char *b)
{
  if (b == NULL)
    return;
  seg_blocks--;
  if (nr_spare_blocks < SPARE_BLOCKS)
    spare_blocks[nr_spare_blocks++] = b;
  else
    free (b);
}

/* Free g's blocks that end at or before pos. */
void
segment_release_below_locked (struct seg *g, uint64_t pos)
{
  while (g->base < g->end) {
    uint64_t k = (g->base - g->start) / BLOCK;
    uint64_t bend = g->start + (k + 1) * BLOCK;

    if (bend > g->end)
      bend = g->end;
    if (bend > pos)
      break;
    free_block_locked (g->blk[k]);
    g->blk[k] = NULL;
    g->base = bend;
  }
}

/* A segment whose thread has ended and that no read waits on: joined
 * and freed.
 */
void
segment_reap_locked (struct seg *g)
{
  if (!g->used || g->running || g->reaping || g->readers > 0)
    return;
  g->reaping = true;
  if (g->threaded) {
    pthread_mutex_unlock (&seg_lock);
    pthread_join (g->thread, NULL);
    pthread_mutex_lock (&seg_lock);
  }
  segment_release_below_locked (g, g->end);
  free (g->blk);
  g->blk = NULL;
  g->owner->nsegs--;
  g->used = g->reaping = false;
}

void
segment_abandon_locked (struct seg *g)
{
  g->abandon = true;
  segment_release_below_locked (g, g->end);
  pthread_cond_broadcast (&seg_cond);
}

/* Whether g is to stop: *keep says whether to keep what comes.  One
 * that is no longer wanted but has at most DRAIN_MAX left to come reads
 * it to the end, for at most DRAIN_NS, and throws it away: that keeps
 * its connection, where stopping would close it, and most of it is on
 * its way already.
 */
static bool
must_stop_locked (struct seg *g, bool *keep)
{
  struct seg_owner *o = g->owner;
  int64_t now = clock_ns ();

  *keep = false;
  if (stopping)
    return true;
  if (!g->abandon && !o->abandon && g->readers == 0 &&
      now - o->used_ns > IDLE_NS) {
    if (curl_debug_readahead)
      nbdkit_debug ("read-ahead: stream from %" PRIu64 ": no read for a "
                    "second: stopped", o->start);
    o->abandon = true;          /* its other segments stop too */
  }
  if (g->abandon || o->abandon) {
    if (g->drain_until == 0)
      g->drain_until = now + DRAIN_NS;
    return g->end - g->got > DRAIN_MAX || now > g->drain_until;
  }
  *keep = true;
  return false;
}

/* callbacks.c hands over the answer's body as it comes (pos from the
 * range's start); len 0 only asks whether to go on.  False stops the
 * transfer.  Bytes below base (reads went past them) are not kept.
 */
static bool
sink (void *opaque, uint64_t pos, const char *data, size_t len)
{
  struct seg *g = opaque;
  uint64_t at = g->start + pos;
  bool keep;

  LOCK_FOR_SCOPE (&seg_lock);
  if (must_stop_locked (g, &keep))
    return false;
  if (len == 0)
    return true;
  while (len > 0) {
    uint64_t k = (at - g->start) / BLOCK, off = (at - g->start) % BLOCK;
    size_t n = BLOCK - off < len ? BLOCK - off : len;

    if (keep && at + n > g->base) {
      if (g->blk[k] == NULL) {
        g->blk[k] = nr_spare_blocks > 0
          ? spare_blocks[--nr_spare_blocks] : malloc (BLOCK);
        if (g->blk[k] == NULL)
          return false;
        if (++seg_blocks > seg_peak_blocks)
          seg_peak_blocks = seg_blocks;
      }
      memcpy (g->blk[k] + off, data, n);
    }
    data += n;
    len -= n;
    at += n;
  }
  g->got = at;
  pthread_cond_broadcast (&seg_cond);
  return true;
}

/* g's GET ended with v (its connection given back). */
static void
ended_locked (struct seg *g, enum verdict v, bool early)
{
  struct seg_owner *o = g->owner;
  unsigned i;

  g->conn = NULL;
  g->early = NULL;
  g->running = false;
  o->nrunning--;
  g->failed = verdict_failed (v);
  seg_fetched += g->got - g->start;
  o->fetched += g->got - g->start;
  /* A GET of the head start that failed ends it, all of its GETs, but
   * costs later streams no back-off: a reader of its range would else
   * ask for each of its reads for as long as the stream lived.  One past
   * the end of a smaller object (asked before its size was known) only
   * serves nothing.
   */
  if (g->failed && early && g->end <= (uint64_t) object.size) {
    o->abandon = true;
    for (i = 0; i < MAX_SEGS; i++)
      if (seg_table[i].used && seg_table[i].owner == o)
        segment_abandon_locked (&seg_table[i]);
  }
  o->ended (o, !g->failed,
            g->failed && !early && !g->abandon && !o->abandon && !stopping);
  pthread_cond_broadcast (&seg_cond);
}

static void *
seg_thread (void *opaque)
{
  struct seg *g = opaque;
  bool early = g->early != NULL;
  enum verdict v;

  object_plugin_thread ();
  v = early ? headstart_end (g->early)
    : request_get_stream (g->conn, g->start, g->end - 1, sink, g);
  pool_put (g->conn);

  LOCK_FOR_SCOPE (&seg_lock);
  ended_locked (g, v, early);
  return NULL;
}

/* Before nbdkit forks, where no thread may start: g's GET goes out on
 * mux.c's multi handle now, in the probe's flight, and its thread
 * starts later (segment_after_fork_locked).
 */
static bool
begin_early_locked (struct seg *g)
{
  g->early = headstart_begin (g->conn, g->start, g->end - 1, sink, g);
  return g->early != NULL;
}

/* g, begun early and without a thread, ended here: it was abandoned,
 * so its sink stops it at once.
 */
static void
end_here_locked (struct seg *g)
{
  struct headstart *e = g->early;
  struct conn *c = g->conn;
  enum verdict v;

  g->early = NULL;              /* not for another to end */
  pthread_mutex_unlock (&seg_lock);
  v = headstart_end (e);
  pool_put (c);
  pthread_mutex_lock (&seg_lock);
  ended_locked (g, v, true);
}

/* Once nbdkit runs: the threads of the segments begun before.  One
 * whose thread cannot start is stopped and waited for here.
 */
void
segment_after_fork_locked (void)
{
  unsigned i;
  int err;

  threads_ok = true;
  for (i = 0; i < MAX_SEGS; i++) {
    struct seg *g = &seg_table[i];

    if (!g->used || g->early == NULL || g->threaded)
      continue;
    /* A second without reads stops a stream: from now, when clients
     * may come, not from the probe's time.
     */
    g->owner->used_ns = clock_ns ();
    err = pthread_create (&g->thread, NULL, seg_thread, g);
    if (err == 0) {
      g->threaded = true;
      continue;
    }
    nbdkit_debug ("read-ahead: pthread_create: %s", strerror (err));
    g->abandon = true;
    end_here_locked (g);
  }
}

/* Ask for [start, end) for o: false when no slot or connection is free
 * now.
 */
bool
segment_start_locked (struct seg_owner *o, uint64_t start, uint64_t end)
{
  struct seg *g = NULL;
  unsigned i;
  int err;

  if (stopping)
    return false;
  for (i = 0; i < MAX_SEGS && g == NULL; i++)
    if (!seg_table[i].used)
      g = &seg_table[i];
  if (g == NULL)
    return false;
  *g = (struct seg) {
    .used = true, .running = true, .gen = g->gen + 1, .owner = o,
    .start = start, .end = end, .got = start, .base = start,
  };
  g->blk = calloc ((end - start + BLOCK - 1) / BLOCK, sizeof g->blk[0]);
  g->conn = g->blk != NULL ? pool_try_get () : NULL;
  if (g->conn == NULL) {
    free (g->blk);
    g->used = false;
    return false;
  }
  if (!threads_ok)
    err = begin_early_locked (g) ? 0 : EAGAIN;
  else {
    err = pthread_create (&g->thread, NULL, seg_thread, g);
    if (err != 0)
      nbdkit_debug ("read-ahead: pthread_create: %s", strerror (err));
    g->threaded = err == 0;
  }
  if (err != 0) {
    pool_put (g->conn);
    free (g->blk);
    g->used = false;
    return false;
  }
  o->nsegs++;
  o->nrunning++;
  seg_started++;
  return true;
}

/* Wait for g's GET to end, at most until the deadline: false if it did
 * not.
 */
bool
segment_wait_locked (struct seg *g, int64_t until)
{
  struct timespec ts = clock_at (until);

  g->readers++;
  while (g->running && !g->abandon && !stopping && clock_ns () < until)
    pthread_cond_timedwait (&seg_cond, &seg_lock, &ts);
  g->readers--;
  return !g->running;
}

/* g's bytes [from, to) into buf: false, and nothing copied, if a block
 * of them is not held (which the caller's checks should rule out: no
 * read is ever served from memory that holds none of its bytes).
 */
bool
segment_copy_locked (struct seg *g, char *buf, uint64_t from, uint64_t to)
{
  uint64_t k;

  for (k = (from - g->start) / BLOCK; k <= (to - 1 - g->start) / BLOCK; k++)
    if (g->blk[k] == NULL)
      return false;
  g->served += to - from;
  while (from < to) {
    uint64_t off = (from - g->start) % BLOCK;
    uint64_t n = BLOCK - off < to - from ? BLOCK - off : to - from;

    k = (from - g->start) / BLOCK;
    memcpy (buf, g->blk[k] + off, n);
    buf += n;
    from += n;
  }
  return true;
}

/* Before any segment: seg_cond waits on CLOCK_MONOTONIC, the clock of
 * segment_wait_locked's deadlines (clock_ns).  With the default clock
 * (CLOCK_REALTIME) such a deadline is long past, the wait returns at
 * once, and a read waiting for its segment spun a core.
 */
void
segment_init (void)
{
  pthread_condattr_t attr;

  pthread_condattr_init (&attr);
  pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
  pthread_cond_init (&seg_cond, &attr);
  pthread_condattr_destroy (&attr);
}

/* At unload: every segment stopped, its thread joined, memory freed. */
void
segment_stop_all_locked (void)
{
  unsigned i;

  stopping = true;
  for (i = 0; i < MAX_SEGS; i++)
    if (seg_table[i].used)
      segment_abandon_locked (&seg_table[i]);
  /* Begun before nbdkit ran, and no thread came to wait for them. */
  for (i = 0; i < MAX_SEGS; i++)
    if (seg_table[i].used && seg_table[i].early != NULL &&
        !seg_table[i].threaded)
      end_here_locked (&seg_table[i]);
  for (i = 0; i < MAX_SEGS; i++) {
    while (seg_table[i].used && seg_table[i].running)
      pthread_cond_wait (&seg_cond, &seg_lock);
    segment_reap_locked (&seg_table[i]);
  }
  while (nr_spare_blocks > 0)
    free (spare_blocks[--nr_spare_blocks]);
}
