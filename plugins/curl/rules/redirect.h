/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Redirects (redirect.c): the rules for a hop, and the origins that see
 * the user's secrets.  Also what a presigned URL's query says
 * (presigned.c).  It is a header of its
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
extern bool presigned_object_url (const char *url, char *out, size_t size);

extern unsigned redirect_backoff_next (unsigned last);

#endif /* REDIRECT_H */
