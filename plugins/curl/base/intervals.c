/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * A sorted list of byte intervals of fixed room, merged as they touch.
 * checksum.c notes with it what was read, spilled or left unverifiable.
 * When the room runs out, two neighbours may become one, which only
 * ever claims more bytes than were noted.
 */

#include <config.h>

#include "base/base.h"

/* The two neighbours of l with the smallest gap between them made
 * one: room for another interval.
 */
static void
merge_closest (struct intervals *l)
{
  unsigned i, best = 0;

  for (i = 1; i + 1 < l->n; i++)
    if (l->r[i + 1].start - l->r[i].end <
        l->r[best + 1].start - l->r[best].end)
      best = i;
  l->r[best].end = l->r[best + 1].end;
  memmove (&l->r[best + 1], &l->r[best + 2],
           (l->n - best - 2) * sizeof l->r[0]);
  l->n--;
}

/* [start, end) added to l, merged with its neighbours.  When l is full:
 * false, or with over, two neighbours made one first, so that l claims
 * more than was noted (checksum.c's catch-up then comes sooner, and
 * reads again what was not read: see its catch_up_locked).
 */
bool
intervals_note (struct intervals *l, uint64_t start, uint64_t end,
                bool over)
{
  unsigned i = 0, j;

  if (over && l->n == INTERVALS_MAX)
    merge_closest (l);

  while (i < l->n && l->r[i].end < start)
    i++;
  for (j = i; j < l->n && l->r[j].start <= end; j++) {
    start = min64 (start, l->r[j].start);
    end = max64 (end, l->r[j].end);
  }
  if (i == j) {
    if (l->n == INTERVALS_MAX)
      return false;
    memmove (&l->r[i + 1], &l->r[i], (l->n - i) * sizeof l->r[0]);
    l->n++;
  }
  else {
    memmove (&l->r[i + 1], &l->r[j], (l->n - j) * sizeof l->r[0]);
    l->n -= j - i - 1;
  }
  l->r[i] = (struct interval) { .start = start, .end = end };
  return true;
}

/* Intervals of l that end at or before pos: dropped. */
void
intervals_trim (struct intervals *l, uint64_t pos)
{
  unsigned i = 0;

  while (i < l->n && l->r[i].end <= pos)
    i++;
  memmove (&l->r[0], &l->r[i], (l->n - i) * sizeof l->r[0]);
  l->n -= i;
}

uint64_t
intervals_total (const struct intervals *l)
{
  uint64_t bytes = 0;
  unsigned i;

  for (i = 0; i < l->n; i++)
    bytes += l->r[i].end - l->r[i].start;
  return bytes;
}
