/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The upload: CURLOPT_READFUNCTION reads standard input as far as it
 * has bytes, holds them back while an answer that came meanwhile is
 * read first, and at the end checks that --upload-size was the whole
 * of standard input.
 */

#include <config.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "curlpipe.h"
#include "pipe.h"

/* See hold_back. */
#define HOLD_MIN (16 * 1024)

/* The upload's next bytes came from standard input while the server's
 * answer arrived: keep them, and let libcurl read the answer before it
 * sends them.  A server that answers at once and closes without reading
 * the upload makes the kernel reset the connection, and libcurl gives
 * up on the first send that fails, before it has read an answer that
 * came in the meantime.  libcurl acts on what the last poll saw
 * (socket writable), and reading standard input takes long enough for
 * the answer and the reset to come in between: without this, 1 in 5 of
 * `yes | curlpipe URL` lost the answer on an idle machine and 6 in 10
 * on a loaded one.  Only reads of HOLD_MIN bytes or more are checked:
 * a smaller read leaves a window as short as libcurl's own, and the
 * check would cost a system call per message of an interactive stream.
 * Returns false when the bytes could not be kept (they are then sent as
 * usual).
 */
static bool
hold_back (struct pipe_state *st, const char *buf, size_t n)
{
  if (n > UPLOAD_BUFFER_SIZE)
    return false;
  if (st->held == NULL)
    st->held = malloc (UPLOAD_BUFFER_SIZE);
  if (st->held == NULL)
    return false;
  memcpy (st->held, buf, n);
  st->held_off = 0;
  st->held_len = n;
  st->answer_first = true;
  st->answer_read = false;
  pause_upload (st);
  return true;
}

size_t
upload_read_cb (char *buf, size_t size, size_t nitems, void *opaque)
{
  struct pipe_state *st = opaque;
  size_t want;
  ssize_t n;

  want = size * nitems;
  if (st->held_off < st->held_len) {
    n = st->held_len - st->held_off < want ? st->held_len - st->held_off
      : want;
    memcpy (buf, st->held + st->held_off, n);
    st->held_off += n;
    return n;
  }
  if (st->in_eof)
    return 0;
  /* A short read from a pipe or socket means it is empty for now: wait
   * for it in the poll rather than spend a read() on EAGAIN.
   */
  if (st->in_drained) {
    st->in_drained = false;
    pause_upload (st);
    return CURL_READFUNC_PAUSE;
  }
  /* Never more than --upload-size: what follows would be taken by the
   * server for the start of another request.
   */
  if (st->opt->upload_size >= 0 &&
      (curl_off_t) want > st->opt->upload_size - st->sent)
    want = st->opt->upload_size - st->sent;
  if (want == 0)
    return 0;
  n = io_read (&st->in, buf, want);
  if (n > 0) {
    st->sent += n;
    st->in_drained = st->in.stream && (size_t) n < want;
    if (n >= HOLD_MIN && !pause_holds_download (st) &&
        connection_answer_waiting (st) &&
        hold_back (st, buf, n))
      return CURL_READFUNC_PAUSE;
    return n;
  }
  if (n == 0) {
    /* libcurl would wait for the rest of the promised body for ever. */
    if (st->opt->upload_size >= 0 && st->sent < st->opt->upload_size) {
      failure_input (st, "standard input ended after %"
                     CURL_FORMAT_CURL_OFF_T " of the %" CURL_FORMAT_CURL_OFF_T
                     " bytes of --upload-size", st->sent,
                     st->opt->upload_size);
      return CURL_READFUNC_ABORT;
    }
    st->in_eof = true;
    return 0;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
    pause_upload (st);
    return CURL_READFUNC_PAUSE;
  }
  failure_input (st, "reading standard input: %s", strerror (errno));
  return CURL_READFUNC_ABORT;
}

/* --upload-size N sent N bytes: standard input must end there.  Bytes
 * beyond N mean the size was wrong and the server got a truncated body:
 * an error, not a success.  A writer that neither writes nor closes
 * within 5 s is given the benefit of the doubt.
 */
void
upload_check_end (struct pipe_state *st)
{
  struct pollfd pfd = { .fd = st->in.poll_fd, .events = POLLIN };
  char c;
  ssize_t n;
  struct stat sb;

  if (st->opt->upload_size < 0 || st->in_eof || failure_input_seen (st) ||
      fstat (st->in.fd, &sb) == -1)
    return;
  /* A terminal is left alone: reading it would wait for the user. */
  if (!S_ISREG (sb.st_mode) && !st->in.stream)
    return;
  if (st->in.stream && poll (&pfd, 1, 5000) <= 0)
    return;
  n = io_read (&st->in, &c, 1);
  if (n > 0)
    failure_input (st, "standard input has more than the %"
                   CURL_FORMAT_CURL_OFF_T " bytes of --upload-size",
                   st->opt->upload_size);
}
