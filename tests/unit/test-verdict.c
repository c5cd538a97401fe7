/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * test-verdict: the verdict on answers made by hand, without a server
 * (plugins/curl/rules/verdict.c and ranges.c linked in alone).  Each case
 * builds what was asked and what came back, header lines going through
 * answer_header as callbacks.c's header callback would, and checks the
 * verdict and a word of its reason.  A failing case is named on stderr
 * and the exit status is 1.
 */

#include <config.h>

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules/rules.h"

static unsigned failures, cases;

#define SIZE 1000                 /* the object's size */
#define ETAG "\"v1\""
#define LASTMOD "Tue, 01 Dec 2026 00:00:00 GMT"

/* A GET of first-last of an object of SIZE bytes, pinned by ETag. */
static struct asked
get (uint64_t first, uint64_t last)
{
  return (struct asked) {
    .method = GET, .nranges = 1, .first = first, .last = last,
    .expect_total = SIZE, .follow_redirects = true, .serving = true,
    .pinned = true,
    .pin = { .etag = ETAG, .last_modified = "", .etag_required = true,
             .header = "If-Match: " ETAG },
  };
}

static struct asked
other (enum method method)
{
  return (struct asked) {
    .method = method, .expect_total = -1, .follow_redirects = true,
    .serving = true,
  };
}

/* An answer with this status line and header lines ("Name: value",
 * ending with NULL), its headers ended.
 */
static struct answer
headers (long status, ...)
{
  struct answer a;
  va_list ap;
  const char *h;

  answer_reset (&a);
  a.status = status;
  va_start (ap, status);
  for (h = va_arg (ap, const char *); h != NULL;
       h = va_arg (ap, const char *)) {
    char name[64];
    const char *v = strchr (h, ':');
    size_t n = v - h;

    memcpy (name, h, n);
    name[n] = '\0';
    for (v++; *v == ' '; v++)
      ;
    if (strcasecmp (name, "location") == 0) {
      a.has_location = true;
      snprintf (a.location, sizeof a.location, "%s", v);
    }
    else
      answer_header (&a, name, v, strlen (v));
  }
  va_end (ap);
  a.headers_done = true;
  return a;
}

/* The transfer ended with rc after body_len bytes. */
static struct answer
ended (struct answer a, uint64_t body_len, CURLcode rc)
{
  a.body_len = body_len;
  a.complete = true;
  a.rc = rc;
  a.rc_text = "a transport error";   /* not linked with libcurl */
  a.errbuf = "";
  return a;
}

static void
expect (int line, const struct asked *q, const struct answer *a,
        enum verdict want, const char *why_has)
{
  char why[256];
  enum verdict v = verdict_judge (q, a, why, sizeof why);

  cases++;
  if (v != want || (why_has && strstr (why, why_has) == NULL) ||
      (verdict_failed (v) && why[0] == '\0')) {
    fprintf (stderr, "test-verdict.c:%d: verdict %s (\"%s\"), expected %s"
             "%s%s%s\n", line, verdict_name (v), why, verdict_name (want),
             why_has ? " with \"" : "", why_has ? why_has : "",
             why_has ? "\"" : "");
    failures++;
  }
}
#define EXPECT(q, a, want, why) expect (__LINE__, &(q), &(a), want, why)

/* A good 206 for first-last (at the headers only). */
#define GOOD(cr, cl)                                                    \
  headers (206, "Content-Range: " cr, "Content-Length: " cl,            \
           "ETag: " ETAG, NULL)

