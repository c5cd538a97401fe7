/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * test-redirect: the redirect rules, the expiry a URL carries and the
 * remembered target, without a server (plugins/curl/rules/redirect.c,
 * presigned.c and ranges.c linked in alone).  A failing case is named on
 * stderr and the exit status is 1.
 */

#include <config.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "request/target.h"

static unsigned failures, cases;
static char failed_why[256];

/* Whether a claim is told to renew (true) or to use a target. */
static bool
claims (struct target *t, int64_t now)
{
  return target_claim (t, now, failed_why,
                       sizeof failed_why) == CLAIM_RESOLVE;
}

static void
check (int line, bool ok, const char *what)
{
  cases++;
  if (!ok) {
    fprintf (stderr, "test-redirect.c:%d: %s\n", line, what);
    failures++;
  }
}
#define CHECK(ok, what) check (__LINE__, (ok), (what))

static bool
http_s (const char *scheme)
{
  return strcasecmp (scheme, "http") == 0 ||
    strcasecmp (scheme, "https") == 0;
}

static struct origin home;
static struct redirect_rules rules = {
  .protocols = "http,https", .allows_scheme = http_s, .home = &home,
};

/* Follow one hop from from_url (at its origin): the new URL, or NULL;
 * *trusted and why as redirect_next leaves them.
 */
static char *
hop (bool put, long status, const char *from_url, const char *location,
     bool *trusted, char *why, size_t size)
{
  struct origin at;

  if (redirect_origin (from_url, &at) == -1)
    return NULL;
  why[0] = '\0';
  return redirect_next (&rules, put, status, from_url, location, &at,
                        trusted, why, size);
}

static void
next_hops (void)
{
  char why[256];
  bool trusted = false;
  char *u;

  redirect_origin ("https://img.example:443/disk.img", &home);
  /* Relative, same origin: trusted. */
  u = hop (false, 302, "https://img.example/a/disk.img", "../b/x.img",
           &trusted, why, sizeof why);
  CHECK (u && strcmp (u, "https://img.example/b/x.img") == 0 && trusted,
         "relative Location, same origin");
  free (u);
  /* Another host, another port, another scheme: not trusted. */
  u = hop (false, 302, "https://img.example/disk.img",
           "https://cdn.example/disk.img?X-Amz-Expires=60", &trusted, why,
           sizeof why);
  CHECK (u && !trusted, "another host is another origin");
  free (u);
  u = hop (false, 301, "https://img.example/disk.img",
           "https://img.example:8443/disk.img", &trusted, why, sizeof why);
  CHECK (u && !trusted, "another port is another origin");
  free (u);
  rules.location_trusted = true;
  u = hop (false, 302, "https://img.example/disk.img",
           "https://cdn.example/disk.img", &trusted, why, sizeof why);
  CHECK (u && trusted, "location-trusted=true trusts every origin");
  free (u);
  rules.location_trusted = false;

  /* https to http: only with insecure-redirect=true. */
  u = hop (false, 302, "https://img.example/disk.img",
           "http://img.example/disk.img", &trusted, why, sizeof why);
  CHECK (u == NULL && strstr (why, "unencrypted"), "https to http refused");
  free (u);
  rules.insecure = true;
  u = hop (false, 302, "https://img.example/disk.img",
           "http://img.example/disk.img", &trusted, why, sizeof why);
  CHECK (u != NULL && !trusted, "https to http with insecure-redirect");
  free (u);
  rules.insecure = false;

  /* Schemes outside protocols=, and file: always. */
  u = hop (false, 302, "https://img.example/disk.img", "file:///etc/passwd",
           &trusted, why, sizeof why);
  CHECK (u == NULL && strstr (why, "file"), "file: refused");
  free (u);
  u = hop (false, 302, "https://img.example/disk.img", "ftp://x/disk.img",
           &trusted, why, sizeof why);
  CHECK (u == NULL && strstr (why, "ftp"), "ftp: not in protocols=");
  free (u);
  /* No usable Location. */
  u = hop (false, 302, "https://img.example/disk.img", "", &trusted, why,
           sizeof why);
  CHECK (u == NULL && strstr (why, "Location"), "empty Location");
  free (u);
  u = hop (false, 302, "https://img.example/disk.img", "http://a b\r\n/x",
           &trusted, why, sizeof why);
  CHECK (u == NULL, "Location with CR LF");
  free (u);

  /* A PUT follows 307 and 308 only. */
  u = hop (true, 302, "https://img.example/disk.img", "/other",
           &trusted, why, sizeof why);
  CHECK (u == NULL && strstr (why, "write was not done"), "PUT and 302");
  free (u);
  u = hop (true, 307, "https://img.example/disk.img", "/other",
           &trusted, why, sizeof why);
  CHECK (u != NULL, "PUT and 307");
  free (u);
}

