/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Read-ahead's streams: what a stream asks for ahead of its reads, and
 * which reads it serves.  When a stream starts is readahead.c's, and its
 * GETs are segment.c's.  Every function here is called with seg_lock held.
 *
 * Segments.  A stream asks for the bytes ahead of its reads in segments,
 * GETs of one range each (segment.c).  Each is read by a thread of its own,
 * on a connection of the pool, into blocks freed as the reads go past them.
 * The stream keeps up to its window asked for ahead of the highest read it
 * served.  It asks for more when less than three quarters of the window is
 * left.  The window starts at four reads, and at least MIN_SEG.  After a
 * stream that served within IDLE_NS, it starts at half that stream's length
 * if that is more.  A client that read on and on before, such as one that
 * went back to the start, is likely to again.  The window grows to twice
 * the length of the run so far, up to readahead-size=.  So it grows every
 * round trip while the client keeps reading.  A client that jumps away has
 * left at most about twice as much unread as it had read.  Over a long
 * round trip the window reaches the bandwidth-delay product after a few
 * round trips, and the link stays full: 12.5 MB for 1 Gbit/s at 100 ms.
 * readahead-size= also bounds what all streams hold together (held_locked);
 * only a read's own bytes may go past it.
 *
 * Serving.  Reads are served from the segments that hold their bytes,
 * waiting for bytes on their way rather than asking again.  Whatever part
 * of a read no segment can give goes to the link below the read-ahead link:
 * after a failed segment, say, or past the object's end.  Only a stream's
 * own reads move it on.  Those are its NBD connection's reads, from KEEP
 * behind its last one to four reads past it.  A client with a few reads in
 * flight sends them in any order.  Another connection's read, a random one
 * or NBD_CMD_CACHE may fall into what a stream asked for.  It is served,
 * and changes nothing else.
 *
 * Whole answers.  A segment serves reads only once its whole answer has
 * come and been judged, as a read's own answer would be.  A body cut short
 * is an error, never data, even for the bytes that came.  A file truncated
 * or rewritten while the server sent it ends so.  That is why segments are
 * at most MAX_SEG, and up to RUNNING_PER_STREAM of a stream are on their
 * way at once.  A read waits for its segment at most patience_ns.  A server
 * that sends large ranges slowly would otherwise make it wait longer than
 * its own GET would.  Then the read asks for its own bytes, and the stream
 * stops.  After a segment failed or was too slow, no new stream starts for
 * BACKOFF_NS, doubled each time.
 *
 * A stream that no read has used for IDLE_NS is stopped.  So is one unused
 * for two round trips when its connection's reads start another stream: the
 * client went elsewhere.  Its segments' connections are closed, since the
 * rest of their answers will not be read, unless little is left
 * (segment.c).  Segments after a stream's first end on multiples of BLOCK,
 * so that no block is shared by two.
 *
 * Every segment's answer is judged as every read's is (rules/verdict.c).
 * The status, Content-Range and the validators the reads are pinned to are
 * checked before any of its bytes is kept.  Once any answer shows that the
 * object changed (object_changed), every stream and its bytes are dropped.
 * A write drops every stream whose range it touches, before and after its
 * PUT (curl.c).
 */

#include <config.h>

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-plugin.h>

#include "read/segment.h"

#define RUNNING_PER_STREAM 8    /* GETs in flight for one stream */
#define MIN_SEG (128 * 1024)
/* A read waits for the whole of its segment's answer (see Whole answers):
 * 4 MiB take 34 ms at 1 Gbit/s.
 */
#define MAX_SEG (4 * 1024 * 1024)
#define STALE_MIN_NS (20 * INT64_C (1000000))
/* See stream_serve_locked. */
#define HEAD_START_READ (1024 * 1024)
/* See patience_ns. */
#define PATIENCE_MIN_NS (1000 * INT64_C (1000000))
/* After a segment failed or was too slow for a read, no stream starts
 * for this long (doubled each time, up to MAX_BACKOFF_NS).
 */
#define BACKOFF_NS (1000 * INT64_C (1000000))
#define MAX_BACKOFF_NS (30 * INT64_C (1000000000))

/* Whether segment g is one of the head start's. */
#define IN_HEAD_START(g) \
  ((g)->end <= ((const struct stream *) (g)->owner)->head_end)

struct stream stream_table[MAX_STREAMS];

static struct {
  uint64_t last_run;            /* the last stream served so far */
  int64_t last_run_ns;          /* ... when it last served */
  int64_t fail_until;           /* no new stream before this */
  int64_t backoff_ns;
  uint64_t started, served;     /* totals, for debug */
} streams;

