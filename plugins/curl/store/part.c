/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Blocks that reads cover in pieces: qemu-img reading a qcow2's clusters,
 * a VM's small reads.  Each piece goes at its place in a file of this
 * process's own, and a map notes which units of UNIT bytes it holds.
 * Once every unit is there, the file gets its header and is renamed into
 * place, as a whole block would be.  Memory holds only the maps, for at
 * most MAX_PARTS blocks; the oldest is dropped for a new one.  A process
 * killed leaves its files behind, for evict.c to delete.
 */

#include <config.h>

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#include <nbdkit-plugin.h>

#include "store/store.h"

#define UNIT 4096
#define UNITS (STORE_BLOCK / UNIT)
#define MAX_PARTS 32

struct part {
  bool used;
  uint64_t block;
  int fd;
  char tmp[128];
  uint64_t last;                /* when last written, in writes */
  unsigned count;               /* units held */
  unsigned char have[UNITS / 8];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct part parts[MAX_PARTS];
static uint64_t writes;

static void
drop_locked (struct part *p)
{
  close (p->fd);
  unlinkat (store.objfd, p->tmp, 0);
  p->used = false;
}

/* block's part, or a new one in a free or the oldest slot; NULL if its
 * file cannot be made.
 */
static struct part *
part_locked (uint64_t block)
{
  struct part *p, *oldest = &parts[0];

  for (p = parts; p < parts + MAX_PARTS; p++) {
    if (p->used && p->block == block)
      return p;
    if (!p->used || (oldest->used && p->last < oldest->last))
      oldest = p;
  }
  if (oldest->used)
    drop_locked (oldest);
  p = oldest;
  store_tmp_name (p->tmp, sizeof p->tmp, block);
  p->fd = openat (store.objfd, p->tmp, O_RDWR | O_CREAT | O_EXCL |
                  O_NOFOLLOW | O_CLOEXEC, 0600);
  if (p->fd == -1)
    return NULL;
  p->used = true;
  p->block = block;
  p->count = 0;
  memset (p->have, 0, sizeof p->have);
  return p;
}

/* Every unit there: read the block back, give it its header, rename. */
static void
complete_locked (struct part *p)
{
  uint32_t len = store_block_len (p->block);
  char *data = malloc (len);

  if (data != NULL &&
      pread (p->fd, data, len, STORE_HEADER) == (ssize_t) len)
    store_finish (p->fd, p->tmp, p->block, data);
  else {
    close (p->fd);
    unlinkat (store.objfd, p->tmp, 0);
  }
  free (data);
  p->used = false;
}

/* The len bytes at data, block's bytes from off: kept until the block is
 * whole.  Only units the piece covers entirely count.
 */
void
store_part (uint64_t block, uint32_t off, const char *data, uint32_t len)
{
  uint32_t blen = store_block_len (block), u, first, end;
  struct part *p;

  if (!store_may_write () || block >= store.nblocks || len == 0)
    return;
  first = (off + UNIT - 1) / UNIT;
  end = off + len == blen ? (blen + UNIT - 1) / UNIT : (off + len) / UNIT;
  if (first >= end)
    return;
  LOCK_FOR_SCOPE (&lock);
  p = part_locked (block);
  if (p == NULL)
    return;
  p->last = ++writes;
  if (pwrite (p->fd, data + (first * UNIT - off),
              min64 (end * UNIT, blen) - first * UNIT,
              STORE_HEADER + first * UNIT) !=
      (ssize_t) (min64 (end * UNIT, blen) - first * UNIT)) {
    drop_locked (p);
    return;
  }
  for (u = first; u < end; u++)
    if (!(p->have[u / 8] & (1 << (u % 8)))) {
      p->have[u / 8] |= 1 << (u % 8);
      p->count++;
    }
  if (p->count == (blen + UNIT - 1) / UNIT)
    complete_locked (p);
}

/* The block was written whole by other means: its part is not needed. */
void
store_part_drop (uint64_t block)
{
  struct part *p;

  LOCK_FOR_SCOPE (&lock);
  for (p = parts; p < parts + MAX_PARTS; p++)
    if (p->used && p->block == block)
      drop_locked (p);
}

void
store_part_unload (void)
{
  struct part *p;

  LOCK_FOR_SCOPE (&lock);
  for (p = parts; p < parts + MAX_PARTS; p++)
    if (p->used)
      drop_locked (p);
}
