/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * ws:// and wss:// (RFC 6455), the client's side.  libcurl 7.88 has no
 * WebSocket support, so libcurl only makes the connection (TLS, proxy
 * tunnel, names: CURLOPT_CONNECT_ONLY on the http or https URL), and
 * this file sends the upgrade request with curl_easy_send, reads the
 * answer with curl_easy_recv, and then runs its own event loop:
 * standard input's bytes go out as masked binary frames, the payloads
 * of the server's data frames go to standard output as they come,
 * never a whole frame buffered, pings get pongs, and a close ends it.
 * Frames are built and parsed in wsframe.c.
 *
 * The loop never changes a flag of a shared descriptor (fdmodes.c),
 * polls without a timeout while idle, and keeps backpressure both
 * ways: standard output blocked stops reading the socket, the socket
 * full stops reading standard input.  TLS may hold decrypted bytes that
 * poll cannot see, so the socket is read until CURLE_AGAIN every time,
 * and again once standard output drains, before poll.
 */

#define _GNU_SOURCE            /* asprintf, memmem */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "curlpipe.h"
#include "pipe.h"
#include "secrets.h"
#include "websocket.h"

/* Beyond this, an upgrade answer's headers are refused, not read for
 * ever.
 */
#define HANDSHAKE_MAX (64 * 1024)

/* RFC 6455 section 1.3: hashed with the key for Sec-WebSocket-Accept. */
#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

/* Mask keys come from this many random bytes at a time: one getrandom
 * call for 64 frames, not one per frame.
 */
#define KEYS_SIZE 256

struct ws {
  struct pipe_state *st;        /* the easy handle, failure, -v */
  curl_socket_t sock;
  struct io in, out;
  struct timespec start;
  CURLcode result;              /* the first failure, CURLE_OK: none */

  uint8_t keys[KEYS_SIZE];
  size_t keys_used;

  /* Sending: a data frame sbuf[soff..slen), a control frame
   * cbuf[coff..clen), each sent whole before the next starts.
   */
  uint8_t *sbuf;
  size_t soff, slen;
  uint8_t cbuf[WS_HEAD_MAX + WS_CONTROL_MAX];
  size_t coff, clen;
  bool cbuf_close;              /* cbuf holds the close */
  bool send_blocked;            /* the socket took nothing: POLLOUT */
  bool pong_due;
  uint8_t pong[WS_CONTROL_MAX];
  size_t pong_len;
  bool close_due, close_sent;
  uint8_t close_payload[2];
  size_t close_len;
  bool in_eof;
  bool in_blocked;              /* standard input had nothing: POLLIN */

  /* Receiving: rbuf[roff..rlen) not yet taken. */
  uint8_t *rbuf;
  size_t roff, rlen;
  struct ws_parser parser;
  bool in_frame;
  struct ws_frame frame;
  uint64_t left;                /* of the frame's payload */
  bool in_message;
  uint8_t ctl[WS_CONTROL_MAX];
  size_t ctl_len;
  bool close_got;
  unsigned close_code;          /* 0: none given */
  char reason[WS_CONTROL_MAX + 1];
  bool out_blocked;             /* standard output took nothing: POLLOUT */
  bool peer_eof;
};

bool
websocket_url (const char *url)
{
  return strncasecmp (url, "ws://", 5) == 0 ||
    strncasecmp (url, "wss://", 6) == 0;
}

/* The first failure is the one reported, with its exit status. */
static void fail (struct ws *ws, CURLcode code, const char *fmt, ...)
  __attribute__ ((format (printf, 3, 4)));

static void
fail (struct ws *ws, CURLcode code, const char *fmt, ...)
{
  char text[384];
  va_list ap;

  if (ws->result != CURLE_OK)
    return;
  va_start (ap, fmt);
  vsnprintf (text, sizeof text, fmt, ap);
  va_end (ap);
  failure_report (ws->st, "%s: %s", ws->st->url, text);
  ws->result = code;
}

/* libcurl's own failure, in its words (secrets blanked). */
static void
fail_curl (struct ws *ws, CURLcode code)
{
  char shown[CURL_ERROR_SIZE];
  const char *text = failure_curl_buffer (ws->st);

  shown_message (text[0] ? text : curl_easy_strerror (code), shown,
                 sizeof shown);
  fail (ws, code, "%s", shown);
}

