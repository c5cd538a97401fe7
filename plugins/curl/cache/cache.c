/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The cache link (cache-dir=): blocks kept on disk by store/, served
 * without a request.  A block is kept under the object's identity, the
 * key: url= (less its credentials, and for a presigned URL the query
 * keys that only sign it), the size and a strong ETag.  With checksum=,
 * the digest too; once a whole read proved it, the blocks are shared by
 * every URL of that digest (make_key).  Without either, nothing tells
 * this object from the next one at that URL, so nothing is kept.  The
 * probe found the ETag, and pinning holds every read to it, so the key
 * costs no request and a replaced object gets a new one.  The first
 * bytes' digest catches an ETag of mtime and size that did not change.
 *
 * A read takes what blocks it can from disk.  For the rest it claims each
 * whole block (store/claim.c), or waits for one that another process
 * claimed.  Then it asks the links below once per run of missing blocks.
 * What they return is written as whole blocks, or as pieces of one
 * (store/part.c).  A failure of the cache never fails a read: the read
 * goes to the server.
 */

#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <nbdkit-plugin.h>

#include "cache/cache.h"

#define MAX_PIECES 40           /* blocks a read of 32 MiB touches, and more */
/* A read waits for blocks that others claimed this long at most, all of
 * them together.
 */
#define WAIT_NS (INT64_C (5) * 1000000000)

struct piece {
  uint64_t block;
  uint32_t off, len;            /* within the block */
  char *buf;
  uint32_t bad;                 /* chunks to fetch (store_chunks), 0: a hit */
  bool absent;                  /* no file: all of it fetched */
  bool claimed;
};

static bool on;
static uint64_t fetched;        /* bytes the links below returned */
/* Blocks whose claim a read waited for in vain: not waited for again
 * (a claim from a host whose process is gone looks alive for minutes).
 */
static pthread_mutex_t gave_up_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char *gave_up;

bool
cache_on (void)
{
  return on;
}

/* cache-dir= checked and opened before anything runs. */
int
cache_config (void)
{
  if (cfg.cache_dir == NULL) {
    if (cfg.cache_size > 0 || cfg.cache_fill) {
      nbdkit_error ("cache-size= and cache-fill= need cache-dir=");
      return -1;
    }
    return 0;
  }
  return store_check_dir (cfg.cache_dir);
}

/* url's query, if any, replaced by its SHA-256 (for the key file), in
 * size bytes.
 */
static void
query_digest (char *url, size_t size)
{
  char *q = strchr (url, '?');
  unsigned char d[32];
  unsigned i, n = 0;

  if (q == NULL)
    return;
  if ((size_t) (q - url) + 2 * sizeof d + 9 > size) {
    q[1] = '\0';
    return;
  }
  EVP_Digest (q + 1, strlen (q + 1), d, &n, EVP_sha256 (), NULL);
  strcpy (q, "?sha256=");
  for (i = 0; i < n; i++)
    snprintf (q + 8 + 2 * i, 3, "%02x", d[i]);
}

static bool
strong_etag (void)
{
  return object.etag[0] != '\0' && strncmp (object.etag, "W/", 2) != 0;
}

/* The object's key into buf, and into shown the same with the URL's
 * query (which may hold a token) as a digest: false (and why) if it has
 * none.  With checksum=, the key is the digest, the size and the URL:
 * blocks are this URL's until the digest proves them, and then shared,
 * under the key in shared, by every URL of that digest (store_promote).
 * Not for md5, whose collisions can be made: another URL's bytes of the
 * same md5 would be served.
 */
