/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * checksum.c's fallback (served.c): digests of bytes served that the
 * spill file could not keep, compared when they are hashed again.
 */

#ifndef SERVED_H
#define SERVED_H

#include "read/read.h"

extern bool served_keep (const char *buf, uint64_t start, uint64_t end);
extern void served_reach (uint64_t to);
extern void served_hash (const char *data, size_t len, uint64_t pos);
extern bool served_differ (uint64_t *start, uint64_t *end);
extern bool served_all_compared (void);
extern unsigned served_max (void);
extern void served_free (void);

#endif /* SERVED_H */