/* Milliseconds left of -m, or -1 for no limit; 0 when it is over. */
static int
time_left_ms (const struct ws *ws)
{
  double left;

  if (ws->st->opt->max_time_ms == 0)
    return -1;
  left = ws->st->opt->max_time_ms - seconds_since (&ws->start) * 1000;
  return left <= 0 ? 0 : (int) left + 1;
}

/* Wait for events on the socket during the upgrade; false after
 * reporting a timeout or a poll failure.
 */
static bool
wait_socket (struct ws *ws, short events)
{
  struct pollfd pfd = { .fd = ws->sock, .events = events };
  int r, ms;

  for (;;) {
    ms = time_left_ms (ws);
    if (ms == 0)
      break;
    r = poll (&pfd, 1, ms);
    if (r > 0)
      return true;
    if (r == -1 && errno != EINTR) {
      fail (ws, CURLE_RECV_ERROR, "poll: %s", strerror (errno));
      return false;
    }
  }
  fail (ws, CURLE_OPERATION_TIMEDOUT, "Operation timed out after %ld "
        "milliseconds (during the WebSocket upgrade)",
        ws->st->opt->max_time_ms);
  return false;
}

/* base64 of n bytes into out (4 * ((n + 2) / 3) + 1 bytes). */
static void
base64 (char *out, const void *in, size_t n)
{
  EVP_EncodeBlock ((unsigned char *) out, in, n);
}

/* Sec-WebSocket-Accept for key: base64 of SHA-1 of key and the GUID. */
static bool
expected_accept (const char *key, char out[29])
{
  char text[64];
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int mdlen;

  snprintf (text, sizeof text, "%s%s", key, WS_GUID);
  if (!EVP_Digest (text, strlen (text), md, &mdlen, EVP_sha1 (), NULL) ||
      mdlen != 20)
    return false;
  base64 (out, md, 20);
  return true;
}

/* The user's -H header of this name, or NULL. */
static const char *
user_header (const struct options *opt, const char *name)
{
  const struct curl_slist *u;
  size_t n = strlen (name);

  for (u = opt->headers; u != NULL; u = u->next)
    if (strncasecmp (u->data, name, n) == 0 &&
        (u->data[n] == ':' || u->data[n] == ';'))
      return u->data;
  return NULL;
}

/* A default header, unless the user gave one of that name (which goes
 * with the user's, or is removed by an empty "Name:").
 */
static void
put_default (FILE *fp, const struct options *opt, const char *name,
             const char *value)
{
  if (user_header (opt, name) == NULL)
    fprintf (fp, "%s: %s\r\n", name, value);
}

/* The user's -H headers, as curl sends them: "Name;" empty, "Name:"
 * with nothing after it not at all.
 */
static void
put_user_headers (FILE *fp, const struct options *opt)
{
  const struct curl_slist *u;
  const char *v;
  size_t n;

  for (u = opt->headers; u != NULL; u = u->next) {
    n = strcspn (u->data, ":;");
    if (u->data[n] == ';') {
      fprintf (fp, "%.*s:\r\n", (int) n, u->data);
      continue;
    }
    for (v = u->data + n + 1; *v == ' ' || *v == '\t'; v++)
      ;
    if (*v != '\0')
      fprintf (fp, "%s\r\n", u->data);
  }
}

/* "Basic ..." or "Bearer ..." from -u, --oauth2-bearer or the URL's
 * user:password, or NULL (also when out of memory).  Free it with
 * free after blanking it.
 */
static char *
authorization (const struct options *opt, CURLU *u)
{
  char *user = NULL, *password = NULL, *pair = NULL, *auth = NULL;
  size_t n;

  if (opt->bearer) {
    if (asprintf (&auth, "Bearer %s", opt->bearer) == -1)
      return NULL;
    return auth;
  }
  if (opt->userpwd)
    pair = strdup (opt->userpwd);
  else if (curl_url_get (u, CURLUPART_USER, &user, CURLU_URLDECODE) ==
           CURLUE_OK) {
    curl_url_get (u, CURLUPART_PASSWORD, &password, CURLU_URLDECODE);
    if (asprintf (&pair, "%s:%s", user, password ? password : "") == -1)
      pair = NULL;
  }
  if (password)
    explicit_bzero (password, strlen (password));
  curl_free (user);
  curl_free (password);
  if (pair == NULL)
    return NULL;
  n = strlen (pair);
  auth = malloc (6 + 4 * ((n + 2) / 3) + 1);
  if (auth != NULL) {
    memcpy (auth, "Basic ", 6);
    base64 (auth + 6, pair, n);
  }
  explicit_bzero (pair, n);
  free (pair);
  return auth;
}

