/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Where the answer ends: its Transfer-Encoding read and its chunked
 * framing decoded as it comes (struct framing), whether it came whole
 * by its framing, and whether the server closed the connection before
 * its end.
 */

#include <config.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "curlpipe.h"
#include "pipe.h"

/* The answer's framing is not one curlpipe can follow: why, for the
 * message, with curl's exit status for it.
 */
static void
refuse (struct framing *f, const char *why, CURLcode code)
{
  f->refused = why;
  f->refused_code = code;
}

/* A Transfer-Encoding header's value (len bytes): chunked, alone
 * (transfer codings are case-insensitive, RFC 9112 7), makes the body
 * chunked; any other coding (gzip, chunked), or chunked a second time
 * in this header block (in one line or two), is refused: libcurl is
 * asked for the raw body (see framing_decode), and curlpipe decodes one
 * chunked layer only, so it would write the rest still encoded.
 */
static bool
transfer_coding (struct framing *f, const char *v, size_t len)
{
  const char *end = v + len, *comma;
  size_t n;

  for (; v < end; v = comma + 1) {
    comma = memchr (v, ',', end - v);
    if (comma == NULL)
      comma = end;
    while (v < comma && (*v == ' ' || *v == '\t'))
      v++;
    n = comma - v;
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t' ||
                     v[n - 1] == '\r' || v[n - 1] == '\n'))
      n--;
    if (n == 7 && strncasecmp (v, "chunked", 7) == 0 && !f->chunked)
      f->chunked = true;
    else if (n > 0) {
      refuse (f, "a Transfer-Encoding other than chunked once",
              CURLE_BAD_CONTENT_ENCODING);
      return false;
    }
  }
  return true;
}

/* A status line (download.c tells which line is one) starts a new
 * answer, whose framing is read afresh.
 */
void
framing_new_answer (struct pipe_state *st)
{
  struct framing *f = &st->framing;

  f->chunked = false;
  f->refused = NULL;
  f->state = CH_SIZE;
  f->left = 0;
  f->digits = 0;
}

/* Each header line of an answer after its status line (download.c's
 * header callback): a Transfer-Encoding says whether its body is
 * chunked.  False when the framing is refused.
 */
bool
framing_header_line (struct pipe_state *st, const char *line, size_t len)
{
  struct framing *f = &st->framing;

  if (len > 18 && strncasecmp (line, "transfer-encoding:", 18) == 0)
    return transfer_coding (f, line + 18, len - 18);
  return true;
}

static int
hex_digit (char c)
{
  return c >= '0' && c <= '9' ? c - '0'
    : c >= 'a' && c <= 'f' ? c - 'a' + 10
    : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The chunk-size line: hex digits, then whatever comes up to the line's
 * end (";ext", or junk that libcurl ignores too).  Sizes libcurl
 * refuses (no digit; 2^63 or more, which its signed sizes cannot hold)
 * stop the answer here, before any of their bytes is written: libcurl
 * would refuse them only after this decoder had taken the bytes that
 * follow for the chunk's data.
 */
static void
size_byte (struct framing *f, char c)
{
  int d = hex_digit (c);

  if (d >= 0 && (++f->digits > 16 || f->left > (uint64_t) (INT64_MAX - d) / 16))
    refuse (f, "a chunk size too large to hold", CURLE_RECV_ERROR);
  else if (d >= 0)
    f->left = f->left * 16 + d;
  else if (f->digits == 0)
    refuse (f, "a chunk-size line without a size", CURLE_RECV_ERROR);
  else
    f->state = c == '\n' ? (f->left ? CH_DATA : CH_TRAILER_START) : CH_EXT;
}

/* A trailer line, "Name: value": a line without its colon is not a
 * trailer (as "0x5" then "hello": the last chunk, and the data where
 * the trailers belong).
 */
static void
trailer_byte (struct framing *f, char c)
{
  if (c == ':')
    f->colon = true;
  else if (c == '\n' && !f->colon)
    refuse (f, "a line after the last chunk that is no trailer field",
            CURLE_RECV_ERROR);
  else if (c == '\n')
    f->state = CH_TRAILER_START;
}

/* One byte of the framing around the chunks' data. */
static void
framing_byte (struct framing *f, char c)
{
  switch (f->state) {
  case CH_SIZE:
    size_byte (f, c);
    break;
  case CH_EXT:
    if (c == '\n')
      f->state = f->left ? CH_DATA : CH_TRAILER_START;
    break;
  case CH_DATA_END:             /* the CRLF after the data */
    if (c == '\n') {
      f->state = CH_SIZE;
      f->digits = 0;
    }
    break;
  case CH_TRAILER_START:        /* a trailer line, or the empty last line */
    if (c == '\n')
      f->state = CH_DONE;
    else if (c != '\r') {
      f->state = CH_TRAILER;
      f->colon = false;         /* a field name comes first */
    }
    break;
  case CH_TRAILER:
    trailer_byte (f, c);
    break;
  case CH_DATA:
  case CH_DONE:
    break;
  }
}

/* The answer's body as libcurl gives it, from *p to end: returns the
 * length of the next run of the body's own bytes, which start at *data,
 * and moves *p past what it has read; 0 once all is read, or when the
 * framing is refused or complete (the rest is then ignored).
 *
 * libcurl is asked for the raw body (CURLOPT_HTTP_TRANSFER_DECODING 0)
 * so that curlpipe knows whether a chunked answer ended with its last
 * chunk or was cut off: an answer can end while the upload goes on (see
 * loop.c's answer_over), and libcurl would only check its framing at
 * the end of the whole transfer.  libcurl still checks the framing as it
 * reads.
 */
size_t
framing_decode (struct pipe_state *st, const char **p, const char *end,
                const char **data)
{
  struct framing *f = &st->framing;
  size_t n;

  *data = *p;
  if (!f->chunked) {
    n = end - *p;
    *p = end;
    f->received += n;
    return n;
  }
  while (*p < end && f->refused == NULL && f->state != CH_DONE) {
    if (f->state == CH_DATA) {
      n = (size_t) (end - *p) < f->left ? (size_t) (end - *p) : f->left;
      *data = *p;
      *p += n;
      f->left -= n;
      f->received += n;
      if (f->left == 0)
        f->state = CH_DATA_END;
      return n;
    }
    framing_byte (f, **p);
    (*p)++;
  }
  *p = end;
  return 0;
}

/* Why the answer's framing was refused, or NULL; *code (unless NULL)
 * curl's exit status for it.
 */
const char *
framing_refusal (const struct pipe_state *st, CURLcode *code)
{
  if (code != NULL)
    *code = st->framing.refused_code;
  return st->framing.refused;
}

bool
framing_refused (const struct pipe_state *st)
{
  return st->framing.refused != NULL;
}

/* The body's bytes so far, as written out (decoded). */
curl_off_t
framing_received (const struct pipe_state *st)
{
  return st->framing.received;
}

/* Has the answer come whole by its own framing: its last chunk, or its
 * Content-Length?  -1 when it has no framing (it ends when the server
 * closes).
 */
int
framing_answer_whole (const struct pipe_state *st)
{
  curl_off_t length = -1;

  if (st->framing.chunked)
    return st->framing.state == CH_DONE;
  curl_easy_getinfo (st->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
  return length < 0 ? -1 : st->framing.received == length;
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

  if (whole == 1)
    return 1;
  switch (connection_peek (st)) {
  case PEEK_CLOSED:
    return whole == -1 ? 1 : -1;
  case PEEK_ERROR:
    return -1;
  case PEEK_NOTHING:
  case PEEK_BYTES:
    break;
  }
  return 0;
}
