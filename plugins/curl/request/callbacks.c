/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * libcurl's callbacks for every request.  They take the answer in as it
 * arrives, into struct answer: the status, the header facts, the body's
 * length and where its bytes go.  After the headers and on each piece of
 * body they ask rules/verdict.c whether it is the answer asked for.  So no
 * byte of a refused answer reaches a read's buffer.  They also send a PUT's
 * body, and cut off bodies that carry no object bytes and drip on.  And
 * they end a transfer when nbdkit shuts down, when it stalls for timeout=,
 * and, with mirrors, when its source is much slower than expected.
 */

#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <nbdkit-plugin.h>

#include "request/xfer.h"

/* The answer's body carries none of the object's bytes: it is read (to
 * keep the connection) up to MAX_IGNORED_BODY bytes, and such bodies for
 * at most timeout= seconds in all in one try (a chain of redirects with
 * dripping bodies included), then cut off; write_cb and progress_cb
 * enforce that.
 */
static void
ignore_body (struct xfer *x)
{
  if (x->ignoring_since.tv_sec == 0 && x->ignoring_since.tv_nsec == 0)
    clock_gettime (CLOCK_MONOTONIC, &x->ignoring_since);
}

/* Bodies that carry none of the object's bytes (verdict.c says which). */
static bool
body_ignored (const struct xfer *x)
{
  return !verdict_body_has_bytes (&x->q, x->v);
}

/* Judge the answer as far as it came: false if it is refused. */
bool
callbacks_judge (struct xfer *x)
{
  x->v = verdict_judge (&x->q, &x->a, x->why, sizeof x->why);
  return !verdict_failed (x->v);
}

/* Called at the end of each header block.  Returns false to abort. */
static bool
headers_end (struct xfer *x)
{
  /* An interim answer: the real one follows, its status line first
   * (header_cb takes the next line for one while the status is 0).
   */
  if (x->a.status >= 100 && x->a.status <= 199) {
    answer_reset (&x->a);
    return true;
  }
  x->a.headers_done = true;
  if (!callbacks_judge (x))
    return false;
  if (x->v == VERDICT_PARTS) {
    ranges_multipart_start (&x->a.mp, x->a.boundary, x->spans, x->q.nranges,
                     x->q.expect_total);
  }
  if (body_ignored (x))
    ignore_body (x);
  return true;
}

/* Acknowledge what has arrived at once instead of up to 40 ms later.
 * Linux delays an ACK on a connection that looks interactive, and a
 * server that holds back a small last segment until the previous one is
 * acknowledged (Nagle, or nginx's "tcp_nopush on", Debian's default) then
 * waits for it: keep-alive answers of 37-67 KiB from nginx with
 * tcp_nopush took 43 ms instead of 0.3 ms on loopback, which made
 * multi-range reads 8 times slower.  TCP_QUICKACK is not sticky (the
 * kernel goes back to delaying), so it is set again for each answer.
 */
