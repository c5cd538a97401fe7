/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * One exchange: a request sent once to one URL, and its answer judged.
 * What is sent is decided here: the method, the Range, the headers and the
 * credentials.  The headers are the user's, header-script's, the pin's
 * precondition and a PUT's Content-Range.  Credentials go only where the
 * caller says the URL may have them; route.c decides by origin.  libcurl
 * follows no redirect itself: each hop is an exchange.
 */

#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <nbdkit-plugin.h>

#include "request/xfer.h"

/* The SHA-256 of an empty body: what AWS Signature V4 wants in
 * x-amz-content-sha256 for GET and HEAD (S3-compatible servers such as
 * s3rver refuse requests without it; libcurl 7.88 does not add it).
 */
#define EMPTY_SHA256 \
  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static bool
append (struct curl_slist **list, const char *h)
{
  struct curl_slist *n = curl_slist_append (*list, h);

  if (n == NULL)
    return false;
  *list = n;
  return true;
}

/* The headers of one request, in a list of its own (libcurl does not
 * copy it, and header-script may replace its part meanwhile): the
 * user's and header-script's (only where the user's credentials may go:
 * route.c), then what the request itself needs.
 *
 * A PUT carries Content-Range.  RFC 9110 leaves partial PUT to the
 * server; Apache mod_dav and lighttpd take it.  "Expect:" stops libcurl
 * waiting for 100 Continue, a round trip per write.
 */
static int
request_headers (const struct xfer *x, bool trusted,
                 struct curl_slist **list)
{
  const struct curl_slist *u;
  char range[80];
  bool has_sha = false;

  *list = NULL;
  for (u = trusted ? cfg.headers : NULL; u != NULL; u = u->next) {
    if (!append (list, u->data))
      goto nomem;
    if (strncasecmp (u->data, "x-amz-content-sha256:", 21) == 0)
      has_sha = true;
  }
  if (trusted && script_headers (list) == -1)
    return -1;
  if (x->q.pinned && x->q.pin.header[0] && !append (list, x->q.pin.header))
    goto nomem;
  if (x->q.method == PUT) {
    snprintf (range, sizeof range, "Content-Range: bytes %" PRIu64
              "-%" PRIu64 "/*", x->offset, x->offset + x->count - 1);
    if (!append (list, range) || !append (list, "Expect:"))
      goto nomem;
  }
  if (trusted && cfg.aws_sigv4 && !has_sha &&
      !append (list, x->q.method == PUT
               ? "x-amz-content-sha256: UNSIGNED-PAYLOAD"
               : "x-amz-content-sha256: " EMPTY_SHA256))
    goto nomem;
  return 0;

 nomem:
  nbdkit_error ("%s: curl_slist_append: out of memory", x->what);
  return -1;
}

/* "A-B" or "A-B,C-D,...": the Range header's value without "bytes=". */
static void
range_list (char *dst, size_t size, const struct span *spans, unsigned n)
{
  unsigned i;
  size_t len = 0;

  for (i = 0; i < n && len < size; i++)
    len += snprintf (dst + len, size - len, "%s%" PRIu64 "-%" PRIu64,
                     i > 0 ? "," : "", spans[i].first, spans[i].last);
}

/* A new exchange of x: a fresh answer, and what this hop asks (the
 * validator it carries is the one its answer must have).
 */
static void
begin_exchange (struct xfer *x)
{
  answer_reset (&x->a);
  x->v = VERDICT_OK;
  x->why[0] = '\0';
  x->sent = 0;
  x->reported = false;
  x->client_gone = false;
  x->moved = x->moved_ns = 0;
  x->stalled = false;
  x->q.serving = object_is_serving ();
  x->q.pinned = object_pin (&x->q.pin) && x->q.method == GET;
  /* A mirror's reads carry its own validators (mirrors.c). */
  if (x->src != NULL && x->src->url != NULL) {
    x->q.pin = x->src->pin;
    x->q.pinned = x->src->pinned && x->q.method == GET;
  }
}