static void
status_classes (void)
{
  struct asked q = get (0, 9);
  struct answer a;

  a = GOOD ("bytes 0-9/1000", "10");
  EXPECT (q, a, VERDICT_OK, NULL);
  a = ended (a, 10, CURLE_OK);
  EXPECT (q, a, VERDICT_OK, NULL);

  a = headers (200, "Content-Length: 1000", "ETag: " ETAG, NULL);
  EXPECT (q, a, VERDICT_REFUSED, "does not support range requests");
  a = headers (404, NULL);
  EXPECT (q, a, VERDICT_REFUSED, "HTTP 404");
  /* 416 inside the object: once more on a new connection; with
   * another size in it, the object changed.
   */
  a = headers (416, "Content-Range: bytes */1000", NULL);
  EXPECT (q, a, VERDICT_RETRY_FRESH, "416 Range Not Satisfiable for bytes 0-9");
  a = headers (416, NULL);
  EXPECT (q, a, VERDICT_RETRY_FRESH, "inside the object's 1000 bytes");
  a = headers (416, "Content-Range: bytes */900", NULL);
  EXPECT (q, a, VERDICT_OBJECT_CHANGED, "size was 1000, now 900");
  a = headers (412, NULL);
  EXPECT (q, a, VERDICT_OBJECT_CHANGED, "412");
  a = headers (501, NULL);
  EXPECT (q, a, VERDICT_REFUSED, "HTTP 501");
  a = headers (429, "Retry-After: 2", NULL);
  EXPECT (q, a, VERDICT_RETRY, "HTTP 429");
  if (a.retry_after_ms != 2000) {
    fprintf (stderr, "Retry-After: 2 gave %u ms\n", a.retry_after_ms);
    failures++;
  }
  a = headers (429, "Retry-After: 99999999999999999999999", NULL);
  if (a.retry_after_ms != 0) {
    fprintf (stderr, "an overflowing Retry-After gave %u ms\n",
             a.retry_after_ms);
    failures++;
  }
  a = headers (429, "Retry-After: 1e9", NULL);
  if (a.retry_after_ms != 0) {
    fprintf (stderr, "Retry-After: 1e9 gave %u ms\n", a.retry_after_ms);
    failures++;
  }
  a = headers (408, NULL);
  EXPECT (q, a, VERDICT_RETRY, "HTTP 408");
  a = headers (500, NULL);
  EXPECT (q, a, VERDICT_RETRY, "HTTP 500");
  a = headers (503, NULL);
  EXPECT (q, a, VERDICT_RETRY, "HTTP 503");
  a = headers (599, NULL);
  EXPECT (q, a, VERDICT_RETRY, "HTTP 599");

  /* 3xx: followed only with a Location and followlocation. */
  a = headers (302, "Location: /elsewhere", NULL);
  EXPECT (q, a, VERDICT_REDIRECT, NULL);
  a = ended (a, 5000, CURLE_OK);
  EXPECT (q, a, VERDICT_REDIRECT, NULL);
  a = headers (307, NULL);
  EXPECT (q, a, VERDICT_REFUSED, "HTTP 307");
  a = headers (304, "Location: /x", NULL);
  EXPECT (q, a, VERDICT_REFUSED, "HTTP 304");
  a = headers (304, "Location: /x", NULL);
  EXPECT (q, a, VERDICT_REFUSED, "instead of 206 Partial Content");
  q.follow_redirects = false;
  a = headers (301, "Location: /elsewhere", NULL);
  EXPECT (q, a, VERDICT_REFUSED, "HTTP 301 instead of 206 Partial Content "
          "(a redirect: followlocation=false follows none)");
  a = headers (308, "Location: /elsewhere", NULL);
  EXPECT (q, a, VERDICT_REFUSED, "followlocation=false");
  q = get (0, 9);

  /* 1xx: the headers have not ended; nothing judged yet. */
  answer_reset (&a);
  a.status = 100;
  EXPECT (q, a, VERDICT_OK, NULL);

}

/* HEAD (the probe's, and the write check's) and PUT: judged by their
 * status once the transfer ended.
 */
