/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The engine's entry points, the only way the plugin makes requests:
 * HEAD, the probe's first GET, PUT, batched reads and read-ahead's
 * GETs; each one built here and run, again after transient failures
 * (perform_on: the retries, their back-off, a new connection when an
 * answer was cut off).  Beneath: route.c (where the request goes, its
 * redirects), exchange.c (what is sent, one exchange), callbacks.c
 * (the answer taken in and judged by verdict.c as it arrives),
 * timing.c (how long they take).
 *
 * Each request runs in the calling nbdkit thread (curl_easy_perform,
 * or over HTTP/2 as a stream on mux.c's multi handle, whose thread the
 * caller waits for), on a connection (connection.c) the caller
 * borrowed from the pool (pool.c: batched reads; segment.c: read-ahead;
 * probe.c, writing.c: the rest) and gives back after: this file calls
 * none of them.  A GET
 * may carry several ranges (pool.c gathers reads that wait together,
 * batch.c asks for them in one GET); ranges.c parses the multipart
 * answer.
 *
 * Why not a multi handle driven by a worker thread for HTTP/1.1 too:
 * every request would then cross threads twice (nbdkit thread to worker
 * and back), and the worker serializes all header parsing and copying on
 * one core; only HTTP/2's one connection needs it (mux.c).  A
 * prototype of that design measured no better on this project's 2-core
 * machines (fio 4 KiB random reads, one NBD connection, queue depth 64,
 * connections=4/16/64: pool 9.7k/11.3k/14.9k IOPS, multi worker
 * 8.5k/12.9k/13.1k; a sequential 1 GiB nbdcopy took the same time).
 * Both are bound by context switches (about five per request), not by
 * libcurl.
 *
 * Every answer is judged before a byte reaches the caller's buffer:
 * the callbacks gather its facts (struct answer) and verdict.c says
 * whether it is the answer asked for, at the end of its headers, on
 * each piece of body and at the end; the callbacks, exchange.c and this
 * file act on the verdict (cut the transfer off, follow, retry, ask one
 * range at a time).
 */

#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nbdkit-plugin.h>

#include "curldefs.h"
#include "verdict.h"
#include "xfer.h"

/* What a request asks, for verdict_judge: a HEAD or PUT, or a GET of
 * first-last (several ranges: set nranges).  exchange_one adds what
 * changes from hop to hop.
 */
static struct asked
asking (enum method method)
{
  return (struct asked) {
    .method = method, .expect_total = -1, .is_file = cfg.is_file,
    .follow_redirects = cfg.followlocation,
  };
}

static struct asked
one_range (uint64_t first, uint64_t last, int64_t expect_total)
{
  struct asked q = asking (GET);

  q.nranges = 1;
  q.first = first;
  q.last = last;
  q.expect_total = expect_total;
  return q;
}
int
engine_init (void)
{
  return route_init ();
}

void
engine_unload (void)
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

/* A spare connection (spares.c) whose close by the server was still on
 * its way when it was taken fails its first request with no answer at
 * all.  Without spares that request would have opened a connection of
 * its own: so it does now, at once and not counted in retries=, and the
 * other spares, as old, are closed.
 */
static bool
spare_was_closed (const struct xfer *x, bool spare, bool fresh)
{
  return spare && !fresh && x->v == VERDICT_RETRY && x->a.status == 0 &&
    x->a.rc != CURLE_OK;
}

/* The next try of x goes out on a new connection (because: NULL, or
 * why in the message).
 */
static void
ask_fresh (struct conn *c, const struct xfer *x, const char *where,
           const char *because)
{
  /* Over HTTP/2 the connection outlives a stream that was cut off; with
   * connections=1 a request for a new one would wait, in libcurl's
   * queue and with no time limit, for the old one to be idle.
   */
  bool fresh = !mux_on () || cfg.connections > 1;

  nbdkit_debug ("%s: %s%s: %s%s%s: asking again%s", x->what,
                cfg.shown_url, where, x->why, because ? ": " : "",
                because ? because : "", fresh ? " on a new connection" : "");
  if (fresh)
    curl_easy_setopt (c->easy, CURLOPT_FRESH_CONNECT, 1L);
}

/* The pause before retry try + 1: retry-delay= doubled at each try, or
 * the server's Retry-After if longer, at most MAX_RETRY_DELAY_MS.
 */
static unsigned
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
 * the client went away: nbdkit's sleep ends early then, so neither
 * waits for the back-off.  Not in .get_ready, where nbdkit 1.32 aborts
 * in it (see remote_stopping).
 */
