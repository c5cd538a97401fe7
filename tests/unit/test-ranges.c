/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * test-ranges: the multipart/byteranges parser (plugins/curl/rules/ranges.c,
 * linked in alone) against hand-made answers to a request for bytes
 * 10-19 and 40-44 of a 100-byte object: legal ones (CRLF and bare LF,
 * parts in either order, preamble, epilogue), which must fill the
 * reads with exactly the object's bytes, and one of each framing error,
 * which must be refused with a reason that names it.  Each answer goes
 * in whole and one byte at a time.  A failing case is named on stderr
 * and the exit status is 1.
 */

#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules/rules.h"

#define SIZE 100
#define BODY_MAX (128 * 1024)

static unsigned failures, cases;

static char
object_byte (uint64_t i)
{
  return (char) (i * 7 + 3);
}

struct body {
  char data[BODY_MAX];
  size_t len;
};

static void
add (struct body *b, const char *s)
{
  size_t n = strlen (s);

  if (b->len + n > sizeof b->data)
    abort ();
  memcpy (b->data + b->len, s, n);
  b->len += n;
}

/* The object's bytes first-last (inclusive). */
static void
add_bytes (struct body *b, uint64_t first, uint64_t last)
{
  uint64_t i;

  for (i = first; i <= last; i++)
    b->data[b->len++] = object_byte (i);
}

/* A whole part: delimiter, headers, data and the break after it. */
static void
add_part (struct body *b, const char *nl, uint64_t first, uint64_t last)
{
  char h[128];

  snprintf (h, sizeof h, "--XYZ%sContent-Type: application/octet-stream%s"
            "Content-Range: bytes %" PRIu64 "-%" PRIu64 "/%d%s%s",
            nl, nl, first, last, SIZE, nl, nl);
  add (b, h);
  add_bytes (b, first, last);
  add (b, nl);
}

/* Feed b to a parser for bytes 10-19 and 40-44, whole or a byte at a
 * time: true if it was accepted, with *why the reason if not.  When
 * accepted, the reads must hold the object's bytes.
 */
static bool
parse (int line, const struct body *b, bool bytewise, char *why,
       size_t size)
{
  char buf1[10], buf2[5], want1[10], want2[5];
  struct read_req r1 = { .offset = 10, .count = 10, .buf = buf1 };
  struct read_req r2 = { .offset = 40, .count = 5, .buf = buf2 };
  struct read_req *reqs1[1] = { &r1 }, *reqs2[1] = { &r2 };
  struct span spans[2] = {
    { .first = 10, .last = 19, .reqs = reqs1, .nreqs = 1 },
    { .first = 40, .last = 44, .reqs = reqs2, .nreqs = 1 },
  };
  struct multipart mp;
  bool ok = true;
  size_t i;

  memset (buf1, 0, sizeof buf1);
  memset (buf2, 0, sizeof buf2);
  ranges_multipart_start (&mp, "XYZ", spans, 2, SIZE);
  if (bytewise) {
    for (i = 0; ok && i < b->len; i++)
      ok = ranges_multipart_feed (&mp, b->data + i, 1);
  }
  else
    ok = ranges_multipart_feed (&mp, b->data, b->len);
  ok = ok && ranges_multipart_complete (&mp);
  snprintf (why, size, "%s", ok ? "" : mp.why);
  if (!ok && mp.why[0] == '\0') {
    fprintf (stderr, "test-ranges.c:%d: refused without a reason\n", line);
    failures++;
  }
  if (ok) {
    for (i = 0; i < sizeof buf1; i++)
      want1[i] = object_byte (10 + i);
    for (i = 0; i < sizeof buf2; i++)
      want2[i] = object_byte (40 + i);
    if (memcmp (buf1, want1, sizeof buf1) != 0 ||
        memcmp (buf2, want2, sizeof buf2) != 0) {
      fprintf (stderr, "test-ranges.c:%d: accepted, but the reads do not "
               "hold the object's bytes\n", line);
      failures++;
    }
  }
  return ok;
}

/* want_why NULL: the answer must be accepted; else refused with a
 * reason containing want_why.
 */