static const struct {
  enum method method;
  long status;
  const char *location;         /* a Location header, or NULL */
  enum verdict want;
  const char *why;              /* a word of the reason, or NULL */
} statuses[] = {
  { HEAD, 200, NULL, VERDICT_OK, NULL },
  { HEAD, 204, NULL, VERDICT_OK, NULL },
  { HEAD, 503, NULL, VERDICT_RETRY, "HTTP 503" },
  { HEAD, 429, NULL, VERDICT_RETRY, "HTTP 429" },
  /* Presigned URLs answer HEAD 403; some servers have no HEAD. */
  { HEAD, 403, NULL, VERDICT_UNSUPPORTED, "does not answer HEAD" },
  { HEAD, 405, NULL, VERDICT_UNSUPPORTED, "HTTP 405" },
  { HEAD, 501, NULL, VERDICT_UNSUPPORTED, "HTTP 501" },
  { HEAD, 401, NULL, VERDICT_REFUSED, "HTTP 401" },
  { HEAD, 404, NULL, VERDICT_REFUSED, "HTTP 404" },
  { HEAD, 302, "/elsewhere", VERDICT_REDIRECT, NULL },
  { PUT, 201, NULL, VERDICT_OK, NULL },
  { PUT, 204, NULL, VERDICT_OK, NULL },
  /* No partial PUT here: the user is told to serve it read-only. */
  { PUT, 405, NULL, VERDICT_UNSUPPORTED, "nbdkit -r" },
  { PUT, 400, NULL, VERDICT_UNSUPPORTED, "partial PUT with HTTP 400" },
  { PUT, 501, NULL, VERDICT_UNSUPPORTED, "HTTP 501" },
  { PUT, 403, NULL, VERDICT_REFUSED, "HTTP 403" },
  { PUT, 409, NULL, VERDICT_REFUSED, "HTTP 409" },
  { PUT, 503, NULL, VERDICT_RETRY, "HTTP 503" },
  /* Any redirect: redirect.c refuses those a write must not follow
   * (test-redirect.c).
   */
  { PUT, 307, "/elsewhere", VERDICT_REDIRECT, NULL },
  { PUT, 303, "/elsewhere", VERDICT_REDIRECT, NULL },
};

static void
head_and_put (void)
{
  struct asked q;
  struct answer a;
  size_t i;

  for (i = 0; i < sizeof statuses / sizeof statuses[0]; i++) {
    q = other (statuses[i].method);
    a = statuses[i].location
      ? headers (statuses[i].status, "Location: /elsewhere", NULL)
      : headers (statuses[i].status, NULL);
    /* Not judged before the end. */
    if (statuses[i].want != VERDICT_REDIRECT)
      EXPECT (q, a, VERDICT_OK, NULL);
    a = ended (a, 0, CURLE_OK);
    EXPECT (q, a, statuses[i].want, statuses[i].why);
  }
  q = other (HEAD);
  q.follow_redirects = false;
  a = ended (headers (302, "Location: /elsewhere", NULL), 0, CURLE_OK);
  EXPECT (q, a, VERDICT_REFUSED, "HTTP 302");
  /* No answer at all: the transport's verdict, whatever the method. */
  q = other (PUT);
  answer_reset (&a);
  a = ended (a, 0, CURLE_RECV_ERROR);
  EXPECT (q, a, VERDICT_RETRY, "transport");
  /* file://: no status. */
  q = other (HEAD);
  q.is_file = true;
  a = ended (headers (0, "Content-Length: 1000", NULL), 0, CURLE_OK);
  EXPECT (q, a, VERDICT_OK, NULL);
}

