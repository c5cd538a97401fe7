/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Byte-range answers: Content-Range, copying the bytes of a range into the
 * reads that asked for them, and multipart/byteranges bodies.  A multipart
 * body (RFC 9110 14.6) answers a request for several ranges at once.
 *
 * A multipart body is parsed as it streams in, without buffering it:
 *
 *   [preamble] --BOUNDARY CRLF
 *   Content-Type: ... CRLF
 *   Content-Range: bytes FIRST-LAST/TOTAL CRLF
 *   CRLF
 *   (exactly LAST-FIRST+1 bytes) CRLF
 *   --BOUNDARY CRLF ... --BOUNDARY-- [CRLF epilogue]
 *
 * Each part's length comes from its own Content-Range, so the data is never
 * searched for the boundary.  A part must be exactly one of the ranges
 * asked for, of an object of the size found at start-up.  Each range must
 * come once.  Anything else makes the whole answer unusable, and the caller
 * then asks for the ranges one by one.  So bytes are never taken from a
 * part that does not match.
 *
 * The trap is the line break after a part's data.  It is the only check
 * that the part really had the length its Content-Range claims.  Take a
 * part one byte short under CRLF framing: it leaves "\n--BOUNDARY" after
 * the counted bytes, its CR counted as data.  Two bytes short leaves
 * "--BOUNDARY".  Taking either as a delimiter returns line-break bytes as
 * data.  So after exactly LAST-FIRST+1 bytes there must be exactly one line
 * break and then the delimiter line, nothing else.
 *
 * RFC 2046 says CRLF, and every real server sends it.  A bare LF is taken
 * too, but only consistently.  The line that opens the first part (the
 * first delimiter) sets the framing.  Every later line must end the same
 * way, above all the break after each part's data.  Without that rule,
 * "data ending in CR, then LF" and "one byte short, then CRLF" would be the
 * same bytes.  Preamble lines may end either way; they are ignored.  The
 * line break after the close delimiter is optional (RFC 2046 5.1.1).  So a
 * body may end right after "--BOUNDARY--".
 *
 * A part has exactly one Content-Range, "bytes FIRST-LAST/TOTAL" with
 * nothing after it.  No header line is folded onto the next, and no line
 * holds a NUL byte.  A line is handled as a C string, and two readings of a
 * part's range would leave the bytes' meaning to chance.
 *
 * The bytes of a part are copied into the reads as they arrive, before the
 * framing after them is seen.  A refused answer is read again range by
 * range, which overwrites them.
 */

#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "rules/rules.h"

/* Bounds on what is read and thrown away: nginx and Apache send two
 * part headers and no epilogue.
 */
#define MAX_PART_HEADERS 32
#define MAX_EPILOGUE (64 * 1024)

/* Parse the decimal number at p; -1 when there is none or it is too big. */
int64_t
ranges_number (const char *p, const char **end)
{
  int64_t n = 0;

  if (*p < '0' || *p > '9')
    return -1;
  for (; *p >= '0' && *p <= '9'; p++) {
    if (n > (INT64_MAX - 9) / 10)
      return -1;
    n = n * 10 + (*p - '0');
  }
  if (end)
    *end = p;
  return n;
}

/* Content-Range: bytes FIRST-LAST/TOTAL (RFC 9110 14.4); TOTAL may be '*',
 * returned as -1.
 */
bool
ranges_content_range (const char *v, uint64_t *first, uint64_t *last,
                     int64_t *total)
{
  const char *p;
  int64_t f, l, t = -1;

  if (strncasecmp (v, "bytes ", 6) != 0)
    return false;
  f = ranges_number (v + 6, &p);
  if (f == -1 || *p != '-')
    return false;
  l = ranges_number (p + 1, &p);
  if (l == -1 || l < f || *p != '/')
    return false;
  if (p[1] != '*') {
    t = ranges_number (p + 1, &p);
    if (t == -1 || l >= t)
      return false;
  }
  else
    p += 2;
  /* Nothing after it: "bytes 0-9/100, bytes 20-29/100" (two headers
   * joined by a proxy) is not the first of them.
   */
  if (*p != '\0')
    return false;
  *first = f;
  *last = l;
  *total = t;
  return true;
}

/* Copy bytes [pos, pos+len) of span s into every read that covers them.
 * Reads in a span may overlap (two clients asking for the same block).
 */
void
ranges_scatter (const struct span *s, uint64_t pos, const char *data,
              size_t len)
{
  uint64_t a = s->first + pos, b = a + len;
  uint64_t lo, hi;
  unsigned i;

  for (i = 0; i < s->nreqs; i++) {
    const struct read_req *r = s->reqs[i];

    lo = r->offset > a ? r->offset : a;
    hi = r->offset + r->count < b ? r->offset + r->count : b;
    if (lo < hi)
      memcpy (r->buf + (lo - r->offset), data + (lo - a), hi - lo);
  }
}

