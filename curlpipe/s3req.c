/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The S3 multipart upload's requests: each easy handle's options and
 * headers, the answer read within bounds (body, ETag, the few XML fields
 * taken), the requests that are not parts, what is retried, and the
 * failure's message.
 */

#define _GNU_SOURCE             /* O_TMPFILE */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "curlpipe.h"
#include "pipe.h"
#include "s3.h"
#include "secrets.h"

/* The upload, and the signal that came (set by s3.c's handler). */
struct s3 s3;
volatile sig_atomic_t s3_signal;
volatile sig_atomic_t s3_signals;
sig_atomic_t s3_abort_signals;

/* The failure's message, for main.c; the first one wins. */
void
s3_fail (const char *fmt, ...)
{
  va_list ap;
  size_t n;

  if (s3.msg[0] != '\0')
    return;
  n = snprintf (s3.msg, s3.msglen, "%s: ", s3.url);
  if (n >= s3.msglen)
    return;
  va_start (ap, fmt);
  vsnprintf (s3.msg + n, s3.msglen - n, fmt, ap);
  va_end (ap);
}

/* -v: the exchange on standard error, secrets blanked (secrets.c). */
static void
print_debug (const char *line, void *opaque)
{
  fprintf (stderr, "%s\n", line);
}

static const struct debug_printer verbose_printer = { print_debug, NULL };

double
s3_ms_until (const struct timespec *t)
{
  struct timespec now;

  clock_gettime (CLOCK_MONOTONIC, &now);
  return (t->tv_sec - now.tv_sec) * 1000.0 +
    (t->tv_nsec - now.tv_nsec) / 1e6;
}

curl_off_t
s3_env_size (const char *name, curl_off_t dflt)
{
  const char *s = getenv (name);
  char *end;
  long long n;

  if (s == NULL || *s == '\0')
    return dflt;
  errno = 0;
  n = strtoll (s, &end, 10);
  if (errno != 0 || end == s || n < 0)
    return dflt;
  if (*end == 'M' || *end == 'm')
    n *= MIB, end++;
  else if (*end == 'K' || *end == 'k')
    n *= 1024, end++;
  return *end == '\0' ? n : dflt;
}

/* An answer's body, within bounds. */
static size_t
answer_write_cb (char *data, size_t size, size_t nmemb, void *opaque)
{
  struct answer *a = opaque;
  size_t n = size * nmemb, room = S3_ANSWER_MAX - a->len;

  if (n > room) {
    a->cut = true;
    n = room;
  }
  memcpy (a->body + a->len, data, n);
  a->len += n;
  a->body[a->len] = '\0';
  return size * nmemb;
}

/* An ETag is kept only when quoted, bounded, and of characters that go
 * into the completion's XML as they are.
 */
static bool
etag_ok (const char *v, size_t len)
{
  size_t i;

  if (len < 3 || len > S3_ETAG_MAX || v[0] != '"' || v[len - 1] != '"')
    return false;
  for (i = 1; i < len - 1; i++)
    if (v[i] < 0x21 || v[i] > 0x7e || strchr ("\"<>&'", v[i]) != NULL)
      return false;
  return true;
}

/* The ETag header of the answer; a new answer (a 100, a redirect)
 * starts afresh with its status line.
 */
static size_t
answer_header_cb (char *data, size_t size, size_t nmemb, void *opaque)
{
  struct answer *a = opaque;
  size_t len = size * nmemb;
  const char *v;

  if (len >= 5 && strncmp (data, "HTTP/", 5) == 0) {
    a->etag[0] = '\0';
    a->etag_bad = false;
    a->len = 0;
    a->cut = false;
    a->body[0] = '\0';
  }
  if (len < 5 || strncasecmp (data, "etag:", 5) != 0)
    return len;
  v = data + 5;
  len -= 5;
  while (len > 0 && (*v == ' ' || *v == '\t'))
    v++, len--;
  while (len > 0 && strchr (" \t\r\n", v[len - 1]) != NULL)
    len--;
  if (etag_ok (v, len)) {
    memcpy (a->etag, v, len);
    a->etag[len] = '\0';
  }
  else
    a->etag_bad = true;
  return size * nmemb;
}

/* The text of <tag>...</tag> in a bounded body, its first occurrence,
 * at most max bytes into out; false when missing or longer.
 */
bool
s3_xml_field (const struct answer *a, const char *tag, char *out, size_t max)
{
  char open[64], close[64];
  const char *s, *e;

  snprintf (open, sizeof open, "<%s>", tag);
  snprintf (close, sizeof close, "</%s>", tag);
  s = strstr (a->body, open);
  if (s == NULL)
    return false;
  s += strlen (open);
  e = strstr (s, close);
  if (e == NULL || (size_t) (e - s) >= max)
    return false;
  memcpy (out, s, e - s);
  out[e - s] = '\0';
  return true;
}

