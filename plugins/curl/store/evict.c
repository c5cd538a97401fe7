/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Keeping the directory in bounds.  With cache-size=, one thread looks at
 * every object's blocks: at start, and again each time this process has
 * written an eighth of the bound.  If they add up to more than the bound,
 * the least recently used go first (by mtime: a hit refreshes it) until
 * they fill nine tenths of it.  Other processes sharing the directory do
 * the same, and deleting a file another has open takes nothing from its
 * reader.  Files that a killed process left half written go too, once old.
 * Without cache-size=, nothing is written while the filesystem has less
 * than LOW_PERCENT free, so the cache never fills a disk.
 */

#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <nbdkit-plugin.h>

#include "store/store.h"

#define LOW_PERCENT 5
#define OLD_TMP_SECS 3600
#define MAX_OBJECTS 512
#define SPACE_EVERY (64 * 1024 * 1024)  /* bytes written between looks */

struct entry {
  int64_t mtime;
  uint64_t bytes;
  uint64_t block;
  unsigned obj;
};

static struct {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  pthread_t thread;
  bool running, stop, due;
  uint64_t since_scan;          /* bytes written since the last look */
  uint64_t since_space;         /* ... since free space was looked at */
  bool low;
} ev = {
  .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER,
};

/* One object's folder: its block files into *v, old temporary files
 * deleted.  Read through a descriptor of its own: a dup would share
 * the directory's offset, and the next look would start at its end.
 */
