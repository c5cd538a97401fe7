/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * ws:// and wss:// (RFC 6455), the client's side: the connection and
 * the upgrade.  libcurl 7.88 has no WebSocket support, so libcurl only
 * makes the connection (TLS, proxy tunnel, names: CURLOPT_CONNECT_ONLY
 * on the http or https URL); this file sends the upgrade request
 * (wsupgrade.c builds it) with curl_easy_send, reads the answer with
 * curl_easy_recv, and hands the connection to the session (wsloop.c).
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

#include "curlpipe.h"
#include "pipe.h"
#include "secrets.h"
#include "websocket.h"

/* Beyond this, an upgrade answer's headers are refused, not read for
 * ever.
 */
#define HANDSHAKE_MAX (64 * 1024)

bool
websocket_url (const char *url)
{
  return strncasecmp (url, "ws://", 5) == 0 ||
    strncasecmp (url, "wss://", 6) == 0;
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
    ms = ws_time_left_ms (ws);
    if (ms == 0)
      break;
    r = poll (&pfd, 1, ms);
    if (r > 0)
      return true;
    if (r == -1 && errno != EINTR) {
      ws_fail (ws, CURLE_RECV_ERROR, "poll: %s", strerror (errno));
      return false;
    }
  }
  ws_fail (ws, CURLE_OPERATION_TIMEDOUT, "Operation timed out after %ld "
           "milliseconds (during the WebSocket upgrade)",
           ws->st->opt->max_time_ms);
  return false;
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
      ws_fail_curl (ws, rc);
      return false;
    }
    p += n;
    len -= n;
  }
  return true;
}

/* Read the answer's headers, at most HANDSHAKE_MAX bytes, into rbuf;
 * the bytes after them stay there as the first frames' bytes.
 */
static bool
read_answer (struct ws *ws, const char *key)
{
  char *buf = (char *) ws->rbuf, *blank, why[128];
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
      ws_fail_curl (ws, rc);
      return false;
    }
    if (n == 0) {
      ws_fail (ws, CURLE_GOT_NOTHING, "the server closed the connection "
               "before answering the WebSocket upgrade");
      return false;
    }
    got += n;
    blank = memmem (buf, got, "\r\n\r\n", 4);
    if (blank != NULL)
      break;
    if (got == HANDSHAKE_MAX) {
      ws_fail (ws, CURLE_WEIRD_SERVER_REPLY, "the answer to the WebSocket "
               "upgrade has over %d bytes of headers", HANDSHAKE_MAX);
      return false;
    }
  }
  hlen = blank + 4 - buf;
  easy_show_headers (ws->st, CURLINFO_HEADER_IN, buf, hlen);
  rc = ws_check_answer (buf, hlen, key, why, sizeof why);
  if (rc != CURLE_OK) {
    ws_fail (ws, rc, "%s", why);
    return false;
  }
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
    ws_fail (ws, CURLE_OUT_OF_MEMORY, "out of memory");
    return false;
  }
  u = curl_url ();
  if (u == NULL ||
      curl_url_set (u, CURLUPART_URL, http_url, 0) != CURLUE_OK) {
    ws_fail (ws, CURLE_URL_MALFORMAT, "not a valid WebSocket URL");
    goto out;
  }
  if (!easy_options_connect (ws->st, http_url)) {
    ws->result = CURLE_FAILED_INIT;
    goto out;
  }
  rc = curl_easy_perform (ws->st->easy);
  if (rc != CURLE_OK) {
    ws_fail_curl (ws, rc);
    goto out;
  }
  /* Past the connection, libcurl's notes on each send and recv would
   * only be noise: -v shows the upgrade's headers (easy_show_headers).
   */
  curl_easy_setopt (ws->st->easy, CURLOPT_VERBOSE, 0L);
  rc = curl_easy_getinfo (ws->st->easy, CURLINFO_ACTIVESOCKET, &ws->sock);
  if (rc != CURLE_OK || ws->sock == CURL_SOCKET_BAD) {
    ws_fail (ws, CURLE_COULDNT_CONNECT, "no connection to upgrade");
    goto out;
  }
  if (getrandom (raw, sizeof raw, 0) != sizeof raw) {
    ws_fail (ws, CURLE_FAILED_INIT, "getrandom: %s", strerror (errno));
    goto out;
  }
  ws_base64 (key, raw, sizeof raw);
  if (!ws_request (ws->st->opt, u, key, &req, &len)) {
    ws_fail (ws, CURLE_OUT_OF_MEMORY, "out of memory");
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
    ws_fail (ws, CURLE_WRITE_ERROR, "%s: %s", name, strerror (errno));
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
    ws_session (&ws);
 out:
  out_ok = io_close (&ws.out);
  if (!out_ok && ws.result == CURLE_OK)
    ws_fail (&ws, CURLE_WRITE_ERROR, "%s: %s", opt->output, strerror (errno));
  io_close (&ws.in);
  easy_options_close (&st);
  curl_easy_cleanup (st.easy);
  free (ws.sbuf);
  free (ws.rbuf);
  free (st.url);
  return ws.result;
}
