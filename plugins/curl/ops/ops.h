/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The NBD operations besides reads.  probe.c finds what the object is,
 * once, before nbdkit serves.  mirrors.c proves each mirror the same
 * object, in threads of its own.  writing.c makes NBD writes, each one
 * PUT, checked.  This folder uses reads (for the pool's connections and
 * the head start) and everything below them.
 */

#ifndef OPS_H
#define OPS_H

#include "read/read.h"

/* probe.c */
extern int probe_object (void);
extern void probe_head_start_late (void);

/* mirrors.c */
extern int mirrors_config (void);
extern int mirrors_start (void);
extern void mirrors_unload (void);
extern void mirrors_free (void);

/* writing.c */
extern int writing_pwrite (const void *buf, uint32_t count, uint64_t offset);

#endif /* OPS_H */
