/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Spare connections.  Over a long round trip, each connection that a
 * client's reads need costs a round trip to open before its first request,
 * more with TLS.  Opening them only once the probe has answered
 * (read/pool.c) puts that round trip after start-up, in front of the
 * client's first reads.  So the pool's other connections=-1 TCP connections
 * are opened by hand, as soon as the probe's own connection is up and its
 * request leaves (prereq_cb).  That is not done when the probe's connection
 * took HTTP/2, which carries every request on it (mux.c).  Each spare is a
 * non-blocking connect to the address and port the probe's connection went
 * to, which the kernel completes while the probe waits for its answer.  Not
 * before: a server that serves one connection at a time must get the
 * probe's first.
 *
 * A handle made later adopts a spare when libcurl asks for a socket to that
 * same address (open_cb).  It tells libcurl that the socket is connected
 * (sockopt_cb), so its first request leaves at once.  libcurl chooses the
 * address: through a proxy it is the proxy's.  When the probe is redirected
 * to another origin, the spares follow it there.  TLS stays libcurl's, on
 * the adopted socket, for the URL's name.  Near the server (pool_start) the
 * spares are closed.
 *
 * Each handle made takes one spare, adopted or closed, so the sockets never
 * outnumber connections=.  No spare gets a descriptor above half of
 * RLIMIT_NOFILE, so that nbdkit and the handles still get theirs.  A spare
 * that the server closed or spoke on, or that is not connected yet, is
 * closed rather than used.  So are all of them once they are
 * SPARE_MAX_AGE_NS old, by a thread started once nbdkit runs.  A server
 * closes a connection that sends no request: Apache after 20 s, HAProxy as
 * often set up after 10 s.  A close in flight when a spare is taken fails
 * its first request with no answer.  request/request.c then asks again on a
 * new connection (connection_took_spare).  Through a chain of redirects the
 * spares move at most MAX_SPARE_ROUNDS - 1 times.
 */

#include <config.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <nbdkit-plugin.h>

#include "transport/inside.h"
#define SPARE_MAX_AGE_NS (5 * INT64_C (1000000000))
#define MAX_SPARE_ROUNDS 3

/* Where a connection goes: compared field by field, not as bytes of a
 * sockaddr (padding, flow labels).
 */
struct endpoint {
  int family;
  unsigned port;
  unsigned char addr[16];
};

static pthread_mutex_t spare_lock = PTHREAD_MUTEX_INITIALIZER;
static bool stopped;            /* spares_stop was called */
static unsigned spares_wanted;  /* while the probe runs */
static curl_socket_t *spares;  /* spares[next_spare..nr_spares-1] left */
static unsigned nr_spares, next_spare;
static unsigned spare_rounds;   /* addresses spares went to in this probe */
static struct endpoint spare_to;
static int64_t spares_made;     /* CLOCK_MONOTONIC ns */

/* IPv4 or IPv6 only. */
static bool
endpoint_of (const struct sockaddr *sa, struct endpoint *e)
{
  memset (e, 0, sizeof *e);
  e->family = sa->sa_family;
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *) sa;

    e->port = ntohs (in->sin_port);
    memcpy (e->addr, &in->sin_addr, 4);
    return true;
  }
  if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *) sa;

    e->port = ntohs (in6->sin6_port);
    memcpy (e->addr, &in6->sin6_addr, 16);
    return true;
  }
  return false;
}

static bool
same_endpoint (const struct endpoint *a, const struct endpoint *b)
{
  return memcmp (a, b, sizeof *a) == 0;
}

static unsigned
spares_left_locked (void)
{
  return nr_spares - next_spare;
}

static void
drop_spares_locked (void)
{
  while (next_spare < nr_spares)
    close (spares[next_spare++]);
  nr_spares = next_spare = 0;
}

/* ip:port as a socket address in ss: its length, or 0 when ip is not
 * a plain IPv4 or IPv6 address.
 */
