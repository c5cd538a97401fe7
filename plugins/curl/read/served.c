/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * checksum='s fallback (checksum.c).  Some bytes that a read returned past
 * the digest's frontier could not go to the spill file.  They are read
 * again at the end, and the digest is of the bytes read then.  Those prove
 * what the client got only if they are the same bytes, and a pin does not
 * say so.  nginx's ETag is the file's mtime and size, which a cp -p of
 * another version keeps.  A weak ETag promises no identical bytes.  So each
 * such read's range is kept with the SHA-256 of the bytes it returned.
 * When the frontier reaches the range, the bytes hashed for it are digested
 * too, and compared.  That holds however they come: read again, in an
 * in-order read, or from the spill file.  A range that was not compared
 * whole is "missed", and the verdict cannot be a match then.
 *
 * No lock of its own: served_keep and served_reach run under checksum.c's
 * lock.  served_hash and the rest run only in the one read that hashes.
 */

#include <config.h>

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include <nbdkit-plugin.h>

#include "read/served.h"

#define SERVED_MAX (1 << 18)            /* ranges kept: 48 bytes each */
#define MD_LEN 32                       /* SHA-256 */

struct served {
  uint64_t start, end;
  unsigned char md[MD_LEN];
};

/* One the frontier reached: [start, fed) is in ctx, which is made only
 * when its bytes come in two pieces or more.
 */
struct check {
  struct served s;
  uint64_t fed;
  EVP_MD_CTX *ctx;
};

static struct served *heap;     /* not reached yet: a min-heap on start */
static unsigned nheap, heap_alloc;
static unsigned kept;           /* ranges kept in all (under the lock) */
static struct check *open_;     /* reached, not compared yet */
static unsigned nopen, open_alloc;
static struct served differ;    /* the first that differs (end 0: none) */
static bool missed;

/* Room for one more element of size in *a, which holds n of *alloc. */
static bool
grow (void **a, unsigned n, unsigned *alloc, size_t size)
{
  unsigned want = *alloc ? 2 * *alloc : 64;
  void *p;

  if (n < *alloc)
    return true;
  p = realloc (*a, want * size);
  if (p == NULL)
    return false;
  *a = p;
  *alloc = want;
  return true;
}

/* buf, the client's bytes [start, end): their digest kept.  False past
 * SERVED_MAX ranges kept in all (or out of memory): nothing will verify
 * them.  Counted apart from the heap and the open list, which the
 * hasher empties without the lock.
 */
bool
served_keep (const char *buf, uint64_t start, uint64_t end)
{
  struct served v = { .start = start, .end = end };
  void *p = heap;
  unsigned i;

  if (kept >= SERVED_MAX ||
      !grow (&p, nheap, &heap_alloc, sizeof heap[0]))
    return false;
  heap = p;
  if (EVP_Digest (buf, end - start, v.md, NULL, EVP_sha256 (), NULL) != 1)
    return false;
  kept++;
  for (i = nheap++; i > 0 && heap[(i - 1) / 2].start > start;
       i = (i - 1) / 2)
    heap[i] = heap[(i - 1) / 2];
  heap[i] = v;
  return true;
}

/* The frontier is at to: the ranges that start before it are compared
 * as their bytes are hashed.
 */
void
served_reach (uint64_t to)
{
  while (nheap > 0 && heap[0].start < to) {
    struct served last = heap[--nheap];
    void *p = open_;
    unsigned i = 0, c;

    if (!grow (&p, nopen, &open_alloc, sizeof open_[0]))
      missed = true;
    else {
      open_ = p;
      open_[nopen++] = (struct check) { .s = heap[0], .fed = heap[0].start };
    }
    for (c = 1; c < nheap; i = c, c = 2 * c + 1) {
      if (c + 1 < nheap && heap[c + 1].start < heap[c].start)
        c++;
      if (last.start <= heap[c].start)
        break;
      heap[i] = heap[c];
    }
    heap[i] = last;
  }
}

/* A digest for a range whose bytes come in pieces: false if none. */
static bool
open_ctx (struct check *c)
{
  c->ctx = EVP_MD_CTX_new ();
  if (c->ctx != NULL && EVP_DigestInit_ex (c->ctx, EVP_sha256 (), NULL) != 1) {
    EVP_MD_CTX_free (c->ctx);
    c->ctx = NULL;
  }
  return c->ctx != NULL;
}

/* data, the object's bytes [pos, pos + len) as the frontier hashes
 * them: compared with the ranges reached that they cover.  Costs
 * nothing when none was kept.
 */
void
served_hash (const char *data, size_t len, uint64_t pos)
{
  unsigned i = 0;

  while (i < nopen) {
    struct check *c = &open_[i];
    uint64_t from = max64 (c->s.start, pos), to = min64 (c->s.end, pos + len);
    unsigned char md[EVP_MAX_MD_SIZE];
    bool ok = c->fed == from;   /* else bytes before passed unseen */

    if (from >= to) {           /* further on */
      i++;
      continue;
    }
    if (ok && c->ctx == NULL && to < c->s.end)
      ok = open_ctx (c);
    if (ok && c->ctx == NULL)   /* whole in this piece */
      ok = EVP_Digest (data + (from - pos), to - from, md, NULL,
                       EVP_sha256 (), NULL) == 1;
    else if (ok) {
      EVP_DigestUpdate (c->ctx, data + (from - pos), to - from);
      c->fed = to;
      if (to < c->s.end) {
        i++;
        continue;
      }
      ok = EVP_DigestFinal_ex (c->ctx, md, NULL) == 1;
    }
    if (!ok)
      missed = true;
    else if (memcmp (md, c->s.md, MD_LEN) != 0 && differ.end == 0)
      differ = c->s;
    EVP_MD_CTX_free (c->ctx);
    *c = open_[--nopen];
  }
}

/* The first range whose bytes hashed differ from those served: false
 * if none.
 */
bool
served_differ (uint64_t *start, uint64_t *end)
{
  *start = differ.start;
  *end = differ.end;
  return differ.end != 0;
}

/* Once the frontier is at the object's end: whether every range kept
 * was compared whole.
 */
bool
served_all_compared (void)
{
  return !missed && nheap == 0 && nopen == 0;
}

unsigned
served_max (void)
{
  return SERVED_MAX;
}

void
served_free (void)
{
  while (nopen > 0)
    EVP_MD_CTX_free (open_[--nopen].ctx);
  free (open_);
  open_ = NULL;
  open_alloc = 0;
  free (heap);
  heap = NULL;
  nheap = heap_alloc = kept = 0;
}
