/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The connections: each is an easy handle with its own keep-alive
 * connection, made and freed when the pool (pool.c) says, with the
 * options every request on it shares (the user's, from config_apply),
 * its socket recorded (for callbacks.c's quick ACKs) and -D curl.verbose
 * output.  DNS answers, TLS sessions and cookies are shared between
 * the handles through a share handle.  What a request sets is
 * exchange.c's.
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

#include "curldefs.h"
#include "secrets.h"

/* -D curl.verbose=1: show the HTTP exchange, secrets masked. */
NBDKIT_DLL_PUBLIC int curl_debug_verbose = 0;

/* libcurl's default receive buffer is 16 KiB; a bigger one means fewer
 * write callbacks and fewer read(2) calls for the 256 KiB requests that
 * nbdcopy and qemu-img make.
 */
#define RECV_BUFFER_SIZE (256 * 1024)

static CURLSH *share;
static pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];

static void
share_lock (CURL *easy, curl_lock_data data, curl_lock_access access,
            void *opaque)
{
  pthread_mutex_lock (&share_locks[data]);
}

static void
share_unlock (CURL *easy, curl_lock_data data, void *opaque)
{
  pthread_mutex_unlock (&share_locks[data]);
}

/* DNS answers, TLS sessions and cookies are shared between the
 * handles.
 */
int
connection_init (void)
{
  unsigned i;

  for (i = 0; i < CURL_LOCK_DATA_LAST; i++)
    pthread_mutex_init (&share_locks[i], NULL);
  share = curl_share_init ();
  if (share == NULL) {
    nbdkit_error ("curl_share_init: failed");
    return -1;
  }
  curl_share_setopt (share, CURLSHOPT_LOCKFUNC, share_lock);
  curl_share_setopt (share, CURLSHOPT_UNLOCKFUNC, share_unlock);
  curl_share_setopt (share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
  curl_share_setopt (share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
  /* One cookie store for all the handles: a Set-Cookie one answer
   * brings is sent on every connection.
   */
  curl_share_setopt (share, CURLSHOPT_SHARE, CURL_LOCK_DATA_COOKIE);
  return 0;
}

static void spares_free (void);

void
connection_unload (void)
{
  unsigned i;

  spares_free ();
  if (share != NULL)
    curl_share_cleanup (share);
  share = NULL;
  for (i = 0; i < CURL_LOCK_DATA_LAST; i++)
    pthread_mutex_destroy (&share_locks[i]);
}

/* -D curl.verbose=1 output, secrets masked (common/secrets.c). */
static void
print_debug (const char *line, void *opaque)
{
  nbdkit_debug ("%s", line);
}

static const struct debug_printer printer = { print_debug, NULL };

/* Set at unload (conn_stop): no new socket is made. */
static bool stopping;

/* Spare connections.  Over a long round trip, each connection that a
 * client's reads need costs a round trip to open before its first
 * request (more with TLS), and opening them only once the probe has
 * answered (pool.c) puts that round trip after start-up, in front of
 * the client's first reads.  So as soon as the probe's own connection
 * is up and its request leaves (prereq_cb), the pool's other
 * connections=-1 TCP connections are opened by hand to the address and
 * port that connection went to: a non-blocking connect each, which the
 * kernel completes while the probe waits for its answer.  Not before:
 * a server that serves one connection at a time must get the probe's
 * first.  A handle made later adopts one when libcurl asks for a
 * socket to that same address (open_cb) and tells libcurl that it is
 * connected (sockopt_cb), so its first request leaves at once.
 * libcurl chooses the address: through a proxy it is the proxy's, and
 * when the probe is redirected to another origin the spares follow it
 * there.  TLS stays libcurl's, on the adopted socket, for the URL's
 * name.  Near the server (pool_start) they are closed.
 *
 * Each handle made takes one spare, adopted or closed, so the sockets
 * never outnumber connections=; and no spare gets a descriptor above
 * half of RLIMIT_NOFILE, so that nbdkit and the handles still get
 * theirs.  A spare that the server closed or spoke on, or that is not
 * connected yet, is closed rather than used; so are all of them once
 * they are SPARE_MAX_AGE_NS old (a server closes a connection that
 * sends no request, Apache after 20 s, HAProxy as often set up after
 * 10 s), by a thread started once nbdkit runs.  A close in flight when a
 * spare is taken fails its first request with no answer; the engine
 * asks again on a new connection (conn_took_spare).  Through a chain
 * of redirects they move at most MAX_SPARE_ROUNDS - 1 times.
 */
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
static unsigned spares_wanted;  /* while the probe runs */
static curl_socket_t *spares;  /* spares[next_spare..nr_spares-1] left */
static unsigned nr_spares, next_spare;
static unsigned spare_rounds;   /* addresses spares went to in this probe */
static struct endpoint spare_to;
static int64_t spares_made;     /* CLOCK_MONOTONIC ns */

/* CLOCK_MONOTONIC in nanoseconds (the pool's deadlines too). */
int64_t
monotonic_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * INT64_C (1000000000) + ts.tv_nsec;
}

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

/* The probe's connection to ip:port is up: spares to it, in place of
 * any to an address it left (a redirect to another origin).
 */
static void
open_spares_locked (const char *ip, int port)
{
  struct sockaddr_storage ss;
  struct sockaddr_in *in = (struct sockaddr_in *) &ss;
  struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &ss;
  socklen_t len;
  struct endpoint to;
  struct rlimit rl;
  curl_socket_t fd, fd_limit;

  memset (&ss, 0, sizeof ss);
  if (inet_pton (AF_INET, ip, &in->sin_addr) == 1) {
    in->sin_family = AF_INET;
    in->sin_port = htons (port);
    len = sizeof *in;
  }
  else if (inet_pton (AF_INET6, ip, &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons (port);
    len = sizeof *in6;
  }
  else
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
  fd_limit = 1 << 20;
  if (getrlimit (RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      rl.rlim_cur / 2 < (rlim_t) fd_limit)
    fd_limit = rl.rlim_cur / 2;
  spare_to = to;
  spares_made = monotonic_ns ();
  while (nr_spares < spares_wanted) {
    fd = socket (ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd == -1)
      break;
    if (fd >= fd_limit ||
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
      monotonic_ns () - spares_made < SPARE_MAX_AGE_NS)
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
conn_want_spares (unsigned n)
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
    if (monotonic_ns () >= until) {
      expire_spares_locked ();
      break;
    }
    ts.tv_sec = until / 1000000000;
    ts.tv_nsec = until % 1000000000;
    pthread_cond_timedwait (&spare_timer_cond, &spare_lock, &ts);
  }
  return NULL;
}

void
conn_spare_timer (void)
{
  pthread_condattr_t attr;
  int err;

  if (conn_spares () == 0 || spare_timer_running)
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

static void
spare_timer_end (void)
{
  if (!spare_timer_running)
    return;
  {
    LOCK_FOR_SCOPE (&spare_lock);
    spare_timer_stop = true;
    pthread_cond_signal (&spare_timer_cond);
  }
  pthread_join (spare_timer, NULL);
  pthread_cond_destroy (&spare_timer_cond);
  spare_timer_running = false;
}

/* Spares not yet taken. */
unsigned
conn_spares (void)
{
  LOCK_FOR_SCOPE (&spare_lock);
  return spares_left_locked ();
}

void
conn_drop_spares (void)
{
  LOCK_FOR_SCOPE (&spare_lock);
  drop_spares_locked ();
}

static void
spares_free (void)
{
  LOCK_FOR_SCOPE (&spare_lock);
  drop_spares_locked ();
  free (spares);
  spares = NULL;
  spares_wanted = 0;
}

/* The connection is up (and reused for each later request on it):
 * while the probe runs, the spares open to where it went.
 */
static int
prereq_cb (void *opaque, char *primary_ip, char *local_ip,
           int primary_port, int local_port)
{
  LOCK_FOR_SCOPE (&spare_lock);
  if (spares_wanted > 0 && primary_ip != NULL &&
      !__atomic_load_n (&stopping, __ATOMIC_RELAXED))
    open_spares_locked (primary_ip, primary_port);
  return CURL_PREREQFUNC_OK;
}

static curl_socket_t
open_cb (void *opaque, curlsocktype purpose, struct curl_sockaddr *a)
{
  struct conn *c = opaque;
  curl_socket_t fd = CURL_SOCKET_BAD;

  c->adopted = false;
  if (__atomic_load_n (&stopping, __ATOMIC_RELAXED))
    return CURL_SOCKET_BAD;
  if (purpose == CURLSOCKTYPE_IPCXN && a->socktype == SOCK_STREAM) {
    LOCK_FOR_SCOPE (&spare_lock);
    fd = take_spare_locked (a);
  }
  if (fd != CURL_SOCKET_BAD) {
    c->adopted = true;
    return fd;
  }
  return socket (a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

/* libcurl tells no socket during a transfer (CURLINFO_ACTIVESOCKET is
 * only for after it), so the handle's socket is recorded when libcurl
 * makes it and forgotten when libcurl closes it.
 */
static int
sockopt_cb (void *opaque, curl_socket_t sock, curlsocktype purpose)
{
  struct conn *c = opaque;
  bool adopted = c->adopted;

  c->adopted = false;
  if (adopted)
    c->on_spare = true;
  __atomic_store_n (&c->sock, sock, __ATOMIC_RELAXED);
  if (__atomic_load_n (&stopping, __ATOMIC_RELAXED))
    return CURL_SOCKOPT_ERROR;
  return adopted ? CURL_SOCKOPT_ALREADY_CONNECTED : CURL_SOCKOPT_OK;
}

/* Whether c's last request went out on a spare, its first request
 * there (and it is not one from now on).
 */
bool
conn_took_spare (struct conn *c)
{
  bool r = c->on_spare;

  c->on_spare = false;
  return r;
}

static int
close_cb (void *opaque, curl_socket_t sock)
{
  struct conn *c = opaque;

  if (__atomic_load_n (&c->sock, __ATOMIC_RELAXED) == sock)
    __atomic_store_n (&c->sock, CURL_SOCKET_BAD, __ATOMIC_RELAXED);
  return close (sock);
}

/* nbdkit is exiting: no new connection is made from now on. */
void
conn_stop (void)
{
  __atomic_store_n (&stopping, true, __ATOMIC_RELAXED);
  spare_timer_end ();
  conn_drop_spares ();
}

/* curl_easy_setopt on e, until one fails: rc says which. */
#define SET(opt, val) \
  if (rc == CURLE_OK) rc = curl_easy_setopt (e, opt, val)

/* Options that every request on a handle shares. */
static int
setup_handle (struct conn *c)
{
  CURL *e = c->easy;
  CURLcode rc = CURLE_OK;

  SET (CURLOPT_ERRORBUFFER, c->errbuf);
  SET (CURLOPT_URL, cfg.url);
  SET (CURLOPT_NOSIGNAL, 1L);
  SET (CURLOPT_SHARE, share);
  /* route.c follows redirects itself, one exchange per hop. */
  SET (CURLOPT_FOLLOWLOCATION, 0L);
  /* Through a proxy, an https URL's answer is preceded by the proxy's
   * "200 Connection established": not the answer to check.
   */
  SET (CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
  SET (CURLOPT_BUFFERSIZE, (long) RECV_BUFFER_SIZE);
  /* The user's choices (config.c, next to the parameters). */
  if (rc == CURLE_OK)
    rc = config_apply (e);
  SET (CURLOPT_HTTPHEADER, cfg.headers);
  SET (CURLOPT_PREREQFUNCTION, prereq_cb);
  SET (CURLOPT_OPENSOCKETFUNCTION, open_cb);
  SET (CURLOPT_OPENSOCKETDATA, c);
  SET (CURLOPT_SOCKOPTFUNCTION, sockopt_cb);
  SET (CURLOPT_SOCKOPTDATA, c);
  SET (CURLOPT_CLOSESOCKETFUNCTION, close_cb);
  SET (CURLOPT_CLOSESOCKETDATA, c);
  if (curl_debug_verbose) {
    SET (CURLOPT_VERBOSE, 1L);
    SET (CURLOPT_DEBUGFUNCTION, debug_shown);
    SET (CURLOPT_DEBUGDATA, &printer);
  }

  if (rc != CURLE_OK) {
    nbdkit_error ("curl_easy_setopt: %s: %s", curl_easy_strerror (rc),
                  c->errbuf);
    return -1;
  }
  return 0;
}

#undef SET

/* A new handle, set up for the URL; the pool decides when.  Each
 * request sets its own callbacks (exchange.c, callbacks.c).
 */
struct conn *
conn_new (void)
{
  struct conn *c = calloc (1, sizeof *c);

  if (c == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  c->sock = CURL_SOCKET_BAD;
  c->easy = curl_easy_init ();
  if (c->easy == NULL) {
    nbdkit_error ("curl_easy_init: failed");
    free (c);
    return NULL;
  }
  if (setup_handle (c) == -1) {
    conn_free (c);
    return NULL;
  }
  return c;
}

void
conn_free (struct conn *c)
{
  curl_easy_cleanup (c->easy);
  free (c);
}