static bool
make_key (char *buf, char *shown, char *shared, size_t size,
          const char **why)
{
  char hex[2 * sizeof cfg.checksum.digest + 1];
  CLEANUP_FREE char *given = NULL;
  char url[4096], version[ETAG_SIZE + 16];
  const char *u = cfg.url;
  unsigned serial = 0;

  shared[0] = '\0';
  if (cfg.checksum.algo != NULL) {
    digests_hex (cfg.checksum.digest, cfg.checksum.len, hex);
    if (strcmp (cfg.checksum.algo, "md5") != 0)
      snprintf (shared, size, "checksum %s:%s\nsize %" PRIi64 "\n",
                cfg.checksum.algo, hex, object.size);
  }
  else if (!strong_etag ()) {
    *why = "the object has neither a strong ETag nor checksum=";
    return false;
  }
  if (!cfg.pin_object && cfg.checksum.algo == NULL) {
    *why = "pin-object=false, so reads are not held to the ETag";
    return false;
  }
  if (cfg.url_script != NULL && script_url (&given, &serial) == 0)
    u = given;
  if (u == NULL) {
    *why = "url-script gave no URL";
    return false;
  }
  if (!presigned_object_url (u, url, sizeof url)) {
    *why = "the URL is too long to key";
    return false;
  }
  if (cfg.checksum.algo != NULL) {
    /* The URL's own blocks are of one version of what it serves: its
     * strong ETag's, else of this run alone (a key no run will have
     * again; store_close deletes them).
     */
    if (strong_etag ())
      snprintf (version, sizeof version, "etag %s", object.etag);
    else {
      snprintf (version, sizeof version, "run %d.%" PRIi64, (int) getpid (),
                clock_ns ());
      store.ephemeral = true;
    }
    snprintf (buf, size, "checksum %s:%s\nsize %" PRIi64 "\nurl %s\n%s\n",
              cfg.checksum.algo, hex, object.size, url, version);
    query_digest (url, sizeof url);
    snprintf (shown, size, "checksum %s:%s\nsize %" PRIi64 "\nurl %s\n%s\n",
              cfg.checksum.algo, hex, object.size, url, version);
    return true;
  }
  snprintf (buf, size, "url %s\nsize %" PRIi64 "\netag %s\n", url,
            object.size, object.etag);
  query_digest (url, sizeof url);
  snprintf (shown, size, "url %s\nsize %" PRIi64 "\netag %s\n", url,
            object.size, object.etag);
  return true;
}

/* Whether etag is made of the file's size and mtime, as nginx's
 * ("mtime-size", in hex) and Apache's ("size-mtime", or with the inode
 * first) are: a file replaced by another of the same size and mtime (cp
 * -p, rsync -t, a build with a fixed SOURCE_DATE_EPOCH) keeps it.
 */
static bool
etag_of_metadata (const char *etag, int64_t size)
{
  char hex[32];
  const char *p = etag;
  size_t n;

  snprintf (hex, sizeof hex, "%" PRIx64, (uint64_t) size);
  n = strlen (hex);
  if (*p == '"')
    p++;
  for (;;) {
    if (strncmp (p, hex, n) == 0 && (p[n] == '-' || p[n] == '"'))
      return true;
    p = strchr (p, '-');
    if (p == NULL)
      return false;
    p++;
  }
}

/* The probe's first bytes, whose digest the object's folder keeps: an
 * ETag of mtime and size stays the same for another file of that size
 * and mtime, but its first bytes seldom do.  If they differ, what is
 * kept is another object's, and goes (store_first).  It costs no
 * request: the probe asked for them anyway.
 */
static void
check_first_bytes (void)
{
  char seen[FIRST_BYTES];
  uint32_t n = min64 (FIRST_BYTES, object.size);
  unsigned char d[32];
  unsigned len = 0;

  if (!object_read_first (seen, n, 0))
    return;
  EVP_Digest (seen, n, d, &len, EVP_sha256 (), NULL);
  store_first (d, len);
}