/* "HTTP 500 (InternalError)": the status and S3's error code, its
 * characters checked before they go into a message.
 */
void
s3_describe (const struct answer *a, long code, char *buf, size_t size)
{
  char c[64];
  size_t i;

  if (s3_xml_field (a, "Code", c, sizeof c)) {
    for (i = 0; c[i]; i++)
      if (!((c[i] >= 'A' && c[i] <= 'Z') || (c[i] >= 'a' && c[i] <= 'z') ||
            (c[i] >= '0' && c[i] <= '9') || c[i] == '.'))
        break;
    if (c[i] == '\0' && i > 0) {
      snprintf (buf, size, "HTTP %ld (%s)", code, c);
      return;
    }
  }
  snprintf (buf, size, "HTTP %ld", code);
}

/* The object's URL with a query of S3's (the URL's own query kept). */
char *
s3_url_with (const char *fmt, ...)
{
  const char *url = s3.opt->url;
  char query[S3_UPLOAD_ID_MAX * 3 + 64], *u;
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (query, sizeof query, fmt, ap);
  va_end (ap);
  if (asprintf (&u, "%s%c%s", url, strchr (url, '?') ? '&' : '?',
                query) == -1)
    return NULL;
  return u;
}

/* What every request of the upload carries: signing, credentials,
 * TLS and the way to the server (easyopts.c's), -v, the answer's
 * callbacks; the user's headers with the payload's hash.
 */
CURL *
s3_new_request (const char *url, struct answer *a, struct curl_slist *headers)
{
  const struct options *opt = s3.opt;
  CURL *e = curl_easy_init ();
  CURLcode rc;

  if (e == NULL)
    return NULL;
  rc = easy_connection_set (opt, e);
#define SET(o, v) \
  if (rc == CURLE_OK) rc = curl_easy_setopt (e, o, v)
  SET (CURLOPT_URL, url);
  SET (CURLOPT_NOSIGNAL, 1L);
  SET (CURLOPT_PROTOCOLS_STR, "http,https");
  SET (CURLOPT_AWS_SIGV4, opt->aws_sigv4);
  if (opt->userpwd)
    SET (CURLOPT_USERPWD, opt->userpwd);
  SET (CURLOPT_HTTPHEADER, headers);
  SET (CURLOPT_HTTP_VERSION, (long) CURL_HTTP_VERSION_1_1);
  SET (CURLOPT_WRITEFUNCTION, answer_write_cb);
  SET (CURLOPT_WRITEDATA, a);
  SET (CURLOPT_HEADERFUNCTION, answer_header_cb);
  SET (CURLOPT_HEADERDATA, a);
  SET (CURLOPT_USERAGENT, opt->user_agent ? opt->user_agent
       : "curlpipe/" PACKAGE_VERSION);
  if (opt->connect_timeout_ms)
    SET (CURLOPT_CONNECTTIMEOUT_MS, opt->connect_timeout_ms);
  if (opt->unix_socket)
    SET (CURLOPT_UNIX_SOCKET_PATH, opt->unix_socket);
  if (opt->limit_rate)
    SET (CURLOPT_MAX_SEND_SPEED_LARGE, opt->limit_rate);
  /* A server that stops answering ends the request (28, retried), not
   * the upload's progress for ever; S3 keeps a slow completion alive
   * with spaces.
   */
  SET (CURLOPT_LOW_SPEED_LIMIT, 1L);
  SET (CURLOPT_LOW_SPEED_TIME, (long) S3_STALL_SECONDS);
  if (opt->verbose) {
    SET (CURLOPT_VERBOSE, 1L);
    SET (CURLOPT_DEBUGFUNCTION, debug_shown);
    SET (CURLOPT_DEBUGDATA, &verbose_printer);
  }
#undef SET
  if (rc != CURLE_OK) {
    curl_easy_cleanup (e);
    return NULL;
  }
  return e;
}

/* The user's -H headers, then "Expect:" (no 100-continue wait), the
 * payload's hash for the signature, and extra; NULL when out of memory.
 */
struct curl_slist *
s3_headers_with (const char *sha256, const char *extra)
{
  struct curl_slist *list = NULL, *u, *h;
  char line[128];
  bool hash_given = false;

  for (u = s3.opt->headers; u != NULL; u = u->next) {
    if (strncasecmp (u->data, "x-amz-content-sha256", 20) == 0)
      hash_given = true;
    h = curl_slist_append (list, u->data);
    if (h == NULL)
      goto nomem;
    list = h;
  }
  h = curl_slist_append (list, "Expect:");
  if (h == NULL)
    goto nomem;
  list = h;
  if (!hash_given) {
    snprintf (line, sizeof line, "x-amz-content-sha256: %s", sha256);
    h = curl_slist_append (list, line);
    if (h == NULL)
      goto nomem;
    list = h;
  }
  if (extra) {
    h = curl_slist_append (list, extra);
    if (h == NULL)
      goto nomem;
    list = h;
  }
  return list;
 nomem:
  curl_slist_free_all (list);
  return NULL;
}

