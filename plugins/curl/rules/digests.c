/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * checksum=ALGO:HEX, the digest the user expects of the object.
 * read/checksum.c computes the object's own.  Here is the parser of the
 * value, and the check of the digests a server states in the probe's
 * answers.  A server that states another digest for the object serves
 * another object: it is refused at start-up, before any read.  The digests
 * read are RFC 9530's Repr-Digest, RFC 3230's Digest, S3's
 * x-amz-checksum-*, Google's x-goog-hash, and Content-MD5 of a whole
 * answer.  ops/mirrors.c also compares here what url= and a mirror state
 * (digests_agree).  The digest wanted comes as an argument: no global is
 * read here.
 */

#include <config.h>

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>

#include <nbdkit-plugin.h>

#include "rules/rules.h"

static const char *const algos[] = { "sha256", "sha512", "md5" };

static int
hex_value (char c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

void
digests_hex (const unsigned char *d, unsigned n, char *out)
{
  unsigned i;

  for (i = 0; i < n; i++)
    sprintf (out + 2 * i, "%02x", d[i]);
  out[2 * n] = '\0';
}

/* checksum=: value parsed into *w, or -1 with an error that says what
 * was expected.
 */
int
digests_parse (const char *value, struct checksum_want *w)
{
  const char *colon = strchr (value, ':'), *hex, *algo;
  const EVP_MD *md;
  size_t i, n;

  for (i = 0; colon != NULL && i < sizeof algos / sizeof algos[0]; i++)
    if (is_word (algos[i], value, colon - value))
      break;
  if (colon == NULL || i == sizeof algos / sizeof algos[0]) {
    nbdkit_error ("checksum: expected ALGO:HEX with ALGO sha256, sha512 "
                  "or md5, not '%s'", value);
    return -1;
  }
  algo = algos[i];
  md = EVP_get_digestbyname (algo);
  if (md == NULL || EVP_MD_get_size (md) > (int) sizeof w->digest) {
    nbdkit_error ("checksum: this OpenSSL has no %s", algo);
    return -1;
  }
  w->len = EVP_MD_get_size (md);
  hex = colon + 1;
  n = strlen (hex);
  if (n != 2 * w->len) {
    nbdkit_error ("checksum: a %s digest is %u hex digits, not %zu",
                  algo, 2 * w->len, n);
    return -1;
  }
  for (i = 0; i < w->len; i++) {
    int hi = hex_value (hex[2 * i]), lo = hex_value (hex[2 * i + 1]);

    if (hi < 0 || lo < 0) {
      nbdkit_error ("checksum: '%c%c' is not a pair of hex digits",
                    hex[2 * i], hex[2 * i + 1]);
      return -1;
    }
    w->digest[i] = hi << 4 | lo;
  }
  w->algo = algo;
  return 0;
}

/* Whether a digest header's name for an algorithm (RFC 9530's and RFC
 * 3230's "sha-256", the suffix of S3's x-amz-checksum-sha256) is algo.
 */
static bool
is_algo (const char *algo, const char *name, size_t n)
{
  static const struct { const char *algo, *names[2]; } spell[] = {
    { "sha256", { "sha-256", "sha256" } },
    { "sha512", { "sha-512", "sha512" } },
    { "md5", { "md5", "md5" } },
  };
  size_t i, k;

  for (i = 0; i < sizeof spell / sizeof spell[0]; i++)
    for (k = 0; k < 2; k++)
      if (strcmp (spell[i].algo, algo) == 0 &&
          is_word (spell[i].names[k], name, n))
        return true;
  return false;
}

/* A digest stated in base64 (RFC 9530 puts it between colons; the URL
 * alphabet and missing padding are taken too) decoded into raw: its
 * length when it is one of algo (size bytes), else 0: one that cannot
 * be read, or is not of the object (S3's composite checksums, "...-N"),
 * is left aside.
 */
static unsigned
decode_stated (const char *header, const char *algo, unsigned size,
               const char *v, size_t n, unsigned char *raw)
{
  char b64[129];
  int len;
  size_t i;

  /* RFC 9530's parameters (";p=1") are not the digest. */
  if (memchr (v, ';', n) != NULL)
    n = (const char *) memchr (v, ';', n) - v;
  while (n > 0 && (*v == ' ' || *v == '\t' || *v == ':'))
    v++, n--;
  while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == ':'))
    n--;
  if (strncasecmp (header, "x-amz-", 6) == 0 && memchr (v, '-', n) != NULL)
    return 0;                   /* S3's checksum of parts: not ours */
  if (n == 0 || n + 3 >= sizeof b64) {
    nbdkit_debug ("digests: %s: its %s is not base64: left aside",
                  header, algo);
    return 0;
  }
  for (i = 0; i < n; i++)
    b64[i] = v[i] == '-' ? '+' : v[i] == '_' ? '/' : v[i];
  while (n % 4 != 0)
    b64[n++] = '=';
  b64[n] = '\0';
  len = EVP_DecodeBlock (raw, (unsigned char *) b64, n);
  if (len > 0 && b64[n - 1] == '=')
    len -= b64[n - 2] == '=' ? 2 : 1;
  if (len != (int) size) {
    nbdkit_debug ("digests: %s: not a %s digest: left aside", header, algo);
    return 0;
  }
  return size;
}

