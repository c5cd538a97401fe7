/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The cache directory, and one object's folder in it.  nbdkit often runs
 * as root.  So a directory that another user could write into is refused,
 * as ssh refuses a key file that others can read: they could plant a
 * symlink and make nbdkit write where they choose.  The same holds for
 * every directory above it, unless its sticky bit keeps others' hands off
 * our entry (/tmp).  After that check, every file is opened relative to
 * the directory's descriptor, never following a symlink.
 */

#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <nbdkit-plugin.h>

#include "store/store.h"

struct store store = {
  .dirfd = -1, .objfd = -1, .sharedfd = -1,
  .lock = PTHREAD_MUTEX_INITIALIZER,
};

/* Whether a directory's owner and mode keep other users out. */
static bool
owned_safely (const struct stat *st, bool sticky_ok)
{
  if (st->st_uid != geteuid () && st->st_uid != 0)
    return false;
  return (st->st_mode & 022) == 0 || (sticky_ok && (st->st_mode & S_ISVTX));
}

/* Every directory above path (resolved), and path itself when self, as
 * owned_safely says.
 */
static int
check_ancestors (const char *path, bool self)
{
  char real[PATH_MAX + 2], *slash;
  struct stat st;

  if (realpath (path, real) == NULL) {
    nbdkit_error ("cache-dir: %s: %m", path);
    return -1;
  }
  if (self)
    strcat (real, strcmp (real, "/") == 0 ? "." : "/.");
  for (;;) {
    slash = strrchr (real, '/');
    if (slash == NULL)
      break;
    slash[slash == real] = '\0';
    if (stat (real, &st) == -1) {
      nbdkit_error ("cache-dir: %s: %m", real);
      return -1;
    }
    if (!owned_safely (&st, true)) {
      nbdkit_error ("cache-dir: %s is above the cache directory and another "
                    "user can write into it (or owns it): a planted entry "
                    "could send the cache elsewhere", real);
      return -1;
    }
    if (slash == real)
      break;
  }
  return 0;
}

/* Every folder that path names on its way, as written (made absolute),
 * as owned_safely says: one that others can write into could hold a
 * symlink to anywhere, which realpath would already have followed.
 */
static int
check_written (const char *path)
{
  char abs[2 * PATH_MAX + 2], *slash;
  struct stat st;

  if (path[0] == '/')
    snprintf (abs, sizeof abs, "%s", path);
  else if (getcwd (abs, PATH_MAX) != NULL)
    snprintf (abs + strlen (abs), sizeof abs - strlen (abs), "/%s", path);
  else {
    nbdkit_error ("cache-dir: getcwd: %m");
    return -1;
  }
  for (slash = strchr (abs + 1, '/'); slash != NULL;
       slash = strchr (slash + 1, '/')) {
    *slash = '\0';
    if (stat (abs, &st) == 0 && !owned_safely (&st, true)) {
      nbdkit_error ("cache-dir: %s is on the way to the cache directory "
                    "and another user can write into it (or owns it): a "
                    "planted symlink could send the cache elsewhere", abs);
      return -1;
    }
    *slash = '/';
  }
  return 0;
}

/* The folder that path is in (".", for a name alone), into buf. */
static void
parent_of (const char *path, char *buf, size_t size)
{
  const char *slash = strrchr (path, '/');

  if (slash == NULL)
    snprintf (buf, size, ".");
  else if (slash == path)
    snprintf (buf, size, "/");
  else
    snprintf (buf, size, "%.*s", (int) (slash - path), path);
}

/* cache-dir=: made if missing (once the folders above it are found
 * safe), checked, and opened for good.
 */
