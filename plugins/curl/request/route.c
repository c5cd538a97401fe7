/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Where a request goes.  It starts at url=, or url-script's URL, and
 * follows the redirects one exchange per hop.  Each hop is held to
 * rules/redirect.c's rules: which schemes, which statuses, which origin
 * sees the user's secrets.  A read may instead go straight to the target
 * that its chain was found to end at.  That target is found again when it
 * refuses or expires, or when url-script prints another URL.  If the target
 * found again refuses too, the read follows url= itself.  A read whose
 * chain, followed again, ends at another target fails while nothing pins
 * the object.  A mirror's request starts at the mirror's URL, and its
 * redirects are not remembered.
 *
 * libcurl does not follow redirects itself (connection.c turns it off).  It
 * would send cookie= and header= to any host a server names, and follow
 * https to http.  It would also turn a PUT answered with 303 into a GET
 * reported as a write.
 */

#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nbdkit-plugin.h>

#include "request/xfer.h"
#include "secrets.h"

/* The rules every hop is held to (redirect.c); the home origin, whose
 * requests carry the user's secrets, is the URL's that each chain
 * starts from (url=, or url-script's).
 */
static struct redirect_rules rules;

/* url='s origin, found once: without url-script it is every chain's
 * home.
 */
static struct origin url_home;

int
route_init (void)
{
  CLEANUP_FREE char *url = NULL;

  if (!cfg.is_file &&
      (script_url (&url, NULL) == -1 ||
       redirect_origin (url, &url_home) == -1)) {
    nbdkit_error ("url: %s: no scheme, host and port", cfg.shown_url);
    return -1;
  }
  rules = (struct redirect_rules) {
    .protocols = cfg.protocols, .allows_scheme = config_allows_scheme,
    .insecure = cfg.insecure_redirect,
    .location_trusted = cfg.location_trusted,
  };
  /* A renewal is one request's chain: each hop may stall for timeout=. */
  target_renew_time (cfg.timeout);
  return 0;
}

void
route_unload (void)
{
  target_unload ();
}

#define MAX_REDIRECTS 20

/* The redirect that the answer in x asks for, if the rules allow it
 * (redirect_next): its URL (to free), or NULL with x->why set.  libcurl
 * itself withholds only user= and password= from another host, and
 * would send cookie= and header= anywhere.
 */
static char *
follow (const struct redirect_rules *r, struct xfer *x, const char *from_url,
        struct origin *from, bool *trusted)
{
  char *url = redirect_next (r, x->q.method == PUT, x->a.status,
                             from_url, x->a.location, from, trusted,
                             x->why, sizeof x->why);

  if (url != NULL)
    nbdkit_debug ("%s: HTTP %ld: redirected to %s://%s:%ld, %s", x->what,
                  x->a.status, from->scheme, from->host, from->port,
                  *trusted ? "with credentials" : "another origin: "
                  "without the user's credentials, cookie and headers");
  return url;
}

/* The request in x from url (at origin *at, trusted or not), following
 * redirects by the rules r: 0, or -1 with x->v a failure and x->why set
 * (or x->reported).  *end is where the chain ended (to free; NULL if at
 * url itself), *at and *trusted its origin and trust.
 */
static int
chain (const struct redirect_rules *r, struct conn *c, struct xfer *x,
       const char *url, struct origin *at, bool *trusted, char **end)
{
  unsigned hops;
  char *next;

  *end = NULL;
  for (hops = 0;; hops++) {
    if (exchange_one (c, x, *end ? *end : url, *trusted) == -1)
      return -1;
    if (x->v != VERDICT_REDIRECT)
      return 0;
    if (hops == MAX_REDIRECTS) {
      snprintf (x->why, sizeof x->why, "more than %d redirects",
                MAX_REDIRECTS);
      x->v = VERDICT_REFUSED;
      return -1;
    }
    next = follow (r, x, *end ? *end : url, at, trusted);
    free (*end);
    *end = next;
    if (next == NULL) {
      x->v = VERDICT_REFUSED;
      return -1;
    }
  }
}