/* Each digest of the object that the headers in digests state ("name:
 * value" lines, see struct answer), handed to fn with its algorithm and
 * the whole value of its header, in their order: -1 when fn returns -1,
 * else 0.
 */
typedef int (*stated_fn) (const char *header, const char *value,
                          const char *algo, const unsigned char *raw,
                          unsigned len, void *opaque);

/* One header's value, "name:value" cut at the colon, in every algorithm. */
static int
each_in_header (const char *name, const char *v, stated_fn fn, void *opaque)
{
  unsigned char raw[3 * 128 / 4 + 3];
  size_t i;

  for (i = 0; i < sizeof algos / sizeof algos[0]; i++) {
    const char *algo = algos[i], *p = v, *a = NULL;
    const EVP_MD *md = EVP_get_digestbyname (algo);
    unsigned size = md != NULL ? EVP_MD_get_size (md) : 0, got;

    if (size == 0 || size > 64)
      continue;
    if (strncasecmp (name, "x-amz-checksum-", 15) == 0)
      a = name + 15;
    else if (strcasecmp (name, "content-md5") == 0)
      a = "md5";
    if (a != NULL) {
      got = is_algo (algo, a, strlen (a))
        ? decode_stated (name, algo, size, v, strlen (v), raw) : 0;
      if (got > 0 && fn (name, v, algo, raw, got, opaque) == -1)
        return -1;
      continue;
    }
    /* A list of ALGO=DIGEST: Repr-Digest, Digest, x-goog-hash. */
    while (*p != '\0') {
      size_t n = strcspn (p, ","), k;
      const char *eq;

      while (n > 0 && (*p == ' ' || *p == '\t'))
        p++, n--;
      eq = memchr (p, '=', n);
      if (eq != NULL) {
        for (k = eq - p; k > 0 && (p[k - 1] == ' ' || p[k - 1] == '\t');)
          k--;
        got = is_algo (algo, p, k)
          ? decode_stated (name, algo, size, eq + 1, n - (eq + 1 - p), raw)
          : 0;
        if (got > 0 && fn (name, v, algo, raw, got, opaque) == -1)
          return -1;
      }
      p += n;
      if (*p == ',')
        p++;
    }
  }
  return 0;
}

static int
each_stated (const char *digests, stated_fn fn, void *opaque)
{
  char line[DIGESTS_SIZE];

  while (*digests != '\0') {
    size_t n = strcspn (digests, "\n");
    char *colon;

    snprintf (line, sizeof line, "%.*s", (int) n, digests);
    digests += n + (digests[n] == '\n');
    colon = strchr (line, ':');
    if (colon == NULL)
      continue;
    *colon++ = '\0';
    if (each_in_header (line, colon, fn, opaque) == -1)
      return -1;
  }
  return 0;
}

/* A stated digest against checksum='s: -1 (reported) if they differ. */
static int
against_wanted (const char *header, const char *value, const char *algo,
                const unsigned char *raw, unsigned len, void *opaque)
{
  const struct checksum_want *w = opaque;
  char want_hex[2 * sizeof w->digest + 1], got_hex[sizeof want_hex];

  (void) value;
  if (strcmp (algo, w->algo) != 0)
    return 0;
  if (memcmp (raw, w->digest, len) == 0) {
    nbdkit_debug ("checksum: the server's %s agrees", header);
    return 0;
  }
  digests_hex (w->digest, w->len, want_hex);
  digests_hex (raw, len, got_hex);
  nbdkit_error ("checksum: the server's %s gives the object's %s as %s, "
                "not %s as checksum= does: not the object expected",
                header, w->algo, got_hex, want_hex);
  return -1;
}