static socklen_t
socket_address (const char *ip, int port, struct sockaddr_storage *ss)
{
  struct sockaddr_in *in = (struct sockaddr_in *) ss;
  struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) ss;

  memset (ss, 0, sizeof *ss);
  if (inet_pton (AF_INET, ip, &in->sin_addr) == 1) {
    in->sin_family = AF_INET;
    in->sin_port = htons (port);
    return sizeof *in;
  }
  if (inet_pton (AF_INET6, ip, &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons (port);
    return sizeof *in6;
  }
  return 0;
}

/* The bound on a spare's descriptor: half of RLIMIT_NOFILE, so that
 * nbdkit and the handles still get theirs, and at most 2^20 to fit an
 * int.
 */
static curl_socket_t
fd_limit (void)
{
  struct rlimit rl;
  curl_socket_t limit = 1 << 20;

  if (getrlimit (RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      rl.rlim_cur / 2 < (rlim_t) limit)
    limit = rl.rlim_cur / 2;
  return limit;
}

/* The probe's connection to ip:port is up: spares to it, in place of
 * any to an address it left (a redirect to another origin).
 */
static void
open_spares_locked (const char *ip, int port)
{
  struct sockaddr_storage ss;
  socklen_t len = socket_address (ip, port, &ss);
  struct endpoint to;
  curl_socket_t fd, limit;

  if (len == 0)
    return;                     /* a Unix socket, a scoped IPv6 address */
  endpoint_of ((struct sockaddr *) &ss, &to);
  if (spares_left_locked () > 0 && same_endpoint (&to, &spare_to))
    return;
  /* A redirect loop moves them at most twice (A -> B -> C): not
   * connections=-1 new ones at each of its hops.
   */
  if (spare_rounds >= MAX_SPARE_ROUNDS) {
    drop_spares_locked ();
    return;
  }
  spare_rounds++;
  drop_spares_locked ();
  if (spares == NULL) {
    spares = calloc (spares_wanted, sizeof spares[0]);
    if (spares == NULL)
      return;
  }
  limit = fd_limit ();
  spare_to = to;
  spares_made = clock_ns ();
  while (nr_spares < spares_wanted) {
    fd = socket (ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd == -1)
      break;
    if (fd >= limit ||
        (connect (fd, (struct sockaddr *) &ss, len) == -1 &&
         errno != EINPROGRESS)) {
      close (fd);
      break;
    }
    spares[nr_spares++] = fd;
  }
  nbdkit_debug ("%s: %u spare connections opening beside the probe's",
                cfg.shown_url, nr_spares);
}

/* Connected, and neither closed by the server nor spoken to by it. */
static bool
spare_usable (curl_socket_t fd)
{
  struct pollfd p = { .fd = fd, .events = POLLOUT };
  int err = 0;
  socklen_t len = sizeof err;
  char b;

  if (poll (&p, 1, 0) != 1 || !(p.revents & POLLOUT) ||
      (p.revents & (POLLERR | POLLHUP)) ||
      getsockopt (fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1 || err != 0)
    return false;
  return recv (fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == -1 &&
    (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* All of them, once they are too old to be used. */
static bool
expire_spares_locked (void)
{
  if (spares_left_locked () == 0 ||
      clock_ns () - spares_made < SPARE_MAX_AGE_NS)
    return false;
  nbdkit_debug ("%s: %u spare connections unused for %d s: closed",
                cfg.shown_url, spares_left_locked (),
                (int) (SPARE_MAX_AGE_NS / 1000000000));
  drop_spares_locked ();
  return true;
}

/* A spare for a handle about to connect to a, or CURL_SOCKET_BAD.  The
 * oldest first: a server that serves one connection at a time accepts
 * them in that order, and waits on the first for its request.
 */
static curl_socket_t
take_spare_locked (const struct curl_sockaddr *a)
{
  struct endpoint to;
  curl_socket_t fd;

  if (spares_left_locked () == 0 || !endpoint_of (&a->addr, &to) ||
      !same_endpoint (&to, &spare_to) || expire_spares_locked ())
    return CURL_SOCKET_BAD;
  fd = spares[next_spare++];
  if (spares_left_locked () == 0)
    drop_spares_locked ();
  if (spare_usable (fd))
    return fd;
  close (fd);
  return CURL_SOCKET_BAD;
}

/* n spares while the probe runs (probe.c), 0 after it. */
void
spares_want (unsigned n)
{
  LOCK_FOR_SCOPE (&spare_lock);
  spares_wanted = n;
  if (n > 0)
    spare_rounds = 0;
}

/* An nbdkit that waits for its first client must not hold spares that
 * are too old to be used (the server has closed most of them by then,
 * and each is a descriptor): a thread closes them once they are, or
 * when nbdkit exits.  Started once nbdkit runs (pool_start).
 */
static pthread_t spare_timer;
static bool spare_timer_running, spare_timer_stop;
static pthread_cond_t spare_timer_cond;

static void *
spare_timer_run (void *arg)
{
  struct timespec ts;
  int64_t until;

  LOCK_FOR_SCOPE (&spare_lock);
  while (!spare_timer_stop && spares_left_locked () > 0) {
    until = spares_made + SPARE_MAX_AGE_NS;
    if (clock_ns () >= until) {
      expire_spares_locked ();
      break;
    }
    ts = clock_at (until);
    pthread_cond_timedwait (&spare_timer_cond, &spare_lock, &ts);
  }
  return NULL;
}

void
spares_start_timer (void)
{
  pthread_condattr_t attr;
  int err;

  if (spares_count () == 0 || spare_timer_running)
    return;
  pthread_condattr_init (&attr);
  pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
  pthread_cond_init (&spare_timer_cond, &attr);
  pthread_condattr_destroy (&attr);
  err = pthread_create (&spare_timer, NULL, spare_timer_run, NULL);
  if (err != 0) {
    /* Then they are closed when a connection is next made, or at
     * exit.
     */
    nbdkit_debug ("pthread_create: %s", strerror (err));
    pthread_cond_destroy (&spare_timer_cond);
    return;
  }
  spare_timer_running = true;
}

/* nbdkit is exiting: the timer thread ends and every spare is closed. */
void
spares_stop (void)
{
  {
    LOCK_FOR_SCOPE (&spare_lock);
    stopped = true;             /* spares_open_to opens none from now on */
  }
  if (spare_timer_running) {
    {
      LOCK_FOR_SCOPE (&spare_lock);
      spare_timer_stop = true;
      pthread_cond_signal (&spare_timer_cond);
    }
    pthread_join (spare_timer, NULL);
    pthread_cond_destroy (&spare_timer_cond);
    spare_timer_running = false;
  }
  spares_drop ();
}

/* Spares not yet taken. */
unsigned
spares_count (void)
{
  LOCK_FOR_SCOPE (&spare_lock);
  return spares_left_locked ();
}

void
spares_drop (void)
{
  LOCK_FOR_SCOPE (&spare_lock);
  drop_spares_locked ();
}

/* At unload, after spares_stop. */
void
spares_unload (void)
{
  LOCK_FOR_SCOPE (&spare_lock);
  drop_spares_locked ();
  free (spares);
  spares = NULL;
  spares_wanted = 0;
}

/* A connection is up, to ip and port (prereq_cb): while the probe
 * runs, the spares open to the same place.
 */
void
spares_open_to (const char *ip, int port)
{
  LOCK_FOR_SCOPE (&spare_lock);
  if (spares_wanted > 0 && ip != NULL && !stopped)
    open_spares_locked (ip, port);
}

/* A spare connected to a's address, for libcurl to adopt (open_cb), or
 * CURL_SOCKET_BAD.
 */
curl_socket_t
spares_take (const struct curl_sockaddr *a)
{
  LOCK_FOR_SCOPE (&spare_lock);
  return take_spare_locked (a);
}
