/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * HTTP/2: every request as a stream on one connection.  transport.c runs
 * this transport where the server speaks HTTP/2 (mux_choose, after the
 * probe's first answer).
 *
 * libcurl multiplexes only the transfers of one multi handle: easy handles
 * performed each in its own thread never share a connection.  So each
 * request's easy handle is handed to one multi handle, which a thread
 * drives (streams.c).  The nbdkit thread that asked waits for its end
 * (mux_perform, reached as transport_perform).  The handle keeps its
 * callbacks (request/callbacks.c), so each answer is judged as it arrives
 * exactly as over HTTP/1.1, only in this file's thread.  The verdict, the
 * retries and the copy to the client stay in the thread that asked.
 *
 * CURLOPT_PIPEWAIT makes a request wait for the connection being made,
 * instead of opening another.  So all requests go on one connection per
 * origin, up to the server's limit of concurrent streams (nginx: 128).
 * Beyond it libcurl opens another, up to connections= per origin.  libcurl
 * 7.88 offers a 32 MiB window per stream and on the connection.  That is
 * more than a 1 Gbit/s link holds over 100 ms, so one connection fills such
 * a link.
 *
 * The probe runs in .get_ready, before nbdkit forks, where no thread may
 * start: there mux_perform drives the multi handle itself.  The probe's
 * connection stays in the multi handle's cache, and the thread goes on with
 * it once nbdkit runs (mux_start).  So do the head start's requests
 * (request/headstart.c), begun beside the probe's (mux_when_sent,
 * mux_begin) and still running across the fork.  Their owners wait for them
 * once they have threads (mux_wait).  If nbdkit stops before that, they
 * drive the multi handle themselves until the requests end.
 */

#include <config.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <nbdkit-plugin.h>

#include "transport/inside.h"

/* Whether url= (or url-script's first URL, not known yet) is https. */
static bool
over_tls (void)
{
  CURLUcode rc;
  char *scheme;
  bool tls;

  if (cfg.url == NULL)
    return true;
  scheme = config_url_scheme (cfg.url, &rc);
  tls = scheme != NULL && strcasecmp (scheme, "https") == 0;
  curl_free (scheme);
  return tls;
}

/* Whether the probe should try HTTP/2 on the multi handle: over TLS
 * where HTTP/2 is offered by ALPN (http-version=auto, 2.0, 2TLS), and
 * wherever 2-prior-knowledge says so.  A server that answers in
 * HTTP/1.1 costs nothing but the probe's connection (mux_choose).
 */
static bool
mux_wanted (void)
{
  if (cfg.is_file ||
      !(curl_version_info (CURLVERSION_NOW)->features & CURL_VERSION_HTTP2))
    return false;
  switch (cfg.http_version) {
  case HTTP_VERSION_AUTO:
  case CURL_HTTP_VERSION_2_0:
  case CURL_HTTP_VERSION_2TLS:
    return over_tls ();
  case CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE:
    return true;
  default:
    return false;
  }
}

/* Before the probe: a multi handle if HTTP/2 is to be tried. */
int
mux_init (void)
{
  if (!mux_wanted ())
    return 0;
  mux.multi = curl_multi_init ();
  if (mux.multi == NULL) {
    nbdkit_error ("curl_multi_init: failed");
    return -1;
  }
  pthread_condattr_init (&mux.cond_attr);
  pthread_condattr_setclock (&mux.cond_attr, CLOCK_MONOTONIC);
  mux.cond_attr_made = true;
  curl_multi_setopt (mux.multi, CURLMOPT_PIPELINING, (long) CURLPIPE_MULTIPLEX);
  curl_multi_setopt (mux.multi, CURLMOPT_MAX_HOST_CONNECTIONS,
                     (long) cfg.connections);
  /* Idle connections kept: libcurl's default follows the transfers
   * running and, as they end, could close the HTTP/2 connection itself.
   */
  curl_multi_setopt (mux.multi, CURLMOPT_MAXCONNECTS,
                     (long) cfg.connections * 2);
  /* More than the pool's MUX_STREAMS, so that they all fit on one
   * connection where the server allows (nginx: 128).
   */
  curl_multi_setopt (mux.multi, CURLMOPT_MAX_CONCURRENT_STREAMS,
                     (long) MUX_STREAMS * 2);
  mux.on = true;
  return 0;
}

