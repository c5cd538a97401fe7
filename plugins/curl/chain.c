/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The read chain, built once when the probe is done.  Each NBD read
 * goes down it, and each link calls only the one below:
 *
 *     checksum      when checksum= is given     read/checksum.c
 *     cache         when cache-dir= keeps it    cache/cache.c
 *     read-ahead    when on, for an object      read/readahead.c
 *     split         when there are mirrors      read/split.c
 *     first bytes   always                      here
 *     queue         always: batch, request      read/pool.c
 *
 * To turn a policy off or move it, change its line in chain_build.
 * Each link can be tested against a fake one below it, as
 * tests/unit/test-chain.c does for checksum.
 */

#include <config.h>

#include <stdio.h>

#include <nbdkit-plugin.h>

#include "chain.h"

#define MAX_LINKS 8

static struct read_link links[MAX_LINKS];
static const struct read_link *top;
static const struct read_link *below_cache;
static const struct read_link *for_fill;   /* below read-ahead */

/* The object's first bytes, which the probe kept: no round trip. */
static int
first_bytes_link (const struct read_link *self, const struct read_op *op)
{
  if (object_read_first (op->buf, op->count, op->offset))
    return 0;
  return read_next (self, op);
}

/* Links from the top down, each with whether it is on. */
void
chain_build (void)
{
  const struct read_link all[] = {
    { .name = "checksum", .pread = checksum_on () ? checksum_link : NULL },
    { .name = "cache", .pread = cache_on () ? cache_link : NULL },
    { .name = "read-ahead", .pread = readahead_on () ? readahead_link : NULL },
    { .name = "split", .pread = sources_many () ? split_link : NULL },
    { .name = "first bytes", .pread = first_bytes_link },
    { .name = "queue", .pread = pool_link },
  };
  const struct read_link *below = NULL, *l;
  unsigned i, n = 0;
  char names[128];
  size_t len = 0;

  _Static_assert (sizeof all / sizeof all[0] <= MAX_LINKS, "MAX_LINKS");
  for (i = sizeof all / sizeof all[0]; i-- > 0; ) {
    if (all[i].pread == NULL)
      continue;
    links[n] = all[i];
    links[n].next = below;
    if (all[i].pread == cache_link)
      below_cache = below;
    if (all[i].pread == readahead_link)
      for_fill = below;
    below = &links[n++];
  }
  top = below;
  for (l = top; l != NULL && len < sizeof names; l = l->next)
    len += snprintf (names + len, sizeof names - len, "%s%s",
                     l == top ? "" : ", ", l->name);
  nbdkit_debug ("read chain: %s", names);
}

/* Once nbdkit runs: the cache's fill reads through the links below
 * read-ahead, since it paces its own reads, which read-ahead would
 * stream ahead of.
 */
void
chain_start (void)
{
  cache_start (for_fill != NULL ? for_fill : below_cache);
}

int
chain_pread (struct ra_client *cl, void *buf, uint32_t count,
             uint64_t offset)
{
  const struct read_op op = {
    .client = cl, .buf = buf, .count = count, .offset = offset,
  };

  return top->pread (top, &op);
}
