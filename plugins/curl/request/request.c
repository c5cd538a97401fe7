/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Requests: the entry points, and the only way the plugin asks a server
 * anything.  They are HEAD, the probe's first GET, PUT, batched reads and
 * read-ahead's GETs.  Each is built here and run, and run again after a
 * transient failure.  perform_on holds the retries, their back-off, and the
 * new connection asked for when an answer was cut off.  Beneath it, route.c
 * finds where the request goes and follows its redirects.  exchange.c makes
 * one exchange, and callbacks.c takes the answer in as it arrives.
 * timing.c measures how long it took.
 *
 * Each request runs in the calling nbdkit thread, through
 * transport_perform.  Over HTTP/2 the transport hands it to the thread that
 * drives every stream, and the caller waits.  The caller borrowed the
 * connection and gives it back after.  That is read/pool.c for batched
 * reads, read/segment.c for read-ahead, and ops/ for the rest.  This file
 * calls none of them.  A GET may carry several ranges: read/pool.c gathers
 * reads that wait together, and read/batch.c asks for them in one GET.
 * rules/ranges.c parses the multipart answer.
 *
 * HTTP/1.1 has no worker thread that drives a multi handle, for two
 * reasons.  Every request would cross threads twice, to the worker and
 * back.  And the worker would do all header parsing and copying on one
 * core.  Only HTTP/2's one connection needs such a thread
 * (transport/mux.c).  A prototype of it measured no better on this
 * project's 2-core machines.  The test was fio's 4 KiB random reads, one
 * NBD connection, queue depth 64.  At connections=4/16/64 the pool gave
 * 9.7k/11.3k/14.9k IOPS, the multi worker 8.5k/12.9k/13.1k.  A sequential
 * nbdcopy of 1 GiB took the same time.  Both are bound by context switches,
 * about five per request, not by libcurl.
 *
 * Every answer is judged before a byte reaches the caller's buffer.  The
 * callbacks gather its facts (struct answer), and rules/verdict.c says
 * whether it is the answer asked for.  It is asked at the end of the
 * headers, on each piece of body and at the end.  The callbacks, exchange.c
 * and this file act on the verdict.  They cut the transfer off, follow a
 * redirect, retry, or ask one range at a time.
 */

#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-plugin.h>

#include "request/xfer.h"

int
request_init (void)
{
  return route_init ();
}

void
request_unload (void)
{
  if (curl_debug_times)
    timing_print ();
  route_unload ();
  exchange_unload ();
}

/* What x asks for, for messages: ": bytes A-B", or "" for a HEAD. */
static void
request_where (const struct xfer *x, char *where, size_t size)
{
  where[0] = '\0';
  if (x->q.method == GET)
    snprintf (where, size, ": bytes %" PRIu64 "-%" PRIu64 "%s",
              x->spans[0].first, x->spans[x->q.nranges - 1].last,
              x->q.nranges > 1 ? " (several ranges)" : "");
  else if (x->q.method == PUT)
    snprintf (where, size, ": bytes %" PRIu64 "-%" PRIu64,
              x->offset, x->offset + x->count - 1);
}

/* The bytes x asks for. */
static uint64_t
asked_bytes (const struct xfer *x)
{
  uint64_t n = 0;
  unsigned i;

  for (i = 0; i < x->q.nranges; i++)
    n += x->spans[i].last - x->spans[i].first + 1;
  return n;
}

/* x's stream goes on from where its sink stopped taking bytes: only
 * the rest is asked for (false: nothing is left, or nothing came).
 */
static bool
resume_stream (struct xfer *x)
{
  uint64_t first = x->sink_first + x->sink_done;

  if (x->sink == NULL)
    return true;
  if (first > x->spans[0].last)
    return false;
  nbdkit_debug ("%s: bytes %" PRIu64 "-%" PRIu64 ": going on from byte %"
                PRIu64 " at another source", x->what, x->sink_first,
                x->spans[0].last, first);
  x->sink_base = x->sink_done;
  x->spans[0].first = x->q.first = x->offset = first;
  x->count = min64 (x->spans[0].last - first + 1, UINT32_MAX);
  return true;
}

