/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The progress line on a terminal's standard error (struct progress),
 * and the clock it and libcurl's timer are measured with.
 */

#include <config.h>

#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "curlpipe.h"
#include "pipe.h"

double
seconds_since (const struct timespec *t)
{
  struct timespec now;

  clock_gettime (CLOCK_MONOTONIC, &now);
  return (now.tv_sec - t->tv_sec) + (now.tv_nsec - t->tv_nsec) / 1e9;
}

/* The transfer starts now; the line is shown on a terminal, unless -s. */
void
progress_start (struct pipe_state *st)
{
  struct progress *p = &st->progress;

  p->shown = !st->opt->silent && isatty (STDERR_FILENO);
  clock_gettime (CLOCK_MONOTONIC, &p->start);
  p->last = p->start;
}

/* How long the loop may wait before the line is due again: a second,
 * or -1 when no line is shown.
 */
int
progress_wait_ms (const struct pipe_state *st)
{
  return st->progress.shown ? 1000 : -1;
}

void
progress_show (struct pipe_state *st, bool last)
{
  struct progress *p = &st->progress;
  double secs = seconds_since (&p->start);

  if (!p->shown)
    return;
  if (!last && seconds_since (&p->last) < 1)
    return;
  clock_gettime (CLOCK_MONOTONIC, &p->last);
  if (secs <= 0)
    secs = 1e-9;
  fprintf (stderr, "\rcurlpipe: sent %.1f MiB (%.1f MiB/s), received "
           "%.1f MiB (%.1f MiB/s)  %s",
           upload_sent (st) / 1048576.0, upload_sent (st) / 1048576.0 / secs,
           framing_received (st) / 1048576.0,
           framing_received (st) / 1048576.0 / secs,
           last ? "\n" : "");
}
