/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The rules: pure functions that judge what a server sent.  They hold
 * no state of the plugin's and read no parameter: callers pass what
 * they need.  So the unit tests use them without a server.
 *
 * verdict.c judges an answer, answer.c reads its headers, ranges.c its
 * Content-Range and multipart body.  validators.c holds an answer to
 * the object pinned at start-up.  redirect.c decides where a
 * redirect may go, presigned.c what a signed URL's query says.
 * headers.c says which request headers a user may add, digests.c
 * compares the digests servers state.  The rules use only the base.
 */

#ifndef RULES_H
#define RULES_H

#include "base/base.h"
#include "rules/verdict.h"
#include "rules/redirect.h"

/* validators.c: the answer held to the object pinned at start-up. */
extern bool validators_etag_weak_equal (const char *x, const char *y);
extern bool validators_etag_matches (const char *pinned, const char *now);
extern bool validators_same_object (const struct asked *q,
                                    const struct answer *a, char *why,
                                    size_t size);

/* headers.c: the request headers a user may add. */
extern const char *headers_refused (const char *line, size_t len,
                                    int *name_len);

/* digests.c: checksum=ALGO:HEX, and the digests servers state. */
struct checksum_want {
  const char *algo;             /* "sha256", "sha512", "md5"; NULL: none */
  unsigned len;                 /* the digest's bytes */
  unsigned char digest[64];
};
extern int digests_parse (const char *value, struct checksum_want *w);
extern int digests_check (const struct checksum_want *w,
                          const char *digests, bool cut);
extern int digests_agree (const char *a, const char *b, char *why,
                          size_t size, char *pin, size_t pin_size);
extern int digests_state_wanted (const struct checksum_want *w,
                                 const char *digests, char *line,
                                 size_t size);
extern void digests_hex (const unsigned char *d, unsigned n, char *out);

#endif /* RULES_H */
