/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Whether an answer still shows the object opened at start-up.  Its
 * ETag, Last-Modified and stated digest are held to the pin found then.
 * verdict.c asks this of every 206, and probe.c compares two ETags here.
 */

#include <config.h>

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "rules/rules.h"

/* Weak comparison (RFC 9110 8.8.3.2): the opaque tags are equal,
 * whether or not either is marked weak.
 */
bool
validators_etag_weak_equal (const char *x, const char *y)
{
  if (strncmp (x, "W/", 2) == 0)
    x += 2;
  if (strncmp (y, "W/", 2) == 0)
    y += 2;
  return strcmp (x, y) == 0;
}

/* Is the answer's ETag NOW the pinned one?  A strong pin compares
 * exactly, as the server's If-Match does; a weak one weakly.
 */
bool
validators_etag_matches (const char *pinned, const char *now)
{
  if (strncmp (pinned, "W/", 2) == 0)
    return validators_etag_weak_equal (pinned, now);
  return strcmp (pinned, now) == 0;
}

/* One validator of the answer (NOW, "" if absent) against the pinned
 * one (PINNED, "" if none): false with why set if it proves or may
 * hide a change.
 */
static bool
same_validator (const char *name, const char *pinned, bool required,
                const char *now, bool bad, bool etag, char *why,
                size_t size)
{
  if (pinned[0] == '\0')
    return true;
  if (bad) {
    snprintf (why, size, "the object at the URL may have changed since "
              "it was opened: the answer's %s is unusable (control "
              "characters, not an entity-tag, too long, or two different "
              "ones)", name);
    return false;
  }
  if (now[0] == '\0') {
    if (!required)
      return true;
    snprintf (why, size, "the object at the URL may have changed since "
              "it was opened: the answer carries no %s, which the "
              "server sent at start-up (pin-object=false reads without "
              "this check)", name);
    return false;
  }
  if (etag ? validators_etag_matches (pinned, now) : strcmp (pinned, now) == 0)
    return true;
  snprintf (why, size, "the object at the URL changed since it was "
            "opened: its %s was %.80s, now %.80s", name, pinned, now);
  return false;
}

/* Whether the answer states the pin's digest line (struct pin), its
 * name in any case; if not (absent, or another value), why says so.
 */
static bool
same_digest (const char *pinned, const struct answer *a, char *why,
             size_t size)
{
  const char *line = a->digests;
  size_t n = strcspn (pinned, ":"), all = strlen (pinned);
  bool named = false;

  while (*line != '\0') {
    size_t len = strcspn (line, "\n");

    if (len > n && line[n] == ':' && strncasecmp (line, pinned, n) == 0) {
      named = true;
      if (len == all && strncmp (line + n, pinned + n, len - n) == 0)
        return true;
    }
    line += len + (line[len] == '\n');
  }
  if (!named && !a->digests_cut)
    snprintf (why, size, "the object at the URL may have changed since "
              "it was proven: the answer carries no %.*s, which stated "
              "its digest", (int) n, pinned);
  else
    snprintf (why, size, "the object at the URL changed since it was "
              "proven: its %.*s was %.100s, the answer states another%s",
              (int) n, pinned, pinned + n + (n < all),
              a->digests_cut ? " (or one that could not be read)" : "");
  return false;
}

/* The answer's validators against the ones found at start-up.  The
 * answer must carry each validator that the probe's ranged GET carried
 * (RFC 9110 15.3.7 requires a 206 to carry the ETag that a 200 would
 * have): a server that ignores If-Match may drop it along with the old
 * object.
 */
bool
validators_same_object (const struct asked *q, const struct answer *a,
                        char *why, size_t size)
{
  if (!q->pinned)
    return true;
  return (q->pin.digest == NULL || q->pin.digest[0] == '\0' ||
          same_digest (q->pin.digest, a, why, size)) &&
    same_validator ("ETag", q->pin.etag, q->pin.etag_required,
                    a->etag, a->bad_etag, true, why, size) &&
    same_validator ("Last-Modified", q->pin.last_modified,
                    q->pin.last_modified_required, a->last_modified,
                    a->bad_last_modified, false, why, size);
}
