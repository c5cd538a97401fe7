/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The requests: the only file that makes them.  Which requests the
 * plugin sends and with which headers (request_headers, set_request),
 * how their answers are taken in (the callbacks), when a request is
 * retried (attempt) and how redirects are followed (follow).
 *
 * Each request runs with curl_easy_perform in the calling nbdkit thread,
 * on a connection (connection.c) the caller borrowed from the pool
 * (pool.c: batched reads; probe.c, writing.c: the rest) and gives back
 * after: this file calls none of them.  A GET may carry several ranges
 * (pool.c batches reads that wait together); ranges.c parses the
 * multipart answer.
 *
 * Why not a multi handle driven by a worker thread: every request would
 * then cross threads twice (nbdkit thread to worker and back), and the
 * worker serializes all header parsing and copying on one core.  A
 * prototype of that design measured no better on this project's 2-core
 * machines (fio 4 KiB random reads, one NBD connection, queue depth 64,
 * connections=4/16/64: pool 9.7k/11.3k/14.9k IOPS, multi worker
 * 8.5k/12.9k/13.1k; a sequential 1 GiB nbdcopy took the same time).
 * Both are bound by context switches (about five per request), not by
 * libcurl.
 *
 * Every answer is judged before a byte reaches the caller's buffer:
 * the callbacks here gather its facts (struct answer) and verdict.c
 * says whether it is the answer asked for, at the end of its headers,
 * on each piece of body and at the end; this file acts on the verdict
 * (cut the transfer off, follow, retry, ask one range at a time).
 *
 * Redirects are followed here, not by libcurl, one exchange per hop
 * (attempt, follow): libcurl would send cookie= and header= values to
 * any host a server names, follow https to http, and turn a PUT
 * answered with 303 into a GET reported as a write.  Here each hop's
 * scheme is checked, only url='s own origin gets the user's secrets,
 * and a write follows only 307 and 308.
 */

#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nbdkit-plugin.h>

#include "curldefs.h"
#include "redirect.h"
#include "verdict.h"

/* -D curl.times=1: at unload, the time all requests spent in each of
 * libcurl's phases (see times_add).
 * -D curl.requests=1: one debug line per request with its latency.
 */
NBDKIT_DLL_PUBLIC int curl_debug_times = 0;
NBDKIT_DLL_PUBLIC int curl_debug_requests = 0;

/* libcurl's phase times (CURLINFO_*_TIME_T, microseconds from the start
 * of each exchange), summed over all exchanges.  Requests run in many
 * threads at once, hence the lock.
 */
static const struct {
  CURLINFO info;
  const char *name;
} phases[] = {
  { CURLINFO_NAMELOOKUP_TIME_T, "name resolution" },
  { CURLINFO_CONNECT_TIME_T, "connect" },
  { CURLINFO_APPCONNECT_TIME_T, "app connect (TLS)" },
  { CURLINFO_PRETRANSFER_TIME_T, "pre-transfer" },
  { CURLINFO_STARTTRANSFER_TIME_T, "start-transfer" },
  { CURLINFO_TOTAL_TIME_T, "total" },
  { CURLINFO_REDIRECT_TIME_T, "redirect" },
};
#define NR_PHASES (sizeof phases / sizeof phases[0])

static struct {
  pthread_mutex_t lock;
  uint64_t exchanges;
  uint64_t us[NR_PHASES];
} times = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* After each exchange on e. */
static void
times_add (CURL *e)
{
  curl_off_t us[NR_PHASES] = { 0 };
  unsigned i;

  for (i = 0; i < NR_PHASES; i++)
    if (curl_easy_getinfo (e, phases[i].info, &us[i]) != CURLE_OK ||
        us[i] < 0)
      us[i] = 0;
  LOCK_FOR_SCOPE (&times.lock);
  times.exchanges++;
  for (i = 0; i < NR_PHASES; i++)
    times.us[i] += us[i];
}

