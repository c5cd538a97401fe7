/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Read-ahead, for clients that keep few reads in flight: a VM booting from
 * the export, dd, cp, nbdcopy --requests=1.  Each of their reads would cost
 * a round trip.  At 100 ms, 64 KiB reads one at a time get half a percent
 * of a 1 Gbit/s link.  So a sequential stream of such reads is served from
 * GETs that run ahead of it.  This file is the chain's read-ahead link: it
 * decides when a stream starts, and which stream a read or cache request is
 * for.  What a stream asks for and serves is stream.c's, and its GETs are
 * segment.c's.  The bytes no stream has go to the link below.
 *
 * Detection is per NBD connection (struct ra_client).  Five clients that
 * each kept one read in flight were once counted as one with five.  All
 * were left without read-ahead: 12.6 MiB/s together behind a 20 ms link,
 * where one alone got 50.8.  A read continues a run when it starts exactly
 * where an earlier read of its connection ended.  Random reads land there
 * about once in as many reads as the disk has blocks, times MAX_RUNS.  A
 * stream starts when a read continues a run of which FAR_ANSWERED reads
 * have been answered.  One is enough when a stream served reads within
 * IDLE_NS: a client that read on and on, such as one that went back to the
 * start, is likely to again.  Its connection must also have had at most
 * MAX_QD reads in the plugin for a second: a client that waits for its
 * answers.  So a run of two reads costs nothing, such as a file system
 * reading an inode, then a block.  When a stream started at a run's second
 * read, each pair of 4 KiB reads at 30 ms cost a first segment of 128 KiB,
 * 16 times the bytes read.
 *
 * Clients that keep many reads in flight fill the link themselves: nbdcopy,
 * qemu-img convert.  They are left to the queue's batches (pool.c), also at
 * the end of a copy, when few of their reads are left.  Their first reads
 * come one by one and may start a stream.  Once more than MAX_QD reads of a
 * connection are in the plugin, its streams retire.  They ask for nothing
 * more, serve what they asked for, and end.  A server less than SLOW_NS
 * away is on loopback or a LAN, where a round trip costs less than moving a
 * read's bytes.  There such a client's reads are answered before the next
 * comes for longer.  The streams they started made copies 4-11% slower
 * until they retired.  Their GETs took the pool's connections and fetched
 * some bytes twice.  So near a server a stream starts only once
 * NEAR_ANSWERED reads of the run were answered, none of them beside another
 * read of the run.  Random reads never continue a run, so they never start
 * a stream and cost no extra request.
 *
 * NBD_CMD_CACHE (nbdkit's readahead and scan filters send it) starts a
 * stream at its offset.  Or, when its connection has a stream that asked
 * for bytes up to there, that stream asks ahead up to its end, within
 * readahead-size=.  It never moves a stream on (cache_locked).
 */

#include <config.h>

#include <inttypes.h>
#include <stdlib.h>

#include <nbdkit-plugin.h>

#include "read/segment.h"

#define MAX_RUNS 8
#define MAX_QD 4                /* see Detection */
#define FAR_ANSWERED 2          /* see Detection */
#define NEAR_ANSWERED 16
/* See find_stream_locked. */
#define LATE_READS 64

/* A run of reads of one connection that continue each other. */
struct run {
  uint64_t client;              /* its connection's ra_client id */
  uint64_t next;                /* where the next read would start */
  unsigned answered;            /* its reads answered so far */
  unsigned inflight, most;      /* its reads in the plugin: now, at most */
  uint64_t id;                  /* which run this slot holds */
  int64_t at;                   /* its last read, 0 for none */
};

/* With seg_lock held. */
static struct {
  struct run runs[MAX_RUNS];
  uint64_t clients;             /* ra_client ids given so far */
  unsigned changed_seen;        /* object_changed's count, acted on */
  uint64_t runs_made;
} ra;

/* Whether read-ahead is on: chain.c asks once the probe is done. */
bool
readahead_on (void)
{
  return cfg.readahead_size > 0 && !cfg.is_file && object.size > 0;
}

/* cl's id: the streams and runs of its connection carry it. */
static uint64_t
client_locked (struct ra_client *cl)
{
  if (cl->id == 0)
    cl->id = ++ra.clients;
  return cl->id;
}

/* The run of client that [offset, offset+count) continues, or a new one
 * in the oldest's place.
 */
static struct run *
run_locked (uint64_t client, uint64_t offset, uint32_t count, int64_t now,
            bool *continues)
{
  struct run *r, *oldest = &ra.runs[0];
  unsigned i;

  for (i = 0; i < MAX_RUNS; i++) {
    r = &ra.runs[i];
    if (r->at != 0 && offset == r->next && r->client == client) {
      *continues = true;
      r->next = offset + count;
      r->at = now;
      return r;
    }
    if (r->at < oldest->at)
      oldest = r;
  }
  *continues = false;
  *oldest = (struct run) { .client = client, .next = offset + count,
                           .at = now, .id = ++ra.runs_made };
  return oldest;
}

/* Whether run r has shown a client that waits for its answers (see
 * Detection).
 */
static bool
enough_answered_locked (const struct run *r, int64_t now)
{
  if (timing_round_trip () < SLOW_NS)
    return r->most == 1 && r->answered >= NEAR_ANSWERED;
  if (stream_served_lately (now))
    return r->answered >= 1;
  return r->answered >= FAR_ANSWERED;
}

/* A changed object: nothing read ahead of it is served again. */
static void
check_changed_locked (void)
{
  unsigned n = object_changed ();

  if (n == ra.changed_seen)
    return;
  ra.changed_seen = n;
  stream_drop_all_locked ();
}

/* The stream of client's connection that [offset, offset+count)
 * continues (*own: at most KEEP behind its last read or four reads past
 * it; a stream of anyone's becomes client's), else one that asked for
 * its bytes anyway (another connection's read, a random one: served,
 * but it moves the stream on in nothing).
 */
static struct stream *
find_stream_locked (uint64_t client, uint64_t offset, uint32_t count,
                    bool *own, bool *behind)
{
  struct stream *other = NULL;
  unsigned i;

  for (i = 0; i < MAX_STREAMS; i++) {
    struct stream *st = &stream_table[i];
    bool mine = st->client == client || st->client == 0;

    if (!st->used || st->o.abandon || offset < st->o.start)
      continue;
    /* A read that its stream went past lately (one of a few in flight
     * that came late: on a busy machine seen 30 reads behind) is not a
     * new stream's start.  One further back (a client that reads a file
     * again) may start one.
     */
    if (offset + KEEP < st->consumed && offset >= st->head_end) {
      if (mine && offset + KEEP + LATE_READS * (uint64_t) count >=
          st->consumed)
        *behind = true;
      continue;
    }
    if (mine && offset <= st->consumed + 4 * (uint64_t) count) {
      *own = true;
      st->client = client;
      return st;
    }
    if (other == NULL && offset + count <= st->next)
      other = st;
  }
  return other;
}

/* NBD_CMD_CACHE of client's connection for [offset, offset+count):
 * nothing when a stream asked for it all already; else client's stream
 * that asked for bytes up to offset asks ahead up to its end; else a
 * new stream from offset does.  It never moves a stream on: taken for
 * a stream's own read when its offset was within four of its counts,
 * a far cache request moved the stream far ahead, the reads before it
 * found nothing asked for, and the gap counted as held (a reader with
 * such a hint every 2 MiB took 31 times as long).
 */
static void
cache_locked (uint64_t client, uint64_t offset, uint32_t count,
              int64_t now)
{
  struct stream *st, *mine = NULL;
  unsigned i;

  for (i = 0; i < MAX_STREAMS; i++) {
    st = &stream_table[i];
    if (!st->used || st->o.abandon || offset < st->o.start ||
        offset > st->next)
      continue;
    if (offset + count <= st->next)
      return;
    if (st->client == client || st->client == 0)
      mine = st;
  }
  if (mine == NULL)
    mine = stream_start_locked (client, offset, 0, now);
  if (mine != NULL)
    stream_hint_locked (mine, offset, count, now);
}

/* A client with many reads in flight fills the link itself, and needs
 * the pool's connections for them: its streams (and anyone's) ask for
 * nothing more, but what they asked for comes in whole (closing a
 * connection in the middle of an answer would cost a new one) and is
 * served.
 */
static void
retire_locked (uint64_t client, unsigned inflight)
{
  unsigned i;

  for (i = 0; i < MAX_STREAMS; i++) {
    struct stream *st = &stream_table[i];

    if (st->used && !st->o.abandon && !st->retiring &&
        (st->client == client || st->client == 0)) {
      st->retiring = true;
      if (curl_debug_readahead)
        nbdkit_debug ("read-ahead: stream from %" PRIu64 " asks for "
                      "nothing more: %u reads in flight", st->o.start,
                      inflight);
    }
  }
}

/* client's connection closed: its streams are anyone's. */
static void
orphan_locked (uint64_t client)
{
  unsigned i;

  for (i = 0; i < MAX_STREAMS; i++)
    if (stream_table[i].client == client)
      stream_table[i].client = 0;
}

/* A read of op->client's connection: what a stream has, the rest
 * from the link below.
 */
int
readahead_link (const struct read_link *self, const struct read_op *op)
{
  struct ra_client *cl = op->client;
  struct read_op rest;
  char *buf = op->buf;
  uint32_t count = op->count;
  uint64_t offset = op->offset;
  struct stream *st, *started = NULL;
  struct run *r;
  uint64_t run_id, client;
  bool continues, own = false, behind = false;
  uint32_t done = 0;
  int64_t now;
  int ret = 0;
  /* A read within the probe's first bytes is served from them with no
   * round trip, never from a stream: over HTTP/1.1 the head start's
   * first GET leaves only once nbdkit runs, and a client's first read
   * waited for its answer.  It counts for detection like any other.
   */
  bool first = object_read_first (buf, count, offset);

  pthread_mutex_lock (&seg_lock);
  now = clock_ns ();
  client = client_locked (cl);
  if (++cl->inside > MAX_QD) {
    cl->busy_ns = now;
    retire_locked (client, cl->inside);
  }
  check_changed_locked ();
  r = run_locked (client, offset, count, now, &continues);
  run_id = r->id;
  if (++r->inflight > r->most)
    r->most = r->inflight;
  st = find_stream_locked (client, offset, count, &own, &behind);
  if (st == NULL && cfg.readahead && continues && !behind &&
      now - cl->busy_ns > IDLE_NS && enough_answered_locked (r, now)) {
    st = stream_start_locked (client, offset, count, now);
    own = true;
    started = st;
  }
  stream_tidy_locked (now, started);
  if (first)
    done = count;
  else if (st != NULL)
    done = stream_serve_locked (st, buf, count, offset, own);
  pthread_mutex_unlock (&seg_lock);

  if (done < count) {
    rest = read_rest (op, done);
    ret = read_next (self, &rest);
  }

  pthread_mutex_lock (&seg_lock);
  cl->inside--;
  if (r->id == run_id) {        /* else its slot holds another run now */
    r->inflight--;
    if (ret == 0)
      r->answered++;
  }
  pthread_mutex_unlock (&seg_lock);
  return ret;
}

/* NBD_CMD_CACHE of cl's connection: read [offset, offset+count) ahead.
 * Advisory: it never fails.  A stream it starts is not one that the
 * client started by going elsewhere (stream_tidy_locked): its other
 * streams stay.
 */
int
readahead_cache (struct ra_client *cl, uint32_t count, uint64_t offset)
{
  int64_t now;

  if (!readahead_on ())
    return 0;
  LOCK_FOR_SCOPE (&seg_lock);
  now = clock_ns ();
  check_changed_locked ();
  cache_locked (client_locked (cl), offset, count, now);
  stream_tidy_locked (now, NULL);
  return 0;
}

/* cl's connection closed: its streams are anyone's (a client that
 * reconnects reads on in them) until they are idle for IDLE_NS.
 */
void
readahead_close (struct ra_client *cl)
{
  LOCK_FOR_SCOPE (&seg_lock);
  if (cl->id != 0)
    orphan_locked (cl->id);
}

/* A write of [offset, offset+count): every stream that asked for any of
 * it is dropped with its bytes.
 */
void
readahead_invalidate (uint32_t count, uint64_t offset)
{
  LOCK_FOR_SCOPE (&seg_lock);
  stream_drop_range_locked (offset, count);
}

void
readahead_init (void)
{
  segment_init ();
}

/* The head start (probe.c): while the probe's request is on its way to
 * a distant HTTP/2 server, a stream from the object's start asks, as
 * NBD_CMD_CACHE would, for its first HEAD_START bytes on the same
 * connection, so that the client's first reads find them coming instead
 * of costing one more round trip: the bytes asked for, 0 if none.  Its
 * segments are judged, once the probe has found the object, as every
 * read's answer is (headstart_end).
 */
uint64_t
readahead_head_start (void)
{
  struct stream *st;
  int64_t now;
  uint64_t size = HEAD_START;

  if (!cfg.readahead || cfg.readahead_size == 0 || cfg.is_file)
    return 0;
  if (size > cfg.readahead_size)
    size = cfg.readahead_size;
  LOCK_FOR_SCOPE (&seg_lock);
  now = clock_ns ();
  st = stream_start_locked (0, 0, 0, now);
  return st != NULL ? stream_head_start_locked (st, size, now) : 0;
}

/* Once nbdkit runs: the head start's segments get their threads. */
void
readahead_after_fork (void)
{
  LOCK_FOR_SCOPE (&seg_lock);
  segment_after_fork_locked ();
}

/* Before the pool goes: stop every segment and wait for its thread. */
void
readahead_unload (void)
{
  LOCK_FOR_SCOPE (&seg_lock);
  stream_stop_all_locked ();
}
