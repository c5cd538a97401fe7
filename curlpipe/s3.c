/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The S3 multipart upload: standard input of unknown size (or over
 * 5 GiB) sent as parts, which S3 and its kin want instead of a chunked
 * PUT.  The upload is created (POST ?uploads), parts are read from
 * standard input as they fill and sent, up to S3_IN_FLIGHT at once on
 * one multi handle, each with its Content-MD5 and retried on failure;
 * then the upload is completed with the parts' ETags (POST ?uploadId).
 * On any failure, or SIGINT, SIGTERM or SIGHUP, it is aborted (DELETE
 * ?uploadId) so that no parts are left billed.  Every answer is
 * hostile input: read within bounds, its few fields checked.
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

#ifdef HAVE_OPENSSL
#include <openssl/evp.h>
#endif

#include "curlpipe.h"
#include "pipe.h"
#include "s3.h"
#include "secrets.h"

#define MIB ((curl_off_t) 1 << 20)

/* The part sizes.  Part n (from 1) is S3_FIRST_PART doubled every
 * S3_DOUBLING parts, at most S3_MAX_PART: 20 parts each of 8, 16, 32
 * ... 4096 MiB (160 GiB in all), then 5 GiB parts.  The 10,000 parts
 * then hold 48.0 TiB, near S3's 48.8 TiB object limit, while a small
 * stream goes in small parts; 4 GiB takes 94 parts of up to 128 MiB.
 */
#define S3_FIRST_PART (8 * MIB)
#define S3_MAX_PART ((curl_off_t) 5 << 30)
#define S3_DOUBLING 20
#define S3_MAX_PARTS 10000

/* Parts in flight at once, each on a kept-alive HTTP/1.1 connection;
 * one more slot fills from standard input meanwhile.
 */
#define S3_IN_FLIGHT 4
#define S3_SLOTS (S3_IN_FLIGHT + 1)

/* Parts up to this size are held in memory; bigger ones are spooled
 * to an unlinked temporary file, so that five slots stay under
 * 128 MiB whatever the part size and a retry can send them again.
 */
#define S3_MEMORY_PART (16 * MIB)

/* Tries of a part, or of the completion, before the upload fails; the
 * backoff doubles from S3_BACKOFF_MS between them.
 */
#define S3_TRIES 4
#define S3_BACKOFF_MS 100

/* The most of an answer's body kept: S3's answers are a few hundred
 * bytes; a longer one is cut, and read no further.
 */
#define S3_ANSWER_MAX (64 * 1024)
#define S3_ETAG_MAX 128
#define S3_UPLOAD_ID_MAX 1024

/* Standard input is read in chunks of at most this much per turn of
 * the loop, so that the parts in flight keep being served.
 */
#define S3_READ_TURN (4 * MIB)
#define S3_SPOOL_CHUNK (1 * MIB)

/* A request's answer, kept within bounds. */
struct answer {
  char body[S3_ANSWER_MAX + 1];
  size_t len;
  bool cut;                     /* longer than S3_ANSWER_MAX */
  char etag[S3_ETAG_MAX + 1];   /* the ETag header, "" when none */
  bool etag_bad;                /* one came, unquoted or too long */
};

/* A part: its bytes, in memory or spooled, and its request. */
struct part {
  int number;                   /* 0: the slot is free */
  curl_off_t size, target;      /* filled so far, and its full size */
  bool full;                    /* filled: ready to send */
  char *buf;                    /* in memory, target bytes */
  int fd;                       /* spooled, or -1 */
  curl_off_t offset;            /* what the read callback sends next */
#ifdef HAVE_OPENSSL
  EVP_MD_CTX *md5;
#endif
  char content_md5[32];         /* base64 */
  int tries;
  struct timespec retry_at;     /* when set, not before */
  bool waiting;                 /* a retry waits for retry_at */
  CURL *easy;                   /* in flight, or NULL */
  struct curl_slist *headers;
  struct answer *answer;
};

static struct s3 {
  const struct options *opt;
  char *url;                    /* as messages show it */
  char *msg;
  size_t msglen;
  struct io in;
  bool eof;
  CURLM *multi;
  struct part slots[S3_SLOTS];
  int next_number;              /* of the next part to fill */
  int in_flight;
  char **etags;                 /* [S3_MAX_PARTS + 1], by part number */
  char *upload_id;              /* percent-encoded for the query */
  curl_off_t first_part, memory_part;
  char spool[4096];             /* the temporary files' folder */
  char *zero;                   /* a spare buffer for the spool */
  struct timespec start;
  int signal_pipe[2];
} s3;