static int64_t
epoch_now (void)
{
  return (int64_t) time (NULL);
}

/* A target that answers so has moved on or expired (a presigned URL
 * past its time answers 403, a mirror that dropped the file 404): ask
 * url= again.
 */
static bool
target_gone (long status)
{
  return status == 401 || status == 403 || status == 404 || status == 410;
}

/* Which requests go to the remembered target: reads.  HEAD and PUT ask
 * url= each time.
 */
static bool
uses_target (const struct xfer *x)
{
  return x->q.method == GET && cfg.followlocation && cfg.redirect_cache &&
    !cfg.is_file;
}

/* Whether the read in x, whose chain now ends at landed, must fail:
 * the object was read through another end before, and nothing pins it
 * (no strong ETag or Last-Modified that the server checks in a
 * precondition and the answers show), so bytes from landed cannot be
 * shown to be the same object's.  Reported here.  Messages show URLs
 * without their query (a secret), so two ends that differ only there
 * are said to.
 */
static bool
lands_elsewhere (struct xfer *x, const char *landed)
{
  CLEANUP_FREE char *was = target_last ();
  CLEANUP_FREE char *now_at = NULL;
  CLEANUP_FREE char *then_at = NULL;
  struct pin p;
  bool same_path;

  if (was == NULL || presigned_same_target (was, landed) ||
      (object_pin (&p) && p.header[0] != '\0'))
    return false;
  now_at = shown_url (landed);
  then_at = shown_url (was);
  same_path = now_at && then_at && strcmp (now_at, then_at) == 0;
  nbdkit_error ("%s: %s: its redirect chain, followed again, ends at %s, "
                "not at %s, which the reads came from%s: nothing pins the "
                "object (no strong ETag or Last-Modified that the server "
                "checks), so another target cannot be shown to hold the "
                "same one", x->what, cfg.shown_url,
                now_at ? now_at : "(out of memory)",
                then_at ? then_at : "(out of memory)",
                same_path ? " (the same path, but query parameters other "
                "than those that only sign or time a URL differ)" : "");
  snprintf (x->why, sizeof x->why, "its redirect chain ends at another "
            "target, and nothing pins the object");
  x->v = VERDICT_REFUSED;
  x->reported = true;
  return true;
}

/* Whether url-script failed this request (r, what script_url or
 * script_url_serial returned): -1, its run failed and was reported; -2,
 * the run that this request waited for (another's) failed, so this try
 * fails too, and is retried, as a failure of url= itself would be.
 */
static bool
script_failed (struct xfer *x, int r)
{
  if (r == 0)
    return false;
  if (r == -2) {
    snprintf (x->why, sizeof x->why, "url-script's run, which this "
              "request waited for, failed");
    x->v = VERDICT_RETRY;
    return true;
  }
  snprintf (x->why, sizeof x->why, "url-script failed");
  x->v = VERDICT_REFUSED;
  x->reported = true;
  return true;
}

/* The chain from url=.  Its end becomes the remembered target, if keep
 * and the answer at it is not a failure.  claimed: this request was
 * asked to resolve it (target_claim), so it ends the claim
 * either way.  A read's chain that ends at another target than the
 * reads' so far fails while nothing pins the object (lands_elsewhere).
 */