/* The upgrade request into *req (malloc'd, *len bytes); false when out
 * of memory.
 */
static bool
build_request (struct ws *ws, CURLU *u, const char *key, char **req,
               size_t *len)
{
  const struct options *opt = ws->st->opt;
  char *host = NULL, *port = NULL, *path = NULL, *query = NULL, *auth;
  FILE *fp;
  bool ok;

  fp = open_memstream (req, len);
  if (fp == NULL)
    return false;
  curl_url_get (u, CURLUPART_HOST, &host, 0);
  curl_url_get (u, CURLUPART_PORT, &port, 0);
  curl_url_get (u, CURLUPART_PATH, &path, 0);
  curl_url_get (u, CURLUPART_QUERY, &query, 0);
  fprintf (fp, "GET %s%s%s HTTP/1.1\r\n", path ? path : "/",
           query ? "?" : "", query ? query : "");
  if (user_header (opt, "Host") == NULL)
    fprintf (fp, "Host: %s%s%s\r\n", host ? host : "", port ? ":" : "",
             port ? port : "");
  put_default (fp, opt, "User-Agent",
               opt->user_agent ? opt->user_agent
               : "curlpipe/" PACKAGE_VERSION);
  put_default (fp, opt, "Upgrade", "websocket");
  put_default (fp, opt, "Connection", "Upgrade");
  put_default (fp, opt, "Sec-WebSocket-Key", key);
  put_default (fp, opt, "Sec-WebSocket-Version", "13");
  auth = authorization (opt, u);
  if (auth) {
    put_default (fp, opt, "Authorization", auth);
    explicit_bzero (auth, strlen (auth));
    free (auth);
  }
  put_user_headers (fp, opt);
  fputs ("\r\n", fp);
  ok = !ferror (fp);
  fflush (fp);
  /* The request holds the credentials: blanked once sent (see below). */
  ok = fclose (fp) == 0 && ok;
  curl_free (host);
  curl_free (port);
  curl_free (path);
  curl_free (query);
  return ok;
}

/* Send len bytes whole during the upgrade. */
static bool
send_all (struct ws *ws, const char *p, size_t len)
{
  size_t n;
  CURLcode rc;

  while (len > 0) {
    rc = curl_easy_send (ws->st->easy, p, len, &n);
    if (rc == CURLE_AGAIN) {
      if (!wait_socket (ws, POLLOUT))
        return false;
      continue;
    }
    if (rc != CURLE_OK) {
      fail_curl (ws, rc);
      return false;
    }
    p += n;
    len -= n;
  }
  return true;
}

/* A header's value in the answer's headers [p, end), or NULL; *len
 * its length, spaces trimmed.
 */
static const char *
answer_header (const char *p, const char *end, const char *name,
               size_t *len)
{
  size_t n = strlen (name);
  const char *eol, *v, *e;

  for (; p < end; p = eol + 1) {
    eol = memchr (p, '\n', end - p);
    if (eol == NULL)
      eol = end;
    if ((size_t) (eol - p) > n && strncasecmp (p, name, n) == 0 &&
        p[n] == ':') {
      for (v = p + n + 1; v < eol && (*v == ' ' || *v == '\t'); v++)
        ;
      for (e = eol; e > v && (e[-1] == '\r' || e[-1] == ' ' ||
                              e[-1] == '\t'); e--)
        ;
      *len = e - v;
      return v;
    }
  }
  return NULL;
}

/* Does the comma-separated value [v, v + len) hold token? */
static bool
has_token (const char *v, size_t len, const char *token)
{
  size_t t = strlen (token), i = 0, s, e;

  while (i < len) {
    while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
      i++;
    s = i;
    while (i < len && v[i] != ',')
      i++;
    e = i;
    while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
      e--;
    if (e - s == t && strncasecmp (v + s, token, t) == 0)
      return true;
  }
  return false;
}

