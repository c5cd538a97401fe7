/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Presigned URLs: what a URL's query says about the object it names, and
 * about the URL itself.  It says when the URL stops working: the expiry
 * that S3, Google Cloud Storage, CloudFront and Azure put in it.  From that
 * comes how long before then the URL is renewed.  It also says whether two
 * ends of a redirect chain are the same target.  redirect.c uses this for
 * its remembered target, and scripts/script.c for url-script's URL.  Text
 * only: no I/O, no state, nothing of the plugin's parameters.  It is
 * declared in redirect.h, so that tests/unit/test-redirect.c tries it with
 * redirect.c.
 */

#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "rules/rules.h"

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
  int64_t n = ranges_number (s, NULL);

  return n >= 0 && strlen (s) <= 18 ? n : -1;
}

/* When the URL says it stops working, in seconds since the epoch, or
 * -1 if it does not say: presigned URLs of AWS S3 and its kin
 * (X-Amz-Date plus X-Amz-Expires), Google Cloud Storage (X-Goog-Date
 * plus X-Goog-Expires), CloudFront and S3's older signatures (Expires,
 * in seconds since the epoch), and Azure's SAS (se, a date).
 */
int64_t
presigned_expiry (const char *url)
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

/* How long before its expiry a URL that lives life seconds is renewed,
 * when a renewal may take up to slowest seconds (timeout=): a tenth of
 * its life (at least a second, at most a minute), but at least twice
 * slowest and a second, so that a renewal that takes all of it (the
 * redirector accepts and never answers) ends while the old URL still
 * works; at most half its life.
 */
int64_t
presigned_renew_margin (int64_t life, unsigned slowest)
{
  int64_t m = life / 10, least = 2 * (int64_t) slowest + 1;

  m = m < 1 ? 1 : m > 60 ? 60 : m;
  if (m < least)
    m = least;
  if (m > life / 2)
    m = life / 2;
  return m < 1 ? 1 : m;
}

/* The query parameters that only sign or time a presigned URL: a
 * renewal changes them, while the others name the object (S3's
 * versionId, GCS's generation, Azure's snapshot and versionid, an
 * application's own ?file=) and must stay.  Names match whatever their
 * case, as presigned_expiry reads them.  Only the signers' own names: a
 * parameter left out that named the object would let a renewal land
 * on another object unseen, one kept that only signs fails a read.
 */
static const struct {
  const char *name;
  bool prefix;                  /* any name that starts so */
} signing_params[] = {
  /* AWS S3 SigV4 and its kin: X-Amz-Algorithm, -Credential, -Date,
   * -Expires, -SignedHeaders, -Security-Token, -Signature.
   */
  { "X-Amz-", true },
  /* Google Cloud Storage V4 signed URLs: the same, as X-Goog-. */
  { "X-Goog-", true },
  /* S3's older query signature (AWSAccessKeyId, Expires, Signature),
   * and CloudFront's canned and custom policies (Expires or Policy,
   * Signature, Key-Pair-Id).
   */
  { "AWSAccessKeyId", false }, { "Expires", false },
  { "Signature", false }, { "Key-Pair-Id", false }, { "Policy", false },
  /* Azure's shared access signatures: version, services, resource
   * types, permissions, expiry, start, protocol, signature, resource,
   * stored policy, the user delegation key's fields, directory depth.
   */
  { "sv", false }, { "ss", false }, { "srt", false }, { "sp", false },
  { "se", false }, { "st", false }, { "spr", false }, { "sig", false },
  { "sr", false }, { "si", false }, { "skoid", false },
  { "sktid", false }, { "skt", false }, { "ske", false },
  { "sks", false }, { "skv", false }, { "sdd", false },
};

/* Whether the query parameter named name (len bytes, not a string)
 * only signs or times a URL (signing_params): what may differ between
 * two presigned URLs of the same object.
 */
bool
presigned_param_only_signs (const char *name, size_t len)
{
  size_t i, n;

  for (i = 0; i < sizeof signing_params / sizeof signing_params[0]; i++) {
    n = strlen (signing_params[i].name);
    if ((signing_params[i].prefix ? len > n : len == n) &&
        strncasecmp (name, signing_params[i].name, n) == 0)
      return true;
  }
  return false;
}