static void
content_ranges (void)
{
  struct asked q = get (10, 19);
  struct answer a;
  static const char *const bad[] = {
    "Content-Range: bytes 10-19",            /* no total */
    "Content-Range: items 10-19/1000",       /* wrong unit */
    "Content-Range: bytes=10-19/1000",       /* not a space */
    "Content-Range: bytes 19-10/1000",       /* end before start */
    "Content-Range: bytes 10-1000/1000",     /* beyond the size */
    "Content-Range: bytes */1000",           /* unsatisfied */
    "Content-Range: garbage",
    "Content-Range: bytes -10-19/1000",
    "Content-Range: bytes 10-19/1000, bytes 30-39/1000",
    "Content-Range: bytes 10-19/1000 ",      /* answer_header gets it
                                              * trimmed; test it raw */
    "Content-Range: bytes 10 -19/1000",
    "Content-Range: bytes 99999999999999999999-19/1000",
    "Content-Range: bytes 10-99999999999999999999/1000",
    "Content-Range: bytes 10-19/99999999999999999999",
    "Content-Range: ",
  };
  unsigned i;

  a = headers (206, "Content-Range: bytes 10-19/1000", "ETag: " ETAG, NULL);
  EXPECT (q, a, VERDICT_OK, NULL);
  /* Case and the '*' total. */
  a = headers (206, "content-range: BYTES 10-19/*", "ETag: " ETAG, NULL);
  q.expect_total = -1;
  EXPECT (q, a, VERDICT_OK, NULL);
  q.expect_total = SIZE;
  EXPECT (q, a, VERDICT_REFUSED, "(no total size)");

  a = headers (206, "ETag: " ETAG, NULL);
  EXPECT (q, a, VERDICT_REFUSED, "without a valid Content-Range");
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    a = headers (206, bad[i], "ETag: " ETAG, NULL);
    if (a.has_content_range) {
      fprintf (stderr, "test-verdict: \"%s\" was taken\n", bad[i]);
      failures++;
    }
    EXPECT (q, a, VERDICT_REFUSED, "without a valid Content-Range");
  }
  a = headers (206, "Content-Range: bytes 11-20/1000", "ETag: " ETAG, NULL);
  EXPECT (q, a, VERDICT_REFUSED, "bytes 11-20, not the requested range");
  a = headers (206, "Content-Range: bytes 10-18/1000", "ETag: " ETAG, NULL);
  EXPECT (q, a, VERDICT_REFUSED, "not the requested range");
  a = headers (206, "Content-Range: bytes 0-19/1000", "ETag: " ETAG, NULL);
  EXPECT (q, a, VERDICT_REFUSED, "not the requested range");
  a = headers (206, "Content-Range: bytes 10-19/2000", "ETag: " ETAG, NULL);
  EXPECT (q, a, VERDICT_OBJECT_CHANGED, "now 2000");

  /* Twice: the same value is harmless, two different ones are not. */
  a = headers (206, "Content-Range: bytes 10-19/1000",
               "Content-Range: bytes 10-19/1000", "ETag: " ETAG, NULL);
  EXPECT (q, a, VERDICT_OK, NULL);
  a = headers (206, "Content-Range: bytes 10-19/1000",
               "Content-Range: bytes 20-29/1000", "ETag: " ETAG, NULL);
  EXPECT (q, a, VERDICT_REFUSED, "two different");
  a = headers (206, "Content-Range: bytes 10-19/1000",
               "Content-Range: garbage", "ETag: " ETAG, NULL);
  EXPECT (q, a, VERDICT_REFUSED, "two different");
  a = headers (206, "Content-Range: bytes 10-19/1000", "Content-Length: 10",
               "Content-Length: 11", "ETag: " ETAG, NULL);
  EXPECT (q, a, VERDICT_REFUSED, "two different");
  a = headers (206, "Content-Range: bytes 10-19/1000", "Content-Length: 11",
               "ETag: " ETAG, NULL);
  EXPECT (q, a, VERDICT_REFUSED, "Content-Length 11");
  a = headers (206, "Content-Range: bytes 10-19/1000",
               "Content-Length: 99999999999999999999", "ETag: " ETAG, NULL);
  EXPECT (q, a, VERDICT_OK, NULL);   /* unparsable: the body decides */
}

static void
bodies (void)
{
  struct asked q = get (10, 19);
  struct answer a = GOOD ("bytes 10-19/1000", "10");

  a.body_len = 10;
  EXPECT (q, a, VERDICT_OK, NULL);
  a.body_len = 11;
  EXPECT (q, a, VERDICT_REFUSED, "more than the 10 bytes");
  a = ended (GOOD ("bytes 10-19/1000", "10"), 9, CURLE_OK);
  EXPECT (q, a, VERDICT_RETRY, "short body: 9 of 10");
  a = ended (GOOD ("bytes 10-19/1000", "10"), 0, CURLE_OK);
  EXPECT (q, a, VERDICT_RETRY, "short body: 0 of 10");
  a = ended (GOOD ("bytes 10-19/1000", "10"), 4, CURLE_PARTIAL_FILE);
  EXPECT (q, a, VERDICT_RETRY, NULL);
  a = ended (GOOD ("bytes 10-19/1000", "10"), 4, CURLE_RECV_ERROR);
  EXPECT (q, a, VERDICT_RETRY, NULL);
  /* Over HTTP/2 libcurl names only the frame: the message says first
   * that the body was cut short.
   */
  a = ended (GOOD ("bytes 10-19/1000", "10"), 4, CURLE_HTTP2_STREAM);
  EXPECT (q, a, VERDICT_RETRY, "short body: 4 of 10 bytes: ");
  a = ended (GOOD ("bytes 10-19/1000", "10"), 4,
             CURLE_PEER_FAILED_VERIFICATION);
  EXPECT (q, a, VERDICT_REFUSED, NULL);

  /* A connection refused is retried only once serving. */
  answer_reset (&a);
  a = ended (a, 0, CURLE_COULDNT_CONNECT);
  EXPECT (q, a, VERDICT_RETRY, NULL);
  q.serving = false;
  EXPECT (q, a, VERDICT_REFUSED, NULL);
  q.serving = true;

  /* Body bytes before the headers ended. */
  answer_reset (&a);
  a.status = 206;
  a.body_len = 3;
  a.body_early = true;
  EXPECT (q, a, VERDICT_REFUSED, "before the end of the headers");
  q.is_file = true;             /* file:// has no headers */
  EXPECT (q, a, VERDICT_OK, NULL);
  a = ended (a, 10, CURLE_OK);
  EXPECT (q, a, VERDICT_OK, NULL);
  a.body_len = 9;
  EXPECT (q, a, VERDICT_RETRY, "short body");
  q.is_file = false;

  /* Stopped, even with a good answer under way. */
  a = GOOD ("bytes 10-19/1000", "10");
  a.stopped = true;
  a = ended (a, 5, CURLE_ABORTED_BY_CALLBACK);
  EXPECT (q, a, VERDICT_STOPPED, "shutting down");
}

