/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The answer as libcurl gives it: CURLOPT_HEADERFUNCTION notes whether
 * the body is chunked and writes -D's copy of the headers;
 * CURLOPT_WRITEFUNCTION puts the body in the output buffer, and pauses
 * the download when that is full.
 */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "curlpipe.h"
#include "pipe.h"

/* A Transfer-Encoding header's value (len bytes): chunked, alone
 * (transfer codings are case-insensitive, RFC 9112 7), sets st->chunked;
 * any other coding (gzip, chunked), or chunked a second time in this
 * header block (in one line or two), is refused: libcurl is asked for
 * the raw body (see framing_take), and curlpipe decodes one chunked layer
 * only, so it would write the rest still encoded.
 */
static bool
transfer_coding (struct pipe_state *st, const char *v, size_t len)
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
    if (n == 7 && strncasecmp (v, "chunked", 7) == 0 && !st->chunked)
      st->chunked = true;
    else if (n > 0) {
      framing_refuse (st, "a Transfer-Encoding other than chunked once");
      st->ch_bad_code = CURLE_BAD_CONTENT_ENCODING;
      return false;
    }
  }
  return true;
}

/* Each header line of the answers: whether the body is chunked (see
 * framing_take), and with -D the line itself, to the file or to the
 * answer's stream ("-"), as curl writes them.
 */
size_t
download_header_cb (char *data, size_t size, size_t nmemb, void *opaque)
{
  struct pipe_state *st = opaque;
  size_t len = size * nmemb;

  if (len >= 5 && strncmp (data, "HTTP/", 5) == 0) {
    st->chunked = false;
    st->ch_bad = NULL;
    st->ch_state = CH_SIZE;
    st->ch_left = 0;
    st->ch_digits = 0;
    st->num_headers = 0;
  }
  else if (len > 2)             /* not the empty line at the end */
    st->num_headers++;
  if (len > 18 && strncasecmp (data, "transfer-encoding:", 18) == 0 &&
      !transfer_coding (st, data + 18, len - 18))
    return 0;
  if (st->opt->dump_header == NULL)
    return len;
  if (st->header_file != NULL) {
    if (fwrite (data, 1, len, st->header_file) != len) {
      failure_output (st, "-D: %s", strerror (errno));
      return 0;
    }
    return len;
  }
  if (len > st->out_size - st->out_len) {
    failure_output (st, "-D -: headers too long");
    return 0;
  }
  memcpy (st->out + st->out_len, data, len);
  st->out_len += len;
  return len;
}

size_t
download_write_cb (char *data, size_t size, size_t nmemb, void *opaque)
{
  struct pipe_state *st = opaque;
  size_t len = size * nmemb;
  long code = 0;

  /* With -f an error answer's body is a message for the user. */
  if (!st->body_started) {
    st->body_started = true;
    curl_easy_getinfo (st->easy, CURLINFO_RESPONSE_CODE, &code);
    if (st->opt->fail && !st->opt->fail_with_body && code >= 400) {
      /* -D -'s headers, already buffered, still go to stdout. */
      output_drain (st);
      io_open (&st->err_io, STDERR_FILENO, O_WRONLY);
      st->body = &st->err_io;
    }
    else if (!output_file_open (st))
      return 0;
  }

  if (len > st->out_size - st->out_len) {
    if (!output_flush (st))
      return 0;
    if (st->out_off > 0) {
      memmove (st->out, st->out + st->out_off, st->out_len - st->out_off);
      st->out_len -= st->out_off;
      st->out_off = 0;
    }
    /* Standard output is not taking it: libcurl keeps the bytes and
     * gives them again after the pause, and stops reading the socket.
     */
    if (len > st->out_size - st->out_len) {
      st->recv_paused = true;
      return CURL_WRITEFUNC_PAUSE;
    }
  }
  framing_take (st, data, len);
  return st->ch_bad ? 0 : len;
}