/* The signal that came, or 0. */
static volatile sig_atomic_t s3_signal;

static void
on_signal (int sig)
{
  int saved = errno;
  char c = 0;

  if (s3_signal == 0)
    s3_signal = sig;
  if (write (s3.signal_pipe[1], &c, 1) == -1) {
    /* A full pipe has woken the loop already. */
  }
  errno = saved;
}

static void s3_fail (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2)));

/* The failure's message, for main.c; the first one wins. */
static void
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

static double
ms_until (const struct timespec *t)
{
  struct timespec now;

  clock_gettime (CLOCK_MONOTONIC, &now);
  return (t->tv_sec - now.tv_sec) * 1000.0 +
    (t->tv_nsec - now.tv_nsec) / 1e6;
}

static curl_off_t
env_size (const char *name, curl_off_t dflt)
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

/* Part n's size: see S3_DOUBLING's comment. */
static curl_off_t
part_size (int n)
{
  int doublings = (n - 1) / S3_DOUBLING;
  curl_off_t size = s3.first_part;

  while (doublings-- > 0 && size < S3_MAX_PART)
    size *= 2;
  return size < S3_MAX_PART ? size : S3_MAX_PART;
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
static bool
xml_field (const struct answer *a, const char *tag, char *out, size_t max)
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
static void
describe (const struct answer *a, long code, char *buf, size_t size)
{
  char c[64];
  size_t i;

  if (xml_field (a, "Code", c, sizeof c)) {
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

/* The upload ID, from the creation's answer: printable, bounded, no XML
 * markup, and percent-encoded where not unreserved in a query.
 */
static bool
take_upload_id (const struct answer *a)
{
  static const char hex[] = "0123456789ABCDEF";
  char id[S3_UPLOAD_ID_MAX + 1];
  size_t i, n = 0;

  if (a->cut || !xml_field (a, "UploadId", id, sizeof id) || id[0] == '\0')
    return false;
  s3.upload_id = malloc (strlen (id) * 3 + 1);
  if (s3.upload_id == NULL)
    return false;
  for (i = 0; id[i]; i++) {
    unsigned char c = id[i];
    if (c < 0x21 || c > 0x7e || strchr ("<>&\"'", c) != NULL) {
      free (s3.upload_id);
      s3.upload_id = NULL;
      return false;
    }
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
        (c >= '0' && c <= '9') || strchr ("-._~", c) != NULL)
      s3.upload_id[n++] = c;
    else {
      s3.upload_id[n++] = '%';
      s3.upload_id[n++] = hex[c >> 4];
      s3.upload_id[n++] = hex[c & 15];
    }
  }
  s3.upload_id[n] = '\0';
  return true;
}

/* The object's URL with a query of S3's (the URL's own query kept). */
static char *
url_with (const char *fmt, ...)
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
static CURL *
new_request (const char *url, struct answer *a, struct curl_slist *headers)
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
static struct curl_slist *
headers_with (const char *sha256, const char *extra)
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
#ifdef HAVE_OPENSSL
  unsigned char md[32];
  unsigned int n = 0;
  int i;

  EVP_Digest (data, len, md, &n, EVP_sha256 (), NULL);
  for (i = 0; i < 32; i++)
    sprintf (out + 2 * i, "%02x", md[i]);
#else
  strcpy (out, "UNSIGNED-PAYLOAD");
#endif
}

/* A request that is not a part (create, complete, abort), run to its
 * end; SIGINT and the like stop it, but for the abort.
 */
static int
xfer_cb (void *p, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
  return p == NULL && s3_signal != 0;
}

static CURLcode
run_control (const char *method, const char *url, const char *body,
             struct answer *a, long *code, bool interruptible)
{
  char hash[65];
  struct curl_slist *headers;
  CURL *e;
  CURLcode rc = CURLE_OUT_OF_MEMORY;

  *code = 0;
  memset (a, 0, offsetof (struct answer, body) + 1);
  a->len = 0;
  a->cut = false;
  a->etag[0] = '\0';
  a->etag_bad = false;
  sha256_hex (body ? body : "", body ? strlen (body) : 0, hash);
  headers = headers_with (hash, body && strcmp (method, "POST") == 0
                          ? "Content-Type: application/xml" : NULL);
  if (headers == NULL)
    return CURLE_OUT_OF_MEMORY;
  e = new_request (url, a, headers);
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
  /* The abort must not wait for ever on a server that stopped. */
  if (!interruptible)
    curl_easy_setopt (e, CURLOPT_TIMEOUT, 60L);
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
static bool
retryable (CURLcode rc, long code, const struct answer *a)
{
  char c[64];

  if (rc != CURLE_OK)
    return rc == CURLE_COULDNT_CONNECT || rc == CURLE_SEND_ERROR ||
      rc == CURLE_RECV_ERROR || rc == CURLE_GOT_NOTHING ||
      rc == CURLE_PARTIAL_FILE || rc == CURLE_OPERATION_TIMEDOUT;
  if (code >= 500 || code == 408 || code == 429)
    return true;
  return code == 400 && xml_field (a, "Code", c, sizeof c) &&
    (strcmp (c, "BadDigest") == 0 || strcmp (c, "RequestTimeout") == 0 ||
     strcmp (c, "IncompleteBody") == 0);
}

static void
backoff_sleep (int tries)
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
static int
status_of (CURLcode rc)
{
  return rc != CURLE_OK ? (int) rc : EXIT_HTTP;
}

/* Create the upload: its ID, or the exit status of the failure. */
static int
create_upload (struct answer *a)
{
  char *url = url_with ("uploads");
  char what[128];
  CURLcode rc;
  long code;
  int tries;

  if (url == NULL)
    return EXIT_NOMEM;
  for (tries = 1; ; tries++) {
    rc = run_control ("POST", url, NULL, a, &code, true);
    if (rc == CURLE_OK && code == 200 && take_upload_id (a))
      break;
    if (rc == CURLE_OK && code == 200) {
      free (url);
      s3_fail ("creating the upload: no valid UploadId in the answer");
      return CURLE_WEIRD_SERVER_REPLY;
    }
    if (tries == S3_TRIES || !retryable (rc, code, a) || s3_signal) {
      free (url);
      if (rc != CURLE_OK)
        s3_fail ("creating the upload: %s", curl_easy_strerror (rc));
      else {
        describe (a, code, what, sizeof what);
        s3_fail ("creating the upload: %s", what);
      }
      return status_of (rc);
    }
    backoff_sleep (tries);
  }
  free (url);
  return EXIT_OK;
}

/* Abort the upload, so that its parts are not left billed; a note in
 * the message when that failed too.
 */
static void
abort_upload (struct answer *a)
{
  char *url = url_with ("uploadId=%s", s3.upload_id);
  char what[128];
  size_t n;
  CURLcode rc = CURLE_OUT_OF_MEMORY;
  long code = 0;
  int tries;

  for (tries = 1; url != NULL && tries <= 2; tries++) {
    rc = run_control ("DELETE", url, NULL, a, &code, false);
    if (rc == CURLE_OK && code >= 200 && code < 300)
      break;
    if (rc == CURLE_OK && code == 404 &&
        xml_field (a, "Code", what, sizeof what) &&
        strcmp (what, "NoSuchUpload") == 0)
      break;
  }
  free (url);
  if (rc == CURLE_OK && ((code >= 200 && code < 300) || code == 404))
    return;
  if (rc != CURLE_OK)
    snprintf (what, sizeof what, "%s", curl_easy_strerror (rc));
  else
    describe (a, code, what, sizeof what);
  n = strlen (s3.msg);
  snprintf (s3.msg + n, s3.msglen - n, "; aborting upload %s failed (%s): "
            "its parts may be left on the server", s3.upload_id, what);
}

/* Complete the upload with the parts' ETags; its answer's body to
 * standard output (or -o's file), as curl -T shows a PUT's.
 */
static int
complete_upload (struct answer *a, int parts)
{
  char *url = url_with ("uploadId=%s", s3.upload_id), *xml, *p;
  size_t size = 64 + (size_t) parts * (S3_ETAG_MAX + 64);
  char what[128];
  CURLcode rc;
  long code;
  int i, tries;

  xml = malloc (size);
  if (url == NULL || xml == NULL) {
    free (url);
    free (xml);
    s3_fail ("out of memory");
    return EXIT_NOMEM;
  }
  p = xml + sprintf (xml, "<CompleteMultipartUpload>");
  for (i = 1; i <= parts; i++)
    p += sprintf (p, "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag>"
                  "</Part>", i, s3.etags[i]);
  sprintf (p, "</CompleteMultipartUpload>");
  for (tries = 1; ; tries++) {
    rc = run_control ("POST", url, xml, a, &code, true);
    /* S3 may answer 200 and then an <Error> in the body. */
    if (rc == CURLE_OK && code == 200 && !a->cut &&
        strstr (a->body, "<Error>") == NULL &&
        strstr (a->body, "CompleteMultipartUploadResult") != NULL)
      break;
    if (tries == S3_TRIES || s3_signal ||
        !(retryable (rc, code, a) ||
          (rc == CURLE_OK && code == 200 && strstr (a->body, "<Error>")))) {
      free (url);
      free (xml);
      if (rc != CURLE_OK)
        s3_fail ("completing the upload: %s after %d %s",
                 curl_easy_strerror (rc), tries, tries > 1 ? "tries" : "try");
      else {
        describe (a, code, what, sizeof what);
        s3_fail ("completing the upload: %s%s after %d %s", what,
                 code == 200 ? " in a 200 answer" : "", tries,
                 tries > 1 ? "tries" : "try");
      }
      return status_of (rc);
    }
    backoff_sleep (tries);
  }
  free (url);
  free (xml);
  return EXIT_OK;
}

/* The answer's body to standard output or -o's file, waiting in poll
 * when it takes nothing for now.
 */
static int
write_answer (const struct answer *a)
{
  const char *out = s3.opt->output;
  struct io io;
  struct pollfd pfd;
  int fd;
  size_t off = 0;
  ssize_t n;

  if (out != NULL && strcmp (out, "-") != 0) {
    fd = open (out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd == -1) {
      s3_fail ("%s: %s", out, strerror (errno));
      return EXIT_WRITE;
    }
    io_own (&io, fd);
  }
  else
    io_open (&io, STDOUT_FILENO, O_WRONLY);
  while (off < a->len) {
    n = io_write (&io, a->body + off, a->len - off);
    if (n == -1 && (errno == EAGAIN || errno == EINTR)) {
      pfd = (struct pollfd) { .fd = io.poll_fd, .events = POLLOUT };
      poll (&pfd, 1, 1000);
      continue;
    }
    if (n == -1) {
      s3_fail ("writing the answer: %s", strerror (errno));
      io_close (&io);
      return EXIT_WRITE;
    }
    off += n;
  }
  if (!io_close (&io)) {
    s3_fail ("%s: %s", out ? out : "standard output", strerror (errno));
    return EXIT_WRITE;
  }
  return EXIT_OK;
}

/* A temporary file for a part too big for memory: unlinked from the
 * start, so nothing is left behind whatever happens.
 */
static int
spool_open (void)
{
  char name[4200];
  int fd;

#ifdef O_TMPFILE
  fd = open (s3.spool, O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0)
    return fd;
#endif
  snprintf (name, sizeof name, "%s/curlpipe-s3-XXXXXX", s3.spool);
  fd = mkostemp (name, O_CLOEXEC);
  if (fd >= 0)
    unlink (name);
  return fd;
}

/* The slot free again: its bytes and its request let go. */
static void
slot_free (struct part *p)
{
  if (p->easy) {
    curl_multi_remove_handle (s3.multi, p->easy);
    curl_easy_cleanup (p->easy);
    s3.in_flight--;
  }
  curl_slist_free_all (p->headers);
  free (p->buf);
  free (p->answer);
  if (p->fd >= 0)
    close (p->fd);
#ifdef HAVE_OPENSSL
  EVP_MD_CTX_free (p->md5);
#endif
  *p = (struct part) { .fd = -1 };
}

/* The part being filled from standard input, a new one when a slot is
 * free, or NULL (all slots busy, or a failure recorded in *status).
 */
static struct part *
filling_part (int *status)
{
  struct part *p, *free_slot = NULL;
  int i;

  for (i = 0; i < S3_SLOTS; i++) {
    p = &s3.slots[i];
    if (p->number != 0 && !p->full)
      return p;
    if (p->number == 0 && free_slot == NULL)
      free_slot = p;
  }
  if (free_slot == NULL)
    return NULL;
  p = free_slot;
  if (s3.next_number > S3_MAX_PARTS) {
    s3_fail ("the stream is longer than S3's 10,000 parts hold");
    *status = CURLE_FILESIZE_EXCEEDED;
    return NULL;
  }
  *p = (struct part) { .number = s3.next_number, .fd = -1 };
  p->target = part_size (p->number);
#ifdef HAVE_OPENSSL
  p->md5 = EVP_MD_CTX_new ();
  if (p->md5 == NULL || !EVP_DigestInit_ex (p->md5, EVP_md5 (), NULL))
    goto nomem;
#endif
  if (p->target <= s3.memory_part) {
    p->buf = malloc (p->target);
    if (p->buf == NULL)
      goto nomem;
  }
  else {
    p->fd = spool_open ();
    if (p->fd == -1) {
      s3_fail ("part %d: a temporary file in %s: %s", p->number, s3.spool,
               strerror (errno));
      slot_free (p);
      *status = EXIT_WRITE;
      return NULL;
    }
  }
  s3.next_number++;
  return p;
 nomem:
  slot_free (p);
  s3_fail ("out of memory");
  *status = EXIT_NOMEM;
  return NULL;
}

/* The part is filled (or standard input ended): its Content-MD5. */
static void
part_filled (struct part *p)
{
  unsigned char md[16];
  unsigned int n = 0;

#ifdef HAVE_OPENSSL
  EVP_DigestFinal_ex (p->md5, md, &n);
  EVP_EncodeBlock ((unsigned char *) p->content_md5, md, n);
#else
  (void) md;
  (void) n;
#endif
  p->full = true;
}

/* Bytes read into a part: kept in memory or written to its spool. */
static bool
part_add (struct part *p, const char *data, size_t len)
{
  ssize_t w;
  size_t off = 0;

#ifdef HAVE_OPENSSL
  EVP_DigestUpdate (p->md5, data, len);
#endif
  if (p->buf) {
    if (data != p->buf + p->size)
      memcpy (p->buf + p->size, data, len);
  }
  else {
    while (off < len) {
      w = pwrite (p->fd, data + off, len - off, p->size + off);
      if (w == -1 && errno == EINTR)
        continue;
      if (w == -1)
        return false;
      off += w;
    }
  }
  p->size += len;
  return true;
}

/* Standard input into the filling parts, at most S3_READ_TURN bytes a
 * turn; false on a failure (recorded in *status).
 */
static bool
read_input (int *status)
{
  curl_off_t budget = S3_READ_TURN;
  struct part *p;
  char *dst;
  size_t want;
  ssize_t n;

  while (!s3.eof && budget > 0) {
    p = filling_part (status);
    if (p == NULL)
      return *status == EXIT_OK;
    want = p->target - p->size;
    if ((curl_off_t) want > budget)
      want = budget;
    if (p->buf)
      dst = p->buf + p->size;
    else {
      dst = s3.zero;
      if (want > S3_SPOOL_CHUNK)
        want = S3_SPOOL_CHUNK;
    }
    n = io_read (&s3.in, dst, want);
    if (n == -1 && errno == EINTR)
      continue;
    if (n == -1 && errno == EAGAIN)
      return true;
    if (n == -1) {
      s3_fail ("reading standard input: %s (part %d)", strerror (errno),
               p->number);
      *status = EXIT_READ;
      return false;
    }
    if (n == 0) {
      s3.eof = true;
      /* An empty last part is dropped, unless it is the only one. */
      if (p->size == 0 && p->number > 1) {
        slot_free (p);
        s3.next_number--;
      }
      else
        part_filled (p);
      return true;
    }
    if (!part_add (p, dst, n)) {
      s3_fail ("part %d: writing its temporary file: %s", p->number,
               strerror (errno));
      *status = EXIT_WRITE;
      return false;
    }
    budget -= n;
    if (p->size == p->target)
      part_filled (p);
  }
  return true;
}

/* libcurl reads the part from its buffer or its spool. */
static size_t
part_read_cb (char *buf, size_t size, size_t nitems, void *opaque)
{
  struct part *p = opaque;
  size_t len = size * nitems;
  curl_off_t left = p->size - p->offset;
  ssize_t n;

  if ((curl_off_t) len > left)
    len = left;
  if (len == 0)
    return 0;
  if (p->buf) {
    memcpy (buf, p->buf + p->offset, len);
    n = len;
  }
  else {
    n = pread (p->fd, buf, len, p->offset);
    if (n <= 0)
      return CURL_READFUNC_ABORT;
  }
  p->offset += n;
  return n;
}

/* libcurl rewinds the part to send it again (a redirect, an auth). */
static int
part_seek_cb (void *opaque, curl_off_t offset, int origin)
{
  struct part *p = opaque;

  if (origin != SEEK_SET || offset < 0 || offset > p->size)
    return CURL_SEEKFUNC_CANTSEEK;
  p->offset = offset;
  return CURL_SEEKFUNC_OK;
}

/* Send a filled part: PUT ?partNumber=N&uploadId=ID. */
static int
part_start (struct part *p)
{
  char md5[64], *url;
  CURLcode rc = CURLE_OK;

  if (p->answer == NULL) {
    p->answer = malloc (sizeof *p->answer);
    if (p->answer == NULL)
      goto nomem;
  }
  p->answer->len = 0;
  p->answer->cut = false;
  p->answer->body[0] = '\0';
  p->answer->etag[0] = '\0';
  p->answer->etag_bad = false;
  snprintf (md5, sizeof md5, "Content-MD5: %s", p->content_md5);
  curl_slist_free_all (p->headers);
  p->headers = headers_with ("UNSIGNED-PAYLOAD",
                             p->content_md5[0] ? md5 : NULL);
  url = url_with ("partNumber=%d&uploadId=%s", p->number, s3.upload_id);
  if (p->headers == NULL || url == NULL) {
    free (url);
    goto nomem;
  }
  p->easy = new_request (url, p->answer, p->headers);
  free (url);
  if (p->easy == NULL)
    goto nomem;
  p->offset = 0;
  p->tries++;
  p->waiting = false;
#define SET(o, v) \
  if (rc == CURLE_OK) rc = curl_easy_setopt (p->easy, o, v)
  SET (CURLOPT_UPLOAD, 1L);
  SET (CURLOPT_INFILESIZE_LARGE, p->size);
  SET (CURLOPT_READFUNCTION, part_read_cb);
  SET (CURLOPT_READDATA, p);
  SET (CURLOPT_SEEKFUNCTION, part_seek_cb);
  SET (CURLOPT_SEEKDATA, p);
  SET (CURLOPT_PRIVATE, p);
  SET (CURLOPT_UPLOAD_BUFFERSIZE, (long) UPLOAD_BUFFER_SIZE);
#undef SET
  if (rc == CURLE_OK)
    rc = curl_multi_add_handle (s3.multi, p->easy) == CURLM_OK
      ? CURLE_OK : CURLE_OUT_OF_MEMORY;
  if (rc != CURLE_OK) {
    curl_easy_cleanup (p->easy);
    p->easy = NULL;
    s3_fail ("part %d: %s", p->number, curl_easy_strerror (rc));
    return rc;
  }
  s3.in_flight++;
  return EXIT_OK;
 nomem:
  s3_fail ("out of memory");
  return EXIT_NOMEM;
}

/* A part's request ended: its ETag kept and its slot freed, or a retry
 * set, or the failure; the exit status.
 */
static int
part_done (struct part *p, CURLcode rc)
{
  struct answer *a = p->answer;
  char what[160];
  long code = 0;

  curl_easy_getinfo (p->easy, CURLINFO_RESPONSE_CODE, &code);
  curl_multi_remove_handle (s3.multi, p->easy);
  curl_easy_cleanup (p->easy);
  p->easy = NULL;
  s3.in_flight--;
  if (rc == CURLE_OK && code == 200) {
    if (a->etag[0] == '\0') {
      s3_fail ("part %d: the answer has %s ETag", p->number,
               a->etag_bad ? "an invalid" : "no");
      return CURLE_WEIRD_SERVER_REPLY;
    }
    s3.etags[p->number] = strdup (a->etag);
    if (s3.etags[p->number] == NULL) {
      s3_fail ("out of memory");
      return EXIT_NOMEM;
    }
    slot_free (p);
    return EXIT_OK;
  }
  if (p->tries < S3_TRIES && retryable (rc, code, a)) {
    clock_gettime (CLOCK_MONOTONIC, &p->retry_at);
    p->retry_at.tv_nsec += (long) S3_BACKOFF_MS * 1000000L << (p->tries - 1);
    while (p->retry_at.tv_nsec >= 1000000000L) {
      p->retry_at.tv_sec++;
      p->retry_at.tv_nsec -= 1000000000L;
    }
    p->waiting = true;
    return EXIT_OK;
  }
  if (rc != CURLE_OK)
    snprintf (what, sizeof what, "%s", curl_easy_strerror (rc));
  else
    describe (a, code, what, sizeof what);
  s3_fail ("part %d: %s after %d %s", p->number, what, p->tries,
           p->tries > 1 ? "tries" : "try");
  return status_of (rc);
}

/* Start the filled parts that wait, as slots in flight allow. */
static int
start_parts (void)
{
  struct part *p;
  int i, status;

  for (i = 0; i < S3_SLOTS && s3.in_flight < S3_IN_FLIGHT; i++) {
    p = &s3.slots[i];
    if (p->number == 0 || !p->full || p->easy != NULL)
      continue;
    if (p->waiting && ms_until (&p->retry_at) > 0)
      continue;
    status = part_start (p);
    if (status != EXIT_OK)
      return status;
  }
  return EXIT_OK;
}

/* How long the loop may wait: libcurl's timer, a retry's time. */
static int
wait_ms (void)
{
  long t = -1;
  double r;
  int i;

  curl_multi_timeout (s3.multi, &t);
  if (t < 0 || t > 1000)
    t = 1000;
  for (i = 0; i < S3_SLOTS; i++) {
    if (s3.slots[i].waiting && s3.slots[i].easy == NULL) {
      r = ms_until (&s3.slots[i].retry_at);
      if (r < t)
        t = r < 0 ? 0 : (long) r + 1;
    }
  }
  return t;
}

static bool
parts_left (void)
{
  int i;

  for (i = 0; i < S3_SLOTS; i++)
    if (s3.slots[i].number != 0)
      return true;
  return false;
}

/* The parts, from standard input to the server, until the last is
 * stored; the exit status.
 */
static int
upload_parts (void)
{
  struct curl_waitfd extra[2];
  struct CURLMsg *m;
  struct part *p;
  int status = EXIT_OK, running, left, n;
  char drain[64];

  for (;;) {
    if (s3_signal)
      return 0;
    if (s3.opt->max_time_ms &&
        -ms_until (&s3.start) > s3.opt->max_time_ms) {
      s3_fail ("operation timed out after %ld ms", s3.opt->max_time_ms);
      return CURLE_OPERATION_TIMEDOUT;
    }
    if (!read_input (&status))
      return status;
    status = start_parts ();
    if (status != EXIT_OK)
      return status;
    if (s3.eof && !parts_left ())
      return EXIT_OK;
    curl_multi_perform (s3.multi, &running);
    for (m = curl_multi_info_read (s3.multi, &left); m != NULL;
         m = curl_multi_info_read (s3.multi, &left)) {
      if (m->msg != CURLMSG_DONE)
        continue;
      curl_easy_getinfo (m->easy_handle, CURLINFO_PRIVATE, (char **) &p);
      status = part_done (p, m->data.result);
      if (status != EXIT_OK)
        return status;
    }
    status = start_parts ();
    if (status != EXIT_OK)
      return status;
    /* The last part may have just been stored: no wait then. */
    if (s3.eof && !parts_left ())
      return EXIT_OK;
    n = 0;
    extra[n++] = (struct curl_waitfd) { .fd = s3.signal_pipe[0],
                                        .events = CURL_WAIT_POLLIN };
    p = NULL;
    if (!s3.eof) {
      int i;
      for (i = 0; i < S3_SLOTS; i++)
        if (s3.slots[i].number == 0 || !s3.slots[i].full)
          p = &s3.slots[i];
    }
    if (p != NULL)
      extra[n++] = (struct curl_waitfd) { .fd = s3.in.poll_fd,
                                          .events = CURL_WAIT_POLLIN };
    curl_multi_poll (s3.multi, extra, n, wait_ms (), NULL);
    if (extra[0].revents & CURL_WAIT_POLLIN) {
      if (read (s3.signal_pipe[0], drain, sizeof drain) == -1) {
        /* Nothing to drain after all. */
      }
    }
  }
}

/* Signals that end curlpipe abort the upload first. */
static void
catch_signals (bool on)
{
  static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
  struct sigaction sa = { .sa_handler = on ? on_signal : SIG_DFL };
  size_t i;

  sigemptyset (&sa.sa_mask);
  for (i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    sigaction (sigs[i], &sa, NULL);
}

bool
s3_multipart_wanted (const struct options *opt)
{
  struct stat sb;
  off_t at;

  if (opt->aws_sigv4 == NULL || opt->data_binary ||
      (opt->method && strcmp (opt->method, "PUT") != 0))
    return false;
  if (opt->upload_size >= 0)
    return opt->upload_size > S3_SINGLE_PUT_MAX;
  if (fstat (STDIN_FILENO, &sb) == -1 || !S_ISREG (sb.st_mode))
    return true;
  at = lseek (STDIN_FILENO, 0, SEEK_CUR);
  return sb.st_size - (at > 0 ? at : 0) > S3_SINGLE_PUT_MAX;
}

static const char *
signal_name (int sig)
{
  return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP";
}

static int
run (struct answer *a)
{
  int status;
  int i;

  /* For tests only (curlpipe(1)): a smaller first part, down to 1 MiB,
   * which s3rver takes although S3 wants 5 MiB; and parts spooled
   * from a smaller size.
   */
  s3.first_part = env_size ("CURLPIPE_S3_PART_SIZE", S3_FIRST_PART);
  if (s3.first_part < MIB || s3.first_part > S3_MAX_PART)
    s3.first_part = S3_FIRST_PART;
  s3.memory_part = env_size ("CURLPIPE_S3_MEMORY_PART", S3_MEMORY_PART);
  if (s3.memory_part > S3_MEMORY_PART)
    s3.memory_part = S3_MEMORY_PART;
  snprintf (s3.spool, sizeof s3.spool, "%s",
            getenv ("TMPDIR") && *getenv ("TMPDIR") ? getenv ("TMPDIR")
            : "/tmp");
  s3.etags = calloc (S3_MAX_PARTS + 1, sizeof *s3.etags);
  s3.zero = malloc (S3_SPOOL_CHUNK);
  s3.multi = curl_multi_init ();
  if (s3.etags == NULL || s3.zero == NULL || s3.multi == NULL) {
    s3_fail ("out of memory");
    return EXIT_NOMEM;
  }
  curl_multi_setopt (s3.multi, CURLMOPT_MAX_HOST_CONNECTIONS,
                     (long) S3_IN_FLIGHT);
  for (i = 0; i < S3_SLOTS; i++)
    s3.slots[i] = (struct part) { .fd = -1 };
  s3.next_number = 1;

  status = create_upload (a);
  if (status != EXIT_OK || s3_signal)
    goto failed;
  io_open (&s3.in, STDIN_FILENO, O_RDONLY);
  status = upload_parts ();
  for (i = 0; i < S3_SLOTS; i++)
    slot_free (&s3.slots[i]);
  if (status == EXIT_OK && !s3_signal)
    status = complete_upload (a, s3.next_number - 1);
  if (status == EXIT_OK && !s3_signal)
    return write_answer (a);
 failed:
  if (s3_signal) {
    s3.msg[0] = '\0';
    s3_fail ("interrupted by %s, the upload aborted",
             signal_name (s3_signal));
    status = 128 + s3_signal;
  }
  if (s3.upload_id)
    abort_upload (a);
  return status;
}

int
s3_multipart_run (const struct options *opt, char *msg, size_t msglen)
{
  struct answer *a = malloc (sizeof *a);
  int status, i;

  s3 = (struct s3) { .opt = opt, .msg = msg, .msglen = msglen,
                     .signal_pipe = { -1, -1 } };
  s3.in.fd = -1;
  clock_gettime (CLOCK_MONOTONIC, &s3.start);
  s3.url = shown_url (opt->url);
  if (a == NULL || s3.url == NULL ||
      pipe2 (s3.signal_pipe, O_CLOEXEC | O_NONBLOCK) == -1) {
    free (a);
    free (s3.url);
    snprintf (msg, msglen, "out of memory");
    return EXIT_NOMEM;
  }
  io_ignore_sigpipe ();
  catch_signals (true);
  status = run (a);
  catch_signals (false);
  if (s3.in.fd >= 0)
    io_close (&s3.in);
  for (i = 0; s3.etags && i <= S3_MAX_PARTS; i++)
    free (s3.etags[i]);
  free (s3.etags);
  free (s3.zero);
  free (s3.upload_id);
  curl_multi_cleanup (s3.multi);
  close (s3.signal_pipe[0]);
  close (s3.signal_pipe[1]);
  free (s3.url);
  free (a);
  return status;
}
