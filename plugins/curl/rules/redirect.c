/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Redirects: which hop an answer may lead to, and which origin sees the
 * user's secrets.  presigned.c reads the expiry a URL carries, and says
 * which ends are the same target.  request/route.c follows the hops and
 * asks here; request/target.c remembers where they ended.  Nothing here
 * does I/O, keeps state or reads the plugin's parameters: the rules come
 * in struct redirect_rules.  So tests/unit/test-redirect.c can try it
 * without a server.
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