static void
expiries (void)
{
  /* 2026-12-01T16:00:00Z is 1796140800. */
  CHECK (presigned_expiry ("https://b.s3.example/k?X-Amz-Algorithm=A"
                          "&X-Amz-Date=20261201T160000Z&X-Amz-Expires=900"
                          "&X-Amz-Signature=abc") == 1796140800 + 900,
         "AWS SigV4");
  CHECK (presigned_expiry ("https://b.s3.example/k?x-amz-date=20261201T160000Z"
                          "&x-amz-expires=60") == 1796140800 + 60,
         "AWS SigV4, names in lower case");
  CHECK (presigned_expiry ("https://storage.example/b/o?X-Goog-Date="
                          "20261201T160000Z&X-Goog-Expires=3600")
         == 1796140800 + 3600, "Google V4");
  CHECK (presigned_expiry ("https://d.cloudfront.example/o?Expires=1796140800"
                          "&Signature=x&Key-Pair-Id=y") == 1796140800,
         "CloudFront Expires");
  CHECK (presigned_expiry ("https://a.blob.example/c/o?sv=2020&"
                          "se=2026-12-01T16%3A00%3A00Z&sig=x")
         == 1796140800, "Azure se, percent-encoded");
  CHECK (presigned_expiry ("https://a.blob.example/c/o?se=2026-12-01")
         == 1796083200, "Azure se, a date");
  CHECK (presigned_expiry ("https://a.example/o") == -1, "no query");
  CHECK (presigned_expiry ("https://a.example/o?Expires=soon") == -1,
         "Expires not a number");
  CHECK (presigned_expiry ("https://a.example/o?X-Amz-Date=2026&"
                          "X-Amz-Expires=60") == -1, "malformed date");
  CHECK (presigned_expiry ("https://a.example/o#Expires=1796140800") == -1,
         "a fragment is no query");
  CHECK (presigned_expiry ("https://a.example/o?NotExpires=1&Expires=5") == 5,
         "the parameter, not one that ends like it");
}

static void
targets (void)
{
  struct target t;
  unsigned gen;

  /* None yet: ask url=. */
  CHECK (!claims (&t, 1000) && t.url == NULL, "no target");
  target_set ("https://cdn.example/disk.img?Expires=1100", false,
              &home, 1000, 0);
  CHECK (!claims (&t, 1000) && t.url &&
         strstr (t.url, "cdn.example") && !t.trusted && t.expires == 1100,
         "the target, its trust and expiry");
  gen = t.gen;
  free (t.url);
  /* Life 100 s: renewed 10 s before it ends. */
  CHECK (!claims (&t, 1089), "not yet due");
  free (t.url);
  CHECK (claims (&t, 1090) && t.url && !t.stale &&
         t.expires == 1100 && redirect_same_origin (&t.home, &home),
         "due a tenth of its life before expiry: this request resolves, "
         "and has the old target to fall back to");
  free (t.url);
  target_set ("https://cdn.example/disk.img?Expires=2000", false,
              &home, 1090, 0);
  CHECK (!claims (&t, 1091) && t.gen != gen,
         "a new target, a new generation");
  gen = t.gen;
  free (t.url);

  /* A failure of an older generation is ignored; of this one, makes it
   * stale: the next request resolves.
   */
  target_failed (gen - 1);
  CHECK (!claims (&t, 1092), "an old generation's failure");
  free (t.url);
  target_failed (gen);
  CHECK (claims (&t, 1092) && t.stale,
         "stale after a failure");
  free (t.url);
  /* The resolution failed: the old target stays, not stale. */
  target_release (1092, "HTTP 503");
  CHECK (!claims (&t, 1093) && t.url && t.gen == gen,
         "released: the old target");
  free (t.url);
  /* url= no longer redirects. */
  target_failed (gen);
  CHECK (claims (&t, 1094), "stale again");
  free (t.url);
  target_set (NULL, true, &home, 1094, 0);
  CHECK (!claims (&t, 1095) && t.url == NULL,
         "no target: url= itself");
  /* The target redirects further: reads go to where it leads, in a
   * new generation; a move reported for an older one is ignored.
   */
  target_set ("https://cdn.example/a.img", false, &home, 1000, 0);
  CHECK (!claims (&t, 1000), "a target");
  gen = t.gen;
  free (t.url);
  target_moved (gen, "https://edge.example/a.img", false, 1001);
  CHECK (!claims (&t, 1001) && t.url &&
         strstr (t.url, "edge.example") && t.gen != gen &&
         strcmp (t.origin.host, "edge.example") == 0, "moved");
  free (t.url);
  target_moved (gen, "https://other.example/a.img", false, 1002);
  CHECK (!claims (&t, 1002) && t.url &&
         strstr (t.url, "edge.example"), "an old generation's move");
  free (t.url);

  /* Expired already when found (the signer's clock is behind ours):
   * not renewed at every request, only when it fails.
   */
  target_set ("https://cdn.example/disk.img?Expires=900", false,
              &home, 1000, 0);
  CHECK (!claims (&t, 1001) && t.url && t.expires == -1,
         "an expiry already past is not used");
  free (t.url);
  target_unload ();
}

