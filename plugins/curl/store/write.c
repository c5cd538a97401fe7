/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Blocks are written by a thread of their own, so that a read that
 * fetched a block returns once its bytes are copied, not once the kernel
 * has put them in a file: that takes about a millisecond a MiB here,
 * which a client with one read in flight would wait for.  The copy goes
 * into one of QUEUE buffers, kept for the next block.  When all are in
 * use, the disk is slower than the network, and the reader writes its
 * block itself.  The thread writes what is queued before it stops.
 */

#include <config.h>

#include <inttypes.h>
#include <stdio.h>

#include <nbdkit-plugin.h>

#include "store/store.h"

#define QUEUE 8

static struct {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  pthread_t thread;
  bool running, stop;
  char *buf[QUEUE];             /* allocated at start */
  bool used[QUEUE];
  uint64_t block[QUEUE];
  unsigned order[QUEUE];        /* queued buffers, oldest first */
  unsigned n;
} wr = {
  .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER,
};

static void *
writer (void *arg)
{
  unsigned i;

  pthread_mutex_lock (&wr.lock);
  for (;;) {
    if (wr.n == 0) {
      if (wr.stop)
        break;
      pthread_cond_wait (&wr.cond, &wr.lock);
      continue;
    }
    i = wr.order[0];
    pthread_mutex_unlock (&wr.lock);
    store_write_block (wr.block[i], wr.buf[i]);
    pthread_mutex_lock (&wr.lock);
    memmove (&wr.order[0], &wr.order[1], --wr.n * sizeof wr.order[0]);
    wr.used[i] = false;
    pthread_cond_broadcast (&wr.cond);  /* for store_write_flush too */
  }
  pthread_mutex_unlock (&wr.lock);
  return NULL;
}

/* Once nbdkit runs: the buffers and the thread.  Without them, readers
 * write their blocks themselves.
 */
void
store_write_start (void)
{
  unsigned i;

  if (!store_on ())
    return;
  for (i = 0; i < QUEUE; i++) {
    wr.buf[i] = malloc (STORE_BLOCK);
    if (wr.buf[i] == NULL)
      return;
  }
  wr.running = pthread_create (&wr.thread, NULL, writer, NULL) == 0;
}

/* Block's whole bytes, fetched: queued for the thread, else written
 * now.  Either way this process's claim of it goes once it is written.
 * False if it will not be written.
 */
bool
store_put (uint64_t block, const char *data)
{
  unsigned i;

  if (!store_may_write () || block >= store.nblocks) {
    store_unclaim (block);
    return false;
  }
  pthread_mutex_lock (&wr.lock);
  for (i = 0; wr.running && !wr.stop && i < QUEUE; i++)
    if (!wr.used[i])
      break;
  if (!wr.running || wr.stop || i == QUEUE) {
    pthread_mutex_unlock (&wr.lock);
    return store_write_block (block, data);
  }
  wr.used[i] = true;
  pthread_mutex_unlock (&wr.lock);
  memcpy (wr.buf[i], data, store_block_len (block));
  pthread_mutex_lock (&wr.lock);
  wr.block[i] = block;
  wr.order[wr.n++] = i;
  pthread_cond_broadcast (&wr.cond);
  pthread_mutex_unlock (&wr.lock);
  return true;
}

/* Wait until what is queued now is written. */
void
store_write_flush (void)
{
  LOCK_FOR_SCOPE (&wr.lock);
  while (wr.running && wr.n > 0)
    pthread_cond_wait (&wr.cond, &wr.lock);
}

/* What is queued is written, then the thread ends. */
void
store_write_stop (void)
{
  unsigned i;

  pthread_mutex_lock (&wr.lock);
  wr.stop = true;
  pthread_cond_broadcast (&wr.cond);
  pthread_mutex_unlock (&wr.lock);
  if (wr.running)
    pthread_join (wr.thread, NULL);
  wr.running = false;
  for (i = 0; i < QUEUE; i++) {
    free (wr.buf[i]);
    wr.buf[i] = NULL;
  }
}