static void
expect (int line, const struct body *b, const char *want_why)
{
  char why[256];
  int bytewise;
  bool ok;

  for (bytewise = 0; bytewise <= 1; bytewise++) {
    cases++;
    ok = parse (line, b, bytewise, why, sizeof why);
    if (want_why == NULL && !ok) {
      fprintf (stderr, "test-ranges.c:%d%s: refused: %s\n", line,
               bytewise ? " (a byte at a time)" : "", why);
      failures++;
    }
    else if (want_why && (ok || strstr (why, want_why) == NULL)) {
      fprintf (stderr, "test-ranges.c:%d%s: %s%s, expected a refusal "
               "with \"%s\"\n", line, bytewise ? " (a byte at a time)" : "",
               ok ? "accepted" : "refused: ", why, want_why);
      failures++;
    }
  }
}
#define EXPECT(b, why) expect (__LINE__, &(b), why)

static void
legal (void)
{
  struct body b;

  b.len = 0;
  add_part (&b, "\r\n", 10, 19);
  add_part (&b, "\r\n", 40, 44);
  add (&b, "--XYZ--\r\n");
  EXPECT (b, NULL);

  /* Either order, bare LF, preamble, epilogue, no final break. */
  b.len = 0;
  add (&b, "a preamble\r\n");
  add_part (&b, "\n", 40, 44);
  add_part (&b, "\n", 10, 19);
  add (&b, "--XYZ--");
  EXPECT (b, NULL);

  b.len = 0;
  add_part (&b, "\r\n", 10, 19);
  add_part (&b, "\r\n", 40, 44);
  add (&b, "--XYZ--\r\nan epilogue, ignored\r\n");
  EXPECT (b, NULL);
}

