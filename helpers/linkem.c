/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * linkem [--rtt MS] [--rate MBIT] [--window BYTES] [--port-file FILE]
 *        [--count-file FILE] [-v] LISTEN_PORT TARGET_HOST TARGET_PORT
 *
 * A wide-area link in user space, for benchmarks on a machine without
 * the netem qdisc.  It listens on 127.0.0.1:LISTEN_PORT, connects each
 * accepted connection to TARGET_HOST:TARGET_PORT (loopback only) and
 * relays bytes both ways as a long fat pipe would carry them:
 *
 *  - One link per direction, shared by every connection: a segment
 *    enters it no earlier than the link is free and occupies it for
 *    len * 8 / rate, so two downloads share the rate instead of getting
 *    it each.  It is written to the other side one-way delay (rtt / 2)
 *    after it leaves the link.
 *  - A window per connection and direction: a byte counts as in flight
 *    from when it is read until its ACK would be back, one-way delay
 *    after it was written out.  While the window is full the sender is
 *    not read, which caps one connection at window / rtt as TCP's
 *    receive window does.  There is no slow start, no loss and no
 *    congestion control: the window is open from the first byte.
 *  - Set-up costs one round trip: the client's bytes are not read
 *    before accept time + rtt (as if its connect () had returned only
 *    after SYN, SYN-ACK), and the server's are not delivered before
 *    then either.  The client's connect () itself returns at once,
 *    because the kernel completes the handshake on loopback.  Bytes
 *    that wait for their connection's handshake stay in the kernel,
 *    off the link: booked on the shared link at the time they may
 *    leave, they would hold up the bytes of connections already open
 *    behind a handshake that sends nothing.
 *  - EOF is delivered (shutdown SHUT_WR) one-way delay after it was
 *    read and after every byte before it; a reset or error on either
 *    side resets both.
 *
 * --count-file FILE keeps in FILE the number of connections accepted
 * so far (0 at start, rewritten after each accept), so a benchmark can
 * count the TCP connections a client opened through the link, those
 * that never carried a request included, by reading it before and
 * after.
 *
 * One thread, non-blocking sockets, level-triggered epoll; due times
 * are in monotonic nanoseconds and the wait is epoll_pwait2 with a
 * nanosecond timeout, so nothing is rounded to milliseconds.  Reads
 * are at most 64 KiB (0.5 ms on the link at 1 Gbit/s).  Memory is
 * bounded by the windows: a segment is kept until it is acknowledged.
 * Sockets get large kernel buffers and TCP_NODELAY so loopback is never
 * the limit; bytes waiting in the receiver's kernel buffer add no delay
 * on loopback, they are merely not read yet.
 */

#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#define SEG_MAX (64 * 1024)
#define SOCK_BUF (4 * 1024 * 1024)
#define MAX_EVENTS 256

enum { CLIENT = 0, SERVER = 1 };
enum { UP = 0, DOWN = 1 };      /* client -> server, server -> client */

struct seg {
  struct seg *next;
  uint64_t due;                 /* may be written from then (ns) */
  uint64_t acked;               /* its ACK is back then; set once written */
  size_t len, off;
  char data[];
};

struct conn;

/* One direction of one connection: read from fd[from], write to
 * fd[to].  Segments from head to unsent are written and wait for their
 * ACK; from unsent to tail they wait to be written.
 */
struct dir {
  struct seg *head, *unsent, *tail;
  size_t inflight;              /* bytes read and not yet acknowledged */
  uint64_t bytes;               /* bytes written out */
  uint64_t fin_due;             /* when the EOF may be delivered */
  bool eof;                     /* EOF read from the sender */
  bool shut;                    /* EOF delivered to the receiver */
  bool blocked;                 /* the receiver's socket is full */
};

/* A socket as epoll sees it; epoll_event.data.ptr points here. */
struct end {
  struct conn *conn;            /* NULL for the listening socket */
  int side;                     /* CLIENT or SERVER */
  int fd;
  uint32_t mask;                /* the events wanted */
  bool in_set;                  /* whether it is in the epoll set */
};

struct conn {
  struct conn *prev, *next;
  unsigned id;
  struct end end[2];
  struct dir dir[2];
  bool connecting;              /* non-blocking connect to the server */
  bool closed;                  /* sockets closed; freed by the main loop */
  uint64_t accepted, ready;     /* ready = accepted + rtt */
};

