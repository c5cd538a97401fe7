/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Reading standard input and writing standard output without blocking
 * the event loop, and without changing a file status flag that other
 * processes see.  O_NONBLOCK belongs to the open file description, which
 * curlpipe shares with whoever else holds the pipe (the shell, a sibling
 * `cat` writing to the same pipe): set on it, their blocking reads and
 * writes fail with EAGAIN and they lose data.  So each descriptor gets
 * a way of its own:
 *
 *   a pipe or a terminal   opened again through /proc/self/fd/N, which
 *                          gives a new description of the same pipe or
 *                          terminal, O_NONBLOCK for curlpipe alone;
 *   a socket               recv and send with MSG_DONTWAIT, per call;
 *   a regular file, a      used as it is: they never block;
 *   block device
 *   anything else, or a    polled before each read or write, which then
 *   reopen that failed     moves at most PIPE_BUF bytes (as much as a
 *                          pipe that polls writable takes at once).
 *
 * Nothing is changed, so nothing is put back: Ctrl-Z, a signal or exit
 * leave the shell's descriptors as they were.
 */

#define _GNU_SOURCE            /* F_SETPIPE_SZ */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "curlpipe.h"
#include "pipe.h"

#define PIPE_SIZE (1024 * 1024)     /* Linux's pipe-max-size default */

/* The pipe gets a bigger buffer where the system allows it (the pipe's
 * size, not a flag of anyone's description): with Linux's default
 * 64 KiB each loop turn moved at most 64 KiB, and a 1 GiB upload
 * through a pipe ran at 550 MiB/s against 930 for curl -T - with its
 * blocking reads; fewer, bigger reads close most of that gap.
 */
static void
grow_pipe (int fd)
{
#if HAVE_DECL_F_SETPIPE_SZ
  fcntl (fd, F_SETPIPE_SZ, PIPE_SIZE);
#endif
}

/* A new open file description of what fd refers to, non-blocking, or
 * -1.  O_NOCTTY: a terminal opened again must not become curlpipe's
 * controlling terminal.
 */
static int
reopen_nonblocking (int fd, int mode)
{
  char path[64];

  snprintf (path, sizeof path, "/proc/self/fd/%d", fd);
  return open (path, mode | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
}

void
io_open (struct io *io, int fd, int mode)
{
  struct stat sb;
  int flags, own;

  *io = (struct io) { .fd = fd, .kind = IO_POLLED };
  if (fstat (fd, &sb) == -1)
    return;
  io->stream = S_ISFIFO (sb.st_mode) || S_ISSOCK (sb.st_mode);
  if (S_ISREG (sb.st_mode) || S_ISBLK (sb.st_mode)) {
    io->kind = IO_PLAIN;
    return;
  }
  if (S_ISSOCK (sb.st_mode)) {
    io->kind = IO_SOCKET;
    return;
  }
  if (S_ISFIFO (sb.st_mode))
    grow_pipe (fd);
  if (S_ISFIFO (sb.st_mode) || S_ISCHR (sb.st_mode)) {
    own = reopen_nonblocking (fd, mode);
    if (own >= 0) {
      *io = (struct io) { .fd = own, .kind = IO_PLAIN, .owned = true,
                          .stream = io->stream };
      return;
    }
  }
  /* Whoever gave it non-blocking already gets EAGAIN as usual. */
  flags = fcntl (fd, F_GETFL);
  if (flags != -1 && (flags & O_NONBLOCK))
    io->kind = IO_PLAIN;
}

/* -o FILE: curlpipe's own description, so its flags are curlpipe's to
 * set (a FIFO, or -o /dev/stdout, which opens a new description).
 */
void
io_own (struct io *io, int fd)
{
  struct stat sb;
  int flags;

  *io = (struct io) { .fd = fd, .kind = IO_PLAIN, .owned = true };
  if (fstat (fd, &sb) == -1)
    return;
  if (S_ISSOCK (sb.st_mode))
    io->kind = IO_SOCKET;
  else if (S_ISFIFO (sb.st_mode) || S_ISCHR (sb.st_mode)) {
    flags = fcntl (fd, F_GETFL);
    if (flags == -1 || fcntl (fd, F_SETFL, flags | O_NONBLOCK) == -1)
      io->kind = IO_POLLED;
  }
}

/* Is fd ready for events now?  Sets errno to EAGAIN when not. */
static bool
ready (int fd, short events)
{
  struct pollfd pfd = { .fd = fd, .events = events };
  int r = poll (&pfd, 1, 0);

  if (r == 0)
    errno = EAGAIN;
  return r != 0;
}

ssize_t
io_read (const struct io *io, void *buf, size_t len)
{
  switch (io->kind) {
  case IO_SOCKET:
    return recv (io->fd, buf, len, MSG_DONTWAIT);
  case IO_POLLED:
    /* A blocking pipe or terminal that has bytes returns what it has. */
    if (!ready (io->fd, POLLIN))
      return -1;
    break;
  case IO_PLAIN:
    break;
  }
  return read (io->fd, buf, len);
}

ssize_t
io_write (const struct io *io, const void *buf, size_t len)
{
  switch (io->kind) {
  case IO_SOCKET:
    return send (io->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
  case IO_POLLED:
    if (!ready (io->fd, POLLOUT))
      return -1;
    if (len > PIPE_BUF)
      len = PIPE_BUF;
    break;
  case IO_PLAIN:
    break;
  }
  return write (io->fd, buf, len);
}

/* False when closing showed an error (a file's last write failed). */
bool
io_close (struct io *io)
{
  int r = 0;

  if (io->owned && io->fd >= 0)
    r = close (io->fd);
  io->fd = -1;
  io->owned = false;
  return r == 0;
}

/* A reader of standard output that went away is an error to report,
 * not a signal that kills curlpipe mid-message.
 */
void
catch_signals (void)
{
  signal (SIGPIPE, SIG_IGN);
}
