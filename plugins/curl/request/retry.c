/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * How a failed try is tried again: the pause before it, a new
 * connection when the old one was cut off, and the message when no try
 * is left.  request.c's perform_on runs the loop that asks these.
 */

#include <config.h>

#include <errno.h>
#include <time.h>

#include <nbdkit-plugin.h>

#include "request/xfer.h"

/* A spare connection (spares.c) whose close by the server was still on
 * its way when it was taken fails its first request with no answer at
 * all.  Without spares that request would have opened a connection of
 * its own: so it does now, at once and not counted in retries=, and the
 * other spares, as old, are closed.
 */
bool
retry_spare_was_closed (const struct xfer *x, bool spare, bool fresh)
{
  return spare && !fresh && x->v == VERDICT_RETRY && x->a.status == 0 &&
    x->a.rc != CURLE_OK;
}

/* The next try of x goes out on a new connection (because: NULL, or
 * why in the message).
 */
void
retry_ask_fresh (struct conn *c, const struct xfer *x, const char *where,
                 const char *because)
{
  /* Over HTTP/2 the connection outlives a stream that was cut off; with
   * connections=1 a request for a new one would wait, in libcurl's
   * queue and with no time limit, for the old one to be idle.
   */
  bool fresh = !transport_shared () || cfg.connections > 1;

  nbdkit_debug ("%s: %s%s: %s%s%s: asking again%s", x->what,
                xfer_shown (x), where, x->why, because ? ": " : "",
                because ? because : "", fresh ? " on a new connection" : "");
  if (fresh)
    curl_easy_setopt (c->easy, CURLOPT_FRESH_CONNECT, 1L);
}

/* The pause before retry try + 1: retry-delay= doubled at each try, or
 * the server's Retry-After if longer, at most MAX_RETRY_DELAY_MS.
 */
unsigned
retry_delay (const struct xfer *x, unsigned try)
{
  unsigned delay = cfg.retry_delay_ms;

  for (unsigned i = 0; i < try && delay < MAX_RETRY_DELAY_MS; i++)
    delay *= 2;
  if (x->a.retry_after_ms > delay)
    delay = x->a.retry_after_ms;
  return delay > MAX_RETRY_DELAY_MS ? MAX_RETRY_DELAY_MS : delay;
}

/* Wait delay ms before a retry; false when nbdkit is shutting down or
 * the client went away, looked at every STOP_CHECK_MS: so neither
 * waits for the back-off (a piece of a split read, split.c, learns it
 * from the thread that serves its client).  Not in .get_ready, where
 * nbdkit 1.32 aborts in it (see object_stopping).
 */
#define STOP_CHECK_MS 200

bool
retry_back_off (unsigned delay)
{
  bool serving = object_is_serving ();

  while (delay > 0) {
    unsigned ms = serving && delay > STOP_CHECK_MS ? STOP_CHECK_MS : delay;
    struct timespec ts = {
      .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L,
    };

    while (nanosleep (&ts, &ts) == -1 && errno == EINTR)
      ;
    if (serving && object_stopping ())
      return false;
    delay -= ms;
  }
  return true;
}

/* perform_on's last answer failed x, unless reported where it arose;
 * one stopped because nbdkit stops or its client went has nobody to
 * tell (debug only).  fresh: asked again on a new connection.
 */
void
retry_report (const struct xfer *x, const char *where, bool fresh)
{
  if (x->reported)
    return;
  if (x->v == VERDICT_STOPPED &&
      (object_stopping () ||
       __atomic_load_n (&x->client_gone, __ATOMIC_RELAXED)))
    nbdkit_debug ("%s: %s%s: %s", x->what, xfer_shown (x), where, x->why);
  else
    nbdkit_error ("%s: %s%s: %s%s", x->what, xfer_shown (x), where,
                  x->why, x->v == VERDICT_RETRY ? " (retries exhausted)"
                  : x->v == VERDICT_RETRY_FRESH && fresh
                  ? " (and again on a new connection)" : "");
}
