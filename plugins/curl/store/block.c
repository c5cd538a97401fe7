/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * One block file: a header, then the block's bytes.  The header names
 * the object (its key's hash) and the block, and holds a digest of each
 * chunk of STORE_CHUNK bytes.  A read checks only the chunks it covers,
 * so a small read costs a small check.  Each digest is seeded with the
 * key, the block and the chunk, so a chunk moved from elsewhere fails.
 *
 * The digest finds damage: a file torn by a crash, rotted, edited, or cut
 * short.  It is no defence against someone who can write the directory;
 * dir.c keeps everyone else out of it.  It is 64 bits wide and runs at
 * memory speed, so that a hit costs little more than the copy.
 */

#include <config.h>

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <nbdkit-plugin.h>

#include "store/store.h"

#define MAGIC "NBDCURLB"
#define FORMAT 1
#define HEADER_USED 200                 /* the rest of the header is 0 */
#define TOUCH_SECS 60                   /* mtime refreshed at most this often */

struct header {
  char magic[8];
  uint32_t version, header_size;
  uint64_t block;
  uint32_t len, chunk;
  unsigned char key_hash[STORE_KEY_HASH];
  uint64_t digest[STORE_CHUNKS];
  uint64_t self;                        /* of the bytes before it */
} __attribute__ ((packed));

_Static_assert (sizeof (struct header) == HEADER_USED, "header layout");

static const uint64_t M[] = {
  UINT64_C (0xa2c7f61260597901), UINT64_C (0xc735e33cc939d433),
  UINT64_C (0x217c0d61e9b3055f), UINT64_C (0xe27eedc7703f6ae3),
  UINT64_C (0xb134e1fed3127779), UINT64_C (0x74e9b0101566f4a9),
};

static inline uint64_t
rotl (uint64_t x, int r)
{
  return (x << r) | (x >> (64 - r));
}

static inline uint64_t
word (const unsigned char *p)
{
  uint64_t v;

  memcpy (&v, p, 8);
  return le64toh (v);
}

static inline uint64_t
lane (uint64_t h, uint64_t v)
{
  return rotl (h ^ (v * M[4]), 29) * M[0];
}

/* Four lanes of multiply and rotate, folded and mixed at the end. */
static uint64_t
digest (uint64_t seed, const unsigned char *p, size_t n)
{
  uint64_t a = seed ^ M[0], b = seed ^ M[1], c = seed ^ M[2], d = seed ^ M[3];
  unsigned char tail[8];
  size_t i;

  for (i = 0; i + 32 <= n; i += 32) {
    a = lane (a, word (p + i));
    b = lane (b, word (p + i + 8));
    c = lane (c, word (p + i + 16));
    d = lane (d, word (p + i + 24));
  }
  for (; i < n; i += 8) {
    memset (tail, 0, sizeof tail);
    memcpy (tail, p + i, n - i < 8 ? n - i : 8);
    a = lane (a, word (tail));
  }
  a = rotl (a, 1) + rotl (b, 7) + rotl (c, 12) + rotl (d, 18) + n;
  a ^= a >> 31;
  a *= M[5];
  a ^= a >> 29;
  a *= M[1];
  return a ^ (a >> 32);
}

static uint64_t
chunk_seed (uint64_t block, unsigned chunk)
{
  return word (store.key_hash) ^ (block * M[2]) ^ ((uint64_t) chunk * M[3]);
}

uint32_t
store_block_len (uint64_t block)
{
  return min64 (STORE_BLOCK, store.size - block * STORE_BLOCK);
}

static void
make_header (struct header *h, uint64_t block, const char *data)
{
  uint32_t len = store_block_len (block), c;

  memset (h, 0, sizeof *h);
  memcpy (h->magic, MAGIC, 8);
  h->version = htole32 (FORMAT);
  h->header_size = htole32 (STORE_HEADER);
  h->block = htole64 (block);
  h->len = htole32 (len);
  h->chunk = htole32 (STORE_CHUNK);
  memcpy (h->key_hash, store.key_hash, STORE_KEY_HASH);
  for (c = 0; c * STORE_CHUNK < len; c++)
    h->digest[c] = htole64 (digest (chunk_seed (block, c),
                                    (const unsigned char *) data +
                                    c * STORE_CHUNK,
                                    min64 (STORE_CHUNK,
                                           len - c * STORE_CHUNK)));
  h->self = htole64 (digest (block, (const unsigned char *) h,
                             offsetof (struct header, self)));
}

/* Whether h is block's header, of this object and this layout. */
static bool
header_ok (const struct header *h, uint64_t block)
{
  return memcmp (h->magic, MAGIC, 8) == 0 &&
    le32toh (h->version) == FORMAT &&
    le32toh (h->header_size) == STORE_HEADER &&
    le64toh (h->block) == block &&
    le32toh (h->len) == store_block_len (block) &&
    le32toh (h->chunk) == STORE_CHUNK &&
    memcmp (h->key_hash, store.key_hash, STORE_KEY_HASH) == 0 &&
    le64toh (h->self) == digest (block, (const unsigned char *) h,
                                 offsetof (struct header, self));
}

/* The chunks c0 to c1, whose bytes are at p, that do not have their
 * digests: a bit each.
 */
static uint32_t
chunks_bad (const struct header *h, uint64_t block, unsigned c0, unsigned c1,
            const char *p)
{
  uint32_t len = store_block_len (block), bad = 0;
  unsigned c;

  for (c = c0; c <= c1; c++, p += STORE_CHUNK)
    if (le64toh (h->digest[c]) !=
        digest (chunk_seed (block, c), (const unsigned char *) p,
                min64 (STORE_CHUNK, len - c * STORE_CHUNK)))
      bad |= UINT32_C (1) << c;
  return bad;
}

/* The chunks that [off, off+len) of a block covers: a bit each. */
uint32_t
store_chunks (uint32_t off, uint32_t len)
{
  unsigned c0 = off / STORE_CHUNK, c1 = (off + len - 1) / STORE_CHUNK;

  return (uint32_t) (((UINT64_C (1) << (c1 + 1)) - 1) &
                     ~((UINT64_C (1) << c0) - 1));
}

/* The header digest of the file whose bytes block's read got whole, or
 * that this process wrote: for store_promote.
 */
static void
note_served (uint64_t block, uint64_t self)
{
  LOCK_FOR_SCOPE (&store.lock);
  if (store.served != NULL)
    store.served[block] = self;
}

/* A hit keeps its file young for eviction (evict.c): its mtime is
 * refreshed, at most once a minute.
 */
static void
touch (int fd, uint64_t block)
{
  uint32_t now = (uint32_t) time (NULL);
  bool due;

  pthread_mutex_lock (&store.lock);
  due = now - store.touched[block] >= TOUCH_SECS;
  if (due)
    store.touched[block] = now;
  pthread_mutex_unlock (&store.lock);
  if (due)
    futimens (fd, NULL);
}

/* Read back the whole chunks around [off, off+len) of block's file into
 * buf (len bytes) and check them: the chunks that failed (all of them
 * if the header or the read did).  The bytes of those in buf are wrong.
 */
static uint32_t
read_checked (int fd, uint64_t block, char *buf, uint32_t off, uint32_t len,
              uint64_t *self)
{
  struct header h;
  uint32_t blen = store_block_len (block), bad = store_chunks (off, len);
  unsigned c0 = off / STORE_CHUNK, c1 = (off + len - 1) / STORE_CHUNK;
  uint32_t from = c0 * STORE_CHUNK;
  uint32_t to = min64 ((c1 + 1) * STORE_CHUNK, blen);
  char *tmp = NULL, *p = buf;

  if (pread (fd, &h, sizeof h, 0) != sizeof h || !header_ok (&h, block))
    return bad;
  *self = le64toh (h.self);
  if (from != off || to != off + len) {
    p = tmp = malloc (to - from);
    if (tmp == NULL)
      return bad;
  }
  if (pread (fd, p, to - from, STORE_HEADER + from) == (ssize_t) (to - from))
    bad = chunks_bad (&h, block, c0, c1, p);
  if (tmp != NULL)
    memcpy (buf, tmp + (off - from), len);
  free (tmp);
  return bad;
}

/* Bytes [off, off+len) of block from its file: 1 if they were there and
 * passed every check, 0 if there is no file, -1 if some failed a check.
 * *bad gets the chunks whose bytes in buf must be fetched (all for 0),
 * see store_chunks.  A chunk that fails is counted, not served; the
 * block is rewritten once it is whole again.
 */
int
store_get (uint64_t block, char *buf, uint32_t off, uint32_t len,
           uint32_t *bad)
{
  char name[32];
  struct stat st;
  uint32_t c, good;
  uint64_t self = 0;
  int fd;

  *bad = store_chunks (off, len);
  if (!store_on () || block >= store.nblocks)
    return 0;
  snprintf (name, sizeof name, "%" PRIu64 ".blk", block);
  /* O_NONBLOCK: a FIFO planted here must not hang the read.  This URL's
   * folder first, then checksum='s shared one.
   */
  fd = openat (store.objfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
               O_CLOEXEC);
  if (fd == -1 && errno == ENOENT && store.sharedfd >= 0)
    fd = openat (store.sharedfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
                 O_CLOEXEC);
  if (fd == -1)
    return 0;
  if (fstat (fd, &st) == 0 && S_ISREG (st.st_mode) &&
      st.st_size == STORE_HEADER + (off_t) store_block_len (block))
    *bad = read_checked (fd, block, buf, off, len, &self);
  if (*bad == 0)
    touch (fd, block);
  if (*bad == 0 && len == store_block_len (block))
    note_served (block, self);
  close (fd);
  store_note_present (block, *bad == 0);
  /* The bytes served: those of the chunks that passed. */
  for (good = len, c = 0; c < STORE_CHUNKS; c++)
    if (*bad & (UINT32_C (1) << c))
      good -= min64 (off + len, (c + 1) * STORE_CHUNK) -
        max64 (off, c * STORE_CHUNK);
  __atomic_add_fetch (&store.counts.hit_bytes, good, __ATOMIC_RELAXED);
  if (*bad == 0)
    return 1;
  __atomic_add_fetch (&store.counts.refused, 1, __ATOMIC_RELAXED);
  nbdkit_debug ("cache: block %" PRIu64 " failed its check (chunks %#x): "
                "they are fetched again", block, *bad);
  return -1;
}

/* Whether blocks may be written now: not after a failure for good, nor
 * while the disk is full or nearly.
 */
bool
store_may_write (void)
{
  return store_on () &&
    !__atomic_load_n (&store.no_writes, __ATOMIC_RELAXED) &&
    clock_ns () >= __atomic_load_n (&store.full_until_ns, __ATOMIC_RELAXED)
    && !store_space_low ();
}

/* A write that failed: for a while if the disk was full, else for good. */
static void
write_failed (int err)
{
  if (err == ENOSPC || err == EDQUOT) {
    if (clock_ns () >= __atomic_load_n (&store.full_until_ns,
                                        __ATOMIC_RELAXED))
      nbdkit_debug ("cache: the disk is full: no blocks written for 30 s");
    __atomic_store_n (&store.full_until_ns,
                      clock_ns () + INT64_C (30000000000), __ATOMIC_RELAXED);
  }
  else if (!__atomic_exchange_n (&store.no_writes, true, __ATOMIC_RELAXED)) {
    nbdkit_debug ("cache: writing a block failed (%s): none written from "
                  "now on", strerror (err));
  }
}

/* The header for data (the whole block) into fd, then the file renamed
 * to block's name.  fd is closed.  True if the block is in place.
 */
bool
store_finish (int fd, const char *tmp, uint64_t block, const char *data)
{
  struct header h;
  char name[32];
  int err = 0;

  make_header (&h, block, data);
  if (pwrite (fd, &h, sizeof h, 0) != sizeof h)
    err = errno ? errno : EIO;
  if (close (fd) == -1 && err == 0)
    err = errno;
  snprintf (name, sizeof name, "%" PRIu64 ".blk", block);
  if (err == 0 && renameat (store.objfd, tmp, store.objfd, name) == -1)
    err = errno;
  if (err != 0) {
    unlinkat (store.objfd, tmp, 0);
    write_failed (err);
    return false;
  }
  store_note_present (block, true);
  note_served (block, le64toh (h.self));
  __atomic_add_fetch (&store.counts.written, 1, __ATOMIC_RELAXED);
  store_wrote (STORE_HEADER + store_block_len (block));
  return true;
}

static bool write_block (uint64_t block, const char *data);

/* Block's whole bytes, fetched: into a file of its own, then renamed into
 * place.  Readers see the old file or the new, never a part.  This
 * process's claim of the block goes once it is in place (or not).
 */
bool
store_write_block (uint64_t block, const char *data)
{
  bool ok = write_block (block, data);

  store_unclaim (block);
  return ok;
}

static bool
write_block (uint64_t block, const char *data)
{
  char tmp[128];
  uint32_t len = store_block_len (block);
  int fd;

  if (!store_may_write () || block >= store.nblocks)
    return false;
  /* A claimed block's file is there already (claim.c). */
  if (!store_claimed_file (block, &fd, tmp, sizeof tmp)) {
    store_tmp_name (tmp, sizeof tmp, block);
    fd = openat (store.objfd, tmp, O_WRONLY | O_CREAT | O_EXCL |
                 O_NOFOLLOW | O_CLOEXEC, 0600);
  }
  if (fd == -1) {
    write_failed (errno);
    return false;
  }
  if (pwrite (fd, data, len, STORE_HEADER) != (ssize_t) len) {
    write_failed (errno ? errno : ENOSPC);
    close (fd);
    unlinkat (store.objfd, tmp, 0);
    return false;
  }
  return store_finish (fd, tmp, block, data);
}

/* Whether the file name in folder fd is block's, with the header digest
 * self.
 */
static bool
file_is (int fd, const char *name, uint64_t block, uint64_t self)
{
  struct header h;
  int f = openat (fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  bool ok;

  if (f == -1)
    return false;
  ok = pread (f, &h, sizeof h, 0) == sizeof h && header_ok (&h, block) &&
    le64toh (h.self) == self;
  close (f);
  return ok;
}

/* checksum= proved the bytes this process served: the blocks it wrote
 * or served whole go to the folder every URL of that checksum reads.
 * Each is first moved under a name of its own and then checked, so that
 * a file another process put in its place since is not shared.
 */
void
store_promote (void)
{
  char name[32], tmp[128];
  uint64_t b, self, moved = 0;

  if (!store_on () || store.sharedfd < 0)
    return;
  for (b = 0; b < store.nblocks; b++) {
    pthread_mutex_lock (&store.lock);
    self = store.served[b];
    pthread_mutex_unlock (&store.lock);
    if (self == 0)
      continue;
    snprintf (name, sizeof name, "%" PRIu64 ".blk", b);
    store_tmp_name (tmp, sizeof tmp, b);
    if (renameat (store.objfd, name, store.sharedfd, tmp) == -1)
      continue;
    if (file_is (store.sharedfd, tmp, b, self) &&
        renameat (store.sharedfd, tmp, store.sharedfd, name) == 0)
      moved++;
    else
      unlinkat (store.sharedfd, tmp, 0);
  }
  nbdkit_debug ("cache: %" PRIu64 " blocks proven by checksum= are now "
                "shared with its other URLs (%s)", moved, store.shared_hex);
}