/* From "multipart/byteranges; boundary=XYZ" (the boundary may be quoted),
 * the boundary; false for any other type.  RFC 2046 5.1.1 limits a
 * boundary to 70 characters.
 */
bool
ranges_multipart_type (const char *v, char *boundary, size_t size)
{
  const char *p, *end;
  size_t n;

  if (strncasecmp (v, "multipart/byteranges", 20) != 0 ||
      (v[20] != '\0' && v[20] != ';' && v[20] != ' ' && v[20] != '\t'))
    return false;
  for (p = v + 20; (p = strchr (p, ';')) != NULL; ) {
    p++;
    p += strspn (p, " \t");
    if (strncasecmp (p, "boundary=", 9) != 0)
      continue;
    p += 9;
    if (*p == '"') {
      p++;
      end = strchr (p, '"');
      if (end == NULL)
        return false;
    }
    else
      end = p + strcspn (p, "; \t");
    n = end - p;
    if (n == 0 || n > 70 || n >= size)
      return false;
    memcpy (boundary, p, n);
    boundary[n] = '\0';
    return true;
  }
  return false;
}

void
ranges_multipart_start (struct multipart *mp, const char *boundary,
                 struct span *spans, unsigned nspans, int64_t total)
{
  unsigned i;

  memset (mp, 0, sizeof *mp);
  mp->state = MP_PREAMBLE;
  snprintf (mp->delim, sizeof mp->delim, "--%s", boundary);
  mp->spans = spans;
  mp->nspans = nspans;
  mp->total = total;
  for (i = 0; i < nspans; i++)
    spans[i].filled = false;
}

static bool
incomplete (struct multipart *mp, const char *why)
{
  snprintf (mp->why, sizeof mp->why, "multipart answer: %s", why);
  return false;
}

static bool
refuse (struct multipart *mp, const char *why)
{
  mp->refused = true;
  return incomplete (mp, why);
}

/* Is the line the delimiter, or the close delimiter ("--" after it)?
 * RFC 2046 allows white space after either.
 */
static int
delimiter (const struct multipart *mp, const char *line)
{
  size_t n = strlen (mp->delim);

  if (strncmp (line, mp->delim, n) != 0)
    return 0;
  line += n;
  if (strncmp (line, "--", 2) == 0) {
    line += 2;
    return line[strspn (line, " \t")] == '\0' ? 2 : 0;
  }
  return line[strspn (line, " \t")] == '\0' ? 1 : 0;
}

/* The part's headers ended: which span is it? */
static bool
part_start (struct multipart *mp)
{
  unsigned i;

  if (!mp->part_has_range)
    return refuse (mp, "a part without a valid Content-Range");
  if (mp->total >= 0 && mp->part_total != mp->total)
    return refuse (mp, "a part's Content-Range total is not the object's "
                   "size");
  for (i = 0; i < mp->nspans; i++) {
    struct span *s = &mp->spans[i];

    if (s->first == mp->part_first && s->last == mp->part_last) {
      if (s->filled)
        return refuse (mp, "a range sent twice");
      mp->cur = s;
      mp->pos = 0;
      mp->state = MP_DATA;
      return true;
    }
  }
  return refuse (mp, "a part that is not one of the ranges asked for");
}

static void
next_part (struct multipart *mp)
{
  mp->state = MP_HEADERS;
  mp->part_has_range = false;
  mp->part_range_seen = false;
  mp->header_lines = 0;
}

/* A line of a part's headers (MP_HEADERS); the empty line ends them. */
static bool
header_line (struct multipart *mp, char *line)
{
  char *v, *end;

  if (line[0] == '\0')
    return part_start (mp);
  /* A server can send header lines for ever; real parts have two. */
  if (++mp->header_lines > MAX_PART_HEADERS)
    return refuse (mp, "too many part headers");
  /* A folded header (RFC 5322 2.2.3) continues the one before: no
   * server folds, and a Content-Range without its continuation would
   * be misread.
   */
  if (line[0] == ' ' || line[0] == '\t')
    return refuse (mp, "a folded part header");
  v = strchr (line, ':');
  if (v == NULL)
    return refuse (mp, "a malformed part header");
  *v++ = '\0';
  v += strspn (v, " \t");
  for (end = v + strlen (v); end > v && (end[-1] == ' ' || end[-1] == '\t');)
    *--end = '\0';
  if (strcasecmp (line, "content-range") == 0) {
    /* Two could name two ranges: which one are the bytes? */
    if (mp->part_range_seen)
      return refuse (mp, "a part with two Content-Range headers");
    mp->part_range_seen = true;
    mp->part_has_range =
      ranges_content_range (v, &mp->part_first, &mp->part_last,
                           &mp->part_total);
  }
  return true;
}