static uint64_t rtt_ns = 100000000, one_way_ns = 50000000;
static double ns_per_byte = 8.0;        /* 1000 Mbit/s */
static size_t window = 16777216;
static bool verbose;

static int epfd;
static struct end listen_end;
static bool listen_paused;
static struct sockaddr_storage target;
static socklen_t target_len;
static uint64_t link_free[2];   /* when each link is next idle */
static struct conn *conns;
static unsigned next_id = 1;
static const char *count_file;
static volatile sig_atomic_t stop;

static uint64_t
now_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000 + (uint64_t) ts.tv_nsec;
}

static uint64_t
max_u64 (uint64_t a, uint64_t b)
{
  return a > b ? a : b;
}

static void
on_signal (int sig)
{
  (void) sig;
  stop = 1;
}

static void
usage (FILE *fp)
{
  fprintf (fp,
           "usage: linkem [--rtt MS] [--rate MBIT] [--window BYTES]\n"
           "              [--port-file FILE] [--count-file FILE] [-v]\n"
           "              LISTEN_PORT TARGET_HOST TARGET_PORT\n"
           "  --rtt MS         round-trip time, half each way"
           " (default 100)\n"
           "  --rate MBIT      link rate per direction, shared by all"
           " connections\n"
           "                   (default 1000)\n"
           "  --window BYTES   bytes in flight per connection and"
           " direction\n"
           "                   (default 16777216)\n"
           "  --port-file FILE write the listening port here"
           " (for LISTEN_PORT 0)\n"
           "  --count-file FILE\n"
           "                   keep the number of connections accepted"
           " so far here\n"
           "  -v               one line per connection when it closes\n");
}

static double
parse_number (const char *what, const char *s, double lo, double hi)
{
  char *end;
  double v;

  errno = 0;
  v = strtod (s, &end);
  if (errno != 0 || end == s || *end != '\0' || !(v >= lo && v <= hi)) {
    fprintf (stderr, "linkem: %s: '%s': not a number in %g..%g\n",
             what, s, lo, hi);
    exit (2);
  }
  return v;
}

/* Bigger buffers than the kernel's autotuning may choose, so neither
 * loopback hop limits a 1 Gbit/s link at 100 ms.  The *FORCE options
 * need CAP_NET_ADMIN; without it autotuning (tcp_rmem, tcp_wmem) is
 * left alone, since a plain SO_RCVBUF is capped at rmem_max and would
 * switch autotuning off.  The receive buffer must be set before listen
 * () or connect (), where the window scale is chosen.
 */
static void
tune_socket (int fd)
{
  static const int one = 1, size = SOCK_BUF;

  setsockopt (fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size);
  setsockopt (fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size);
  setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static bool
is_loopback (const struct sockaddr *sa)
{
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *) sa;
    return (ntohl (in->sin_addr.s_addr) >> 24) == 127;
  }
  if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *) sa;
    return IN6_IS_ADDR_LOOPBACK (&in6->sin6_addr);
  }
  return false;
}

