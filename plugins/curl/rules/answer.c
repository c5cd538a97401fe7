/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * An answer's header facts, gathered as they arrive into struct answer
 * (verdict.h).  exchange.c resets the answer before each exchange, and
 * callbacks.c at each status line.  callbacks.c hands over each header
 * line, and verdict.c judges what was gathered.  A header given twice with
 * different values is recorded as such, never resolved by picking one.  A
 * validator that would go back to the server in a precondition is kept only
 * when it is safe to send.
 */

#include <config.h>

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "rules/rules.h"

void
answer_reset (struct answer *a)
{
  memset (a, 0, sizeof *a);
  a->content_length = a->cr_total = a->unsatisfied_total = -1;
  a->rc = CURLE_OK;
}

/* A validator goes back to the server in If-Match or
 * If-Unmodified-Since, so one with control characters (a CR would end
 * that header and start another of the server's choosing) or a NUL is
 * never kept, only noted as unusable (and so is an ETag that is not an
 * entity-tag, see is_entity_tag).  So is one longer than the field
 * (a truncated ETag would compare equal to a different one, and an
 * absent one would not be compared at all), and a second one that
 * differs from the first (which is meant cannot be known).  While reads
 * are pinned by a validator, an answer with an unusable one of that kind
 * is refused.
 */
static void
copy_validator (bool *bad, char *dst, size_t dstlen, const char *v,
                size_t len)
{
  size_t i;

  for (i = 0; i < len; i++) {
    if ((unsigned char) v[i] < 0x20 || v[i] == 0x7f) {
      *bad = true;
      return;
    }
  }
  if (len >= dstlen || (dst[0] && (strlen (dst) != len ||
                                   memcmp (dst, v, len) != 0))) {
    *bad = true;
    return;
  }
  memcpy (dst, v, len + 1);
}

/* RFC 9110 8.8.3: entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE, where
 * etagc is any visible byte but DQUOTE.  Anything else must not be sent
 * back: "*" or a list ("a", "b") in If-Match would match any version.
 */
static bool
is_entity_tag (const char *v, size_t len)
{
  size_t i;

  if (len >= 2 && v[0] == 'W' && v[1] == '/') {
    v += 2;
    len -= 2;
  }
  if (len < 2 || v[0] != '"' || v[len - 1] != '"')
    return false;
  for (i = 1; i < len - 1; i++)
    if ((unsigned char) v[i] <= 0x20 || v[i] == '"' || v[i] == 0x7f)
      return false;
  return true;
}

/* Retry-After: seconds (RFC 9110 10.2.3: digits only, so not "1e9" as
 * 1); an HTTP-date, or a number too large to read, is left to the
 * backoff.
 */
static void
note_retry_after (struct answer *a, const char *v)
{
  const char *end = v;
  int64_t secs = ranges_number (v, &end);

  if (secs >= 0 && *end == '\0')
    a->retry_after_ms = secs > MAX_RETRY_DELAY_MS / 1000
      ? MAX_RETRY_DELAY_MS : (unsigned) secs * 1000;
}

/* Headers that give the object's digest (checksum.c): RFC 9530's
 * Repr-Digest, RFC 3230's Digest, S3's x-amz-checksum-*, Google's
 * x-goog-hash, and Content-MD5, which is the digest of the body, so of
 * the object only in a 200.
 */
static bool
is_digest_header (const struct answer *a, const char *name)
{
  size_t n = strlen (name);

  /* "Repr-Digest :" is not a header (RFC 9112 5.1), but a server that
   * sends it may mean one: note_digest keeps none of it, and says so.
   */
  while (n > 0 && (name[n - 1] == ' ' || name[n - 1] == '\t'))
    n--;
  return is_word ("repr-digest", name, n) || is_word ("digest", name, n) ||
    (n >= 15 && strncasecmp (name, "x-amz-checksum-", 15) == 0) ||
    is_word ("x-goog-hash", name, n) ||
    (is_word ("content-md5", name, n) && a->status == 200);
}