static int
resolve (struct conn *c, struct xfer *x, bool claimed, bool keep)
{
  struct redirect_rules rr = rules;
  struct origin home, at;
  bool trusted, again = true;
  CLEANUP_FREE char *given = NULL;
  CLEANUP_FREE char *end = NULL;
  unsigned serial = 0;
  int r;

  x->why[0] = '\0';            /* what a failed renewal says */
  for (;;) {
    /* Without url-script, url= and its origin as they were found once:
     * a read is not worth a copy and a parse.
     */
    if (cfg.url_script == NULL)
      home = url_home;
    else if (script_failed (x, script_url (&given, &serial))) {
      r = -1;
      break;
    }
    /* file: has no origin, and no redirects. */
    else if (redirect_origin (given, &home) == -1)
      memset (&home, 0, sizeof home);
    rr.home = &home;
    at = home;
    trusted = true;
    r = chain (&rr, c, x, given ? given : cfg.url, &at, &trusted, &end);
    /* url-script's URL refused: once more with a new one. */
    if (r == 0 || x->reported || !again ||
        (x->a.status != 401 && x->a.status != 403) ||
        !script_url_refused (given))
      break;
    nbdkit_debug ("%s: %s: HTTP %ld: running url-script again",
                  x->what, cfg.shown_url, x->a.status);
    again = false;
    free (given);
    free (end);
    given = end = NULL;
  }
  if (r == 0 && uses_target (x) &&
      lands_elsewhere (x, end ? end : given ? given : cfg.url))
    r = -1;
  if (r == 0 && end != NULL && uses_target (x) && (keep || claimed)) {
    if (target_set (end, trusted, &home, epoch_now (), serial))
      nbdkit_debug ("%s: %s redirects to %s://%s:%ld: reads go there "
                    "directly", x->what, cfg.shown_url, at.scheme, at.host,
                    at.port);
  }
  else if (claimed && r == 0)
    target_set (NULL, true, &home, epoch_now (), serial);
  else if (claimed)
    target_release (epoch_now (), x->why[0] != '\0' ? x->why
                    : "it failed (reported where it did)");
  return r;
}

/* A renewal before expiry failed for a reason of the moment (the
 * redirector is down or busy): the target it was to replace has not
 * expired, and serves meanwhile.  Not a target that failed itself, nor
 * a new chain that led to another object.
 */
static bool
fall_back (const struct xfer *x, const struct target *t)
{
  return t->url != NULL && !t->stale && !x->reported &&
    x->v == VERDICT_RETRY && t->expires > epoch_now ();
}

/* The request at the remembered target t, following its redirects by
 * the rules for the origin its chain started from; a target that
 * redirects further is replaced by where that leads.
 */
static int
at_target (struct conn *c, struct xfer *x, struct target *t)
{
  struct redirect_rules rr = rules;
  CLEANUP_FREE char *end = NULL;
  int r;

  rr.home = &t->home;
  r = chain (&rr, c, x, t->url, &t->origin, &t->trusted, &end);
  if (r == 0 && end != NULL) {
    nbdkit_debug ("%s: the redirect target of %s redirects to "
                  "%s://%s:%ld: reads go there directly", x->what,
                  cfg.shown_url, t->origin.scheme, t->origin.host,
                  t->origin.port);
    target_moved (t->gen, end, t->trusted, epoch_now ());
  }
  return r;
}

/* The request at a mirror (mirror=), from its URL each time, by the
 * rules for url='s origin: only a mirror (or a hop) at that origin has
 * the user's secrets.  location-trusted=true lets url='s own redirects
 * take them anywhere, not a mirror's: a mirror that redirects to itself
 * would collect them.  Its redirects are followed but not remembered.
 */
static int
at_mirror (struct conn *c, struct xfer *x)
{
  struct redirect_rules rr = rules;
  struct origin at = x->src->origin;
  bool trusted = x->src->trusted;
  CLEANUP_FREE char *end = NULL;

  rr.home = &x->src->home;
  rr.location_trusted = false;
  return chain (&rr, c, x, x->src->url, &at, &trusted, &end);
}

/* url-script is due again (url-script-renew=, or its URL's expiry):
 * run it now, and if it printed another URL, drop the target of the
 * previous one, so that reads follow the new URL.  -1 if the run
 * failed (reported).
 */
