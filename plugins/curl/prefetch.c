/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Read-ahead for clients that keep few reads in flight: a VM booting
 * from the export, dd, cp, nbdcopy --requests=1.  Each of their reads
 * would cost a round trip (at 100 ms, 64 KiB reads one at a time get
 * half a percent of a 1 Gbit/s link), so a sequential stream of such
 * reads is served from one GET that runs ahead of it.
 *
 * Detection.  A read continues a run when it starts where an earlier
 * one ended (or a little after).  A stream starts when a read continues
 * a run of which a read has already been answered, while the client has
 * at most MAX_QD reads in the plugin: that is a client that waits for
 * its answers.  Clients that keep many reads in flight (nbdcopy,
 * qemu-img convert) fill the link themselves and are left to pool.c's
 * batches; random reads never continue a run, so they never start a
 * stream and cost no extra request.
 *
 * A stream is one GET of the range from that read to the object's end
 * (at most MAX_RANGE), read by a thread of its own on a connection of
 * the pool, into blocks of BLOCK bytes.  One connection's TCP window
 * grows once and stays open, as for curl's own GET.  How far the GET may
 * run ahead of what the client has read is the stream's window: it
 * starts at twice the read (at least one block) and doubles when a read
 * had to wait for bytes that the window held back, up to
 * readahead-size=; past it the thread stops reading the socket, and TCP
 * holds the server back.  So it grows to what keeps the reads from
 * waiting, and what is fetched but never read when the client stops is
 * about the window and the socket's buffer.  The blocks
 * of all streams together stay within readahead-size= (only a read that
 * waits for its own bytes may go past it).
 *
 * Reads inside a stream's range, at most a window ahead of where it
 * is, are served from it, waiting for bytes on their way rather than
 * asking again.  A read it cannot serve (before what it holds, past its
 * range, or when it failed) is an ordinary read of pool.c, so a failed
 * stream costs nothing but its request.  A stream that no read has used
 * for IDLE_NS, or for two round trips while reads go elsewhere, is
 * stopped: its connection is closed, since the rest of
 * its answer will not be read.
 *
 * The stream's answer is judged as every read's is (verdict.c): the
 * status, Content-Range, and the validators the reads are pinned to
 * are checked before any of its bytes is kept.  Once any answer shows
 * that the object changed (remote_changed), every stream and its bytes
 * are dropped.  A write drops every stream whose range it touches, before
 * and after its PUT (curl.c).
 *
 * NBD_CMD_CACHE (nbdkit's readahead and scan filters send it) starts a
 * stream at its offset, or lets the one there run ahead up to its end,
 * within readahead-size=.
 */

#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nbdkit-plugin.h>

#include "curldefs.h"

/* -D curl.readahead=1: each stream's start and end, what it fetched and
 * served, and the memory in use.
 */
NBDKIT_DLL_PUBLIC int curl_debug_readahead = 0;

#define MAX_STREAMS 4
#define MAX_RUNS 8
/* At most this many reads in the plugin at once for a stream to start. */
#define MAX_QD 4
#define BLOCK (256 * 1024)
/* Bytes kept behind the highest read served, for reads a little
 * behind it (a client with a few reads in flight).
 */
#define KEEP (4 * BLOCK)
#define MAX_RANGE (UINT64_C (1) << 30)
#define IDLE_NS (1000 * INT64_C (1000000))
/* ... and one the reads have passed by, after two round trips, or this. */
#define STALE_MIN_NS (20 * INT64_C (1000000))
/* A read up to this far past a run's end still continues it. */
#define MAX_SKIP (1024 * 1024)
/* After a stream failed at once, none starts for this long (doubled
 * each time up to MAX_BACKOFF_NS).
 */
#define BACKOFF_NS (1000 * INT64_C (1000000))
#define MAX_BACKOFF_NS (30 * INT64_C (1000000000))

struct stream {
  bool used;                    /* the slot holds a stream */
  bool running;                 /* its thread runs */
  bool reaping;                 /* its thread is being joined */
  unsigned readers;             /* reads waiting on it */
  unsigned gen;                 /* which stream the slot holds */
  bool abandon;                 /* its thread is to stop */
  bool failed;                  /* it ended before its range's end */
  uint64_t start, end;          /* the range asked for: [start, end) */
  uint64_t base;                /* the first byte still held */
  uint64_t got;                 /* the first byte not received yet */
  uint64_t consumed;            /* the highest end of a read served */
  uint64_t want;                /* reads wait for bytes up to here */
  uint64_t hint;                /* NBD_CMD_CACHE asked up to here */
  uint64_t window;
  bool held;                    /* the window held the GET back */
  uint64_t served;              /* bytes copied to reads */
  int64_t used_ns;              /* last read served or cache asked */
  char **blk;                   /* ring of nblk blocks */
  unsigned nblk;
  struct conn *conn;
  pthread_t thread;
  pthread_cond_t *cond;         /* anything changed */
};

/* A run of reads that continue each other. */
struct run {
  uint64_t next;                /* where the next read would start */
  unsigned answered;            /* its reads answered so far */
  int64_t at;                   /* last read (for replacing the oldest) */
};

static struct {
  pthread_mutex_t lock;
  struct stream s[MAX_STREAMS];
  pthread_cond_t cond[MAX_STREAMS];
  struct run runs[MAX_RUNS];
  unsigned inside;              /* reads in prefetch_pread now */
  unsigned max_blocks;          /* readahead-size= in blocks */
  unsigned blocks;              /* allocated, all streams */
  unsigned peak_blocks;
  char *spare_block;            /* one freed block kept for reuse */
  unsigned changed_seen;        /* remote_changed's count, acted on */
  int64_t fail_until;           /* no new stream before this */
  int64_t backoff_ns;
  bool stopping;
  uint64_t streams, fetched, served;  /* totals, for debug */
} ra = {
  .lock = PTHREAD_MUTEX_INITIALIZER,
};

static bool
enabled (void)
{
  return cfg.readahead_size > 0 && !cfg.is_file && object.size > 0;
}

void
prefetch_init (void)
{
  unsigned i;

  ra.max_blocks = (cfg.readahead_size + BLOCK - 1) / BLOCK;
  for (i = 0; i < MAX_STREAMS; i++) {
    pthread_cond_init (&ra.cond[i], NULL);
    ra.s[i].cond = &ra.cond[i];
  }
}

static void
free_block_locked (char *b)
{
  if (b == NULL)
    return;
  ra.blocks--;
  if (ra.spare_block == NULL)
    ra.spare_block = b;
  else
    free (b);
}

/* Drop what s holds below pos (a multiple of BLOCK from s->start, or
 * the range's end).
 */
static void
release_below_locked (struct stream *s, uint64_t pos)
{
  while (s->base < pos && s->base < s->got) {
    uint64_t i = (s->base - s->start) / BLOCK;
    char **b = &s->blk[i % s->nblk];

    free_block_locked (*b);
    *b = NULL;
    s->base = s->start + (i + 1) * BLOCK;
  }
  if (s->base > s->got)
    s->base = s->got;
}

static void
free_stream_locked (struct stream *s)
{
  unsigned i;

  if (curl_debug_readahead)
    nbdkit_debug ("read-ahead: stream at %" PRIu64 " ends%s: fetched %"
                  PRIu64 ", served %" PRIu64 " bytes; %u KiB held in all",
                  s->start, s->failed ? " (stopped or failed)" : "",
                  s->got - s->start, s->served,
                  (ra.blocks * BLOCK) / 1024);
  for (i = 0; i < s->nblk; i++) {
    free_block_locked (s->blk[i]);
    s->blk[i] = NULL;
  }
  free (s->blk);
  s->blk = NULL;
  s->used = s->reaping = false;
}

/* The slot of a stream whose thread has ended and that no read waits
 * on: joined and freed.
 */
static void
reap_locked (struct stream *s)
{
  if (!s->used || s->running || s->reaping || s->readers > 0)
    return;
  s->reaping = true;
  pthread_mutex_unlock (&ra.lock);
  pthread_join (s->thread, NULL);
  pthread_mutex_lock (&ra.lock);
  free_stream_locked (s);
}

static void
abandon_locked (struct stream *s)
{
  if (!s->used)
    return;
  s->abandon = true;
  pthread_cond_broadcast (s->cond);
}

/* The stream's thread: pool_get was done by the caller, the handle goes
 * back here.
 */
static bool sink (void *opaque, uint64_t pos, const char *data, size_t len);

static void *
stream_thread (void *opaque)
{
  struct stream *s = opaque;
  enum verdict v;
  int64_t now;

  v = engine_get_stream (s->conn, s->start, s->end - 1, sink, s);
  pool_put (s->conn);

  LOCK_FOR_SCOPE (&ra.lock);
  now = monotonic_ns ();
  s->conn = NULL;
  s->running = false;
  s->failed = verdict_failed (v);
  ra.fetched += s->got - s->start;
  if (curl_debug_readahead)
    nbdkit_debug ("read-ahead: stream at %" PRIu64 ": its GET ended: %s",
                  s->start, verdict_name (v));
  /* One that failed before it brought anything holds new ones back. */
  if (s->failed && !s->abandon && s->got == s->start) {
    ra.backoff_ns = ra.backoff_ns == 0 ? BACKOFF_NS : ra.backoff_ns * 2;
    if (ra.backoff_ns > MAX_BACKOFF_NS)
      ra.backoff_ns = MAX_BACKOFF_NS;
    ra.fail_until = now + ra.backoff_ns;
  }
  else if (!s->failed || s->got > s->start)
    ra.backoff_ns = 0;
  pthread_cond_broadcast (s->cond);
  return NULL;
}

/* Where the thread may write up to now. */
static uint64_t
limit_locked (const struct stream *s)
{
  uint64_t l = s->consumed + s->window;

  if (s->hint > l)
    l = s->hint;
  if (s->want > l)
    l = s->want;
  return l;
}

/* Room for the block at pos: false to wait. */
static bool
block_ready_locked (struct stream *s, uint64_t pos)
{
  uint64_t i = (pos - s->start) / BLOCK;
  char **b = &s->blk[i % s->nblk];
  uint64_t keep;

  if (*b != NULL)
    return true;
  /* The ring is full: what the reads have gone past, less one block
   * for a read a little behind, may go.
   */
  if (i - (s->base - s->start) / BLOCK >= s->nblk) {
    keep = s->consumed > s->start + KEEP ? s->consumed - KEEP : s->start;
    release_below_locked (s, keep - (keep - s->start) % BLOCK);
    if (i - (s->base - s->start) / BLOCK >= s->nblk)
      return false;
  }
  if (ra.blocks >= ra.max_blocks && pos >= s->want)
    return false;
  if (ra.spare_block != NULL) {
    *b = ra.spare_block;
    ra.spare_block = NULL;
  }
  else if ((*b = malloc (BLOCK)) == NULL)
    return false;
  ra.blocks++;
  if (ra.blocks > ra.peak_blocks)
    ra.peak_blocks = ra.blocks;
  return true;
}

static bool
must_stop_locked (struct stream *s, int64_t now)
{
  if (ra.stopping || s->abandon)
    return true;
  if (now - s->used_ns > IDLE_NS) {
    s->abandon = true;
    return true;
  }
  return false;
}

static void
wait_locked (struct stream *s, int64_t ns)
{
  int64_t until = monotonic_ns () + ns;
  struct timespec ts = {
    .tv_sec = until / 1000000000, .tv_nsec = until % 1000000000,
  };

  pthread_cond_timedwait (s->cond, &ra.lock, &ts);
}

/* engine.c hands over the answer's body as it comes (pos from the
 * range's start); len 0 only asks whether to go on.  False stops the
 * transfer.
 */
static bool
sink (void *opaque, uint64_t pos, const char *data, size_t len)
{
  struct stream *s = opaque;
  uint64_t at = s->start + pos;
  size_t n;

  LOCK_FOR_SCOPE (&ra.lock);
  if (len == 0)
    return !must_stop_locked (s, monotonic_ns ());
  /* Up to the window (a piece may cross it: it is here already). */
  while (at >= limit_locked (s)) {
    if (must_stop_locked (s, monotonic_ns ()))
      return false;
    s->held = true;
    wait_locked (s, 100 * 1000000);
  }
  while (len > 0) {
    uint64_t off = (at - s->start) % BLOCK;

    while (!block_ready_locked (s, at)) {
      if (must_stop_locked (s, monotonic_ns ()))
        return false;
      wait_locked (s, 100 * 1000000);
    }
    n = BLOCK - off < len ? BLOCK - off : len;
    memcpy (s->blk[((at - s->start) / BLOCK) % s->nblk] + off, data, n);
    data += n;
    len -= n;
    at += n;
    s->got = at;
  }
  pthread_cond_broadcast (s->cond);
  return true;
}

/* Start a stream at offset (for a read of count bytes, or a cache
 * request up to hint); NULL when none can start.
 */
static struct stream *
start_locked (uint64_t offset, uint32_t count, uint64_t hint, int64_t now)
{
  struct stream *s = NULL, *oldest = NULL;
  uint64_t end;
  unsigned i, nblk;

  if (ra.stopping || now < ra.fail_until)
    return NULL;
  for (i = 0; i < MAX_STREAMS; i++) {
    reap_locked (&ra.s[i]);
    if (!ra.s[i].used) {
      s = &ra.s[i];
      break;
    }
    if (oldest == NULL || ra.s[i].used_ns < oldest->used_ns)
      oldest = &ra.s[i];
  }
  if (s == NULL) {
    /* The oldest goes; its slot is free next time. */
    if (oldest != NULL && now - oldest->used_ns > IDLE_NS / 8)
      abandon_locked (oldest);
    return NULL;
  }
  end = (uint64_t) object.size;
  if (end - offset > MAX_RANGE)
    end = offset + MAX_RANGE;
  /* The ring: readahead-size=, and room for the read itself. */
  nblk = ra.max_blocks + KEEP / BLOCK + 3 + count / BLOCK;
  *s = (struct stream) {
    .used = true, .running = true, .gen = s->gen + 1,
    .start = offset, .end = end,
    .base = offset, .got = offset, .consumed = offset,
    .want = offset + count, .hint = hint,
    .window = 2 * (uint64_t) count < BLOCK ? BLOCK : 2 * (uint64_t) count,
    .used_ns = now, .nblk = nblk, .cond = s->cond,
  };
  s->blk = calloc (nblk, sizeof s->blk[0]);
  if (s->blk == NULL) {
    s->used = false;
    return NULL;
  }
  s->conn = pool_try_get ();
  if (s->conn == NULL) {
    free (s->blk);
    s->blk = NULL;
    s->used = false;
    return NULL;
  }
  errno = pthread_create (&s->thread, NULL, stream_thread, s);
  if (errno != 0) {
    nbdkit_debug ("read-ahead: pthread_create: %m");
    pool_put (s->conn);
    s->conn = NULL;
    free (s->blk);
    s->blk = NULL;
    s->used = false;
    return NULL;
  }
  ra.streams++;
  if (curl_debug_readahead)
    nbdkit_debug ("read-ahead: stream from %" PRIu64 " to %" PRIu64
                  " starts; %u KiB held in all, at most %u KiB",
                  offset, end, (ra.blocks * BLOCK) / 1024,
                  (ra.max_blocks * BLOCK) / 1024);
  return s;
}

/* The stream that can serve [offset, offset+count): its range holds it,
 * it still holds offset, and offset is at most a window past what has
 * come.  When wait is false, only one that has all of it.
 */
static struct stream *
find_locked (uint64_t offset, uint32_t count, bool wait)
{
  unsigned i;

  for (i = 0; i < MAX_STREAMS; i++) {
    struct stream *s = &ra.s[i];
    uint64_t reach;

    if (!s->used || s->abandon || offset < s->base ||
        offset + count > s->end)
      continue;
    if (offset + count <= s->got)
      return s;
    reach = (s->got > s->consumed ? s->got : s->consumed) +
      (s->window > MAX_SKIP ? s->window : MAX_SKIP);
    if (wait && s->running && offset <= reach &&
        (uint64_t) count + KEEP + 2 * BLOCK <= (uint64_t) s->nblk * BLOCK)
      return s;
  }
  return NULL;
}

static void
copy_out_locked (const struct stream *s, char *buf, uint32_t count,
                 uint64_t offset)
{
  while (count > 0) {
    uint64_t i = (offset - s->start) / BLOCK, off = (offset - s->start) % BLOCK;
    uint32_t n = BLOCK - off < count ? BLOCK - off : count;

    memcpy (buf, s->blk[i % s->nblk] + off, n);
    buf += n;
    offset += n;
    count -= n;
  }
}

/* Bytes before pos (less KEEP) are no longer needed. */
static void
consumed_locked (struct stream *s, uint64_t pos)
{
  uint64_t keep;

  if (pos > s->consumed)
    s->consumed = pos;
  keep = s->consumed > s->start + KEEP ? s->consumed - KEEP : s->start;
  release_below_locked (s, keep - (keep - s->start) % BLOCK);
}

/* Serve the read from s, waiting for its bytes: false if s ended
 * without them (the read is then an ordinary one).  A read that skips
 * forward lets go of what it skipped (less KEEP), so that the bytes it
 * waits for always have room.
 */
static bool
serve_locked (struct stream *s, char *buf, uint32_t count, uint64_t offset)
{
  unsigned gen = s->gen;
  uint64_t max = (uint64_t) ra.max_blocks * BLOCK;
  bool waited = s->got < offset + count;

  if (offset + count > s->want)
    s->want = offset + count;
  consumed_locked (s, offset);
  s->used_ns = monotonic_ns ();
  pthread_cond_broadcast (s->cond);
  s->readers++;
  while (s->got < offset + count && s->running && !s->abandon &&
         !ra.stopping)
    pthread_cond_wait (s->cond, &ra.lock);
  s->readers--;
  if (s->gen != gen || s->got < offset + count || offset < s->base)
    return false;
  copy_out_locked (s, buf, count, offset);
  s->served += count;
  ra.served += count;
  /* The read waited for bytes that the window had held back. */
  if (waited && s->held && s->window < max)
    s->window = 2 * s->window < max ? 2 * s->window : max;
  s->held = false;
  consumed_locked (s, offset + count);
  s->used_ns = monotonic_ns ();
  pthread_cond_broadcast (s->cond);
  return true;
}

/* The run that [offset, offset+count) continues, or a new one in the
 * oldest's place.
 */
static struct run *
run_locked (uint64_t offset, uint32_t count, int64_t now, bool *continues)
{
  struct run *r, *oldest = &ra.runs[0];
  unsigned i;

  for (i = 0; i < MAX_RUNS; i++) {
    r = &ra.runs[i];
    if (r->at != 0 && offset >= r->next && offset - r->next <= MAX_SKIP) {
      *continues = true;
      r->next = offset + count;
      r->at = now;
      return r;
    }
    if (r->at < oldest->at)
      oldest = r;
  }
  *continues = false;
  *oldest = (struct run) { .next = offset + count, .at = now };
  return oldest;
}

/* A changed object: nothing read ahead of it is served again. */
static void
check_changed_locked (void)
{
  unsigned n = remote_changed (), i;

  if (n == ra.changed_seen)
    return;
  ra.changed_seen = n;
  for (i = 0; i < MAX_STREAMS; i++) {
    struct stream *s = &ra.s[i];

    if (!s->used)
      continue;
    abandon_locked (s);
    release_below_locked (s, s->got);
  }
}

/* Streams idle too long are stopped (their threads stop themselves too,
 * when they wait), and ended ones freed.  A stream that the reads have
 * passed by for a few round trips is stopped sooner, so that it does not
 * take the link from the stream the client follows now (a read that is
 * none of its own, keep, says the client is elsewhere).
 */
static void
tidy_locked (int64_t now, const struct stream *keep)
{
  int64_t stale = 2 * engine_round_trip ();
  unsigned i;

  if (stale < STALE_MIN_NS)
    stale = STALE_MIN_NS;
  for (i = 0; i < MAX_STREAMS; i++) {
    struct stream *s = &ra.s[i];

    if (s->used && s != keep &&
        now - s->used_ns > (keep != NULL || ra.inside > 0 ? stale : IDLE_NS)) {
      abandon_locked (s);
      reap_locked (s);
    }
  }
}

int
prefetch_pread (void *buf, uint32_t count, uint64_t offset)
{
  struct stream *s;
  struct run *r;
  bool continues;
  int64_t now;
  int ret;

  if (!enabled ())
    return pool_pread (buf, count, offset);

  pthread_mutex_lock (&ra.lock);
  now = monotonic_ns ();
  ra.inside++;
  check_changed_locked ();
  r = run_locked (offset, count, now, &continues);
  s = find_locked (offset, count, ra.inside <= 2 * MAX_QD);
  if (s == NULL && cfg.readahead && continues && r->answered >= 1 &&
      ra.inside <= MAX_QD)
    s = start_locked (offset, count, 0, now);
  tidy_locked (now, s);
  if (s != NULL && serve_locked (s, buf, count, offset)) {
    r->answered++;
    ra.inside--;
    pthread_mutex_unlock (&ra.lock);
    return 0;
  }
  pthread_mutex_unlock (&ra.lock);

  ret = pool_pread (buf, count, offset);

  pthread_mutex_lock (&ra.lock);
  ra.inside--;
  if (ret == 0)
    r->answered++;
  pthread_mutex_unlock (&ra.lock);
  return ret;
}

/* NBD_CMD_CACHE: read [offset, offset+count) ahead.  Advisory: it never
 * fails.
 */
int
prefetch_cache (uint32_t count, uint64_t offset)
{
  struct stream *s;
  int64_t now;
  unsigned i;

  if (!enabled ())
    return 0;
  LOCK_FOR_SCOPE (&ra.lock);
  now = monotonic_ns ();
  check_changed_locked ();
  for (i = 0; i < MAX_STREAMS; i++) {
    s = &ra.s[i];
    if (s->used && !s->abandon && s->running && offset >= s->base &&
        offset <= (s->got > s->consumed ? s->got : s->consumed) + s->window &&
        offset < s->end) {
      if (offset + count > s->hint)
        s->hint = offset + count;
      s->used_ns = now;
      pthread_cond_broadcast (s->cond);
      return 0;
    }
  }
  s = start_locked (offset, 0, offset + count, now);
  tidy_locked (now, s);
  return 0;
}

/* A write of [offset, offset+count): every stream whose range it
 * touches is dropped with its bytes.
 */
void
prefetch_invalidate (uint32_t count, uint64_t offset)
{
  unsigned i;

  LOCK_FOR_SCOPE (&ra.lock);
  for (i = 0; i < MAX_STREAMS; i++) {
    struct stream *s = &ra.s[i];

    if (s->used && offset < s->end && offset + count > s->base) {
      abandon_locked (s);
      release_below_locked (s, s->got);
    }
  }
}

/* Before the pool goes: stop every stream and wait for its thread. */
void
prefetch_unload (void)
{
  unsigned i;

  pthread_mutex_lock (&ra.lock);
  ra.stopping = true;
  for (i = 0; i < MAX_STREAMS; i++)
    abandon_locked (&ra.s[i]);
  for (i = 0; i < MAX_STREAMS; i++) {
    struct stream *s = &ra.s[i];

    while (s->used && s->running)
      pthread_cond_wait (s->cond, &ra.lock);
    reap_locked (s);
  }
  if (curl_debug_readahead && ra.streams > 0)
    nbdkit_debug ("read-ahead: %" PRIu64 " streams fetched %" PRIu64
                  " bytes and served %" PRIu64 "; at most %u KiB held",
                  ra.streams, ra.fetched, ra.served,
                  (ra.peak_blocks * BLOCK) / 1024);
  free (ra.spare_block);
  ra.spare_block = NULL;
  pthread_mutex_unlock (&ra.lock);
  for (i = 0; i < MAX_STREAMS; i++)
    pthread_cond_destroy (&ra.cond[i]);
}
