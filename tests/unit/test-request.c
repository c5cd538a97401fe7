/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * test-request: the request layer (plugins/curl/request/) driven
 * through a fake transport, without a network and without nbdkit.
 * Each case reads through request_get_spans as the read chain does, and
 * checks the bytes it got and every request that went out: a retry
 * after a connection cut or dropped, retries= as a bound, a redirect
 * followed once and then skipped, a target renewed after a 403 or
 * before its expiry, answers that are refused (a wrong range, another
 * version of a pinned object), and with a mirror, a read asked of the
 * other source when one fails or stalls.
 *
 * The fake transport runs libcurl for real, but on a Unix socket to a
 * fake server in the test, whatever host the URL names.  The server
 * records each request and answers it from the case's script.  The
 * URLs are IP literals, so nothing is looked up or sent anywhere.
 *
 * Each case runs in a child process of its own: the plugin's state
 * (the remembered target, its back-off) starts fresh every time.  A
 * failing check is named on stderr with the case's log, and the exit
 * status is 1.  Give a case's name to run only that one.
 */

#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "request/request.h"
#include "stub-nbdkit.h"

/* The object the server holds, and where it is. */
#define SIZE (1024 * 1024)
#define URL "http://127.0.0.1:1/obj"
#define URL_HOST "127.0.0.1:1"
#define TARGET "http://127.0.0.2:1/real"
#define TARGET_HOST "127.0.0.2:1"
#define MIRROR "http://127.0.0.3:1/mirror"
#define MIRROR_HOST "127.0.0.3:1"

/* Bounds on the fake server, and on how long it waits for a request. */
#define MAX_SEEN 32
#define MAX_CONNS 16
#define WAIT_MS 5000
/* A stalled answer stays silent this long at most. */
#define STALL_MS 15000
/* A case that takes longer than this has hung: its child is killed. */
#define CASE_SECS 30

/* The object's byte at offset i: each differs from its neighbours, so
 * bytes from a wrong offset show.
 */
static char
byte_at (uint64_t i)
{
  return (char) ((i * 31 + (i >> 8) + 7) & 0xff);
}

/* What the server answers to one request. */
enum reply_kind {
  RANGE,                        /* 206 with the bytes asked for */
  CUT,                          /* ... closed halfway through the body */
  DROP,                         /* closed before any answer */
  REDIRECT,                     /* 302 to location */
  STATUS,                       /* status, with no body */
  SHIFTED,                      /* 206 with the bytes one further on */
  STALL,                        /* 206, half the body, then silence */
  HEAD_OK,                      /* 200 with the size, for a HEAD */
};

struct reply {
  enum reply_kind kind;
  long status;                  /* STATUS */
  const char *location;         /* REDIRECT */
  const char *etag;             /* RANGE: an ETag header, if not NULL */
};
#define R(k) { .kind = (k) }
#define TAGGED(tag) { .kind = RANGE, .etag = (tag) }
#define TO(url) { .kind = REDIRECT, .location = (url) }
#define ST(n) { .kind = STATUS, .status = (n) }

/* A request as the server saw it. */
struct seen {
  char method[8];
  char host[64];
  char path[512];
  char if_match[64];
  bool ranged;
  uint64_t first, last;
  unsigned conn;                /* which connection it came on */
};

/* The fake server: the case's script, and what came.  Its responder
 * threads share it, under lock.
 */
static struct {
  pthread_mutex_t lock;
  const struct reply *replies;
  unsigned nreplies;
  struct seen seen[MAX_SEEN];
  unsigned nseen;
  int listener;
  bool started, stopping;
  pthread_t acceptor;
  pthread_t threads[MAX_CONNS];
  unsigned nconns;
  unsigned performs;            /* requests the transport ran */
} server = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The case's checks. */
static const char *case_name;
static unsigned failures, checks;

static void
check (int line, bool ok, const char *fs, ...)
{
  va_list args;

  checks++;
  if (ok)
    return;
  failures++;
  fprintf (stderr, "test-request.c:%d: %s: ", line, case_name);
  va_start (args, fs);
  vfprintf (stderr, fs, args);
  va_end (args);
  fprintf (stderr, "\n");
}
#define CHECK(ok, ...) check (__LINE__, (ok), __VA_ARGS__)

