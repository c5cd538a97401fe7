/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * WebSocket frames (RFC 6455 section 5): a client frame's header built,
 * a server frame's header parsed from bytes as they come, a payload
 * masked.  Pure functions with no I/O, so every rule a server's frames
 * must follow is checked here, in one place.
 */

#include <config.h>

#include <stdint.h>
#include <string.h>

#include "websocket.h"

/* How many header bytes the first two bytes announce. */
static unsigned
head_length (const uint8_t *head)
{
  unsigned n = 2;

  if ((head[1] & 0x7f) == 126)
    n += 2;
  else if ((head[1] & 0x7f) == 127)
    n += 8;
  if (head[1] & 0x80)
    n += 4;
  return n;
}

/* The header in ps->head is whole: decode and check it. */
static enum ws_parse
decode (const struct ws_parser *ps, struct ws_frame *f, const char **why)
{
  const uint8_t *h = ps->head;
  uint64_t len = h[1] & 0x7f;
  unsigned i;

  f->fin = (h[0] & 0x80) != 0;
  f->opcode = h[0] & 0x0f;
  if (len == 126)
    len = ((uint64_t) h[2] << 8) | h[3];
  else if (len == 127) {
    len = 0;
    for (i = 2; i < 10; i++)
      len = (len << 8) | h[i];
  }
  f->len = len;

  if (h[0] & 0x70) {
    *why = "reserved bits set (no extension was agreed)";
    return WS_PARSE_BAD;
  }
  if (h[1] & 0x80) {
    *why = "a masked frame from the server";
    return WS_PARSE_BAD;
  }
  if (len >> 63) {
    *why = "a 64-bit length with its top bit set";
    return WS_PARSE_BAD;
  }
  switch (f->opcode) {
  case WS_CONT: case WS_TEXT: case WS_BINARY:
    return WS_PARSE_DONE;
  case WS_CLOSE: case WS_PING: case WS_PONG:
    if (len > WS_CONTROL_MAX) {
      *why = "a control frame over 125 bytes";
      return WS_PARSE_BAD;
    }
    if (!f->fin) {
      *why = "a fragmented control frame";
      return WS_PARSE_BAD;
    }
    if (f->opcode == WS_CLOSE && len == 1) {
      *why = "a close frame of 1 byte";
      return WS_PARSE_BAD;
    }
    return WS_PARSE_DONE;
  default:
    *why = "an unknown opcode";
    return WS_PARSE_BAD;
  }
}

enum ws_parse
ws_parse_head (struct ws_parser *ps, const uint8_t **p, const uint8_t *end,
               struct ws_frame *f, const char **why)
{
  enum ws_parse r;

  while (*p < end) {
    ps->head[ps->have++] = *(*p)++;
    if (ps->have >= 2 && ps->have == head_length (ps->head)) {
      r = decode (ps, f, why);
      ps->have = 0;
      return r;
    }
  }
  return WS_PARSE_MORE;
}

const char *
ws_check_sequence (bool *in_message, const struct ws_frame *f)
{
  switch (f->opcode) {
  case WS_CONT:
    if (!*in_message)
      return "a continuation frame without a message to continue";
    *in_message = !f->fin;
    return NULL;
  case WS_TEXT: case WS_BINARY:
    if (*in_message)
      return "a new message inside a fragmented one";
    *in_message = !f->fin;
    return NULL;
  default:
    /* Control frames may come between a message's fragments. */
    return NULL;
  }
}

size_t
ws_build_head (uint8_t *out, unsigned opcode, bool fin, uint64_t len,
               const uint8_t key[4])
{
  size_t n = 2, i;

  out[0] = (fin ? 0x80 : 0) | (opcode & 0x0f);
  if (len < 126)
    out[1] = 0x80 | len;
  else if (len <= 0xffff) {
    out[1] = 0x80 | 126;
    out[2] = len >> 8;
    out[3] = len;
    n = 4;
  }
  else {
    out[1] = 0x80 | 127;
    for (i = 0; i < 8; i++)
      out[2 + i] = len >> (56 - 8 * i);
    n = 10;
  }
  memcpy (out + n, key, 4);
  return n + 4;
}

/* Eight bytes at a time: the key repeated in a word, XORed into the
 * payload through memcpy, which compiles to plain unaligned loads.
 */
void
ws_mask (uint8_t *p, size_t len, const uint8_t key[4], size_t offset)
{
  uint8_t k8[8];
  uint64_t word, w;
  size_t i;

  for (i = 0; i < 8; i++)
    k8[i] = key[(offset + i) & 3];
  memcpy (&word, k8, 8);
  for (i = 0; i + 8 <= len; i += 8) {
    memcpy (&w, p + i, 8);
    w ^= word;
    memcpy (p + i, &w, 8);
  }
  for (; i < len; i++)
    p[i] ^= k8[i & 7];
}