/* At unload: the sums, as libcurl measures each phase, from the start
 * of the exchange to its end (so connect includes name resolution).
 * Redirects are followed here, one exchange per hop, so libcurl's
 * redirect time stays 0.
 */
static void
times_print (void)
{
  unsigned i;
  LOCK_FOR_SCOPE (&times.lock);

  nbdkit_debug ("times (-D curl.times=1): %" PRIu64 " exchanges, "
                "cumulative from the start of each", times.exchanges);
  for (i = 0; i < NR_PHASES; i++)
    nbdkit_debug ("%-20s %" PRIu64 ".%06" PRIu64 " s", phases[i].name,
                  times.us[i] / 1000000, times.us[i] % 1000000);
}

/* The quickest answer the probe got, in nanoseconds, from its request
 * sent to the answer's first byte: about one round trip to the server
 * (-1 before any).
 */
static int64_t probe_wait_ns = -1;

/* What a request asks, for verdict_judge: a HEAD or PUT, or a GET of
 * first-last (several ranges: set nranges).  exchange adds what
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

/* One request and what its answer was. */
struct xfer {
  struct conn *conn;
  struct asked q;               /* see exchange for the per-hop part */
  const char *what;             /* "HEAD", "pread", "pwrite": messages */
  uint64_t offset;              /* GET of several spans: unused */
  uint32_t count;
  struct span *spans;           /* GET: where the body goes */
  /* GET of one range: instead, the body as it comes (prefetch.c) */
  bool (*sink) (void *opaque, uint64_t pos, const char *data, size_t len);
  void *sink_data;
  bool sink_stopped;            /* the sink wanted no more */
  const char *wbuf;             /* PUT: the body */
  uint64_t sent;                /* PUT: bytes of it sent */

  struct answer a;              /* the facts, reset by answer_reset */
  enum verdict v;               /* verdict_judge's, as far as it came */
  char why[256];                /* ... and its reason */
  struct multipart mp;          /* VERDICT_PARTS: the body parser */

  struct timespec ignoring_since;  /* this try's first ignored body, or 0 */
  struct timespec stop_checked; /* see progress_cb */
  bool reported;                /* the error was reported where it arose */
};

/* The rules every hop is held to (redirect.c); the home origin, whose
 * requests carry the user's secrets, is the URL's that each chain
 * starts from (url=, or url-script's).
 */
static struct redirect_rules rules;

/* url='s origin, found once: without url-script it is every chain's
 * home.
 */
static struct origin url_home;

int
engine_init (void)
{
  CLEANUP_FREE char *url = NULL;

  if (!cfg.is_file &&
      (script_url (&url) == -1 || redirect_origin (url, &url_home) == -1)) {
    nbdkit_error ("url: %s: no scheme, host and port", cfg.shown_url);
    return -1;
  }
  rules = (struct redirect_rules) {
    .protocols = cfg.protocols, .allows_scheme = config_allows_scheme,
    .insecure = cfg.insecure_redirect,
    .location_trusted = cfg.location_trusted,
  };
  return 0;
}

void
engine_unload (void)
{
  if (curl_debug_times)
    times_print ();
  redirect_unload ();
}

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

/* Bodies that carry none of the object's bytes: of HEAD and PUT, of
 * redirects, and of the answer that proves the object empty.
 */
static bool
body_ignored (const struct xfer *x)
{
  return x->q.method != GET || x->v == VERDICT_REDIRECT ||
    x->v == VERDICT_EMPTY;
}

/* Judge the answer as far as it came: false if it is refused. */
static bool
judge (struct xfer *x)
{
  x->v = verdict_judge (&x->q, &x->a, x->why, sizeof x->why);
  return !verdict_failed (x->v);
}

