/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The verdict on an answer (see verdict.h).  Over HTTP a GET must be 206
 * with exactly the requested range.  Its Content-Range must be exactly a
 * requested range of an object of the size found at start-up.  In a
 * multipart answer each part's Content-Range must be, as ranges.c checks.
 * And the body must be exactly those bytes.  HEAD and PUT answers are
 * judged by their status once they ended (judge_status).  That also says
 * when the server does not serve the request at all (VERDICT_UNSUPPORTED).
 *
 * callbacks.c asks at the end of each header block and on each piece of
 * body, and exchange.c at the end of the transfer.  The same facts give the
 * same verdict, so a refusal at the headers is also the verdict at the end.
 * Judging at the headers matters for a server that ignores Range and starts
 * sending the whole object.  It is cut off after its headers, not after the
 * whole object.
 */

#include <config.h>

#include <inttypes.h>
#include <stdio.h>

#include "rules/rules.h"

const char *
verdict_name (enum verdict v)
{
  switch (v) {
  case VERDICT_OK: return "OK";
  case VERDICT_PARTS: return "PARTS";
  case VERDICT_EMPTY: return "EMPTY";
  case VERDICT_REDIRECT: return "REDIRECT";
  case VERDICT_RETRY: return "RETRY";
  case VERDICT_RETRY_FRESH: return "RETRY_FRESH";
  case VERDICT_REFUSED: return "REFUSED";
  case VERDICT_UNSUPPORTED: return "UNSUPPORTED";
  case VERDICT_NOT_THE_PARTS_ASKED_FOR: return "NOT_THE_PARTS_ASKED_FOR";
  case VERDICT_OBJECT_CHANGED: return "OBJECT_CHANGED";
  case VERDICT_STOPPED: return "STOPPED";
  }
  return "?";
}

/* Statuses that say "not now" rather than "no" (RFC 9110 15.5.9,
 * 15.6; RFC 6585 4 for 429).  501 Not Implemented will not change.
 */
static bool
transient_status (long status)
{
  return status == 408 || status == 429 ||
    (status >= 500 && status <= 599 && status != 501);
}

/* Transport failures that another try may not repeat.  Others (TLS
 * verification, a refused protocol, our own callbacks' aborts) will.
 * Before the probe is done a server that cannot be reached is a wrong
 * URL: that fails at start-up at once.
 */
static bool
transient_error (CURLcode rc, bool serving)
{
  switch (rc) {
  case CURLE_COULDNT_RESOLVE_HOST:
  case CURLE_COULDNT_CONNECT:
    return serving;
  case CURLE_RECV_ERROR:
  case CURLE_SEND_ERROR:
  case CURLE_PARTIAL_FILE:
  case CURLE_OPERATION_TIMEDOUT:
  case CURLE_GOT_NOTHING:
  case CURLE_HTTP2:
  case CURLE_HTTP2_STREAM:
    return true;
  default:
    return false;
  }
}

/* Statuses that name a new location for the same request (RFC 9110
 * 15.4); 304 Not Modified is not one.
 */
static bool
is_redirect_status (long status)
{
  switch (status) {
  case 301: case 302: case 303: case 307: case 308:
    return true;
  default:
    return false;
  }
}

/* A status other than the one wanted, for a request of one range or
 * several.
 */