/* The probe's answers' digest headers (cut: some did not fit) against
 * checksum=: -1 (reported) when one states another digest for the
 * object, or some could not be kept.
 */
int
digests_check (const struct checksum_want *w, const char *digests, bool cut)
{
  if (w->algo == NULL)
    return 0;
  if (cut) {
    nbdkit_error ("checksum: some of the server's digest headers could "
                  "not be read (over %d bytes in all, a line over 1 KiB, "
                  "a folded line, or a space before the colon): one that "
                  "states another digest could be among them", DIGESTS_SIZE);
    return -1;
  }
  return each_stated (digests, against_wanted, (void *) w);
}

/* A mirror's digest header that states checksum='s digest: the
 * "name:value" line its answers must carry (its pin, struct pin).
 */
struct pin_line {
  const struct checksum_want *w;
  char *line;
  size_t size;
};

static int
is_wanted (const char *header, const char *value, const char *algo,
           const unsigned char *raw, unsigned len, void *opaque)
{
  struct pin_line *p = opaque;

  if (strcmp (algo, p->w->algo) != 0 || len != p->w->len ||
      memcmp (raw, p->w->digest, len) != 0)
    return 0;
  snprintf (p->line, p->size, "%s:%s", header, value);
  return -1;                    /* found: no need to look further */
}

/* Whether the digest headers of a mirror's answer (mirrors.c) state
 * checksum='s digest: 1, with the header's line in line (size bytes),
 * else 0.  That they state no other is digests_check'.
 */
int
digests_state_wanted (const struct checksum_want *w, const char *digests,
                      char *line, size_t size)
{
  struct pin_line p = { .w = w, .line = line, .size = size };

  line[0] = '\0';
  if (w->algo == NULL)
    return 0;
  (void) each_stated (digests, is_wanted, &p);
  return line[0] != '\0';
}

/* What two sources' digest headers say of each other (mirrors.c). */
struct agreeing {
  const char *other;            /* the other source's digest headers */
  const char *header, *algo;    /* the header of ours being compared */
  const unsigned char *raw;
  unsigned len;
  int verdict;                  /* 1: one agrees, -1: one differs */
  char *why;
  size_t size;
  struct pin_line pin;          /* the other's line that agrees */
};

static int
against_other (const char *header, const char *value, const char *algo,
               const unsigned char *raw, unsigned len, void *opaque)
{
  struct agreeing *g = opaque;

  if (strcmp (algo, g->algo) != 0)
    return 0;
  if (len == g->len && memcmp (raw, g->raw, len) == 0) {
    if (g->verdict == 0) {
      g->verdict = 1;
      snprintf (g->why, g->size, "the same %s in %s", algo, header);
      snprintf (g->pin.line, g->pin.size, "%s:%s", header, value);
    }
    return 0;
  }
  g->verdict = -1;
  snprintf (g->why, g->size, "its %s states another %s than url='s %s",
            header, algo, g->header);
  return -1;
}

static int
each_of_ours (const char *header, const char *value, const char *algo,
              const unsigned char *raw, unsigned len, void *opaque)
{
  struct agreeing *g = opaque;

  (void) value;
  g->header = header;
  g->algo = algo;
  g->raw = raw;
  g->len = len;
  return each_stated (g->other, against_other, g);
}

/* Whether the digest headers a (url='s) and b (a mirror's) state the
 * same digest of the object: 1 (some algorithm both state agrees, and
 * none differs), -1 (one differs), 0 (none in common); why says which.
 * On 1, pin (pin_size bytes) holds b's line that agrees, "name:value":
 * the mirror's answers must all carry it (struct pin).
 */
int
digests_agree (const char *a, const char *b, char *why, size_t size,
               char *pin, size_t pin_size)
{
  struct agreeing g = { .other = b, .why = why, .size = size,
                        .pin = { .line = pin, .size = pin_size } };

  why[0] = '\0';
  pin[0] = '\0';
  (void) each_stated (a, each_of_ours, &g);
  return g.verdict;
}