/* Called at the end of each header block.  Returns false to abort. */
static bool
headers_end (struct xfer *x)
{
  if (x->a.status >= 100 && x->a.status <= 199)
    return true;                /* interim answer, the real one follows */
  x->a.headers_done = true;
  if (!judge (x))
    return false;
  if (x->v == VERDICT_PARTS) {
    multipart_start (&x->mp, x->a.boundary, x->spans, x->q.nranges,
                     x->q.expect_total);
    x->a.parts_why = x->mp.why;
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

/* A Location header's value, kept whole for follow; one too long for
 * the field, or with a NUL, is kept empty (and refused there).
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

static size_t
header_cb (char *data, size_t size, size_t nmemb, void *opaque)
{
  struct xfer *x = opaque;
  size_t len = size * nmemb;
  char line[1024];
  char *v, *end;
  size_t vlen;

  if (len == 0 || (len <= 2 && (data[0] == '\r' || data[0] == '\n')))
    return headers_end (x) ? len : 0;

  /* Presigned URLs make Locations longer than other headers. */
  if (len >= 9 && strncasecmp (data, "location:", 9) == 0) {
    note_location (x, data + 9, len - 9);
    return len;
  }

  /* Keep a NUL-terminated copy without the line ending.  A longer line
   * is none of the headers this callback looks at, all of which are
   * short, but a validator that long must not go unnoticed.
   */
  if (len >= sizeof line) {
    if (len >= 5 && strncasecmp (data, "etag:", 5) == 0)
      x->a.bad_etag = true;
    if (len >= 14 && strncasecmp (data, "last-modified:", 14) == 0)
      x->a.bad_last_modified = true;
    return len;
  }
  memcpy (line, data, len);
  while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == '\n'))
    len--;
  line[len] = '\0';

  if (strncmp (line, "HTTP/", 5) == 0) {
    ack_now (x);
    v = strchr (line, ' ');
    /* Redirects are separate exchanges (see follow): a second status
     * line follows only an interim 1xx answer, which has no body.
     */
    answer_reset (&x->a);
    x->a.status = v ? strtol (v + 1, NULL, 10) : 0;
    return len == 0 ? 0 : size * nmemb;
  }

  v = strchr (line, ':');
  if (v == NULL)
    return size * nmemb;
  *v++ = '\0';
  v += strspn (v, " \t");
  /* From the line's end, not the first NUL: a validator with a NUL in
   * it must be seen whole to be refused.
   */
  for (end = line + len; end > v && (end[-1] == ' ' || end[-1] == '\t');)
    end--;
  *end = '\0';
  vlen = end - v;
  if (!answer_header (&x->a, line, v, vlen))
    nbdkit_debug ("%s: ignoring a malformed Content-Range", x->what);
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
  if (x->v == VERDICT_PARTS && !multipart_feed (&x->mp, data, len))
    x->a.parts_refused = true;
  if (!judge (x))
    return 0;
  if (x->sink != NULL) {
    if (!x->sink (x->sink_data, pos, data, len)) {
      x->a.stopped = x->sink_stopped = true;
      return 0;
    }
    return len;
  }
  if (x->q.nranges == 1)
    span_scatter (&x->spans[0], pos, data, len);
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

/* libcurl calls this at least once a second during a transfer, and on
 * each piece of data.  It ends a transfer early when nbdkit is shutting
 * down (a server that went silent must not hold up nbdkit's exit for
 * timeout= seconds; looked at every 200 ms), and a body that is ignored
 * when it has dripped on for longer than timeout= (CURLOPT_LOW_SPEED_*
 * only catches a stall).
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
    if (remote_stopping () || x->sink_stopped) {
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
 * see follow), then what the request itself needs.
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
  x->q.serving = remote_is_serving ();
  x->q.pinned = remote_pin (&x->q.pin) && x->q.method == GET;
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

/* One exchange of the request on handle c with the server at url:
 * 0, or -1 with x->v a failure and x->why set (or the error reported,
 * x->reported).  Only where trusted does it carry the user's
 * credentials, cookie and headers.
 */
