/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The answer as libcurl gives it (struct download): -D's file;
 * CURLOPT_HEADERFUNCTION hands each header line to framing.c, counts
 * them and writes -D's copy;
 * CURLOPT_WRITEFUNCTION puts the body, its framing taken off, in the
 * output buffer, and pauses the download when that is full.
 */

#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "curlpipe.h"
#include "pipe.h"

/* -D FILE, opened before the transfer starts; -D - goes with the body
 * (the header callback puts it in the output buffer), unless that goes
 * to a file.  False after recording the failure.
 */
bool
download_headers_open (struct pipe_state *st)
{
  const struct options *opt = st->opt;
  bool to_file = opt->output != NULL && strcmp (opt->output, "-") != 0;

  if (opt->dump_header && strcmp (opt->dump_header, "-") == 0 && to_file)
    st->download.headers = stdout;
  else if (opt->dump_header && strcmp (opt->dump_header, "-") != 0) {
    st->download.headers = fopen (opt->dump_header, "we");
    if (st->download.headers == NULL) {
      failure_output (st, "-D %s: %s", opt->dump_header, strerror (errno));
      return false;
    }
  }
  return true;
}

/* False when closing -D's file (or flushing standard output, for -D -
 * with -o FILE), or a flush at a header block's end, showed an error,
 * with errno.
 */
bool
download_headers_close (struct pipe_state *st)
{
  FILE *fp = st->download.headers;
  bool ok;

  st->download.headers = NULL;
  if (fp == NULL)
    return true;
  ok = (fp == stdout ? fflush (stdout) : fclose (fp)) != EOF;
  if (st->download.flush_errno != 0) {
    errno = st->download.flush_errno;
    return false;
  }
  return ok;
}

/* The last answer's header lines, for -w's %{num_headers}. */
long
download_num_headers (const struct pipe_state *st)
{
  return st->download.num_headers;
}

/* Each header line of the answers: its framing (framing.c), how many
 * there are for -w, and with -D the line itself, to the file or to the
 * answer's stream ("-"), as curl writes them.
 *
 * An answer's status line is the first line libcurl gives, or the first
 * after the blank line that ends a header block (a 1xx answer's, a
 * redirect's that -L follows, a proxy's CONNECT answer's); every other
 * line is a header, whatever it starts with: a header named "HTTP/x"
 * taken for a status line would reset the answer's framing, and the
 * chunked framing would then be written out as the body.
 */
size_t
download_header_cb (char *data, size_t size, size_t nmemb, void *opaque)
{
  struct pipe_state *st = opaque;
  struct download *d = &st->download;
  size_t len = size * nmemb;
  bool blank = len <= 2 && (len == 0 || data[0] == '\r' || data[0] == '\n');

  if (!d->in_block) {
    d->in_block = true;
    d->num_headers = 0;
    framing_new_answer (st);
  }
  else if (blank)
    d->in_block = false;
  else {
    d->num_headers++;
    if (!framing_header_line (st, data, len))
      return 0;
  }
  if (st->opt->dump_header == NULL)
    return len;
  if (st->download.headers != NULL) {
    /* Out at the end of each header block, before the body's first
     * byte: -D's file may be where the body goes under another name
     * (-D - -o /dev/stdout, -D /dev/stdout), and stdio would hold the
     * headers until it closes, after the body.  A flush that fails is
     * reported when the file closes (download_headers_close), and the
     * body still goes out.
     */
    if (fwrite (data, 1, len, st->download.headers) != len) {
      failure_output (st, "-D: %s", strerror (errno));
      return 0;
    }
    if (blank && fflush (st->download.headers) == EOF && d->flush_errno == 0)
      d->flush_errno = errno;
    return len;
  }
  if (len > output_space (st)) {
    failure_output (st, "-D -: headers too long");
    return 0;
  }
  output_put (st, data, len);
  return len;
}

size_t
download_write_cb (char *data, size_t size, size_t nmemb, void *opaque)
{
  struct pipe_state *st = opaque;
  size_t len = size * nmemb, n;
  const char *p = data, *end = data + len, *body;
  long code = 0;

  /* With -f an error answer's body is a message for the user. */
  if (!st->download.body_started) {
    st->download.body_started = true;
    curl_easy_getinfo (st->easy, CURLINFO_RESPONSE_CODE, &code);
    if (st->opt->fail && !st->opt->fail_with_body && code >= 400)
      output_to_stderr (st);
    else if (!output_file_open (st))
      return 0;
  }

  switch (output_reserve (st, len)) {
  case OUTPUT_FAILED:
    return 0;
  case OUTPUT_FULL:
    /* Standard output is not taking it: libcurl keeps the bytes and
     * gives them again after the pause, and stops reading the socket.
     */
    pause_download (st);
    return CURL_WRITEFUNC_PAUSE;
  case OUTPUT_ROOM:
    break;
  }
  while (p < end) {
    n = framing_decode (st, &p, end, &body);
    output_put (st, body, n);
  }
  return framing_refused (st) ? 0 : len;
}
