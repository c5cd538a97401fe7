/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * test-wsframe: curlpipe's WebSocket frame codec (curlpipe/wsframe.c,
 * linked in alone).  Server frame headers of each length encoding are
 * parsed whole and one byte at a time; each header a server must not
 * send is refused with a reason; the order of fragments and control
 * frames is checked; a client header is built byte for byte as RFC
 * 6455 section 5.2 lays it out; and masking with 8-byte words matches
 * a byte-at-a-time XOR at every length and key offset.  A failing case
 * is named on stderr and the exit status is 1.
 */

#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "websocket.h"

static unsigned failures, cases;

static void
check (int ok, const char *what)
{
  cases++;
  if (!ok) {
    fprintf (stderr, "test-wsframe: FAIL: %s\n", what);
    failures++;
  }
}

/* Parse head (n bytes), whole or one byte at a time: the verdict, the
 * frame in *f and the reason in *why.
 */
static enum ws_parse
parse (const uint8_t *head, size_t n, int bytewise, struct ws_frame *f,
       const char **why)
{
  struct ws_parser ps = { .have = 0 };
  const uint8_t *p = head;
  enum ws_parse r = WS_PARSE_MORE;
  size_t i;

  *why = NULL;
  if (!bytewise)
    return ws_parse_head (&ps, &p, head + n, f, why);
  for (i = 0; i < n && r == WS_PARSE_MORE; i++)
    r = ws_parse_head (&ps, &p, head + i + 1, f, why);
  /* Every byte of the header taken, none past it. */
  check (p == head + n || r == WS_PARSE_BAD, "bytes taken");
  return r;
}

static void
good_lengths (void)
{
  static const struct {
    uint8_t head[10];
    size_t n;
    uint64_t len;
  } t[] = {
    { { 0x82, 0 }, 2, 0 },
    { { 0x82, 125 }, 2, 125 },
    { { 0x82, 126, 0, 126 }, 4, 126 },
    { { 0x82, 126, 0xff, 0xff }, 4, 65535 },
    { { 0x82, 127, 0, 0, 0, 0, 0, 1, 0, 0 }, 10, 65536 },
    { { 0x82, 127, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff }, 10,
      UINT64_C (0x7fffffffffffffff) },
  };
  struct ws_frame f;
  const char *why;
  size_t i;
  int b;

  for (i = 0; i < sizeof t / sizeof t[0]; i++)
    for (b = 0; b < 2; b++) {
      check (parse (t[i].head, t[i].n, b, &f, &why) == WS_PARSE_DONE,
             "a good header parsed");
      check (f.len == t[i].len && f.opcode == WS_BINARY && f.fin,
             "a good header's length, opcode, fin");
    }
}

static void
bad_headers (void)
{
  static const struct {
    uint8_t head[14];
    size_t n;
    const char *why;
  } t[] = {
    { { 0xc2, 1 }, 2, "reserved bits" },
    { { 0x92, 1 }, 2, "reserved bits" },
    { { 0x82, 0x81, 1, 2, 3, 4 }, 6, "masked" },
    { { 0x83, 0 }, 2, "unknown opcode" },
    { { 0x8b, 0 }, 2, "unknown opcode" },
    { { 0x89, 126, 0, 126 }, 4, "over 125" },
    { { 0x09, 0 }, 2, "fragmented control" },
    { { 0x88, 1 }, 2, "close frame of 1 byte" },
    { { 0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 0 }, 10, "top bit" },
  };
  struct ws_frame f;
  const char *why;
  size_t i;
  int b;

  for (i = 0; i < sizeof t / sizeof t[0]; i++)
    for (b = 0; b < 2; b++) {
      check (parse (t[i].head, t[i].n, b, &f, &why) == WS_PARSE_BAD,
             t[i].why);
      check (why != NULL && strstr (why, t[i].why) != NULL,
             "a refusal names its reason");
    }
}

static void
sequences (void)
{
  struct ws_frame text1 = { .fin = false, .opcode = WS_TEXT },
    ping = { .fin = true, .opcode = WS_PING },
    cont = { .fin = false, .opcode = WS_CONT },
    last = { .fin = true, .opcode = WS_CONT },
    bin = { .fin = true, .opcode = WS_BINARY };
  bool in = false;

  check (ws_check_sequence (&in, &cont) != NULL,
         "a continuation without a message");
  check (ws_check_sequence (&in, &text1) == NULL && in, "a first fragment");
  check (ws_check_sequence (&in, &ping) == NULL && in,
         "a ping between fragments");
  check (ws_check_sequence (&in, &bin) != NULL,
         "a new message inside a fragmented one");
  check (ws_check_sequence (&in, &cont) == NULL && in, "a middle fragment");
  check (ws_check_sequence (&in, &last) == NULL && !in, "the last fragment");
  check (ws_check_sequence (&in, &bin) == NULL && !in, "a whole message");
}

static void
build (void)
{
  static const uint8_t key[4] = { 0xa1, 0xb2, 0xc3, 0xd4 };
  static const uint8_t h126[] = { 0x82, 0xfe, 0, 126, 0xa1, 0xb2, 0xc3,
                                  0xd4 };
  static const uint8_t h64k[] = { 0x82, 0xff, 0, 0, 0, 0, 0, 1, 0, 0,
                                  0xa1, 0xb2, 0xc3, 0xd4 };
  static const uint8_t close[] = { 0x88, 0x82, 0xa1, 0xb2, 0xc3, 0xd4 };
  uint8_t out[WS_HEAD_MAX];

  check (ws_build_head (out, WS_BINARY, true, 126, key) == sizeof h126 &&
         memcmp (out, h126, sizeof h126) == 0, "a header of 126 bytes");
  check (ws_build_head (out, WS_BINARY, true, 65536, key) == sizeof h64k &&
         memcmp (out, h64k, sizeof h64k) == 0, "a header of 64 KiB");
  check (ws_build_head (out, WS_CLOSE, true, 2, key) == sizeof close &&
         memcmp (out, close, sizeof close) == 0, "a close's header");
}

static void
masking (void)
{
  static const uint8_t key[4] = { 0x12, 0x34, 0x56, 0x78 };
  uint8_t a[64], b[64];
  size_t len, off, i;

  for (len = 0; len <= sizeof a; len++)
    for (off = 0; off < 4; off++) {
      for (i = 0; i < len; i++)
        a[i] = b[i] = (uint8_t) (i * 31 + 7);
      ws_mask (a, len, key, off);
      for (i = 0; i < len; i++)
        b[i] ^= key[(off + i) & 3];
      check (memcmp (a, b, len) == 0, "8-byte masking matches bytewise");
      ws_mask (a, len, key, off);
      for (i = 0; i < len; i++)
        b[i] ^= key[(off + i) & 3];
      check (memcmp (a, b, len) == 0, "masking twice restores");
    }
}

int
main (void)
{
  good_lengths ();
  bad_headers ();
  sequences ();
  build ();
  masking ();
  if (failures > 0) {
    fprintf (stderr, "test-wsframe: %u of %u cases failed\n", failures,
             cases);
    return 1;
  }
  printf ("test-wsframe: %u cases passed\n", cases);
  return 0;
}