static void
abandon_stream_locked (struct stream *st)
{
  unsigned i;

  st->o.abandon = true;
  for (i = 0; i < MAX_SEGS; i++)
    if (seg_table[i].used && seg_table[i].owner == &st->o)
      segment_abandon_locked (&seg_table[i]);
}

/* A segment of st failed, or was too slow for a read: st stops, and no
 * new stream starts for a while (BACKOFF_NS, doubled each time); the
 * reads are ordinary ones meanwhile, with their retries.
 */
static void
back_off_locked (struct stream *st)
{
  streams.backoff_ns = streams.backoff_ns == 0 ? BACKOFF_NS
    : min64 (2 * streams.backoff_ns, MAX_BACKOFF_NS);
  streams.fail_until = clock_ns () + streams.backoff_ns;
  if (curl_debug_readahead)
    nbdkit_debug ("read-ahead: stream from %" PRIu64 " failed: none "
                  "starts for %" PRIi64 " ms", st->o.start,
                  streams.backoff_ns / 1000000);
  abandon_stream_locked (st);
}

/* What the streams may hold, over all of them: the bytes asked for
 * and not read yet, and behind the reads KEEP and the blocks the last
 * reads went only part way into.
 */
static uint64_t
held_locked (void)
{
  uint64_t sum = 0;
  unsigned i;

  for (i = 0; i < MAX_STREAMS; i++) {
    const struct stream *st = &stream_table[i];

    if (!st->used || st->o.abandon)
      continue;
    sum += KEEP + 2 * BLOCK;
    if (st->next > st->consumed)
      sum += st->next - st->consumed;
  }
  return sum;
}

/* Ask for more ahead of st: up to its window (or its cache hint) past
 * what it served, within readahead-size= over all streams, and at least
 * up to need (the end of a read waiting for it).
 */
static void
feed_locked (struct stream *st, uint64_t need)
{
  uint64_t target = st->consumed + st->window, held, room, size, end;

  if (st->o.abandon || st->retiring)
    return;
  if (st->hint > target)
    target = min64 (st->hint, st->consumed + cfg.readahead_size);
  held = held_locked ();
  room = held < cfg.readahead_size ? cfg.readahead_size - held : 0;
  target = min64 (target, st->next + room);
  target = min64 (max64 (target, need), (uint64_t) object.size);
  /* Nor past the first block the cache holds (cache-dir=). */
  target = max64 (need, store_cached_from (st->next, target));
  /* Segments of at least a quarter of the window, asked for when less
   * than three quarters of it is left, unless a read waits.
   */
  while (st->next < target && st->o.nrunning < RUNNING_PER_STREAM) {
    size = target - st->next;
    if (st->next >= need && size < min64 (st->window / 4, MAX_SEG) &&
        target < (uint64_t) object.size)
      break;
    /* Near the reads small segments, whose answers are whole soon;
     * further ahead up to MAX_SEG.
     */
    size = min64 (size, max64 (st->next - min64 (st->next, st->consumed),
                               MIN_SEG));
    size = min64 (size, MAX_SEG);
    /* Segments after the first end on a multiple of BLOCK, so that no
     * block is shared by two of them.
     */
    end = st->next + size;
    if (end < (uint64_t) object.size && end - end % BLOCK > st->next)
      size = end - end % BLOCK - st->next;
    if (!segment_start_locked (&st->o, st->next, st->next + size))
      break;
    if (curl_debug_readahead)
      nbdkit_debug ("read-ahead: stream from %" PRIu64 " asks for %" PRIu64
                    "-%" PRIu64, st->o.start, st->next, st->next + size - 1);
    st->next += size;
  }
}

static void
free_stream_locked (struct stream *st)
{
  if (curl_debug_readahead)
    nbdkit_debug ("read-ahead: stream from %" PRIu64 " ends: fetched %"
                  PRIu64 ", served %" PRIu64 " bytes; %u KiB held in all",
                  st->o.start, st->o.fetched, st->served,
                  seg_blocks * (BLOCK / 1024));
  st->used = false;
}

/* Streams that no read used for long enough are stopped (IDLE_NS, or
 * two round trips when their client started another stream, started:
 * it went elsewhere), finished segments freed, and streams without
 * segments left freed.
 */
