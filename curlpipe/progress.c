/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The progress line on a terminal's standard error, and the clock it and
 * libcurl's timer are measured with.
 */

#include <config.h>

#include <stdio.h>
#include <time.h>

#include "curlpipe.h"
#include "pipe.h"

double
seconds_since (const struct timespec *t)
{
  struct timespec now;

  clock_gettime (CLOCK_MONOTONIC, &now);
  return (now.tv_sec - t->tv_sec) + (now.tv_nsec - t->tv_nsec) / 1e9;
}

void
progress_show (struct pipe_state *st, bool last)
{
  double secs = seconds_since (&st->start);

  if (!st->progress)
    return;
  if (!last && seconds_since (&st->last_progress) < 1)
    return;
  clock_gettime (CLOCK_MONOTONIC, &st->last_progress);
  if (secs <= 0)
    secs = 1e-9;
  fprintf (stderr, "\rcurlpipe: sent %.1f MiB (%.1f MiB/s), received "
           "%.1f MiB (%.1f MiB/s)  %s",
           upload_sent (st) / 1048576.0, upload_sent (st) / 1048576.0 / secs,
           framing_received (st) / 1048576.0,
           framing_received (st) / 1048576.0 / secs,
           last ? "\n" : "");
}