static void
framing_errors (void)
{
  struct body b;
  char big[1024];
  unsigned i;

  /* No boundary at all: the bytes alone. */
  b.len = 0;
  add_bytes (&b, 10, 19);
  add_bytes (&b, 40, 44);
  EXPECT (b, "multipart answer");

  /* Another boundary. */
  b.len = 0;
  add (&b, "--ABC\r\nContent-Range: bytes 10-19/100\r\n\r\n");
  add_bytes (&b, 10, 19);
  add (&b, "\r\n--ABC--\r\n");
  EXPECT (b, "multipart answer");

  /* A part outside the ranges asked for, or overlapping one. */
  b.len = 0;
  add_part (&b, "\r\n", 10, 19);
  add_part (&b, "\r\n", 20, 29);
  add (&b, "--XYZ--\r\n");
  EXPECT (b, "not one of the ranges asked for");
  b.len = 0;
  add_part (&b, "\r\n", 15, 24);
  add_part (&b, "\r\n", 40, 44);
  add (&b, "--XYZ--\r\n");
  EXPECT (b, "not one of the ranges asked for");
  b.len = 0;
  add_part (&b, "\r\n", 10, 44);
  add (&b, "--XYZ--\r\n");
  EXPECT (b, "not one of the ranges asked for");

  /* A range twice, a range missing. */
  b.len = 0;
  add_part (&b, "\r\n", 10, 19);
  add_part (&b, "\r\n", 10, 19);
  add_part (&b, "\r\n", 40, 44);
  add (&b, "--XYZ--\r\n");
  EXPECT (b, "a range sent twice");
  b.len = 0;
  add_part (&b, "\r\n", 10, 19);
  add (&b, "--XYZ--\r\n");
  EXPECT (b, "ranges missing");

  /* Truncated: in a part's data, before the close delimiter. */
  b.len = 0;
  add_part (&b, "\r\n", 10, 19);
  add (&b, "--XYZ\r\nContent-Range: bytes 40-44/100\r\n\r\n");
  add_bytes (&b, 40, 42);
  EXPECT (b, "before the close delimiter");
  b.len = 0;
  add_part (&b, "\r\n", 10, 19);
  add_part (&b, "\r\n", 40, 44);
  EXPECT (b, "before the close delimiter");

  /* A part one byte short or long of its Content-Range. */
  b.len = 0;
  add (&b, "--XYZ\r\nContent-Range: bytes 10-19/100\r\n\r\n");
  add_bytes (&b, 10, 18);
  add (&b, "\r\n");
  add_part (&b, "\r\n", 40, 44);
  add (&b, "--XYZ--\r\n");
  EXPECT (b, "right after a part's data");
  b.len = 0;
  add (&b, "--XYZ\r\nContent-Range: bytes 10-19/100\r\n\r\n");
  add_bytes (&b, 10, 20);
  add (&b, "\r\n");
  add_part (&b, "\r\n", 40, 44);
  add (&b, "--XYZ--\r\n");
  EXPECT (b, "right after a part's data");

  /* Garbage between a part's data and the next delimiter. */
  b.len = 0;
  add_part (&b, "\r\n", 10, 19);
  add (&b, "garbage\r\n");
  add_part (&b, "\r\n", 40, 44);
  add (&b, "--XYZ--\r\n");
  EXPECT (b, "multipart answer");

  /* Trailing garbage: an epilogue of more than 64 KiB. */
  b.len = 0;
  add_part (&b, "\r\n", 10, 19);
  add_part (&b, "\r\n", 40, 44);
  add (&b, "--XYZ--\r\n");
  memset (big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  for (i = 0; i < 65; i++)
    add (&b, big);
  EXPECT (b, "multipart answer");

  /* Mixed line breaks, part headers wrong. */
  b.len = 0;
  add_part (&b, "\r\n", 10, 19);
  add_part (&b, "\n", 40, 44);
  add (&b, "--XYZ--\r\n");
  EXPECT (b, "line breaks of both CRLF and LF");
  b.len = 0;
  add (&b, "--XYZ\r\nContent-Type: application/octet-stream\r\n\r\n");
  add_bytes (&b, 10, 19);
  add (&b, "\r\n--XYZ--\r\n");
  EXPECT (b, "without a valid Content-Range");
  b.len = 0;
  add (&b, "--XYZ\r\nContent-Range: bytes 10-19/100\r\n"
       "Content-Range: bytes 10-19/100\r\n\r\n");
  add_bytes (&b, 10, 19);
  add (&b, "\r\n");
  add_part (&b, "\r\n", 40, 44);
  add (&b, "--XYZ--\r\n");
  EXPECT (b, "two Content-Range headers");
  b.len = 0;
  add (&b, "--XYZ\r\nContent-Range: bytes 10-19/200\r\n\r\n");
  add_bytes (&b, 10, 19);
  add (&b, "\r\n");
  add_part (&b, "\r\n", 40, 44);
  add (&b, "--XYZ--\r\n");
  EXPECT (b, "total is not the object's");
}

/* The Content-Type that announces a multipart answer. */
static void
types (void)
{
  static const struct { const char *v; const char *boundary; } t[] = {
    { "multipart/byteranges; boundary=XYZ", "XYZ" },
    { "multipart/byteranges;boundary=\"X Y\"", "X Y" },
    { "Multipart/ByteRanges; charset=x; boundary=abc; q=1", "abc" },
    { "multipart/byteranges", NULL },
    { "multipart/byteranges; boundary=", NULL },
    { "multipart/byteranges; boundary=\"unterminated", NULL },
    { "multipart/byterangesX; boundary=XYZ", NULL },
    { "multipart/mixed; boundary=XYZ", NULL },
    { "application/octet-stream", NULL },
  };
  char boundary[72];
  unsigned i;
  bool ok;

  for (i = 0; i < sizeof t / sizeof t[0]; i++) {
    cases++;
    ok = ranges_multipart_type (t[i].v, boundary, sizeof boundary);
    if (ok != (t[i].boundary != NULL) ||
        (ok && strcmp (boundary, t[i].boundary) != 0)) {
      fprintf (stderr, "test-ranges: Content-Type \"%s\": %s%s\n", t[i].v,
               ok ? "boundary " : "refused", ok ? boundary : "");
      failures++;
    }
  }
}

int
main (void)
{
  legal ();
  framing_errors ();
  types ();
  printf ("test-ranges: %u cases, %u failed\n", cases, failures);
  return failures ? 1 : 0;
}
