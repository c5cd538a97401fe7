/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Presigned URLs: what a URL's query says about the object it names
 * and about the URL itself, for redirect.c's remembered target and
 * url-script's URL: when it stops working (the expiry that S3, Google
 * Cloud Storage, CloudFront and Azure put in it), and whether two ends
 * of a redirect chain are the same target.  Text only: no I/O, no
 * state, nothing of the plugin's parameters; declared in redirect.h,
 * so that tests/unit/test-redirect.c tries it with redirect.c.
 */

#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "curldefs.h"
#include "redirect.h"

/* The value of the query parameter NAME (case-insensitive) of url,
 * percent-decoded, into buf; false if it has none (or a longer one).
 */
static bool
query_param (const char *url, const char *name, char *buf, size_t size)
{
  const char *p = strchr (url, '?'), *end = NULL, *v;
  size_t n = strlen (name), len = 0;
  unsigned hi, lo;

  if (p == NULL)
    return false;
  for (p++; *p != '\0' && *p != '#'; p = end + (*end == '&')) {
    end = p + strcspn (p, "&#");
    if ((size_t) (end - p) > n && p[n] == '=' &&
        strncasecmp (p, name, n) == 0)
      break;
  }
  if (*p == '\0' || *p == '#')
    return false;
  for (v = p + n + 1; v < end; len++) {
    if (len + 1 >= size)
      return false;
    if (*v == '%' && end - v >= 3 &&
        sscanf (v + 1, "%1x%1x", &hi, &lo) == 2) {
      buf[len] = (char) (hi * 16 + lo);
      v += 3;
    }
    else
      buf[len] = *v++;
  }
  buf[len] = '\0';
  return true;
}

/* Seconds since the epoch of a UTC date: YYYYMMDDTHHMMSSZ (AWS, Google)
 * if compact, else YYYY-MM-DD[THH:MM[:SS]Z] (Azure).  -1 if malformed.
 */
static int64_t
parse_utc (const char *s, bool compact)
{
  struct tm tm = { 0 };
  int n = 0, y, mo, d, h = 0, mi = 0, sec = 0;

  if (compact) {
    if (sscanf (s, "%4d%2d%2dT%2d%2d%2dZ%n", &y, &mo, &d, &h, &mi, &sec,
                &n) != 6 || s[n] != '\0')
      return -1;
  }
  else if (!(sscanf (s, "%4d-%2d-%2d%n", &y, &mo, &d, &n) == 3 &&
             s[n] == '\0') &&
           !(sscanf (s, "%4d-%2d-%2dT%2d:%2dZ%n", &y, &mo, &d, &h, &mi,
                     &n) == 5 && s[n] == '\0') &&
           !(sscanf (s, "%4d-%2d-%2dT%2d:%2d:%2dZ%n", &y, &mo, &d, &h, &mi,
                     &sec, &n) == 6 && s[n] == '\0'))
    return -1;
  if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 ||
      mi > 59 || sec > 60)
    return -1;
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  return (int64_t) timegm (&tm);
}

/* A decimal number of seconds, or -1. */
static int64_t
parse_seconds (const char *s)
{
  int64_t n = parse_number (s, NULL);

  return n >= 0 && strlen (s) <= 18 ? n : -1;
}

/* When the URL says it stops working, in seconds since the epoch, or
 * -1 if it does not say: presigned URLs of AWS S3 and its kin
 * (X-Amz-Date plus X-Amz-Expires), Google Cloud Storage (X-Goog-Date
 * plus X-Goog-Expires), CloudFront and S3's older signatures (Expires,
 * in seconds since the epoch), and Azure's SAS (se, a date).
 */
int64_t
redirect_expiry (const char *url)
{
  static const char *const dated[][2] = {
    { "X-Amz-Date", "X-Amz-Expires" },
    { "X-Goog-Date", "X-Goog-Expires" },
  };
  char a[64], b[64];
  int64_t t, n;
  size_t i;

  for (i = 0; i < sizeof dated / sizeof dated[0]; i++) {
    if (!query_param (url, dated[i][0], a, sizeof a) ||
        !query_param (url, dated[i][1], b, sizeof b))
      continue;
    t = parse_utc (a, true);
    n = parse_seconds (b);
    if (t >= 0 && n >= 0)
      return t + n;
  }
  if (query_param (url, "Expires", a, sizeof a)) {
    t = parse_seconds (a);
    if (t >= 0)
      return t;
  }
  if (query_param (url, "se", a, sizeof a))
    return parse_utc (a, false);
  return -1;
}

/* Whether two chain ends are the same target: the same URL or, for
 * presigned URLs (both carry an expiry: redirect_expiry), the same URL
 * up to its query, which holds the signature and its time.
 */
bool
redirect_same_target (const char *a, const char *b)
{
  size_t n = strcspn (a, "?#");

  if (strcmp (a, b) == 0)
    return true;
  return redirect_expiry (a) >= 0 && redirect_expiry (b) >= 0 &&
    strcspn (b, "?#") == n && strncmp (a, b, n) == 0;
}