static enum verdict
bad_status (const struct asked *q, const struct answer *a, char *why,
            size_t size)
{
  if (a->status == 412) {
    snprintf (why, size, "the object at the URL changed since it was "
              "opened (HTTP 412 Precondition Failed)");
    return VERDICT_OBJECT_CHANGED;
  }
  /* 416 for bytes inside an object of known size: the object shrank if
   * the answer says so ("bytes STAR/N"), else something on the way (a
   * caching proxy with a short or stale copy has been seen to do this)
   * got it wrong, which another connection may not.
   */
  if (a->status == 416 && q->nranges == 1 && q->expect_total >= 0) {
    if (a->unsatisfied_total >= 0 && a->unsatisfied_total != q->expect_total) {
      snprintf (why, size, "the object at the URL changed since it was "
                "opened: its size was %" PRIi64 ", now %" PRIi64
                " (HTTP 416 Range Not Satisfiable)",
                q->expect_total, a->unsatisfied_total);
      return VERDICT_OBJECT_CHANGED;
    }
    snprintf (why, size, "the server answered HTTP 416 Range Not "
              "Satisfiable for bytes %" PRIu64 "-%" PRIu64 ", which lie "
              "inside the object's %" PRIi64 " bytes (a cache or proxy "
              "with a short or stale copy?)",
              q->first, q->last, q->expect_total);
    return VERDICT_RETRY_FRESH;
  }
  snprintf (why, size,
            "the server answered HTTP %ld instead of 206 Partial Content%s",
            a->status,
            is_redirect_status (a->status) && !q->follow_redirects
            ? " (a redirect: followlocation=false follows none)" : "");
  return transient_status (a->status) ? VERDICT_RETRY : VERDICT_REFUSED;
}

/* The answer to a request for several ranges must be 206 with a
 * multipart/byteranges body.  200 (the whole object: S3 and others
 * ignore a multi-range request), a single range covering them (RFC 9110
 * lets a server merge ranges), 416, 400 (too many ranges) or 501 mean that
 * this server cannot be asked that way: the caller asks again one range
 * per request.
 */
static enum verdict
multi_headers (const struct asked *q, const struct answer *a, char *why,
               size_t size)
{
  if (a->status == 206 && !validators_same_object (q, a, why, size))
    return VERDICT_OBJECT_CHANGED;
  if (a->status == 206 && !a->has_content_range && a->boundary[0])
    return VERDICT_PARTS;
  if (a->status == 200 || a->status == 206 || a->status == 400 ||
      a->status == 416 || a->status == 501) {
    snprintf (why, size, "a request for %u ranges was answered with "
              "HTTP %ld%s", q->nranges, a->status,
              a->status == 206 ? " but not multipart/byteranges" : "");
    return VERDICT_NOT_THE_PARTS_ASKED_FOR;
  }
  return bad_status (q, a, why, size);
}

/* Redirects that name a new location for the same request (RFC 9110
 * 15.4).  route.c follows them itself, not libcurl, to choose what
 * each hop may carry.
 */
static bool
is_redirect (const struct asked *q, const struct answer *a)
{
  return is_redirect_status (a->status) && q->follow_redirects &&
    a->has_location;
}

/* The answer to a GET of the object's first bytes while its size is not
 * known (the probe's, writing.c's size check) that proves it empty:
 * 416 with "Content-Range: bytes STAR/0" (nginx, RFC 9110 15.5.17), or
 * 200 with no body (Apache ignores a Range for an empty file).
 */
static bool
is_empty_answer (const struct answer *a)
{
  return (a->status == 416 && a->unsatisfied_total == 0) ||
    (a->status == 200 && a->content_length == 0);
}

/* The probe asks for the object's first bytes without knowing its size:
 * a smaller object is answered with the bytes it has (RFC 9110 14.1.1,
 * a last-pos past the end is taken to be the end), which the
 * Content-Range must then say: from the first byte asked for to the
 * last byte of the object.
 */
static bool
short_at_end (const struct asked *q, const struct answer *a)
{
  return q->allow_short && a->has_content_range && a->cr_total >= 0 &&
    a->cr_first == q->first && a->cr_last < q->last &&
    a->cr_last + 1 == (uint64_t) a->cr_total;
}

/* How many bytes the body of a single-range answer must have. */
static uint64_t
expected_bytes (const struct asked *q, const struct answer *a)
{
  if (short_at_end (q, a))
    return a->cr_last - q->first + 1;
  return q->last - q->first + 1;
}