static void
empty_objects (void)
{
  struct asked q = get (0, 0);
  struct answer a;

  q.allow_empty = true;
  q.expect_total = -1;
  q.pinned = false;
  a = ended (headers (416, "Content-Range: bytes */0", NULL), 0, CURLE_OK);
  EXPECT (q, a, VERDICT_EMPTY, NULL);
  a = ended (headers (416, "Content-Range: bytes */0x", NULL), 0, CURLE_OK);
  EXPECT (q, a, VERDICT_REFUSED, "HTTP 416");
  a = ended (headers (200, "Content-Length: 0", NULL), 0, CURLE_OK);
  EXPECT (q, a, VERDICT_EMPTY, NULL);
  a = ended (headers (200, "Content-Length: 0", NULL), 5, CURLE_OK);
  EXPECT (q, a, VERDICT_REFUSED, "carried a body");
  /* Not when the size is known. */
  q.allow_empty = false;
  a = ended (headers (416, "Content-Range: bytes */0", NULL), 0, CURLE_OK);
  EXPECT (q, a, VERDICT_REFUSED, "HTTP 416");
}

/* The probe's GET of the first 8 KiB while the size is unknown: a
 * smaller object answers with what it has, which Content-Range must say
 * exactly (first byte to its last); reads later never get that leeway.
 */
static void
probe_answers (void)
{
  struct asked q = get (0, 8191);
  struct answer a;

  q.allow_empty = q.allow_short = true;
  q.expect_total = -1;
  q.pinned = false;
  a = headers (206, "Content-Range: bytes 0-8191/1000000",
               "Content-Length: 8192", NULL);
  EXPECT (q, a, VERDICT_OK, NULL);
  a = ended (a, 8192, CURLE_OK);
  EXPECT (q, a, VERDICT_OK, NULL);
  /* An object of 100 bytes. */
  a = headers (206, "Content-Range: bytes 0-99/100", "Content-Length: 100",
               NULL);
  EXPECT (q, a, VERDICT_OK, NULL);
  a = ended (a, 100, CURLE_OK);
  EXPECT (q, a, VERDICT_OK, NULL);
  a = ended (headers (206, "Content-Range: bytes 0-99/100", NULL), 99,
             CURLE_OK);
  EXPECT (q, a, VERDICT_RETRY, "short body: 99 of 100");
  a = ended (headers (206, "Content-Range: bytes 0-99/100", NULL), 101,
             CURLE_OK);
  EXPECT (q, a, VERDICT_REFUSED, "more than the 100 bytes");
  /* Short, but not at the object's end, or without a total. */
  a = headers (206, "Content-Range: bytes 0-99/1000", NULL);
  EXPECT (q, a, VERDICT_REFUSED, "bytes 0-99, not the requested");
  a = headers (206, "Content-Range: bytes 0-99/*", NULL);
  EXPECT (q, a, VERDICT_REFUSED, "bytes 0-99, not the requested");
  a = headers (206, "Content-Range: bytes 1-100/101", NULL);
  EXPECT (q, a, VERDICT_REFUSED, "bytes 1-100, not the requested");
  /* The whole object instead of a range: no ranges, no export. */
  a = headers (200, "Content-Length: 100", NULL);
  EXPECT (q, a, VERDICT_REFUSED, "HTTP 200");
  /* A read, once the size is known, gets no such leeway. */
  q.allow_empty = q.allow_short = false;
  q.expect_total = 100;
  q.last = 199;
  a = headers (206, "Content-Range: bytes 0-99/100", NULL);
  EXPECT (q, a, VERDICT_REFUSED, "bytes 0-99, not the requested");
}

