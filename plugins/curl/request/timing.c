/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * How long requests take.  -D curl.times sums each of libcurl's phases and
 * prints them at unload.  -D curl.requests has exchange.c print one line
 * per request.  The probe's answers measure the round trip to the server
 * (timing_round_trip).  The pool, read-ahead, the mirrors and the choice of
 * transport size their waits and choices by it.  The clock is
 * base/clock.c's.
 */

#include <config.h>

#include <inttypes.h>

#include <nbdkit-plugin.h>

#include "request/xfer.h"

/* -D curl.times=1: at unload, the time all requests spent in each of
 * libcurl's phases (see timing_add).
 * -D curl.requests=1: one debug line per request with its latency.
 */
NBDKIT_DLL_PUBLIC int curl_debug_times = 0;
NBDKIT_DLL_PUBLIC int curl_debug_requests = 0;

/* libcurl's phase times (CURLINFO_*_TIME_T, microseconds from the start
 * of each exchange), summed over all exchanges.  Requests run in many
 * threads at once, hence the lock.
 */
static const struct {
  CURLINFO info;
  const char *name;
} phases[] = {
  { CURLINFO_NAMELOOKUP_TIME_T, "name resolution" },
  { CURLINFO_CONNECT_TIME_T, "connect" },
  { CURLINFO_APPCONNECT_TIME_T, "app connect (TLS)" },
  { CURLINFO_PRETRANSFER_TIME_T, "pre-transfer" },
  { CURLINFO_STARTTRANSFER_TIME_T, "start-transfer" },
  { CURLINFO_TOTAL_TIME_T, "total" },
  { CURLINFO_REDIRECT_TIME_T, "redirect" },
};
#define NR_PHASES (sizeof phases / sizeof phases[0])

static struct {
  pthread_mutex_t lock;
  uint64_t exchanges;
  uint64_t us[NR_PHASES];
} times = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* After each exchange on e. */
void
timing_add (CURL *e)
{
  curl_off_t us[NR_PHASES] = { 0 };
  unsigned i;

  for (i = 0; i < NR_PHASES; i++)
    if (curl_easy_getinfo (e, phases[i].info, &us[i]) != CURLE_OK ||
        us[i] < 0)
      us[i] = 0;
  LOCK_FOR_SCOPE (&times.lock);
  times.exchanges++;
  for (i = 0; i < NR_PHASES; i++)
    times.us[i] += us[i];
}

/* At unload: the sums, as libcurl measures each phase, from the start
 * of the exchange to its end (so connect includes name resolution).
 * Redirects are followed by route.c, one exchange per hop, so
 * libcurl's redirect time stays 0.
 */
void
timing_print (void)
{
  unsigned i;
  LOCK_FOR_SCOPE (&times.lock);

  nbdkit_debug ("times (-D curl.times=1): %" PRIu64 " exchanges, "
                "cumulative from the start of each", times.exchanges);
  for (i = 0; i < NR_PHASES; i++)
    nbdkit_debug ("%-20s %" PRIu64 ".%06" PRIu64 " s", phases[i].name,
                  times.us[i] / 1000000, times.us[i] % 1000000);
}

/* The quickest answer the probe got, in nanoseconds, from its request
 * sent to the answer's first byte: about one round trip to the server
 * (-1 before any).
 */
static int64_t probe_wait_ns = -1;

/* How long the last answer on c took to start arriving once its
 * request was sent (about a round trip), in nanoseconds; 0 if unknown.
 */
int64_t
timing_answer_wait_ns (struct conn *c)
{
  curl_off_t sent, first;

  if (curl_easy_getinfo (c->easy, CURLINFO_PRETRANSFER_TIME_T,
                         &sent) != CURLE_OK ||
      curl_easy_getinfo (c->easy, CURLINFO_STARTTRANSFER_TIME_T,
                         &first) != CURLE_OK ||
      first < sent)
    return 0;
  return (int64_t) (first - sent) * 1000;
}

/* During the probe: the quickest answer so far. */
void
timing_note_probe (struct conn *c)
{
  int64_t wait = timing_answer_wait_ns (c);

  if (wait > 0 && (probe_wait_ns < 0 || wait < probe_wait_ns))
    probe_wait_ns = wait;
}

/* About one round trip to the server, in nanoseconds: the quickest
 * answer the probe got, when it was idle (answers during a copy also
 * wait for the server and this machine's CPU).  0 if unknown.
 */
int64_t
timing_round_trip (void)
{
  return cfg.is_file || probe_wait_ns < 0 ? 0 : probe_wait_ns;
}

/* Whether x's transfer is to end as a timeout (exchange_end): no byte
 * sent or received (moved: both, so far) for timeout= seconds since its
 * request went out or since its last byte.  callbacks.c's progress
 * callback asks, at least once a second.  libcurl's low-speed check
 * (CURLOPT_LOW_SPEED_*, still set) averages the speed over about 5 s:
 * after a burst it saw a stall 5 s late, and a start-up against a server
 * that sent half of each answer took 85 s to give up with timeout=3.
 * Connecting is bounded by CURLOPT_CONNECTTIMEOUT: the clock starts
 * once the request is sent.
 */
bool
timing_stalled (struct xfer *x, curl_off_t moved)
{
  int64_t now = clock_ns ();
  curl_off_t sent = 0;

  if (x->moved_ns == 0) {
    if (curl_easy_getinfo (x->conn->easy, CURLINFO_PRETRANSFER_TIME_T,
                           &sent) != CURLE_OK || sent <= 0)
      return false;
    x->moved = moved;
    x->moved_ns = now;
  }
  if (moved != x->moved) {
    x->moved = moved;
    x->moved_ns = now;
  }
  if (now - x->moved_ns < cfg.timeout * INT64_C (1000000000))
    return false;
  x->stalled = true;
  return true;
}