static int
exchange (struct conn *c, struct xfer *x, const char *url, bool trusted)
{
  CURL *e = c->easy;
  CURLcode rc;
  CLEANUP_SLIST struct curl_slist *headers = NULL;
  CLEANUP_FREE char *cookie = NULL;
  curl_off_t usecs = 0;

  begin_exchange (x);
  /* These report their own errors. */
  if (request_headers (x, trusted, &headers) == -1 ||
      (trusted && script_cookie (&cookie) == -1)) {
    x->v = VERDICT_REFUSED;
    x->reported = true;
    return -1;
  }

  x->conn = c;
  c->errbuf[0] = '\0';
  set_request (e, x, url, headers, cookie, trusted);
  rc = curl_easy_perform (e);
  if (curl_debug_times)
    times_add (e);
  if (curl_debug_requests) {
    curl_easy_getinfo (e, CURLINFO_TOTAL_TIME_T, &usecs);
    nbdkit_debug ("%s %s: %" PRIu64 "+%" PRIu32 " in %u ranges: HTTP %ld: "
                  "%" PRIi64 " us", x->what, cfg.shown_url, x->offset, x->count,
                  x->q.nranges, x->a.status, (int64_t) usecs);
  }

  /* A list set for this request is freed when this function returns:
   * the handle goes back with the user's list.
   */
  curl_easy_setopt (e, CURLOPT_HTTPHEADER, cfg.headers);

  x->a.complete = true;
  x->a.rc = rc;
  x->a.rc_text = curl_easy_strerror (rc);
  x->a.errbuf = c->errbuf;
  if (x->v == VERDICT_PARTS)
    x->a.parts_complete = multipart_complete (&x->mp);
  if (judge (x))
    return 0;
  if (x->v == VERDICT_OBJECT_CHANGED)
    remote_changed_now ();
  return -1;
}

#define MAX_REDIRECTS 20

/* The redirect that the answer in x asks for, if the rules allow it
 * (redirect_next): its URL (to free), or NULL with x->why set.  libcurl
 * itself withholds only user= and password= from another host, and
 * would send cookie= and header= anywhere.
 */
static char *
follow (const struct redirect_rules *r, struct xfer *x, const char *from_url,
        struct origin *from, bool *trusted)
{
  char *url = redirect_next (r, x->q.method == PUT, x->a.status,
                             from_url, x->a.location, from, trusted,
                             x->why, sizeof x->why);

  if (url != NULL)
    nbdkit_debug ("%s: HTTP %ld: redirected to %s://%s:%ld, %s", x->what,
                  x->a.status, from->scheme, from->host, from->port,
                  *trusted ? "with credentials" : "another origin: "
                  "without the user's credentials, cookie and headers");
  return url;
}

/* The request in x from url (at origin *at, trusted or not), following
 * redirects by the rules r: 0, or -1 with x->v a failure and x->why set
 * (or x->reported).  *end is where the chain ended (to free; NULL if at
 * url itself), *at and *trusted its origin and trust.
 */
static int
chain (const struct redirect_rules *r, struct conn *c, struct xfer *x,
       const char *url, struct origin *at, bool *trusted, char **end)
{
  unsigned hops;
  char *next;

  *end = NULL;
  for (hops = 0;; hops++) {
    if (exchange (c, x, *end ? *end : url, *trusted) == -1)
      return -1;
    if (x->v != VERDICT_REDIRECT)
      return 0;
    if (hops == MAX_REDIRECTS) {
      snprintf (x->why, sizeof x->why, "more than %d redirects",
                MAX_REDIRECTS);
      x->v = VERDICT_REFUSED;
      return -1;
    }
    next = follow (r, x, *end ? *end : url, at, trusted);
    free (*end);
    *end = next;
    if (next == NULL) {
      x->v = VERDICT_REFUSED;
      return -1;
    }
  }
}

static int64_t
epoch_now (void)
{
  return (int64_t) time (NULL);
}

/* A target that answers so has moved on or expired (a presigned URL
 * past its time answers 403, a mirror that dropped the file 404): ask
 * url= again.
 */
static bool
target_gone (long status)
{
  return status == 401 || status == 403 || status == 404 || status == 410;
}