static void
ack_now (struct xfer *x)
{
#if HAVE_DECL_TCP_QUICKACK
  int one = 1;

  if (x->conn->sock != CURL_SOCKET_BAD)
    setsockopt (x->conn->sock, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
#else
  (void) x;             /* no such option here: the ACK comes when it comes */
#endif
}

/* A Location header's value, kept whole for route.c; one too long for
 * the field, or with a NUL, is kept empty (and redirect_next refuses
 * it).
 */
static void
note_location (struct xfer *x, const char *v, size_t len)
{
  while (len > 0 && (*v == ' ' || *v == '\t'))
    v++, len--;
  while (len > 0 && strchr (" \t\r\n", v[len - 1]) != NULL)
    len--;
  x->a.has_location = true;
  x->a.location[0] = '\0';
  if (len < sizeof x->a.location && memchr (v, '\0', len) == NULL) {
    memcpy (x->a.location, v, len);
    x->a.location[len] = '\0';
  }
}

/* A header line of len bytes, its ending cut off, split at its colon
 * and handed to the answer; a line without a colon is no header.
 */
static void
take_header (struct xfer *x, char *line, size_t len)
{
  char *v = strchr (line, ':'), *end;

  if (v == NULL)
    return;
  *v++ = '\0';
  v += strspn (v, " \t");
  /* From the line's end, not the first NUL: a validator with a NUL in
   * it must be seen whole to be refused.
   */
  for (end = line + len; end > v && (end[-1] == ' ' || end[-1] == '\t');)
    end--;
  *end = '\0';
  if (!answer_header (&x->a, line, v, end - v))
    nbdkit_debug ("%s: ignoring a malformed Content-Range", x->what);
}

/* Each line of the answer's header blocks.  The status line is an
 * answer's first line (answer_reset, at the exchange's start and after
 * an interim 1xx answer's headers, starts a block), when it is one:
 * libcurl's file:// handler gives header lines and no status line.
 * Redirects are separate exchanges (route.c), libcurl asks for no
 * credentials of its own (Basic only) and hides a proxy's CONNECT
 * answer, so no other answer comes first.  Any later line is a header
 * or a trailer, whatever it starts with: one named "HTTP/x" taken for a
 * status line would lose the status and the headers before it, and
 * every answer would be refused.
 */
static size_t
header_cb (char *data, size_t size, size_t nmemb, void *opaque)
{
  struct xfer *x = opaque;
  size_t len = size * nmemb;
  char line[1024];
  char *v;
  bool first;

  if (len == 0 || (len <= 2 && (data[0] == '\r' || data[0] == '\n')))
    return headers_end (x) ? len : 0;
  first = !x->a.in_block;
  x->a.in_block = true;

  /* Presigned URLs make Locations longer than other headers. */
  if (len >= 9 && strncasecmp (data, "location:", 9) == 0) {
    note_location (x, data + 9, len - 9);
    return len;
  }

  /* Keep a NUL-terminated copy without the line ending.  A longer line
   * is none of the headers this callback looks at, all of which are
   * short, but a validator or a digest that long must not go unnoticed.
   */
  if (len >= sizeof line) {
    answer_long_header (&x->a, data, len);
    return len;
  }
  memcpy (line, data, len);
  while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == '\n'))
    len--;
  line[len] = '\0';

  if (first && strncmp (line, "HTTP/", 5) == 0) {
    ack_now (x);
    v = strchr (line, ' ');
    x->a.status = v ? strtol (v + 1, NULL, 10) : 0;
    return len == 0 ? 0 : size * nmemb;
  }

  /* An obsolete folded line continues the header before it. */
  if (line[0] == ' ' || line[0] == '\t') {
    answer_folded (&x->a);
    return size * nmemb;
  }
  take_header (x, line, len);
  return size * nmemb;
}

/* The body of an answer that carries no bytes of the object (to a PUT,
 * a redirect, a 416) is read so that the connection can be kept, up to
 * this much; past it the connection is dropped instead.
 */
#define MAX_IGNORED_BODY (1024 * 1024)

static size_t
write_cb (char *data, size_t size, size_t nmemb, void *opaque)
{
  struct xfer *x = opaque;
  size_t len = size * nmemb;
  uint64_t pos = x->a.body_len;

  x->a.body_len += len;
  if (body_ignored (x)) {
    if (x->a.body_len <= MAX_IGNORED_BODY)
      return len;
    x->a.ignore_cut = true;
    return 0;
  }
  /* Over HTTP the headers were judged already; file:// has none. */
  if (!x->a.headers_done)
    x->a.body_early = true;
  if (x->v == VERDICT_PARTS)
    ranges_multipart_feed (&x->a.mp, data, len); /* refusals: a.mp.refused */
  if (!callbacks_judge (x))
    return 0;
  /* A read's (request.c's attempt): not a probe's, which is no read and
   * never counted as running (mirrors.c).
   */
  if (x->src != NULL && !x->once) {
    if (x->clock.sent_ns == 0)
      sources_sent (x->src, &x->clock);
    sources_got (x->src, len, x->clock.got == 0);
    x->clock.got += len;
    x->clock.last_byte_ns = clock_ns ();
  }
  if (x->sink != NULL) {
    if (!x->sink (x->sink_data, x->sink_base + pos, data, len)) {
      x->a.stopped = x->sink_stopped = true;
      return 0;
    }
    x->sink_done = x->sink_base + pos + len;
    return len;
  }
  if (x->q.nranges == 1)
    ranges_scatter (&x->spans[0], pos, data, len);
  return len;
}