bool
mux_on (void)
{
  return __atomic_load_n (&mux.on, __ATOMIC_RELAXED);
}

/* The version each request asks for: HTTP/2, or the user's. */
static long
mux_http_version (void)
{
  return cfg.http_version == HTTP_VERSION_AUTO
    ? CURL_HTTP_VERSION_2TLS : cfg.http_version;
}

static void
mux_drop (const char *why)
{
  unsigned i;

  nbdkit_debug ("%s: not multiplexed: %s", cfg.shown_url, why);
  mux.on = false;
  /* Requests added early (the head start: mux_begin) end here, unless
   * they did already; their owners find them done.
   */
  for (i = 0; i < MUX_EARLY; i++) {
    struct transport_req *r = mux.early[i];

    if (r != NULL && !r->done) {
      curl_multi_remove_handle (mux.multi, r->easy);
      curl_easy_setopt (r->easy, CURLOPT_PRIVATE, NULL);
      mux.added--;
      streams_finish (r, CURLE_ABORTED_BY_CALLBACK);
    }
  }
  curl_multi_cleanup (mux.multi);       /* closes the probe's connection */
  mux.multi = NULL;
}

/* After the probe's first answer on handle e (only in .get_ready): keep
 * the multi handle if the server answered in HTTP/2 (TRANSPORT_SHARED), else go
 * back to HTTP/1.1 and the pool's own connections (TRANSPORT_DROPPED; the
 * spares opened beside the probe, its connection having taken HTTP/1.1
 * by ALPN: connection.c).
 *
 * With http-version=auto a server nearer than SLOW_NS that answered in
 * HTTP/2 is served over HTTP/1.1 too: on loopback libcurl 7.88's HTTP/2
 * path, all on one thread, made a third to half the random reads of
 * HTTP/1.1's connections and batches (see "HTTP version" in the
 * manual).  But a server may speak only HTTP/2: TRANSPORT_ASK_HTTP1 asks the
 * caller to try one HTTP/1.1 request and say how it went
 * (mux_near).
 */
enum transport_choice
mux_choose (CURL *e, int64_t rtt)
{
  long version = 0;

  if (!mux_on ())
    return TRANSPORT_ONE;
  curl_easy_getinfo (e, CURLINFO_HTTP_VERSION, &version);
  if (version != CURL_HTTP_VERSION_2_0) {
    mux_drop ("the server answered in HTTP/1");
    return TRANSPORT_DROPPED;
  }
  if (cfg.http_version == HTTP_VERSION_AUTO && rtt < SLOW_NS) {
    mux.on = false;             /* for the caller's HTTP/1.1 request */
    return TRANSPORT_ASK_HTTP1;
  }
  nbdkit_debug ("%s: HTTP/2: requests as streams on one connection",
                cfg.shown_url);
  return TRANSPORT_SHARED;
}

/* After TRANSPORT_ASK_HTTP1: HTTP/1.1 if the server answered it (http1),
 * else HTTP/2 kept, for the reason given.
 */
void
mux_near (bool http1, const char *why)
{
  if (http1) {
    mux_drop ("the server is near: HTTP/1.1 on several connections is "
              "faster");
    return;
  }
  nbdkit_debug ("%s: HTTP/2: %s: requests as streams on one connection",
                cfg.shown_url, why);
  mux.on = true;
}

/* Once nbdkit runs (.after_fork): the thread, if HTTP/2 was chosen. */
int
mux_start (void)
{
  int err;

  if (!mux_on ())
    return 0;
  err = pthread_create (&mux.thread, NULL, streams_drive, NULL);
  if (err != 0) {
    nbdkit_error ("pthread_create: %s", strerror (err));
    return -1;
  }
  mux.running = true;
  return 0;
}