static bool
back_off (unsigned delay)
{
  struct timespec ts = {
    .tv_sec = delay / 1000, .tv_nsec = (delay % 1000) * 1000000L,
  };

  if (remote_is_serving ())
    return nbdkit_nanosleep (ts.tv_sec, ts.tv_nsec) == 0;
  while (nanosleep (&ts, &ts) == -1 && errno == EINTR)
    ;
  return true;
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
    int r = route_attempt (c, x);

    spare = conn_took_spare (c);
    if (fresh)
      curl_easy_setopt (c->easy, CURLOPT_FRESH_CONNECT, 0L);
    if (r == 0)
      return x->v;
    if (spare_was_closed (x, spare, fresh)) {
      ask_fresh (c, x, where, "the spare connection had been closed");
      spares_drop ();
      fresh = true;
      continue;
    }
    /* HEAD not served: the caller asks a GET instead. */
    if (x->v == VERDICT_UNSUPPORTED && x->q.method == HEAD) {
      nbdkit_debug ("%s: %s: %s", x->what, cfg.shown_url, x->why);
      return x->v;
    }
    if (x->v == VERDICT_NOT_THE_PARTS_ASKED_FOR) {
      nbdkit_debug ("%s: %s%s: %s: asking for one range per request from "
                    "now on", x->what, cfg.shown_url, where, x->why);
      return x->v;
    }
    /* Once, at once, on a new connection (the one that gave the answer
     * was closed when the answer was cut off), not counted in retries=.
     */
    if (x->v == VERDICT_RETRY_FRESH && !fresh && cfg.retries > 0) {
      ask_fresh (c, x, where, NULL);
      fresh = true;
      continue;
    }
    if (x->v != VERDICT_RETRY || try >= cfg.retries)
      break;
    delay = retry_delay (x, try);
    nbdkit_debug ("%s: %s%s: %s: retry %u of %u in %u ms", x->what,
                  cfg.shown_url, where, x->why, try + 1, cfg.retries, delay);
    if (!back_off (delay)) {
      nbdkit_error ("%s: %s%s: %s (not retried: nbdkit is shutting down "
                    "or the client disconnected)", x->what, cfg.shown_url,
                    where, x->why);
      errno = ESHUTDOWN;
      return VERDICT_STOPPED;
    }
    try++;
  }
  if (!x->reported)
    nbdkit_error ("%s: %s%s: %s%s", x->what, cfg.shown_url, where, x->why,
                  x->v == VERDICT_RETRY ? " (retries exhausted)"
                  : x->v == VERDICT_RETRY_FRESH && fresh
                  ? " (and again on a new connection)" : "");
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

  if (!remote_is_serving ())
    timing_note_probe (c);
  return v;
}

static void
copy_info (struct object_info *info, const struct xfer *x)
{
  if (x->a.bad_etag || x->a.bad_last_modified)
    nbdkit_debug ("%s: %s: the server sent an unusable %s (control "
                  "characters, not an entity-tag, too long or two "
                  "different ones): not used", x->what, cfg.shown_url,
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
engine_head (struct conn *c, struct object_info *info)
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
engine_get_first (struct conn *c, struct object_info *info, uint64_t offset,
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
engine_answers (struct conn *c, int64_t size)
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
engine_put (struct conn *c, const void *buf, uint32_t count, uint64_t offset,
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
engine_get_spans (struct conn *c, struct span *spans, unsigned nspans)
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
engine_get_stream (struct conn *c, uint64_t first, uint64_t last,
                   bool (*sink) (void *, uint64_t, const char *, size_t),
                   void *opaque)
{
  struct span span = { .first = first, .last = last };
  struct xfer x = {
    .q = one_range (first, last, object.size), .what = "read-ahead",
    .offset = first, .spans = &span, .sink = sink, .sink_data = opaque,
  };
  int r;

  x.count = last - first + 1 > UINT32_MAX ? UINT32_MAX : last - first + 1;
  r = route_attempt (c, &x);
  (void) conn_took_spare (c);   /* the next request's own question */
  if (r == 0)
    return x.v;
  nbdkit_debug ("read-ahead: %s: bytes %" PRIu64 "-%" PRIu64 ": %s",
                cfg.shown_url, first, last,
                x.sink_stopped ? "no longer wanted: stopped" : x.why);
  return verdict_failed (x.v) ? x.v : VERDICT_REFUSED;
}

/* A read-ahead GET begun in the probe's flight (the head start:
 * prefetch.c), before nbdkit runs: mux.c carries its transfer on, and
 * engine_stream_end, in its segment's thread once there is one, waits
 * for it and judges its answer.
 */
struct early_get {
  struct xfer x;
  struct span span;
  struct mux_req r;
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

/* From the probe's mux_when_sent function: GET of bytes first-last
 * handed to sink as they come, sent on c beside the probe's own
 * request (exchange_beside), or NULL (logged for debugging).
 */
struct early_get *
engine_stream_begin (struct conn *c, uint64_t first, uint64_t last,
                     bool (*sink) (void *, uint64_t, const char *, size_t),
                     void *opaque)
{
  struct early_get *g = calloc (1, sizeof *g);
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
  rc = mux_begin (&g->r);
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

/* Wait for g's end (mux_wait), judge its answer and free it: the
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
engine_stream_end (struct early_get *g)
{
  struct xfer *x = &g->x;
  struct conn *c = x->conn;
  CURLcode rc = mux_wait (&g->r, &x->client_gone);
  enum verdict v = VERDICT_REFUSED;

  exchange_end (c, x, rc);
  x->q.serving = true;
  x->q.expect_total = object.size;
  x->q.pinned = remote_pin_found (&x->q.pin);
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
  (void) conn_took_spare (c);
  free (g->url);
  free (g);
  return v;
}
