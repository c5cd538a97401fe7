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

#include <nbdkit-plugin.h>

#include "cache/cache.h"

#define MAX_PIECES 40           /* blocks a read of 32 MiB touches, and more */

struct piece {
  uint64_t block;
  uint32_t off, len;            /* within the block */
  char *buf;
  bool hit, claimed;
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

/* The object's key into buf: false (and why) if it has none. */
static bool
make_key (char *buf, size_t size, const char **why)
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
  if (u == NULL || !presigned_object_url (u, url, sizeof url)) {
    *why = "the URL is too long to key";
    return false;
  }
  snprintf (buf, size, "url %s\nsize %" PRIi64 "\netag %s\n", url,
            object.size, object.etag);
  return true;
}

/* Once the probe knows the object: its folder, or the cache off. */
void
cache_ready (void)
{
  char key[8192];
  const char *why = NULL;

  if (cfg.cache_dir == NULL || object.size <= 0)
    return;
  if (!make_key (key, sizeof key, &why)) {
    nbdkit_debug ("cache: %s: nothing is kept across runs", why);
    store_close ();
    return;
  }
  if (!store_open (key, object.size, cfg.cache_size))
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
  store_evict_start ();
  fill_start (below);
}

/* Whole blocks from disk, or from a process that claimed them. */
static void
from_disk (struct piece *p, unsigned n)
{
  unsigned i;
  enum store_claim c;
  int got[MAX_PIECES];

  for (i = 0; i < n; i++) {
    got[i] = store_get (p[i].block, p[i].buf, p[i].off, p[i].len);
    p[i].hit = got[i] > 0;
  }
  for (i = 0; i < n; i++) {
    if (p[i].hit)
      continue;
    if (p[i].len == store_block_len (p[i].block)) {
      c = store_claim (p[i].block);
      p[i].claimed = c == CLAIM_MINE;
      /* Written by another process since the first look? */
      if (c == CLAIM_MINE && got[i] == 0)
        p[i].hit = store_get (p[i].block, p[i].buf, p[i].off, p[i].len) > 0;
      else if (c == CLAIM_OTHERS)
        p[i].hit = store_await (p[i].block, p[i].buf, p[i].off, p[i].len);
    }
    else if (store_claimed (p[i].block))
      p[i].hit = store_await (p[i].block, p[i].buf, p[i].off, p[i].len);
  }
}

/* The rest from the links below, one read per run of pieces. */
static int
from_below (const struct read_link *self, const struct read_op *op,
            struct piece *p, unsigned n)
{
  unsigned i = 0, j;
  struct read_op run;

  while (i < n) {
    if (p[i].hit) {
      i++;
      continue;
    }
    for (j = i; j + 1 < n && !p[j + 1].hit; j++)
      ;
    run = *op;
    run.buf = p[i].buf;
    run.offset = p[i].block * STORE_BLOCK + p[i].off;
    run.count = (p[j].buf + p[j].len) - p[i].buf;
    if (read_next (self, &run) == -1)
      return -1;
    __atomic_add_fetch (&fetched, run.count, __ATOMIC_RELAXED);
    i = j + 1;
  }
  return 0;
}

/* What came from below, written. */
static void
keep (struct piece *p, unsigned n)
{
  unsigned i;

  for (i = 0; i < n; i++) {
    if (p[i].hit)
      continue;
    if (p[i].len == store_block_len (p[i].block)) {
      store_put (p[i].block, p[i].buf);
      store_part_drop (p[i].block);
    }
    else
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