/* The upgrade answer's status and headers in buf[0..hlen): false after
 * reporting why it is refused.
 */
static bool
check_answer (struct ws *ws, const char *buf, size_t hlen, const char *key)
{
  const char *end = buf + hlen, *v, *eol = memchr (buf, '\n', hlen);
  char want[29];
  size_t len;
  int status = 0;

  if (eol == NULL || sscanf (buf, "HTTP/1.%*1[01] %3d", &status) != 1 ||
      status < 100) {
    fail (ws, CURLE_WEIRD_SERVER_REPLY,
          "the answer to the WebSocket upgrade is not HTTP/1.1");
    return false;
  }
  if (status != 101) {
    fail (ws, CURLE_HTTP_RETURNED_ERROR, "Refused WebSocket upgrade: %d",
          status);
    return false;
  }
  v = answer_header (eol + 1, end, "Upgrade", &len);
  if (v == NULL || !has_token (v, len, "websocket")) {
    fail (ws, CURLE_HTTP_RETURNED_ERROR, "Refused WebSocket upgrade: "
          "101 without 'Upgrade: websocket'");
    return false;
  }
  v = answer_header (eol + 1, end, "Connection", &len);
  if (v == NULL || !has_token (v, len, "upgrade")) {
    fail (ws, CURLE_HTTP_RETURNED_ERROR, "Refused WebSocket upgrade: "
          "101 without 'Connection: upgrade'");
    return false;
  }
  if (!expected_accept (key, want)) {
    fail (ws, CURLE_OUT_OF_MEMORY, "SHA-1 failed");
    return false;
  }
  v = answer_header (eol + 1, end, "Sec-WebSocket-Accept", &len);
  if (v == NULL || len != strlen (want) || memcmp (v, want, len) != 0) {
    fail (ws, CURLE_HTTP_RETURNED_ERROR, "Refused WebSocket upgrade: "
          "%s Sec-WebSocket-Accept", v ? "a wrong" : "no");
    return false;
  }
  /* No extension is offered, so none may be taken. */
  if (answer_header (eol + 1, end, "Sec-WebSocket-Extensions", &len)) {
    fail (ws, CURLE_HTTP_RETURNED_ERROR, "Refused WebSocket upgrade: "
          "the server chose an extension curlpipe did not offer");
    return false;
  }
  return true;
}

/* Read the answer's headers, at most HANDSHAKE_MAX bytes, into rbuf;
 * the bytes after them stay there as the first frames' bytes.
 */
static bool
read_answer (struct ws *ws, const char *key)
{
  char *buf = (char *) ws->rbuf, *blank;
  size_t got = 0, n, hlen;
  CURLcode rc;

  for (;;) {
    rc = curl_easy_recv (ws->st->easy, buf + got, HANDSHAKE_MAX - got, &n);
    if (rc == CURLE_AGAIN) {
      if (!wait_socket (ws, POLLIN))
        return false;
      continue;
    }
    if (rc != CURLE_OK) {
      fail_curl (ws, rc);
      return false;
    }
    if (n == 0) {
      fail (ws, CURLE_GOT_NOTHING, "the server closed the connection "
            "before answering the WebSocket upgrade");
      return false;
    }
    got += n;
    blank = memmem (buf, got, "\r\n\r\n", 4);
    if (blank != NULL)
      break;
    if (got == HANDSHAKE_MAX) {
      fail (ws, CURLE_WEIRD_SERVER_REPLY, "the answer to the WebSocket "
            "upgrade has over %d bytes of headers", HANDSHAKE_MAX);
      return false;
    }
  }
  hlen = blank + 4 - buf;
  easy_show_headers (ws->st, CURLINFO_HEADER_IN, buf, hlen);
  if (!check_answer (ws, buf, hlen, key))
    return false;
  ws->roff = hlen;
  ws->rlen = got;
  return true;
}