/* The verdict on a complete header block. */
static enum verdict
judge_headers (const struct asked *q, const struct answer *a, char *why,
               size_t size)
{
  uint64_t count = expected_bytes (q, a);

  if (is_redirect (q, a))
    return VERDICT_REDIRECT;
  if (q->method != GET || q->is_file)
    return VERDICT_OK;
  if (a->framing_twice) {
    snprintf (why, size, "an answer with two different Content-Length or "
              "Content-Range headers");
    return VERDICT_REFUSED;
  }
  if (q->nranges > 1)
    return multi_headers (q, a, why, size);
  if (q->allow_empty && is_empty_answer (a))
    return VERDICT_EMPTY;
  if (a->status == 200) {
    snprintf (why, size, "the server answered HTTP 200 instead of 206 "
              "Partial Content: it does not support range requests");
    return VERDICT_REFUSED;
  }
  if (a->status != 206)
    return bad_status (q, a, why, size);
  if (!validators_same_object (q, a, why, size))
    return VERDICT_OBJECT_CHANGED;
  if (!a->has_content_range) {
    snprintf (why, size, "206 answer without a valid Content-Range");
    return VERDICT_REFUSED;
  }
  if (a->cr_first != q->first ||
      (a->cr_last != q->last && !short_at_end (q, a))) {
    snprintf (why, size, "the server sent Content-Range bytes %" PRIu64
              "-%" PRIu64 ", not the requested range",
              a->cr_first, a->cr_last);
    return VERDICT_REFUSED;
  }
  if (q->expect_total >= 0 && a->cr_total < 0) {
    snprintf (why, size, "the server sent Content-Range bytes %" PRIu64
              "-%" PRIu64 "/* (no total size), so the object's size of "
              "%" PRIi64 " bytes cannot be checked", a->cr_first, a->cr_last,
              q->expect_total);
    return VERDICT_REFUSED;
  }
  if (q->expect_total >= 0 && a->cr_total != q->expect_total) {
    snprintf (why, size, "the object at the URL changed since it was "
              "opened: its size was %" PRIi64 ", now %" PRIi64,
              q->expect_total, a->cr_total);
    return VERDICT_OBJECT_CHANGED;
  }
  if (a->content_length >= 0 && (uint64_t) a->content_length != count) {
    snprintf (why, size, "Content-Length %" PRIi64 " does not match the "
              "%" PRIu64 " bytes requested", a->content_length, count);
    return VERDICT_REFUSED;
  }
  return VERDICT_OK;
}

/* Whether the body of an answer judged v (not a failure) carries the
 * object's bytes: not a HEAD's or a PUT's, a redirect's, or that of a
 * proof that the object is empty.  callbacks.c ignores those bodies
 * (reads them to their end, within limits), and they are not judged.
 */
bool
verdict_body_has_bytes (const struct asked *q, enum verdict v)
{
  return q->method == GET && v != VERDICT_REDIRECT && v != VERDICT_EMPTY;
}

/* The body as far as it came, after headers that gave v (not a
 * failure).
 */
static enum verdict
judge_body (const struct asked *q, const struct answer *a, enum verdict v,
            char *why, size_t size)
{
  uint64_t count = expected_bytes (q, a);

  if (!verdict_body_has_bytes (q, v))
    return v;
  if (!q->is_file && a->body_early) {
    snprintf (why, size, "body before the end of the headers");
    return VERDICT_REFUSED;
  }
  if (a->mp.refused) {
    snprintf (why, size, "%s", a->mp.why);
    return VERDICT_NOT_THE_PARTS_ASKED_FOR;
  }
  if (q->nranges == 1 && a->body_len > count) {
    snprintf (why, size, "the server sent more than the %" PRIu64
              " bytes requested", count);
    return VERDICT_REFUSED;
  }
  return v;
}

/* Answers to HEAD that mean "ask a ranged GET instead": presigned
 * object-store URLs are signed for GET only and answer HEAD with 403,
 * and some servers do not implement HEAD at all.
 */
static bool
head_unsupported (long status)
{
  return status == 403 || status == 405 || status == 501;
}

/* Answers to a PUT with Content-Range that mean "no partial writes
 * here": RFC 9110 leaves partial PUT to the server, and one that does
 * not take it may say so with 400 (as RFC 9110 14.5 suggests), 405 or
 * 501.
 */
static bool
put_unsupported (long status)
{
  return status == 400 || status == 405 || status == 501;
}

/* HEAD and PUT, whose status is the whole answer (file:// has none):
 * 2xx is done, a transient status is worth another try, and
 * UNSUPPORTED tells the caller to go another way (probe.c asks a GET,
 * writing.c says to serve the export read-only).
 */