static size_t
read_cb (char *data, size_t size, size_t nmemb, void *opaque)
{
  struct xfer *x = opaque;
  size_t len = size * nmemb;

  if (len > x->count - x->sent)
    len = x->count - x->sent;
  memcpy (data, x->wbuf + x->sent, len);
  x->sent += len;
  return len;
}

/* Whether x's request went out (its connection is set up). */
static bool
request_sent (const struct xfer *x)
{
  curl_off_t sent = 0;

  curl_easy_getinfo (x->conn->easy, CURLINFO_PRETRANSFER_TIME_T, &sent);
  return sent > 0;
}

/* libcurl calls this at least once a second during a transfer, and on
 * each piece of data.  It ends a transfer early when nbdkit is shutting
 * down (a server that went silent must not hold up nbdkit's exit for
 * timeout= seconds; looked at every 200 ms), one that sent no byte for
 * timeout= (timing_stalled), and a body that is ignored when it has
 * dripped on for longer than timeout=.
 */
static int
progress_cb (void *opaque, curl_off_t dltotal, curl_off_t dlnow,
             curl_off_t ultotal, curl_off_t ulnow)
{
  struct xfer *x = opaque;
  struct timespec now;

  clock_gettime (CLOCK_MONOTONIC, &now);
  if ((now.tv_sec - x->stop_checked.tv_sec) * 1000000000L +
      (now.tv_nsec - x->stop_checked.tv_nsec) >= 200000000L) {
    x->stop_checked = now;
    if (x->sink != NULL && !x->sink (x->sink_data, 0, NULL, 0))
      x->sink_stopped = true;
    if (object_stopping () || x->sink_stopped ||
        __atomic_load_n (&x->client_gone, __ATOMIC_RELAXED) ||
        (x->src != NULL && sources_stopping ())) {
      x->a.stopped = true;
      return 1;
    }
  }
  if (timing_stalled (x, dlnow + ulnow))
    return 1;
  /* Much slower than its source's answers: asked of another (request.c).
   * Its wait for an answer begins once the request went out.
   */
  if (x->src != NULL && !x->once && !x->hedged && !x->hedge_off) {
    if (x->clock.sent_ns == 0 && request_sent (x))
      sources_sent (x->src, &x->clock);
    x->hedged = hedge_due (x->src, &x->clock);
    if (x->hedged) {
      x->a.stopped = true;
      return 1;
    }
  }
  if ((x->ignoring_since.tv_sec == 0 && x->ignoring_since.tv_nsec == 0) ||
      !x->a.headers_done || !body_ignored (x))
    return 0;
  if (now.tv_sec - x->ignoring_since.tv_sec <= (time_t) cfg.timeout)
    return 0;
  x->a.ignore_cut = true;
  return 1;
}

/* libcurl rewinds a PUT's body when it sends it again: on a kept-alive
 * connection that the server had closed meanwhile.
 */
static int
seek_cb (void *opaque, curl_off_t offset, int origin)
{
  struct xfer *x = opaque;

  if (origin != SEEK_SET || offset < 0 || offset > x->count)
    return CURL_SEEKFUNC_CANTSEEK;
  x->sent = offset;
  return CURL_SEEKFUNC_OK;
}

/* Every request's callbacks, with x as their data. */
void
callbacks_attach (CURL *e, struct xfer *x)
{
  curl_easy_setopt (e, CURLOPT_HEADERFUNCTION, header_cb);
  curl_easy_setopt (e, CURLOPT_WRITEFUNCTION, write_cb);
  curl_easy_setopt (e, CURLOPT_READFUNCTION, read_cb);
  curl_easy_setopt (e, CURLOPT_SEEKFUNCTION, seek_cb);
  curl_easy_setopt (e, CURLOPT_XFERINFOFUNCTION, progress_cb);
  curl_easy_setopt (e, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt (e, CURLOPT_HEADERDATA, x);
  curl_easy_setopt (e, CURLOPT_WRITEDATA, x);
  curl_easy_setopt (e, CURLOPT_READDATA, x);
  curl_easy_setopt (e, CURLOPT_SEEKDATA, x);
  curl_easy_setopt (e, CURLOPT_XFERINFODATA, x);
}