/* Connect, send the upgrade, check the answer. */
static bool
upgrade (struct ws *ws)
{
  const struct options *opt = ws->st->opt;
  const char *url = opt->url;
  char *http_url = NULL, *req = NULL, key[25];
  uint8_t raw[16];
  size_t len = 0;
  CURLU *u = NULL;
  CURLcode rc;
  bool ok = false;

  /* ws -> http, wss -> https: "ws" and "wss" are 2 and 3 letters. */
  if (asprintf (&http_url, "%s%s", url[2] == ':' ? "http" : "https",
                url + (url[2] == ':' ? 2 : 3)) == -1) {
    fail (ws, CURLE_OUT_OF_MEMORY, "out of memory");
    return false;
  }
  u = curl_url ();
  if (u == NULL ||
      curl_url_set (u, CURLUPART_URL, http_url, 0) != CURLUE_OK) {
    fail (ws, CURLE_URL_MALFORMAT, "not a valid WebSocket URL");
    goto out;
  }
  if (!easy_options_connect (ws->st, http_url)) {
    ws->result = CURLE_FAILED_INIT;
    goto out;
  }
  rc = curl_easy_perform (ws->st->easy);
  if (rc != CURLE_OK) {
    fail_curl (ws, rc);
    goto out;
  }
  /* Past the connection, libcurl's notes on each send and recv would
   * only be noise: -v shows the upgrade's headers (easy_show_headers).
   */
  curl_easy_setopt (ws->st->easy, CURLOPT_VERBOSE, 0L);
  rc = curl_easy_getinfo (ws->st->easy, CURLINFO_ACTIVESOCKET, &ws->sock);
  if (rc != CURLE_OK || ws->sock == CURL_SOCKET_BAD) {
    fail (ws, CURLE_COULDNT_CONNECT, "no connection to upgrade");
    goto out;
  }
  if (getrandom (raw, sizeof raw, 0) != sizeof raw) {
    fail (ws, CURLE_FAILED_INIT, "getrandom: %s", strerror (errno));
    goto out;
  }
  base64 (key, raw, sizeof raw);
  if (!build_request (ws, u, key, &req, &len)) {
    fail (ws, CURLE_OUT_OF_MEMORY, "out of memory");
    goto out;
  }
  easy_show_headers (ws->st, CURLINFO_HEADER_OUT, req, len);
  ok = send_all (ws, req, len) && read_answer (ws, key);
 out:
  if (req)
    explicit_bzero (req, len);
  free (req);
  free (http_url);
  curl_url_cleanup (u);
  return ok;
}

/* The next 4-byte mask key. */
static bool
next_key (struct ws *ws, uint8_t key[4])
{
  if (ws->keys_used == 0 || ws->keys_used + 4 > KEYS_SIZE) {
    if (getrandom (ws->keys, KEYS_SIZE, 0) != KEYS_SIZE) {
      fail (ws, CURLE_FAILED_INIT, "getrandom: %s", strerror (errno));
      return false;
    }
    ws->keys_used = 0;
  }
  memcpy (key, ws->keys + ws->keys_used, 4);
  ws->keys_used += 4;
  return true;
}

/* A control frame into cbuf, masked. */
static void
build_control (struct ws *ws, unsigned opcode, const uint8_t *payload,
               size_t len)
{
  uint8_t key[4];
  size_t h;

  if (!next_key (ws, key))
    return;
  h = ws_build_head (ws->cbuf, opcode, true, len, key);
  memcpy (ws->cbuf + h, payload, len);
  ws_mask (ws->cbuf + h, len, key, 0);
  ws->coff = 0;
  ws->clen = h + len;
  ws->cbuf_close = opcode == WS_CLOSE;
}

/* Queue our close with this code (once). */
static void
queue_close (struct ws *ws, unsigned code)
{
  if (ws->close_due || ws->close_sent)
    return;
  ws->close_due = true;
  ws->close_payload[0] = code >> 8;
  ws->close_payload[1] = code;
  ws->close_len = 2;
}

/* A frame the server must not send: a close 1002, tried once without
 * waiting, and the failure (curl's CURLE_RECV_ERROR for a bad frame).
 */
static void
protocol_error (struct ws *ws, const char *why)
{
  size_t n;

  fail (ws, CURLE_RECV_ERROR, "WebSocket protocol error from the server: "
        "%s", why);
  if (ws->coff == ws->clen && ws->soff == ws->slen && !ws->close_sent) {
    queue_close (ws, 1002);
    build_control (ws, WS_CLOSE, ws->close_payload, ws->close_len);
    curl_easy_send (ws->st->easy, ws->cbuf, ws->clen, &n);
  }
}