/* Once the probe knows the object: its folder, or the cache off. */
void
cache_ready (void)
{
  char key[8192], shown[8192], shared[8192];
  const char *why = NULL;

  if (cfg.cache_dir == NULL || object.size <= 0)
    return;
  if (!make_key (key, shown, shared, sizeof key, &why)) {
    nbdkit_debug ("cache: %s: nothing is kept across runs", why);
    store_close ();
    return;
  }
  if (!store_open (key, shown, shared[0] ? shared : NULL, object.size,
                   cfg.cache_size))
    return;
  gave_up = calloc (store.nblocks / 8 + 1, 1);
  on = true;
  nbdkit_debug ("cache: %s/%s: keyed by %s%s%s", cfg.cache_dir,
                store.hash_hex, cfg.checksum.algo != NULL
                ? "checksum=, the size and url="
                : "url=, the size and the ETag",
                shared[0] ? "; once proven, shared in " : "",
                shared[0] ? store.shared_hex : "");
  check_first_bytes ();
  if (cfg.checksum.algo == NULL && etag_of_metadata (object.etag,
                                                     object.size))
    nbdkit_debug ("cache: the ETag %s is the file's size and mtime: another "
                  "file of the same size and mtime would look the same "
                  "object (only its first bytes are compared); "
                  "checksum= keys by content", object.etag);
}

/* Once nbdkit runs: eviction, and the fill through the links below. */
void
cache_start (const struct read_link *below)
{
  if (!on)
    return;
  store_write_start ();
  store_evict_start ();
  fill_start (below);
}

static bool
given_up (uint64_t block, bool set)
{
  bool was;

  LOCK_FOR_SCOPE (&gave_up_lock);
  if (gave_up == NULL)
    return set;
  was = gave_up[block / 8] & (1 << (block % 8));
  if (set)
    gave_up[block / 8] |= 1 << (block % 8);
  return was;
}

/* Wait for a block another claimed, until end, then read the piece from
 * it: true if it came.  False when the claim went without the block, or
 * at end: the caller fetches it.  The wait sleeps, from 1 ms doubling to
 * 16 ms: a block of 1 MiB takes longer than that to come.
 */
static bool
await (struct piece *p, int64_t end)
{
  long sleep_ns = 1000000;
  struct timespec ts;

  if (given_up (p->block, false))
    return false;
  while (clock_ns () < end) {
    ts.tv_sec = 0;
    ts.tv_nsec = sleep_ns;
    nanosleep (&ts, NULL);
    if (sleep_ns < 16000000)
      sleep_ns *= 2;
    if (store_get (p->block, p->buf, p->off, p->len, &p->bad) > 0) {
      __atomic_add_fetch (&store.counts.waited, 1, __ATOMIC_RELAXED);
      return true;
    }
    if (!store_claimed (p->block))
      return store_get (p->block, p->buf, p->off, p->len, &p->bad) > 0;
  }
  if (!given_up (p->block, true))
    nbdkit_debug ("cache: block %" PRIu64 " was claimed but did not come: "
                  "fetched here, and not waited for again", p->block);
  p->bad = store_chunks (p->off, p->len);
  return false;
}

/* What is on disk, and what another process is fetching.  A block that
 * is not there is claimed, if the read covers it whole.  A damaged one
 * keeps the chunks that passed: only the others are fetched.
 */
static void
from_disk (struct piece *p, unsigned n)
{
  unsigned i;
  enum store_claim c;
  int64_t end = clock_ns () + WAIT_NS;

  for (i = 0; i < n; i++)
    p[i].absent = store_get (p[i].block, p[i].buf, p[i].off, p[i].len,
                             &p[i].bad) == 0;
  for (i = 0; i < n; i++) {
    if (!p[i].absent)
      continue;
    if (p[i].len == store_block_len (p[i].block)) {
      c = store_may_write () ? store_claim (p[i].block) : CLAIM_NONE;
      p[i].claimed = c == CLAIM_MINE;
      /* Written by another process since the first look? */
      if (c == CLAIM_MINE)
        store_get (p[i].block, p[i].buf, p[i].off, p[i].len, &p[i].bad);
      else if (c == CLAIM_OTHERS)
        await (&p[i], end);
    }
    else if (store_claimed (p[i].block))
      await (&p[i], end);
  }
}

