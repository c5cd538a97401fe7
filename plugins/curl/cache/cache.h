/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The cache (cache-dir=): the policy of what is kept across runs.
 * cache.c is the link of the read chain that serves blocks from disk
 * and keeps what the links below fetched, under the object's key.
 * fill.c fetches the rest in the background (cache-fill=true).  The
 * disk itself is store/'s.  This folder uses reads, below it, and
 * everything below them.
 */

#ifndef CACHE_H
#define CACHE_H

#include "read/read.h"

/* cache.c: the link of cache-dir=, over store/. */
extern bool cache_on (void);
extern int cache_config (void);
extern void cache_ready (void);
extern void cache_start (const struct read_link *below);
extern int cache_link (const struct read_link *self,
                       const struct read_op *op);
extern void cache_unload (void);

/* fill.c: cache-fill=true. */
extern void fill_start (const struct read_link *below);
extern void fill_stop (void);
extern void fill_note_read (void);

#endif /* CACHE_H */