/* Printable ASCII of the close's reason, for the message. */
static void
keep_reason (struct ws *ws, const uint8_t *p, size_t len)
{
  size_t i;

  for (i = 0; i < len && i < WS_CONTROL_MAX; i++)
    ws->reason[i] = p[i] >= 0x20 && p[i] < 0x7f ? p[i] : '?';
  ws->reason[i] = '\0';
}

/* A whole frame has come: act on the control frames. */
static void
frame_end (struct ws *ws)
{
  ws->in_frame = false;
  switch (ws->frame.opcode) {
  case WS_PING:
    /* Only the latest ping needs its pong (RFC 6455 section 5.5.3). */
    memcpy (ws->pong, ws->ctl, ws->ctl_len);
    ws->pong_len = ws->ctl_len;
    ws->pong_due = true;
    break;
  case WS_CLOSE:
    ws->close_got = true;
    if (ws->ctl_len >= 2) {
      ws->close_code = (ws->ctl[0] << 8) | ws->ctl[1];
      keep_reason (ws, ws->ctl + 2, ws->ctl_len - 2);
    }
    /* Echo its code, as RFC 6455 section 5.5.1 asks. */
    if (ws->close_code != 0)
      queue_close (ws, ws->close_code);
    else if (!ws->close_due && !ws->close_sent) {
      ws->close_due = true;
      ws->close_len = 0;
    }
    break;
  default:
    break;
  }
}

/* Write a data payload's bytes to the output: how many it took; sets
 * out_blocked when it took none for now.
 */
static size_t
write_payload (struct ws *ws, const uint8_t *p, size_t len)
{
  ssize_t w = io_write (&ws->out, p, len);

  if (w >= 0)
    return w;
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
    ws->out_blocked = errno != EINTR;
  else {
    failure_output (ws->st, "%s", strerror (errno));
    fail (ws, CURLE_WRITE_ERROR, "writing the output: %s",
          strerror (errno));
  }
  return 0;
}

/* Take what rbuf holds: headers parsed, payloads written, control
 * frames gathered; stops when the output is blocked or a close came.
 * True when anything was taken.
 */
static bool
take_frames (struct ws *ws)
{
  const uint8_t *p, *end;
  const char *why;
  size_t k, w;
  bool moved = false;

  while (ws->roff < ws->rlen && ws->result == CURLE_OK && !ws->close_got &&
         !ws->out_blocked) {
    p = ws->rbuf + ws->roff;
    end = ws->rbuf + ws->rlen;
    if (!ws->in_frame) {
      switch (ws_parse_head (&ws->parser, &p, end, &ws->frame, &why)) {
      case WS_PARSE_BAD:
        protocol_error (ws, why);
        return true;
      case WS_PARSE_MORE:
        break;
      case WS_PARSE_DONE:
        why = ws_check_sequence (&ws->in_message, &ws->frame);
        if (why) {
          protocol_error (ws, why);
          return true;
        }
        ws->in_frame = true;
        ws->left = ws->frame.len;
        ws->ctl_len = 0;
        break;
      }
      moved = true;
      ws->roff = p - ws->rbuf;
    }
    else if (ws->frame.opcode < WS_CLOSE) {
      k = ws->left < (uint64_t) (end - p) ? ws->left : (uint64_t) (end - p);
      w = write_payload (ws, p, k);
      ws->roff += w;
      ws->left -= w;
      moved = moved || w > 0;
    }
    else {
      k = ws->left < (uint64_t) (end - p) ? ws->left : (uint64_t) (end - p);
      memcpy (ws->ctl + ws->ctl_len, p, k);
      ws->ctl_len += k;
      ws->roff += k;
      ws->left -= k;
      moved = true;
    }
    if (ws->in_frame && ws->left == 0)
      frame_end (ws);
  }
  if (ws->roff == ws->rlen)
    ws->roff = ws->rlen = 0;
  return moved;
}

/* Take frames and read the socket until CURLE_AGAIN, the output
 * blocked, or the end.  True when anything moved.
 */