/* A digest header kept for checksum.c, or marked as not all kept: one
 * with a space before its colon, a line feed, or no room left.
 */
static void
note_digest (struct answer *a, const char *name, const char *v,
             size_t vlen)
{
  size_t used = strlen (a->digests), n = strlen (name);

  if (name[n - 1] == ' ' || name[n - 1] == '\t' ||
      memchr (v, '\n', vlen) != NULL ||
      used + n + vlen + 2 >= sizeof a->digests) {
    a->digests_cut = true;
    return;
  }
  snprintf (a->digests + used, sizeof a->digests - used, "%s:%.*s\n",
            name, (int) vlen, v);
}

/* A folded line (callbacks.c) after a digest header: its digests are
 * not all kept.
 */
void
answer_folded (struct answer *a)
{
  if (a->last_was_digest)
    a->digests_cut = true;
}

/* A header line too long to take in (callbacks.c): a validator or a
 * digest statement is marked as not usable, or not all kept.
 */
void
answer_long_header (struct answer *a, const char *data, size_t len)
{
  const char *colon = memchr (data, ':', len);
  char name[64];
  size_t n = colon != NULL ? (size_t) (colon - data) : sizeof name;

  if (n >= sizeof name)
    return;
  memcpy (name, data, n);
  name[n] = '\0';
  if (strcasecmp (name, "etag") == 0)
    a->bad_etag = true;
  else if (strcasecmp (name, "last-modified") == 0)
    a->bad_last_modified = true;
  else if (is_digest_header (a, name))
    a->digests_cut = true;
}

/* One header line of the answer, NAME: V (V is VLEN bytes, NUL
 * terminated, and may hold a NUL).  False for a malformed
 * Content-Range, which is ignored.
 */
bool
answer_header (struct answer *a, const char *name, const char *v,
               size_t vlen)
{
  a->last_was_digest = is_digest_header (a, name);
  /* Which of two different Content-Range or Content-Length headers is
   * meant cannot be known (RFC 9112 6.3 makes the second case an error),
   * so neither is used.  The same value twice is harmless.
   */
  if (strcasecmp (name, "content-length") == 0) {
    int64_t n = ranges_number (v, NULL);

    if (a->cl_seen && (n == -1 || a->content_length != n))
      a->framing_twice = true;
    a->cl_seen = true;
    a->content_length = n;
  }
  else if (strcasecmp (name, "content-range") == 0) {
    const char *p;
    uint64_t first = a->cr_first, last = a->cr_last;
    int64_t total = a->cr_total;
    bool had = a->has_content_range;

    a->has_content_range = ranges_content_range (v, &a->cr_first,
                                                &a->cr_last, &a->cr_total);
    if (a->cr_seen &&
        !(had && a->has_content_range && a->cr_first == first &&
          a->cr_last == last && a->cr_total == total))
      a->framing_twice = true;
    a->cr_seen = true;
    if (strncasecmp (v, "bytes */", 8) == 0) {
      a->unsatisfied_total = ranges_number (v + 8, &p);
      if (a->unsatisfied_total >= 0 && *p != '\0')
        a->unsatisfied_total = -1;
    }
    else if (!a->has_content_range)
      return false;
  }
  else if (strcasecmp (name, "content-type") == 0) {
    if (!ranges_multipart_type (v, a->boundary, sizeof a->boundary))
      a->boundary[0] = '\0';
  }
  else if (strcasecmp (name, "retry-after") == 0)
    note_retry_after (a, v);
  else if (strcasecmp (name, "etag") == 0) {
    if (is_entity_tag (v, vlen))
      copy_validator (&a->bad_etag, a->etag, sizeof a->etag, v, vlen);
    else
      a->bad_etag = true;
  }
  else if (a->last_was_digest)
    note_digest (a, name, v, vlen);
  else if (strcasecmp (name, "last-modified") == 0)
    copy_validator (&a->bad_last_modified, a->last_modified,
                    sizeof a->last_modified, v, vlen);
  return true;
}