int
store_check_dir (const char *path)
{
  struct stat st, st2;
  char parent[PATH_MAX];

  if (strlen (path) >= PATH_MAX) {
    nbdkit_error ("cache-dir: the path is too long");
    return -1;
  }
  if (check_written (path) == -1)
    return -1;
  if (lstat (path, &st) == -1 && errno == ENOENT) {
    parent_of (path, parent, sizeof parent);
    if (check_ancestors (parent, true) == -1)
      return -1;
    if (mkdir (path, 0700) == -1 && errno != EEXIST) {
      nbdkit_error ("cache-dir: cannot make %s: %m", path);
      return -1;
    }
  }
  if (lstat (path, &st) == -1) {
    nbdkit_error ("cache-dir: %s: %m", path);
    return -1;
  }
  if (S_ISLNK (st.st_mode)) {
    nbdkit_error ("cache-dir: %s is a symlink: give the directory itself",
                  path);
    return -1;
  }
  if (!S_ISDIR (st.st_mode)) {
    nbdkit_error ("cache-dir: %s is not a directory", path);
    return -1;
  }
  if (!owned_safely (&st, false)) {
    nbdkit_error ("cache-dir: %s is owned by another user or writable by "
                  "group or others (mode %03o): refused, since a planted "
                  "symlink could make nbdkit write elsewhere",
                  path, (unsigned) (st.st_mode & 07777));
    return -1;
  }
  if (check_ancestors (path, false) == -1)
    return -1;
  store.dirfd = open (path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (store.dirfd == -1 || fstat (store.dirfd, &st2) == -1 ||
      st2.st_dev != st.st_dev || st2.st_ino != st.st_ino) {
    nbdkit_error ("cache-dir: %s changed while it was checked", path);
    return -1;
  }
  return 0;
}

/* Whether the small file name in folder fd holds the len bytes at
 * data: 1 if it does, 0 if it holds others, -1 if there is none.
 */
static int
small_file_is (int fd, const char *name, const void *data, size_t len)
{
  char have[4096];
  ssize_t r;
  int f = openat (fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

  if (f == -1)
    return -1;
  r = read (f, have, sizeof have);
  close (f);
  return r == (ssize_t) len && memcmp (have, data, len) == 0;
}

/* The small file name in folder fd made to hold the len bytes at data,
 * under a name of its own made anew (O_EXCL, so that nothing planted
 * there, such as a hard link to a file elsewhere, is written through),
 * then renamed into place.  False if it could not be.
 */
static bool
small_file_write (int fd, const char *name, const void *data, size_t len)
{
  char tmp[128];
  ssize_t r;
  int f;

  snprintf (tmp, sizeof tmp, "%s.%s.%d.tmp", name, store.host,
            (int) getpid ());
  unlinkat (fd, tmp, 0);
  f = openat (fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
              0600);
  if (f == -1)
    return false;
  r = write (f, data, len);
  close (f);
  if (r != (ssize_t) len || renameat (fd, tmp, fd, name) == -1) {
    unlinkat (fd, tmp, 0);
    return false;
  }
  return true;
}

/* The key file in the object folder fd: written once, else the same
 * text.
 */
static bool
key_file (int objfd, const char *key)
{
  int same = small_file_is (objfd, "key", key, strlen (key));

  if (same == 1)
    return true;
  if (same == 0)
    nbdkit_debug ("cache: %s/key holds another key: rewritten",
                  store.hash_hex);
  return small_file_write (objfd, "key", key, strlen (key));
}

/* The blocks already on disk, by their names: each is checked when read. */
static void
scan_present (void)
{
  int fd = openat (store.objfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = fd >= 0 ? fdopendir (fd) : NULL;
  struct dirent *e;
  uint64_t n, found = 0;
  char *end;

  if (d == NULL) {
    if (fd >= 0)
      close (fd);
    return;
  }
  for (e = readdir (d); e != NULL; e = readdir (d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9')
      continue;
    errno = 0;
    n = strtoull (e->d_name, &end, 10);
    if (errno == 0 && strcmp (end, ".blk") == 0 && n < store.nblocks) {
      store.present[n / 8] |= 1 << (n % 8);
      found++;
    }
  }
  closedir (d);
  nbdkit_debug ("cache: %" PRIu64 " of %" PRIu64 " blocks on disk",
                found, store.nblocks);
}

/* text's SHA-256 into hash, and in hex into hex. */
static void
hash_text (const char *text, unsigned char *hash, char *hex)
{
  unsigned len = 0, i;

  EVP_Digest (text, strlen (text), hash, &len, EVP_sha256 (), NULL);
  for (i = 0; i < STORE_KEY_HASH; i++)
    snprintf (hex + 2 * i, 3, "%02x", hash[i]);
}

/* The object folder named hex, made if missing and opened: its
 * descriptor, or -1 if it cannot be, or another user could write it.
 */
static int
object_folder (const char *hex)
{
  struct stat st;
  int fd;

  if (mkdirat (store.dirfd, hex, 0700) == -1 && errno != EEXIST)
    return -1;
  fd = openat (store.dirfd, hex, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
               O_CLOEXEC);
  if (fd == -1 || fstat (fd, &st) == -1)
    return -1;
  if (st.st_uid != geteuid () || (st.st_mode & 022) != 0) {
    close (fd);
    errno = EPERM;
    return -1;
  }
  return fd;
}

static void
host_name (void)
{
  char *p;

  if (gethostname (store.host, sizeof store.host) == -1)
    strcpy (store.host, "host");
  store.host[sizeof store.host - 1] = '\0';
  for (p = store.host; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
          (*p >= '0' && *p <= '9') || *p == '-'))
      *p = '_';
}

/* The object's folder for key: false (the cache off, -v says why) when
 * it cannot be used.  The key file holds shown, the key as people may
 * read it on disk.  With shared (not NULL), blocks are also read from
 * the folder of that key, where store_promote moves them once they are
 * proven; both folders' blocks carry shared's hash.
 */
bool
store_open (const char *key, const char *shown, const char *shared,
            uint64_t size, uint64_t limit)
{
  unsigned char own[STORE_KEY_HASH];

  host_name ();
  hash_text (key, own, store.hash_hex);
  if (shared != NULL)
    hash_text (shared, store.key_hash, store.shared_hex);
  else
    memcpy (store.key_hash, own, sizeof own);
  store.size = size;
  store.nblocks = (size + STORE_BLOCK - 1) / STORE_BLOCK;
  store.limit = limit;
  store.objfd = object_folder (store.hash_hex);
  if (store.objfd == -1)
    goto fail;
  if (shared != NULL) {
    store.sharedfd = object_folder (store.shared_hex);
    if (store.sharedfd == -1 || !key_file (store.sharedfd, shared))
      goto fail;
  }
  store.present = calloc (store.nblocks / 8 + 1, 1);
  store.touched = calloc (store.nblocks + 1, sizeof *store.touched);
  store.served = calloc (store.nblocks + 1, sizeof *store.served);
  if (store.present == NULL || store.touched == NULL ||
      store.served == NULL ||
      !key_file (store.objfd, shown))
    goto fail;
  scan_present ();
  return true;

 fail:
  nbdkit_debug ("cache: %s: %m: nothing is kept", store.hash_hex);
  store_close ();
  return false;
}

bool
store_on (void)
{
  return store.objfd >= 0;
}

bool
store_has (uint64_t block)
{
  LOCK_FOR_SCOPE (&store.lock);
  return block < store.nblocks &&
    (store.present[block / 8] & (1 << (block % 8))) != 0;
}

void
store_note_present (uint64_t block, bool present)
{
  LOCK_FOR_SCOPE (&store.lock);
  if (block >= store.nblocks)
    return;
  if (present)
    store.present[block / 8] |= 1 << (block % 8);
  else
    store.present[block / 8] &= ~(1 << (block % 8));
}

/* Where, from offset on and before end, the first block known to be on
 * disk starts (end if none): read-ahead stops there.
 */
uint64_t
store_cached_from (uint64_t offset, uint64_t end)
{
  uint64_t b;

  if (!store_on ())
    return end;
  for (b = offset / STORE_BLOCK; b * STORE_BLOCK < end; b++)
    if (store_has (b))
      return max64 (b * STORE_BLOCK, offset);
  return end;
}

/* A name no other process or thread uses: host, pid, a counter. */
void
store_tmp_name (char *name, size_t size, uint64_t block)
{
  static uint64_t seq;

  snprintf (name, size, "%" PRIu64 ".%s.%d.%" PRIu64 ".tmp", block,
            store.host, (int) getpid (),
            __atomic_add_fetch (&seq, 1, __ATOMIC_RELAXED));
}

/* The digest of the object's first bytes (what the probe got), against
 * the one kept in the folder's file "first": if they differ, the folder
 * holds another object's blocks, which nothing else told apart (an ETag
 * of mtime and size), and they go.  The digest is then kept.
 */
void
store_first (const unsigned char *digest, size_t len)
{
  int same;

  if (!store_on ())
    return;
  same = small_file_is (store.objfd, "first", digest, len);
  if (same == 1)
    return;
  /* Different, or not known (the file lost): what is kept goes. */
  if (same == 0 || store_cached_from (0, store.size) < store.size) {
    nbdkit_debug ("cache: the object's first bytes differ from those of "
                  "the blocks kept under its key: another object's, "
                  "dropped");
    store_drop_all ();
  }
  small_file_write (store.objfd, "first", digest, len);
}

/* checksum= failed: what this object's folder holds is another object's,
 * so none of it may be served again.
 */
void
store_drop_all (void)
{
  char name[32];
  uint64_t b;

  if (!store_on ())
    return;
  for (b = 0; b < store.nblocks; b++) {
    snprintf (name, sizeof name, "%" PRIu64 ".blk", b);
    unlinkat (store.objfd, name, 0);
    store_note_present (b, false);
  }
  nbdkit_debug ("cache: %s: the object's blocks deleted", store.hash_hex);
}


void
store_close (void)
{
  /* A folder of this run alone: nothing in it will be used again. */
  if (store.ephemeral && store.objfd >= 0) {
    store_drop_all ();
    unlinkat (store.objfd, "key", 0);
    unlinkat (store.objfd, "first", 0);
    unlinkat (store.dirfd, store.hash_hex, AT_REMOVEDIR);
    store.ephemeral = false;
  }
  if (store.objfd >= 0)
    close (store.objfd);
  if (store.sharedfd >= 0)
    close (store.sharedfd);
  if (store.dirfd >= 0)
    close (store.dirfd);
  store.objfd = store.sharedfd = store.dirfd = -1;
  free (store.present);
  free (store.touched);
  free (store.served);
  store.present = NULL;
  store.touched = NULL;
  store.served = NULL;
}