/* Renewals before expiry, one at a time: while one runs the others go
 * on with the old target; one that failed backs off (issue 37, 11-12).
 */
static void
renewals (void)
{
  struct target t, u;

  target_set ("https://cdn.example/disk.img?Expires=1100", false,
              &home, 1000, 0);
  CHECK (claims (&t, 1090), "due: this request renews");
  free (t.url);
  CHECK (!claims (&u, 1091) && u.url &&
         strstr (u.url, "Expires=1100"),
         "while it runs, the others use the old target, not wait");
  free (u.url);
  target_release (1091, "HTTP 503");
  CHECK (!claims (&t, 1092), "backs off: not asked at once");
  free (t.url);
  CHECK (claims (&t, 1093), "asked again after 1-2 s");
  free (t.url);
  target_release (1093, "HTTP 503");
  CHECK (!claims (&t, 1095), "then after 2-3 s: not yet");
  free (t.url);
  CHECK (claims (&t, 1096), "then after 2-3 s");
  free (t.url);
  target_release (1096, "HTTP 503");
  CHECK (target_claim (&t, 1100, failed_why,
                       sizeof failed_why) == CLAIM_FAILED &&
         t.url == NULL && strcmp (failed_why, "HTTP 503") == 0,
         "expired during the back-off: the read fails at once, with the "
         "renewal's error");
  CHECK (claims (&t, 1101), "expired, the back-off over: renewed");
  free (t.url);
  target_set ("https://cdn.example/disk.img?Expires=1300", false,
              &home, 1100, 0);
  CHECK (!claims (&t, 1101), "renewed: the back-off ends");
  free (t.url);

  /* The same target: the same URL, or a presigned one up to its query. */
  CHECK (presigned_same_target ("https://a.example/x?Expires=1",
                               "https://a.example/x?Expires=2&sig=b"),
         "presigned: the same up to the query");
  CHECK (!presigned_same_target ("https://a.example/x?id=1",
                                "https://a.example/x?id=2"),
         "a query without an expiry names another object");
  CHECK (!presigned_same_target ("https://a.example/x?Expires=1",
                                "https://a.example/y?Expires=1"),
         "another path");
  CHECK (!presigned_same_target ("https://a.example/x?Expires=1",
                                "https://a.example/xy?Expires=1"),
         "a longer path");

  /* The URL the cache keys an object by: no signature, no credentials,
   * the other parameters sorted.
   */
  {
    char k[256];

    CHECK (presigned_object_url ("https://u:p%40w@a.example:8443/b/x.img?"
                                 "versionId=7&X-Amz-Signature=ab&"
                                 "X-Amz-Date=20260101T000000Z&"
                                 "X-Amz-Expires=600&acl=1#frag",
                                 k, sizeof k) &&
           strcmp (k, "https://a.example:8443/b/x.img?acl=1&versionId=7")
           == 0, "keyed: credentials and signature out, the rest sorted");
    CHECK (presigned_object_url ("http://a.example/x@y?"
                                 "se=2026-01-01T00:00:00Z&sig=2&sp=r",
                                 k, sizeof k) &&
           strcmp (k, "http://a.example/x@y") == 0,
           "keyed: an @ in the path stays, Azure's keys go");
    CHECK (presigned_object_url ("http://a.example/get?sv=x2.img&b=1",
                                 k, sizeof k) &&
           strcmp (k, "http://a.example/get?b=1&sv=x2.img") == 0,
           "keyed: a URL that is not presigned keeps every parameter");
    CHECK (!presigned_object_url ("https://a.example/very-long-path", k, 10),
           "keyed: a URL too long for the buffer is refused");
  }

  target_unload ();
}

