/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The clock: CLOCK_MONOTONIC, for every deadline and age in the plugin.
 */

#include <config.h>

#include "base/base.h"

int64_t
clock_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * INT64_C (1000000000) + ts.tv_nsec;
}

/* A time of clock_ns as a deadline for pthread_cond_timedwait on a
 * CLOCK_MONOTONIC condition variable.
 */
struct timespec
clock_at (int64_t ns)
{
  return (struct timespec) {
    .tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000,
  };
}