/* The bytes of p[i]'s chunk c that the read covers, as a read. */
static struct read_op
chunk_op (const struct read_op *op, const struct piece *p, unsigned c)
{
  struct read_op r = *op;
  uint32_t from = max64 (p->off, c * STORE_CHUNK);
  uint32_t to = min64 (p->off + p->len, (c + 1) * STORE_CHUNK);

  r.buf = p->buf + (from - p->off);
  r.offset = p->block * STORE_BLOCK + from;
  r.count = to - from;
  return r;
}

/* The chunks to fetch from the links below, one read per run of them. */
static int
from_below (const struct read_link *self, const struct read_op *op,
            struct piece *p, unsigned n)
{
  struct read_op run = { .count = 0 }, next;
  unsigned i, c;

  for (i = 0; i <= n; i++) {
    for (c = 0; c < STORE_CHUNKS; c++) {
      if (i < n && !(p[i].bad & (UINT32_C (1) << c)))
        continue;
      if (i < n)
        next = chunk_op (op, &p[i], c);
      if (i < n && run.count > 0 && run.offset + run.count == next.offset) {
        run.count += next.count;
        continue;
      }
      if (run.count > 0) {
        if (read_next (self, &run) == -1)
          return -1;
        __atomic_add_fetch (&fetched, run.count, __ATOMIC_RELAXED);
      }
      run.count = 0;
      if (i == n)
        break;
      run = next;
    }
  }
  return 0;
}

/* What came from below, written: a whole block (repaired, if it was
 * damaged), or a piece of one that was not there.
 */
static void
keep (struct piece *p, unsigned n)
{
  unsigned i;

  for (i = 0; i < n; i++) {
    if (p[i].bad == 0)
      continue;
    if (p[i].len == store_block_len (p[i].block)) {
      store_put (p[i].block, p[i].buf);   /* which lets its claim go */
      p[i].claimed = false;
      store_part_drop (p[i].block);
    }
    else if (p[i].absent)
      store_part (p[i].block, p[i].off, p[i].buf, p[i].len);
  }
}

int
cache_link (const struct read_link *self, const struct read_op *op)
{
  struct piece p[MAX_PIECES];
  uint64_t pos = op->offset, end = op->offset + op->count;
  unsigned n = 0, i;
  int r;

  fill_note_read ();
  if (op->count == 0 || end > store.size)
    return read_next (self, op);
  for (; pos < end && n < MAX_PIECES; n++) {
    p[n] = (struct piece) {
      .block = pos / STORE_BLOCK, .off = pos % STORE_BLOCK,
      .buf = op->buf + (pos - op->offset),
    };
    p[n].len = min64 (end - pos, STORE_BLOCK - p[n].off);
    pos += p[n].len;
  }
  if (pos < end)
    return read_next (self, op);
  from_disk (p, n);
  r = from_below (self, op, p, n);
  if (r == 0)
    keep (p, n);
  for (i = 0; i < n; i++)
    if (p[i].claimed)
      store_unclaim (p[i].block);
  return r;
}

void
cache_unload (void)
{
  fill_stop ();
  store_write_stop ();
  store_evict_stop ();
  store_part_unload ();
  if (on)
    nbdkit_debug ("cache: %" PRIu64 " KiB served from disk, %" PRIu64
                  " KiB fetched, %" PRIu64 " blocks written, %" PRIu64
                  " refused (failed a check), %" PRIu64 " fetched by "
                  "another process, %" PRIu64 " evicted",
                  store.counts.hit_bytes >> 10, fetched >> 10,
                  store.counts.written, store.counts.refused,
                  store.counts.waited, store.counts.evicted);
  store_close ();
  free (gave_up);
  gave_up = NULL;
  on = false;
}
