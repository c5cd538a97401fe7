/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The split link.  While more than one source is up (mirror=), a large read
 * is asked as pieces at once.  Each piece goes to the source expected to
 * answer it first (object/sources.c), so that one read draws on several
 * links.
 *
 * Why.  Some clients keep a few large reads in flight and wait for the
 * oldest: qemu-img convert keeps 8 reads of 2 MiB.  Once the round trip is
 * long, that window bounds them, not the links.  This was measured over two
 * links of 500 Mbit/s at 100 ms, each read asked whole of one source.  Two
 * mirrors gave qemu-img 1.71x of one alone.  A mirror at a quarter of the
 * other's rate gave 0.87x of the two rates' sum.  The window covered the
 * round trip of one link but not of both.  In pieces, each read spends a
 * quarter of the time on the wire.  And a slow source gets a piece only
 * when it is expected to send it before the others would.
 *
 * Threads.  A read below this link runs in its caller's thread.  So each
 * piece but the first runs in a thread of its own, and the first in the
 * caller's.  All end before the read is answered, and it fails when any
 * piece failed.  Only the caller's thread can tell whether its client went
 * or nbdkit stops (object_stopping).  It looks while it waits for the
 * others, and tells them, so that they stop as its own piece would.
 *
 * When.  The pieces go down marked alone, so that the queue (pool.c) never
 * gathers them into one request with other reads.  That would put them back
 * on one source.  A read is split only when it holds two pieces of
 * curl_debug_piece (512 KiB).  The reads in flight must also ask for less
 * than WINDOWS times the bytes that the sources up could have on their way
 * at once.  That is each source's speed times its wait for a first byte,
 * summed (sources_window).  And fewer than MAX_THREADS pieces may run in
 * threads.  So near servers, and clients whose reads in flight cover the
 * links many times over, are asked whole reads.  They pay no thread per
 * piece.  Under load a source's wait for a first byte grows with the
 * streams queued before.  So nbdcopy's 32 reads of 1 MiB in flight at 100
 * ms were mostly split too, at no cost measured.  At 256 KiB a piece, a
 * quarter-rate mirror got pieces it was slow to send.  qemu-img then took
 * 9.1 s, where 512 KiB took 7.6 s.
 */

#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include <nbdkit-plugin.h>

#include "read/read.h"

/* -D curl.piece=KiB: the smallest piece (0: reads are never split). */
NBDKIT_DLL_PUBLIC int curl_debug_piece = 512;

#define MAX_PIECES 8
#define WINDOWS 3
/* At most this many pieces' threads at once, over all reads: beyond,
 * reads are asked whole.
 */
#define MAX_THREADS 64
#define ALIGN 4096
/* How often the caller looks whether its client went. */
#define CHECK_NS (200 * 1000000)

struct split;

struct piece {
  struct split *sp;
  pthread_t thread;
  char *buf;
  uint32_t count;
  uint64_t offset;
  bool started;                 /* in a thread of its own */
  int ret;
};

/* One split read: its pieces, and how many still run in their threads. */
struct split {
  const struct read_link *self;
  const struct read_op *op;     /* the whole read */
  pthread_mutex_t lock;
  pthread_cond_t cond;          /* a piece ended */
  unsigned running;
  bool stop;                    /* the client went, or nbdkit stops */
  struct piece pieces[MAX_PIECES];
};

static int ask_piece (const struct piece *p);

static void *
run_piece (void *arg)
{
  struct piece *p = arg;
  struct split *sp = p->sp;

  object_piece_thread (&sp->stop);
  p->ret = ask_piece (p);
  pthread_mutex_lock (&sp->lock);
  sp->running--;
  pthread_cond_signal (&sp->cond);
  pthread_mutex_unlock (&sp->lock);
  return NULL;
}

/* Piece p, asked alone of the link below. */
static int
ask_piece (const struct piece *p)
{
  struct read_op piece = read_rest (p->sp->op, p->offset - p->sp->op->offset);

  piece.count = p->count;
  piece.alone = true;
  return read_next (p->sp->self, &piece);
}

/* Bytes asked for by the reads in split_link now, and the threads of
 * their pieces.
 */
static uint64_t inflight;
static unsigned threads;

/* How many pieces a read of count bytes is asked in (1: whole): while
 * the reads in flight, this one's bytes among them, ask for fewer than
 * WINDOWS times what the sources could have on their way at once.
 */