/* Which requests go to the remembered target: reads.  HEAD and PUT ask
 * url= each time.
 */
static bool
uses_target (const struct xfer *x)
{
  return x->q.method == GET && cfg.followlocation && cfg.redirect_cache &&
    !cfg.is_file;
}

/* The chain from url=, whose end becomes the remembered target when
 * the answer at it is not a failure.  claimed: this request was asked
 * to resolve it (redirect_target_claim), so it ends the claim either way.
 */
static int
resolve (struct conn *c, struct xfer *x, bool claimed)
{
  struct redirect_rules rr = rules;
  struct origin home, at;
  bool trusted, again = true;
  CLEANUP_FREE char *given = NULL;
  CLEANUP_FREE char *end = NULL;
  int r;

  for (;;) {
    /* Without url-script, url= and its origin as they were found once:
     * a read is not worth a copy and a parse.
     */
    if (cfg.url_script == NULL)
      home = url_home;
    else if (script_url (&given) == -1) {
      x->v = VERDICT_REFUSED;
      x->reported = true;
      r = -1;
      break;
    }
    /* file: has no origin, and no redirects. */
    else if (redirect_origin (given, &home) == -1)
      memset (&home, 0, sizeof home);
    rr.home = &home;
    at = home;
    trusted = true;
    r = chain (&rr, c, x, given ? given : cfg.url, &at, &trusted, &end);
    /* url-script's URL refused: once more with a new one. */
    if (r == 0 || x->reported || !again ||
        (x->a.status != 401 && x->a.status != 403) ||
        !script_url_refused (given))
      break;
    nbdkit_debug ("%s: %s: HTTP %ld: running url-script again",
                  x->what, cfg.shown_url, x->a.status);
    again = false;
    free (given);
    free (end);
    given = end = NULL;
  }
  if (r == 0 && end != NULL && uses_target (x)) {
    nbdkit_debug ("%s: %s redirects to %s://%s:%ld: reads go there "
                  "directly", x->what, cfg.shown_url, at.scheme, at.host,
                  at.port);
    redirect_target_set (end, trusted, &home, epoch_now ());
  }
  else if (claimed && r == 0)
    redirect_target_set (NULL, true, &home, epoch_now ());
  else if (claimed)
    redirect_target_release ();
  return r;
}

/* A renewal before expiry failed for a reason of the moment (the
 * redirector is down or busy): the target it was to replace has not
 * expired, and serves meanwhile.  Not a target that failed itself, nor
 * a new chain that led to another object.
 */
static bool
fall_back (const struct xfer *x, const struct target *t)
{
  return t->url != NULL && !t->stale && !x->reported &&
    x->v == VERDICT_RETRY && t->expires > epoch_now ();
}

/* The request at the remembered target t, following its redirects by
 * the rules for the origin its chain started from; a target that
 * redirects further is replaced by where that leads.
 */
static int
at_target (struct conn *c, struct xfer *x, struct target *t)
{
  struct redirect_rules rr = rules;
  CLEANUP_FREE char *end = NULL;
  int r;

  rr.home = &t->home;
  r = chain (&rr, c, x, t->url, &t->origin, &t->trusted, &end);
  if (r == 0 && end != NULL) {
    nbdkit_debug ("%s: the redirect target of %s redirects to "
                  "%s://%s:%ld: reads go there directly", x->what,
                  cfg.shown_url, t->origin.scheme, t->origin.host,
                  t->origin.port);
    redirect_target_moved (t->gen, end, t->trusted, epoch_now ());
  }
  return r;
}

/* One try of the request on handle c: at the remembered target when
 * there is one, else from url=.  A target that refuses (target_gone) is
 * resolved again at once, once; one whose connection failed is resolved
 * again by the next try.  0, or -1 with x->v a failure and x->why set
 * (or x->reported).
 */