/* Set handle e up to send x to url, with these request headers and
 * cookie; the user's credentials only where trusted.  libcurl copies
 * the strings, not the list.
 */
static void
set_request (CURL *e, struct xfer *x, const char *url,
             struct curl_slist *headers, const char *cookie, bool trusted)
{
  char range[MAX_SPANS * 42];

  curl_easy_setopt (e, CURLOPT_URL, url);
  curl_easy_setopt (e, CURLOPT_HTTP_VERSION, transport_http_version ());
  /* Over HTTP/2, the probe's answer before the head start's, and theirs
   * before reads' (see headstart_begin).
   */
  curl_easy_setopt (e, CURLOPT_STREAM_WEIGHT,
                    x->weight ? x->weight : x->q.serving ? 16L : 256L);
  callbacks_attach (e, x);
  switch (x->q.method) {
  case HEAD:
    /* The handle may have made a PUT last: back to GET, then HEAD. */
    curl_easy_setopt (e, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt (e, CURLOPT_NOBODY, 1L);
    curl_easy_setopt (e, CURLOPT_RANGE, NULL);
    break;
  case GET:
    range_list (range, sizeof range, x->spans, x->q.nranges);
    curl_easy_setopt (e, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt (e, CURLOPT_RANGE, range);
    break;
  case PUT:
    curl_easy_setopt (e, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt (e, CURLOPT_RANGE, NULL);
    curl_easy_setopt (e, CURLOPT_INFILESIZE_LARGE, (curl_off_t) x->count);
    break;
  }
  curl_easy_setopt (e, CURLOPT_HTTPHEADER, headers);
  /* NULL sends none (the URL's own user:password@ still counts). */
  curl_easy_setopt (e, CURLOPT_USERNAME, trusted ? cfg.user : NULL);
  curl_easy_setopt (e, CURLOPT_PASSWORD, trusted ? cfg.password : NULL);
  curl_easy_setopt (e, CURLOPT_AWS_SIGV4, trusted ? cfg.aws_sigv4 : NULL);
  curl_easy_setopt (e, CURLOPT_COOKIE,
                    !trusted ? NULL : cookie ? cookie : cfg.cookie);
}

/* The exchange the probe has on its way, while it runs (see
 * exchange_beside), and the URL whose answer was not a redirect: where
 * the probe found the object.
 */
static struct {
  const char *url;
  bool trusted;
  char *found;
} probe_hop;

/* Before x's transfer on c to url (x->req_headers holds the header
 * list, which libcurl does not copy, until exchange_end or
 * exchange_unsent): 0, or -1 with x->v a failure and the error
 * reported.
 */
static int
exchange_begin (struct conn *c, struct xfer *x, const char *url,
                bool trusted)
{
  CLEANUP_FREE char *cookie = NULL;     /* libcurl copies it */

  begin_exchange (x);
  x->req_headers = NULL;
  /* These report their own errors. */
  if (request_headers (x, trusted, &x->req_headers) == -1 ||
      (trusted && script_cookie (&cookie) == -1)) {
    curl_slist_free_all (x->req_headers);
    x->req_headers = NULL;
    x->v = VERDICT_REFUSED;
    x->reported = true;
    return -1;
  }
  x->conn = c;
  c->errbuf[0] = '\0';
  set_request (c->easy, x, url, x->req_headers, cookie, trusted);
  return 0;
}

/* x was set up on c but never sent: c back with the user's headers. */
void
exchange_unsent (struct conn *c, struct xfer *x)
{
  curl_easy_setopt (c->easy, CURLOPT_HTTPHEADER, cfg.headers);
  curl_slist_free_all (x->req_headers);
  x->req_headers = NULL;
}

/* After x's transfer on c, which ended with rc: the answer complete,
 * not judged yet.
 */
void
exchange_end (struct conn *c, struct xfer *x, CURLcode rc)
{
  CURL *e = c->easy;
  curl_off_t usecs = 0;

  if (curl_debug_times)
    timing_add (e);
  if (curl_debug_requests) {
    curl_easy_getinfo (e, CURLINFO_TOTAL_TIME_T, &usecs);
    nbdkit_debug ("%s %s: %" PRIu64 "+%" PRIu32 " in %u ranges: HTTP %ld: "
                  "%" PRIi64 " us", x->what,
                  x->src != NULL ? x->src->shown : cfg.shown_url, x->offset,
                  x->count, x->q.nranges, x->a.status, (int64_t) usecs);
  }

  /* The list set for this request is freed here: the handle goes back
   * with the user's list.
   */
  exchange_unsent (c, x);

  /* Ended by timing_stalled: a timeout, retried as libcurl's own. */
  if (x->stalled && rc == CURLE_ABORTED_BY_CALLBACK) {
    rc = CURLE_OPERATION_TIMEDOUT;
    snprintf (c->errbuf, sizeof c->errbuf, "no byte for %u s (timeout=)",
              cfg.timeout);
  }
  x->a.complete = true;
  x->a.rc = rc;
  x->a.rc_text = curl_easy_strerror (rc);
  x->a.errbuf = c->errbuf;
  if (x->v == VERDICT_PARTS)
    ranges_multipart_complete (&x->a.mp);      /* a.mp.complete, or a.mp.why */
}

/* The verdict on x's complete answer: 0, or -1 with x->v a failure. */
int
exchange_judge (struct xfer *x)
{
  if (callbacks_judge (x))
    return 0;
  if (x->v == VERDICT_OBJECT_CHANGED)
    object_changed_now ();
  return -1;
}

/* One exchange of the request on handle c with the server at url:
 * 0, or -1 with x->v a failure and x->why set (or the error reported,
 * x->reported).  Only where trusted does it carry the user's
 * credentials, cookie and headers.
 */
int
exchange_one (struct conn *c, struct xfer *x, const char *url,
              bool trusted)
{
  CURLcode rc;
  int r;

  if (exchange_begin (c, x, url, trusted) == -1)
    return -1;
  /* Only before nbdkit serves: the probe, on one thread. */
  if (!x->q.serving) {
    probe_hop.url = url;
    probe_hop.trusted = trusted;
  }
  rc = transport_perform (c, &x->client_gone);
  exchange_end (c, x, rc);
  r = exchange_judge (x);
  if (!x->q.serving) {
    probe_hop.url = NULL;
    if (x->v != VERDICT_REDIRECT) {
      free (probe_hop.found);
      probe_hop.found = strdup (url);
    }
  }
  return r;
}

/* While the probe's exchange is on its way (called from it: see
 * transport_when_sent), x set up on c to go to the same URL (a copy in *url,
 * for exchange_found_at) with the same trust, its transfer left to the
 * caller: 0, or -1 (none on its way, or x->v a failure, reported).  So
 * no secret goes anywhere the probe's request did not.
 */
int
exchange_beside (struct conn *c, struct xfer *x, char **url)
{
  *url = probe_hop.url != NULL ? strdup (probe_hop.url) : NULL;
  if (*url == NULL)
    return -1;
  if (exchange_begin (c, x, probe_hop.url, probe_hop.trusted) == 0)
    return 0;
  free (*url);
  *url = NULL;
  return -1;
}

/* Whether url is where the probe found the object: its last hop, the
 * one not answered with a redirect.  A hop that redirected the probe
 * may serve bytes of its own, with validators that happen to be the
 * object's (an ETag identifies versions of one resource only).
 */
bool
exchange_found_at (const char *url)
{
  return probe_hop.found != NULL && strcmp (url, probe_hop.found) == 0;
}

void
exchange_unload (void)
{
  free (probe_hop.found);
  probe_hop.found = NULL;
}