static void
resolve_target (const char *host, const char *port)
{
  struct addrinfo hints, *res, *ai;
  int err;

  memset (&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  err = getaddrinfo (host, port, &hints, &res);
  if (err != 0) {
    fprintf (stderr, "linkem: %s:%s: %s\n", host, port, gai_strerror (err));
    exit (EXIT_FAILURE);
  }
  for (ai = res; ai; ai = ai->ai_next) {
    if (is_loopback (ai->ai_addr)) {
      memcpy (&target, ai->ai_addr, ai->ai_addrlen);
      target_len = ai->ai_addrlen;
      break;
    }
  }
  freeaddrinfo (res);
  if (target_len == 0) {
    fprintf (stderr, "linkem: %s:%s: not a loopback address\n", host, port);
    exit (EXIT_FAILURE);
  }
}

/* Writes N and a newline to path, renamed into place, so a script
 * reading the file never sees half a number.
 */
static int
write_number (const char *path, unsigned n)
{
  char tmp[4096];
  FILE *fp;

  snprintf (tmp, sizeof tmp, "%s.tmp.%ld", path, (long) getpid ());
  fp = fopen (tmp, "w");
  if (fp == NULL || fprintf (fp, "%u\n", n) < 0 || fclose (fp) != 0 ||
      rename (tmp, path) == -1) {
    fprintf (stderr, "linkem: %s: %s\n", path, strerror (errno));
    unlink (tmp);
    return -1;
  }
  return 0;
}

static void
make_listener (const char *port_s, const char *port_file)
{
  static const int one = 1;
  struct sockaddr_in sin;
  socklen_t len = sizeof sin;
  unsigned port;

  port = (unsigned) parse_number ("LISTEN_PORT", port_s, 0, 65535);
  listen_end.fd = socket (AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                      0);
  if (listen_end.fd == -1) {
    perror ("linkem: socket");
    exit (EXIT_FAILURE);
  }
  setsockopt (listen_end.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  /* Accepted sockets inherit the buffer sizes from here. */
  tune_socket (listen_end.fd);
  memset (&sin, 0, sizeof sin);
  sin.sin_family = AF_INET;
  sin.sin_port = htons ((uint16_t) port);
  sin.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  if (bind (listen_end.fd, (struct sockaddr *) &sin, sizeof sin) == -1 ||
      listen (listen_end.fd, SOMAXCONN) == -1 ||
      getsockname (listen_end.fd, (struct sockaddr *) &sin, &len) == -1) {
    fprintf (stderr, "linkem: listen 127.0.0.1:%u: %s\n",
             port, strerror (errno));
    exit (EXIT_FAILURE);
  }

  if (port_file && write_number (port_file, ntohs (sin.sin_port)) == -1)
    exit (EXIT_FAILURE);
}

/* Makes epoll watch e for want.  A socket with nothing wanted stays in
 * the set (events 0), since taking it out and putting it back costs
 * more while a window opens and closes every segment; handle_event
 * takes it out if a hang-up, reported whatever the mask, would wake
 * epoll again and again.
 */
static void
set_mask (struct end *e, uint32_t want)
{
  struct epoll_event ev;
  int op;

  if (e->in_set && want == e->mask)
    return;
  e->mask = want;
  if (!e->in_set && want == 0)
    return;
  op = e->in_set ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
  memset (&ev, 0, sizeof ev);
  ev.events = want;
  ev.data.ptr = e;
  if (epoll_ctl (epfd, op, e->fd, &ev) == -1) {
    perror ("linkem: epoll_ctl");
    exit (EXIT_FAILURE);
  }
  e->in_set = true;
}

static void
unwatch (struct end *e)
{
  if (e->in_set && epoll_ctl (epfd, EPOLL_CTL_DEL, e->fd, NULL) == -1) {
    perror ("linkem: epoll_ctl");
    exit (EXIT_FAILURE);
  }
  e->in_set = false;
  e->mask = 0;
}

/* Closes both sockets.  The memory stays until the main loop frees
 * it, because events for the other socket may still be in the batch
 * being handled.
 */
static void
close_conn (struct conn *c, const char *how)
{
  int s;

  if (verbose)
    fprintf (stderr,
             "linkem: connection %u %s after %.3f s:"
             " %" PRIu64 " bytes up, %" PRIu64 " bytes down\n",
             c->id, how, (double) (now_ns () - c->accepted) / 1e9,
             c->dir[UP].bytes, c->dir[DOWN].bytes);
  for (s = 0; s < 2; s++) {
    unwatch (&c->end[s]);
    close (c->end[s].fd);
  }
  c->closed = true;

  /* A descriptor is free again. */
  if (listen_paused) {
    listen_paused = false;
    set_mask (&listen_end, EPOLLIN);
  }
}

static void
free_conn (struct conn *c)
{
  int d;

  for (d = 0; d < 2; d++) {
    struct seg *g = c->dir[d].head, *next;

    for (; g; g = next) {
      next = g->next;
      free (g);
    }
  }
  if (c->prev)
    c->prev->next = c->next;
  else
    conns = c->next;
  if (c->next)
    c->next->prev = c->prev;
  free (c);
}

/* A reset or an error on one side resets both, so the other end sees
 * an error and not a clean (and short) EOF.
 */
static void
reset_conn (struct conn *c, const char *why)
{
  static const struct linger lg = { .l_onoff = 1, .l_linger = 0 };
  int s;

  for (s = 0; s < 2; s++)
    setsockopt (c->end[s].fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  close_conn (c, why);
}

static void
accept_all (uint64_t now)
{
  for (;;) {
    struct conn *c;
    int fd, sfd;

    fd = accept4 (listen_end.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd == -1) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
          errno == ECONNABORTED)
        return;
      fprintf (stderr, "linkem: accept: %s\n", strerror (errno));
      /* Out of descriptors: wait for a connection to close rather than
       * spin on a listening socket that stays readable.
       */
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
          errno == ENOMEM) {
        unwatch (&listen_end);
        listen_paused = true;
        return;
      }
      exit (EXIT_FAILURE);
    }

    sfd = socket (target.ss_family,
                  SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (sfd == -1) {
      fprintf (stderr, "linkem: socket: %s\n", strerror (errno));
      close (fd);
      continue;
    }
    tune_socket (sfd);
    c = calloc (1, sizeof *c);
    if (c == NULL) {
      perror ("linkem: calloc");
      exit (EXIT_FAILURE);
    }
    c->id = next_id++;
    if (count_file && write_number (count_file, c->id) == -1)
      exit (EXIT_FAILURE);
    c->end[CLIENT] = (struct end) { .conn = c, .side = CLIENT, .fd = fd };
    c->end[SERVER] = (struct end) { .conn = c, .side = SERVER, .fd = sfd };
    c->accepted = now;
    c->ready = now + rtt_ns;
    c->next = conns;
    if (conns)
      conns->prev = c;
    conns = c;
    if (connect (sfd, (struct sockaddr *) &target, target_len) == -1) {
      if (errno != EINPROGRESS) {
        fprintf (stderr, "linkem: connect to target: %s\n", strerror (errno));
        reset_conn (c, "refused");
        continue;
      }
      c->connecting = true;
    }
  }
}

/* Reads one segment from side s; it is booked on the link at once. */
static void
read_side (struct conn *c, int s, uint64_t now)
{
  struct dir *d = &c->dir[s == CLIENT ? UP : DOWN];
  int l = s == CLIENT ? UP : DOWN;
  size_t room = window - d->inflight, want;
  uint64_t enter;
  struct seg *g;
  ssize_t r;

  if (d->eof || room == 0)
    return;
  want = room < SEG_MAX ? room : SEG_MAX;
  g = malloc (sizeof *g + want);
  if (g == NULL) {
    perror ("linkem: malloc");
    exit (EXIT_FAILURE);
  }
  r = read (c->end[s].fd, g->data, want);
  if (r == -1) {
    free (g);
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      reset_conn (c, s == CLIENT ? "reset by client" : "reset by server");
    return;
  }

  /* The client is read only once its handshake is done (update_masks);
   * the server's bytes wait for it to have finished at the client.
   */
  enter = now;
  if (r == 0) {
    free (g);
    d->eof = true;
    d->fin_due = max_u64 (link_free[l], enter) + one_way_ns;
    d->fin_due = max_u64 (d->fin_due, c->ready);
    return;
  }
  /* Shrinking in place is cheap and keeps memory within the window. */
  if ((size_t) r < want) {
    struct seg *small = realloc (g, sizeof *g + (size_t) r);

    if (small)
      g = small;
  }
  g->next = NULL;
  g->len = (size_t) r;
  g->off = 0;
  g->acked = 0;
  link_free[l] = max_u64 (link_free[l], enter) +
    (uint64_t) ((double) r * ns_per_byte + 0.5);
  g->due = max_u64 (link_free[l] + one_way_ns, c->ready);
  if (d->tail)
    d->tail->next = g;
  else
    d->head = g;
  d->tail = g;
  if (d->unsent == NULL)
    d->unsent = g;
  d->inflight += g->len;
}

/* Does what is due in direction dn by now: frees acknowledged
 * segments, writes those due, delivers EOF.  Returns false if the
 * connection was reset.
 */
static bool
service (struct conn *c, int dn, uint64_t now)
{
  struct dir *d = &c->dir[dn];
  int to = c->end[dn == UP ? SERVER : CLIENT].fd;

  while (d->head && d->head != d->unsent && d->head->acked <= now) {
    struct seg *g = d->head;

    d->head = g->next;
    if (d->head == NULL)
      d->tail = NULL;
    d->inflight -= g->len;
    free (g);
  }

  if (dn == UP && c->connecting)
    return true;
  while (!d->blocked && d->unsent && d->unsent->due <= now) {
    struct seg *g = d->unsent;
    ssize_t r;

    r = send (to, g->data + g->off, g->len - g->off, MSG_NOSIGNAL);
    if (r == -1) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        d->blocked = true;
        break;
      }
      if (errno == EINTR)
        continue;
      reset_conn (c, dn == UP ? "server gone" : "client gone");
      return false;
    }
    g->off += (size_t) r;
    d->bytes += (uint64_t) r;
    if (g->off == g->len) {
      g->acked = now + one_way_ns;
      d->unsent = g->next;
    }
  }

  if (d->eof && !d->shut && d->unsent == NULL && d->fin_due <= now) {
    if (shutdown (to, SHUT_WR) == -1) {
      reset_conn (c, dn == UP ? "server gone" : "client gone");
      return false;
    }
    d->shut = true;
  }
  return true;
}

