/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The connections: each is an easy handle, which over HTTP/1.1 keeps a
 * keep-alive connection of its own.  The pool (read/pool.c) says when one
 * is made or freed; the mirrors' threads make their own.  Each handle gets
 * the options that every request on it shares: the user's, from
 * config_apply.  Its socket is recorded, for request/callbacks.c's quick
 * ACKs, and -D curl.verbose prints libcurl's trace.  DNS answers, TLS
 * sessions and cookies are shared between the handles through a share
 * handle.  What a request sets is request/exchange.c's.  The spare
 * connections a handle may adopt are spares.c's.  This file is also the
 * HTTP/1.1 transport (connection_transport): a request runs with
 * curl_easy_perform, in the caller's thread.
 */

#include <config.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#if HAVE_OPENSSL
#include <openssl/ssl.h>
#endif

#include <nbdkit-plugin.h>

#include "transport/inside.h"
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

#if HAVE_OPENSSL
/* Where each SSL_CTX keeps its handle (libcurl 7.88 makes one for each
 * connection): see tls_info_cb.
 */
static int ctx_conn_index = -1;
#endif

/* DNS answers, TLS sessions and cookies are shared between the
 * handles.
 */
int
connection_init (void)
{
  unsigned i;

#if HAVE_OPENSSL
  ctx_conn_index = SSL_CTX_get_ex_new_index (0, NULL, NULL, NULL, NULL);
#endif
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

void
connection_unload (void)
{
  unsigned i;

  spares_unload ();
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

/* Set at unload (connection_stop): no new socket is made. */
static bool stopping;

/* Whether c's connection took HTTP/2 by ALPN, known as soon as it is
 * up (libcurl tells the version only with the answer).  False where
 * libcurl's TLS is not OpenSSL's.
 */
static bool
conn_took_http2 (struct conn *c)
{
#if HAVE_OPENSSL
  struct curl_tlssessioninfo *tls = NULL;
  const unsigned char *proto = NULL;
  unsigned len = 0;

  if (curl_easy_getinfo (c->easy, CURLINFO_TLS_SSL_PTR, &tls) != CURLE_OK ||
      tls == NULL || tls->backend != CURLSSLBACKEND_OPENSSL ||
      tls->internals == NULL)
    return false;
  SSL_get0_alpn_selected (tls->internals, &proto, &len);
  return len == 2 && memcmp (proto, "h2", 2) == 0;
#else
  (void) c;
  return false;
#endif
}

/* How long c's connection took to set up, from the name's lookup to
 * the end of TLS (two round trips with TLS 1.3: TCP's and TLS's, and
 * both sides' CPU); 0 for one reused.
 */
int64_t
connection_handshake_ns (struct conn *c)
{
  curl_off_t dns = 0, tls = 0;

  curl_easy_getinfo (c->easy, CURLINFO_NAMELOOKUP_TIME_T, &dns);
  curl_easy_getinfo (c->easy, CURLINFO_APPCONNECT_TIME_T, &tls);
  return tls > dns ? (int64_t) (tls - dns) * 1000 : 0;
}

#if HAVE_OPENSSL
/* TLS's first round trip on c's newest connection: from its ClientHello
 * sent to the server's answer read, without the client's CPU for the
 * rest of the handshake (checking the certificate), which on a loaded
 * machine or under a sanitizer took 20 to 80 ms on loopback.  A server
 * that takes longer (after TCP's round trip, which an emulated link
 * may add here too) is far.
 */
static void
tls_info_cb (const SSL *s, int where, int ret)
{
  struct conn *c = SSL_CTX_get_ex_data (SSL_get_SSL_CTX (s), ctx_conn_index);

  if (c == NULL || !(where & SSL_CB_CONNECT_LOOP))
    return;
  switch (SSL_get_state (s)) {
  case TLS_ST_BEFORE:           /* a new handshake */
    c->hello_ns = c->tls_rtt_ns = 0;
    break;
  case TLS_ST_CW_CLNT_HELLO:    /* also at each wait for the answer */
    if (c->hello_ns == 0)
      c->hello_ns = clock_ns ();
    break;
  case TLS_ST_CR_SRVR_HELLO:
    if (c->hello_ns > 0 && c->tls_rtt_ns == 0)
      c->tls_rtt_ns = clock_ns () - c->hello_ns;
    break;
  default:
    break;
  }
}

static CURLcode
ssl_ctx_cb (CURL *e, void *ctx, void *opaque)
{
  SSL_CTX_set_ex_data (ctx, ctx_conn_index, opaque);
  SSL_CTX_set_info_callback (ctx, tls_info_cb);
  return CURLE_OK;
}
#endif

/* The connection is up (and reused for each later request on it):
 * while the probe runs, the spares open to where it went, unless it
 * took HTTP/2, whose one connection carries every request (mux.c).
 */
static int
prereq_cb (void *opaque, char *primary_ip, char *local_ip,
           int primary_port, int local_port)
{
  struct conn *c = opaque;

  /* Read here, while libcurl holds the connection for this transfer:
   * between calls to curl_multi_perform libcurl may give no TLS session
   * (seen under valgrind).
   */
  c->alpn_h2 = conn_took_http2 (c);
  if (!c->alpn_h2)
    spares_open_to (primary_ip, primary_port);   /* none once stopping */
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
  if (purpose == CURLSOCKTYPE_IPCXN && a->socktype == SOCK_STREAM)
    fd = spares_take (a);
  if (fd != CURL_SOCKET_BAD) {
    c->adopted = true;
    return fd;
  }
  return socket (a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

/* A connection whose peer stops acknowledging what was sent (a path
 * that drops everything: a NAT or firewall that lost its state, a
 * failover without a reset) is closed after timeout= seconds, not after
 * TCP's 15 minutes of retransmissions.  Over HTTP/1.1 a request that
 * timed out closes its connection anyway; over HTTP/2 libcurl 7.88
 * resets only the stream and keeps the connection, to which every
 * retry and every other request would go back.
 */
static void
limit_unacknowledged (curl_socket_t sock)
{
#ifdef TCP_USER_TIMEOUT
  unsigned ms = cfg.timeout * 1000;

  setsockopt (sock, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof ms);
#else
  (void) sock;
#endif
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

  if (purpose == CURLSOCKTYPE_IPCXN)
    limit_unacknowledged (sock);

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
connection_took_spare (struct conn *c)
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
connection_stop (void)
{
  __atomic_store_n (&stopping, true, __ATOMIC_RELAXED);
  spares_stop ();
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
  SET (CURLOPT_PREREQDATA, c);
#if HAVE_OPENSSL
  /* Not an error where libcurl's TLS is another's: no TLS timing. */
  curl_easy_setopt (e, CURLOPT_SSL_CTX_FUNCTION, ssl_ctx_cb);
  curl_easy_setopt (e, CURLOPT_SSL_CTX_DATA, c);
#endif
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
connection_new (void)
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
    connection_free (c);
    return NULL;
  }
  return c;
}

void
connection_free (struct conn *c)
{
  curl_easy_cleanup (c->easy);
  free (c);
}

/* HTTP/1.1: each handle runs its request on its own connection, and
 * with mirrors each source may have connections= of them (sources.c
 * holds each to that).
 */
static unsigned
connection_slots (void)
{
  return cfg.connections * sources_up ();
}

static long
connection_http_version (void)
{
  return cfg.http_version == HTTP_VERSION_AUTO
    ? CURL_HTTP_VERSION_1_1 : cfg.http_version;
}

static CURLcode
connection_perform (struct conn *c, bool *client_gone)
{
  (void) client_gone;           /* progress_cb asks object_stopping */
  return curl_easy_perform (c->easy);
}

const struct transport connection_transport = {
  .name = "HTTP/1.1",
  .shared = false,
  .slots = connection_slots,
  .http_version = connection_http_version,
  .perform = connection_perform,
};
