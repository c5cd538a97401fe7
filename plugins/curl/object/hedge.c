/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The hedge: whether a running request is too slow at its source, so
 * that it is stopped and asked of another.  It reads the scheduler's
 * state (sched.h) and changes nothing of it; so does the report of each
 * source at exit (sources_print), here too.
 */

#include <config.h>

#include <inttypes.h>
#include <stdio.h>

#include <nbdkit-plugin.h>

#include "object/sched.h"

/* How often a request looks whether it is too slow. */
#define CHECK_NS (50 * INT64_C (1000000))

/* k's request at s, sent and with bytes coming: do they come so slowly
 * (s's pace since it was sent, all its requests' bytes) that another
 * source up would send the rest in a quarter of the time?  Catches a
 * source that drips, even before any of its answers was measured.
 */
static bool
dripping_locked (const struct source *s, struct source_clock *k, int64_t now)
{
  uint64_t came = __atomic_load_n (&sched_of (s)->recv, __ATOMIC_RELAXED)
    - k->recv_sent;
  uint64_t rest = k->asked - (k->got < k->asked ? k->got : k->asked);
  double own, fastest, e;
  unsigned i;

  if (k->got == 0 || came == 0 || rest == 0 ||
      now - k->sent_ns < HEDGE_MIN_NS)
    return false;
  k->pace = (double) came / (now - k->sent_ns);
  own = rest / k->pace;
  if (own < HEDGE_MIN_NS)
    return false;
  /* Not as slow as s when nothing else was measured. */
  fastest = sources_fastest_locked (s);
  for (i = 0; i < nsources; i++) {
    if (!sources_usable (&sources[i], s))
      continue;
    e = sources_expected_locked (&sources[i], rest, fastest);
    if (4 * e < own)
      return true;
  }
  return false;
}

/* In the middle of k's request to s (libcurl's progress callback): is
 * it too slow, with another source up to ask instead?  That is, not
 * sent after eight of s's waits for a first byte (its connection is
 * not set up), or past k->late_ns, or no byte for four of those waits
 * since it was sent, or dripping (above); and never before
 * HEDGE_MIN_NS.  A source whose wait was never measured (by its probe
 * or its reads) is held to neither wait.  Looked at every 50 ms.
 */
enum hedge
hedge_due (const struct source *s, struct source_clock *k)
{
  int64_t now = clock_ns ();
  enum hedge h = HEDGE_NONE;

  if (now - k->picked_ns < HEDGE_MIN_NS || now - k->checked_ns < CHECK_NS)
    return HEDGE_NONE;
  k->checked_ns = now;
  LOCK_FOR_SCOPE (&sources_lock);
  if (k->sent_ns == 0 && sched_of (s)->lat_ns > 0 &&
      now - k->picked_ns >= 8 * sched_of (s)->lat_ns)
    h = HEDGE_SETUP;
  else if (k->late_ns != 0 && now >= k->late_ns)
    h = HEDGE_LATE;
  else if (k->sent_ns != 0 && sched_of (s)->lat_ns > 0 &&
           now - k->last_byte_ns >= HEDGE_MIN_NS &&
           now - k->last_byte_ns >= 4 * sched_of (s)->lat_ns)
    h = HEDGE_STALL;
  else if (k->sent_ns != 0 && dripping_locked (s, k, now))
    h = HEDGE_DRIP;
  return h != HEDGE_NONE && sources_other_locked (s, false) ? h : HEDGE_NONE;
}

/* How k's request was too slow (h), for sources_fail's message. */
void
hedge_why (enum hedge h, const struct source_clock *k, char *why,
           size_t size)
{
  int64_t now = clock_ns ();

  switch (h) {
  case HEDGE_NONE:
  case HEDGE_LATE:
    snprintf (why, size, "too slow: much longer than its answers so far");
    break;
  case HEDGE_SETUP:
    snprintf (why, size, "too slow: no connection to send the request on "
              "after %" PRIi64 " ms", (now - k->picked_ns) / 1000000);
    break;
  case HEDGE_STALL:
    snprintf (why, size, "too slow: no byte for %" PRIi64 " ms",
              (now - k->last_byte_ns) / 1000000);
    break;
  case HEDGE_DRIP:
    snprintf (why, size, "too slow: its bytes come at %.1f kB/s, far "
              "slower than another source would send them", k->pace * 1e6);
    break;
  }
}

/* At unload, with -v: what each source served, its speed while it had
 * answers flowing (over the whole run) and its wait for a first byte.
 */
void
sources_print (void)
{
  unsigned i;

  for (i = 0; nsources > 1 && i < nsources; i++) {
    const struct source *s = &sources[i];
    const struct sched *d = sched_of (s);
    char rate[48] = "no answer came", wait[48] = "no first byte measured";

    if (d->busy_total > 0)
      snprintf (rate, sizeof rate, "%.1f MB/s while answering",
                (double) d->recv * 1000 / d->busy_total);
    if (d->lat_ns > 0)
      snprintf (wait, sizeof wait, "first byte in %.1f ms", d->lat_ns / 1e6);
    nbdkit_debug ("source %s: %" PRIu64 " requests, %" PRIu64 " bytes, "
                  "%" PRIu64 " failed (%" PRIu64 " too slow), %s, %s",
                  s->shown, d->requests, d->recv, d->failures, d->hedges,
                  rate, wait);
  }
}