/* The next time anything is due in direction dn, or UINT64_MAX. */
static uint64_t
next_due (const struct conn *c, int dn)
{
  const struct dir *d = &c->dir[dn];
  uint64_t t = UINT64_MAX;

  if (d->head && d->head != d->unsent)
    t = d->head->acked;
  if (d->unsent && !d->blocked && !(dn == UP && c->connecting))
    t = t < d->unsent->due ? t : d->unsent->due;
  if (d->eof && !d->shut && d->unsent == NULL)
    t = t < d->fin_due ? t : d->fin_due;
  return t;
}

static void
update_masks (struct conn *c, uint64_t now)
{
  int s;

  for (s = 0; s < 2; s++) {
    const struct dir *in = &c->dir[s == CLIENT ? UP : DOWN];
    const struct dir *out = &c->dir[s == CLIENT ? DOWN : UP];
    uint32_t want = 0;

    if (s == SERVER && c->connecting)
      want = EPOLLOUT;
    else {
      if (!in->eof && in->inflight < window &&
          (s == SERVER || now >= c->ready))
        want |= EPOLLIN;
      if (out->blocked)
        want |= EPOLLOUT;
    }
    set_mask (&c->end[s], want);
  }
}

static void
handle_event (const struct epoll_event *ev, uint64_t now)
{
  struct end *e = ev->data.ptr;
  struct conn *c = e->conn;
  int s = e->side;

  if (e == &listen_end) {
    accept_all (now);
    return;
  }
  if (c->closed)
    return;

  if (s == SERVER && c->connecting) {
    int err = 0;
    socklen_t len = sizeof err;

    getsockopt (c->end[SERVER].fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      fprintf (stderr, "linkem: connect to target: %s\n", strerror (err));
      reset_conn (c, "refused");
      return;
    }
    c->connecting = false;
    return;
  }

  if (ev->events & EPOLLOUT)
    c->dir[s == CLIENT ? DOWN : UP].blocked = false;
  /* Errors and hang-ups show up as the result of the read or write
   * that is wanted; if none is, a hang-up waits until one is.
   */
  if (e->mask & EPOLLIN) {
    if (ev->events & (EPOLLIN | EPOLLHUP | EPOLLERR))
      read_side (c, s, now);
  }
  else if (ev->events & EPOLLERR && !(e->mask & EPOLLOUT))
    reset_conn (c, s == CLIENT ? "client error" : "server error");
  else if (e->mask == 0)
    unwatch (e);
}

