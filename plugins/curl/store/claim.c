/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Claims: a process about to fetch a whole block says so with N.claim,
 * so that others sharing the directory wait for the block instead of
 * fetching it too.  The claim is the block's own file, made under a name
 * of its own and linked as N.claim: link(2) is atomic even over NFS, so
 * one process gets it and the others EEXIST.  So a claim costs no inode
 * of its own (ext4 slows down when many are made and deleted).  Until the
 * block's header is written, the file starts with its host and pid.  A
 * claim is only a hint.  Whoever waits gives up after a while
 * (cache/cache.c) and fetches the block itself.  A claim whose process
 * is gone (same host), or older than STALE_SECS, is taken over.
 * Two fetches of one block cost bytes, never correctness: both write
 * the same block, and rename keeps one.
 */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nbdkit-plugin.h>

#include "store/store.h"

#define STALE_SECS 120
#define MAX_MINE 64

/* This process's claims, so that its own threads wait too: each with
 * the block's file, open, until block.c writes it.
 */
struct mine {
  uint64_t block;
  int fd;                       /* -1 once taken */
  char tmp[128];
};
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct mine mine[MAX_MINE];
static unsigned nmine;

static struct mine *
mine_locked (uint64_t block)
{
  unsigned i;

  for (i = 0; i < nmine; i++)
    if (mine[i].block == block)
      return &mine[i];
  return NULL;
}

/* Whether the claim file name is stale: its process gone, or too old,
 * or not a claim any process made (a symlink, a FIFO, a directory).
 */
static bool
stale (const char *name)
{
  char text[160], host[80];
  struct stat st;
  ssize_t r;
  int fd, pid;

  fd = openat (store.objfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
               O_CLOEXEC);
  if (fd == -1)
    return errno != ENOENT;     /* gone: the caller tries again */
  r = fstat (fd, &st) == 0 && S_ISREG (st.st_mode)
    ? read (fd, text, sizeof text - 1) : -1;
  close (fd);
  if (r <= 0 || time (NULL) - st.st_mtime > STALE_SECS)
    return true;
  text[r] = '\0';
  if (r >= 8 && memcmp (text, "NBDCURLB", 8) == 0)
    return false;               /* written: about to be renamed */
  if (sscanf (text, "%79s %d", host, &pid) != 2)
    return true;
  return strcmp (host, store.host) == 0 && pid > 0 &&
    kill (pid, 0) == -1 && errno == ESRCH;
}

/* The block's file made under a name of its own (m->tmp), its owner
 * written, then linked as name: 0, -1 if another has the claim, -2 if
 * no claim could be made.
 */
static int
link_claim (const char *name, struct mine *m)
{
  char text[96];
  int len, r;

  store_tmp_name (m->tmp, sizeof m->tmp, m->block);
  m->fd = openat (store.objfd, m->tmp, O_RDWR | O_CREAT | O_EXCL |
                  O_NOFOLLOW | O_CLOEXEC, 0600);
  if (m->fd == -1)
    return -2;
  len = snprintf (text, sizeof text, "%s %d\n", store.host, (int) getpid ());
  r = pwrite (m->fd, text, len, 0) == len ? 0 : -1;
  if (r == 0)
    r = linkat (store.objfd, m->tmp, store.objfd, name, 0);
  if (r == 0)
    return 0;
  r = errno == EEXIST ? -1 : -2;
  close (m->fd);
  unlinkat (store.objfd, m->tmp, 0);
  m->fd = -1;
  return r;
}

/* Claim block before fetching it whole: CLAIM_MINE to fetch it (then
 * store_put, which lets the claim go, or store_unclaim), CLAIM_OTHERS to
 * wait for it, or CLAIM_NONE when no claim could be made (fetch it
 * anyway).
 */
enum store_claim
store_claim (uint64_t block)
{
  struct mine m = { .block = block, .fd = -1 }, *p;
  char name[40];
  int tries, r = -2;

  pthread_mutex_lock (&lock);
  if (mine_locked (block) != NULL || nmine == MAX_MINE) {
    r = mine_locked (block) != NULL;
    pthread_mutex_unlock (&lock);
    return r ? CLAIM_OTHERS : CLAIM_NONE;
  }
  mine[nmine++] = m;            /* its own threads wait from now on */
  pthread_mutex_unlock (&lock);
  snprintf (name, sizeof name, "%" PRIu64 ".claim", block);
  for (tries = 0; tries < 2; tries++) {
    r = link_claim (name, &m);
    if (r != -1 || !stale (name))
      break;
    unlinkat (store.objfd, name, 0);
  }
  pthread_mutex_lock (&lock);
  p = mine_locked (block);
  if (r == 0)
    *p = m;
  else {
    nmine--;
    *p = mine[nmine];
  }
  pthread_mutex_unlock (&lock);
  return r == 0 ? CLAIM_MINE : r == -1 ? CLAIM_OTHERS : CLAIM_NONE;
}

/* The claimed block's file, for block.c to write (it then owns fd and
 * the name): false if block is not claimed here.
 */
bool
store_claimed_file (uint64_t block, int *fd, char *tmp, size_t size)
{
  struct mine *m;

  LOCK_FOR_SCOPE (&lock);
  m = mine_locked (block);
  if (m == NULL || m->fd == -1)
    return false;
  *fd = m->fd;
  snprintf (tmp, size, "%s", m->tmp);
  m->fd = -1;
  return true;
}

/* The fetch is over, the block written or not: the claim goes, and the
 * file if block.c did not take it.
 */
void
store_unclaim (uint64_t block)
{
  struct mine m = { .fd = -1 }, *p;
  char name[40];

  pthread_mutex_lock (&lock);
  p = mine_locked (block);
  if (p != NULL) {
    m = *p;
    nmine--;
    *p = mine[nmine];
  }
  pthread_mutex_unlock (&lock);
  if (p == NULL)
    return;
  if (m.fd >= 0) {
    close (m.fd);
    unlinkat (store.objfd, m.tmp, 0);
  }
  snprintf (name, sizeof name, "%" PRIu64 ".claim", block);
  unlinkat (store.objfd, name, 0);
}

/* Whether someone (not a stale claim) is fetching block now. */
bool
store_claimed (uint64_t block)
{
  char name[40];
  struct stat st;

  pthread_mutex_lock (&lock);
  if (mine_locked (block)) {
    pthread_mutex_unlock (&lock);
    return true;
  }
  pthread_mutex_unlock (&lock);
  snprintf (name, sizeof name, "%" PRIu64 ".claim", block);
  return fstatat (store.objfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
    S_ISREG (st.st_mode) && !stale (name);
}
