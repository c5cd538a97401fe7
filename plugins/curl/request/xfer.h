/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * One request inside request/: struct xfer, what it asks and what its
 * answer was so far.  request.c builds it and retries it.  route.c takes it
 * along its redirects.  exchange.c sends it once.  callbacks.c fills its
 * answer in as libcurl hands it over.  headstart.c and timing.c use it too.
 * Nothing outside the folder sees it.  The functions that these files call
 * in each other are declared here too.
 */

#ifndef XFER_H
#define XFER_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "request/request.h"
#include "request/target.h"

/* One request and what its answer was. */
struct xfer {
  struct conn *conn;
  struct asked q;               /* see exchange_one: the per-hop part */
  const char *what;             /* "pread", "HEAD", "GET"...: messages */
  uint64_t offset;              /* GET of several spans: unused */
  uint32_t count;
  struct span *spans;           /* GET: where the body goes */
  /* GET of one range: instead, the body as it comes (segment.c) */
  request_sink sink;
  void *sink_data;
  bool sink_stopped;            /* the sink wanted no more */
  uint64_t sink_first;          /* the range's first byte, as asked */
  uint64_t sink_base, sink_done;  /* asked again from sink_base (see
                                   * resume_stream): what sink took */
  /* With mirrors (sources.c): the source asked, its request's clock,
   * and whether (why) the transfer was stopped as too slow there.
   */
  struct source *src;
  struct source_clock clock;
  enum hedge hedged;
  bool hedge_off;               /* no other source left: waited for */
  bool once;                    /* not retried (mirrors.c's probes) */
  bool client_gone;             /* mux.c: its client went (atomic) */
  const char *wbuf;             /* PUT: the body */
  uint64_t sent;                /* PUT: bytes of it sent */

  struct answer a;              /* the facts, reset by answer_reset */
  enum verdict v;               /* verdict_judge's, as far as it came */
  char why[256];                /* ... and its reason */

  struct timespec ignoring_since;  /* this try's first ignored body, or 0 */
  struct timespec stop_checked; /* see progress_cb */
  /* timing_stalled: the bytes moved (both ways) when last looked, and
   * when they last moved (0: the request is not sent yet); stalled: the
   * transfer was ended for that.
   */
  curl_off_t moved;
  int64_t moved_ns;
  bool stalled;
  bool reported;                /* the error was reported where it arose */
  long weight;                  /* HTTP/2 stream weight, 0: the default */
  struct curl_slist *req_headers;  /* exchange.c: sent with this try */
};

/* Where x went, for messages: url='s or a mirror's URL, no secrets. */
static inline const char *
xfer_shown (const struct xfer *x)
{
  return x->src != NULL && x->src->url != NULL ? x->src->shown
    : cfg.shown_url;
}

/* What a request asks, for verdict_judge: a HEAD or PUT, or a GET of
 * first-last (several ranges: set nranges).  exchange_one adds what
 * changes from hop to hop.
 */
static inline struct asked
asking (enum method method)
{
  return (struct asked) {
    .method = method, .expect_total = -1, .is_file = cfg.is_file,
    .follow_redirects = cfg.followlocation,
  };
}

static inline struct asked
one_range (uint64_t first, uint64_t last, int64_t expect_total)
{
  struct asked q = asking (GET);

  q.nranges = 1;
  q.first = first;
  q.last = last;
  q.expect_total = expect_total;
  return q;
}

/* callbacks.c */
extern void callbacks_attach (CURL *e, struct xfer *x);
extern bool callbacks_judge (struct xfer *x);

/* exchange.c */
extern int exchange_one (struct conn *c, struct xfer *x, const char *url,
                         bool trusted);
extern int exchange_beside (struct conn *c, struct xfer *x, char **url);
extern bool exchange_found_at (const char *url);
extern void exchange_unload (void);
extern void exchange_end (struct conn *c, struct xfer *x, CURLcode rc);
extern void exchange_unsent (struct conn *c, struct xfer *x);
extern int exchange_judge (struct xfer *x);

/* retry.c: what perform_on asks when a try failed. */
extern bool retry_spare_was_closed (const struct xfer *x, bool spare,
                                    bool fresh);
extern void retry_ask_fresh (struct conn *c, const struct xfer *x,
                             const char *where, const char *because);
extern unsigned retry_delay (const struct xfer *x, unsigned try);
extern bool retry_back_off (unsigned delay);
extern void retry_report (const struct xfer *x, const char *where,
                          bool fresh);

/* route.c */
extern int route_init (void);
extern void route_unload (void);
extern int route_attempt (struct conn *c, struct xfer *x);

/* timing.c */
extern int curl_debug_times, curl_debug_requests;
extern void timing_add (CURL *e);
extern void timing_print (void);
extern void timing_note_probe (struct conn *c);
extern bool timing_stalled (struct xfer *x, curl_off_t moved);

#endif /* XFER_H */