static bool
receive (struct ws *ws)
{
  bool moved = take_frames (ws);
  size_t n;
  CURLcode rc;

  while (ws->result == CURLE_OK && ws->rlen == 0 && !ws->close_got &&
         !ws->peer_eof && !ws->out_blocked) {
    rc = curl_easy_recv (ws->st->easy, ws->rbuf, DOWNLOAD_BUFFER_SIZE, &n);
    if (rc == CURLE_AGAIN)
      break;
    if (rc != CURLE_OK) {
      fail_curl (ws, rc);
      break;
    }
    moved = true;
    if (n == 0) {
      ws->peer_eof = true;
      /* As curl_ws_recv: closed between frames 52, inside one 56. */
      if (ws->in_frame || ws->parser.have > 0)
        fail (ws, CURLE_RECV_ERROR, "the server closed the connection "
              "inside a WebSocket frame");
      else
        fail (ws, CURLE_GOT_NOTHING, "the server closed the connection "
              "without a WebSocket close frame");
      break;
    }
    ws->rlen = n;
    take_frames (ws);
  }
  return moved;
}

/* Standard input's next bytes as a masked binary frame in sbuf; its
 * end queues a close 1000.  True when anything was read.
 */
static bool
read_input (struct ws *ws)
{
  uint8_t key[4], head[WS_HEAD_MAX];
  uint8_t *payload = ws->sbuf + WS_HEAD_MAX;
  ssize_t n;
  size_t h;

  if (ws->in_eof || ws->close_due || ws->close_sent || ws->close_got ||
      ws->soff < ws->slen || ws->result != CURLE_OK)
    return false;
  n = io_read (&ws->in, payload, UPLOAD_BUFFER_SIZE);
  if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    ws->in_blocked = true;
    return false;
  }
  if (n == -1 && errno == EINTR)
    return true;
  if (n == -1) {
    failure_input (ws->st, "%s", strerror (errno));
    fail (ws, CURLE_READ_ERROR, "reading standard input: %s", strerror (errno));
    return false;
  }
  if (n == 0) {
    ws->in_eof = true;
    queue_close (ws, 1000);
    return true;
  }
  if (!next_key (ws, key))
    return false;
  ws_mask (payload, n, key, 0);
  h = ws_build_head (head, WS_BINARY, true, n, key);
  memcpy (payload - h, head, h);
  ws->soff = WS_HEAD_MAX - h;
  ws->slen = WS_HEAD_MAX + n;
  return true;
}

/* Send bytes of buf[*off..len) that the socket takes now. */
static bool
send_some (struct ws *ws, const uint8_t *buf, size_t *off, size_t len)
{
  size_t n = 0;
  CURLcode rc = curl_easy_send (ws->st->easy, buf + *off, len - *off, &n);

  if (rc == CURLE_AGAIN) {
    ws->send_blocked = true;
    return false;
  }
  /* A server may drop the connection once its close is sent: ours,
   * the answer to it, need not arrive.
   */
  if (rc != CURLE_OK && ws->close_got) {
    ws->close_sent = true;
    return false;
  }
  if (rc != CURLE_OK) {
    fail_curl (ws, rc);
    return false;
  }
  *off += n;
  return n > 0;
}

/* Send what is due: the frame being sent first, then a pong, then the
 * close.  True when anything was sent.
 */
static bool
send_frames (struct ws *ws)
{
  bool moved = false;

  ws->send_blocked = false;
  while (ws->result == CURLE_OK && !ws->send_blocked) {
    if (ws->coff < ws->clen) {
      if (!send_some (ws, ws->cbuf, &ws->coff, ws->clen))
        break;
      moved = true;
      if (ws->coff == ws->clen && ws->cbuf_close)
        ws->close_sent = true;
    }
    else if (ws->soff < ws->slen) {
      if (!send_some (ws, ws->sbuf, &ws->soff, ws->slen))
        break;
      moved = true;
    }
    else if (ws->pong_due && !ws->close_sent) {
      ws->pong_due = false;
      build_control (ws, WS_PONG, ws->pong, ws->pong_len);
    }
    else if (ws->close_due && !ws->close_sent) {
      ws->close_due = false;
      build_control (ws, WS_CLOSE, ws->close_payload, ws->close_len);
    }
    else
      break;
  }
  return moved;
}

