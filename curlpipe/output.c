/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The answer's bytes on their way out: the buffer download_write_cb fills
 * (out[out_off..out_len)), written to standard output, -o's file or,
 * with -f, standard error, as far as it takes them.
 */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "curlpipe.h"
#include "pipe.h"

/* Write what is buffered.  Returns false on an error (recorded). */
bool
output_flush (struct pipe_state *st)
{
  ssize_t n;

  while (st->out_off < st->out_len) {
    n = io_write (st->body, st->out + st->out_off,
                  st->out_len - st->out_off);
    if (n == -1) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        break;
      failure_output (st, "writing the answer: %s", strerror (errno));
      return false;
    }
    st->out_off += n;
  }
  if (st->out_off == st->out_len)
    st->out_off = st->out_len = 0;
  return true;
}

/* Put n bytes of the answer in the buffer, which has room for them. */
void
output_put (struct pipe_state *st, const char *p, size_t n)
{
  memcpy (st->out + st->out_len, p, n);
  st->out_len += n;
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

  if (st->out_io.fd >= 0)
    return true;
  fd = open (name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd == -1) {
    failure_output (st, "%s: %s", name, strerror (errno));
    return false;
  }
  io_own (&st->out_io, fd);
  st->body = &st->out_io;
  return true;
}

/* Write what standard output has not taken yet, also after a failure:
 * the bytes that did arrive are delivered.
 */
void
output_drain (struct pipe_state *st)
{
  struct pollfd pfd;

  while (!failure_output_seen (st) && st->out_len > 0) {
    if (!output_flush (st))
      break;
    if (st->out_len > 0) {
      pfd = (struct pollfd) { .fd = st->body->poll_fd, .events = POLLOUT };
      if (poll (&pfd, 1, -1) == -1 && errno != EINTR) {
        failure_output (st, "writing the answer: poll: %s",
                        strerror (errno));
        break;
      }
    }
  }
}
