/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Where the answer ends: its chunked framing decoded as it comes,
 * whether it came whole by its framing, and whether the server closed
 * the connection before its end.
 */

#include <config.h>

#include <errno.h>
#include <string.h>

#include "curlpipe.h"
#include "pipe.h"

/* The answer's framing is not one curlpipe can follow: why, for the
 * message, with curl's exit status for it.
 */
void
framing_refuse (struct pipe_state *st, const char *why)
{
  st->ch_bad = why;
  st->ch_bad_code = CURLE_RECV_ERROR;
}

/* Put len bytes of the answer as libcurl gives them into the buffer,
 * which has room (the decoded bytes are never more).
 *
 * libcurl is asked for the raw body (CURLOPT_HTTP_TRANSFER_DECODING 0)
 * so that curlpipe knows whether a chunked answer ended with its last
 * chunk or was cut off: an answer can end while the upload goes on (see
 * answer_over), and libcurl would only check its framing at the end of
 * the whole transfer.  libcurl still checks the framing as it reads.
 */
void
framing_take (struct pipe_state *st, const char *p, size_t len)
{
  const char *end = p + len;
  size_t n;
  int d;

  if (!st->chunked) {
    memcpy (st->out + st->out_len, p, len);
    st->out_len += len;
    st->received += len;
    return;
  }
  while (p < end) {
    switch (st->ch_state) {
    case CH_SIZE:
      /* Hex digits, then whatever comes up to the line's end (";ext",
       * or junk that libcurl ignores too).  Sizes libcurl refuses (no
       * digit, more than 16) stop the answer here, before any of their
       * bytes is written.
       */
      d = *p >= '0' && *p <= '9' ? *p - '0'
        : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
        : *p >= 'A' && *p <= 'F' ? *p - 'A' + 10 : -1;
      if (d >= 0 && ++st->ch_digits > 16) {
        framing_refuse (st, "a chunk size too large to hold");
        return;
      }
      if (d >= 0)
        st->ch_left = st->ch_left * 16 + d;
      else if (st->ch_digits == 0) {
        framing_refuse (st, "a chunk-size line without a size");
        return;
      }
      else
        st->ch_state = *p == '\n'
          ? (st->ch_left ? CH_DATA : CH_TRAILER_START) : CH_EXT;
      p++;
      break;
    case CH_EXT:
      if (*p++ == '\n')
        st->ch_state = st->ch_left ? CH_DATA : CH_TRAILER_START;
      break;
    case CH_DATA:
      n = (size_t) (end - p) < st->ch_left ? (size_t) (end - p)
        : st->ch_left;
      memcpy (st->out + st->out_len, p, n);
      st->out_len += n;
      st->received += n;
      st->ch_left -= n;
      p += n;
      if (st->ch_left == 0)
        st->ch_state = CH_DATA_END;
      break;
    case CH_DATA_END:           /* the CRLF after the data */
      if (*p++ == '\n') {
        st->ch_state = CH_SIZE;
        st->ch_digits = 0;
      }
      break;
    case CH_TRAILER_START:      /* a trailer line, or the empty last line */
      if (*p == '\n')
        st->ch_state = CH_DONE;
      else if (*p != '\r') {
        st->ch_state = CH_TRAILER;
        st->ch_colon = false;   /* a field name comes first */
      }
      p++;
      break;
    case CH_TRAILER:
      /* "Name: value": a line without its colon is not a trailer (as
       * "0x5" then "hello": the last chunk, and the data where the
       * trailers belong).
       */
      if (*p == ':')
        st->ch_colon = true;
      else if (*p == '\n' && !st->ch_colon) {
        framing_refuse (st, "a line after the last chunk that is no "
                        "trailer field");
        return;
      }
      else if (*p == '\n')
        st->ch_state = CH_TRAILER_START;
      p++;
      break;
    case CH_DONE:
      return;
    }
  }
}

/* Has the answer come whole by its own framing: its last chunk, or its
 * Content-Length?  -1 when it has no framing (it ends when the server
 * closes).
 */
int
framing_answer_whole (const struct pipe_state *st)
{
  curl_off_t length = -1;

  if (st->chunked)
    return st->ch_state == CH_DONE;
  curl_easy_getinfo (st->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
  return length < 0 ? -1 : st->received == length;
}

/* libcurl no longer reads the connection while the upload waits for
 * standard input: has the answer ended?  1 whole, -1 cut off (the server
 * closed or reset the connection before its end), 0 not ended (libcurl
 * waits for --limit-rate's timer).  The connection is looked at without
 * taking anything from it.
 */
int
framing_answer_end (const struct pipe_state *st)
{
  int whole = framing_answer_whole (st);
  char c;
  ssize_t r;

  if (whole == 1)
    return 1;
  if (st->sock == CURL_SOCKET_BAD)
    return 0;
  r = recv (st->sock, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (r == 0)
    return whole == -1 ? 1 : -1;
  if (r == -1 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
    return -1;
  return 0;
}