static CURLcode
perform_here (CURL *e)
{
  struct transport_req r = { .easy = e };

  pthread_cond_init (&r.cond, NULL);
  r.rc = streams_add (&r);
  if (r.rc == CURLE_OK)
    streams_drive_here (&r, e);
  pthread_cond_destroy (&r.cond);
  return r.rc;
}

/* Run the request set up on e as a stream on the multi handle: as
 * curl_easy_perform, in the thread that calls it.
 */
static CURLcode
mux_perform (CURL *e, bool *client_gone)
{
  struct transport_req r = { .easy = e };

  if (!mux.running)
    return perform_here (e);
  pthread_cond_init (&r.cond, &mux.cond_attr);
  pthread_mutex_lock (&mux.lock);
  if (mux.tail != NULL)
    mux.tail->next = &r;
  else
    mux.head = &r;
  mux.tail = &r;
  pthread_mutex_unlock (&mux.lock);
  curl_multi_wakeup (mux.multi);
  streams_wait (&r, client_gone);
  pthread_cond_destroy (&r.cond);
  return r.rc;
}

/* Before the thread runs: fn is called from each request performed
 * here (each hop of the probe's), as soon as it has been sent and while
 * its answer is on its way (the head start rides in its flight:
 * probe.c); NULL cancels.  fn may call mux_begin.
 */
void
mux_when_sent (void (*fn) (void))
{
  mux.when_sent = fn;
}

/* Before the thread runs: add r (its easy handle set up) and return at
 * once; mux_wait waits for it, in the thread of whoever does.  CURLE_OK,
 * or why it was not added.
 */
static CURLcode
mux_begin (struct transport_req *r)
{
  unsigned i;

  r->done = false;
  r->next = NULL;
  if (mux.running || !mux_on ())
    return CURLE_FAILED_INIT;
  for (i = 0; i < MUX_EARLY && mux.early[i] != NULL; i++)
    ;
  if (i == MUX_EARLY)
    return CURLE_FAILED_INIT;
  pthread_cond_init (&r->cond, &mux.cond_attr);
  r->rc = streams_add (r);
  if (r->rc != CURLE_OK) {
    pthread_cond_destroy (&r->cond);
    return r->rc;
  }
  mux.early[i] = r;
  return CURLE_OK;
}

/* Wait for the end of r, added by mux_begin: its result.  Where the
 * thread does not run yet (or no more: nbdkit stopped before it
 * started), the multi handle is driven here.
 */
static CURLcode
mux_wait (struct transport_req *r, bool *client_gone)
{
  unsigned i;

  if (mux.running)
    streams_wait (r, client_gone);
  else if (!r->done)
    streams_drive_here (r, NULL);
  pthread_mutex_lock (&mux.lock);
  for (i = 0; i < MUX_EARLY; i++)
    if (mux.early[i] == r)
      mux.early[i] = NULL;
  pthread_mutex_unlock (&mux.lock);
  pthread_cond_destroy (&r->cond);
  return r->rc;
}

/* At unload, when no request runs: the thread ends, and the
 * connections close.
 */
void
mux_unload (void)
{
  if (mux.running) {
    pthread_mutex_lock (&mux.lock);
    mux.stop = true;
    pthread_mutex_unlock (&mux.lock);
    curl_multi_wakeup (mux.multi);
    pthread_join (mux.thread, NULL);
    mux.running = false;
  }
  if (mux.multi != NULL)
    curl_multi_cleanup (mux.multi);
  mux.multi = NULL;
  mux.on = false;
  if (mux.cond_attr_made)
    pthread_condattr_destroy (&mux.cond_attr);
  mux.cond_attr_made = false;
}

static unsigned
mux_slots (void)
{
  return MUX_STREAMS;
}

static CURLcode
mux_perform_on (struct conn *c, bool *client_gone)
{
  return mux_perform (c->easy, client_gone);
}

const struct transport mux_transport = {
  .name = "HTTP/2",
  .shared = true,
  .slots = mux_slots,
  .http_version = mux_http_version,
  .perform = mux_perform_on,
  .begin = mux_begin,
  .wait = mux_wait,
};