/* A complete line, its line break removed; cr: it ended in CRLF. */
static bool
line_done (struct multipart *mp, char *line, bool cr)
{
  if (mp->state != MP_PREAMBLE && cr != mp->crlf)
    return refuse (mp, "line breaks of both CRLF and LF");

  switch (mp->state) {
  case MP_PREAMBLE:
    /* RFC 2046 allows a preamble; a few lines of it at most. */
    switch (delimiter (mp, line)) {
    case 1: break;
    case 2: return refuse (mp, "no parts");
    default:
      if (++mp->preamble_lines > 16)
        return refuse (mp, "no boundary where the first part should be");
      return true;
    }
    mp->crlf = cr;
    next_part (mp);
    return true;

  case MP_HEADERS:
    return header_line (mp, line);

  case MP_DELIM:
    /* The line right after the line break that ends the data. */
    switch (delimiter (mp, line)) {
    case 1:
      next_part (mp);
      return true;
    case 2:
      mp->state = MP_END;
      return true;
    default:
      return refuse (mp, "no boundary right after a part's data "
                     "(shorter than its Content-Range?)");
    }

  case MP_DATA:
  case MP_BREAK:
  case MP_END:
    break;
  }
  return true;
}

/* MP_DATA: up to the rest of the part's bytes, copied to its reads;
 * how many were taken.
 */
static size_t
take_data (struct multipart *mp, const char *data, size_t len)
{
  uint64_t want = mp->cur->last - mp->cur->first + 1 - mp->pos;
  size_t n = len < want ? len : want;

  ranges_scatter (mp->cur, mp->pos, data, n);
  mp->pos += n;
  if (mp->pos == mp->cur->last - mp->cur->first + 1) {
    mp->cur->filled = true;
    mp->nfilled++;
    mp->state = MP_BREAK;
    mp->breakpos = 0;
  }
  return n;
}

/* MP_BREAK: one byte of exactly the framing's line break (it may be
 * split between two calls).
 */
static bool
take_break (struct multipart *mp, char c)
{
  const char *brk = mp->crlf ? "\r\n" : "\n";

  if (c != brk[mp->breakpos])
    return refuse (mp, "no line break right after a part's data "
                   "(longer or shorter than its Content-Range?)");
  mp->breakpos++;
  if (brk[mp->breakpos] == '\0')
    mp->state = MP_DELIM;
  return true;
}

/* Lines (delimiters and part headers): up to the next line break, or
 * all of it when there is none; how many bytes were taken, or 0 for a
 * refused line.
 */
static size_t
take_line (struct multipart *mp, const char *data, size_t len)
{
  const char *nl = memchr (data, '\n', len);
  size_t n = nl ? (size_t) (nl - data) : len;
  bool cr;

  if (mp->linelen + n >= sizeof mp->line) {
    refuse (mp, "a line too long");
    return 0;
  }
  memcpy (mp->line + mp->linelen, data, n);
  mp->linelen += n;
  if (nl == NULL)
    return n;
  if (memchr (mp->line, '\0', mp->linelen) != NULL) {
    refuse (mp, "a NUL byte in a line");
    return 0;
  }
  cr = mp->linelen > 0 && mp->line[mp->linelen - 1] == '\r';
  if (cr)
    mp->linelen--;
  mp->line[mp->linelen] = '\0';
  mp->linelen = 0;
  return line_done (mp, mp->line, cr) ? n + 1 : 0;
}

bool
ranges_multipart_feed (struct multipart *mp, const char *data, size_t len)
{
  size_t n;

  while (len > 0 && !mp->refused) {
    switch (mp->state) {
    case MP_DATA:
      n = take_data (mp, data, len);
      break;
    case MP_BREAK:
      n = take_break (mp, *data) ? 1 : 0;
      break;
    case MP_END:
      /* The epilogue is ignored, but not read for ever. */
      mp->epilogue += len;
      if (mp->epilogue > MAX_EPILOGUE)
        return refuse (mp, "an epilogue that does not end");
      return true;
    default:
      n = take_line (mp, data, len);
      break;
    }
    data += n;
    len -= n;
  }
  return !mp->refused;
}

/* At the end of the body: was every range received?  A body that ended
 * early is not refused as a body (that would outrank how the transfer
 * ended: a reset connection is retried, a shutdown stops); complete
 * stays false and why says what is missing.
 */
bool
ranges_multipart_complete (struct multipart *mp)
{
  if (mp->refused)
    return false;               /* keep the first reason */
  /* The close delimiter need not end with a line break. */
  if (mp->state == MP_DELIM && mp->linelen > 0 &&
      memchr (mp->line, '\0', mp->linelen) == NULL) {
    mp->line[mp->linelen] = '\0';
    if (delimiter (mp, mp->line) == 2)
      mp->state = MP_END;
  }
  if (mp->state != MP_END)
    return incomplete (mp, "the body ended before the close delimiter");
  if (mp->nfilled != mp->nspans)
    return incomplete (mp, "ranges missing");
  mp->complete = true;
  return true;
}
