/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * stream-server: a small HTTP/1.1 server of our own for curlpipe's tests
 * and benchmark.  nginx and friends buffer request bodies before a
 * handler sees them, so none of them can answer while an upload is still
 * running; this one can, which is the point of curlpipe.
 *
 *   stream-server --port-file FILE [--raw-port-file FILE] [--log FILE]
 *
 * It listens on 127.0.0.1 on a port the kernel picks and writes that
 * port to FILE (through FILE.tmp and a rename, so a reader never sees
 * half a number) once it is listening.  --raw-port-file adds a second
 * listener that is a plain TCP echo, no HTTP, the benchmark's floor.
 * It runs until killed.
 *
 * Paths:
 *   /echo        200 and chunked headers at once, then every piece of
 *                request body as a chunk as soon as it is read
 *   /sink        checks the body against the pattern below:
 *                200 "ok BYTES\n" or 422 "bad at OFFSET\n"
 *   /status/NNN  reads the body, answers NNN with a short body
 *   /early/NNN   answers NNN at once, then reads the body and closes
 *   /truncated   reads the body, promises 10 MiB, sends 3 MiB, closes
 *   /headers     reads the body, answers 200 with the request's header
 *                lines as received (what a client really sent)
 *   /end-early   200 with a short chunked body and its last chunk at
 *                once, then reads and drops the request body until the
 *                client closes: the answer is over, the upload is not
 *   /drop        200 chunked, a few bytes, then FIN without the last
 *                chunk (the request body is still read and dropped)
 *   /reset       200 chunked, a few bytes, then RST
 *   /silent      reads the body, never answers, waits for the close
 *   /tcp/PORT    a tunnel: connects to 127.0.0.1:PORT, answers 200
 *                chunked at once, copies the request body to that
 *                connection and its bytes back as chunks as they come;
 *                the answer ends (last chunk) when that side closes
 *                (502 if the connection is refused)
 *   /ws/echo     WebSocket (RFC 6455): each data frame comes back as a
 *                frame of the same length and FIN (text made binary),
 *                its payload streamed piece by piece as it is read
 *   /ws/tcp/PORT WebSocket tunnel to 127.0.0.1:PORT: frame payloads to
 *                that connection, its bytes back as binary frames as
 *                they come; its end sends close 1000 (1011 on an
 *                error); the client's close closes it (502 if refused)
 *   anything else 404
 *
 * WebSocket: GET with Upgrade: websocket, Connection: upgrade, version
 * 13 and a 16-byte key, else 400.  Frames must be masked, with clear
 * RSV bits, known opcodes and minimal lengths, else close 1002.  Ping
 * gets pong, close gets close with the same code.  A peer that does
 * not answer our close within 5 s is cut off.
 *
 * The byte pattern /sink checks is in pattern.h, which
 * pipe-driver.c shares.
 */

#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/sha.h>

#include "pattern.h"

/* A connection's input buffer.  A whole 64 KiB chunk of an upload fits,
 * and so does the longest header line accepted.
 */
#define BUF_SIZE (256 * 1024)
#define MAX_LINE 8192
#define MAX_HEADERS 100
#define MAX_TRAILERS 100
#define MAX_CONNECTIONS 256
#define MAX_BODY_CHUNK ((uint64_t) 1 << 60)
#define MAX_IOV 64

/* A peer silent for this long is gone; its thread ends. */
#define IDLE_TIMEOUT_S 600

static FILE *log_file;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;
static int connections;

struct conn {
  int fd;
  char *buf;
  size_t start, end;            /* unread bytes are buf[start..end) */
};

enum framing { FRAMING_NONE, FRAMING_LENGTH, FRAMING_CHUNKED };
enum body_state { BODY_DATA, BODY_CHUNK_SIZE, BODY_CHUNK_END,
                  BODY_TRAILERS, BODY_DONE };

struct body {
  enum framing framing;
  enum body_state state;
  uint64_t remaining;           /* of the body, or of the current chunk */
  uint64_t total;               /* body bytes handed out so far */
  unsigned trailers;
};

struct request {
  char method[32];
  char path[256];
  char lines[8192];             /* header lines as received, for /headers */
  size_t lines_len;
  bool http10;
  bool expect_continue;
  bool close;
  bool head;
  bool bad_te;
  bool bad_length;
  bool have_length;
  uint64_t length;
  bool chunked;
  bool ws_upgrade;              /* Upgrade: websocket */
  bool conn_upgrade;            /* Connection: ... upgrade ... */
  bool ws_version_13;
  char ws_key[64];
};

