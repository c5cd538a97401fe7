/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The target that url='s redirect chain was found to end at, and when
 * it is renewed.  Reads go straight to it, on connections to its
 * origin.  Asking url= again for every read would cost a round trip
 * each: three quarters of an import's time for some importers.
 *
 * One request at a time resolves the target again (target_claim).  It
 * does so when the target refuses (401, 403, 404, 410), when its
 * connection fails, and before an expiry its URL carries (presigned
 * URLs).  Before an expiry, the other reads go on with the old target
 * meanwhile.  A renewal that failed waits a back-off.  Targets that keep
 * failing soon after they were found are no longer remembered at all.
 *
 * route.c asks here.  The time comes in as an argument and nothing here
 * does I/O, so tests/unit/test-redirect.c tries it without a server.
 */

#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "request/target.h"

/* After SHORT_MAX targets in a row that stopped serving within
 * SHORT_READS reads none is remembered: with links good for a few uses
 * (single-use tokens) it is a detour that fails, url= each time is not.
 */
#define SHORT_READS 16
#define SHORT_MAX 3

/* The remembered target, shared by all requests. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t resolved = PTHREAD_COND_INITIALIZER;
static struct target current;    /* url NULL: none (ask url=) */
static bool resolving;           /* a request is finding a new one */
static unsigned served;          /* reads the current target served */
static unsigned short_lived;     /* short-lived targets in a row */
static bool given_up;            /* none is remembered any more */
static int64_t retry_at;         /* no renewal till then */
static unsigned backoff;         /* seconds: the last wait, 0 if none */
static char *last;               /* the last end reads came from, or NULL */
static unsigned renew_secs;      /* the longest a renewal may take */
/* Renewals ended so far, and whether the last one failed, and why: the
 * requests that waited for it fail with it.
 */
static unsigned renewals;
static bool renewal_failed;
static char renewal_why[200];

/* A renewal may take up to secs seconds (timeout=): it starts early
 * enough before an expiry to end while the old target still serves.
 */
void
target_renew_time (unsigned secs)
{
  LOCK_FOR_SCOPE (&lock);

  renew_secs = secs;
}

/* The target serves: not failed, not expired. */
static bool
valid_locked (int64_t now)
{
  return current.url != NULL && !current.stale &&
    (current.expires < 0 || now < current.expires);
}

/* It failed, or nears its expiry (presigned_renew_margin). */
static bool
due_locked (int64_t now)
{
  return current.url != NULL &&
    (current.stale ||
     (current.expires >= 0 &&
      now >= current.expires -
      presigned_renew_margin (current.expires - current.found,
                              renew_secs)));
}

/* A copy of the target into *t (t->url NULL: url=). */
static void
copy_locked (struct target *t)
{
  *t = current;
  t->url = current.url ? strdup (current.url) : NULL;
  if (current.url != NULL && t->url == NULL)
    t->stale = true;            /* out of memory: ask url= */
}

/* The target to send a request to: a copy into *t (t->url to free; NULL
 * means url=), its generation in t->gen (CLAIM_USE).  When it is due
 * for renewal, the first caller to see it is told to resolve it
 * (CLAIM_RESOLVE: ask url= and call target_set or _release; *t
 * is the old target, for a renewal before expiry that fails to fall
 * back to), unless a renewal that failed backs off.  Meanwhile the
 * others use the old target if it still serves, else wait for the
 * renewal, and share its outcome: when it fails, they fail too
 * (CLAIM_FAILED, its error in why), and so does a request that comes
 * while the target cannot serve and the back-off runs.  So a redirector
 * that hangs or fails holds up each read for one renewal at most, not
 * one per read waiting before it.  now is seconds since the epoch.
 */
enum claim
target_claim (struct target *t, int64_t now, char *why,
              size_t size)
{
  unsigned seen = 0;
  bool waited = false;
  LOCK_FOR_SCOPE (&lock);

  t->url = NULL;
  for (;;) {
    bool due = due_locked (now), valid = valid_locked (now);
    /* After a failure: not before the back-off ends, nor, while the
     * target serves, too late to end before it expires.
     */
    bool may = !renewal_failed ||
      (now >= retry_at && (!valid || current.expires < 0 ||
                           current.expires - now >= 2 * renew_secs + 1));

    if (waited && renewals != seen && renewal_failed)
      break;
    if (due && !resolving && may) {
      resolving = true;
      copy_locked (t);
      return CLAIM_RESOLVE;
    }
    if (!due || valid) {
      copy_locked (t);
      return CLAIM_USE;
    }
    if (!resolving)
      break;                    /* backing off */
    seen = renewals;
    waited = true;
    pthread_cond_wait (&resolved, &lock);
  }
  snprintf (why, size, "%s", renewal_why);
  return CLAIM_FAILED;
}

/* url is the end of the chain reads are served from (out of memory:
 * the older one still is one they came from).
 */
static void
set_last_locked (const char *url)
{
  char *copy = strdup (url);

  if (copy != NULL) {
    free (last);
    last = copy;
  }
}

