/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The byte pattern curlpipe's tests and benchmark stream and check, in
 * one place for stream-server.c and pipe-driver.c: byte i
 * (from 0) of a stream is
 *
 *   (i * 7 + i / 65536) & 0xff
 *
 * Multiplying by 7 makes every byte of a 256-byte period differ, and the
 * i / 65536 term makes each 64 KiB block differ from the next, so that
 * dropped, repeated or reordered blocks show up as well as flipped bytes.
 *
 * Within one 64 KiB block the pattern is 7 * i + k (mod 256) with k the
 * block number, which equals 7 * (i + 183 * k) because 7 * 183 = 1 (mod
 * 256).  So any run inside a block is a window of the sequence 7 * x,
 * whose period is 256, starting at pattern_phase: it can be written
 * straight from a table and compared with memcmp.
 */

#ifndef PATTERN_H
#define PATTERN_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATTERN_BYTE(i) ((unsigned char) (((i) * 7 + (i) / 65536) & 0xff))
#define PATTERN_BLOCK 65536

static unsigned char pattern_table[PATTERN_BLOCK + 256];

/* Where in pattern_table the pattern at stream offset pos starts. */
static inline size_t
pattern_phase (uint64_t pos)
{
  return (size_t) ((pos + 183 * (pos / PATTERN_BLOCK)) & 0xff);
}

/* Fill the table, and compare the fast form with the definition across
 * block borders; who names the program in the message.
 */
static void
pattern_init (const char *who)
{
  size_t x;
  uint64_t i;

  for (x = 0; x < sizeof pattern_table; x++)
    pattern_table[x] = (unsigned char) (x * 7);
  for (i = 0; i < 3 * PATTERN_BLOCK; i++) {
    uint64_t off = (uint64_t) 255 * PATTERN_BLOCK - 1000 + i;

    if (pattern_table[pattern_phase (off)] != PATTERN_BYTE (off)) {
      fprintf (stderr, "%s: pattern self-check failed\n", who);
      exit (EXIT_FAILURE);
    }
  }
}

/* The index of the first byte of buf[0..len) that differs from the
 * pattern at stream offset off, or len if none does.
 */
static size_t
pattern_check (const unsigned char *buf, uint64_t off, size_t len)
{
  size_t done = 0, j;

  while (done < len) {
    uint64_t pos = off + done;
    size_t phase = pattern_phase (pos);
    size_t n = PATTERN_BLOCK - (size_t) (pos % PATTERN_BLOCK);

    if (n > len - done)
      n = len - done;
    if (memcmp (buf + done, pattern_table + phase, n) != 0) {
      for (j = 0; j < n; j++)
        if (buf[done + j] != pattern_table[phase + j])
          return done + j;
    }
    done += n;
  }
  return len;
}

#endif /* PATTERN_H */