static int
write_all (int fd, const void *data, size_t len)
{
  const char *p = data;

  while (len > 0) {
    ssize_t r = write (fd, p, len);
    if (r < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    p += r;
    len -= (size_t) r;
  }
  return 0;
}

static int
writev_all (int fd, struct iovec *iov, int cnt)
{
  while (cnt > 0) {
    ssize_t r = writev (fd, iov, cnt);
    if (r < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    while (cnt > 0 && (size_t) r >= iov->iov_len) {
      r -= (ssize_t) iov->iov_len;
      iov++;
      cnt--;
    }
    if (cnt > 0) {
      iov->iov_base = (char *) iov->iov_base + r;
      iov->iov_len -= (size_t) r;
    }
  }
  return 0;
}

/* One read () into the buffer.  Returns bytes read, 0 at EOF, -1 on an
 * error or a full buffer (a line longer than the buffer).
 */
static ssize_t
fill (struct conn *c)
{
  ssize_t r;

  if (c->start == c->end)
    c->start = c->end = 0;
  else if (c->end == BUF_SIZE && c->start > 0) {
    memmove (c->buf, c->buf + c->start, c->end - c->start);
    c->end -= c->start;
    c->start = 0;
  }
  if (c->end == BUF_SIZE)
    return -1;
  do
    r = read (c->fd, c->buf + c->end, BUF_SIZE - c->end);
  while (r < 0 && errno == EINTR);
  if (r > 0)
    c->end += (size_t) r;
  return r;
}

/* Reads one line, without its CRLF (or bare LF), NUL-terminated in
 * place; *line stays valid until the next fill.  Returns 1 with a line,
 * 0 at EOF, -1 on an error or an over-long line, 2 when the line is not
 * all buffered and reading is not allowed.
 */
static int
read_line (struct conn *c, bool allow_read, char **line)
{
  for (;;) {
    char *start = c->buf + c->start;
    char *nl = memchr (start, '\n', c->end - c->start);
    ssize_t r;

    if (nl) {
      *nl = '\0';
      if (nl > start && nl[-1] == '\r')
        nl[-1] = '\0';
      *line = start;
      c->start = (size_t) (nl - c->buf) + 1;
      return 1;
    }
    if (c->end - c->start >= MAX_LINE)
      return -1;
    if (!allow_read)
      return 2;
    r = fill (c);
    if (r <= 0)
      return r == 0 ? 0 : -1;
  }
}

/* Parses a chunk-size line: hex digits, then optional spaces and
 * extensions after ';', which are ignored.
 */
static int
parse_chunk_size (const char *s, uint64_t *size)
{
  uint64_t v = 0;
  int digits = 0;

  for (; *s; s++) {
    int d;
    if (*s >= '0' && *s <= '9')
      d = *s - '0';
    else if (*s >= 'a' && *s <= 'f')
      d = *s - 'a' + 10;
    else if (*s >= 'A' && *s <= 'F')
      d = *s - 'A' + 10;
    else
      break;
    if (v > MAX_BODY_CHUNK / 16)
      return -1;
    v = v * 16 + (uint64_t) d;
    digits++;
  }
  if (digits == 0)
    return -1;
  while (*s == ' ' || *s == '\t')
    s++;
  if (*s != '\0' && *s != ';')
    return -1;
  *size = v;
  return 0;
}

/* Hands out the next piece of request body, pointing into the buffer:
 * 1 with a piece, 0 at the end of the body, -1 on an error (bad framing,
 * EOF inside the body), 2 when more must be read and that is not allowed.
 */
static int
body_next (struct conn *c, struct body *b, bool allow_read,
           const char **data, size_t *len)
{
  char *line;
  int r;

  for (;;) {
    switch (b->state) {
    case BODY_DONE:
      return 0;

    case BODY_DATA:
      if (b->remaining == 0) {
        if (b->framing == FRAMING_CHUNKED)
          b->state = BODY_CHUNK_END;
        else
          b->state = BODY_DONE;
        continue;
      }
      if (c->start == c->end) {
        ssize_t n;
        if (!allow_read)
          return 2;
        n = fill (c);
        if (n <= 0)
          return -1;
      }
      *len = c->end - c->start;
      if (*len > b->remaining)
        *len = (size_t) b->remaining;
      *data = c->buf + c->start;
      c->start += *len;
      b->remaining -= *len;
      b->total += *len;
      return 1;

    case BODY_CHUNK_SIZE:
      r = read_line (c, allow_read, &line);
      if (r != 1)
        return r == 2 ? 2 : -1;
      if (parse_chunk_size (line, &b->remaining) == -1)
        return -1;
      b->state = b->remaining == 0 ? BODY_TRAILERS : BODY_DATA;
      continue;

    case BODY_CHUNK_END:
      r = read_line (c, allow_read, &line);
      if (r != 1)
        return r == 2 ? 2 : -1;
      if (line[0] != '\0')
        return -1;
      b->state = BODY_CHUNK_SIZE;
      continue;

    case BODY_TRAILERS:
      r = read_line (c, allow_read, &line);
      if (r != 1)
        return r == 2 ? 2 : -1;
      if (line[0] == '\0')
        b->state = BODY_DONE;
      else if (++b->trailers > MAX_TRAILERS)
        return -1;
      continue;
    }
  }
}

static const char *
reason (int status)
{
  switch (status) {
  case 200: return "OK";
  case 201: return "Created";
  case 204: return "No Content";
  case 400: return "Bad Request";
  case 401: return "Unauthorized";
  case 403: return "Forbidden";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 409: return "Conflict";
  case 411: return "Length Required";
  case 413: return "Content Too Large";
  case 416: return "Range Not Satisfiable";
  case 422: return "Unprocessable Content";
  case 429: return "Too Many Requests";
  case 431: return "Request Header Fields Too Large";
  case 500: return "Internal Server Error";
  case 501: return "Not Implemented";
  case 502: return "Bad Gateway";
  case 503: return "Service Unavailable";
  case 504: return "Gateway Timeout";
  default: return "Status";
  }
}

static int
send_response (struct conn *c, const struct request *rq, int status,
               const char *body)
{
  char head[512];
  size_t blen = strlen (body);
  struct iovec iov[2];
  int n;

  n = snprintf (head, sizeof head,
                "HTTP/1.1 %d %s\r\n"
                "Content-Type: text/plain\r\n"
                "Content-Length: %zu\r\n"
                "%s"
                "\r\n",
                status, reason (status), blen,
                rq->close ? "Connection: close\r\n" : "");
  if (n < 0 || (size_t) n >= sizeof head)
    return -1;
  iov[0].iov_base = head;
  iov[0].iov_len = (size_t) n;
  iov[1].iov_base = (char *) body;
  iov[1].iov_len = rq->head ? 0 : blen;
  return writev_all (c->fd, iov, 2);
}

static void
log_request (const struct request *rq, const struct body *b, int status)
{
  static const char *const names[] = { "none", "length", "chunked" };

  if (!log_file)
    return;
  pthread_mutex_lock (&log_lock);
  fprintf (log_file, "%s %s framing=%s bytes=%" PRIu64 " status=%d\n",
           rq->method, rq->path, names[b->framing], b->total, status);
  fflush (log_file);
  pthread_mutex_unlock (&log_lock);
}

static void
parse_header (struct request *rq, char *line)
{
  char *colon = strchr (line, ':');
  char *value, *end;

  if (!colon)
    return;
  *colon = '\0';
  value = colon + 1;
  while (*value == ' ' || *value == '\t')
    value++;
  end = value + strlen (value);
  while (end > value && (end[-1] == ' ' || end[-1] == '\t'))
    *--end = '\0';

  if (strcasecmp (line, "Content-Length") == 0) {
    uint64_t v = 0;
    const char *p = value;
    if (*p == '\0')
      rq->bad_length = true;
    for (; *p; p++) {
      if (*p < '0' || *p > '9' || v > MAX_BODY_CHUNK / 10) {
        rq->bad_length = true;
        break;
      }
      v = v * 10 + (uint64_t) (*p - '0');
    }
    if (rq->have_length && v != rq->length)
      rq->bad_length = true;
    rq->have_length = true;
    rq->length = v;
  }
  else if (strcasecmp (line, "Transfer-Encoding") == 0) {
    /* Only a plain "chunked" is understood; a server must refuse a
     * coding it does not know (RFC 9112, 6.1) with 501.
     */
    if (strcasecmp (value, "chunked") == 0)
      rq->chunked = true;
    else
      rq->bad_te = true;
  }
  else if (strcasecmp (line, "Expect") == 0) {
    if (strcasecmp (value, "100-continue") == 0)
      rq->expect_continue = true;
  }
  else if (strcasecmp (line, "Connection") == 0) {
    /* Tokens other than these two do not change what is done here. */
    char *tok, *save = NULL;
    for (tok = strtok_r (value, " ,", &save); tok;
         tok = strtok_r (NULL, " ,", &save)) {
      if (strcasecmp (tok, "close") == 0)
        rq->close = true;
      else if (strcasecmp (tok, "keep-alive") == 0 && rq->http10)
        rq->close = false;
      else if (strcasecmp (tok, "upgrade") == 0)
        rq->conn_upgrade = true;
    }
  }
  else if (strcasecmp (line, "Upgrade") == 0) {
    char *tok, *save = NULL;
    for (tok = strtok_r (value, " ,", &save); tok;
         tok = strtok_r (NULL, " ,", &save))
      if (strcasecmp (tok, "websocket") == 0)
        rq->ws_upgrade = true;
  }
  else if (strcasecmp (line, "Sec-WebSocket-Version") == 0)
    rq->ws_version_13 = strcmp (value, "13") == 0;
  else if (strcasecmp (line, "Sec-WebSocket-Key") == 0) {
    /* A second key makes the handshake bad, as does a long one. */
    if (rq->ws_key[0] != '\0' || strlen (value) >= sizeof rq->ws_key)
      strcpy (rq->ws_key, "!");
    else
      strcpy (rq->ws_key, value);
  }
}

/* Reads the request line and headers.  Returns 1 with a request, 0 when
 * the peer closed between requests, -1 on an error (the connection is
 * then closed without an answer, or with a 400 when one can be sent).
 */
static int
read_request (struct conn *c, struct request *rq, int *status)
{
  char *line, *sp1, *sp2;
  unsigned n;
  int r;

  memset (rq, 0, sizeof *rq);
  *status = 0;
  /* Empty lines before a request are allowed (RFC 9112, 2.2). */
  for (n = 0;; n++) {
    r = read_line (c, true, &line);
    if (r != 1)
      return r == 0 && c->start == c->end ? 0 : -1;
    if (line[0] != '\0')
      break;
    if (n >= 8)
      return -1;
  }

  sp1 = strchr (line, ' ');
  sp2 = sp1 ? strchr (sp1 + 1, ' ') : NULL;
  if (!sp1 || !sp2 || (size_t) (sp1 - line) >= sizeof rq->method ||
      (size_t) (sp2 - sp1 - 1) >= sizeof rq->path ||
      strncmp (sp2 + 1, "HTTP/1.", 7) != 0) {
    *status = 400;
    return -1;
  }
  memcpy (rq->method, line, (size_t) (sp1 - line));
  memcpy (rq->path, sp1 + 1, (size_t) (sp2 - sp1 - 1));
  rq->http10 = strcmp (sp2 + 1, "HTTP/1.0") == 0;
  rq->close = rq->http10;
  rq->head = strcmp (rq->method, "HEAD") == 0;

  for (n = 0;; n++) {
    r = read_line (c, true, &line);
    if (r != 1) {
      *status = r == -1 ? 431 : 0;
      return -1;
    }
    if (line[0] == '\0')
      break;
    if (n >= MAX_HEADERS) {
      *status = 431;
      return -1;
    }
    /* Kept before parse_header cuts the line at its colon. */
    if (rq->lines_len + strlen (line) + 2 <= sizeof rq->lines) {
      memcpy (rq->lines + rq->lines_len, line, strlen (line));
      rq->lines_len += strlen (line);
      rq->lines[rq->lines_len++] = '\n';
      rq->lines[rq->lines_len] = '\0';
    }
    parse_header (rq, line);
  }
  if (rq->bad_length) {
    *status = 400;
    return -1;
  }
  if (rq->bad_te) {
    *status = 501;
    return -1;
  }
  return 1;
}

static int
send_continue (struct conn *c, const struct request *rq)
{
  static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";

  if (!rq->expect_continue || rq->http10)
    return 0;
  return write_all (c->fd, cont, sizeof cont - 1);
}

/* Reads and drops the whole body; -1 if its framing is broken. */
static int
drain_body (struct conn *c, struct body *b)
{
  const char *data;
  size_t len;
  int r;

  do
    r = body_next (c, b, true, &data, &len);
  while (r == 1);
  return r;
}

/* Gathers the pieces already buffered, so that one read () of the
 * socket becomes one chunk on the way back, and sends them.
 */
static int
serve_echo (struct conn *c, const struct request *rq, struct body *b)
{
  char head[512];
  int n;

  n = snprintf (head, sizeof head,
                "HTTP/1.1 200 OK\r\n"
                "Content-Type: application/octet-stream\r\n"
                "Transfer-Encoding: chunked\r\n"
                "%s"
                "\r\n",
                rq->close ? "Connection: close\r\n" : "");
  if (write_all (c->fd, head, (size_t) n) == -1)
    return -1;

  for (;;) {
    struct iovec iov[MAX_IOV + 2];
    char size_line[32];
    const char *data;
    size_t len, total;
    int cnt = 1, r;

    r = body_next (c, b, true, &data, &len);
    if (r != 1)
      break;
    total = 0;
    do {
      iov[cnt].iov_base = (char *) data;
      iov[cnt].iov_len = len;
      total += len;
      cnt++;
      if (cnt > MAX_IOV)
        break;
      r = body_next (c, b, false, &data, &len);
    } while (r == 1);
    n = snprintf (size_line, sizeof size_line, "%zx\r\n", total);
    iov[0].iov_base = size_line;
    iov[0].iov_len = (size_t) n;
    iov[cnt].iov_base = (char *) "\r\n";
    iov[cnt].iov_len = 2;
    if (writev_all (c->fd, iov, cnt + 1) == -1)
      return -1;
    if (r == -1)
      return -1;
  }
  if (b->state != BODY_DONE)
    return -1;
  return write_all (c->fd, "0\r\n\r\n", 5);
}

/* -2 when the body breaks its framing, before anything is answered, so
 * that the caller can still say 400.
 */
static int
serve_sink (struct conn *c, const struct request *rq, struct body *b,
            int *status)
{
  const char *data;
  size_t len;
  uint64_t bad = 0;
  bool is_bad = false;
  char answer[64];
  int r;

  for (;;) {
    uint64_t off;
    size_t i;

    r = body_next (c, b, true, &data, &len);
    if (r != 1)
      break;
    if (is_bad)
      continue;
    off = b->total - len;
    i = pattern_check ((const unsigned char *) data, off, len);
    if (i < len) {
      is_bad = true;
      bad = off + i;
    }
  }
  if (r == -1)
    return -2;
  if (is_bad) {
    *status = 422;
    snprintf (answer, sizeof answer, "bad at %" PRIu64 "\n", bad);
  }
  else {
    *status = 200;
    snprintf (answer, sizeof answer, "ok %" PRIu64 "\n", b->total);
  }
  return send_response (c, rq, *status, answer);
}

/* PREFIX followed by NNN, from 200 to 599: NNN; -1 for anything else. */
static int
status_path (const char *path, const char *prefix)
{
  size_t n = strlen (prefix);
  const char *p;

  if (strncmp (path, prefix, n) != 0)
    return -1;
  p = path + n;
  if (strlen (p) != 3 || p[0] < '2' || p[0] > '5' ||
      p[1] < '0' || p[1] > '9' || p[2] < '0' || p[2] > '9')
    return -1;
  return (p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0');
}

/* /tcp/PORT: PORT (1 to 65535); -1 for anything else. */
static int
tunnel_port (const char *path)
{
  const char *p;
  long port = 0;

  if (strncmp (path, "/tcp/", 5) != 0 || path[5] == '\0')
    return -1;
  for (p = path + 5; *p; p++) {
    if (*p < '0' || *p > '9' || port > 65535)
      return -1;
    port = port * 10 + (*p - '0');
  }
  return port >= 1 && port <= 65535 ? (int) port : -1;
}

/* Reads and drops the body, then whatever else comes, until the client
 * closes (or goes silent for IDLE_TIMEOUT_S).
 */
static void
drain_until_close (struct conn *c, struct body *b)
{
  if (drain_body (c, b) == 0)
    while (fill (c) > 0)
      c->start = c->end;
}

static const char chunked_head[] =
  "HTTP/1.1 200 OK\r\n"
  "Content-Type: application/octet-stream\r\n"
  "Transfer-Encoding: chunked\r\n"
  "\r\n";

/* /end-early, /drop and /reset: a few bytes of a chunked 200, then the
 * end of the answer, a FIN or an RST, while the request body may still
 * be coming.
 */
static void
serve_cut (struct conn *c, const struct request *rq, struct body *b,
           const char *how)
{
  static const char piece[] = "6\r\nfirst\n\r\n";
  static const char last[] = "0\r\n\r\n";

  if (write_all (c->fd, chunked_head, sizeof chunked_head - 1) == -1 ||
      write_all (c->fd, piece, sizeof piece - 1) == -1)
    goto out;
  if (strcmp (how, "end") == 0) {
    if (write_all (c->fd, last, sizeof last - 1) == 0)
      drain_until_close (c, b);
  }
  else if (strcmp (how, "fin") == 0) {
    /* Reading on, so that the close sends no RST. */
    shutdown (c->fd, SHUT_WR);
    drain_until_close (c, b);
  }
  else {
    struct linger lg = { .l_onoff = 1, .l_linger = 0 };

    setsockopt (c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  }
 out:
  log_request (rq, b, 200);
}

/* The request body's half of a /tcp/PORT tunnel, in a thread of its
 * own: the body to the TCP connection, then a half close.  When the
 * client goes away the TCP connection is shut down both ways, which
 * also ends the other half (serve_tunnel) if it waits there.
 */
struct tunnel {
  struct conn *c;
  struct body *b;
  int tcp;
};

static void *
tunnel_upload (void *arg)
{
  struct tunnel *t = arg;
  const char *data;
  size_t len;
  bool tcp_ok = true;
  int r;

  for (;;) {
    r = body_next (t->c, t->b, true, &data, &len);
    if (r != 1)
      break;
    if (tcp_ok && write_all (t->tcp, data, len) == -1)
      tcp_ok = false;           /* the far side closed: drop the rest */
  }
  shutdown (t->tcp, r == 0 ? SHUT_WR : SHUT_RDWR);
  return NULL;
}

static void
serve_tunnel (struct conn *c, const struct request *rq, struct body *b,
              int port)
{
  struct sockaddr_in sa = { .sin_family = AF_INET };
  struct timeval tv = { .tv_sec = IDLE_TIMEOUT_S };
  struct tunnel t = { .c = c, .b = b };
  pthread_t thread;
  char *buf = NULL;
  bool ended = false;
  int status = 200;
  ssize_t n;

  sa.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  sa.sin_port = htons ((uint16_t) port);
  t.tcp = socket (AF_INET, SOCK_STREAM, 0);
  if (t.tcp == -1 ||
      connect (t.tcp, (struct sockaddr *) &sa, sizeof sa) == -1) {
    struct request closing = *rq;

    closing.close = true;
    status = 502;
    send_response (c, &closing, status, "tunnel: cannot connect\n");
    goto out;
  }
  setsockopt (t.tcp, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt (t.tcp, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  buf = malloc (65536);
  if (buf == NULL ||
      write_all (c->fd, chunked_head, sizeof chunked_head - 1) == -1 ||
      pthread_create (&thread, NULL, tunnel_upload, &t) != 0)
    goto out;

  /* The TCP side's bytes, each read as one chunk. */
  for (;;) {
    struct iovec iov[3];
    char size_line[32];
    int len;

    n = read (t.tcp, buf, 65536);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      ended = n == 0;
      break;
    }
    len = snprintf (size_line, sizeof size_line, "%zx\r\n", (size_t) n);
    iov[0] = (struct iovec) { .iov_base = size_line, .iov_len = len };
    iov[1] = (struct iovec) { .iov_base = buf, .iov_len = (size_t) n };
    iov[2] = (struct iovec) { .iov_base = (char *) "\r\n", .iov_len = 2 };
    if (writev_all (c->fd, iov, 3) == -1)
      break;
  }
  /* A clean end of the far side ends the answer; a reset drops the
   * connection, which the client must see as an error.  Then the
   * request body is read (and dropped) until the client closes.
   */
  if (!ended || write_all (c->fd, "0\r\n\r\n", 5) == -1)
    shutdown (c->fd, SHUT_RDWR);
  pthread_join (thread, NULL);

 out:
  if (t.tcp != -1)
    close (t.tcp);
  free (buf);
  log_request (rq, b, status);
}

/* WebSocket (RFC 6455) on /ws/echo and /ws/tcp/PORT.  One frame is
 * read at a time.  A data frame's payload is handed on piece by piece
 * as it is read, so no frame is ever held whole.
 */

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define WS_OP_CONT 0x0
#define WS_OP_TEXT 0x1
#define WS_OP_BINARY 0x2
#define WS_OP_CLOSE 0x8
#define WS_OP_PING 0x9
#define WS_OP_PONG 0xa
#define WS_MAX_CONTROL 125
#define WS_TUNNEL_BUF (256 * 1024)

/* A peer that does not answer our close within this long is dropped. */
#define WS_CLOSE_WAIT_S 5

struct ws {
  struct conn *c;
  /* Frames go out whole, one at a time, from either thread. */
  pthread_mutex_t lock;
  pthread_cond_t done_cond;
  bool close_sent;
  bool reader_done;
  int tcp;                      /* the tunnel's far side, or -1 */
  uint64_t in_bytes;            /* payload bytes from the client */
};

/* A frame's header as read: payload length, mask key, flags. */
struct ws_frame {
  bool fin;
  int opcode;
  uint64_t len;
  unsigned char key[4];
};

/* XORs the mask key over LEN payload bytes that start at payload
 * offset OFF, eight bytes at a time where it can.
 */
static void
ws_unmask (unsigned char *p, size_t len, const unsigned char key[4],
           uint64_t off)
{
  unsigned char k[8];
  uint64_t k64, w;
  size_t i = 0, j;

  while (i < len && ((uintptr_t) (p + i) & 7) != 0) {
    p[i] ^= key[(off + i) & 3];
    i++;
  }
  for (j = 0; j < 8; j++)
    k[j] = key[(off + i + j) & 3];
  memcpy (&k64, k, 8);
  for (; i + 8 <= len; i += 8) {
    memcpy (&w, p + i, 8);
    w ^= k64;
    memcpy (p + i, &w, 8);
  }
  for (; i < len; i++)
    p[i] ^= key[(off + i) & 3];
}

/* A frame header for the server's side (never masked) in HDR (at least
 * 10 bytes); returns its length.
 */
static size_t
ws_header (unsigned char *hdr, bool fin, int opcode, uint64_t len)
{
  hdr[0] = (unsigned char) ((fin ? 0x80 : 0) | opcode);
  if (len < 126) {
    hdr[1] = (unsigned char) len;
    return 2;
  }
  if (len <= 0xffff) {
    hdr[1] = 126;
    hdr[2] = (unsigned char) (len >> 8);
    hdr[3] = (unsigned char) len;
    return 4;
  }
  hdr[1] = 127;
  for (int i = 0; i < 8; i++)
    hdr[2 + i] = (unsigned char) (len >> (56 - 8 * i));
  return 10;
}

/* Writes HDR then DATA as one writev, under the lock.  A frame after
 * our close is dropped (-1), as RFC 6455 5.5.1 forbids it.
 */
static int
ws_write (struct ws *ws, const unsigned char *hdr, size_t hlen,
          const void *data, size_t len, bool is_close)
{
  struct iovec iov[2];
  int r = -1;

  pthread_mutex_lock (&ws->lock);
  if (!ws->close_sent) {
    iov[0] = (struct iovec) { .iov_base = (void *) hdr, .iov_len = hlen };
    iov[1] = (struct iovec) { .iov_base = (void *) data, .iov_len = len };
    r = writev_all (ws->c->fd, iov, len > 0 ? 2 : 1);
    if (is_close)
      ws->close_sent = true;
  }
  pthread_mutex_unlock (&ws->lock);
  return r;
}

/* A whole frame with a short payload: control frames and the like. */
static int
ws_send (struct ws *ws, int opcode, const void *data, size_t len)
{
  unsigned char hdr[10];
  size_t hlen = ws_header (hdr, true, opcode, len);

  return ws_write (ws, hdr, hlen, data, len, opcode == WS_OP_CLOSE);
}

static int
ws_send_close (struct ws *ws, unsigned code, const char *why)
{
  unsigned char p[WS_MAX_CONTROL];
  size_t n = strlen (why);

  if (n > WS_MAX_CONTROL - 2)
    n = WS_MAX_CONTROL - 2;
  p[0] = (unsigned char) (code >> 8);
  p[1] = (unsigned char) code;
  memcpy (p + 2, why, n);
  return ws_send (ws, WS_OP_CLOSE, p, n + 2);
}

/* Makes at least N bytes (N is small) readable in the buffer. */
static int
ws_need (struct conn *c, size_t n)
{
  while (c->end - c->start < n) {
    if (c->end == BUF_SIZE && c->start > 0) {
      memmove (c->buf, c->buf + c->start, c->end - c->start);
      c->end -= c->start;
      c->start = 0;
    }
    if (fill (c) <= 0)
      return -1;
  }
  return 0;
}

/* Reads a frame header.  Returns 0 with one, -1 when the client has
 * gone, or 1002 (a protocol error) when the header breaks the rules.
 */
static int
ws_read_header (struct conn *c, struct ws_frame *f)
{
  const unsigned char *p;
  size_t ext, i;
  int b0, b1;

  if (ws_need (c, 2) == -1)
    return -1;
  p = (const unsigned char *) c->buf + c->start;
  b0 = p[0];
  b1 = p[1];
  /* A client must mask (RFC 6455 5.1); without a key the rest of the
   * header cannot even be found.
   */
  if ((b1 & 0x80) == 0)
    return 1002;
  ext = (b1 & 0x7f) == 126 ? 2 : (b1 & 0x7f) == 127 ? 8 : 0;
  if (ws_need (c, 2 + ext + 4) == -1)
    return -1;
  p = (const unsigned char *) c->buf + c->start;
  f->fin = (b0 & 0x80) != 0;
  f->opcode = b0 & 0x0f;
  f->len = b1 & 0x7f;
  if (ext > 0) {
    f->len = 0;
    for (i = 0; i < ext; i++)
      f->len = (f->len << 8) | p[2 + i];
  }
  memcpy (f->key, p + 2 + ext, 4);
  c->start += 2 + ext + 4;

  /* No extension was agreed, so the RSV bits must be clear; lengths
   * use the fewest bytes (RFC 6455 5.2).
   */
  if ((b0 & 0x70) != 0)
    return 1002;
  if ((ext == 2 && f->len < 126) || (ext == 8 && f->len <= 0xffff) ||
      (f->len >> 63) != 0)
    return 1002;
  switch (f->opcode) {
  case WS_OP_CONT: case WS_OP_TEXT: case WS_OP_BINARY:
    return 0;
  case WS_OP_CLOSE: case WS_OP_PING: case WS_OP_PONG:
    return f->fin && f->len <= WS_MAX_CONTROL ? 0 : 1002;
  default:
    return 1002;
  }
}

/* A close frame's payload is empty or a valid code and a reason. */
static bool
ws_close_ok (const unsigned char *p, size_t len, unsigned *code)
{
  *code = 1005;
  if (len == 0)
    return true;
  if (len == 1)
    return false;
  *code = (unsigned) p[0] << 8 | p[1];
  return (*code >= 1000 && *code <= 1003) ||
    (*code >= 1007 && *code <= 1014) ||
    (*code >= 3000 && *code <= 4999);
}

/* Where a data frame's payload goes: sent back (echo) or down the
 * tunnel.  -1 stops the connection.
 */
typedef int (*ws_sink) (struct ws *ws, const struct ws_frame *f,
                        uint64_t off, const unsigned char *data,
                        size_t len);

/* Each piece is sent back at once; the first carries the frame's
 * header (same length, same FIN, text turned into binary).
 */
static int
ws_echo_piece (struct ws *ws, const struct ws_frame *f, uint64_t off,
               const unsigned char *data, size_t len)
{
  unsigned char hdr[10];
  size_t hlen = 0;

  if (off == 0)
    hlen = ws_header (hdr, f->fin,
                      f->opcode == WS_OP_CONT ? WS_OP_CONT : WS_OP_BINARY,
                      f->len);
  if (hlen == 0 && len == 0)
    return 0;
  return ws_write (ws, hdr, hlen, data, len, false);
}

static int
ws_tunnel_piece (struct ws *ws, const struct ws_frame *f, uint64_t off,
                 const unsigned char *data, size_t len)
{
  (void) f;
  (void) off;
  /* A far side that has gone drops the rest; its end sends our close. */
  if (len > 0 && write_all (ws->tcp, data, len) == -1)
    shutdown (ws->tcp, SHUT_RDWR);
  return 0;
}

/* After a refused handshake or our error close, what the client still
 * sends is read and dropped for a while.  Our last bytes then reach it
 * instead of being lost to a reset.
 */
static void
ws_linger (struct conn *c)
{
  struct timeval tv = { .tv_sec = WS_CLOSE_WAIT_S };

  shutdown (c->fd, SHUT_WR);
  setsockopt (c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  while (fill (c) > 0)
    c->start = c->end;
}

/* The client's frames until the close handshake or an error. */
static void
ws_read_frames (struct ws *ws, ws_sink sink)
{
  struct conn *c = ws->c;
  bool in_message = false;
  int err = 0;

  for (;;) {
    struct ws_frame f;
    unsigned char ctl[WS_MAX_CONTROL];
    uint64_t off = 0;
    unsigned code;
    int r;

    r = ws_read_header (c, &f);
    if (r == -1)
      return;
    if (r != 0) {
      err = r;
      break;
    }

    if (f.opcode >= WS_OP_CLOSE) {
      if (ws_need (c, (size_t) f.len) == -1)
        return;
      memcpy (ctl, c->buf + c->start, (size_t) f.len);
      c->start += (size_t) f.len;
      ws_unmask (ctl, (size_t) f.len, f.key, 0);
      if (f.opcode == WS_OP_PING)
        ws_send (ws, WS_OP_PONG, ctl, (size_t) f.len);
      else if (f.opcode == WS_OP_CLOSE) {
        if (!ws_close_ok (ctl, (size_t) f.len, &code)) {
          err = 1002;
          break;
        }
        /* Our answer carries the client's code (RFC 6455 5.5.1). */
        if (code == 1005)
          ws_send (ws, WS_OP_CLOSE, NULL, 0);
        else
          ws_send (ws, WS_OP_CLOSE, ctl, 2);
        return;
      }
      continue;
    }

    /* A continuation needs a message begun, a new message none. */
    if ((f.opcode == WS_OP_CONT) != in_message) {
      err = 1002;
      break;
    }
    in_message = !f.fin;
    do {
      size_t len;

      if (off < f.len && c->start == c->end && fill (c) <= 0)
        return;
      len = c->end - c->start;
      if (len > f.len - off)
        len = (size_t) (f.len - off);
      ws_unmask ((unsigned char *) c->buf + c->start, len, f.key, off);
      if (sink (ws, &f, off, (unsigned char *) c->buf + c->start,
                len) == -1)
        return;
      c->start += len;
      off += len;
      ws->in_bytes += len;
    } while (off < f.len);
  }

  ws_send_close (ws, (unsigned) err, "protocol error");
  if (ws->tcp != -1)
    shutdown (ws->tcp, SHUT_RDWR);
  ws_linger (c);
}

/* The tunnel's far side to the client, each read as one binary frame.
 * Its end sends close 1000 (1011 on a reset), then waits a while for
 * the client's answer before cutting the connection.
 */
static void *
ws_tunnel_pump (void *arg)
{
  struct ws *ws = arg;
  unsigned char *buf = malloc (WS_TUNNEL_BUF);
  unsigned char hdr[10];
  struct timespec deadline;
  bool clean = false;
  ssize_t n;

  while (buf) {
    n = read (ws->tcp, buf, WS_TUNNEL_BUF);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      clean = n == 0;
      break;
    }
    if (ws_write (ws, hdr, ws_header (hdr, true, WS_OP_BINARY, (size_t) n),
                  buf, (size_t) n, false) == -1)
      break;
  }
  free (buf);
  if (clean)
    ws_send_close (ws, 1000, "");
  else
    ws_send_close (ws, 1011, "tunnel: connection failed");

  clock_gettime (CLOCK_REALTIME, &deadline);
  deadline.tv_sec += WS_CLOSE_WAIT_S;
  pthread_mutex_lock (&ws->lock);
  while (!ws->reader_done)
    if (pthread_cond_timedwait (&ws->done_cond, &ws->lock,
                                &deadline) == ETIMEDOUT)
      break;
  if (!ws->reader_done)
    shutdown (ws->c->fd, SHUT_RDWR);
  pthread_mutex_unlock (&ws->lock);
  return NULL;
}

/* Base64 of 20 bytes (SHA-1): 28 characters and a NUL in OUT. */
static void
ws_accept_key (const char *key, char out[29])
{
  char in[64 + sizeof WS_GUID];
  unsigned char md[SHA_DIGEST_LENGTH];

  snprintf (in, sizeof in, "%s%s", key, WS_GUID);
  SHA1 ((const unsigned char *) in, strlen (in), md);
  EVP_EncodeBlock ((unsigned char *) out, md, SHA_DIGEST_LENGTH);
}

/* The key must be base64 of 16 bytes (RFC 6455 4.1): 22 characters
 * from the alphabet then "==".
 */
static bool
ws_key_ok (const char *key)
{
  static const char alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t i;

  if (strlen (key) != 24 || strcmp (key + 22, "==") != 0)
    return false;
  for (i = 0; i < 22; i++)
    if (key[i] == '\0' || !strchr (alphabet, key[i]))
      return false;
  return true;
}

/* /ws/echo and /ws/tcp/PORT; PORT is 0 for echo. */
static void
serve_websocket (struct conn *c, const struct request *rq, struct body *b,
                 int port)
{
  struct ws ws = { .c = c, .tcp = -1 };
  struct request closing = *rq;
  char head[256], accept[29];
  pthread_t pump;
  int status = 101, n;

  closing.close = true;
  if (strcmp (rq->method, "GET") != 0 || rq->http10 || !rq->ws_upgrade ||
      !rq->conn_upgrade || !rq->ws_version_13 || !ws_key_ok (rq->ws_key) ||
      b->framing != FRAMING_NONE) {
    status = 400;
    send_response (c, &closing, status, "bad websocket handshake\n");
    ws_linger (c);
    goto out;
  }
  if (port > 0) {
    struct sockaddr_in sa = { .sin_family = AF_INET };
    struct timeval tv = { .tv_sec = IDLE_TIMEOUT_S };

    sa.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    sa.sin_port = htons ((uint16_t) port);
    ws.tcp = socket (AF_INET, SOCK_STREAM, 0);
    if (ws.tcp == -1 ||
        connect (ws.tcp, (struct sockaddr *) &sa, sizeof sa) == -1) {
      status = 502;
      send_response (c, &closing, status, "tunnel: cannot connect\n");
      goto out;
    }
    setsockopt (ws.tcp, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt (ws.tcp, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }

  ws_accept_key (rq->ws_key, accept);
  n = snprintf (head, sizeof head,
                "HTTP/1.1 101 Switching Protocols\r\n"
                "Upgrade: websocket\r\n"
                "Connection: Upgrade\r\n"
                "Sec-WebSocket-Accept: %s\r\n"
                "\r\n", accept);
  pthread_mutex_init (&ws.lock, NULL);
  pthread_cond_init (&ws.done_cond, NULL);
  if (write_all (c->fd, head, (size_t) n) == 0) {
    if (ws.tcp == -1)
      ws_read_frames (&ws, ws_echo_piece);
    else if (pthread_create (&pump, NULL, ws_tunnel_pump, &ws) == 0) {
      ws_read_frames (&ws, ws_tunnel_piece);
      /* Whatever ended the reading ends the far side too, and no data
       * frame follows the close.
       */
      shutdown (ws.tcp, SHUT_RDWR);
      pthread_mutex_lock (&ws.lock);
      ws.reader_done = true;
      ws.close_sent = true;
      pthread_cond_signal (&ws.done_cond);
      pthread_mutex_unlock (&ws.lock);
      pthread_join (pump, NULL);
    }
  }
  shutdown (c->fd, SHUT_WR);
  pthread_cond_destroy (&ws.done_cond);
  pthread_mutex_destroy (&ws.lock);
  b->total = ws.in_bytes;

 out:
  if (ws.tcp != -1)
    close (ws.tcp);
  log_request (rq, b, status);
}

/* /ws/echo: 0; /ws/tcp/PORT: PORT; -1 for anything else. */
static int
ws_path (const char *path)
{
  if (strcmp (path, "/ws/echo") == 0)
    return 0;
  if (strncmp (path, "/ws/", 4) != 0)
    return -1;
  return tunnel_port (path + 3);
}

static void
serve_http (struct conn *c)
{
  for (;;) {
    struct request rq;
    struct body b;
    int status, r;
    char answer[64];

    r = read_request (c, &rq, &status);
    if (r == 0)
      return;
    if (r == -1) {
      if (status != 0) {
        rq.close = true;
        send_response (c, &rq, status, "bad request\n");
      }
      return;
    }

    memset (&b, 0, sizeof b);
    if (rq.chunked) {
      b.framing = FRAMING_CHUNKED;
      b.state = BODY_CHUNK_SIZE;
      /* Both framings at once may be a smuggling attempt (RFC 9112,
       * 6.1): the chunked one wins and the connection ends after.
       */
      if (rq.have_length)
        rq.close = true;
    }
    else if (rq.have_length) {
      b.framing = FRAMING_LENGTH;
      b.state = BODY_DATA;
      b.remaining = rq.length;
    }
    else {
      b.framing = FRAMING_NONE;
      b.state = BODY_DONE;
    }

    if (b.framing != FRAMING_NONE && send_continue (c, &rq) == -1)
      return;

    if (strcmp (rq.path, "/echo") == 0) {
      status = 200;
      r = serve_echo (c, &rq, &b);
    }
    else if (status_path (rq.path, "/early/") > 0) {
      /* The answer before the body (a server refusing an upload at
       * once), then the body is read and dropped, and the connection
       * ends.
       */
      status = status_path (rq.path, "/early/");
      rq.close = true;
      snprintf (answer, sizeof answer, "early %d from stream-server\n",
                status);
      r = send_response (c, &rq, status, answer);
      if (r == 0)
        drain_body (c, &b);
      log_request (&rq, &b, status);
      return;
    }
    else if (strcmp (rq.path, "/truncated") == 0) {
      /* 200 promising 10 MiB, 3 MiB of zeros, then the end. */
      static const char head[] = "HTTP/1.1 200 OK\r\n"
        "Content-Length: 10485760\r\nConnection: close\r\n\r\n";
      size_t sent;

      if (drain_body (c, &b) == 0 &&
          write_all (c->fd, head, sizeof head - 1) == 0) {
        memset (c->buf, 0, BUF_SIZE);
        for (sent = 0; sent < 3 * 1024 * 1024; sent += BUF_SIZE)
          if (write_all (c->fd, c->buf, BUF_SIZE) == -1)
            break;
      }
      log_request (&rq, &b, 200);
      return;
    }
    else if (strcmp (rq.path, "/end-early") == 0 ||
             strcmp (rq.path, "/drop") == 0 ||
             strcmp (rq.path, "/reset") == 0) {
      serve_cut (c, &rq, &b, rq.path[1] == 'e' ? "end"
                 : rq.path[1] == 'd' ? "fin" : "rst");
      return;
    }
    else if (strcmp (rq.path, "/silent") == 0) {
      drain_until_close (c, &b);
      log_request (&rq, &b, 0);
      return;
    }
    else if (ws_path (rq.path) >= 0) {
      serve_websocket (c, &rq, &b, ws_path (rq.path));
      return;
    }
    else if (tunnel_port (rq.path) > 0) {
      serve_tunnel (c, &rq, &b, tunnel_port (rq.path));
      return;
    }
    else if (strcmp (rq.path, "/headers") == 0) {
      status = 200;
      r = drain_body (c, &b);
      if (r == -1)
        r = -2;
      else
        r = send_response (c, &rq, status, rq.lines);
    }
    else if (strcmp (rq.path, "/sink") == 0)
      r = serve_sink (c, &rq, &b, &status);
    else {
      int asked = status_path (rq.path, "/status/");
      status = asked == -1 ? 404 : asked;
      r = drain_body (c, &b);
      if (r == -1)
        r = -2;
      else {
        if (asked == -1)
          snprintf (answer, sizeof answer, "not found\n");
        else
          snprintf (answer, sizeof answer,
                    "error %d from stream-server\n", status);
        r = send_response (c, &rq, status, answer);
      }
    }
    /* A body that breaks its framing gets a 400 when no answer has
     * begun; /echo's has, so there the connection just ends.
     */
    if (r == -2) {
      rq.close = true;
      status = 400;
      send_response (c, &rq, status, "bad request body\n");
    }
    log_request (&rq, &b, r == -1 ? 0 : status);
    if (r < 0 || rq.close)
      return;
  }
}

static void
serve_raw (struct conn *c)
{
  for (;;) {
    ssize_t r = read (c->fd, c->buf, BUF_SIZE);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    if (write_all (c->fd, c->buf, (size_t) r) == -1)
      return;
  }
  shutdown (c->fd, SHUT_WR);
}

struct start {
  int fd;
  bool raw;
};

static void *
connection_thread (void *arg)
{
  struct start *s = arg;
  struct conn c = { .fd = s->fd };

  c.buf = malloc (BUF_SIZE);
  if (c.buf) {
    if (s->raw)
      serve_raw (&c);
    else
      serve_http (&c);
  }
  free (c.buf);
  close (c.fd);
  free (s);
  pthread_mutex_lock (&count_lock);
  connections--;
  pthread_mutex_unlock (&count_lock);
  return NULL;
}

static void
start_connection (int fd, bool raw)
{
  static const int one = 1;
  struct timeval tv = { .tv_sec = IDLE_TIMEOUT_S };
  pthread_attr_t attr;
  pthread_t thread;
  struct start *s;
  bool ok;

  pthread_mutex_lock (&count_lock);
  ok = connections < MAX_CONNECTIONS;
  if (ok)
    connections++;
  pthread_mutex_unlock (&count_lock);
  if (!ok) {
    close (fd);
    return;
  }

  setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);

  s = malloc (sizeof *s);
  ok = s != NULL && pthread_attr_init (&attr) == 0;
  if (ok) {
    s->fd = fd;
    s->raw = raw;
    pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize (&attr, 256 * 1024);
    ok = pthread_create (&thread, &attr, connection_thread, s) == 0;
    pthread_attr_destroy (&attr);
  }
  if (!ok) {
    free (s);
    close (fd);
    pthread_mutex_lock (&count_lock);
    connections--;
    pthread_mutex_unlock (&count_lock);
  }
}

static int
listen_loopback (int *port)
{
  static const int one = 1;
  struct sockaddr_in sa;
  socklen_t len = sizeof sa;
  int fd;

  fd = socket (AF_INET, SOCK_STREAM, 0);
  if (fd == -1) {
    perror ("stream-server: socket");
    exit (EXIT_FAILURE);
  }
  setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  memset (&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  sa.sin_port = 0;
  if (bind (fd, (struct sockaddr *) &sa, sizeof sa) == -1 ||
      listen (fd, 128) == -1 ||
      getsockname (fd, (struct sockaddr *) &sa, &len) == -1) {
    perror ("stream-server: bind/listen");
    exit (EXIT_FAILURE);
  }
  *port = ntohs (sa.sin_port);
  return fd;
}

static void
write_port_file (const char *file, int port)
{
  size_t len = strlen (file) + 5;
  char *tmp = malloc (len);
  FILE *fp;

  if (!tmp) {
    perror ("stream-server: malloc");
    exit (EXIT_FAILURE);
  }
  snprintf (tmp, len, "%s.tmp", file);
  fp = fopen (tmp, "w");
  if (!fp || fprintf (fp, "%d\n", port) < 0 || fclose (fp) == EOF ||
      rename (tmp, file) == -1) {
    fprintf (stderr, "stream-server: %s: %s\n", file, strerror (errno));
    exit (EXIT_FAILURE);
  }
  free (tmp);
}

static void
usage (void)
{
  fprintf (stderr,
           "usage: stream-server --port-file FILE "
           "[--raw-port-file FILE] [--log FILE]\n");
  exit (2);
}

int
main (int argc, char *argv[])
{
  const char *port_file = NULL, *raw_port_file = NULL, *log_name = NULL;
  struct pollfd pfd[2];
  int nfds = 1, port, i;

  for (i = 1; i < argc; i++) {
    if (i + 1 >= argc)
      usage ();
    if (strcmp (argv[i], "--port-file") == 0)
      port_file = argv[++i];
    else if (strcmp (argv[i], "--raw-port-file") == 0)
      raw_port_file = argv[++i];
    else if (strcmp (argv[i], "--log") == 0)
      log_name = argv[++i];
    else
      usage ();
  }
  if (!port_file)
    usage ();

  pattern_init ("stream-server");
  signal (SIGPIPE, SIG_IGN);

  if (log_name) {
    log_file = fopen (log_name, "a");
    if (!log_file) {
      fprintf (stderr, "stream-server: %s: %s\n", log_name, strerror (errno));
      exit (EXIT_FAILURE);
    }
  }

  pfd[0].fd = listen_loopback (&port);
  pfd[0].events = POLLIN;
  write_port_file (port_file, port);
  if (raw_port_file) {
    pfd[1].fd = listen_loopback (&port);
    pfd[1].events = POLLIN;
    nfds = 2;
    write_port_file (raw_port_file, port);
  }

  for (;;) {
    if (poll (pfd, (nfds_t) nfds, -1) == -1) {
      if (errno == EINTR)
        continue;
      perror ("stream-server: poll");
      exit (EXIT_FAILURE);
    }
    for (i = 0; i < nfds; i++) {
      int fd;
      if (!(pfd[i].revents & POLLIN))
        continue;
      fd = accept (pfd[i].fd, NULL, NULL);
      if (fd == -1) {
        /* Out of descriptors: wait a little rather than spin. */
        if (errno == EMFILE || errno == ENFILE || errno == ENOMEM ||
            errno == ENOBUFS) {
          struct timespec ts = { .tv_nsec = 10 * 1000 * 1000 };
          nanosleep (&ts, NULL);
        }
        continue;
      }
      start_connection (fd, i == 1);
    }
  }
}