static int
attempt (struct conn *c, struct xfer *x)
{
  struct target t;
  unsigned tries;
  int r = -1;

  x->ignoring_since = (struct timespec) { 0 };
  /* A short request never looks (see progress_cb). */
  clock_gettime (CLOCK_MONOTONIC, &x->stop_checked);
  if (!uses_target (x))
    return resolve (c, x, false);
  for (tries = 0; tries < 2; tries++) {
    if (redirect_target_claim (&t, epoch_now ())) {
      r = resolve (c, x, true);
      if (r == 0 || !fall_back (x, &t)) {
        free (t.url);
        return r;
      }
      nbdkit_debug ("%s: %s: asking for a new redirect target failed "
                    "(%s): the old one has not expired yet", x->what,
                    cfg.shown_url, x->why);
    }
    if (t.url == NULL)
      return resolve (c, x, false);
    r = at_target (c, x, &t);
    free (t.url);
    if (r == 0)
      return 0;
    if (x->reported || !(target_gone (x->a.status) ||
                         (x->v == VERDICT_RETRY && x->a.rc != CURLE_OK)))
      return r;
    nbdkit_debug ("%s: the redirect target of %s failed (%s): asking "
                  "%s again", x->what, cfg.shown_url, x->why,
                  cfg.shown_url);
    redirect_target_failed (t.gen);
    /* A connection that failed is retried after the back-off. */
    if (x->v == VERDICT_RETRY)
      return r;
  }
  return r;
}

/* Run one request on handle c, again after transient failures (with
 * backoff, or the server's Retry-After if longer): the verdict on its
 * last answer.  Reports failures itself, except (logged for debugging
 * only) VERDICT_NOT_THE_PARTS_ASKED_FOR: a multi-range request to be
 * asked again one range at a time.
 */
