/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * HTTP/2's streams in flight on the multi handle: adding them, driving
 * them in a thread or in the caller, and waking each one's waiter at
 * its end.  mux.c decides when HTTP/2 is used and hands requests here.
 */

#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <time.h>

#include <nbdkit-plugin.h>

#include "transport/inside.h"

struct mux_state mux = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* How often a waiting thread asks whether its client went. */
#define CLIENT_CHECK_NS (250 * 1000000)

/* The end of request r: its waiter may go on. */
void
streams_finish (struct transport_req *r, CURLcode rc)
{
  pthread_mutex_lock (&mux.lock);
  r->rc = rc;
  r->done = true;
  pthread_cond_signal (&r->cond);
  pthread_mutex_unlock (&mux.lock);
}

/* Requests that ended: removed, their waiters woken; how many. */
static unsigned
reap (void)
{
  int left;
  unsigned n = 0;

  for (;;) {
    CURLMsg *m = curl_multi_info_read (mux.multi, &left);
    CURL *e;
    CURLcode rc;
    struct transport_req *r = NULL;

    if (m == NULL)
      break;
    if (m->msg != CURLMSG_DONE)
      continue;
    e = m->easy_handle;
    rc = m->data.result;
    curl_easy_getinfo (e, CURLINFO_PRIVATE, (char **) &r);
    curl_multi_remove_handle (mux.multi, e);
    curl_easy_setopt (e, CURLOPT_PRIVATE, NULL);
    mux.added--;
    streams_finish (r, rc);
    n++;
  }
  return n;
}

CURLcode
streams_add (struct transport_req *r)
{
  CURLMcode mc;

  curl_easy_setopt (r->easy, CURLOPT_PIPEWAIT, 1L);
  curl_easy_setopt (r->easy, CURLOPT_PRIVATE, (char *) r);
  mc = curl_multi_add_handle (mux.multi, r->easy);
  if (mc == CURLM_OK) {
    mux.added++;
    return CURLE_OK;
  }
  nbdkit_debug ("curl_multi_add_handle: %s", curl_multi_strerror (mc));
  return mc == CURLM_OUT_OF_MEMORY ? CURLE_OUT_OF_MEMORY : CURLE_FAILED_INIT;
}

/* libcurl's multi handle failed (out of memory; a poll that cannot
 * work): said once, and a pause before the next round rather than a
 * loop that spins.  Each transfer still ends by its own time limits.
 */
static void
back_off_error (CURLMcode mc)
{
  static bool said;
  struct timespec pause = { .tv_nsec = 10 * 1000000 };

  if (!said)
    nbdkit_debug ("%s: HTTP/2: libcurl's multi handle failed: %s",
                  cfg.shown_url, curl_multi_strerror (mc));
  said = true;
  nanosleep (&pause, NULL);
}

/* The thread: add what was handed over, run the transfers, wake the
 * waiters of those that ended; until mux_unload stops it and none is
 * left.
 */
void *
streams_drive (void *arg)
{
  int still;

  (void) arg;
  object_plugin_thread ();
  for (;;) {
    struct transport_req *list, *r, *next;
    bool stop;
    CURLcode rc;
    CURLMcode mc;

    pthread_mutex_lock (&mux.lock);
    list = mux.head;
    mux.head = mux.tail = NULL;
    stop = mux.stop;
    pthread_mutex_unlock (&mux.lock);
    for (r = list; r != NULL; r = next) {
      next = r->next;           /* r may be gone once finished */
      rc = streams_add (r);
      if (rc != CURLE_OK)
        streams_finish (r, rc);
    }
    if (stop && mux.added == 0)
      break;
    mc = curl_multi_perform (mux.multi, &still);
    reap ();
    if (mc == CURLM_OK)
      mc = curl_multi_poll (mux.multi, NULL, 0, 1000, NULL);
    if (mc != CURLM_OK)
      back_off_error (mc);
  }
  return NULL;
}

/* Whether the request on e has been sent, or is being sent. */
static bool
request_sent (CURL *e)
{
  curl_off_t t = 0;

  return curl_easy_getinfo (e, CURLINFO_PRETRANSFER_TIME_T, &t) == CURLE_OK &&
    t > 0;
}

/* Before the thread runs (the probe, in .get_ready): drive the multi
 * handle here until r is done; when the request on e has gone out,
 * call mux_when_sent's function, once for this request (a redirect's
 * next hop is another).
 */
void
streams_drive_here (struct transport_req *r, CURL *e)
{
  bool told = false;
  int still;

  while (!r->done) {
    curl_multi_perform (mux.multi, &still);
    if (!told && mux.when_sent != NULL && e != NULL && request_sent (e)) {
      told = true;
      mux.when_sent ();
      continue;                 /* what it added goes out at once */
    }
    if (reap () == 0)
      curl_multi_poll (mux.multi, NULL, 0, 1000, NULL);
  }
}

/* Wait for r's end.  Whether the client of the request went away only
 * the thread that serves it can tell (nbdkit_nanosleep: object_stopping),
 * not the one that runs the transfer, so the waiter looks every
 * CLIENT_CHECK_NS and sets *client_gone, which the transfer's progress
 * callback acts on (callbacks.c), and wakes the thread to run it.
 */
void
streams_wait (struct transport_req *r, bool *client_gone)
{
  int64_t until = clock_ns ();
  struct timespec at;
  bool gone;

  pthread_mutex_lock (&mux.lock);
  while (!r->done) {
    until += CLIENT_CHECK_NS;
    at = clock_at (until);
    if (pthread_cond_timedwait (&r->cond, &mux.lock, &at) != ETIMEDOUT ||
        r->done)
      continue;
    pthread_mutex_unlock (&mux.lock);
    gone = object_stopping ();
    if (gone) {
      __atomic_store_n (client_gone, true, __ATOMIC_RELAXED);
      curl_multi_wakeup (mux.multi);
    }
    pthread_mutex_lock (&mux.lock);
  }
  pthread_mutex_unlock (&mux.lock);
}