void
stream_tidy_locked (int64_t now, const struct stream *started)
{
  int64_t stale = 2 * timing_round_trip ();
  unsigned i;

  if (stale < STALE_MIN_NS)
    stale = STALE_MIN_NS;
  for (i = 0; i < MAX_STREAMS; i++) {
    struct stream *st = &stream_table[i];

    if (st->used && st != started && !st->o.abandon &&
        (now - st->o.used_ns > (started != NULL &&
                                st->client == started->client
                                ? stale : IDLE_NS) ||
         (st->retiring && st->o.nrunning == 0 && st->consumed >= st->next &&
          st->head_end == 0)))
      abandon_stream_locked (st);
  }
  for (i = 0; i < MAX_SEGS; i++) {
    struct seg *g = &seg_table[i];

    if (g->used && !g->running &&
        (g->owner->abandon || g->base >= g->end ||
         (g->end + KEEP <= ((struct stream *) g->owner)->consumed &&
          !IN_HEAD_START (g))))
      segment_reap_locked (g);
  }
  for (i = 0; i < MAX_STREAMS; i++) {
    struct stream *st = &stream_table[i];

    if (st->used && st->o.abandon && st->o.nsegs == 0)
      free_stream_locked (st);
  }
}

/* One of st's GETs ended (segment.c). */
static void
ended (struct seg_owner *o, bool ok, bool failed)
{
  struct stream *st = (struct stream *) o;

  if (failed)
    back_off_locked (st);
  else if (ok)
    streams.backoff_ns = 0;
  /* Its connection is free: what the stream still wants (a cache
   * request's range, say) may go out on it.
   */
  feed_locked (st, 0);
}

struct stream *
stream_start_locked (uint64_t client, uint64_t offset, uint32_t count,
                     int64_t now)
{
  struct stream *st = NULL;
  unsigned i;

  if (now < streams.fail_until)
    return NULL;
  for (i = 0; i < MAX_STREAMS && st == NULL; i++)
    if (!stream_table[i].used)
      st = &stream_table[i];
  if (st == NULL)
    return NULL;
  *st = (struct stream) {
    .o = { .start = offset, .used_ns = now, .ended = ended },
    .used = true, .client = client, .consumed = offset, .next = offset,
    .window = max64 (max64 (4 * (uint64_t) count, MIN_SEG),
                     now - streams.last_run_ns > IDLE_NS ? 0
                     : min64 (streams.last_run / 2, cfg.readahead_size)),
  };
  streams.started++;
  if (curl_debug_readahead)
    nbdkit_debug ("read-ahead: stream from %" PRIu64 " starts, window %"
                  PRIu64 " KiB; %u KiB held in all, at most %" PRIu64
                  " KiB asked for ahead", offset, st->window / 1024,
                  seg_blocks * (BLOCK / 1024), cfg.readahead_size / 1024);
  return st;
}

static struct seg *
seg_at_locked (const struct stream *st, uint64_t pos)
{
  unsigned i;

  for (i = 0; i < MAX_SEGS; i++) {
    struct seg *g = &seg_table[i];

    if (g->used && g->owner == &st->o && !g->abandon && g->start <= pos &&
        pos < g->end)
      return g;
  }
  return NULL;
}

/* Free what st's reads went past, in segments no read waits on (each
 * of qemu-img's 2 MiB reads in a 4 MiB segment is woken by its end: the
 * first served would free the others' bytes); the head start's once
 * reads took all of theirs.
 */
static void
release_locked (struct stream *st)
{
  unsigned i;

  for (i = 0; i < MAX_SEGS; i++) {
    struct seg *g = &seg_table[i];

    if (!g->used || g->owner != &st->o || g->readers > 0)
      continue;
    if (IN_HEAD_START (g)) {
      if (g->served >= g->end - g->start)
        segment_release_below_locked (g, g->end);
    }
    else if (st->consumed > KEEP)
      segment_release_below_locked (g, st->consumed - KEEP);
  }
}

/* How long a read waits for its segment's whole answer before it asks
 * for its own bytes instead: what a slow answer may cost it over an
 * ordinary read (a server that sends large ranges slowly).
 */
static int64_t
patience_ns (void)
{
  int64_t p = 4 * timing_round_trip ();

  if (p < PATIENCE_MIN_NS)
    p = PATIENCE_MIN_NS;
  if (p > (int64_t) cfg.timeout * 1000000000)
    p = (int64_t) cfg.timeout * 1000000000;
  return p;
}

/* Serve what st can of the read, in order, waiting for bytes on their
 * way: the bytes served from its start.  Only its own reads move the
 * stream on.
 */