/* A read that claims the target at now while it is being renewed. */
struct waiting {
  int64_t now;
  enum claim c;
  char why[256];
};

static void *
waiter (void *arg)
{
  struct waiting *w = arg;
  struct target t;

  w->c = target_claim (&t, w->now, w->why, sizeof w->why);
  free (t.url);
  return NULL;
}

/* Reads waiting for a renewal share its outcome: a failure fails them
 * all at once, not one more renewal each; the renewal window opens
 * early enough for a renewal that takes all of timeout=.
 */
static void
waiters (void)
{
  struct waiting w[4];
  pthread_t th[4];
  struct target t;
  unsigned i;

  target_renew_time (2);
  target_set ("https://cdn.example/disk.img?Expires=1100", false,
              &home, 1000, 0);
  /* Expired: this one renews, the others wait for it. */
  CHECK (claims (&t, 1100), "expired: this request renews");
  free (t.url);
  /* Whether they wait already or come after the release, in the
   * back-off, they fail the same way.
   */
  for (i = 0; i < 4; i++) {
    w[i].now = 1100;
    pthread_create (&th[i], NULL, waiter, &w[i]);
  }
  target_release (1102, "no byte for 2 s (timeout=)");
  for (i = 0; i < 4; i++) {
    pthread_join (th[i], NULL);
    CHECK (w[i].c == CLAIM_FAILED &&
           strcmp (w[i].why, "no byte for 2 s (timeout=)") == 0,
           "a read that waited fails with the renewal's error");
  }
  CHECK (target_claim (&t, 1103, failed_why,
                       sizeof failed_why) == CLAIM_FAILED,
         "and so does one that comes during the back-off");
  CHECK (claims (&t, 1104), "after it, one renews again");
  free (t.url);
  target_set ("https://cdn.example/disk.img?Expires=1200", false,
              &home, 1104, 0);
  CHECK (!claims (&t, 1105) && t.url && strstr (t.url, "1200"),
         "renewed: reads go on");
  free (t.url);

  /* Refused (stale), the renewal fails: the old target is used again,
   * and fails; a new claim during the back-off fails at once.
   */
  target_failed (t.gen);
  CHECK (claims (&t, 1106) && t.stale, "refused: renewed");
  free (t.url);
  target_release (1106, "HTTP 503");
  CHECK (!claims (&t, 1107) && t.url, "the old target again");
  free (t.url);
  target_failed (t.gen);
  CHECK (target_claim (&t, 1107, failed_why,
                       sizeof failed_why) == CLAIM_FAILED &&
         strcmp (failed_why, "HTTP 503") == 0, "refused again in the back-off");

  /* Before expiry, after a failed renewal: again after the back-off,
   * but not so late that a renewal taking all of 2 x timeout + 1 s
   * would outlive the target.
   */
  target_set ("https://cdn.example/disk.img?Expires=1300", false,
              &home, 1200, 0);
  CHECK (claims (&t, 1290), "due 10 s before its end");
  free (t.url);
  target_release (1293, "HTTP 503");
  CHECK (!claims (&t, 1294) && t.url, "backing off: the old target");
  free (t.url);
  CHECK (claims (&t, 1295), "renewed again: 5 s left");
  free (t.url);
  target_release (1295, "HTTP 503");
  CHECK (!claims (&t, 1298) && t.url,
         "2 s left: too late, the old target serves until its end");
  free (t.url);

  /* The window: a tenth of the life, but 2 x timeout + 1 s at least,
   * half the life at most.
   */
  CHECK (presigned_renew_margin (30, 2) == 5, "30 s, timeout=2: 5 s");
  CHECK (presigned_renew_margin (100, 2) == 10, "100 s, timeout=2: 10 s");
  CHECK (presigned_renew_margin (3600, 2) == 60, "an hour: a minute");
  CHECK (presigned_renew_margin (600, 60) == 121, "timeout=60: 121 s");
  CHECK (presigned_renew_margin (120, 60) == 60, "at most half the life");
  CHECK (presigned_renew_margin (1, 60) == 1, "at least a second");
  CHECK (presigned_renew_margin (100, 0) == 10, "timeout unknown: a tenth");
  target_unload ();
}