static enum verdict
judge_status (const struct asked *q, const struct answer *a, char *why,
              size_t size)
{
  if (q->is_file || (a->status >= 200 && a->status <= 299))
    return VERDICT_OK;
  if (transient_status (a->status)) {
    snprintf (why, size, "the server answered HTTP %ld", a->status);
    return VERDICT_RETRY;
  }
  if (q->method == HEAD && head_unsupported (a->status)) {
    snprintf (why, size, "HTTP %ld: the server does not answer HEAD",
              a->status);
    return VERDICT_UNSUPPORTED;
  }
  if (q->method == PUT && put_unsupported (a->status)) {
    snprintf (why, size, "the server refused a partial PUT with HTTP %ld: "
              "it does not take partial writes (use nbdkit -r to serve "
              "it read-only)", a->status);
    return VERDICT_UNSUPPORTED;
  }
  snprintf (why, size, "the server answered HTTP %ld", a->status);
  return VERDICT_REFUSED;
}

/* How the transfer ended, after headers and body that gave v (not a
 * failure).
 */
static enum verdict
judge_end (const struct asked *q, const struct answer *a, enum verdict v,
           char *why, size_t size)
{
  uint64_t count = expected_bytes (q, a);

  if (a->stopped) {
    snprintf (why, size, "stopped: nbdkit is shutting down or the client "
              "disconnected");
    return VERDICT_STOPPED;
  }
  /* A body that carries none of the object's bytes was cut off for its
   * length or its slowness: the answer itself is complete.
   */
  if (a->rc != CURLE_OK &&
      !(a->ignore_cut && (a->rc == CURLE_WRITE_ERROR ||
                          a->rc == CURLE_ABORTED_BY_CALLBACK))) {
    /* A body cut off by the transport (over HTTP/2, a stream reset or
     * ended before its Content-Length: libcurl names only the frame)
     * says so first.
     */
    char cut[80] = "";

    if (q->method == GET && q->nranges == 1 && a->headers_done &&
        a->status == 206 && a->body_len < count)
      snprintf (cut, sizeof cut, "short body: %" PRIu64 " of %" PRIu64
                " bytes: ", a->body_len, count);
    snprintf (why, size, "%s%.100s%s%.150s", cut,
              a->rc_text ? a->rc_text : "",
              a->errbuf && a->errbuf[0] ? ": " : "",
              a->errbuf ? a->errbuf : "");
    return transient_error (a->rc, q->serving)
      ? VERDICT_RETRY : VERDICT_REFUSED;
  }
  /* "200 with Content-Length: 0" is no proof of an empty object when
   * a body came all the same (Transfer-Encoding: chunked wins).
   */
  if (v == VERDICT_EMPTY && a->status == 200 && a->body_len > 0) {
    snprintf (why, size, "an answer that says the object is empty "
              "(Content-Length: 0) carried a body");
    return VERDICT_REFUSED;
  }
  if (v == VERDICT_REDIRECT || v == VERDICT_EMPTY)
    return v;
  /* A body cut short without a transport error (a server that closed
   * a chunked answer early, file:// at end of file) is an error too.
   */
  if (q->method == GET) {
    if (q->nranges > 1 && !a->mp.complete) {
      snprintf (why, size, "%s", a->mp.why);
      return VERDICT_NOT_THE_PARTS_ASKED_FOR;
    }
    if (q->nranges == 1 && a->body_len != count) {
      snprintf (why, size, "short body: %" PRIu64 " of %" PRIu64 " bytes",
                a->body_len, count);
      return VERDICT_RETRY;
    }
    return v;
  }
  return judge_status (q, a, why, size);
}

enum verdict
verdict_judge (const struct asked *q, const struct answer *a, char *why,
               size_t size)
{
  enum verdict v = VERDICT_OK;

  why[0] = '\0';
  if (a->headers_done)
    v = judge_headers (q, a, why, size);
  if (!verdict_failed (v))
    v = judge_body (q, a, v, why, size);
  if (!verdict_failed (v) && a->complete)
    v = judge_end (q, a, v, why, size);
  return v;
}