static void
scan_object (int fd, unsigned obj, struct entry **v, size_t *n, size_t *max)
{
  int dfd = openat (fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = dfd >= 0 ? fdopendir (dfd) : NULL;
  struct dirent *e;
  struct stat st;
  struct entry *nv;
  char *end;
  time_t now = time (NULL);

  if (d == NULL) {
    if (dfd >= 0)
      close (dfd);
    return;
  }
  for (e = readdir (d); e != NULL; e = readdir (d)) {
    if (fstatat (fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == -1 ||
        !S_ISREG (st.st_mode))
      continue;
    end = strrchr (e->d_name, '.');
    if (end != NULL && (strcmp (end, ".tmp") == 0 ||
                        strcmp (end, ".claim") == 0) &&
        now - st.st_mtime > OLD_TMP_SECS) {
      unlinkat (fd, e->d_name, 0);
      continue;
    }
    if (end == NULL || strcmp (end, ".blk") != 0)
      continue;
    if (*n == *max) {
      *max = *max ? 2 * *max : 1024;
      nv = realloc (*v, *max * sizeof **v);
      if (nv == NULL)
        break;
      *v = nv;
    }
    (*v)[(*n)++] = (struct entry) {
      .mtime = st.st_mtime, .bytes = st.st_blocks * 512,
      .block = strtoull (e->d_name, NULL, 10), .obj = obj,
    };
  }
  closedir (d);
}

static int
older (const void *a, const void *b)
{
  const struct entry *x = a, *y = b;

  return (x->mtime > y->mtime) - (x->mtime < y->mtime);
}

/* Every object folder in the directory opened into fds (hex names). */
static unsigned
open_objects (int *fds, bool *ours)
{
  int dfd = openat (store.dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = dfd >= 0 ? fdopendir (dfd) : NULL;
  struct dirent *e;
  unsigned n = 0;

  if (d == NULL) {
    if (dfd >= 0)
      close (dfd);
    return 0;
  }
  for (e = readdir (d); e != NULL && n < MAX_OBJECTS; e = readdir (d)) {
    if (strlen (e->d_name) != 2 * STORE_KEY_HASH ||
        strspn (e->d_name, "0123456789abcdef") != 2 * STORE_KEY_HASH)
      continue;
    fds[n] = openat (store.dirfd, e->d_name, O_RDONLY | O_DIRECTORY |
                     O_NOFOLLOW | O_CLOEXEC);
    if (fds[n] >= 0)
      ours[n++] = strcmp (e->d_name, store.hash_hex) == 0;
  }
  closedir (d);
  return n;
}

/* One look: the blocks over the bound deleted, oldest first. */
static void
evict_pass (void)
{
  int fds[MAX_OBJECTS];
  bool ours[MAX_OBJECTS];
  struct entry *v = NULL;
  size_t n = 0, max = 0, i;
  uint64_t total = 0, goal = store.limit / 10 * 9, gone = 0;
  unsigned nobj = open_objects (fds, ours), o;
  char name[32];

  for (o = 0; o < nobj; o++)
    scan_object (fds[o], o, &v, &n, &max);
  for (i = 0; i < n; i++)
    total += v[i].bytes;
  if (store.limit > 0 && total > store.limit) {
    qsort (v, n, sizeof *v, older);
    for (i = 0; i < n && total > goal; i++) {
      snprintf (name, sizeof name, "%" PRIu64 ".blk", v[i].block);
      if (unlinkat (fds[v[i].obj], name, 0) == 0)
        gone++;
      total -= v[i].bytes;
      if (ours[v[i].obj])
        store_note_present (v[i].block, false);
    }
    __atomic_add_fetch (&store.counts.evicted, gone, __ATOMIC_RELAXED);
    nbdkit_debug ("cache: %" PRIu64 " blocks deleted to keep under "
                  "cache-size=, %" PRIu64 " MiB left", gone, total >> 20);
  }
  for (o = 0; o < nobj; o++)
    close (fds[o]);
  free (v);
}

static void *
evict_thread (void *arg)
{
  pthread_mutex_lock (&ev.lock);
  while (!ev.stop) {
    if (!ev.due) {
      pthread_cond_wait (&ev.cond, &ev.lock);
      continue;
    }
    ev.due = false;
    ev.since_scan = 0;
    pthread_mutex_unlock (&ev.lock);
    evict_pass ();
    pthread_mutex_lock (&ev.lock);
  }
  pthread_mutex_unlock (&ev.lock);
  return NULL;
}

static void
look_at_space (void)
{
  struct statvfs sv;
  bool low;

  if (fstatvfs (store.dirfd, &sv) == -1 || sv.f_blocks == 0)
    return;
  low = sv.f_bavail < sv.f_blocks / 100 * LOW_PERCENT;
  if (low && !ev.low)
    nbdkit_debug ("cache: under %d%% of the filesystem is free: no blocks "
                  "written", LOW_PERCENT);
  __atomic_store_n (&ev.low, low, __ATOMIC_RELAXED);
}

/* Once nbdkit runs: the first look, in a thread of its own. */
void
store_evict_start (void)
{
  int err;

  if (!store_on ())
    return;
  pthread_mutex_lock (&ev.lock);
  look_at_space ();
  ev.due = true;
  err = pthread_create (&ev.thread, NULL, evict_thread, NULL);
  ev.running = err == 0;
  pthread_mutex_unlock (&ev.lock);
  if (err != 0)
    nbdkit_debug ("cache: no eviction thread: %s", strerror (err));
}

/* bytes more on disk: a new look when an eighth of the bound has gone
 * in since the last, and free space now and then.
 */
void
store_wrote (uint64_t bytes)
{
  LOCK_FOR_SCOPE (&ev.lock);
  ev.since_scan += bytes;
  ev.since_space += bytes;
  if (ev.since_space >= SPACE_EVERY) {
    ev.since_space = 0;
    look_at_space ();
  }
  if (store.limit > 0 && ev.since_scan >= store.limit / 8 && !ev.due) {
    ev.due = true;
    pthread_cond_signal (&ev.cond);
  }
}

bool
store_space_low (void)
{
  return __atomic_load_n (&ev.low, __ATOMIC_RELAXED);
}

void
store_evict_stop (void)
{
  pthread_mutex_lock (&ev.lock);
  ev.stop = true;
  pthread_cond_signal (&ev.cond);
  pthread_mutex_unlock (&ev.lock);
  if (ev.running)
    pthread_join (ev.thread, NULL);
  /* What was written since the last look may be over the bound. */
  if (ev.running && store.limit > 0 && ev.since_scan > 0)
    evict_pass ();
  ev.running = false;
}