static int
renew_given (struct xfer *x)
{
  unsigned serial;

  if (script_failed (x, script_url_serial (&serial)))
    return -1;
  if (target_given (serial))
    nbdkit_debug ("%s: url-script printed another URL: the redirect "
                  "target of the previous one is dropped", x->what);
  return 0;
}

/* The renewal of the target that this read waited for failed (its
 * error in x->why), or its back-off runs while the target cannot serve:
 * this try fails too, rather than run one more renewal after it, so
 * each read waits for one renewal at most per try; its own retries
 * follow.
 */
static int
renewal_failed (struct xfer *x)
{
  char why[sizeof x->why];

  memcpy (why, x->why, sizeof why);
  answer_reset (&x->a);
  snprintf (x->why, sizeof x->why, "finding the redirect target again "
            "failed: %.200s", why);
  x->v = VERDICT_RETRY;
  return -1;
}

/* The remembered target (generation gen) failed x, which url= may yet
 * serve: said, and counted, since targets that keep failing are no
 * longer remembered.
 */
static void
failed_at_target (const struct xfer *x, unsigned gen)
{
  nbdkit_debug ("%s: the redirect target of %s failed (%s): asking "
                "%s again", x->what, cfg.shown_url, x->why,
                cfg.shown_url);
  if (target_failed (gen))
    nbdkit_debug ("%s: %s: its redirect targets keep failing soon after "
                  "they are found: from now on every read follows its "
                  "redirects, no target is remembered", x->what,
                  cfg.shown_url);
}

/* One try of the request on handle c: at the remembered target when
 * there is one, else from url=.  A target that refuses (target_gone) is
 * resolved again at once, once, and if the new one refuses too the read
 * follows url= itself; one whose connection failed is resolved again by
 * the next try.  0, or -1 with x->v a failure and x->why set (or
 * x->reported).
 */
int
route_attempt (struct conn *c, struct xfer *x)
{
  struct target t;
  unsigned tries;
  int r = -1;

  x->ignoring_since = (struct timespec) { 0 };
  /* A short request never looks (see progress_cb, callbacks.c). */
  clock_gettime (CLOCK_MONOTONIC, &x->stop_checked);
  if (x->src != NULL && x->src->url != NULL)
    return at_mirror (c, x);
  if (!uses_target (x))
    return resolve (c, x, false, false);
  if (cfg.url_script != NULL && renew_given (x) == -1)
    return -1;
  for (tries = 0; tries < 2; tries++) {
    enum claim claim = target_claim (&t, epoch_now (), x->why,
                                     sizeof x->why);

    if (claim == CLAIM_FAILED)
      return renewal_failed (x);
    if (claim == CLAIM_RESOLVE) {
      r = resolve (c, x, true, true);
      if (r == 0 || !fall_back (x, &t)) {
        free (t.url);
        return r;
      }
      nbdkit_debug ("%s: %s: asking for a new redirect target failed "
                    "(%s): the old one has not expired yet", x->what,
                    cfg.shown_url, x->why);
    }
    if (t.url == NULL)
      return resolve (c, x, false, true);
    r = at_target (c, x, &t);
    free (t.url);
    if (r == 0) {
      target_served (t.gen);
      return 0;
    }
    if (x->reported || !(target_gone (x->a.status) ||
                         (x->v == VERDICT_RETRY && x->a.rc != CURLE_OK)))
      return r;
    failed_at_target (x, t.gen);
    /* A connection that failed is retried after the back-off. */
    if (x->v == VERDICT_RETRY)
      return r;
  }
  /* Refused at the target, then at the one found again meanwhile, by
   * another read: others may have used that one up (links good for a
   * few requests each).  Following url= itself may still serve this
   * read: its own chain, used once and not remembered.
   */
  nbdkit_debug ("%s: the new redirect target of %s failed too: this read "
                "follows %s itself", x->what, cfg.shown_url, cfg.shown_url);
  return resolve (c, x, false, false);
}