/* Which chain ends are the same target: the query names the object
 * (S3's versionId, GCS's generation, Azure's snapshot, an application's
 * own parameters), only what signs or times a URL may differ.
 */
static void
same_targets (void)
{
  static const struct {
    bool same;
    const char *a, *b, *what;
  } pairs[] = {
    { false, "https://b.example/obj?versionId=v1&Expires=9&Signature=s1",
      "https://b.example/obj?versionId=v2&Expires=9&Signature=s2",
      "S3: another versionId is another object" },
    { true, "https://b.example/obj?versionId=v1&Expires=9&Signature=s1"
      "&AWSAccessKeyId=K",
      "https://b.example/obj?versionId=v1&Expires=10&Signature=s2"
      "&AWSAccessKeyId=K2",
      "S3's older signature: only the signature and expiry differ" },
    { true, "https://b.example/obj?versionId=v1&X-Amz-Algorithm=A"
      "&X-Amz-Credential=c1&X-Amz-Date=20261205T000000Z&X-Amz-Expires=60"
      "&X-Amz-SignedHeaders=host&X-Amz-Signature=s1",
      "https://b.example/obj?versionId=v1&x-amz-algorithm=A"
      "&X-Amz-Credential=c2&X-Amz-Date=20261205T001000Z&X-Amz-Expires=90"
      "&X-Amz-Security-Token=t&X-AMZ-SignedHeaders=host&X-Amz-Signature=s2",
      "S3 SigV4: X-Amz-* in any case left out" },
    { false, "https://g.example/b/o?generation=1&X-Goog-Date=20261205T000000Z"
      "&X-Goog-Expires=60&X-Goog-Signature=s1",
      "https://g.example/b/o?generation=2&X-Goog-Date=20261205T000000Z"
      "&X-Goog-Expires=60&X-Goog-Signature=s1",
      "GCS: another generation is another object" },
    { true, "https://g.example/b/o?generation=1&X-Goog-Date=20261205T000000Z"
      "&X-Goog-Expires=60&X-Goog-Signature=s1",
      "https://g.example/b/o?X-Goog-Date=20261205T001000Z&generation=1"
      "&X-Goog-Expires=600&X-Goog-Signature=s2",
      "GCS: only X-Goog-* differ" },
    { false, "https://z.example/c/b?snapshot=2026-01-01&sv=1&sr=b"
      "&se=2026-12-05T10:00:00Z&sp=r&sig=s1",
      "https://z.example/c/b?snapshot=2026-02-01&sv=1&sr=b"
      "&se=2026-12-05T10:00:00Z&sp=r&sig=s1",
      "Azure: another snapshot is another object" },
    { true, "https://z.example/c/b?snapshot=2026-01-01&sv=1&ss=b&srt=o"
      "&sp=r&se=2026-12-05T10:00:00Z&st=2026-12-05T09:00:00Z&spr=https"
      "&sig=s1&sr=b&si=p&skoid=1&sktid=2&skt=3&ske=4&sks=b&skv=5&sdd=1",
      "https://z.example/c/b?snapshot=2026-01-01&sv=2&sig=s2"
      "&se=2026-12-05T11:00:00Z",
      "Azure: only SAS parameters differ" },
    { false, "https://z.example/c/b?versionid=1&se=2026-12-05T10:00:00Z"
      "&sig=s1",
      "https://z.example/c/b?versionid=2&se=2026-12-05T10:00:00Z&sig=s1",
      "Azure: another versionid is another object" },
    { true, "https://cf.example/o?Expires=9&Signature=s1&Key-Pair-Id=k1",
      "https://cf.example/o?Policy=p&Signature=s2&Key-Pair-Id=k2&Expires=9",
      "CloudFront: Expires, Signature, Policy, Key-Pair-Id left out" },
    { false, "https://a.example/get?file=a&Expires=9&Signature=s",
      "https://a.example/get?file=b&Expires=9&Signature=s",
      "an application's ?file= names the object" },
    { true, "https://a.example/get?file=a&part=2&Expires=9",
      "https://a.example/get?part=2&Expires=10&file=a",
      "the order of the parameters does not matter" },
    { false, "https://a.example/get?file=a&file=a&Expires=9",
      "https://a.example/get?file=a&Expires=10",
      "a parameter given twice counts twice" },
    { true, "https://a.example/get?file=a&file=b&Expires=9",
      "https://a.example/get?file=b&Expires=10&file=a",
      "the same parameters twice, in another order" },
    { false, "https://a.example/x?Expires=9&md5=a",
      "https://a.example/x?Expires=10&md5=b",
      "a parameter not known to sign is compared (nginx's md5=)" },
    { false, "https://a.example/x?Expires=9&sig2=a",
      "https://a.example/x?Expires=9&sig2=b",
      "a name that only starts as a signing one is compared" },
    { false, "https://a.example/x?Expires=9&file=a",
      "https://a.example/x?file=a",
      "presigned and not: only the same URL is the same" },
    { false, "https://a.example/x?Expires=9", "https://b.example/x?Expires=9",
      "another host" },
    { false, "https://a.example/x?Expires=9",
      "https://a.example:8443/x?Expires=9", "another port" },
    { false, "https://a.example/x?Expires=9", "http://a.example/x?Expires=9",
      "another scheme" },
    { true, "https://a.example/x?Expires=9#one",
      "https://a.example/x?Expires=10#two",
      "the fragment is never sent" },
  };
  size_t i;

  for (i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
    CHECK (presigned_same_target (pairs[i].a, pairs[i].b) == pairs[i].same,
           pairs[i].what);
    CHECK (presigned_same_target (pairs[i].b, pairs[i].a) == pairs[i].same,
           pairs[i].what);
  }
  CHECK (presigned_param_only_signs ("X-Amz-Signature", 15) &&
         presigned_param_only_signs ("x-goog-date", 11) &&
         presigned_param_only_signs ("se", 2) &&
         presigned_param_only_signs ("sig=1", 3) &&
         !presigned_param_only_signs ("snapshot", 8) &&
         !presigned_param_only_signs ("versionId", 9) &&
         !presigned_param_only_signs ("generation", 10) &&
         !presigned_param_only_signs ("s", 1) &&
         !presigned_param_only_signs ("X-Amz-", 5),
         "the parameters that only sign or time a URL");
}

