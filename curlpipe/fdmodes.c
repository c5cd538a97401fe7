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
 *   standard input when    read by a thread of its own with blocking
 *   the reopen failed      reads, which passes the bytes to the loop
 *                          through a pipe of curlpipe's own (see
 *                          start_relay);
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
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
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

/* The reader thread (start_relay): standard input's descriptor, the
 * write end of the pipe it fills, and how its reading ended.  The
 * thread writes error before it closes wfd; the loop reads it only
 * after the pipe's end of file and pthread_join.
 */
#define RELAY_BUFFER_SIZE (64 * 1024)

static struct relay {
  pthread_t thread;
  int fd, wfd;
  int error;                    /* errno of the read that failed, or 0 */
  bool running, joined;
} relay = { .fd = -1, .wfd = -1 };

/* Standard input's bytes into the relay's pipe, with blocking reads
 * and writes, until its end, a read error, or the loop closing its end
 * of the pipe.
 */
static void *
relay_thread (void *opaque)
{
  char buf[RELAY_BUFFER_SIZE];
  ssize_t n, w, off;
  bool more = true;

  while (more) {
    n = read (relay.fd, buf, sizeof buf);
    if (n == -1 && errno == EINTR)
      continue;
    if (n == -1)
      relay.error = errno;
    more = n > 0;
    for (off = 0; more && off < n; off += w) {
      w = write (relay.wfd, buf + off, n - off);
      if (w == -1 && errno == EINTR)
        w = 0;
      else if (w == -1)
        more = false;           /* the loop closed its end */
    }
  }
  close (relay.wfd);
  return NULL;
}

/* A blocking standard input that could not be opened again (a pipe
 * made by another user: EACCES), shared with other readers.  poll and
 * then read() is not enough: a sibling may take the bytes in between,
 * and the read blocks the whole loop.  FIONREAD first would narrow that
 * window, not close it.  So a thread owns the blocking reads, and the
 * loop reads what it passes on from a pipe that is curlpipe's alone,
 * non-blocking.  Nothing of the shared description is changed.  The
 * thread is never stopped: at exit it may sit in read(), and the bytes
 * it took then are lost, as those libcurl had not sent yet would be.
 * False when it could not start (standard input is then polled).
 */
static bool
start_relay (struct io *io, int fd)
{
  int p[2], flags;
  sigset_t all, old;
  bool ok;

  if (pipe2 (p, O_CLOEXEC) == -1)
    return false;
  flags = fcntl (p[0], F_GETFL);
  if (flags == -1 || fcntl (p[0], F_SETFL, flags | O_NONBLOCK) == -1) {
    close (p[0]);
    close (p[1]);
    return false;
  }
  grow_pipe (p[1]);
  relay.fd = fd;
  relay.wfd = p[1];
  /* Signals go to the loop's thread, as they did before. */
  sigfillset (&all);
  pthread_sigmask (SIG_SETMASK, &all, &old);
  ok = pthread_create (&relay.thread, NULL, relay_thread, NULL) == 0;
  pthread_sigmask (SIG_SETMASK, &old, NULL);
  if (!ok) {
    close (p[0]);
    close (p[1]);
    return false;
  }
  relay.running = true;
  *io = (struct io) { .fd = p[0], .poll_fd = p[0], .kind = IO_PLAIN,
                      .owned = true, .stream = true, .relayed = true };
  return true;
}

/* The relay's pipe ended: how the thread's reading ended (0, or -1 and
 * errno).
 */
static ssize_t
relay_end (void)
{
  if (relay.running && !relay.joined) {
    pthread_join (relay.thread, NULL);
    relay.joined = true;
  }
  if (relay.error != 0) {
    errno = relay.error;
    return -1;
  }
  return 0;
}

void
io_open (struct io *io, int fd, int mode)
{
  struct stat sb;
  int flags, own;

  *io = (struct io) { .fd = fd, .poll_fd = fd, .kind = IO_POLLED };
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
    /* Read and write the new description, but poll the one it came
     * from: Linux never reports the end (POLLHUP) of a named pipe to a
     * description opened after its last writer closed (it waits for a
     * writer to come), so `curlpipe -T FIFO` and `< FIFO` waited forever
     * when the writer had already gone.
     */
    if (own >= 0) {
      *io = (struct io) { .fd = own, .poll_fd = fd, .kind = IO_PLAIN,
                          .owned = true, .stream = io->stream };
      return;
    }
  }
  /* Whoever gave it non-blocking already gets EAGAIN as usual. */
  flags = fcntl (fd, F_GETFL);
  if (flags != -1 && (flags & O_NONBLOCK))
    io->kind = IO_PLAIN;
  else if (fd == STDIN_FILENO && mode == O_RDONLY)
    start_relay (io, fd);
}

/* -o FILE: curlpipe's own description, so its flags are curlpipe's to
 * set (a FIFO, or -o /dev/stdout, which opens a new description).
 */
void
io_own (struct io *io, int fd)
{
  struct stat sb;
  int flags;

  *io = (struct io) { .fd = fd, .poll_fd = fd, .kind = IO_PLAIN,
                      .owned = true };
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
  ssize_t n;

  if (io->relayed) {
    n = read (io->fd, buf, len);
    return n == 0 ? relay_end () : n;
  }
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
io_ignore_sigpipe (void)
{
  signal (SIGPIPE, SIG_IGN);
}