/* Whether a failure of x at its source may be asked of another: not
 * when the client went, nbdkit stops, the read was stopped by its sink,
 * or the failure was reported (a script's).
 */
static bool
source_failed (const struct xfer *x)
{
  return x->hedged != HEDGE_NONE || (!x->reported && !x->sink_stopped &&
                       x->v != VERDICT_STOPPED &&
                       x->v != VERDICT_NOT_THE_PARTS_ASKED_FOR);
}

/* One try of x on c (route_attempt).  A read with mirrors goes to the
 * source expected to answer it first (sources.c), and at once to
 * another when that one fails or is much slower than its answers have
 * been: that costs no retry, and the source is dropped for a while.
 * A read stopped as too slow never fails for that: when no other
 * source is left to ask, it is asked again and waited for, as with
 * url= alone.
 */
static int
attempt (struct conn *c, struct xfer *x)
{
  struct source *failed = NULL;
  unsigned n, fails = 0;
  int r;

  x->hedge_off = false;
  if (!sources_many () || x->once || x->q.method != GET ||
      !object_is_serving ())
    return route_attempt (c, x);
  for (n = 0;; n++) {
    uint64_t bytes = asked_bytes (x);

    x->src = sources_pick (bytes, failed, &x->clock);
    x->hedged = HEDGE_NONE;
    r = route_attempt (c, x);
    /* From the request sent to its first byte: not the connection's
     * set-up, nor a wait for a stream of its own.
     */
    sources_end (x->src, bytes, x->clock.got,
                 r == 0 ? timing_answer_wait_ns (c) : 0);
    if (r == 0 || !source_failed (x))
      return r;
    if (x->hedged != HEDGE_NONE) {
      char why[128];

      /* Each source may be found too slow twice (it answers again
       * meanwhile), then the read waits where it is.
       */
      hedge_why (x->hedged, &x->clock, why, sizeof why);
      if (!sources_fail (x->src, why, true)) {
        nbdkit_debug ("%s: %s: %s, and no other source is left to ask: "
                      "asked again and waited for", x->what, xfer_shown (x),
                      why);
        x->hedge_off = true;
      }
      else if (n + 1 >= 2 * nsources)
        x->hedge_off = true;
      resume_stream (x);
    }
    else {
      /* Its answer's fault: asked of another until each source failed
       * once (a source only found too slow before has not).
       */
      if (!sources_fail (x->src, x->why, false) || ++fails >= nsources ||
          !resume_stream (x))
        return r;
    }
    failed = x->src;
  }
}

/* Run one request on handle c, again after transient failures (with
 * backoff, or the server's Retry-After if longer): the verdict on its
 * last answer.  Reports failures itself, except (logged for debugging
 * only) VERDICT_UNSUPPORTED for a HEAD (the caller asks a GET instead)
 * and VERDICT_NOT_THE_PARTS_ASKED_FOR: a multi-range request to be
 * asked again one range at a time.
 */