/* SHA-256 of a body, in hex, for x-amz-content-sha256. */
static void
sha256_hex (const char *data, size_t len, char out[65])
{
  unsigned char md[32];
  unsigned int n = 0;
  int i;

  EVP_Digest (data, len, md, &n, EVP_sha256 (), NULL);
  for (i = 0; i < 32; i++)
    sprintf (out + 2 * i, "%02x", md[i]);
}

/* A request that is not a part (create, complete, abort), run to its
 * end; SIGINT and the like stop it.  The abort runs after the first
 * signal: another one stops it.
 */
static int
xfer_cb (void *p, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
  if (p == NULL)
    return s3_signal != 0;
  return s3_signals != s3_abort_signals;
}

CURLcode
s3_run_control (const char *method, const char *url, const char *body,
             struct answer *a, long *code, bool interruptible)
{
  char hash[65];
  struct curl_slist *headers;
  CURL *e;
  CURLcode rc = CURLE_OUT_OF_MEMORY;
  double left;

  *code = 0;
  memset (a, 0, offsetof (struct answer, body) + 1);
  a->len = 0;
  a->cut = false;
  a->etag[0] = '\0';
  a->etag_bad = false;
  sha256_hex (body ? body : "", body ? strlen (body) : 0, hash);
  headers = s3_headers_with (hash, body && strcmp (method, "POST") == 0
                          ? "Content-Type: application/xml" : NULL);
  if (headers == NULL)
    return CURLE_OUT_OF_MEMORY;
  e = s3_new_request (url, a, headers);
  if (e == NULL)
    goto out;
  if (strcmp (method, "POST") == 0) {
    rc = curl_easy_setopt (e, CURLOPT_POSTFIELDS, body ? body : "");
  }
  else {
    rc = curl_easy_setopt (e, CURLOPT_CUSTOMREQUEST, method);
  }
  curl_easy_setopt (e, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt (e, CURLOPT_XFERINFOFUNCTION, xfer_cb);
  curl_easy_setopt (e, CURLOPT_XFERINFODATA, interruptible ? NULL : e);
  /* The abort must not wait for ever on a server that stopped; it
   * runs also once -m is over, or the parts would stay.
   */
  if (!interruptible)
    curl_easy_setopt (e, CURLOPT_TIMEOUT_MS, (long) S3_ABORT_MS);
  else if (s3.opt->max_time_ms) {
    left = s3.opt->max_time_ms + s3_ms_until (&s3.start);
    if (left < 1) {
      rc = CURLE_OPERATION_TIMEDOUT;
      curl_easy_cleanup (e);
      goto out;
    }
    curl_easy_setopt (e, CURLOPT_TIMEOUT_MS, (long) left);
  }
  if (rc == CURLE_OK)
    rc = curl_easy_perform (e);
  if (rc == CURLE_OK)
    curl_easy_getinfo (e, CURLINFO_RESPONSE_CODE, code);
  curl_easy_cleanup (e);
 out:
  curl_slist_free_all (headers);
  return rc;
}

/* Is this failure worth another try?  Connection troubles, 5xx, and
 * S3's 400s for a corrupted or slow body; never 403 or 404.
 */
bool
s3_retryable (CURLcode rc, long code, const struct answer *a)
{
  char c[64];

  if (rc != CURLE_OK)
    return rc == CURLE_COULDNT_CONNECT || rc == CURLE_SEND_ERROR ||
      rc == CURLE_RECV_ERROR || rc == CURLE_GOT_NOTHING ||
      rc == CURLE_PARTIAL_FILE || rc == CURLE_OPERATION_TIMEDOUT;
  if (code >= 500 || code == 408 || code == 429)
    return true;
  return code == 400 && s3_xml_field (a, "Code", c, sizeof c) &&
    (strcmp (c, "BadDigest") == 0 || strcmp (c, "RequestTimeout") == 0 ||
     strcmp (c, "IncompleteBody") == 0);
}

void
s3_backoff_sleep (int tries)
{
  struct timespec t = { 0, (long) S3_BACKOFF_MS * 1000000L << (tries - 1) };

  while (t.tv_nsec >= 1000000000L)
    t.tv_sec++, t.tv_nsec -= 1000000000L;
  if (s3_signal == 0)
    nanosleep (&t, NULL);
}

/* The exit status for a request that failed: curl's code for a
 * transport failure, 22 (as curl -f) for an HTTP error.
 */
int
s3_status_of (CURLcode rc)
{
  return rc != CURLE_OK ? (int) rc : EXIT_HTTP;
}
