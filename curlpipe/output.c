/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The answer's bytes on their way out (struct output): the buffer
 * download.c fills, written to standard output, -o's file or, with -f,
 * standard error, as far as it takes them.
 */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "curlpipe.h"
#include "pipe.h"

/* The answer is gathered while libcurl decodes what one read from the
 * socket brought, and written to standard output in one write: the
 * streaming echo sends a 64 KiB block as four chunks, which were four
 * writes.
 */
#define OUTPUT_BUFFER_SIZE (1024 * 1024)

/* Nothing open yet, and the buffer; false when out of memory. */
bool
output_init (struct pipe_state *st)
{
  struct output *o = &st->output;

  o->out = (struct io) { .fd = -1, .poll_fd = -1 };
  o->err = (struct io) { .fd = -1, .poll_fd = -1 };
  o->to = &o->out;
  o->size = OUTPUT_BUFFER_SIZE;
  o->buf = malloc (o->size);
  return o->buf != NULL;
}

/* Standard output, unless -o FILE (see output_file_open). */
void
output_start (struct pipe_state *st)
{
  const char *name = st->opt->output;

  if (name == NULL || strcmp (name, "-") == 0)
    io_open (&st->output.out, STDOUT_FILENO, O_WRONLY);
  st->output.to = &st->output.out;
}

/* -o FILE is opened (and an existing one truncated) only when there is
 * an answer to put in it: a transfer that fails before it leaves the
 * file as it was.  False after recording an error.
 */
bool
output_file_open (struct pipe_state *st)
{
  const char *name = st->opt->output;
  int fd;

  if (st->output.out.fd >= 0)
    return true;
  fd = open (name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd == -1) {
    failure_output (st, "%s: %s", name, strerror (errno));
    return false;
  }
  io_own (&st->output.out, fd);
  st->output.to = &st->output.out;
  return true;
}

/* With -f an error answer's body is a message for the user: it goes to
 * standard error, after what is buffered already (-D -'s headers, which
 * still go to standard output).
 */
void
output_to_stderr (struct pipe_state *st)
{
  output_drain (st);
  io_open (&st->output.err, STDERR_FILENO, O_WRONLY);
  st->output.to = &st->output.err;
}

bool
output_on_stderr (const struct pipe_state *st)
{
  return st->output.to == &st->output.err;
}

/* Room left in the buffer, without writing any of it. */
size_t
output_space (const struct pipe_state *st)
{
  return st->output.size - st->output.len;
}

/* Room for len more bytes: what is buffered is written first, and what
 * the output did not take moved to the start, when that is needed.
 */
enum output_room
output_reserve (struct pipe_state *st, size_t len)
{
  struct output *o = &st->output;

  if (len <= output_space (st))
    return OUTPUT_ROOM;
  if (!output_flush (st))
    return OUTPUT_FAILED;
  if (o->off > 0) {
    memmove (o->buf, o->buf + o->off, o->len - o->off);
    o->len -= o->off;
    o->off = 0;
  }
  return len <= output_space (st) ? OUTPUT_ROOM : OUTPUT_FULL;
}

/* Put n bytes of the answer in the buffer, which has room for them. */
void
output_put (struct pipe_state *st, const char *p, size_t n)
{
  memcpy (st->output.buf + st->output.len, p, n);
  st->output.len += n;
}

/* Has the buffer bytes the output has not taken yet? */
bool
output_pending (const struct pipe_state *st)
{
  return st->output.len > 0;
}

/* What poll watches for the output to take more. */
int
output_poll_fd (const struct pipe_state *st)
{
  return st->output.to->poll_fd;
}

/* Write what is buffered.  Returns false on an error (recorded). */
bool
output_flush (struct pipe_state *st)
{
  struct output *o = &st->output;
  ssize_t n;

  while (o->off < o->len) {
    n = io_write (o->to, o->buf + o->off, o->len - o->off);
    if (n == -1) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        break;
      failure_output (st, "writing the answer: %s", strerror (errno));
      return false;
    }
    o->off += n;
  }
  if (o->off == o->len)
    o->off = o->len = 0;
  return true;
}

/* Write what standard output has not taken yet, also after a failure:
 * the bytes that did arrive are delivered.
 */
void
output_drain (struct pipe_state *st)
{
  struct pollfd pfd;

  while (!failure_output_seen (st) && output_pending (st)) {
    if (!output_flush (st))
      break;
    if (output_pending (st)) {
      pfd = (struct pollfd) { .fd = output_poll_fd (st), .events = POLLOUT };
      if (poll (&pfd, 1, -1) == -1 && errno != EINTR) {
        failure_output (st, "writing the answer: poll: %s",
                        strerror (errno));
        break;
      }
    }
  }
}

/* Close what output_start and output_file_open opened and free the
 * buffer.  False when closing -o's file showed an error (its last write
 * failed), with errno.
 */
bool
output_close (struct pipe_state *st)
{
  bool ok = io_close (&st->output.out);
  int saved = errno;

  io_close (&st->output.err);
  free (st->output.buf);
  st->output.buf = NULL;
  errno = saved;
  return ok;
}
