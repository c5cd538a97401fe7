/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * What is known about the object at the URL (probe.c finds it once,
 * before nbdkit serves anything), and whether the plugin serves it yet.
 * At the bottom of the plugin's files: the engine, the reads and the
 * writes look at it, and it calls none of them.
 */

#include <config.h>

#include <stdbool.h>

#include <nbdkit-plugin.h>

#include "curldefs.h"

struct object_info object = { .size = -1 };

/* Set once the probe is done: connection failures are retried only
 * after it, so a wrong URL fails at start-up at once.
 */
static bool serving;

void
remote_serving (void)
{
  serving = true;
}

bool
remote_is_serving (void)
{
  return serving;
}

/* Is nbdkit shutting down, or has the client of the calling request
 * gone away?  nbdkit_nanosleep says so, but only in the threads that
 * serve connections: called from .get_ready (the probe, the first run
 * of the scripts) nbdkit 1.32 aborts in an assertion.
 */
bool
remote_stopping (void)
{
  return serving && nbdkit_nanosleep (0, 0) == -1;
}
