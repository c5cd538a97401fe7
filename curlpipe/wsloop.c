/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * A WebSocket session once upgraded (RFC 6455 section 5): standard
 * input's bytes out as masked binary frames, the server's payloads to
 * standard output as they come (never a whole frame buffered), pings
 * answered, and the close both ways.  One event loop, as in loop.c:
 * poll without a timeout while idle, no flag changed on a shared
 * descriptor (fdmodes.c), backpressure both ways: standard output
 * blocked stops reading the socket, the socket full stops reading
 * standard input.  TLS may hold decrypted bytes that poll cannot see, so
 * the socket is read until CURLE_AGAIN each time, and again once
 * standard output drains, before poll.
 */

#include <config.h>

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "curlpipe.h"
#include "pipe.h"
#include "secrets.h"
#include "websocket.h"

/* The first failure is the one reported, with its exit status. */
void
ws_fail (struct ws *ws, CURLcode code, const char *fmt, ...)
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
void
ws_fail_curl (struct ws *ws, CURLcode code)
{
  char shown[CURL_ERROR_SIZE];
  const char *text = failure_curl_buffer (ws->st);

  shown_message (text[0] ? text : curl_easy_strerror (code), shown,
                 sizeof shown);
  ws_fail (ws, code, "%s", shown);
}

/* Milliseconds left of -m, or -1 for no limit; 0 when it is over. */
int
ws_time_left_ms (const struct ws *ws)
{
  double left;

  if (ws->st->opt->max_time_ms == 0)
    return -1;
  left = ws->st->opt->max_time_ms - seconds_since (&ws->start) * 1000;
  return left <= 0 ? 0 : (int) left + 1;
}

/* The next 4-byte mask key. */
static bool
next_key (struct ws *ws, uint8_t key[4])
{
  if (ws->keys_used == 0 || ws->keys_used + 4 > KEYS_SIZE) {
    if (getrandom (ws->keys, KEYS_SIZE, 0) != KEYS_SIZE) {
      ws_fail (ws, CURLE_FAILED_INIT, "getrandom: %s", strerror (errno));
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

  ws_fail (ws, CURLE_RECV_ERROR, "WebSocket protocol error from the server: "
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
    ws_fail (ws, CURLE_WRITE_ERROR, "writing the output: %s",
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
      ws_fail_curl (ws, rc);
      break;
    }
    moved = true;
    if (n == 0) {
      ws->peer_eof = true;
      /* As curl_ws_recv: closed between frames 52, inside one 56. */
      if (ws->in_frame || ws->parser.have > 0)
        ws_fail (ws, CURLE_RECV_ERROR, "the server closed the connection "
                 "inside a WebSocket frame");
      else
        ws_fail (ws, CURLE_GOT_NOTHING, "the server closed the connection "
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
    ws_fail (ws, CURLE_READ_ERROR, "reading standard input: %s",
             strerror (errno));
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
    ws_fail_curl (ws, rc);
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
  ms = ws_time_left_ms (ws);
  if (ms != 0) {
    r = poll (pfd, n, ms);
    if (r != 0 || ms == -1) {
      if (r == -1 && errno != EINTR) {
        ws_fail (ws, CURLE_RECV_ERROR, "poll: %s", strerror (errno));
        return false;
      }
      return true;
    }
  }
  ws_fail (ws, CURLE_OPERATION_TIMEDOUT, "Operation timed out after %ld "
           "milliseconds", ws->st->opt->max_time_ms);
  return false;
}

/* The session, from the upgrade's answer to both closes. */
void
ws_session (struct ws *ws)
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
    ws_fail (ws, CURLE_RECV_ERROR, "the server closed the WebSocket with "
             "code %u%s%s", ws->close_code, ws->reason[0] ? ": " : "",
             ws->reason);
}