uint32_t
stream_serve_locked (struct stream *st, char *buf, uint32_t count,
                     uint64_t offset, bool own)
{
  uint64_t pos = offset, end = offset + count, want;
  int64_t until = clock_ns () + patience_ns ();

  if (st->o.abandon)
    return 0;
  if (own) {
    /* Reads skipped forward past what was asked for: ask from here. */
    if (offset > st->next)
      st->next = offset;
    st->o.used_ns = clock_ns ();
    feed_locked (st, end);
  }
  while (pos < end) {
    struct seg *g = seg_at_locked (st, pos);
    unsigned gen;

    if (g == NULL)
      break;
    gen = g->gen;
    want = min64 (end, g->end);
    if (!segment_wait_locked (g, until)) {
      if (g->gen == gen && !g->abandon)
        back_off_locked (st);
      break;
    }
    if (g->gen != gen || g->failed || g->got < g->end || pos < g->base ||
        st->o.abandon ||
        !segment_copy_locked (g, buf + (pos - offset), pos, want))
      break;
    pos = want;
  }
  if (pos == offset)
    return 0;
  streams.served += pos - offset;
  if (!own)
    return pos - offset;
  st->served += pos - offset;
  st->consumed = max64 (st->consumed, pos);
  streams.last_run = st->consumed - st->o.start;
  streams.last_run_ns = clock_ns ();
  st->window = min64 (max64 (st->window, 2 * (st->consumed - st->o.start)),
                      cfg.readahead_size);
  /* A client that read HEAD_START_READ of the head start is likely to
   * read on past it: its window is at once what reading all of it
   * would make it, so that the next bytes are asked for while the head
   * start's are still coming.  Asked for only once the reads reached
   * the head start's middle, they left the link idle for a round trip
   * (CDI's qemu-img on a qcow2 at 100 ms).
   */
  if (st->head_end > 0 && st->served >= HEAD_START_READ)
    st->window = min64 (max64 (st->window, 2 * st->head_end),
                        cfg.readahead_size);
  st->o.used_ns = clock_ns ();
  release_locked (st);
  feed_locked (st, 0);
  return pos - offset;
}

/* Whether a stream served a read lately (see Detection in readahead.c). */
bool
stream_served_lately (int64_t now)
{
  return now - streams.last_run_ns <= IDLE_NS;
}

/* st asks ahead up to offset + count too (st->next >= offset). */
void
stream_hint_locked (struct stream *st, uint64_t offset, uint32_t count,
                    int64_t now)
{
  st->hint = max64 (st->hint, offset + count);
  st->o.used_ns = now;
  feed_locked (st, 0);
}

/* st, just started at 0, is the head start (readahead.c): it asks for
 * the object's first size bytes at once (returned: how many it did).
 * The client's first reads come together, in any order: its
 * segments keep each byte until a read took it or the stream stops, and
 * serve reads that come more than KEEP behind others.
 */
uint64_t
stream_head_start_locked (struct stream *st, uint64_t size, int64_t now)
{
  st->head_end = size;
  stream_hint_locked (st, 0, size, now);
  return st->next;              /* what its GETs asked for */
}

/* The object changed: nothing read ahead of it is served again. */
void
stream_drop_all_locked (void)
{
  unsigned i;

  for (i = 0; i < MAX_STREAMS; i++)
    if (stream_table[i].used)
      abandon_stream_locked (&stream_table[i]);
}

/* A write of [offset, offset+count): every stream that asked for any of
 * it is dropped with its bytes.
 */
void
stream_drop_range_locked (uint64_t offset, uint32_t count)
{
  unsigned i;

  for (i = 0; i < MAX_SEGS; i++) {
    struct seg *g = &seg_table[i];

    if (g->used && offset < g->end && offset + count > g->start)
      abandon_stream_locked ((struct stream *) g->owner);
  }
}

/* nbdkit is going: every segment stops, and its thread is joined. */
void
stream_stop_all_locked (void)
{
  unsigned i;

  for (i = 0; i < MAX_STREAMS; i++)
    if (stream_table[i].used)
      stream_table[i].o.abandon = true;
  segment_stop_all_locked ();
  if (curl_debug_readahead && streams.started > 0)
    nbdkit_debug ("read-ahead: %" PRIu64 " streams in %" PRIu64
                  " GETs fetched %" PRIu64 " bytes and served %" PRIu64
                  "; at most %u KiB held", streams.started, seg_started,
                  seg_fetched, streams.served,
                  seg_peak_blocks * (BLOCK / 1024));
}
