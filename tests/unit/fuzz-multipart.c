/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * fuzz-multipart: seeded random mutation of multipart/byteranges answers
 * fed to the plugin's parser (plugins/curl/rules/ranges.c, linked in
 * alone: no nbdkit, no network).
 *
 *   fuzz-multipart [-v] [SEED [COUNT [FIRST]]]
 *
 * runs the named cases, then random cases FIRST .. FIRST+COUNT-1 of SEED
 * (defaults 1, 10000, 0).  A case's random numbers come from SEED and its
 * number alone, so "fuzz-multipart -v SEED 1 CASE" repeats one case and
 * says what it did.  A failure names the seed and the case, leaves the
 * answer in fuzz-multipart-SEED-CASE.body, and the exit status is 1.
 *
 * A case is a random object, 2-32 non-overlapping ranges of it, reads
 * over those ranges (some overlapping each other), and a legal answer:
 * parts in random order, a random boundary, CRLF or bare LF framing,
 * optional preamble, transport padding, epilogue and final line break.
 * Most cases then get one to four mutations (see mutate).  The answer
 * goes to ranges_multipart_feed in pieces of random sizes, as libcurl
 * would hand it over.
 *
 * The mutations touch only framing, headers and part lengths, never the
 * bytes inside a part's data: a part whose bytes are changed is framed
 * correctly and carries other bytes, and no parser can see that (HTTP
 * has no checksum).  Likewise a part relabelled as another range (both
 * numbers of its Content-Range changed) would carry the wrong bytes
 * undetectably if its length still fitted; the ranges of a case have
 * distinct lengths so that it never does.
 *
 * The oracle: the parser refuses (ranges_multipart_feed or
 * ranges_multipart_complete false, with a reason); or the answer follows
 * the rule in the comment at the top of ranges.c, as judged again by
 * ref_parse (simpler code that sees the whole body at once), and every
 * read's buffer holds the bytes that the answer carries for it.  Those
 * are the object's bytes, except when mutations together amount to
 * changing data bytes after all: a part made 2 bytes short plus a CRLF
 * more before its data is a legal answer whose data starts with CRLF.
 * Such cases are counted ("legal but carrying other bytes"), not failed:
 * the same trap as above.  An unmutated answer and the named cases must
 * give the object's bytes; named cases that break the rule must be
 * refused.
 *
 * Half the object's bytes are CR, LF or '-', so that data often ends in
 * a line break or looks like a delimiter: the ambiguous cases.  The
 * bytes after the object (a part made longer at its end) are junk of the
 * same kind.
 */

#include <config.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "rules/rules.h"

#define MAX_RANGES 32
#define MAX_PIECES 2048
#define TEXT_MAX 160
#define TAIL 16                 /* junk bytes after the object */

static bool verbose;

/* splitmix64: small, and good enough to pick mutations. */
static uint64_t rng_state;

