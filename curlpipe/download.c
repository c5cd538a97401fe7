/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The answer as libcurl gives it: CURLOPT_HEADERFUNCTION hands each
 * header line to framing.c, counts them and writes -D's copy;
 * CURLOPT_WRITEFUNCTION puts the body, its framing taken off, in the
 * output buffer, and pauses the download when that is full.
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

/* Each header line of the answers: its framing (framing.c), how many
 * there are for -w, and with -D the line itself, to the file or to the
 * answer's stream ("-"), as curl writes them.
 */
size_t
download_header_cb (char *data, size_t size, size_t nmemb, void *opaque)
{
  struct pipe_state *st = opaque;
  size_t len = size * nmemb;

  if (len >= 5 && strncmp (data, "HTTP/", 5) == 0)
    st->num_headers = 0;
  else if (len > 2)             /* not the empty line at the end */
    st->num_headers++;
  if (!framing_header_line (st, data, len))
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
  if (!st->body_started) {
    st->body_started = true;
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
