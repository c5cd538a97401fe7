/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * relay HOST PORT: the floor of bench/curlpipe-run.  It moves standard
 * input to a TCP connection and the connection to standard output with
 * one poll () loop and no protocol at all, so its numbers are what the
 * pipes, the loopback socket and the echo server cost by themselves;
 * curlpipe cannot do better, and the gap is what HTTP and its own
 * design cost.
 *
 * At EOF on standard input it half-closes the socket (shutdown
 * SHUT_WR); it exits 0 when the socket reaches EOF and everything
 * received has been written out.
 */

#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* Large enough that a 64 KiB round trip is one read and one write each
 * way.
 */
#define BUF_SIZE (256 * 1024)

struct buffer {
  char data[BUF_SIZE];
  size_t start, end;
};

static struct buffer up, down;  /* stdin -> socket, socket -> stdout */
static int stdout_flags = -1;

static void
restore_stdout (void)
{
  if (stdout_flags != -1)
    fcntl (STDOUT_FILENO, F_SETFL, stdout_flags);
}

static void
die (const char *what)
{
  fprintf (stderr, "relay: %s: %s\n", what, strerror (errno));
  restore_stdout ();
  exit (EXIT_FAILURE);
}

static int
connect_to (const char *host, const char *port)
{
  struct addrinfo hints, *res, *ai;
  static const int one = 1;
  int fd = -1, err;

  memset (&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  err = getaddrinfo (host, port, &hints, &res);
  if (err != 0) {
    fprintf (stderr, "relay: %s:%s: %s\n", host, port, gai_strerror (err));
    exit (EXIT_FAILURE);
  }
  for (ai = res; ai; ai = ai->ai_next) {
    fd = socket (ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd == -1)
      continue;
    if (connect (fd, ai->ai_addr, ai->ai_addrlen) == 0)
      break;
    close (fd);
    fd = -1;
  }
  freeaddrinfo (res);
  if (fd == -1)
    die ("connect");
  setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (fcntl (fd, F_SETFL, fcntl (fd, F_GETFL) | O_NONBLOCK) == -1)
    die ("fcntl");
  return fd;
}

/* Reads what is there into b.  Returns false at EOF. */
static bool
take (int fd, struct buffer *b, const char *what)
{
  ssize_t r;

  if (b->start == b->end)
    b->start = b->end = 0;
  r = read (fd, b->data + b->end, BUF_SIZE - b->end);
  if (r == 0)
    return false;
  if (r < 0) {
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
      return true;
    die (what);
  }
  b->end += (size_t) r;
  return true;
}

static void
give (int fd, struct buffer *b, const char *what)
{
  ssize_t r = write (fd, b->data + b->start, b->end - b->start);

  if (r < 0) {
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
      return;
    die (what);
  }
  b->start += (size_t) r;
  if (b->start == b->end)
    b->start = b->end = 0;
}

int
main (int argc, char *argv[])
{
  bool in_eof = false, sock_eof = false, shut = false;
  struct stat st;
  int sock;

  if (argc != 3) {
    fprintf (stderr, "usage: relay HOST PORT\n");
    exit (2);
  }
  signal (SIGPIPE, SIG_IGN);
  sock = connect_to (argv[1], argv[2]);

  /* poll () saying stdout is writable only promises some room; a pipe
   * or socket is made non-blocking so a big write cannot stall the
   * other direction.  Its flags are put back at exit because the open
   * file description may be shared with the caller.
   */
  if (fstat (STDOUT_FILENO, &st) == 0 &&
      (S_ISFIFO (st.st_mode) || S_ISSOCK (st.st_mode))) {
    stdout_flags = fcntl (STDOUT_FILENO, F_GETFL);
    if (stdout_flags != -1)
      fcntl (STDOUT_FILENO, F_SETFL, stdout_flags | O_NONBLOCK);
  }

  while (!sock_eof || down.start != down.end) {
    struct pollfd pfd[3];
    int n = 0, in_i = -1, sock_i, out_i = -1;

    if (!in_eof && up.end < BUF_SIZE) {
      pfd[n].fd = STDIN_FILENO;
      pfd[n].events = POLLIN;
      in_i = n++;
    }
    pfd[n].fd = sock;
    pfd[n].events = 0;
    if (up.start != up.end)
      pfd[n].events |= POLLOUT;
    if (!sock_eof && down.end < BUF_SIZE)
      pfd[n].events |= POLLIN;
    /* Nothing wanted: leave it out, or a hang-up would wake poll ()
     * again and again while stdout drains.
     */
    if (pfd[n].events == 0)
      pfd[n].fd = -1;
    sock_i = n++;
    if (down.start != down.end) {
      pfd[n].fd = STDOUT_FILENO;
      pfd[n].events = POLLOUT;
      out_i = n++;
    }

    if (poll (pfd, (nfds_t) n, -1) == -1) {
      if (errno == EINTR)
        continue;
      die ("poll");
    }

    /* What was just read is written at once, without asking poll ()
     * first: it nearly always fits, and a round trip then costs one
     * poll () per direction.
     */
    if (in_i >= 0 && pfd[in_i].revents & (POLLIN | POLLHUP | POLLERR)) {
      if (!take (STDIN_FILENO, &up, "read stdin"))
        in_eof = true;
      else if (up.start != up.end)
        give (sock, &up, "write socket");
    }
    else if (up.start != up.end &&
             pfd[sock_i].revents & (POLLOUT | POLLERR))
      give (sock, &up, "write socket");
    if (pfd[sock_i].revents & (POLLIN | POLLHUP | POLLERR)) {
      if (!sock_eof && down.end < BUF_SIZE) {
        if (!take (sock, &down, "read socket"))
          sock_eof = true;
        else if (down.start != down.end)
          give (STDOUT_FILENO, &down, "write stdout");
      }
    }
    else if (out_i >= 0 &&
             pfd[out_i].revents & (POLLOUT | POLLERR | POLLHUP))
      give (STDOUT_FILENO, &down, "write stdout");

    if (in_eof && up.start == up.end && !shut) {
      if (shutdown (sock, SHUT_WR) == -1)
        die ("shutdown");
      shut = true;
    }
  }
  restore_stdout ();
  close (sock);
  return 0;
}