static unsigned
pieces_for (uint32_t count, uint64_t asked)
{
  uint64_t min = (uint64_t) curl_debug_piece * 1024, window;
  uint64_t n;
  unsigned room;

  if (!sources_many () || min == 0 || count < 2 * min)
    return 1;
  window = sources_window ();
  if (window == 0 || asked >= WINDOWS * window)
    return 1;
  n = count / min;
  if (n > MAX_PIECES)
    n = MAX_PIECES;
  /* Over HTTP/1.1 each piece takes a connection, and a source has
   * connections= of them: pieces beyond those free wait, and a full
   * connection gains nothing from a smaller request but one more round
   * trip's gap per byte.
   */
  room = sources_room ();
  if (n > room)
    n = room;
  if (n < 2)
    return 1;
  if (__atomic_load_n (&threads, __ATOMIC_RELAXED) + n - 1 > MAX_THREADS)
    return 1;
  return n;
}

/* The pieces of buf, each but the first started in its thread (one
 * that could not start runs in the caller's, after the first): how
 * many.
 */
static unsigned
start_pieces (struct split *sp, unsigned n, char *buf, uint32_t count,
              uint64_t offset)
{
  uint32_t size = (count / n + ALIGN - 1) / ALIGN * ALIGN, at = 0;
  unsigned i;
  int err;

  for (i = 0; i < n && at < count; i++) {
    struct piece *p = &sp->pieces[i];

    *p = (struct piece) {
      .sp = sp, .buf = buf + at, .offset = offset + at,
      .count = count - at < size || i == n - 1 ? count - at : size,
    };
    at += p->count;
    if (i == 0)
      continue;
    pthread_mutex_lock (&sp->lock);
    err = pthread_create (&p->thread, NULL, run_piece, p);
    p->started = err == 0;
    sp->running += p->started;
    if (p->started)
      __atomic_add_fetch (&threads, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock (&sp->lock);
    if (err != 0)
      nbdkit_debug ("pread: pthread_create: %s: a piece asked in turn",
                    strerror (err));
  }
  return i;
}

/* Until the pieces in threads end, the caller looks whether its client
 * went, and tells them.
 */
static void
wait_pieces (struct split *sp)
{
  struct timespec at;

  pthread_mutex_lock (&sp->lock);
  while (sp->running > 0) {
    at = clock_at (clock_ns () + CHECK_NS);
    if (pthread_cond_timedwait (&sp->cond, &sp->lock, &at) != ETIMEDOUT ||
        sp->stop)
      continue;
    pthread_mutex_unlock (&sp->lock);
    if (object_stopping ())
      __atomic_store_n (&sp->stop, true, __ATOMIC_RELAXED);
    pthread_mutex_lock (&sp->lock);
  }
  pthread_mutex_unlock (&sp->lock);
}

int
split_link (const struct read_link *self, const struct read_op *op)
{
  struct split sp = {
    .self = self, .op = op, .lock = PTHREAD_MUTEX_INITIALIZER,
  };
  char *buf = op->buf;
  uint32_t count = op->count;
  uint64_t offset = op->offset;
  pthread_condattr_t attr;
  uint64_t asked = __atomic_add_fetch (&inflight, count, __ATOMIC_RELAXED);
  unsigned n = pieces_for (count, asked), i;
  int ret = 0;

  if (n < 2) {
    ret = read_next (self, op);
    __atomic_sub_fetch (&inflight, count, __ATOMIC_RELAXED);
    return ret;
  }
  pthread_condattr_init (&attr);
  pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
  pthread_cond_init (&sp.cond, &attr);
  pthread_condattr_destroy (&attr);
  n = start_pieces (&sp, n, buf, count, offset);
  for (i = 0; i < n; i++)
    if (!sp.pieces[i].started)
      sp.pieces[i].ret = ask_piece (&sp.pieces[i]);
  wait_pieces (&sp);
  for (i = 0; i < n; i++) {
    if (sp.pieces[i].started) {
      pthread_join (sp.pieces[i].thread, NULL);
      __atomic_sub_fetch (&threads, 1, __ATOMIC_RELAXED);
    }
    if (sp.pieces[i].ret == -1)
      ret = -1;
  }
  pthread_cond_destroy (&sp.cond);
  __atomic_sub_fetch (&inflight, count, __ATOMIC_RELAXED);
  if (ret == -1)
    errno = EIO;
  return ret;
}