/* Both closes done: the session is over. */
static bool
finished (const struct ws *ws)
{
  return ws->result != CURLE_OK || (ws->close_got && ws->close_sent);
}

/* Wait for what the loop needs; false after reporting a timeout. */
static bool
wait_events (struct ws *ws)
{
  struct pollfd pfd[3];
  int n = 0, r, ms;

  pfd[n++] = (struct pollfd) {
    .fd = ws->sock,
    .events = (ws->out_blocked || ws->close_got || ws->peer_eof ? 0 : POLLIN)
              | (ws->send_blocked ? POLLOUT : 0),
  };
  if (ws->in_blocked && ws->soff == ws->slen && !ws->in_eof &&
      !ws->close_due && !ws->close_sent && !ws->close_got)
    pfd[n++] = (struct pollfd) { .fd = ws->in.poll_fd, .events = POLLIN };
  if (ws->out_blocked)
    pfd[n++] = (struct pollfd) { .fd = ws->out.poll_fd, .events = POLLOUT };
  ws->in_blocked = ws->out_blocked = false;
  ms = time_left_ms (ws);
  if (ms != 0) {
    r = poll (pfd, n, ms);
    if (r != 0 || ms == -1) {
      if (r == -1 && errno != EINTR) {
        fail (ws, CURLE_RECV_ERROR, "poll: %s", strerror (errno));
        return false;
      }
      return true;
    }
  }
  fail (ws, CURLE_OPERATION_TIMEDOUT, "Operation timed out after %ld "
        "milliseconds", ws->st->opt->max_time_ms);
  return false;
}

/* The session, from the upgrade's answer to both closes. */
static void
run_session (struct ws *ws)
{
  bool moved;

  while (!finished (ws)) {
    do {
      moved = receive (ws);
      moved = read_input (ws) || moved;
      moved = send_frames (ws) || moved;
    } while (moved && !finished (ws));
    if (finished (ws) || !wait_events (ws))
      break;
  }
  if (ws->result == CURLE_OK && ws->close_code != 0 &&
      ws->close_code != 1000 && ws->close_code != 1001)
    fail (ws, CURLE_RECV_ERROR, "the server closed the WebSocket with "
          "code %u%s%s", ws->close_code, ws->reason[0] ? ": " : "",
          ws->reason);
}

/* Standard input and output (or -o's file). */
static bool
open_streams (struct ws *ws)
{
  const char *name = ws->st->opt->output;
  int fd;

  io_open (&ws->in, STDIN_FILENO, O_RDONLY);
  if (name == NULL || strcmp (name, "-") == 0) {
    io_open (&ws->out, STDOUT_FILENO, O_WRONLY);
    return true;
  }
  fd = open (name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd == -1) {
    fail (ws, CURLE_WRITE_ERROR, "%s: %s", name, strerror (errno));
    return false;
  }
  io_own (&ws->out, fd);
  return true;
}

int
websocket_run (const struct options *opt, char *msg, size_t msglen)
{
  struct pipe_state st = { .opt = opt };
  struct ws ws = { .st = &st, .sock = CURL_SOCKET_BAD };
  bool out_ok;

  failure_init (&st, msg, msglen);
  clock_gettime (CLOCK_MONOTONIC, &ws.start);
  st.url = shown_url (opt->url);
  st.easy = curl_easy_init ();
  ws.sbuf = malloc (WS_HEAD_MAX + UPLOAD_BUFFER_SIZE);
  ws.rbuf = malloc (DOWNLOAD_BUFFER_SIZE);
  if (st.url == NULL || st.easy == NULL || ws.sbuf == NULL ||
      ws.rbuf == NULL) {
    failure_report (&st, "out of memory");
    ws.result = CURLE_OUT_OF_MEMORY;
    goto out;
  }
  io_ignore_sigpipe ();
  if (open_streams (&ws) && upgrade (&ws))
    run_session (&ws);
 out:
  out_ok = io_close (&ws.out);
  if (!out_ok && ws.result == CURLE_OK)
    fail (&ws, CURLE_WRITE_ERROR, "%s: %s", opt->output, strerror (errno));
  io_close (&ws.in);
  easy_options_close (&st);
  curl_easy_cleanup (st.easy);
  free (ws.sbuf);
  free (ws.rbuf);
  free (st.url);
  return ws.result;
}