int
main (int argc, char *argv[])
{
  static const struct option longopts[] = {
    { "rtt", required_argument, NULL, 'r' },
    { "rate", required_argument, NULL, 'b' },
    { "window", required_argument, NULL, 'w' },
    { "port-file", required_argument, NULL, 'p' },
    { "count-file", required_argument, NULL, 'c' },
    { "verbose", no_argument, NULL, 'v' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 }
  };
  const char *port_file = NULL;
  struct epoll_event events[MAX_EVENTS];
  struct sigaction sa;
  struct rlimit rl;
  sigset_t block, waitmask;
  double rtt_ms = 100, rate = 1000;
  int opt;

  for (;;) {
    opt = getopt_long (argc, argv, "vh", longopts, NULL);
    if (opt == -1)
      break;
    switch (opt) {
    case 'r':
      rtt_ms = parse_number ("--rtt", optarg, 0, 1e6);
      break;
    case 'b':
      rate = parse_number ("--rate", optarg, 1e-3, 1e6);
      break;
    case 'w':
      window = (size_t) parse_number ("--window", optarg, 1, 1ULL << 40);
      break;
    case 'p':
      port_file = optarg;
      break;
    case 'c':
      count_file = optarg;
      break;
    case 'v':
      verbose = true;
      break;
    case 'h':
      usage (stdout);
      exit (EXIT_SUCCESS);
    default:
      usage (stderr);
      exit (2);
    }
  }
  if (argc - optind != 3) {
    usage (stderr);
    exit (2);
  }
  rtt_ns = (uint64_t) (rtt_ms * 1e6 + 0.5);
  one_way_ns = rtt_ns / 2;
  ns_per_byte = 8000.0 / rate;

  /* SIGTERM and SIGINT are only let in while waiting, so a signal
   * cannot slip in between the check of stop and the wait.
   */
  sigemptyset (&block);
  sigaddset (&block, SIGTERM);
  sigaddset (&block, SIGINT);
  sigprocmask (SIG_BLOCK, &block, &waitmask);
  sigdelset (&waitmask, SIGTERM);
  sigdelset (&waitmask, SIGINT);
  memset (&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction (SIGTERM, &sa, NULL);
  sigaction (SIGINT, &sa, NULL);
  signal (SIGPIPE, SIG_IGN);

  /* Two descriptors a connection. */
  if (getrlimit (RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit (RLIMIT_NOFILE, &rl);
  }
  /* The default 50 us of timer slack would be a tenth of a 64 KiB
   * segment's time on a 1 Gbit/s link.
   */
  prctl (PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);

  resolve_target (argv[optind + 1], argv[optind + 2]);
  epfd = epoll_create1 (EPOLL_CLOEXEC);
  if (epfd == -1) {
    perror ("linkem: epoll_create1");
    exit (EXIT_FAILURE);
  }
  if (count_file && write_number (count_file, 0) == -1)
    exit (EXIT_FAILURE);
  make_listener (argv[optind], port_file);
  set_mask (&listen_end, EPOLLIN);

  while (!stop) {
    uint64_t now = now_ns (), due = UINT64_MAX;
    struct timespec ts, *tsp = NULL;
    struct conn *c, *next;
    int n, i, dn;

    /* Everything due is done first; the wait is then until the
     * earliest next due time over all connections.  A scan, not a
     * heap: it is a few comparisons per connection per wake-up.
     */
    for (c = conns; c; c = next) {
      next = c->next;
      if (!c->closed && service (c, UP, now) && service (c, DOWN, now) &&
          c->dir[UP].shut && c->dir[DOWN].shut)
        close_conn (c, "closed");
      if (c->closed) {
        free_conn (c);
        continue;
      }
      update_masks (c, now);
      for (dn = 0; dn < 2; dn++) {
        uint64_t t = next_due (c, dn);

        due = t < due ? t : due;
      }
      /* The client is read from then. */
      if (now < c->ready && c->ready < due)
        due = c->ready;
    }

    if (due != UINT64_MAX) {
      uint64_t wait = due > now ? due - now : 0;

      ts.tv_sec = (time_t) (wait / 1000000000);
      ts.tv_nsec = (long) (wait % 1000000000);
      tsp = &ts;
    }
    n = epoll_pwait2 (epfd, events, MAX_EVENTS, tsp, &waitmask);
    if (n == -1) {
      if (errno == EINTR)
        continue;
      perror ("linkem: epoll_pwait2");
      exit (EXIT_FAILURE);
    }
    now = now_ns ();
    for (i = 0; i < n; i++)
      handle_event (&events[i], now);
  }

  while (conns) {
    if (!conns->closed)
      close_conn (conns, "closed at exit");
    free_conn (conns);
  }
  close (listen_end.fd);
  close (epfd);
  return EXIT_SUCCESS;
}
