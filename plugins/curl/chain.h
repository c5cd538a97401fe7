/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The read chain (chain.c), which curl.c's reads go down.
 */

#ifndef CHAIN_H
#define CHAIN_H

#include "ops/ops.h"
#include "cache/cache.h"

extern void chain_build (void);
extern void chain_start (void);
extern int chain_pread (struct ra_client *cl, void *buf, uint32_t count,
                        uint64_t offset);

#endif /* CHAIN_H */