static uint64_t
rnd (void)
{
  uint64_t z = (rng_state += UINT64_C (0x9e3779b97f4a7c15));

  z = (z ^ (z >> 30)) * UINT64_C (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C (0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* A number in [0, n). */
static uint64_t
below (uint64_t n)
{
  return n ? rnd () % n : 0;
}

static bool
one_in (unsigned n)
{
  return below (n) == 0;
}

/* The answer is a list of pieces, so that mutations can change a line,
 * a line break or a part's length and the body is laid out afterwards.
 */
enum role {
  R_TEXT,                       /* a line's text, or part of it */
  R_NL,                         /* a line break */
  R_NL_DATA,                    /* the line break right after a part's data */
  R_CR_VALUE,                   /* a Content-Range value */
  R_DATA,                       /* a part's bytes: never mutated */
};

struct piece {
  enum role role;
  int part;                     /* block number, -1 outside the parts */
  char text[TEXT_MAX];          /* may hold NUL bytes: */
  size_t tlen;                  /* its length */
  uint64_t off, len;            /* R_DATA: bytes off .. off+len-1 */
};

struct mp_answer {
  struct piece p[MAX_PIECES];
  unsigned n;
  int nparts;                   /* blocks made so far, numbers for dups */
};

struct fuzz_case {
  uint64_t size;
  char *obj;                    /* size + TAIL bytes */
  unsigned nranges;
  struct span spans[MAX_RANGES];
  struct read_req reqs[MAX_RANGES * 3];
  struct read_req *reqp[MAX_RANGES * 3];
  unsigned nreqs;
  char boundary[72];            /* what the parser is told */
  int64_t total;                /* expected total, -1 unknown */
  const char *nl;               /* the framing */
  struct mp_answer a;
  char *body;
  size_t bodylen;
  char what[512];               /* the mutations, for -v and failures */
};

/* Named cases beyond part lengths: the rules of the comment at the top
 * of ranges.c one by one.
 */
enum special {
  S_NONE,
  S_TWO_RANGES_SAME,            /* a part's Content-Range twice */
  S_TWO_RANGES_OTHER,           /* another range's, then its own */
  S_RANGE_GARBAGE,              /* "bytes F-L/T, bytes 0-0/1" */
  S_FOLDED_HEADER,              /* "X-Note: a" CRLF " b: c" */
  S_FOLDED_RANGE,               /* "Content-Range:" CRLF " bytes ..." */
  S_NUL_DELIMITER,              /* "--BOUNDARY" NUL "x" */
  S_NUL_RANGE,                  /* "bytes F-L/T" NUL "x" */
  S_NO_FINAL_BREAK,             /* legal: the body ends in "--BOUNDARY--" */
  S_LAST
};

/* Options of the named cases; zero for a random case. */
struct named {
  const char *name;
  int nl;                       /* 1 CRLF, 2 LF */
  int delta;                    /* bytes added to one part */
  int which;                    /* that part: 1 first, 2 middle, 3 last */
  int edge;                     /* the bytes at and after each range's end:
                                 * 1 CR, 2 LF, 3 CRLF, 4 the framing's line
                                 * break after the range */
  enum special special;
  bool must_accept;
};

static void
note (struct fuzz_case *c, const char *what)
{
  size_t n = strlen (c->what);

  snprintf (c->what + n, sizeof c->what - n, "%s ", what);
}

static void
set_text (struct piece *p, const char *text)
{
  snprintf (p->text, sizeof p->text, "%s", text);
  p->tlen = strlen (p->text);
}

static void
add (struct mp_answer *a, enum role role, int part, const char *text)
{
  struct piece *p;

  if (a->n >= MAX_PIECES)
    return;
  p = &a->p[a->n++];
  memset (p, 0, sizeof *p);
  p->role = role;
  p->part = part;
  set_text (p, text);
}

static void
add_data (struct mp_answer *a, int part, uint64_t off, uint64_t len)
{
  add (a, R_DATA, part, "");
  a->p[a->n - 1].off = off;
  a->p[a->n - 1].len = len;
}

static const char bchars[] =
  "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'()+_,-./:=?";

/* A byte that framing is made of, or any byte. */
static char
nasty_byte (void)
{
  static const char nasty[] = "\r\n- \t:-0123456789";

  if (one_in (4))
    return (char) below (256);
  return nasty[below (sizeof nasty - 1)];
}

static const char *
random_padding (void)
{
  static const char *pads[] = { " ", "\t", "  \t" };

  return one_in (6) ? pads[below (3)] : "";
}

/* A distinct length for each range: mostly short, some long. */
static uint64_t
range_length (const struct fuzz_case *c, unsigned i)
{
  unsigned tries, j;
  uint64_t len = 1;

  for (tries = 0; tries < 1000; tries++) {
    len = one_in (3) ? 1 + below (8) : 1 + below (2048);
    for (j = 0; j < i; j++)
      if (c->spans[j].last - c->spans[j].first + 1 == len)
        break;
    if (j == i)
      return len;
  }
  return 4096 + i;              /* cannot happen twice */
}

/* The object, the ranges and the reads over them. */
static void
make_object (struct fuzz_case *c, const struct named *nm)
{
  static const char junk[] = "\r\n-";
  uint64_t pos = below (64), i, k;
  unsigned r;

  c->nranges = 2 + below (MAX_RANGES - 1);
  for (r = 0; r < c->nranges; r++) {
    uint64_t len = range_length (c, r);

    c->spans[r].first = pos;
    c->spans[r].last = pos + len - 1;
    pos += len;
    if (!one_in (4))
      pos += 1 + below (512);
  }
  c->size = pos + (one_in (3) ? 0 : below (64));
  c->obj = malloc (c->size + TAIL);
  if (c->obj == NULL) {
    perror ("malloc");
    exit (2);
  }
  for (i = 0; i < c->size + TAIL; i++)
    c->obj[i] = one_in (2) ? (char) below (256) : junk[below (3)];

  /* The named cases' bytes at the end of each range and after it. */
  for (r = 0; nm && nm->edge && r < c->nranges; r++) {
    uint64_t l = c->spans[r].last;

    switch (nm->edge) {
    case 1: c->obj[l] = '\r'; break;
    case 2: c->obj[l] = '\n'; break;
    case 3:
      c->obj[l] = '\n';
      if (l > c->spans[r].first)
        c->obj[l - 1] = '\r';
      break;
    case 4:
      for (k = 0; k < 2; k++)
        c->obj[l + 1 + k] = c->nl[k % strlen (c->nl)];
      break;
    }
  }

  /* Each range: one read over all of it, sometimes one or two more
   * over part of it (two clients reading the same block).
   */
  c->nreqs = 0;
  for (r = 0; r < c->nranges; r++) {
    struct span *s = &c->spans[r];
    uint64_t len = s->last - s->first + 1;
    unsigned n = 1 + (one_in (3) ? below (3) : 0), j;

    s->reqs = &c->reqp[c->nreqs];
    s->nreqs = n;
    for (j = 0; j < n; j++) {
      struct read_req *q = &c->reqs[c->nreqs];
      uint64_t a = 0, b = len;

      if (j > 0) {
        a = below (len);
        b = a + 1 + below (len - a);
      }

      memset (q, 0, sizeof *q);
      q->offset = s->first + a;
      q->count = b - a;
      q->buf = malloc (q->count);
      if (q->buf == NULL) {
        perror ("malloc");
        exit (2);
      }
      /* Never the right bytes, so an unfilled buffer shows. */
      for (k = 0; k < q->count; k++)
        q->buf[k] = ~c->obj[q->offset + k];
      c->reqp[c->nreqs++] = q;
    }
  }
}

static void
content_range (char *out, size_t size, uint64_t first, uint64_t last,
               const char *total)
{
  snprintf (out, size, "bytes %" PRIu64 "-%" PRIu64 "/%s", first, last,
            total);
}

/* One part (a block): delimiter line, headers, blank line, data, the
 * line break after the data.
 */
static void
add_part (struct fuzz_case *c, unsigned r, const char *total)
{
  struct mp_answer *a = &c->a;
  int part = a->nparts++;
  char line[TEXT_MAX];
  unsigned h, order = below (3);

  snprintf (line, sizeof line, "--%s%s", c->boundary, random_padding ());
  add (a, R_TEXT, part, line);
  add (a, R_NL, part, c->nl);
  for (h = 0; h < 3; h++) {
    switch ((h + order) % 3) {
    case 0:
      if (!one_in (4)) {
        add (a, R_TEXT, part, "Content-Type: application/octet-stream");
        add (a, R_NL, part, c->nl);
      }
      break;
    case 1:
      add (a, R_TEXT, part,
           one_in (4) ? "content-range:" : one_in (3) ? "CONTENT-RANGE:  "
           : "Content-Range: ");
      content_range (line, sizeof line, c->spans[r].first, c->spans[r].last,
                     total);
      add (a, R_CR_VALUE, part, line);
      add (a, R_NL, part, c->nl);
      break;
    case 2:
      if (one_in (5)) {
        add (a, R_TEXT, part, "X-Note: --not-a-boundary");
        add (a, R_NL, part, c->nl);
      }
      break;
    }
  }
  add (a, R_NL, part, c->nl);
  add_data (a, part, c->spans[r].first,
            c->spans[r].last - c->spans[r].first + 1);
  add (a, R_NL_DATA, part, c->nl);
}

static void
make_answer (struct fuzz_case *c, const struct named *nm)
{
  struct mp_answer *a = &c->a;
  unsigned order[MAX_RANGES], i, j, t, len;
  char total[32], line[TEXT_MAX];

  a->n = 0;
  a->nparts = 0;
  len = 1 + below (70);
  for (i = 0; i < len; i++)
    c->boundary[i] = bchars[below (sizeof bchars - 1)];
  c->boundary[len] = '\0';
  if (c->total >= 0 || !one_in (2))
    snprintf (total, sizeof total, "%" PRIu64, c->size);
  else
    snprintf (total, sizeof total, "*");

  /* Preamble: none, an empty line (nginx), or a few lines ending in
   * either line break.
   */
  switch (below (3)) {
  case 1:
    add (a, R_NL, -1, c->nl);
    break;
  case 2:
    for (i = below (3) + 1; i > 0; i--) {
      add (a, R_TEXT, -1, one_in (2) ? "This is a preamble." : "-- x --");
      add (a, R_NL, -1, one_in (2) ? "\r\n" : "\n");
    }
    break;
  }

  for (i = 0; i < c->nranges; i++)
    order[i] = i;
  for (i = c->nranges - 1; i > 0; i--) {
    j = below (i + 1);
    t = order[i], order[i] = order[j], order[j] = t;
  }
  for (i = 0; i < c->nranges; i++) {
    unsigned r = order[i];

    add_part (c, r, total);
    /* The named cases: one part longer or shorter than it says. */
    if (nm && nm->delta &&
        ((nm->which == 1 && i == 0) ||
         (nm->which == 2 && i == c->nranges / 2) ||
         (nm->which == 3 && i == c->nranges - 1))) {
      struct piece *d = &a->p[a->n - 2];

      if (nm->delta < 0 && d->len <= (uint64_t) -nm->delta)
        d->len = 0;
      else
        d->len += nm->delta;
    }
  }

  snprintf (line, sizeof line, "--%s--%s", c->boundary, random_padding ());
  add (a, R_TEXT, -1, line);
  /* RFC 2046 5.1.1: the line break after the close delimiter is
   * optional.
   */
  if (nm ? nm->special == S_NO_FINAL_BREAK : one_in (8))
    return;
  add (a, R_NL, -1, c->nl);
  if (one_in (4)) {
    add (a, R_TEXT, -1, "This is the epilogue.");
    add (a, R_NL, -1, c->nl);
  }
}

/* A random piece of one of the roles (a bit mask of 1 << role);
 * -1 if none.
 */
static int
pick (const struct mp_answer *a, unsigned roles)
{
  unsigned i, n = 0;
  int chosen = -1;

  for (i = 0; i < a->n; i++)
    if (roles & (1u << a->p[i].role))
      if (below (++n) == 0)
        chosen = i;
  return chosen;
}

/* The pieces of block part: [*start, *end). */
static bool
block (const struct mp_answer *a, int part, unsigned *start, unsigned *end)
{
  unsigned i;

  for (i = 0; i < a->n && a->p[i].part != part; i++)
    ;
  if (i == a->n)
    return false;
  *start = i;
  for (; i < a->n && a->p[i].part == part; i++)
    ;
  *end = i;
  return true;
}

/* A random block's number, -1 if none is left. */
static int
pick_part (const struct mp_answer *a)
{
  int i = pick (a, 1u << R_DATA);

  return i < 0 ? -1 : a->p[i].part;
}

#define FRAMING ((1u << R_TEXT) | (1u << R_NL) | (1u << R_NL_DATA) | \
                 (1u << R_CR_VALUE))

/* One mutation of the answer (or of what the parser is told).  Returns
 * true if the body must be cut short after layout.
 */
static bool
mutate (struct fuzz_case *c)
{
  struct mp_answer *a = &c->a;
  struct piece *p;
  unsigned s, e, s2, e2, i, k;
  char tmp[TEXT_MAX];
  int x, part;

  switch (below (14)) {
  case 0:                       /* replace a framing byte */
    x = pick (a, FRAMING);
    if (x < 0 || a->p[x].tlen == 0)
      break;
    p = &a->p[x];
    p->text[below (p->tlen)] = nasty_byte ();
    note (c, "flip");
    break;

  case 1:                       /* insert a byte into framing */
    x = pick (a, FRAMING);
    if (x < 0 || a->p[x].tlen + 2 >= TEXT_MAX)
      break;
    p = &a->p[x];
    i = below (p->tlen + 1);
    memmove (p->text + i + 1, p->text + i, p->tlen - i + 1);
    p->text[i] = nasty_byte ();
    p->tlen++;
    note (c, "insert");
    break;

  case 2:                       /* delete a framing byte */
    x = pick (a, FRAMING);
    if (x < 0 || a->p[x].tlen == 0)
      break;
    p = &a->p[x];
    i = below (p->tlen);
    memmove (p->text + i, p->text + i + 1, p->tlen - i);
    p->tlen--;
    note (c, "delete");
    break;

  case 3: {                     /* change a Content-Range number */
    uint64_t f, l, other;
    const char *tot;
    char totbuf[32];

    x = pick (a, 1u << R_CR_VALUE);
    if (x < 0)
      break;
    p = &a->p[x];
    if (sscanf (p->text, "bytes %" SCNu64 "-%" SCNu64, &f, &l) != 2)
      break;
    tot = strchr (p->text, '/');
    snprintf (totbuf, sizeof totbuf, "%s", tot ? tot + 1 : "*");
    other = one_in (2) ? c->spans[below (c->nranges)].first
      : c->spans[below (c->nranges)].last;
    switch (below (7)) {
    case 0: f += 1 + below (2); break;
    case 1: f -= f ? 1 : 0; l -= l > f ? 1 : 0; break;
    case 2: l += 1 + below (2); break;
    case 3: l = l > f ? l - 1 - below (l - f) : l; break;
    case 4: if (one_in (2)) f = other; else l = other; break;
    case 5:
      snprintf (totbuf, sizeof totbuf, "%" PRIu64,
                c->size + (one_in (2) ? 1 : -1));
      break;
    case 6:
      snprintf (totbuf, sizeof totbuf, "%s",
                one_in (2) ? "99999999999999999999" : "*");
      break;
    }
    content_range (tmp, sizeof tmp, f, l, totbuf);
    set_text (p, tmp);
    note (c, "number");
    break;
  }

  case 4:                       /* a part shorter than it says */
    x = pick (a, 1u << R_DATA);
    if (x < 0)
      break;
    p = &a->p[x];
    k = one_in (3) ? 1 + below (p->len) : 1 + below (3);
    p->len = k >= p->len ? 0 : p->len - k;
    note (c, "short");
    break;

  case 5:                       /* longer: the object's next bytes */
    x = pick (a, 1u << R_DATA);
    if (x < 0)
      break;
    p = &a->p[x];
    k = 1 + below (3);
    if (p->off + p->len + k <= c->size + TAIL)
      p->len += k;
    note (c, "long");
    break;

  case 6:                       /* a part twice */
    part = pick_part (a);
    if (part < 0 || !block (a, part, &s, &e) ||
        a->n + (e - s) > MAX_PIECES)
      break;
    /* After a random block, or before the close delimiter. */
    x = pick_part (a);
    if (x < 0 || !block (a, x, &s2, &e2))
      break;
    k = e - s;
    memmove (&a->p[e2 + k], &a->p[e2], (a->n - e2) * sizeof a->p[0]);
    a->n += k;
    if (s >= e2) {
      s += k;
      e += k;
    }
    for (i = 0; i < k; i++) {
      a->p[e2 + i] = a->p[s + i];
      a->p[e2 + i].part = a->nparts;
    }
    a->nparts++;
    note (c, "dup");
    break;

  case 7:                       /* a part left out */
    part = pick_part (a);
    if (part < 0 || !block (a, part, &s, &e))
      break;
    memmove (&a->p[s], &a->p[e], (a->n - e) * sizeof a->p[0]);
    a->n -= e - s;
    note (c, "drop");
    break;

  case 8:                       /* change a line break */
    x = pick (a, (1u << R_NL) | (1u << R_NL_DATA));
    if (x < 0)
      break;
    p = &a->p[x];
    {
      static const char *nls[] = { "\r\n", "\n", "", "\r", "\r\n\r\n",
                                   "\n\n", "\r\r\n", " \r\n" };

      set_text (p, nls[below (8)]);
    }
    note (c, p->role == R_NL_DATA ? "nl-after-data" : "nl");
    break;

  case 9:                       /* the boundary the parser is told */
    i = strlen (c->boundary);
    switch (below (3)) {
    case 0: if (i > 1) c->boundary[i - 1] = '\0'; break;
    case 1:
      if (i < 70) {
        c->boundary[i] = 'x';
        c->boundary[i + 1] = '\0';
      }
      break;
    case 2: c->boundary[below (i)] ^= 1; break;
    }
    note (c, "boundary");
    break;

  case 10:                      /* the body cut short */
    note (c, "truncate");
    return true;

  case 11:                      /* a Content-Range header less, or more */
    x = pick (a, 1u << R_CR_VALUE);
    if (x < 0 || a->n + 3 > MAX_PIECES)
      break;
    if (one_in (2)) {           /* remove name, value, line break */
      memmove (&a->p[x - 1], &a->p[x + 2],
               (a->n - x - 2) * sizeof a->p[0]);
      a->n -= 3;
      note (c, "no-content-range");
      break;
    }
    memmove (&a->p[x + 2 + 3], &a->p[x + 2],
             (a->n - x - 2) * sizeof a->p[0]);
    a->n += 3;
    for (i = 0; i < 3; i++)
      a->p[x + 2 + i] = a->p[x - 1 + i];
    if (one_in (2)) {
      i = below (c->nranges);
      content_range (tmp, sizeof tmp, c->spans[i].first, c->spans[i].last,
                     "*");
      set_text (&a->p[x + 3], tmp);
    }
    note (c, "two-content-ranges");
    break;

  case 12:                      /* something after the Content-Range */
    x = pick (a, 1u << R_CR_VALUE);
    if (x < 0)
      break;
    p = &a->p[x];
    snprintf (tmp, sizeof tmp, "%s%s", p->text,
              one_in (2) ? " x" : ", bytes 0-0/1");
    set_text (p, tmp);
    note (c, "content-range-garbage");
    break;

  case 13:                      /* a folded header */
    x = pick (a, 1u << R_CR_VALUE);
    if (x < 0 || a->n + 1 > MAX_PIECES)
      break;
    memmove (&a->p[x + 1], &a->p[x], (a->n - x) * sizeof a->p[0]);
    a->n++;
    a->p[x].role = R_NL;
    snprintf (tmp, sizeof tmp, "%s ", c->nl);
    set_text (&a->p[x], tmp);
    note (c, "fold");
    break;
  }
  return false;
}

/* n new pieces at at. */
static struct piece *
make_room (struct mp_answer *a, unsigned at, unsigned n)
{
  memmove (&a->p[at + n], &a->p[at], (a->n - at) * sizeof a->p[0]);
  a->n += n;
  return &a->p[at];
}

static void
apply_special (struct fuzz_case *c, enum special what)
{
  struct mp_answer *a = &c->a;
  char tmp[TEXT_MAX];
  struct piece *p;
  uint64_t f = 0;
  unsigned x, r;

  /* The first part's Content-Range: name, value, line break. */
  for (x = 0; x < a->n && a->p[x].role != R_CR_VALUE; x++)
    ;
  sscanf (a->p[x].text, "bytes %" SCNu64, &f);
  r = c->spans[0].first == f ? 1 : 0;

  switch (what) {
  case S_TWO_RANGES_SAME:
    p = make_room (a, x + 2, 3);
    memcpy (p, p - 3, 3 * sizeof *p);
    break;
  case S_TWO_RANGES_OTHER:
    p = make_room (a, x - 1, 3);
    content_range (tmp, sizeof tmp, c->spans[r].first, c->spans[r].last,
                   "*");
    set_text (&p[1], tmp);
    break;
  case S_RANGE_GARBAGE:
    snprintf (tmp, sizeof tmp, "%s, bytes 0-0/1", a->p[x].text);
    set_text (&a->p[x], tmp);
    break;
  case S_FOLDED_HEADER:
    p = make_room (a, x - 1, 4);
    p[0].role = p[2].role = R_TEXT;
    p[1].role = p[3].role = R_NL;
    set_text (&p[0], "X-Note: a");
    set_text (&p[1], c->nl);
    set_text (&p[2], " b: c");
    set_text (&p[3], c->nl);
    break;
  case S_FOLDED_RANGE:
    p = make_room (a, x, 1);
    p->role = R_NL;
    snprintf (tmp, sizeof tmp, "%s ", c->nl);
    set_text (p, tmp);
    break;
  case S_NUL_DELIMITER:
  case S_NUL_RANGE:
    /* The first delimiter line, or the Content-Range value. */
    for (p = &a->p[x]; what == S_NUL_DELIMITER && p->role != R_TEXT; p--)
      ;
    for (; what == S_NUL_DELIMITER && strncmp (p->text, "--", 2); p--)
      ;
    memcpy (p->text + p->tlen, "\0x", 3);
    p->tlen += 2;
    break;
  case S_NONE:
  case S_NO_FINAL_BREAK:
  case S_LAST:
    break;
  }
}

static void
layout (struct fuzz_case *c)
{
  size_t len = 0, i;

  for (i = 0; i < c->a.n; i++)
    len += c->a.p[i].role == R_DATA ? c->a.p[i].len
      : c->a.p[i].tlen;
  c->body = malloc (len + 1);
  if (c->body == NULL) {
    perror ("malloc");
    exit (2);
  }
  c->bodylen = 0;
  for (i = 0; i < c->a.n; i++) {
    const struct piece *p = &c->a.p[i];

    if (p->role == R_DATA) {
      memcpy (c->body + c->bodylen, c->obj + p->off, p->len);
      c->bodylen += p->len;
    }
    else {
      memcpy (c->body + c->bodylen, p->text, p->tlen);
      c->bodylen += p->tlen;
    }
  }
}

/* Feed the body in pieces; true if the parser accepted it. */
static bool
parse (struct fuzz_case *c, struct multipart *mp)
{
  size_t done = 0, n;
  unsigned how = below (4);

  ranges_multipart_start (mp, c->boundary, c->spans, c->nranges, c->total);
  while (done < c->bodylen) {
    switch (how) {
    case 0: n = c->bodylen; break;
    case 1: n = 1; break;
    case 2: n = 1 + below (16); break;
    default: n = 1 + below (4096); break;
    }
    if (n > c->bodylen - done)
      n = c->bodylen - done;
    if (!ranges_multipart_feed (mp, c->body + done, n))
      return false;
    done += n;
  }
  return ranges_multipart_complete (mp);
}

static void
free_case (struct fuzz_case *c)
{
  unsigned i;

  for (i = 0; i < c->nreqs; i++)
    free (c->reqs[i].buf);
  free (c->obj);
  free (c->body);
}

static void
dump (const struct fuzz_case *c, uint64_t seed, const char *id)
{
  char name[128];
  FILE *f;

  snprintf (name, sizeof name, "fuzz-multipart-%" PRIu64 "-%s.body", seed,
            id);
  f = fopen (name, "w");
  if (f == NULL || fwrite (c->body, 1, c->bodylen, f) != c->bodylen ||
      fclose (f) != 0) {
    perror (name);
    return;
  }
  fprintf (stderr, "fuzz-multipart: the answer is in %s (boundary \"%s\", "
           "total %" PRIi64 ")\n", name, c->boundary, c->total);
}

/* The line at p: its length without the line break; *next: after it;
 * *cr: it ended in CRLF; false at the end of the body without a line
 * break (the length is then up to the end).
 */
static bool
ref_line (const char *p, const char *end, size_t *len, const char **next,
          bool *cr)
{
  const char *nl = memchr (p, '\n', end - p);

  *cr = false;
  if (nl == NULL) {
    *len = end - p;
    *next = end;
    return false;
  }
  *cr = nl > p && nl[-1] == '\r';
  *len = nl - p - *cr;
  *next = nl + 1;
  return true;
}

/* 1: a delimiter line, 2: the close delimiter, 0: neither. */
static int
ref_delimiter (const char *line, size_t n, const char *boundary)
{
  size_t d = strlen (boundary), i;
  int kind = 1;

  if (n < d + 2 || memcmp (line, "--", 2) != 0 ||
      memcmp (line + 2, boundary, d) != 0)
    return 0;
  i = d + 2;
  if (n - i >= 2 && line[i] == '-' && line[i + 1] == '-') {
    kind = 2;
    i += 2;
  }
  for (; i < n; i++)
    if (line[i] != ' ' && line[i] != '\t')
      return 0;
  return kind;
}

/* "bytes FIRST-LAST/TOTAL" exactly, TOTAL a number or '*' (-1). */
static bool
ref_content_range (const char *v, size_t n, uint64_t *f, uint64_t *l,
                   int64_t *t)
{
  char buf[TEXT_MAX * 2];
  uint64_t x[3] = { 0, 0, 0 };
  size_t i = 6, j;

  while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
    n--;
  if (n >= sizeof buf || n < 6 || strncasecmp (v, "bytes ", 6) != 0)
    return false;
  memcpy (buf, v, n);
  buf[n] = '\0';
  for (j = 0; j < 3; j++) {
    size_t start = i;

    if (j == 2 && buf[i] == '*' && i + 1 == n) {
      x[2] = UINT64_MAX;
      i++;
      break;
    }
    for (; buf[i] >= '0' && buf[i] <= '9'; i++) {
      if (x[j] > (UINT64_MAX / 2 - 9) / 10)
        return false;
      x[j] = x[j] * 10 + (buf[i] - '0');
    }
    if (i == start || buf[i] != (j == 0 ? '-' : j == 1 ? '/' : '\0'))
      return false;
    if (j < 2)
      i++;
  }
  if (i != n || x[1] < x[0] || (x[2] != UINT64_MAX && x[1] >= x[2]))
    return false;
  *f = x[0];
  *l = x[1];
  *t = x[2] == UINT64_MAX ? -1 : (int64_t) x[2];
  return true;
}

/* The rule in the comment at the top of ranges.c, applied to the whole
 * body by separate, simpler code: where each range's data is in the
 * body; false if the answer breaks the rule.  The limits that only bound
 * the parser's memory (line length, preamble lines) are left out: the
 * parser may refuse more, never accept more.
 */
static bool
ref_parse (const struct fuzz_case *c, const char **where)
{
  const char *p = c->body, *end = c->body + c->bodylen, *line, *next;
  const char *nl;
  size_t n, i, seen = 0;
  bool cr, crlf, eol;
  int kind;

  for (i = 0; i < c->nranges; i++)
    where[i] = NULL;

  /* The preamble, up to the first delimiter: it sets the framing. */
  for (;;) {
    line = p;
    eol = ref_line (p, end, &n, &next, &cr);
    if (!eol)
      return false;
    p = next;
    kind = ref_delimiter (line, n, c->boundary);
    if (kind == 2)
      return false;
    if (kind == 1)
      break;
  }
  crlf = cr;
  nl = crlf ? "\r\n" : "\n";

  for (;;) {
    uint64_t f = 0, l = 0;
    int64_t t = 0;
    bool has_range = false, bad_range = false;

    /* Headers, to the blank line. */
    for (;;) {
      const char *colon, *v;

      line = p;
      if (!ref_line (p, end, &n, &next, &cr) || cr != crlf)
        return false;
      p = next;
      if (n == 0)
        break;
      if (memchr (line, '\0', n) || line[0] == ' ' || line[0] == '\t')
        return false;
      colon = memchr (line, ':', n);
      if (colon == NULL)
        return false;
      if (colon - line != 13 || strncasecmp (line, "content-range", 13))
        continue;
      if (has_range || bad_range)
        return false;
      for (v = colon + 1; v < line + n && (*v == ' ' || *v == '\t'); v++)
        ;
      if (ref_content_range (v, line + n - v, &f, &l, &t))
        has_range = true;
      else
        bad_range = true;
    }
    if (!has_range || (c->total >= 0 && t != c->total))
      return false;
    for (i = 0; i < c->nranges; i++)
      if (c->spans[i].first == f && c->spans[i].last == l)
        break;
    if (i == c->nranges || where[i] != NULL)
      return false;

    /* The data, exactly one line break, a delimiter line. */
    if ((uint64_t) (end - p) < l - f + 1)
      return false;
    where[i] = p;
    seen++;
    p += l - f + 1;
    if ((size_t) (end - p) < strlen (nl) || memcmp (p, nl, strlen (nl)))
      return false;
    p += strlen (nl);
    line = p;
    eol = ref_line (p, end, &n, &next, &cr);
    p = next;
    kind = ref_delimiter (line, n, c->boundary);
    if (kind == 2 && (!eol || cr == crlf))
      break;                    /* the epilogue is ignored */
    if (kind != 1 || !eol || cr != crlf)
      return false;
  }
  return seen == c->nranges;
}

struct totals {
  unsigned cases, accepted, refused, lies;
};

/* Run one case; false (after saying why) if the oracle fails. */
static bool
run_case (uint64_t seed, uint64_t num, const struct named *nm,
          struct totals *t)
{
  static struct fuzz_case c;
  struct multipart mp;
  const char *where[MAX_RANGES];
  unsigned i, nmut = 0;
  bool cut = false, ok, legal, lie = false;
  char id[64];

  if (nm) {
    /* FNV-1a of the name: each named case its own numbers. */
    const char *n;

    snprintf (id, sizeof id, "%s", nm->name);
    num = UINT64_C (0xcbf29ce484222325);
    for (n = nm->name; *n; n++)
      num = (num ^ (unsigned char) *n) * UINT64_C (0x100000001b3);
  }
  else
    snprintf (id, sizeof id, "%" PRIu64, num);
  /* The case's numbers from the seed and its number (or name) alone. */
  rng_state = seed * UINT64_C (0x100000001b3) ^ (num + 1);
  memset (&c, 0, sizeof c);
  c.nl = one_in (2) ? "\r\n" : "\n";
  if (nm)
    c.nl = nm->nl == 1 ? "\r\n" : "\n";
  make_object (&c, nm);
  c.total = one_in (8) ? -1 : (int64_t) c.size;
  make_answer (&c, nm);
  if (nm)
    apply_special (&c, nm->special);
  if (!nm && !one_in (8))
    nmut = 1 + below (4);
  for (i = 0; i < nmut; i++)
    cut |= mutate (&c);
  legal = nm ? nm->must_accept : nmut == 0;
  layout (&c);
  if (cut)
    c.bodylen = below (c.bodylen + 1);

  ok = parse (&c, &mp);
  t->cases++;
  if (ok)
    t->accepted++;
  else
    t->refused++;
  if (verbose)
    fprintf (stderr, "case %s: %u ranges, %s framing, %zu bytes, "
             "mutations: %s: %s%s\n", id, c.nranges,
             c.nl[0] == '\r' ? "CRLF" : "LF", c.bodylen,
             c.what[0] ? c.what : "none ", ok ? "accepted" : "refused: ",
             ok ? "" : mp.why);

  if (!ok && mp.why[0] == '\0') {
    fprintf (stderr, "FAIL: seed %" PRIu64 " case %s: refused without a "
             "reason\n", seed, id);
    goto fail;
  }
  if (!ok && legal) {
    fprintf (stderr, "FAIL: seed %" PRIu64 " case %s: a legal answer was "
             "refused: %s\n", seed, id, mp.why);
    goto fail;
  }
  if (ok && nm && !nm->must_accept) {
    fprintf (stderr, "FAIL: seed %" PRIu64 " case %s: accepted, should be "
             "refused\n", seed, id);
    goto fail;
  }
  if (!ok)
    goto done;

  /* Accepted: the reference must take the answer too, and read the same
   * bytes from it.
   */
  if (!ref_parse (&c, where)) {
    fprintf (stderr, "FAIL: seed %" PRIu64 " case %s: accepted an answer "
             "that breaks the framing rule (mutations: %s)\n", seed, id,
             c.what);
    goto fail;
  }
  for (i = 0; i < c.nreqs; i++) {
    const struct read_req *q = &c.reqs[i];
    unsigned r;
    uint32_t k;

    /* The range of this read. */
    for (r = 0; r < c.nranges; r++)
      if (q->offset >= c.spans[r].first && q->offset <= c.spans[r].last)
        break;
    for (k = 0; k < q->count; k++)
      if (q->buf[k] != where[r][q->offset - c.spans[r].first + k])
        break;
    if (k < q->count) {
      fprintf (stderr, "FAIL: seed %" PRIu64 " case %s: wrong byte in the "
               "read of %" PRIu32 " bytes at %" PRIu64 ": at %" PRIu64
               ": 0x%02x, not 0x%02x (mutations: %s)\n", seed, id,
               q->count, q->offset, q->offset + k, q->buf[k] & 0xff,
               where[r][q->offset - c.spans[r].first + k] & 0xff, c.what);
      goto fail;
    }
    if (memcmp (q->buf, c.obj + q->offset, q->count) != 0)
      lie = true;
  }
  /* A legal answer whose own bytes are wrong: mutations that together
   * amount to changing data bytes (a part made short, then the framing
   * after it grown by as many bytes).  No parser can tell; counted.
   */
  if (lie) {
    if (nm || legal) {
      fprintf (stderr, "FAIL: seed %" PRIu64 " case %s: wrong bytes\n",
               seed, id);
      goto fail;
    }
    t->lies++;
    if (verbose)
      fprintf (stderr, "case %s: legal, but its bytes are not the "
               "object's\n", id);
  }
 done:
  free_case (&c);
  return true;
 fail:
  if (nm)
    fprintf (stderr, "fuzz-multipart: repeat with: fuzz-multipart -v %"
             PRIu64 " 0\n", seed);
  else
    fprintf (stderr, "fuzz-multipart: repeat with: fuzz-multipart -v %"
             PRIu64 " 1 %s\n", seed, id);
  dump (&c, seed, id);
  free_case (&c);
  return false;
}

/* Parts 1 and 2 bytes short and long, first, middle or last, with CRLF
 * and LF framing, their data ending in CR, LF, CRLF or followed by the
 * framing's line break: refused every time.  Legal answers whose data
 * ends in those: accepted.  Then the specials, with CRLF and LF.
 */
static unsigned
named_cases (uint64_t seed, struct totals *t)
{
  static const int deltas[] = { -2, -1, 1, 2 };
  static const char *edges[] = { "any", "cr", "lf", "crlf", "nl-after" };
  static const char *specials[S_LAST] = {
    [S_TWO_RANGES_SAME] = "two-content-ranges",
    [S_TWO_RANGES_OTHER] = "two-content-ranges-other-first",
    [S_RANGE_GARBAGE] = "content-range-garbage",
    [S_FOLDED_HEADER] = "folded-header",
    [S_FOLDED_RANGE] = "folded-content-range",
    [S_NUL_DELIMITER] = "nul-in-delimiter",
    [S_NUL_RANGE] = "nul-in-content-range",
    [S_NO_FINAL_BREAK] = "legal-no-final-line-break",
  };
  struct named nm;
  char name[64];
  int nl, d, which, edge;
  enum special sp;
  unsigned failed = 0;

  for (nl = 1; nl <= 2 && failed < 5; nl++)
    for (edge = 0; edge <= 4 && failed < 5; edge++) {
      for (d = 0; d < 4 && failed < 5; d++)
        for (which = 1; which <= 3 && failed < 5; which++) {
          snprintf (name, sizeof name, "%s%d-%s-part%d-%s",
                    deltas[d] < 0 ? "short" : "long", abs (deltas[d]),
                    nl == 1 ? "crlf" : "lf", which, edges[edge]);
          nm = (struct named) { .name = name, .nl = nl, .delta = deltas[d],
                                .which = which, .edge = edge };
          failed += !run_case (seed, 0, &nm, t);
        }
      snprintf (name, sizeof name, "legal-%s-%s", nl == 1 ? "crlf" : "lf",
                edges[edge]);
      nm = (struct named) { .name = name, .nl = nl, .edge = edge,
                            .must_accept = true };
      failed += !run_case (seed, 0, &nm, t);
    }

  for (nl = 1; nl <= 2; nl++)
    for (sp = S_NONE + 1; sp < S_LAST && failed < 5; sp++) {
      snprintf (name, sizeof name, "%s-%s", specials[sp],
                nl == 1 ? "crlf" : "lf");
      nm = (struct named) { .name = name, .nl = nl, .special = sp,
                            .must_accept = sp == S_NO_FINAL_BREAK };
      failed += !run_case (seed, 0, &nm, t);
    }
  return failed;
}

static uint64_t
arg (const char *s, const char *what)
{
  char *end;
  unsigned long long v = strtoull (s, &end, 10);

  if (*s == '\0' || *end != '\0') {
    fprintf (stderr, "fuzz-multipart: %s: not a number: %s\n", what, s);
    exit (2);
  }
  return v;
}

/* Content-Type values: the boundary, or NULL where the type must be
 * refused.  Returns the number of wrong answers.
 */
static unsigned
content_types (void)
{
  static const struct { const char *v, *boundary; } cases[] = {
    { "multipart/byteranges; boundary=abc", "abc" },
    { "Multipart/ByteRanges;boundary=\"a b\"", "a b" },
    { "multipart/byteranges ; boundary=abc", "abc" },
    { "multipart/byteranges; charset=x; boundary=abc", "abc" },
    { "multipart/byterangesX; boundary=abc", NULL },
    { "multipart/byteranges-x; boundary=abc", NULL },
    { "multipart/byteranges", NULL },
    { "multipart/byteranges; boundary=", NULL },
    { "multipart/byteranges; boundary=\"abc", NULL },
    { "multipart/mixed; boundary=abc", NULL },
  };
  char b[72];
  unsigned i, bad = 0;
  bool ok;

  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ok = ranges_multipart_type (cases[i].v, b, sizeof b);
    if (ok != (cases[i].boundary != NULL) ||
        (ok && strcmp (b, cases[i].boundary) != 0)) {
      printf ("fuzz-multipart: Content-Type '%s': %s\n", cases[i].v,
              ok ? "accepted wrongly or wrong boundary" : "refused");
      bad++;
    }
  }
  return bad;
}

int
main (int argc, char *argv[])
{
  uint64_t seed = 1, count = 10000, first = 0, i;
  struct totals named = { 0 }, rand_cases = { 0 };
  struct timespec t0, t1;
  unsigned failed = 0;
  int a = 1;

  if (a < argc && strcmp (argv[a], "-v") == 0) {
    verbose = true;
    a++;
  }
  if (a < argc && argv[a][0] == '-') {
    fprintf (stderr, "usage: fuzz-multipart [-v] [SEED [COUNT [FIRST]]]\n");
    exit (2);
  }
  if (a < argc)
    seed = arg (argv[a++], "SEED");
  if (a < argc)
    count = arg (argv[a++], "COUNT");
  if (a < argc)
    first = arg (argv[a++], "FIRST");

  clock_gettime (CLOCK_MONOTONIC, &t0);
  failed = content_types ();
  failed += named_cases (seed, &named);
  /* Stop after a few failures: each says how to repeat it. */
  for (i = first; i < first + count && failed < 5; i++)
    if (!run_case (seed, i, NULL, &rand_cases))
      failed++;
  clock_gettime (CLOCK_MONOTONIC, &t1);

  printf ("fuzz-multipart: seed %" PRIu64 ": %u named cases (%u accepted, "
          "%u refused); %u random cases %" PRIu64 "-%" PRIu64 ": %u "
          "accepted (%u legal but carrying other bytes), %u refused; "
          "%.1f s\n", seed, named.cases, named.accepted, named.refused,
          rand_cases.cases, first, first + count - 1, rand_cases.accepted,
          rand_cases.lies, rand_cases.refused,
          (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
  if (failed) {
    printf ("fuzz-multipart: FAILED\n");
    return 1;
  }
  return 0;
}