static enum verdict
perform_on (struct conn *c, struct xfer *x)
{
  char where[80];
  unsigned try = 0, delay;
  bool fresh = false;           /* asked again on a new connection */
  bool spare;

  request_where (x, where, sizeof where);
  for (;;) {
    int r = attempt (c, x);

    spare = connection_took_spare (c);
    if (fresh)
      curl_easy_setopt (c->easy, CURLOPT_FRESH_CONNECT, 0L);
    if (r == 0)
      return x->v;
    if (retry_spare_was_closed (x, spare, fresh)) {
      retry_ask_fresh (c, x, where, "the spare connection had been closed");
      spares_drop ();
      fresh = true;
      continue;
    }
    /* HEAD not served: the caller asks a GET instead. */
    if (x->v == VERDICT_UNSUPPORTED && x->q.method == HEAD) {
      nbdkit_debug ("%s: %s: %s", x->what, xfer_shown (x), x->why);
      return x->v;
    }
    if (x->v == VERDICT_NOT_THE_PARTS_ASKED_FOR) {
      nbdkit_debug ("%s: %s%s: %s: asking for one range per request from "
                    "now on", x->what, xfer_shown (x), where, x->why);
      return x->v;
    }
    /* Once, at once, on a new connection (the one that gave the answer
     * was closed when the answer was cut off), not counted in retries=.
     */
    if (x->v == VERDICT_RETRY_FRESH && !fresh && cfg.retries > 0) {
      retry_ask_fresh (c, x, where, NULL);
      fresh = true;
      continue;
    }
    if (x->v != VERDICT_RETRY || try >= cfg.retries || x->once)
      break;
    delay = retry_delay (x, try);
    nbdkit_debug ("%s: %s%s: %s: retry %u of %u in %u ms", x->what,
                  xfer_shown (x), where, x->why, try + 1, cfg.retries,
                  delay);
    if (!retry_back_off (delay)) {
      nbdkit_error ("%s: %s%s: %s (not retried: nbdkit is shutting down "
                    "or the client disconnected)", x->what, xfer_shown (x),
                    where, x->why);
      errno = ESHUTDOWN;
      return VERDICT_STOPPED;
    }
    try++;
  }
  retry_report (x, where, fresh);
  errno = EIO;
  return x->v;
}

/* Run one request that is not a batched read (HEAD, the probe's GET,
 * the write check's GET, PUT) on c; before serving, its answer's delay
 * counts towards the round trip (timing_round_trip).
 */
static enum verdict
perform (struct conn *c, struct xfer *x)
{
  enum verdict v = perform_on (c, x);

  if (!object_is_serving ())
    timing_note_probe (c);
  return v;
}

static void
copy_info (struct object_info *info, const struct xfer *x)
{
  if (x->a.bad_etag || x->a.bad_last_modified)
    nbdkit_debug ("%s: %s: the server sent an unusable %s (control "
                  "characters, not an entity-tag, too long or two "
                  "different ones): not used", x->what, xfer_shown (x),
                  x->a.bad_etag ? "ETag" : "Last-Modified");
  info->status = x->a.status;
  strcpy (info->etag, x->a.bad_etag ? "" : x->a.etag);
  strcpy (info->last_modified,
          x->a.bad_last_modified ? "" : x->a.last_modified);
  strcpy (info->digests, x->a.digests);
  info->digests_cut = x->a.digests_cut;
}

/* HEAD: the verdict (failures reported, except VERDICT_UNSUPPORTED: the
 * caller asks a GET instead); on VERDICT_OK the Content-Length (-1 when
 * none, or two different ones) and the validators.
 */
enum verdict
request_head (struct conn *c, struct object_info *info)
{
  struct xfer x = {
    .q = asking (HEAD), .what = "HEAD", .count = 1,
  };
  enum verdict v = perform (c, &x);

  if (v != VERDICT_OK)
    return v;
  copy_info (info, &x);
  info->size = x.a.framing_twice ? -1 : x.a.content_length;
  return v;
}

/* GET of len bytes at offset into buf: the proof that ranges work, and
 * the size from the Content-Range total when it is not known yet
 * (info->size < 0), when an answer that proves the object empty gives a
 * size of 0 and one that ends with the object gives fewer bytes (*got
 * says how many arrived).  A total of '*' leaves info->size at -1.
 */
