/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Redirects (redirect.c): the rules for a hop, the origins that see the
 * user's secrets, and the remembered target of url='s redirect chain.  Also
 * what a presigned URL's query says (presigned.c).  It is a header of its
 * own, like verdict.h, so that tests/unit/test-redirect.c can use it alone.
 */

#ifndef REDIRECT_H
#define REDIRECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The origin of a URL (RFC 6454 4): who may see the user's secrets. */
struct origin {
  char scheme[16];
  char host[256];
  char zone[32];                /* an IPv6 link-local address's zone */
  long port;
};

/* What the parameters say about redirects. */
struct redirect_rules {
  const char *protocols;        /* protocols=, for messages */
  bool (*allows_scheme) (const char *scheme);
  bool insecure;                /* insecure-redirect=true */
  bool location_trusted;        /* location-trusted=true */
  const struct origin *home;    /* url='s origin */
};

/* Where url='s redirect chain was found to end. */
struct target {
  char *url;                    /* NULL: none, ask url= */
  bool trusted;                 /* may have the user's secrets */
  struct origin origin;
  struct origin home;           /* the origin of the URL it came from */
  int64_t found;                /* when (seconds since the epoch) */
  int64_t expires;              /* what its URL says, or -1 */
  bool stale;                   /* it failed: resolve it again */
  unsigned gen;                 /* changes with each new target */
  unsigned given;               /* url-script's run that it came from */
};

extern int redirect_origin (const char *url, struct origin *o);
extern bool redirect_same_origin (const struct origin *a,
                                  const struct origin *b);
extern char *redirect_next (const struct redirect_rules *r, bool is_put,
                            long status, const char *from_url,
                            const char *location, struct origin *from,
                            bool *trusted, char *why, size_t size);

/* presigned.c: what a presigned URL's query says (pure). */
extern int64_t presigned_expiry (const char *url);
extern int64_t presigned_renew_margin (int64_t life, unsigned slowest);
extern bool presigned_param_only_signs (const char *name, size_t len);
extern bool presigned_same_target (const char *a, const char *b);

/* What redirect_target_claim tells a request to do. */
enum claim {
  CLAIM_USE,                    /* send it to the target copied */
  CLAIM_RESOLVE,                /* find the target again from url= */
  CLAIM_FAILED,                 /* fail this try: the renewal did */
};

extern void redirect_renew_time (unsigned secs);
extern unsigned redirect_backoff_next (unsigned last);
extern enum claim redirect_target_claim (struct target *t, int64_t now,
                                         char *why, size_t size);
extern bool redirect_target_set (const char *url, bool trusted,
                                 const struct origin *home, int64_t now,
                                 unsigned given);
extern void redirect_target_moved (unsigned gen, const char *url,
                                   bool trusted, int64_t now);
extern void redirect_target_release (int64_t now, const char *why);
extern bool redirect_target_failed (unsigned gen);
extern void redirect_target_served (unsigned gen);
extern bool redirect_target_given (unsigned given);
extern char *redirect_target_last (void);
extern void redirect_unload (void);

#endif /* REDIRECT_H */
