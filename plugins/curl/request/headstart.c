/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The head start's GETs.  read/readahead.c asks for them, and
 * read/segment.c keeps their bytes.  They are begun beside the probe's own
 * request, before the object is known and before nbdkit forks.
 * transport_begin starts them, which only HTTP/2 can do.  Each is judged
 * once it ends, as a read of the object the probe found.  They are kept
 * apart from request.c, whose requests are built and judged at once.
 */

#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-plugin.h>

#include "request/xfer.h"

/* A read-ahead GET begun in the probe's flight (the head start:
 * read/readahead.c), before nbdkit runs: mux.c carries its transfer on, and
 * headstart_end, in its segment's thread once there is one, waits
 * for it and judges its answer.
 */
struct headstart {
  struct xfer x;
  struct span span;
  struct transport_req r;
  char *url;                    /* where it went */
};

/* The HTTP/2 weight of the head start's GET from first: all of them go
 * out at once, and a server that shares its link among streams by
 * weight (nginx sends the frames of the heavier first) then sends them
 * more nearly in order, so that the client's first reads, which wait
 * for the whole of a segment, are served one after the other instead
 * of all at the end.  Between the probe's (256) and reads' (16): from
 * 255 down by 14 a MiB, 101 at HEAD_START's 11th MiB.
 */
static long
head_weight (uint64_t first)
{
  return 255 - 14 * (long) (first >> 20);
}

/* From the probe's transport_when_sent function: GET of bytes first-last
 * handed to sink as they come, sent on c beside the probe's own
 * request (exchange_beside), or NULL (logged for debugging).
 */
struct headstart *
headstart_begin (struct conn *c, uint64_t first, uint64_t last,
                 request_sink sink, void *opaque)
{
  struct headstart *g = calloc (1, sizeof *g);
  CURLcode rc;

  if (g == NULL)
    return NULL;
  g->span = (struct span) { .first = first, .last = last };
  g->x = (struct xfer) {
    .q = one_range (first, last, -1), .what = "head start",
    .offset = first, .count = last - first + 1, .spans = &g->span,
    .sink = sink, .sink_data = opaque, .weight = head_weight (first),
  };
  if (exchange_beside (c, &g->x, &g->url) == -1) {
    free (g);
    return NULL;
  }
  g->r.easy = c->easy;
  rc = transport_begin (&g->r);
  if (rc != CURLE_OK) {
    nbdkit_debug ("head start: %s: not sent: %s", cfg.shown_url,
                  curl_easy_strerror (rc));
    exchange_unsent (c, &g->x);
    free (g->url);
    free (g);
    return NULL;
  }
  return g;
}

/* Whether x's answer shows a validator of the pin to compare (which
 * verdict_judge does): reads send the pin's precondition, which the
 * server checks, but the head start was asked before there was one, so
 * its answer must prove its version itself.  An object whose ranged
 * GETs carry no validator (only HEAD's answer did) gets no head start
 * served.
 */
static bool
shows_pin (const struct xfer *x)
{
  return (x->q.pin.etag[0] && x->a.etag[0] && !x->a.bad_etag) ||
    (x->q.pin.last_modified[0] && x->a.last_modified[0] &&
     !x->a.bad_last_modified);
}

/* Wait for g's end (transport_wait), judge its answer and free it: the
 * verdict.  It was asked before the object was known, with neither its
 * size nor a precondition: now it is judged as a read of the object the
 * probe found (judged with what asked says now, not what it said when
 * sent), which must have been pinned (the answer shows the validators
 * the probe's did, and the same total; since then, writes drop what
 * read-ahead holds of their ranges).  A range past the object's end (a
 * small one) is refused unjudged, and a redirect is no answer here.
 * Failures are logged for debugging only: the reads it would have
 * served are ordinary ones.
 */
enum verdict
headstart_end (struct headstart *g)
{
  struct xfer *x = &g->x;
  struct conn *c = x->conn;
  CURLcode rc = transport_wait (&g->r, &x->client_gone);
  enum verdict v = VERDICT_REFUSED;

  exchange_end (c, x, rc);
  x->q.serving = true;
  x->q.expect_total = object.size;
  x->q.pinned = object_pin_found (&x->q.pin);
  if (!exchange_found_at (g->url))
    snprintf (x->why, sizeof x->why, "its URL answered the probe with a "
              "redirect: another resource");
  else if (!x->q.pinned)
    snprintf (x->why, sizeof x->why, "the object cannot be pinned");
  else if (object.size < 0 || g->span.last >= (uint64_t) object.size)
    snprintf (x->why, sizeof x->why, "past the object's end");
  else if (x->sink_stopped)
    snprintf (x->why, sizeof x->why, "no longer wanted: stopped");
  else if (!shows_pin (x))
    snprintf (x->why, sizeof x->why, "its answer shows none of the "
              "object's validators (asked without a precondition, it "
              "could be of another version)");
  else if (exchange_judge (x) == 0 && x->v == VERDICT_OK)
    v = VERDICT_OK;
  else if (verdict_failed (x->v))
    v = x->v;
  else
    snprintf (x->why, sizeof x->why, "answered %s, not the bytes",
              verdict_name (x->v));
  if (v != VERDICT_OK)
    nbdkit_debug ("head start: %s: bytes %" PRIu64 "-%" PRIu64 ": %s",
                  cfg.shown_url, g->span.first, g->span.last, x->why);
  (void) connection_took_spare (c);
  free (g->url);
  free (g);
  return v;
}