/* Feed the multipart parser of a (206 multipart/byteranges, boundary
 * XYZ, asked for bytes 0-9, 100-109 and 200-209 of 1000) the first
 * sent of those parts, then more; a's parser starts afresh.
 */
static struct answer
parts (struct answer a, unsigned sent, const char *more)
{
  static struct span spans[3];
  char part[128];
  unsigned i;

  for (i = 0; i < 3; i++)
    spans[i] = (struct span) { .first = 100 * i, .last = 100 * i + 9 };
  ranges_multipart_start (&a.mp, a.boundary, spans, 3, 1000);
  for (i = 0; i < sent; i++) {
    snprintf (part, sizeof part, "--XYZ\r\nContent-Range: bytes %u-%u/1000"
              "\r\n\r\n0123456789\r\n", 100 * i, 100 * i + 9);
    ranges_multipart_feed (&a.mp, part, strlen (part));
  }
  ranges_multipart_feed (&a.mp, more, strlen (more));
  return a;
}

static void
several_ranges (void)
{
  struct asked q = get (0, 9);
  struct answer a, e;

  q.nranges = 3;
  /* The parser's state is the answer's: the verdict reads it there. */
  a = headers (206, "Content-Type: multipart/byteranges; boundary=XYZ",
               "ETag: " ETAG, NULL);
  EXPECT (q, a, VERDICT_PARTS, NULL);
  a = parts (a, 1, "");
  EXPECT (q, a, VERDICT_PARTS, NULL);
  e = ended (a, 100, CURLE_OK);
  ranges_multipart_complete (&e.mp);           /* as exchange.c at the end */
  EXPECT (q, e, VERDICT_NOT_THE_PARTS_ASKED_FOR, "before the close delim");
  a = parts (a, 2, "--XYZ--\r\n");
  e = ended (a, 200, CURLE_OK);
  ranges_multipart_complete (&e.mp);           /* as exchange.c at the end */
  EXPECT (q, e, VERDICT_NOT_THE_PARTS_ASKED_FOR, "ranges missing");
  a = parts (a, 3, "--XYZ--\r\n");
  EXPECT (q, a, VERDICT_PARTS, NULL);
  e = ended (a, 300, CURLE_OK);
  ranges_multipart_complete (&e.mp);           /* as exchange.c at the end */
  EXPECT (q, e, VERDICT_PARTS, NULL);
  /* Cut off by the transport or a shutdown: how it ended decides, as for
   * one range (a retry, a stop), not the parts missing.
   */
  a = parts (a, 2, "");
  e = ended (a, 200, CURLE_RECV_ERROR);
  ranges_multipart_complete (&e.mp);
  EXPECT (q, e, VERDICT_RETRY, NULL);
  e = ended (a, 200, CURLE_ABORTED_BY_CALLBACK);
  e.stopped = true;
  ranges_multipart_complete (&e.mp);
  EXPECT (q, e, VERDICT_STOPPED, "shutting down");
  a = parts (a, 1, "--XYZ\r\nContent-Range: bytes 50-59/1000\r\n\r\n");
  EXPECT (q, a, VERDICT_NOT_THE_PARTS_ASKED_FOR, "not one of the ranges");
  e = ended (a, 100, CURLE_OK);
  ranges_multipart_complete (&e.mp);           /* as exchange.c at the end */
  EXPECT (q, e, VERDICT_NOT_THE_PARTS_ASKED_FOR, "not one of the ranges");

  /* One range (merged, or only the first) for several asked. */
  a = headers (206, "Content-Range: bytes 0-99/1000", "ETag: " ETAG, NULL);
  EXPECT (q, a, VERDICT_NOT_THE_PARTS_ASKED_FOR, "not multipart");
  a = headers (206, "Content-Range: bytes 0-99/1000",
               "Content-Type: multipart/byteranges; boundary=XYZ",
               "ETag: " ETAG, NULL);
  EXPECT (q, a, VERDICT_NOT_THE_PARTS_ASKED_FOR, "not multipart");
  a = headers (200, "Content-Length: 1000", NULL);
  EXPECT (q, a, VERDICT_NOT_THE_PARTS_ASKED_FOR, "3 ranges");
  a = headers (416, NULL);
  EXPECT (q, a, VERDICT_NOT_THE_PARTS_ASKED_FOR, "HTTP 416");
  a = headers (400, NULL);
  EXPECT (q, a, VERDICT_NOT_THE_PARTS_ASKED_FOR, "HTTP 400");
  a = headers (503, NULL);
  EXPECT (q, a, VERDICT_RETRY, "HTTP 503");
  a = headers (412, NULL);
  EXPECT (q, a, VERDICT_OBJECT_CHANGED, "412");
  a = headers (206, "Content-Type: multipart/byteranges; boundary=XYZ",
               "ETag: \"v2\"", NULL);
  EXPECT (q, a, VERDICT_OBJECT_CHANGED, "now \"v2\"");

  /* Multipart when a single range was asked. */
  q.nranges = 1;
  a = headers (206, "Content-Type: multipart/byteranges; boundary=XYZ",
               "ETag: " ETAG, NULL);
  EXPECT (q, a, VERDICT_REFUSED, "without a valid Content-Range");
}