/* One query parameter: "name=value" (or "name"), len bytes at p. */
struct param {
  const char *p;
  size_t len;
};

static int
compare_params (const void *va, const void *vb)
{
  const struct param *a = va, *b = vb;
  int c = memcmp (a->p, b->p, a->len < b->len ? a->len : b->len);

  return c != 0 ? c : (a->len > b->len) - (a->len < b->len);
}

/* The parameters of url's query that may name its object (all but
 * those that only sign it, unless all), sorted, so that two lists
 * compare as multisets: into *out (to free) and *count.  False if out of
 * memory.
 */
static bool
query_params (const char *url, bool all, struct param **out, size_t *count)
{
  const char *p = url + strcspn (url, "?#"), *end;
  size_t max = 1, n = 0, name;
  struct param *v;

  *out = NULL;
  *count = 0;
  if (*p != '?')
    return true;
  p++;
  for (end = p; *end != '\0' && *end != '#'; end++)
    max += *end == '&';
  v = malloc (max * sizeof *v);
  if (v == NULL)
    return false;
  for (;;) {
    end = p + strcspn (p, "&#");
    name = strcspn (p, "=&#");
    if (end > p && (all || !presigned_param_only_signs (p, name)))
      v[n++] = (struct param) { .p = p, .len = end - p };
    if (*end != '&')
      break;
    p = end + 1;
  }
  qsort (v, n, sizeof *v, compare_params);
  *out = v;
  *count = n;
  return true;
}

/* Whether two chain ends are the same target: the same URL or, for
 * presigned URLs (both carry an expiry: presigned_expiry), the same URL
 * up to its query (scheme, host, port, path), and the same query
 * parameters, each as often, in any order, once those that only sign or
 * time a URL are left out (presigned_param_only_signs): the others may
 * name the object (S3's versionId=), and another value is another
 * object.  The fragment is never sent.  Out of memory: not the same,
 * which fails a read rather than risk another object's bytes.
 */
bool
presigned_same_target (const char *a, const char *b)
{
  size_t n = strcspn (a, "?#"), na, nb, i;
  struct param *pa = NULL, *pb = NULL;
  bool same;

  if (strcmp (a, b) == 0)
    return true;
  if (presigned_expiry (a) < 0 || presigned_expiry (b) < 0 ||
      strcspn (b, "?#") != n || strncmp (a, b, n) != 0)
    return false;
  same = query_params (a, false, &pa, &na) &&
    query_params (b, false, &pb, &nb) &&
    na == nb;
  for (i = 0; same && i < na; i++)
    same = pa[i].len == pb[i].len &&
      memcmp (pa[i].p, pb[i].p, pa[i].len) == 0;
  free (pa);
  free (pb);
  return same;
}

/* url as the cache keys it (cache/cache.c): up to its query as given
 * but without user:password@, then its query's parameters, sorted.  Of a
 * presigned URL (one with an expiry: presigned_expiry) only those that
 * may name its object (query_params), so that it keys the same signed
 * again; another URL's parameters all name it (a plain ?sv=2 is not
 * Azure's).  Credentials name no object, and the key goes to disk.  The
 * fragment is never sent.  False if it does not fit in size bytes.
 */
bool
presigned_object_url (const char *url, char *out, size_t size)
{
  size_t n = strcspn (url, "?#"), count, i, len, auth;
  const char *host = strstr (url, "://"), *at;
  struct param *v = NULL;

  if (n >= size ||
      !query_params (url, presigned_expiry (url) < 0, &v, &count))
    return false;
  memcpy (out, url, n);
  len = n;
  /* user:password@ ends at the last @ before the path. */
  if (host != NULL && (size_t) (host - url) < n) {
    host += 3;
    auth = strcspn (host, "/?#");
    at = memrchr (host, '@', auth);
    if (at != NULL) {
      memmove (out + (host - url), out + (at + 1 - url), n - (at + 1 - url));
      len -= at + 1 - host;
    }
  }
  for (i = 0; i < count; i++) {
    if (len + 1 + v[i].len >= size) {
      free (v);
      return false;
    }
    out[len++] = i == 0 ? '?' : '&';
    memcpy (out + len, v[i].p, v[i].len);
    len += v[i].len;
  }
  out[len] = '\0';
  free (v);
  return true;
}