/* The chain from a URL at origin home (url-script's run given, 0
 * without) ends at url (a copy is kept), trusted or not; found is now.
 * Ends a claim.  False if it is not remembered: none is any more.
 */
bool
target_set (const char *url, bool trusted,
            const struct origin *home, int64_t now, unsigned given)
{
  char *copy = url ? strdup (url) : NULL;
  LOCK_FOR_SCOPE (&lock);

  resolving = false;
  retry_at = backoff = 0;
  renewals++;
  renewal_failed = false;
  pthread_cond_broadcast (&resolved);
  if (url != NULL)
    set_last_locked (url);
  if (given_up) {
    free (copy);
    return false;
  }
  free (current.url);
  current.url = copy;
  current.trusted = trusted;
  current.home = *home;
  current.stale = false;
  current.found = now;
  current.given = given;
  current.expires = copy ? presigned_expiry (copy) : -1;
  /* Already past when found: the signer's clock and ours differ (the
   * URL still works, or it would not have been reached).  Renewing at
   * every read would make all reads wait for each other: its failure
   * (403) renews it instead.
   */
  if (current.expires >= 0 && current.expires <= now + 1)
    current.expires = -1;
  if (copy != NULL && redirect_origin (copy, &current.origin) == -1) {
    free (copy);
    current.url = NULL;
  }
  current.gen++;
  served = 0;
  return current.url != NULL;
}

/* The target of generation gen redirected further, to url (trusted or
 * not): reads go there from now on.  Not a claim: a request resolving
 * meanwhile goes on, and a later generation is left alone.
 */
void
target_moved (unsigned gen, const char *url, bool trusted,
              int64_t now)
{
  char *copy = strdup (url);
  struct origin o;
  LOCK_FOR_SCOPE (&lock);

  if (copy == NULL || current.url == NULL || current.gen != gen ||
      redirect_origin (copy, &o) == -1) {
    free (copy);
    return;
  }
  set_last_locked (copy);
  free (current.url);
  current.url = copy;
  current.trusted = trusted;
  current.origin = o;
  current.found = now;
  current.expires = presigned_expiry (copy);
  if (current.expires >= 0 && current.expires <= now + 1)
    current.expires = -1;
  current.gen++;
  served = 0;
}

/* A claim ended without a new target (the request failed, for why):
 * the old one stays, not stale, so that the next request does not ask
 * again at once; it is renewed when it fails again, or, near or past
 * its expiry, after a back-off (1 s, then twice as long each time, at
 * most BACKOFF_MAX; whole seconds, so the first wait is 1-2 s).  The
 * requests that waited for it fail with why, and so do those that find
 * the target unable to serve during the back-off.
 */
void
target_release (int64_t now, const char *why)
{
  LOCK_FOR_SCOPE (&lock);

  current.stale = false;
  resolving = false;
  backoff = redirect_backoff_next (backoff);
  retry_at = now + 1 + backoff;
  renewals++;
  renewal_failed = true;
  snprintf (renewal_why, sizeof renewal_why, "%s", why);
  pthread_cond_broadcast (&resolved);
}

/* The target of generation gen failed (refused, or its connection did):
 * the next request resolves it again.  A later generation is left alone.
 * True when this made it the SHORT_MAX-th short-lived target in a row:
 * none is remembered from now on (reads follow url= each time).
 */
bool
target_failed (unsigned gen)
{
  LOCK_FOR_SCOPE (&lock);

  if (current.url == NULL || current.gen != gen || current.stale)
    return false;
  current.stale = true;
  short_lived = served < SHORT_READS ? short_lived + 1 : 0;
  if (short_lived < SHORT_MAX)
    return false;
  given_up = true;
  free (current.url);
  current.url = NULL;
  current.gen++;
  pthread_cond_broadcast (&resolved);
  return true;
}

/* A read at the target of generation gen was served. */
void
target_served (unsigned gen)
{
  LOCK_FOR_SCOPE (&lock);

  if (current.gen == gen && served < SHORT_READS)
    served++;
}

/* url-script's current run is given: a target that came from the URL
 * of another run (one that printed another URL) is dropped, and reads
 * follow the new URL.  True if it was.
 */
bool
target_given (unsigned given)
{
  LOCK_FOR_SCOPE (&lock);

  if (current.url == NULL || current.given == given)
    return false;
  free (current.url);
  current.url = NULL;
  current.stale = false;
  current.gen++;
  free (last);                  /* the script names the object now */
  last = NULL;
  pthread_cond_broadcast (&resolved);
  return true;
}

/* The end of the chain that reads last came from (to free), or NULL. */
char *
target_last (void)
{
  LOCK_FOR_SCOPE (&lock);

  return last ? strdup (last) : NULL;
}

void
target_unload (void)
{
  LOCK_FOR_SCOPE (&lock);

  free (current.url);
  memset (&current, 0, sizeof current);
  free (last);
  last = NULL;
  resolving = given_up = renewal_failed = false;
  served = short_lived = renewals = renew_secs = 0;
  retry_at = backoff = 0;
}