static void
validators (void)
{
  struct asked q = get (0, 9);
  struct answer a;

  a = headers (206, "Content-Range: bytes 0-9/1000", "ETag: \"v2\"", NULL);
  EXPECT (q, a, VERDICT_OBJECT_CHANGED, "was \"v1\", now \"v2\"");
  a = headers (206, "Content-Range: bytes 0-9/1000", NULL);
  EXPECT (q, a, VERDICT_OBJECT_CHANGED, "carries no ETag");
  a = headers (206, "Content-Range: bytes 0-9/1000", "ETag: " ETAG,
               "ETag: \"v2\"", NULL);
  EXPECT (q, a, VERDICT_OBJECT_CHANGED, "unusable");
  a = headers (206, "Content-Range: bytes 0-9/1000", "ETag: " ETAG,
               "ETag: " ETAG, NULL);
  EXPECT (q, a, VERDICT_OK, NULL);
  a = headers (206, "Content-Range: bytes 0-9/1000", "ETag: \"v\x01\"",
               NULL);
  EXPECT (q, a, VERDICT_OBJECT_CHANGED, "unusable");
  a = headers (206, "Content-Range: bytes 0-9/1000", "ETag: W/" ETAG, NULL);
  EXPECT (q, a, VERDICT_OBJECT_CHANGED, "now W/");
  /* Not entity-tags: "*" or a list in If-Match would match anything. */
  a = headers (206, "Content-Range: bytes 0-9/1000", "ETag: *", NULL);
  EXPECT (q, a, VERDICT_OBJECT_CHANGED, "unusable");
  a = headers (206, "Content-Range: bytes 0-9/1000",
               "ETag: " ETAG ", \"v2\"", NULL);
  EXPECT (q, a, VERDICT_OBJECT_CHANGED, "unusable");
  a = headers (206, "Content-Range: bytes 0-9/1000", "ETag: v1", NULL);
  EXPECT (q, a, VERDICT_OBJECT_CHANGED, "unusable");
  a = headers (206, "Content-Range: bytes 0-9/1000", "ETag: \"\"", NULL);
  q.pin.etag = "\"\"";
  EXPECT (q, a, VERDICT_OK, NULL);
  q.pin.etag = ETAG;

  /* Pinned by Last-Modified. */
  q.pin = (struct pin) { .etag = "", .last_modified = LASTMOD,
                         .last_modified_required = true,
                         .header = "If-Unmodified-Since: " LASTMOD };
  a = headers (206, "Content-Range: bytes 0-9/1000",
               "Last-Modified: " LASTMOD, "ETag: \"anything\"", NULL);
  EXPECT (q, a, VERDICT_OK, NULL);
  a = headers (206, "Content-Range: bytes 0-9/1000",
               "Last-Modified: Wed, 02 Dec 2026 00:00:00 GMT", NULL);
  EXPECT (q, a, VERDICT_OBJECT_CHANGED, "Last-Modified was");
  a = headers (206, "Content-Range: bytes 0-9/1000", "ETag: " ETAG, NULL);
  EXPECT (q, a, VERDICT_OBJECT_CHANGED, "carries no Last-Modified");

  /* A weak ETag: no If-Match, but compared (weakly), and with
   * Last-Modified both are: a replacement within Last-Modified's second
   * changes the ETag.
   */
  q.pin = (struct pin) { .etag = "W/" ETAG, .last_modified = LASTMOD,
                         .etag_required = true,
                         .header = "If-Unmodified-Since: " LASTMOD };
  a = headers (206, "Content-Range: bytes 0-9/1000", "ETag: W/" ETAG,
               "Last-Modified: " LASTMOD, NULL);
  EXPECT (q, a, VERDICT_OK, NULL);
  a = headers (206, "Content-Range: bytes 0-9/1000", "ETag: " ETAG, NULL);
  EXPECT (q, a, VERDICT_OK, NULL);
  a = headers (206, "Content-Range: bytes 0-9/1000", "ETag: W/\"v2\"",
               "Last-Modified: " LASTMOD, NULL);
  EXPECT (q, a, VERDICT_OBJECT_CHANGED, "ETag was W/\"v1\", now W/\"v2\"");
  a = headers (206, "Content-Range: bytes 0-9/1000",
               "Last-Modified: " LASTMOD, NULL);
  EXPECT (q, a, VERDICT_OBJECT_CHANGED, "carries no ETag");
  a = headers (206, "Content-Range: bytes 0-9/1000", "ETag: W/" ETAG,
               "Last-Modified: Wed, 02 Dec 2026 00:00:00 GMT", NULL);
  EXPECT (q, a, VERDICT_OBJECT_CHANGED, "Last-Modified was");
  /* An ETag only HEAD gave at start-up: compared where an answer has
   * one, not required.
   */
  q.pin.etag_required = false;
  a = headers (206, "Content-Range: bytes 0-9/1000", NULL);
  EXPECT (q, a, VERDICT_OK, NULL);
  a = headers (206, "Content-Range: bytes 0-9/1000", "ETag: \"v2\"", NULL);
  EXPECT (q, a, VERDICT_OBJECT_CHANGED, "now \"v2\"");

  /* A mirror proven by its digest alone (no validator): every answer
   * must state that digest, in that header (its name in any case).
   */
  q.pin = (struct pin) { .etag = "", .last_modified = "", .header = "",
                         .digest = "Repr-Digest:sha-256=:AAAA:" };
  a = headers (206, "Content-Range: bytes 0-9/1000",
               "repr-digest: sha-256=:AAAA:", NULL);
  EXPECT (q, a, VERDICT_OK, NULL);
  a = headers (206, "Content-Range: bytes 0-9/1000",
               "Repr-Digest: sha-256=:BBBB:", NULL);
  EXPECT (q, a, VERDICT_OBJECT_CHANGED, "states another");
  a = headers (206, "Content-Range: bytes 0-9/1000",
               "Digest: sha-256=AAAA", NULL);
  EXPECT (q, a, VERDICT_OBJECT_CHANGED, "carries no Repr-Digest");
  a = headers (206, "Content-Range: bytes 0-9/1000", NULL);
  EXPECT (q, a, VERDICT_OBJECT_CHANGED, "carries no Repr-Digest");

  /* Not pinned: anything goes. */
  q.pinned = false;
  a = headers (206, "Content-Range: bytes 0-9/1000", "ETag: \"v\x01\"",
               NULL);
  EXPECT (q, a, VERDICT_OK, NULL);
}

int
main (void)
{
  status_classes ();
  head_and_put ();
  content_ranges ();
  bodies ();
  empty_objects ();
  probe_answers ();
  several_ranges ();
  validators ();
  printf ("test-verdict: %u cases, %u failed\n", cases, failures);
  return failures ? 1 : 0;
}
