/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The queue's batches, which pool.c gathers and batch.c asks for.  struct
 * read_req is in rules/ranges.h.
 */

#ifndef BATCH_H
#define BATCH_H

#include "read/read.h"

#define MAX_BATCH 64            /* reads in one batch */
extern void batch_run (struct conn *c, struct read_req **batch,
                       unsigned n);

#endif /* BATCH_H */
