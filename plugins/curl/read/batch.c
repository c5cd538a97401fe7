/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * One batch of reads, gathered by pool.c, asked as few requests as the
 * server allows.  Reads that touch or overlap are merged into one range, a
 * span.  Separate spans go in one multi-range request ("Range:
 * bytes=A-B,C-D"), up to MAX_SPANS of them, answered as
 * multipart/byteranges.  Some servers do not answer a multi-range request
 * with exactly the parts asked for.  S3 answers 200 with the whole object,
 * and some servers merge ranges.  Such a server is asked one range per
 * request from then on (object_no_multirange).
 */

#include <config.h>

#include <stdlib.h>

#include "read/batch.h"

static int
compare_offsets (const void *a, const void *b)
{
  const struct read_req *x = * (struct read_req *const *) a;
  const struct read_req *y = * (struct read_req *const *) b;

  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Sort the batch and merge reads that touch or overlap into spans. */
static unsigned
make_spans (struct read_req **batch, unsigned n, struct span *spans)
{
  unsigned i, ns = 0;

  qsort (batch, n, sizeof batch[0], compare_offsets);
  for (i = 0; i < n; i++) {
    struct read_req *r = batch[i];
    uint64_t last = r->offset + r->count - 1;

    if (ns > 0 && r->offset <= spans[ns - 1].last + 1) {
      if (last > spans[ns - 1].last)
        spans[ns - 1].last = last;
      spans[ns - 1].nreqs++;
      continue;
    }
    spans[ns].first = r->offset;
    spans[ns].last = last;
    spans[ns].reqs = &batch[i];
    spans[ns].nreqs = 1;
    ns++;
  }
  return ns;
}

static void
fail_span (const struct span *s)
{
  unsigned i;

  for (i = 0; i < s->nreqs; i++)
    s->reqs[i]->failed = true;
}

/* Run one batch of n reads (at most MAX_BATCH) on handle c: one
 * request when possible, else one per span.  The reads of a span that
 * failed are marked failed.
 */
void
batch_run (struct conn *c, struct read_req **batch, unsigned n)
{
  struct span spans[MAX_BATCH];
  unsigned ns, i, j, k;
  bool multi;
  enum verdict v;

  ns = make_spans (batch, n, spans);
  multi = object_multirange ();

  /* Groups of at most MAX_SPANS ranges per request. */
  for (i = 0; i < ns; i += k) {
    k = ns - i < MAX_SPANS ? ns - i : MAX_SPANS;
    if (k == 1 || !multi) {
      k = 1;
      if (verdict_failed (request_get_spans (c, &spans[i], 1)))
        fail_span (&spans[i]);
      continue;
    }
    v = request_get_spans (c, &spans[i], k);
    if (!verdict_failed (v))
      continue;
    if (v != VERDICT_NOT_THE_PARTS_ASKED_FOR) {
      for (j = i; j < i + k; j++)
        fail_span (&spans[j]);
      continue;
    }
    /* This server does not answer several ranges with their parts. */
    object_no_multirange ();
    multi = false;
    for (j = i; j < i + k; j++)
      if (verdict_failed (request_get_spans (c, &spans[j], 1)))
        fail_span (&spans[j]);
  }
}