/* All of len bytes to fd; false when the client went. */
static bool
send_all (int fd, const char *buf, size_t len)
{
  while (len > 0) {
    ssize_t n = send (fd, buf, len, MSG_NOSIGNAL);

    if (n == -1 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    buf += n;
    len -= n;
  }
  return true;
}

/* The object's bytes first to last, or only the first half of them. */
static bool
send_bytes (int fd, uint64_t first, uint64_t last, bool half)
{
  char buf[65536];
  uint64_t end = half ? first + (last - first + 1) / 2 : last + 1;
  uint64_t pos = first;

  while (pos < end) {
    size_t n = end - pos < sizeof buf ? end - pos : sizeof buf;
    size_t i;

    for (i = 0; i < n; i++)
      buf[i] = byte_at (pos + i);
    if (!send_all (fd, buf, n))
      return false;
    pos += n;
  }
  return true;
}

/* Read one request's head from fd into buf (NUL-terminated): false at
 * the end of the connection, after WAIT_MS without a byte, or if the
 * head does not fit.
 */
static bool
read_head (int fd, char *buf, size_t size)
{
  size_t len = 0;

  while (len + 1 < size) {
    struct pollfd p = { .fd = fd, .events = POLLIN };
    ssize_t n;

    if (poll (&p, 1, WAIT_MS) != 1)
      return false;
    n = recv (fd, buf + len, size - 1 - len, 0);
    if (n == -1 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    len += n;
    buf[len] = '\0';
    if (strstr (buf, "\r\n\r\n") != NULL)
      return true;
  }
  return false;
}

/* The request line and the headers a case looks at. */
static void
parse_head (char *head, struct seen *s)
{
  char *line, *save = NULL;

  memset (s, 0, sizeof *s);
  line = strtok_r (head, "\r\n", &save);
  if (line == NULL ||
      sscanf (line, "%7s %511s", s->method, s->path) != 2)
    return;
  for (line = strtok_r (NULL, "\r\n", &save); line != NULL;
       line = strtok_r (NULL, "\r\n", &save)) {
    if (strncasecmp (line, "Host: ", 6) == 0)
      snprintf (s->host, sizeof s->host, "%s", line + 6);
    else if (strncasecmp (line, "If-Match: ", 10) == 0)
      snprintf (s->if_match, sizeof s->if_match, "%s", line + 10);
    else if (strncasecmp (line, "Range: bytes=", 13) == 0)
      s->ranged = sscanf (line + 13, "%" SCNu64 "-%" SCNu64,
                          &s->first, &s->last) == 2;
  }
}

/* Send nothing more on fd until the client closes it (STALL_MS at
 * most), reading what it may send.
 */
static void
wait_for_close (int fd)
{
  char buf[512];
  struct pollfd p = { .fd = fd, .events = POLLIN };

  while (poll (&p, 1, STALL_MS) == 1 && recv (fd, buf, sizeof buf, 0) > 0)
    ;
}

/* Answer one request by reply r: false when the connection ends. */
static bool
answer (int fd, const struct seen *s, const struct reply *r)
{
  char head[1024];
  uint64_t first = s->first, last = s->last;

  if (r->kind == DROP)
    return false;
  if (r->kind == REDIRECT)
    snprintf (head, sizeof head, "HTTP/1.1 302 Found\r\nLocation: %s\r\n"
              "Content-Length: 0\r\n\r\n", r->location);
  else if (r->kind == HEAD_OK)
    snprintf (head, sizeof head, "HTTP/1.1 200 OK\r\n"
              "Content-Length: %d\r\n\r\n", SIZE);
  else if (r->kind == STATUS || !s->ranged ||
           last + (r->kind == SHIFTED) >= SIZE)
    snprintf (head, sizeof head, "HTTP/1.1 %ld Scripted\r\n"
              "Content-Length: 0\r\n\r\n", r->kind == STATUS ? r->status
              : 400L);
  else {
    if (r->kind == SHIFTED)
      first++, last++;
    snprintf (head, sizeof head, "HTTP/1.1 206 Partial Content\r\n"
              "Content-Range: bytes %" PRIu64 "-%" PRIu64 "/%d\r\n"
              "Content-Length: %" PRIu64 "\r\n%s%s%s\r\n",
              first, last, SIZE, last - first + 1,
              r->etag ? "ETag: " : "", r->etag ? r->etag : "",
              r->etag ? "\r\n" : "");
    if (!send_all (fd, head, strlen (head)) ||
        !send_bytes (fd, first, last, r->kind == CUT || r->kind == STALL))
      return false;
    if (r->kind == STALL)
      wait_for_close (fd);
    return r->kind == RANGE || r->kind == SHIFTED;
  }
  return send_all (fd, head, strlen (head));
}

struct responder {
  int fd;
  unsigned conn;
};

/* One connection's server side: each request recorded and answered by
 * the next reply of the script, until either side closes it.  A
 * request beyond the script is answered 400.
 */
static void *
respond (void *arg)
{
  struct responder *me = arg;
  static const struct reply beyond = ST (400);
  char head[8192];
  bool more = true;

  while (more && read_head (me->fd, head, sizeof head)) {
    struct seen s;
    const struct reply *r = &beyond;

    parse_head (head, &s);
    s.conn = me->conn;
    pthread_mutex_lock (&server.lock);
    if (server.nseen < server.nreplies)
      r = &server.replies[server.nseen];
    if (server.nseen < MAX_SEEN)
      server.seen[server.nseen] = s;
    server.nseen++;
    pthread_mutex_unlock (&server.lock);
    more = answer (me->fd, &s, r);
  }
  close (me->fd);
  free (me);
  return NULL;
}

/* The fake server's socket, in a directory of its own.  Not an
 * abstract socket: libcurl 7.88 would not reuse a connection to one
 * (its peer address is empty, which it takes for a name still being
 * looked up).
 */
static char socket_dir[256], socket_path[sizeof socket_dir + 8];

/* Each connection libcurl makes gets a responder thread of its own,
 * until the case ends (server.stopping).
 */
static void *
accept_connections (void *arg)
{
  while (!__atomic_load_n (&server.stopping, __ATOMIC_RELAXED)) {
    struct pollfd p = { .fd = server.listener, .events = POLLIN };
    struct responder *r;
    int fd;

    if (poll (&p, 1, 50) != 1)
      continue;
    fd = accept4 (server.listener, NULL, NULL, SOCK_CLOEXEC);
    if (fd == -1)
      continue;
    r = malloc (sizeof *r);
    if (r == NULL || server.nconns == MAX_CONNS) {
      free (r);
      close (fd);
      continue;
    }
    r->fd = fd;
    r->conn = server.nconns;
    if (pthread_create (&server.threads[server.nconns], NULL, respond,
                        r) != 0) {
      free (r);
      close (fd);
      continue;
    }
    server.nconns++;
  }
  return NULL;
}

/* Listen, and start accepting: false on failure. */
static bool
server_start (void)
{
  struct sockaddr_un a = { .sun_family = AF_UNIX };
  const char *tmp = getenv ("TMPDIR");

  snprintf (socket_dir, sizeof socket_dir, "%s/test-request.XXXXXX",
            tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
  if (mkdtemp (socket_dir) == NULL) {
    perror ("test-request: mkdtemp");
    socket_dir[0] = '\0';
    return false;
  }
  snprintf (socket_path, sizeof socket_path, "%s/sock", socket_dir);
  if (strlen (socket_path) >= sizeof a.sun_path) {
    fprintf (stderr, "test-request: %s: too long for a socket\n",
             socket_path);
    return false;
  }
  strcpy (a.sun_path, socket_path);
  server.listener = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (server.listener == -1 ||
      bind (server.listener, (struct sockaddr *) &a, sizeof a) == -1 ||
      listen (server.listener, MAX_CONNS) == -1 ||
      pthread_create (&server.acceptor, NULL, accept_connections,
                      NULL) != 0) {
    perror ("test-request: the fake server");
    return false;
  }
  server.started = true;
  return true;
}

/* After libcurl closed its connections: every thread ended. */
static void
server_stop (void)
{
  unsigned i;

  if (socket_path[0] != '\0')
    unlink (socket_path);
  if (socket_dir[0] != '\0')
    rmdir (socket_dir);
  if (!server.started)
    return;
  __atomic_store_n (&server.stopping, true, __ATOMIC_RELAXED);
  pthread_join (server.acceptor, NULL);
  for (i = 0; i < server.nconns; i++)
    pthread_join (server.threads[i], NULL);
  close (server.listener);
}

static unsigned
fake_slots (void)
{
  return 1;
}

static long
fake_http_version (void)
{
  return CURL_HTTP_VERSION_1_1;
}

/* The request set up on c (exchange.c), run by libcurl for real, but
 * on a connection to the fake server whatever the URL's host.  libcurl
 * 7.88 ignores CURL_SOCKOPT_ALREADY_CONNECTED (curl issue 10626), so
 * the socket cannot simply be one end of a socketpair.
 */
static CURLcode
fake_perform (struct conn *c, bool *client_gone)
{
  server.performs++;
  if (getenv ("TEST_REQUEST_VERBOSE") != NULL)
    curl_easy_setopt (c->easy, CURLOPT_VERBOSE, 1L);
  curl_easy_setopt (c->easy, CURLOPT_UNIX_SOCKET_PATH, socket_path);
  return curl_easy_perform (c->easy);
}

static const struct transport fake_transport = {
  .name = "fake",
  .shared = false,
  .slots = fake_slots,
  .http_version = fake_http_version,
  .perform = fake_perform,
};

/* The plugin set up as nbdkit would (config, then get_ready, then the
 * probe's findings), with url= and then the case's key=value pairs
 * (NULL-terminated), and replies as the server's script.  A handle
 * to make requests on, or NULL (reported).
 */
static struct conn *
start (const struct reply *replies, unsigned nreplies, ...)
{
  struct conn *c;
  const char *key;
  va_list args;

  server.replies = replies;
  server.nreplies = nreplies;
  if (!server_start () || curl_global_init (CURL_GLOBAL_DEFAULT) != CURLE_OK)
    goto failed;
  /* A retry waits 10 ms, not a second, unless the case says otherwise. */
  if (config_set ("url", URL) == -1 ||
      config_set ("retry-delay", "0.01") == -1)
    goto failed;
  va_start (args, nreplies);
  for (key = va_arg (args, const char *); key != NULL;
       key = va_arg (args, const char *)) {
    const char *value = va_arg (args, const char *);

    if (config_set (key, value) == -1) {
      va_end (args);
      goto failed;
    }
  }
  va_end (args);
  if (config_complete () == -1)
    goto failed;
  /* What ops/mirrors.c does for url= alone. */
  sources[0] = (struct source) { .id = 0, .shown = cfg.shown_url,
                                 .proven = true };
  sources_add (&sources[0], SOURCE_UP);
  transport_use (&fake_transport);
  if (script_init () == -1 || transport_init () == -1 ||
      request_init () == -1)
    goto failed;
  /* What the probe would have found: the size, and no validators. */
  object.size = SIZE;
  object_serving ();

  c = calloc (1, sizeof *c);
  if (c == NULL)
    goto failed;
  c->sock = CURL_SOCKET_BAD;
  c->easy = curl_easy_init ();
  if (c->easy == NULL ||
      curl_easy_setopt (c->easy, CURLOPT_ERRORBUFFER, c->errbuf) ||
      curl_easy_setopt (c->easy, CURLOPT_NOSIGNAL, 1L) ||
      config_apply (c->easy) != CURLE_OK) {
    curl_easy_cleanup (c->easy);
    free (c);
    goto failed;
  }
  return c;

 failed:
  CHECK (false, "setting the plugin up failed: %s", stub_last_error ());
  return NULL;
}

/* A mirror proven the same object and up, as ops/mirrors.c leaves it,
 * as source i: its first byte takes 1 ms, as url='s does.
 */
static void
mirror_up (unsigned i, const char *url)
{
  static char shown[MAX_SOURCES][128];
  struct source *m = &sources[i];

  snprintf (shown[i], sizeof shown[i], "%s", url);
  *m = (struct source) {
    .id = i, .url = url, .shown = shown[i], .proven = true,
    .pin = { .etag = "", .last_modified = "", .header = "" },
  };
  CHECK (redirect_origin (url, &m->origin) == 0 &&
         redirect_origin (URL, &m->home) == 0, "%s: no origin", url);
  sources_add (m, SOURCE_PROBING);
  sources_set (m, SOURCE_UP, NULL);
  sources_probed (m, 1000000);
  sources_round_trip (1000000);
  nsources = i + 1;
}

/* The handle closed (its connections with it), the responders ended,
 * the plugin unloaded.
 */
static void
finish (struct conn *c)
{
  if (c != NULL) {
    curl_easy_cleanup (c->easy);
    free (c);
  }
  server_stop ();
  request_unload ();
  script_unload ();
  config_unload ();
  curl_global_cleanup ();
}

/* Read count bytes at offset into buf, as one request of one range. */
static enum verdict
read_at (struct conn *c, uint64_t offset, uint32_t count, char *buf)
{
  struct read_req req = { .offset = offset, .count = count, .buf = buf };
  struct read_req *reqs[1] = { &req };
  struct span span = {
    .first = offset, .last = offset + count - 1, .reqs = reqs, .nreqs = 1,
  };

  return request_get_spans (c, &span, 1);
}

/* Whether buf holds the object's count bytes at offset. */
static bool
right_bytes (const char *buf, uint64_t offset, uint32_t count)
{
  uint32_t i;

  for (i = 0; i < count; i++)
    if (buf[i] != byte_at (offset + i))
      return false;
  return true;
}

/* Read count bytes at offset, and check that the read succeeded with
 * the object's bytes.
 */
static void
read_ok (int line, struct conn *c, uint64_t offset, uint32_t count)
{
  char *buf = malloc (count);
  enum verdict v;

  if (buf == NULL) {
    check (line, false, "malloc failed");
    return;
  }
  memset (buf, 0, count);
  v = read_at (c, offset, count, buf);
  check (line, v == VERDICT_OK, "read of %" PRIu32 " bytes at %" PRIu64
         ": %s, not OK (last error: %s)", count, offset, verdict_name (v),
         stub_last_error ());
  check (line, v != VERDICT_OK || right_bytes (buf, offset, count),
         "read of %" PRIu32 " bytes at %" PRIu64 ": wrong bytes",
         count, offset);
  free (buf);
}
#define READ_OK(c, offset, count) read_ok (__LINE__, (c), (offset), (count))

/* A copy of the i-th request the server saw (its method "" if none
 * came), and how many came.
 */
static struct seen
seen_at (unsigned i, unsigned *n)
{
  struct seen s = { .method = "" };

  pthread_mutex_lock (&server.lock);
  if (i < server.nseen && i < MAX_SEEN)
    s = server.seen[i];
  *n = server.nseen;
  pthread_mutex_unlock (&server.lock);
  return s;
}

/* Check that the server saw n requests. */
static void
seen_count (int line, unsigned n)
{
  unsigned got;

  seen_at (0, &got);
  check (line, got == n, "%u requests, not %u", got, n);
  check (line, server.performs == got, "the transport ran %u requests, "
         "the server saw %u", server.performs, got);
}
#define SEEN_COUNT(n) seen_count (__LINE__, (n))

/* Check the i-th request's method, host and path: false if none came. */
static bool
seen_is (int line, unsigned i, const char *method, const char *host,
         const char *path, struct seen *s)
{
  unsigned n;

  *s = seen_at (i, &n);
  if (s->method[0] == '\0') {
    check (line, false, "request %u: none came", i);
    return false;
  }
  check (line, strcmp (s->method, method) == 0, "request %u: %s, not %s",
         i, s->method, method);
  check (line, strcmp (s->host, host) == 0, "request %u: to %s, not %s",
         i, s->host, host);
  check (line, strcmp (s->path, path) == 0, "request %u: for %s, not %s",
         i, s->path, path);
  return true;
}

/* Check the i-th request: a GET at host for path, of first-last. */
static void
seen_get (int line, unsigned i, const char *host, const char *path,
          uint64_t first, uint64_t last)
{
  struct seen s;

  if (seen_is (line, i, "GET", host, path, &s))
    check (line, s.ranged && s.first == first && s.last == last,
           "request %u: bytes %" PRIu64 "-%" PRIu64 ", not %" PRIu64 "-%"
           PRIu64, i, s.first, s.last, first, last);
}
#define SEEN_GET(i, host, path, first, last) \
  seen_get (__LINE__, (i), (host), (path), (first), (last))

/* Check the i-th request: a HEAD at host for path, with no Range. */
static void
seen_head (int line, unsigned i, const char *host, const char *path)
{
  struct seen s;

  if (seen_is (line, i, "HEAD", host, path, &s))
    check (line, !s.ranged, "request %u: a HEAD with a Range", i);
}
#define SEEN_HEAD(i, host, path) seen_head (__LINE__, (i), (host), (path))

/* The connection that the i-th request came on. */
static unsigned
seen_conn (unsigned i)
{
  unsigned n;

  return seen_at (i, &n).conn;
}

/* The requests seen, for a failing case's report. */
static void
print_seen (void)
{
  unsigned i;

  for (i = 0; i < server.nseen && i < MAX_SEEN; i++) {
    const struct seen *s = &server.seen[i];

    fprintf (stderr, "request %u (connection %u): %s %s Host: %s "
             "bytes %" PRIu64 "-%" PRIu64 "\n", i, s->conn, s->method,
             s->path, s->host, s->first, s->last);
  }
}

/* (a) An answer cut off halfway through its body is asked again, for
 * the same range, on a new connection, and the read gets its bytes.
 */
static void
retry_after_cut (void)
{
  static const struct reply replies[] = { R (CUT), R (RANGE) };
  struct conn *c = start (replies, 2, "retries", "2", NULL);

  if (c != NULL) {
    READ_OK (c, 65536, 4096);
    SEEN_COUNT (2);
    SEEN_GET (0, URL_HOST, "/obj", 65536, 69631);
    SEEN_GET (1, URL_HOST, "/obj", 65536, 69631);
    CHECK (seen_conn (0) != seen_conn (1),
           "the retry went out on the connection that was cut");
    CHECK (stub_errors () == 0, "an error: %s", stub_last_error ());
  }
  finish (c);
}

/* (a) So is a request whose connection closed before any answer. */
static void
retry_after_drop (void)
{
  static const struct reply replies[] = { R (DROP), R (RANGE) };
  struct conn *c = start (replies, 2, "retries", "2", NULL);

  if (c != NULL) {
    READ_OK (c, 0, 512);
    SEEN_COUNT (2);
    SEEN_GET (0, URL_HOST, "/obj", 0, 511);
    SEEN_GET (1, URL_HOST, "/obj", 0, 511);
    CHECK (stub_errors () == 0, "an error: %s", stub_last_error ());
  }
  finish (c);
}

/* retries=2: three tries in all, then the read fails, and says so. */
static void
retries_bounded (void)
{
  static const struct reply replies[] = { R (CUT), R (CUT), R (CUT),
                                          R (RANGE) };
  struct conn *c = start (replies, 4, "retries", "2", NULL);
  char buf[1000];

  if (c != NULL) {
    enum verdict v = read_at (c, 1000, sizeof buf, buf);

    CHECK (v == VERDICT_RETRY, "the read: %s, not RETRY", verdict_name (v));
    SEEN_COUNT (3);
    CHECK (strstr (stub_last_error (), "retries exhausted") != NULL,
           "the error does not say the retries were exhausted: %s",
           stub_last_error ());
  }
  finish (c);
}

/* (b) url= redirects: the read follows it, asking the same range, and
 * the next read goes straight to the target (resolved once: route.c).
 */
static void
redirect_followed_once (void)
{
  static const struct reply replies[] = {
    TO (TARGET), R (RANGE), R (RANGE),
  };
  struct conn *c = start (replies, 3, NULL);

  if (c != NULL) {
    READ_OK (c, 0, 4096);
    READ_OK (c, 8192, 100);
    SEEN_COUNT (3);
    SEEN_GET (0, URL_HOST, "/obj", 0, 4095);
    SEEN_GET (1, TARGET_HOST, "/real", 0, 4095);
    SEEN_GET (2, TARGET_HOST, "/real", 8192, 8291);
    CHECK (seen_conn (1) != seen_conn (0) && seen_conn (2) == seen_conn (1),
           "the target's requests did not share a connection of their own");
    CHECK (stub_errors () == 0, "an error: %s", stub_last_error ());
  }
  finish (c);
}

/* (b) A HEAD follows url='s redirect each time, even once reads go to
 * the remembered target (route.c: only reads use it), and gives the
 * size.
 */
static void
head_asks_url (void)
{
  static const struct reply replies[] = {
    TO (TARGET), R (RANGE), TO (TARGET), R (HEAD_OK),
  };
  struct conn *c = start (replies, 4, NULL);

  if (c != NULL) {
    struct object_info info = { .size = -1 };
    enum verdict v;

    READ_OK (c, 0, 4096);
    v = request_head (c, &info);
    CHECK (v == VERDICT_OK, "HEAD: %s, not OK (last error: %s)",
           verdict_name (v), stub_last_error ());
    CHECK (info.size == SIZE, "HEAD: size %" PRIi64 ", not %d", info.size,
           SIZE);
    SEEN_COUNT (4);
    SEEN_GET (1, TARGET_HOST, "/real", 0, 4095);
    SEEN_HEAD (2, URL_HOST, "/obj");
    SEEN_HEAD (3, TARGET_HOST, "/real");
  }
  finish (c);
}

/* A presigned URL of the target, signed sig, dated t and good for life
 * seconds: its path and query, after TARGET_HOST.
 */
static void
presigned (char *path, size_t size, const char *sig, time_t t,
           unsigned life)
{
  struct tm tm;
  char date[32];

  gmtime_r (&t, &tm);
  strftime (date, sizeof date, "%Y%m%dT%H%M%SZ", &tm);
  snprintf (path, size, "/real?X-Amz-Date=%s&X-Amz-Expires=%u"
            "&X-Amz-Signature=%s", date, life, sig);
}

/* (c) The target refuses (a presigned URL used up: 403): the same read
 * asks url= again at once, follows it to the renewed target (the same
 * object: only the signature differs), and later reads go there.
 */
static void
renewal_after_refusal (void)
{
  char one[256], two[256], to_one[300], to_two[300];
  struct reply replies[] = {
    TO (to_one), R (RANGE),
    ST (403), TO (to_two), R (RANGE),
    R (RANGE),
  };
  struct conn *c;

  presigned (one, sizeof one, "one", time (NULL), 3600);
  presigned (two, sizeof two, "two", time (NULL), 3600);
  snprintf (to_one, sizeof to_one, "http://" TARGET_HOST "%s", one);
  snprintf (to_two, sizeof to_two, "http://" TARGET_HOST "%s", two);
  c = start (replies, 6, NULL);
  if (c != NULL) {
    READ_OK (c, 0, 4096);
    READ_OK (c, 4096, 4096);
    READ_OK (c, 100000, 10);
    SEEN_COUNT (6);
    SEEN_GET (0, URL_HOST, "/obj", 0, 4095);
    SEEN_GET (1, TARGET_HOST, one, 0, 4095);
    SEEN_GET (2, TARGET_HOST, one, 4096, 8191);
    SEEN_GET (3, URL_HOST, "/obj", 4096, 8191);
    SEEN_GET (4, TARGET_HOST, two, 4096, 8191);
    SEEN_GET (5, TARGET_HOST, two, 100000, 100009);
    CHECK (stub_errors () == 0, "an error: %s", stub_last_error ());
  }
  finish (c);
}

/* (c) A presigned target near its expiry is renewed before it is used:
 * the read after asks url= first.  It expires at t0 + 3 and is found at
 * t0 (or t0 + 1 on a slow day).  Its renewal margin is then 1 s, half
 * its life at most (presigned_renew_margin), so a read from t0 + 2 on
 * renews it: the second read waits for that.
 */
static void
renewal_before_expiry (void)
{
  char one[256], two[256], to_one[300], to_two[300];
  struct reply replies[] = {
    TO (to_one), R (RANGE),
    TO (to_two), R (RANGE),
  };
  struct conn *c;
  time_t t0 = time (NULL);

  presigned (one, sizeof one, "one", t0 - 100, 103);
  presigned (two, sizeof two, "two", t0, 3600);
  snprintf (to_one, sizeof to_one, "http://" TARGET_HOST "%s", one);
  snprintf (to_two, sizeof to_two, "http://" TARGET_HOST "%s", two);
  c = start (replies, 4, "timeout", "1", NULL);
  if (c != NULL) {
    READ_OK (c, 0, 4096);
    while (time (NULL) < t0 + 2) {
      struct timespec ts = { .tv_nsec = 50 * 1000 * 1000 };

      nanosleep (&ts, NULL);
    }
    READ_OK (c, 4096, 4096);
    SEEN_COUNT (4);
    SEEN_GET (0, URL_HOST, "/obj", 0, 4095);
    SEEN_GET (1, TARGET_HOST, one, 0, 4095);
    SEEN_GET (2, URL_HOST, "/obj", 4096, 8191);
    SEEN_GET (3, TARGET_HOST, two, 4096, 8191);
    CHECK (stub_errors () == 0, "an error: %s", stub_last_error ());
  }
  finish (c);
}

/* (c) A renewal whose chain ends at another object's URL, while
 * nothing pins the object: the read fails, as another target's bytes
 * cannot be shown to be the same object's.
 */
static void
renewal_elsewhere (void)
{
  static const struct reply replies[] = {
    TO (TARGET), R (RANGE),
    ST (404), TO ("http://" TARGET_HOST "/other"),
    R (RANGE),
  };
  struct conn *c = start (replies, 5, "retries", "2", NULL);
  char buf[512];

  if (c != NULL) {
    enum verdict v;

    READ_OK (c, 0, 4096);
    v = read_at (c, 0, sizeof buf, buf);
    CHECK (v == VERDICT_REFUSED, "the read after the renewal: %s, not "
           "REFUSED", verdict_name (v));
    SEEN_COUNT (5);
    SEEN_GET (2, TARGET_HOST, "/real", 0, 511);
    SEEN_GET (3, URL_HOST, "/obj", 0, 511);
    SEEN_GET (4, TARGET_HOST, "/other", 0, 511);
    CHECK (strstr (stub_last_error (), "ends at http://" TARGET_HOST
                   "/other") != NULL,
           "the error does not name the other target: %s",
           stub_last_error ());
  }
  finish (c);
}

/* (d) An answer with another range than the one asked for is refused
 * before a byte of it reaches the read's buffer, and not asked again.
 */
static void
wrong_content_range (void)
{
  static const struct reply replies[] = { R (SHIFTED), R (RANGE) };
  struct conn *c = start (replies, 2, "retries", "2", NULL);
  char buf[2048];
  size_t i;

  if (c != NULL) {
    enum verdict v;

    memset (buf, 0x5a, sizeof buf);
    v = read_at (c, 2048, sizeof buf, buf);
    CHECK (v == VERDICT_REFUSED, "the read: %s, not REFUSED",
           verdict_name (v));
    for (i = 0; i < sizeof buf && buf[i] == 0x5a; i++)
      ;
    CHECK (i == sizeof buf, "byte %zu of the buffer was written", i);
    SEEN_COUNT (1);
    CHECK (strstr (stub_last_error (), "not the requested range") != NULL,
           "the error does not say so: %s", stub_last_error ());
  }
  finish (c);
}

/* Requests i and j went to different sources, for the same bytes. */
static void
two_sources (int line, unsigned i, unsigned j, uint64_t first,
             uint64_t last)
{
  unsigned n;
  struct seen a = seen_at (i, &n), b = seen_at (j, &n);
  bool url_first = strcmp (a.host, URL_HOST) == 0;

  seen_get (line, i, url_first ? URL_HOST : MIRROR_HOST,
            url_first ? "/obj" : "/mirror", first, last);
  seen_get (line, j, url_first ? MIRROR_HOST : URL_HOST,
            url_first ? "/mirror" : "/obj", first, last);
  check (line, strcmp (a.host, b.host) != 0, "requests %u and %u both "
         "went to %s", i, j, a.host);
}
#define TWO_SOURCES(i, j, first, last) \
  two_sources (__LINE__, (i), (j), (first), (last))

/* With a mirror, a read that one source fails (503) is asked of the
 * other at once: no retry is spent (retries=0), and no back-off.
 */
static void
mirror_failover (void)
{
  static const struct reply replies[] = { ST (503), R (RANGE) };
  struct conn *c = start (replies, 2, "retries", "0", NULL);

  if (c != NULL) {
    mirror_up (1, MIRROR);
    READ_OK (c, 300000, 5000);
    SEEN_COUNT (2);
    TWO_SOURCES (0, 1, 300000, 304999);
  }
  finish (c);
}

/* With a mirror, a read whose bytes stop coming is stopped after
 * HEDGE_MIN_NS (750 ms, sources.c) and asked of the other source: long
 * before timeout= or the stalled server would end it, and without a
 * retry.
 */
static void
mirror_hedge (void)
{
  static const struct reply replies[] = { R (STALL), R (RANGE) };
  struct conn *c = start (replies, 2, "retries", "0", "timeout", "20", NULL);
  int64_t t;

  if (c != NULL) {
    mirror_up (1, MIRROR);
    t = clock_ns ();
    READ_OK (c, 0, 65536);
    t = clock_ns () - t;
    CHECK (t < 5 * INT64_C (1000000000), "the read took %" PRIi64 " ms: "
           "it was not asked of the other source in time", t / 1000000);
    SEEN_COUNT (2);
    TWO_SOURCES (0, 1, 0, 65535);
  }
  finish (c);
}

/* Reads pinned to the ETag the probe found carry it in If-Match, and
 * an answer that shows another ETag is the object changed: refused
 * before a byte reaches the buffer, and not asked again.
 */
static void
pinned_changed (void)
{
  /* The third would serve a retry, which must not happen. */
  static const struct reply replies[] = {
    TAGGED ("\"v1\""), TAGGED ("\"v2\""), TAGGED ("\"v1\""),
  };
  struct conn *c;
  char buf[1024];
  unsigned n;

  strcpy (object.etag, "\"v1\"");
  c = start (replies, 3, NULL);
  if (c != NULL) {
    enum verdict v;
    size_t i;

    READ_OK (c, 0, 1024);
    memset (buf, 0x5a, sizeof buf);
    v = read_at (c, 1024, sizeof buf, buf);
    CHECK (v == VERDICT_OBJECT_CHANGED, "the read of another version: %s, "
           "not OBJECT_CHANGED", verdict_name (v));
    for (i = 0; i < sizeof buf && buf[i] == 0x5a; i++)
      ;
    CHECK (i == sizeof buf, "byte %zu of the buffer was written", i);
    CHECK (object_changed () == 1, "the change was counted %u times",
           object_changed ());
    SEEN_COUNT (2);
    CHECK (strcmp (seen_at (0, &n).if_match, "\"v1\"") == 0 &&
           strcmp (seen_at (1, &n).if_match, "\"v1\"") == 0,
           "the reads did not carry If-Match: \"v1\"");
  }
  finish (c);
}

static const struct {
  const char *name;
  void (*run) (void);
} cases[] = {
  { "retry-after-cut", retry_after_cut },
  { "retry-after-drop", retry_after_drop },
  { "retries-bounded", retries_bounded },
  { "redirect-followed-once", redirect_followed_once },
  { "head-asks-url", head_asks_url },
  { "renewal-after-refusal", renewal_after_refusal },
  { "renewal-before-expiry", renewal_before_expiry },
  { "renewal-elsewhere", renewal_elsewhere },
  { "wrong-content-range", wrong_content_range },
  { "pinned-changed", pinned_changed },
  { "mirror-failover", mirror_failover },
  { "mirror-hedge", mirror_hedge },
};

/* In the child: run case i, and exit 1 if a check failed. */
static void
run_case (size_t i)
{
  alarm (CASE_SECS);
  case_name = cases[i].name;
  cases[i].run ();
  if (failures > 0) {
    fprintf (stderr, "%s: %u of %u checks failed; the requests:\n",
             case_name, failures, checks);
    print_seen ();
    fprintf (stderr, "%s: the plugin's messages:\n", case_name);
    stub_print_log ();
    exit (EXIT_FAILURE);
  }
  printf ("%s: %u checks passed\n", case_name, checks);
  exit (EXIT_SUCCESS);
}

int
main (int argc, char *argv[])
{
  size_t i, ran = 0;
  unsigned failed = 0;

  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    pid_t pid;
    int status;

    if (argc > 1 && strcmp (argv[1], cases[i].name) != 0)
      continue;
    ran++;
    fflush (stdout);
    fflush (stderr);
    pid = fork ();
    if (pid == -1) {
      perror ("fork");
      return EXIT_FAILURE;
    }
    if (pid == 0)
      run_case (i);
    if (waitpid (pid, &status, 0) == -1) {
      perror ("waitpid");
      return EXIT_FAILURE;
    }
    if (!WIFEXITED (status) || WEXITSTATUS (status) != 0) {
      fprintf (stderr, "FAIL: %s (%s %d)\n", cases[i].name,
               WIFSIGNALED (status) ? "signal" : "exit status",
               WIFSIGNALED (status) ? WTERMSIG (status)
               : WEXITSTATUS (status));
      failed++;
    }
  }
  if (ran == 0) {
    fprintf (stderr, "test-request: no case named %s\n", argv[1]);
    return EXIT_FAILURE;
  }
  printf ("test-request: %zu cases, %u failed\n", ran, failed);
  return failed > 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
