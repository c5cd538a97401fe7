/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The cache link (cache-dir=): blocks kept on disk by store/, served
 * without a request.  A block is kept under the object's identity, the
 * key.  With checksum= the key is the digest and the size, so any URL of
 * those bytes shares it.  Else it is url= (less the query keys that only
 * sign a presigned URL), the size and a strong ETag.  Without either,
 * nothing tells this object from the next one at that URL, so nothing is
 * kept.  The probe found the ETag, and pinning holds every read to it, so
 * the key costs no request and a replaced object gets a new one.
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

#include <openssl/evp.h>

#include <nbdkit-plugin.h>

#include "cache/cache.h"

#define MAX_PIECES 40           /* blocks a read of 32 MiB touches, and more */
#define WAIT_NS (INT64_C (5) * 1000000000)  /* for a block claimed elsewhere */

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

/* The object's key into buf, and into shown the same with the URL's
 * query (which may hold a token) as a digest: false (and why) if it has
 * none.
 */
static bool
make_key (char *buf, char *shown, size_t size, const char **why)
{
  char hex[2 * sizeof cfg.checksum.digest + 1];
  CLEANUP_FREE char *given = NULL;
  char url[4096];
  const char *u = cfg.url;
  unsigned serial = 0;

  if (cfg.checksum.algo != NULL) {
    digests_hex (cfg.checksum.digest, cfg.checksum.len, hex);
    snprintf (buf, size, "checksum %s:%s\nsize %" PRIi64 "\n",
              cfg.checksum.algo, hex, object.size);
    snprintf (shown, size, "%s", buf);
    return true;
  }
  if (object.etag[0] == '\0' || strncmp (object.etag, "W/", 2) == 0) {
    *why = "the object has neither a strong ETag nor checksum=";
    return false;
  }
  if (!cfg.pin_object) {
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
  snprintf (buf, size, "url %s\nsize %" PRIi64 "\netag %s\n", url,
            object.size, object.etag);
  query_digest (url, sizeof url);
  snprintf (shown, size, "url %s\nsize %" PRIi64 "\netag %s\n", url,
            object.size, object.etag);
  return true;
}

/* Once the probe knows the object: its folder, or the cache off. */
void
cache_ready (void)
{
  char key[8192], shown[8192];
  const char *why = NULL;

  if (cfg.cache_dir == NULL || object.size <= 0)
    return;
  if (!make_key (key, shown, sizeof key, &why)) {
    nbdkit_debug ("cache: %s: nothing is kept across runs", why);
    store_close ();
    return;
  }
  if (!store_open (key, shown, object.size, cfg.cache_size))
    return;
  on = true;
  nbdkit_debug ("cache: %s/%s: keyed by %s", cfg.cache_dir, store.hash_hex,
                cfg.checksum.algo != NULL ? "checksum= and the size"
                : "url=, the size and the ETag");
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

/* Wait for a block another claimed, then read the piece from it: true
 * if it came.  False when the claim went without the block, or after
 * WAIT_NS: the caller fetches it.  The wait sleeps, from 1 ms doubling to
 * 16 ms: a block of 1 MiB takes longer than that to come.
 */
static bool
await (struct piece *p)
{
  int64_t end = clock_ns () + WAIT_NS;
  long sleep_ns = 1000000;
  struct timespec ts;

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
  nbdkit_debug ("cache: block %" PRIu64 " was claimed but did not come in "
                "%d s: fetched here", p->block, (int) (WAIT_NS / 1000000000));
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
        await (&p[i]);
    }
    else if (store_claimed (p[i].block))
      await (&p[i]);
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
  on = false;
}