int
request_get_first (struct conn *c, struct source *src,
                  struct object_info *info, uint64_t offset,
                  char *buf, uint32_t len, uint32_t *got)
{
  struct read_req req = { .offset = offset, .count = len, .buf = buf };
  struct read_req *reqs[1] = { &req };
  struct span span = {
    .first = offset, .last = offset + len - 1, .reqs = reqs, .nreqs = 1,
  };
  struct xfer x = {
    .q = one_range (offset, offset + len - 1, info->size), .what = "GET",
    .offset = offset, .count = len, .spans = &span,
    .src = src, .once = src != NULL,
  };
  enum verdict v;

  x.q.allow_empty = x.q.allow_short = info->size < 0;
  v = perform (c, &x);
  if (verdict_failed (v))
    return -1;
  copy_info (info, &x);
  *got = v == VERDICT_EMPTY ? 0 : x.a.body_len;
  if (!cfg.is_file)
    info->size = v == VERDICT_EMPTY ? 0 : x.a.cr_total;
  return 0;
}

/* Whether the server answers the first byte of an object of size bytes
 * on c, at once, as requests are now asked (mux.c asks whether a near
 * HTTP/2 server answers HTTP/1.1): one exchange, no retry; what goes
 * wrong is reported only where route.c would report it (a redirect
 * that cannot be followed).
 */
bool
request_answers (struct conn *c, int64_t size)
{
  char byte;
  struct read_req req = { .offset = 0, .count = 1, .buf = &byte };
  struct read_req *reqs[1] = { &req };
  struct span span = { .first = 0, .last = 0, .reqs = reqs, .nreqs = 1 };
  struct xfer x = {
    .q = one_range (0, 0, size), .what = "GET", .offset = 0, .count = 1,
    .spans = &span,
  };

  return route_attempt (c, &x) == 0 && x.v == VERDICT_OK;
}

/* PUT count bytes at offset (Content-Range) on c: the verdict, failures
 * reported, and in *status the last answer's status (0 for none).
 */
enum verdict
request_put (struct conn *c, const void *buf, uint32_t count, uint64_t offset,
            long *status)
{
  struct xfer x = {
    .q = asking (PUT), .what = "pwrite",
    .offset = offset, .count = count, .wbuf = buf,
  };
  enum verdict v = perform (c, &x);

  *status = x.a.complete && x.a.rc == CURLE_OK ? x.a.status : 0;
  return v;
}

/* GET of nspans ranges (at most MAX_SPANS) into the reads they cover:
 * the verdict on the answer, failures reported except
 * VERDICT_NOT_THE_PARTS_ASKED_FOR (see perform_on).
 */
enum verdict
request_get_spans (struct conn *c, struct span *spans, unsigned nspans)
{
  struct xfer x = {
    .q = one_range (spans[0].first, spans[0].last, object.size),
    .what = "pread", .spans = spans,
  };

  x.q.nranges = nspans;
  if (nspans == 1) {
    x.offset = spans[0].first;
    x.count = spans[0].last - spans[0].first + 1;
  }
  return perform_on (c, &x);
}

/* GET of bytes first-last, handed to sink as they come (read-ahead's
 * segments, segment.c): judged as every read is, but tried once, and
 * failures only logged for debugging (the reads it would have served
 * are then asked for as ordinary reads, which report their own).  One
 * stopped by its sink ends with VERDICT_STOPPED.
 */
enum verdict
request_get_stream (struct conn *c, uint64_t first, uint64_t last,
                    request_sink sink, void *opaque)
{
  struct span span = { .first = first, .last = last };
  struct xfer x = {
    .q = one_range (first, last, object.size), .what = "read-ahead",
    .offset = first, .spans = &span, .sink = sink, .sink_data = opaque,
    .sink_first = first,
  };
  int r;

  x.count = last - first + 1 > UINT32_MAX ? UINT32_MAX : last - first + 1;
  r = attempt (c, &x);
  (void) connection_took_spare (c);   /* the next request's own question */
  if (r == 0)
    return x.v;
  nbdkit_debug ("read-ahead: %s: bytes %" PRIu64 "-%" PRIu64 ": %s",
                xfer_shown (&x), first, last,
                x.sink_stopped ? "no longer wanted: stopped" : x.why);
  return verdict_failed (x.v) ? x.v : VERDICT_REFUSED;
}
