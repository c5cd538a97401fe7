/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Redirects: which hop an answer may lead to, and which origin sees the
 * user's secrets.  Also the target that the chain from url= was found to
 * end at, and when that target is renewed.  presigned.c reads the expiry
 * its URL carries, and says which ends are the same target.
 * request/route.c follows the hops and asks here.  Nothing here does I/O or
 * reads the plugin's parameters: the rules come in struct redirect_rules.
 * So tests/unit/test-redirect.c can try it without a server.
 *
 * The target is remembered so that reads go straight to it, on connections
 * to its origin.  Asking url= again for every read would cost a round trip
 * each, three quarters of an import's time for some importers.  The target
 * is resolved again by one request at a time (redirect_target_claim).  That
 * happens when the target refuses (401, 403, 404, 410), when its connection
 * fails, and before an expiry its URL carries (presigned URLs).  Before
 * expiry, the other reads go on with the old target meanwhile.  A renewal
 * that failed waits a back-off.  Targets that keep failing soon after they
 * were found are no longer remembered at all.
 */

#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "rules/rules.h"

/* 0, or -1 if the URL has no scheme, host and port. */
int
redirect_origin (const char *url, struct origin *o)
{
  CURLU *u = curl_url ();
  char *scheme = NULL, *host = NULL, *port = NULL, *zone = NULL;
  int r = -1;

  /* fe80::1%eth0 and fe80::1%eth1 are different hosts. */
  if (u != NULL &&
      curl_url_set (u, CURLUPART_URL, url, 0) == CURLUE_OK &&
      curl_url_get (u, CURLUPART_ZONEID, &zone, 0) != CURLUE_OUT_OF_MEMORY &&
      curl_url_get (u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
      curl_url_get (u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
      curl_url_get (u, CURLUPART_PORT, &port,
                    CURLU_DEFAULT_PORT) == CURLUE_OK &&
      strlen (scheme) < sizeof o->scheme && strlen (host) < sizeof o->host &&
      (zone == NULL || strlen (zone) < sizeof o->zone)) {
    strcpy (o->scheme, scheme);
    strcpy (o->host, host);
    strcpy (o->zone, zone ? zone : "");
    o->port = strtol (port, NULL, 10);
    r = 0;
  }
  curl_free (scheme);
  curl_free (host);
  curl_free (port);
  curl_free (zone);
  curl_url_cleanup (u);
  return r;
}

/* RFC 6454 4: scheme, host and port. */
bool
redirect_same_origin (const struct origin *a, const struct origin *b)
{
  return strcasecmp (a->scheme, b->scheme) == 0 &&
    strcasecmp (a->host, b->host) == 0 && strcmp (a->zone, b->zone) == 0 &&
    a->port == b->port;
}

/* Whether a hop from https to to is refused (why says so): the disk's
 * bytes and any credentials would travel unencrypted.
 */
static bool
leaves_tls (const struct redirect_rules *r, long status,
            const struct origin *from, const struct origin *to, char *why,
            size_t size)
{
  if (strcasecmp (from->scheme, "https") != 0 ||
      strcasecmp (to->scheme, "https") == 0 || r->insecure)
    return false;
  snprintf (why, size, "HTTP %ld redirect from https to %.15s://%.80s:%ld "
            "refused: the disk's bytes and any credentials would travel "
            "unencrypted (insecure-redirect=true allows it)",
            status, to->scheme, to->host, to->port);
  return true;
}

/* The hop that an answer (status, location) to a request for from_url,
 * at origin *from, asks for, if the rules allow it: its URL (to free),
 * or NULL with why set.  *from becomes the new origin, and *trusted says
 * whether the new location may have the user's credentials, cookie and
 * headers: only url='s own origin (r->home), unless
 * r->location_trusted.
 */
char *
redirect_next (const struct redirect_rules *r, bool is_put, long status,
               const char *from_url, const char *location,
               struct origin *from, bool *trusted, char *why, size_t size)
{
  CURLU *u = curl_url ();
  char *scheme = NULL, *target = NULL, *url = NULL;
  struct origin to;

  /* RFC 9110 15.4: a client may turn a POST into a GET on 301/302, and
   * 303 asks for a GET; a write must never become a read of the object
   * that is then taken for success.  307 and 308 keep the method.
   */
  if (is_put && status != 307 && status != 308) {
    snprintf (why, size, "the server answered the PUT with HTTP %ld, a "
              "redirect that would turn the write into a GET: the write "
              "was not done", status);
    goto out;
  }
  /* Relative to the URL that answered (RFC 9110 10.2.2), as libcurl
   * would, which also refuses control characters.
   */
  if (u == NULL || location[0] == '\0' ||
      curl_url_set (u, CURLUPART_URL, from_url, 0) != CURLUE_OK ||
      curl_url_set (u, CURLUPART_URL, location,
                    CURLU_NON_SUPPORT_SCHEME | CURLU_URLENCODE |
                    CURLU_ALLOW_SPACE) != CURLUE_OK ||
      curl_url_get (u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK) {
    snprintf (why, size, "HTTP %ld redirect without a usable Location",
              status);
    goto out;
  }
  if (strcasecmp (scheme, "file") == 0 || !r->allows_scheme (scheme)) {
    snprintf (why, size, "HTTP %ld redirect to a %.15s: URL, which is not "
              "followed (protocols=%.80s; never file)", status, scheme,
              r->protocols);
    goto out;
  }
  if (curl_url_get (u, CURLUPART_URL, &target, 0) != CURLUE_OK ||
      redirect_origin (target, &to) == -1) {
    snprintf (why, size, "HTTP %ld redirect without a usable Location",
              status);
    goto out;
  }
  if (leaves_tls (r, status, from, &to, why, size))
    goto out;
  url = strdup (target);
  if (url == NULL) {
    snprintf (why, size, "strdup: out of memory");
    goto out;
  }
  *trusted = redirect_same_origin (&to, r->home) || r->location_trusted;
  *from = to;

 out:
  curl_free (scheme);
  curl_free (target);
  curl_url_cleanup (u);
  return url;
}

/* After SHORT_MAX targets in a row that stopped serving within
 * SHORT_READS reads none is remembered: with links good for a few uses
 * (single-use tokens) it is a detour that fails, url= each time is not.
 */
#define SHORT_READS 16
#define SHORT_MAX 3

/* The longest wait after a renewal failed (1 s, then doubling): a
 * redirector down is not asked once per read.
 */
#define BACKOFF_MAX 32

/* The wait after a renewal that failed, after one of last seconds (0:
 * none before): 1 s, then twice as long, at most BACKOFF_MAX.  script.c
 * waits as long after a run of url-script that failed.
 */
unsigned
redirect_backoff_next (unsigned last)
{
  return last == 0 ? 1 : last * 2 > BACKOFF_MAX ? BACKOFF_MAX : last * 2;
}

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
redirect_renew_time (unsigned secs)
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
 * (CLAIM_RESOLVE: ask url= and call redirect_target_set or _release; *t
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
redirect_target_claim (struct target *t, int64_t now, char *why,
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
redirect_target_set (const char *url, bool trusted,
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
redirect_target_moved (unsigned gen, const char *url, bool trusted,
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
redirect_target_release (int64_t now, const char *why)
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
redirect_target_failed (unsigned gen)
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
redirect_target_served (unsigned gen)
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
redirect_target_given (unsigned given)
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
redirect_target_last (void)
{
  LOCK_FOR_SCOPE (&lock);

  return last ? strdup (last) : NULL;
}

void
redirect_unload (void)
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