/* url-script's new URL; targets that keep failing. */
static void
targets_dropped (void)
{
  struct target t, u;
  unsigned i;

  /* url-script printed another URL: the target is dropped. */
  target_set ("https://cdn.example/a.img", false, &home, 1000, 4);
  CHECK (!target_given (4), "the same run's URL: kept");
  CHECK (target_given (5), "another URL: dropped");
  CHECK (!claims (&t, 1000) && t.url == NULL,
         "no target: url-script's URL");
  CHECK (target_last () == NULL, "its chain starts afresh");

  /* Targets refused soon after they were found, three in a row: none
   * is remembered any more.
   */
  for (i = 0; i < 3; i++) {
    target_set ("https://cdn.example/a.img", false, &home, 1000,
                0);
    CHECK (!claims (&t, 1000) && t.url, "a target");
    free (t.url);
    target_served (t.gen);
    CHECK (target_failed (t.gen) == (i == 2),
           "given up at the third short-lived target");
  }
  CHECK (!claims (&t, 1000) && t.url == NULL,
         "no target: url= for every read");
  CHECK (!target_set ("https://cdn.example/b.img", false, &home,
                      1000, 0), "none remembered any more");
  CHECK (!claims (&t, 1000) && t.url == NULL,
         "still none");
  u.url = target_last ();
  CHECK (u.url && strstr (u.url, "b.img"), "the last end is known");
  free (u.url);
  target_unload ();
}

int
main (void)
{
  next_hops ();
  expiries ();
  targets ();
  renewals ();
  waiters ();
  same_targets ();
  targets_dropped ();
  fprintf (stderr, "test-redirect: %u cases, %u failed\n", cases, failures);
  return failures > 0;
}