static enum verdict
perform_on (struct conn *c, struct xfer *x)
{
  char where[80] = "";
  unsigned try, delay;
  bool fresh = false;           /* asked again on a new connection */
  int r;

  if (x->q.method == GET)
    snprintf (where, sizeof where, ": bytes %" PRIu64 "-%" PRIu64 "%s",
              x->spans[0].first, x->spans[x->q.nranges - 1].last,
              x->q.nranges > 1 ? " (several ranges)" : "");
  else if (x->q.method == PUT)
    snprintf (where, sizeof where, ": bytes %" PRIu64 "-%" PRIu64,
              x->offset, x->offset + x->count - 1);

  for (try = 0;;) {
    bool spare;

    r = attempt (c, x);
    spare = conn_took_spare (c);
    if (fresh)
      curl_easy_setopt (c->easy, CURLOPT_FRESH_CONNECT, 0L);
    if (r == 0)
      return x->v;
    /* A spare connection (connection.c) whose close by the server was
     * still on its way when it was taken fails its first request with
     * no answer at all.  Without spares that request would have opened
     * a connection of its own: so it does now, at once and not counted
     * in retries=, and the other spares, as old, are closed.
     */
    if (spare && !fresh && x->v == VERDICT_RETRY && x->a.status == 0 &&
        x->a.rc != CURLE_OK) {
      nbdkit_debug ("%s: %s%s: %s: the spare connection had been closed: "
                    "asking again on a new connection", x->what,
                    cfg.shown_url, where, x->why);
      conn_drop_spares ();
      fresh = true;
      curl_easy_setopt (c->easy, CURLOPT_FRESH_CONNECT, 1L);
      continue;
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
      nbdkit_debug ("%s: %s%s: %s: asking again on a new connection",
                    x->what, cfg.shown_url, where, x->why);
      fresh = true;
      curl_easy_setopt (c->easy, CURLOPT_FRESH_CONNECT, 1L);
      continue;
    }
    if (x->v != VERDICT_RETRY || try >= cfg.retries)
      break;
    delay = cfg.retry_delay_ms;
    for (unsigned i = 0; i < try && delay < MAX_RETRY_DELAY_MS; i++)
      delay *= 2;
    if (x->a.retry_after_ms > delay)
      delay = x->a.retry_after_ms;
    if (delay > MAX_RETRY_DELAY_MS)
      delay = MAX_RETRY_DELAY_MS;
    nbdkit_debug ("%s: %s%s: %s: retry %u of %u in %u ms", x->what,
                  cfg.shown_url, where, x->why, try + 1, cfg.retries, delay);
    /* nbdkit's sleep ends early when nbdkit shuts down or the client
     * goes away: neither waits for the back-off.  Not in .get_ready,
     * where nbdkit 1.32 aborts in it (see remote_stopping).
     */
    if (!remote_is_serving ()) {
      struct timespec ts = {
        .tv_sec = delay / 1000, .tv_nsec = (delay % 1000) * 1000000L,
      };

      while (nanosleep (&ts, &ts) == -1 && errno == EINTR)
        ;
    }
    else if (nbdkit_nanosleep (delay / 1000,
                               (delay % 1000) * 1000000) == -1) {
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

/* During the probe: the quickest answer so far. */
static void
note_wait (struct conn *c)
{
  int64_t wait = engine_answer_wait_ns (c);

  if (wait > 0 && (probe_wait_ns < 0 || wait < probe_wait_ns))
    probe_wait_ns = wait;
}

/* About one round trip to the server, in nanoseconds: the quickest
 * answer the probe got, when it was idle (answers during a copy also
 * wait for the server and this machine's CPU).  0 if unknown.
 */
int64_t
engine_round_trip (void)
{
  return cfg.is_file || probe_wait_ns < 0 ? 0 : probe_wait_ns;
}

/* Run one request that is not a batched read (HEAD, the probe's GET,
 * PUT) on c; before serving, its answer's delay counts towards the
 * round trip (engine_round_trip).
 */
static enum verdict
perform (struct conn *c, struct xfer *x)
{
  enum verdict v = perform_on (c, x);

  if (!remote_is_serving ())
    note_wait (c);
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
}

/* HEAD: the status, Content-Length and validators, whatever the status
 * is (the probe decides what a refusal means).
 */
int
engine_head (struct conn *c, struct object_info *info)
{
  struct xfer x = {
    .q = asking (HEAD), .what = "HEAD", .count = 1,
  };

  if (verdict_failed (perform (c, &x)))
    return -1;
  copy_info (info, &x);
  /* Two different Content-Lengths give no size: the probe asks a GET. */
  info->size = x.a.framing_twice ? -1 : x.a.content_length;
  return 0;
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

/* PUT count bytes at offset (Content-Range) on c: 0 with the answer's
 * status in *status, -1 when there was no answer (reported).
 */
int
engine_put (struct conn *c, const void *buf, uint32_t count, uint64_t offset,
            long *status)
{
  struct xfer x = {
    .q = asking (PUT), .what = "pwrite",
    .offset = offset, .count = count, .wbuf = buf,
  };

  if (verdict_failed (perform (c, &x)))
    return -1;
  *status = x.a.status;
  return 0;
}

/* How long the last answer on c took to start arriving once its
 * request was sent (about a round trip), in nanoseconds; 0 if unknown.
 */
int64_t
engine_answer_wait_ns (struct conn *c)
{
  curl_off_t sent, first;

  if (curl_easy_getinfo (c->easy, CURLINFO_PRETRANSFER_TIME_T,
                         &sent) != CURLE_OK ||
      curl_easy_getinfo (c->easy, CURLINFO_STARTTRANSFER_TIME_T,
                         &first) != CURLE_OK ||
      first < sent)
    return 0;
  return (int64_t) (first - sent) * 1000;
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
  r = attempt (c, &x);
  (void) conn_took_spare (c);   /* the next request's own question */
  if (r == 0)
    return x.v;
  nbdkit_debug ("read-ahead: %s: bytes %" PRIu64 "-%" PRIu64 ": %s",
                cfg.shown_url, first, last,
                x.sink_stopped ? "no longer wanted: stopped" : x.why);
  return verdict_failed (x.v) ? x.v : VERDICT_REFUSED;
}
