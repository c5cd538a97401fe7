/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * target.c: where url='s redirect chain ends, remembered for every
 * request.  Private to request/, and to tests/unit/test-redirect.c.
 */

#ifndef TARGET_H
#define TARGET_H

#include "rules/rules.h"

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

/* What target_claim tells a request to do. */
enum claim {
  CLAIM_USE,                    /* send it to the target copied */
  CLAIM_RESOLVE,                /* find the target again from url= */
  CLAIM_FAILED,                 /* fail this try: the renewal did */
};

extern void target_renew_time (unsigned secs);
extern enum claim target_claim (struct target *t, int64_t now,
                                char *why, size_t size);
extern bool target_set (const char *url, bool trusted,
                        const struct origin *home, int64_t now,
                        unsigned given);
extern void target_moved (unsigned gen, const char *url,
                          bool trusted, int64_t now);
extern void target_release (int64_t now, const char *why);
extern bool target_failed (unsigned gen);
extern void target_served (unsigned gen);
extern bool target_given (unsigned given);
extern char *target_last (void);
extern void target_unload (void);

#endif /* TARGET_H */
