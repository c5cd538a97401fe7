/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The checksum link, for checksum=ALGO:HEX (rules/digests.c): the object is
 * held to a digest the user gives.  Pinning proves that every read comes
 * from one version of the object.  This proves that it is the version the
 * user expects, without a second pass over the copy.
 *
 * The digest is of the bytes reads return, in the object's order.  The
 * bytes before the frontier have been hashed.  The read that starts at or
 * before the frontier and ends past it hashes its own bytes, and moves the
 * frontier on.  A read further on is written, at its own offset, to a spill
 * file.  It is hashed from there when the frontier reaches it, which frees
 * its blocks again.  The spill file is unlinked, in $TMPDIR, else /var/tmp:
 * on disk, not in memory.  nbdcopy splits an image among its workers in
 * regions of 128 MiB and reads them at once.  All but the first go to the
 * spill file, up to SPILL_MAX at a time.  Some bytes cannot be spilled: the
 * file is full, cannot be made, or would pass ulimit -f.  For those,
 * served.c keeps the SHA-256 of the bytes the read returned.  Once every
 * byte has been read at least once, the read that completed it reads again,
 * in order, whatever is neither hashed nor spilled.  Those reads go down
 * the links below, as an NBD connection of their own (sum.own).  However
 * the frontier hashes a range that kept a digest, the bytes hashed for it
 * must have that digest.  If not, the object changed while it was read.  A
 * pin proves no bytes: nginx's ETag survives a cp -p of another version.
 * Those bytes cost three passes (the digest kept, the digest compared, the
 * object's) and a second read.  Past served.c's cap, or when the spill file
 * cannot be read back, bytes are noted as unverifiable.  The verdict then
 * says so instead of a match.  A mismatch fails that read and every read
 * after it, and says so.  A client that never reads every byte gets no
 * verdict; -v shows that at unload.
 *
 * One read at a time hashes (sum.hashing), and it does so without the lock.
 * Other reads meanwhile only spill their bytes and go on.  A read that
 * cannot spill takes its digest under the lock.  So the frontier cannot
 * pass its range before the digest is kept.
 */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <nbdkit-plugin.h>

#include "read/served.h"

#define SPILL_MAX (INT64_C (1) << 30)   /* bytes in the spill file */
#define PIECE (4 * 1024 * 1024)         /* hashed from the file, or read
                                           again, at a time */

enum sum_state { SUM_RUNNING, SUM_GOOD, SUM_BAD };

static struct {
  pthread_mutex_t lock;
  enum sum_state state;
  EVP_MD_CTX *ctx;
  uint64_t frontier;            /* [0, frontier) is hashed, or being */
  bool hashing;                 /* a read is hashing, without the lock */
  struct intervals read;        /* read past the frontier */
  struct intervals spilled;     /* ... and in the spill file */
  struct intervals unverifiable; /* ... neither, nor digested (served.c) */
  int fd;                       /* the spill file, -1 before, -2 none */
  uint64_t reread;              /* bytes read a second time */
  const char *why;              /* SUM_BAD: what later reads say */
  char *piece;                  /* PIECE bytes, for the hasher */
  struct ra_client own;         /* its reads, which read on in order */
} sum = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

/* The spill file, made at the first need: false if there is none. */
static bool
spill_file_locked (void)
{
  const char *dir = getenv ("TMPDIR");

  if (sum.fd == -1) {
    if (dir == NULL || *dir == '\0')
      dir = "/var/tmp";
    sum.fd = open (dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (sum.fd == -1) {
      nbdkit_debug ("checksum: no spill file in %s (%m): reads out of "
                    "order are read again at the end", dir);
      sum.fd = -2;
    }
  }
  return sum.fd >= 0;
}

/* Whether the spill file may grow to end bytes: past the process's
 * file size limit (ulimit -f) a write would not fail with EFBIG but
 * kill nbdkit with SIGXFSZ, whose default action ends the process.
 */
static bool
below_size_limit (uint64_t end)
{
  struct rlimit r;

  if (getrlimit (RLIMIT_FSIZE, &r) == -1 || r.rlim_cur == RLIM_INFINITY)
    return true;
  if (end <= r.rlim_cur)
    return true;
  nbdkit_debug ("checksum: spill file: byte %" PRIu64 " is past the file "
                "size limit (ulimit -f, %" PRIu64 " bytes): read again at "
                "the end", end, (uint64_t) r.rlim_cur);
  return false;
}

/* buf's bytes past the frontier into the spill file, if it has room:
 * false if they are not there.
 */
static bool
spill_locked (const char *buf, uint64_t offset, uint32_t count)
{
  uint64_t skip = sum.frontier > offset ? sum.frontier - offset : 0;
  uint64_t start = offset + skip, len = count - skip;

  if (skip >= count)
    return true;
  if (intervals_total (&sum.spilled) + len > SPILL_MAX ||
      !spill_file_locked () || !below_size_limit (start + len))
    return false;
  if (pwrite (sum.fd, buf + skip, len, start) != (ssize_t) len) {
    nbdkit_debug ("checksum: spill file: %m: read again at the end");
    return false;
  }
  return intervals_note (&sum.spilled, start, start + len, false);
}

/* The hasher: the object's bytes [pos, pos + len) into the digest,
 * and compared with those served for them, if kept.
 */
static void
hash (const char *data, size_t len, uint64_t pos)
{
  EVP_DigestUpdate (sum.ctx, data, len);
  served_hash (data, len, pos);
}

/* The hasher: [start, end) of the spill file hashed, and [first, end)
 * freed, without the lock: how far it got (end, unless the file could
 * not be read back).
 */
static uint64_t
hash_spilled (uint64_t first, uint64_t start, uint64_t end)
{
  uint64_t pos;

  for (pos = start; pos < end;) {
    size_t n = min64 (end - pos, PIECE);

    ssize_t r = pread (sum.fd, sum.piece, n, pos);

    if (r != (ssize_t) n) {
      if (r >= 0)
        errno = EIO;            /* short: the file lost bytes */
      return pos;
    }
    hash (sum.piece, n, pos);
    pos += n;
  }
  fallocate (sum.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
             first, end - first);
  return end;
}

/* The hasher, lock held: if bytes hashed differ from those a read
 * returned for the same range, the object changed while it was read
 * (a pin proves no bytes: nginx's ETag is the file's mtime and size).
 */
static void
compared_locked (void)
{
  uint64_t start, end;

  if (!served_differ (&start, &end) || sum.state != SUM_RUNNING)
    return;
  sum.state = SUM_BAD;
  store_write_flush ();        /* nothing queued written after */
  store_drop_all ();
  sum.why = "could not be verified: the object changed while it was read";
  nbdkit_error ("checksum: bytes %" PRIu64 "-%" PRIu64 " read again differ "
                "from the bytes served before for them: the object changed "
                "while it was read.  Every read fails from now on",
                start, end - 1);
}

/* Bytes were neither hashed as served, nor spilled, nor digested as
 * served (sum.unverifiable, else one that served.c missed): the digest
 * cannot say what the client got.
 */
static void
unverified_locked (void)
{
  uint64_t pos = sum.unverifiable.n > 0 ? sum.unverifiable.r[0].start : 0;

  sum.state = SUM_BAD;
  sum.why = "could not be verified";
  nbdkit_error ("checksum: bytes from %" PRIu64 " on could not be "
                "verified: they were neither hashed as served, nor kept "
                "in the spill file, nor kept as a digest of what was "
                "served (over %d such reads ahead of the digest, or the "
                "spill file could not be read back), so reading them "
                "again proves nothing of what the client got.  Every "
                "read fails from now on; give nbdkit a TMPDIR with room "
                "for a spill file of the object's size (up to 1 GiB "
                "ahead of the digest)", pos, served_max ());
}

/* The hasher, lock held: the spilled ranges the frontier reached,
 * hashed in order.  If the file cannot be read back, no more is
 * spilled, and what it held is read again from the server.
 */
static void
drain_locked (void)
{
  while (sum.spilled.n > 0 && sum.spilled.r[0].start <= sum.frontier) {
    struct interval g = sum.spilled.r[0];
    uint64_t from = sum.frontier, reached;

    memmove (&sum.spilled.r[0], &sum.spilled.r[1],
             (sum.spilled.n - 1) * sizeof sum.spilled.r[0]);
    sum.spilled.n--;
    if (g.end <= from) {
      fallocate (sum.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                 g.start, g.end - g.start);
      continue;
    }
    sum.frontier = g.end;
    served_reach (g.end);
    pthread_mutex_unlock (&sum.lock);
    reached = hash_spilled (g.start, from, g.end);
    pthread_mutex_lock (&sum.lock);
    if (reached < g.end) {
      /* The client's bytes are lost: read again, they prove nothing. */
      nbdkit_debug ("checksum: the spill file could not be read back "
                    "(%m): what it holds is read again instead, and "
                    "cannot be verified");
      sum.frontier = reached;
      (void) intervals_note (&sum.read, reached, g.end, true);
      (void) intervals_note (&sum.unverifiable, reached, g.end, true);
      while (sum.spilled.n > 0) {
        g = sum.spilled.r[--sum.spilled.n];
        (void) intervals_note (&sum.unverifiable, g.start, g.end, true);
      }
      close (sum.fd);
      sum.fd = -2;
    }
  }
  intervals_trim (&sum.read, sum.frontier);
  compared_locked ();
}

/* Whether every byte of the object has been read. */
static bool
all_read_locked (void)
{
  return sum.frontier >= (uint64_t) object.size ||
    (sum.read.n == 1 && sum.read.r[0].start <= sum.frontier &&
     sum.read.r[0].end >= (uint64_t) object.size);
}

/* The frontier is at the end: the verdict. */
static void
verdict_locked (void)
{
  unsigned char got[EVP_MAX_MD_SIZE];
  char got_hex[2 * EVP_MAX_MD_SIZE + 1], want_hex[sizeof got_hex];
  unsigned n = 0;

  if (sum.unverifiable.n > 0 || !served_all_compared ()) {
    unverified_locked ();
    return;
  }
  EVP_DigestFinal_ex (sum.ctx, got, &n);
  if (n == cfg.checksum.len && memcmp (got, cfg.checksum.digest, n) == 0) {
    sum.state = SUM_GOOD;
    store_write_flush ();       /* what was served is written, then shared */
    store_promote ();
    nbdkit_debug ("checksum: the %s of all %" PRIi64 " bytes matches "
                  "checksum= (%" PRIu64 " bytes read a second time)",
                  cfg.checksum.algo, object.size, sum.reread);
    return;
  }
  sum.state = SUM_BAD;
  store_write_flush ();        /* nothing queued written after */
  store_drop_all ();
  sum.why = "is not checksum='s";
  digests_hex (got, n, got_hex);
  digests_hex (cfg.checksum.digest, cfg.checksum.len, want_hex);
  nbdkit_error ("checksum: the %s of the %" PRIi64 " bytes read is %s, "
                "not %s as checksum= gives: this is not the object "
                "expected%s", cfg.checksum.algo, object.size, got_hex, want_hex,
                object_is_serving () ? ", and every read fails from now on"
                : "");
}

/* The hasher, once every byte has been read: what is neither hashed
 * nor spilled, read again in order.  -1 if a read failed (a later read
 * tries again).
 */
static int
catch_up_locked (const struct read_link *below)
{
  for (drain_locked (); sum.state == SUM_RUNNING &&
         sum.frontier < (uint64_t) object.size; drain_locked ()) {
    uint64_t pos = sum.frontier;
    uint64_t next = sum.spilled.n > 0 ? sum.spilled.r[0].start
      : (uint64_t) object.size;
    uint32_t n = min64 (next - pos, PIECE);
    int r;

    if (sum.unverifiable.n > 0) {     /* no use reading again */
      unverified_locked ();
      return -1;
    }
    /* Reads that come meanwhile keep no digest of these bytes. */
    sum.frontier = pos + n;
    served_reach (pos + n);
    pthread_mutex_unlock (&sum.lock);
    r = below->pread (below, &(struct read_op) {
        .client = &sum.own, .buf = sum.piece, .count = n, .offset = pos,
      });
    if (r == 0)
      hash (sum.piece, n, pos);
    pthread_mutex_lock (&sum.lock);
    if (r == -1) {
      nbdkit_error ("checksum: bytes %" PRIu64 "-%" PRIu64 " could not be "
                    "read again for the digest", pos, pos + n - 1);
      sum.frontier = pos;
      return -1;
    }
    sum.reread += n;
  }
  return 0;
}

/* A read as the hasher: its own bytes [offset, end) in buf if they
 * reach the frontier (buf NULL: none), what was spilled after them, and
 * once every byte was read what is left; then the verdict.  -1 as
 * checksum_read.
 */
static int
hash_on_locked (const struct read_link *next, const char *buf,
                uint64_t offset, uint64_t end)
{
  uint64_t from = sum.frontier;
  int r = 0;

  sum.hashing = true;
  if (buf != NULL && offset <= from && end > from) {
    sum.frontier = end;
    served_reach (end);
    pthread_mutex_unlock (&sum.lock);
    hash (buf + (from - offset), end - from, from);
    pthread_mutex_lock (&sum.lock);
  }
  drain_locked ();
  if (sum.state == SUM_RUNNING && all_read_locked ())
    r = catch_up_locked (next);
  if (sum.state == SUM_RUNNING && sum.frontier >= (uint64_t) object.size)
    verdict_locked ();
  sum.hashing = false;
  return sum.state == SUM_BAD ? -1 : r;
}

/* After a read of [offset, offset+count) into buf succeeded: its
 * bytes accounted for; -1 (errno EIO) when the object is not the one
 * expected, or the read that completed it could not finish the digest.
 */
static int
checksum_read (const struct read_link *next, const void *buf,
               uint32_t count, uint64_t offset)
{
  uint64_t end = offset + count;
  int r = 0;

  if (cfg.checksum.algo == NULL || count == 0)
    return 0;
  pthread_mutex_lock (&sum.lock);
  if (sum.state == SUM_BAD) {
    nbdkit_error ("checksum: the object's %s %s", cfg.checksum.algo, sum.why);
    r = -1;
  }
  else if (sum.state == SUM_RUNNING && end > sum.frontier) {
    uint64_t start = max64 (offset, sum.frontier);

    (void) intervals_note (&sum.read, start, end, true);
    if (!sum.hashing && offset <= sum.frontier)
      r = hash_on_locked (next, buf, offset, end);
    /* Bytes that could not be spilled are read again at the end and
     * compared with a digest of these.
     */
    else if (!spill_locked (buf, offset, count))
      if (!served_keep ((const char *) buf + (start - offset), start, end))
        (void) intervals_note (&sum.unverifiable, start, end, true);
  }
  /* The read that completed the object, if nobody hashes: what is left
   * (a catch-up that failed before is tried again).
   */
  if (r == 0 && sum.state == SUM_RUNNING && !sum.hashing &&
      all_read_locked ())
    r = hash_on_locked (next, NULL, 0, 0);
  pthread_mutex_unlock (&sum.lock);
  if (r == -1)
    errno = EIO;
  return r;
}

/* A read: the link below's bytes, then accounted for. */
int
checksum_link (const struct read_link *self, const struct read_op *op)
{
  if (read_next (self, op) == -1)
    return -1;
  return checksum_read (self->next, op->buf, op->count, op->offset);
}

bool
checksum_on (void)
{
  return cfg.checksum.algo != NULL;
}

/* Once the probe has found the object: the digest starts; an empty
 * object is whole already, and a mismatch stops nbdkit before it
 * serves.
 */
int
checksum_ready (void)
{
  if (cfg.checksum.algo == NULL)
    return 0;
  sum.ctx = EVP_MD_CTX_new ();
  sum.piece = malloc (PIECE);
  if (sum.ctx == NULL || sum.piece == NULL ||
      EVP_DigestInit_ex (sum.ctx, EVP_get_digestbyname (cfg.checksum.algo),
                         NULL) != 1) {
    nbdkit_error ("checksum: %s: could not set up the digest",
                  cfg.checksum.algo);
    return -1;
  }
  if (object.size == 0)
    verdict_locked ();
  return sum.state == SUM_BAD ? -1 : 0;
}

void
checksum_unload (void)
{
  if (cfg.checksum.algo != NULL && sum.state == SUM_RUNNING && sum.ctx != NULL)
    nbdkit_debug ("checksum: not checked: %" PRIu64 " of %" PRIi64
                  " bytes read in order", sum.frontier, object.size);
  if (sum.fd >= 0)
    close (sum.fd);
  sum.fd = -1;
  EVP_MD_CTX_free (sum.ctx);
  sum.ctx = NULL;
  served_free ();
  free (sum.piece);
  sum.piece = NULL;
}
