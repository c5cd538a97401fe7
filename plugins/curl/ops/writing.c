/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Writes: each NBD write is a partial PUT (request_put).  The gate below
 * decides when a write may go.  It checks that the server really wrote only
 * the bytes asked for.
 */

#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <nbdkit-plugin.h>

#include "ops/ops.h"

/* Partial PUT is an extension a server may ignore, replacing the whole
 * object with one block.  So each accepted write is checked (the
 * object's size, with HEAD) before any other write is sent, until one
 * write proves the server honours Content-Range: a server that ignored
 * it left an object of 'count' bytes, never of the original size, since
 * offset + count <= size.  A write of the whole object proves nothing
 * (its result is the same either way, so it is correct, but the next
 * partial write is not safe), so the checks go on after it.  A write
 * whose outcome is unknown (the check failed, or the PUT did) leaves the
 * gate UNCONFIRMED: the next write first checks the size, and is not
 * sent if that fails too.  Writes wait at the gate while a check runs.
 */
static struct {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  enum { UNCHECKED, CHECKING, UNCONFIRMED, CHECKED, BROKEN } state;
  /* UNCONFIRMED: the write to check, and whether the server took it. */
  uint32_t count;
  uint64_t offset;
  bool accepted;
} gate = {
  .lock = PTHREAD_MUTEX_INITIALIZER,
  .cond = PTHREAD_COND_INITIALIZER,
  .state = UNCHECKED,
};

/* What became of a write (put), and of the object's size after it
 * (check_size).
 */
enum put_outcome { PUT_TAKEN, PUT_REFUSED, PUT_UNKNOWN };
enum size_check { SIZE_KEPT, SIZE_CHANGED, SIZE_UNKNOWN };

/* The PUT of count bytes at offset: taken (2xx), refused (a 4xx or
 * 5xx that is no "try again": nothing written), or unknown (no answer,
 * retries exhausted on 502-504 behind which the write may have been
 * done, or a redirect not followed: a 303 may come after the write).
 * request_put reports failures, naming a server that takes no partial
 * writes.
 */
static enum put_outcome
put (const void *buf, uint32_t count, uint64_t offset)
{
  struct conn *c = pool_get ();
  enum verdict v;
  long status;

  if (c == NULL)
    return PUT_UNKNOWN;         /* connection_new reported why; nothing sent */
  v = request_put (c, buf, count, offset, &status);
  pool_put (c);
  if (v == VERDICT_OK)
    return PUT_TAKEN;
  if ((v == VERDICT_REFUSED || v == VERDICT_UNSUPPORTED) && status >= 400)
    return PUT_REFUSED;
  return PUT_UNKNOWN;
}

/* After the write of count bytes at offset: whether the object kept its
 * size (SIZE_CHANGED and SIZE_UNKNOWN reported).  The size from HEAD,
 * or where HEAD is not served or gives none or 0, from a ranged GET.
 */
static enum size_check
check_size (uint32_t count, uint64_t offset)
{
  struct object_info now = { .size = -1 };
  struct conn *c = pool_get ();
  enum verdict v;
  bool known;

  if (c == NULL)
    return SIZE_UNKNOWN;        /* connection_new reported why */
  v = request_head (c, &now);
  known = v == VERDICT_OK && now.size > 0;
  /* A 0 from HEAD is confirmed with a ranged GET, where start-up takes
   * the size from (probe.c): some servers say Content-Length: 0 to every
   * HEAD.
   */
  if (v == VERDICT_UNSUPPORTED || (v == VERDICT_OK && now.size <= 0)) {
    char byte;
    uint32_t got;

    now.size = -1;
    known = request_get_first (c, NULL, &now, 0, &byte, 1, &got) == 0;
  }
  pool_put (c);
  if (!known)
    return SIZE_UNKNOWN;
  if (now.size != object.size) {
    nbdkit_error ("pwrite: %s: the server ignored Content-Range: after "
                  "writing %" PRIu32 " bytes at offset %" PRIu64 " the "
                  "object has %" PRIi64 " bytes, not %" PRIi64 "; no "
                  "further writes will be sent", cfg.shown_url, count,
                  offset, now.size, object.size);
    return SIZE_CHANGED;
  }
  return SIZE_KEPT;
}

/* With gate.lock held: leave CHECKING for the outcome of a check of the
 * write of count bytes, which the server took or not.
 */
static void
gate_set_locked (enum size_check checked, uint32_t count, uint64_t offset,
                 bool accepted)
{
  if (checked == SIZE_CHANGED)
    gate.state = BROKEN;
  else if (checked == SIZE_UNKNOWN) {
    gate.state = UNCONFIRMED;
    gate.count = count;
    gate.offset = offset;
    gate.accepted = accepted;
  }
  else if (accepted && count != object.size)
    gate.state = CHECKED;
  else
    gate.state = UNCHECKED;
  pthread_cond_broadcast (&gate.cond);
}

/* The write that finds out whether the server takes Content-Range:
 * alone (the gate is CHECKING), then the object's size checked.
 */
static int
put_and_check (const void *buf, uint32_t count, uint64_t offset)
{
  enum put_outcome done = put (buf, count, offset);
  enum size_check checked;

  /* A refused write changed nothing: nothing to check. */
  checked = done == PUT_TAKEN ? check_size (count, offset)
    : done == PUT_REFUSED ? SIZE_KEPT : SIZE_UNKNOWN;

  pthread_mutex_lock (&gate.lock);
  gate_set_locked (checked, count, offset, done == PUT_TAKEN);
  pthread_mutex_unlock (&gate.lock);
  if (done == PUT_TAKEN && checked == SIZE_KEPT)
    return 0;
  if (done == PUT_TAKEN && checked == SIZE_UNKNOWN)
    nbdkit_error ("pwrite: %s: bytes %" PRIu64 "-%" PRIu64 ": the server "
                  "took the write, but whether it wrote only those bytes "
                  "cannot be confirmed", cfg.shown_url, offset,
                  offset + count - 1);
  errno = EIO;
  return -1;
}

int
writing_pwrite (const void *buf, uint32_t count, uint64_t offset)
{
  enum size_check checked;

  pthread_mutex_lock (&gate.lock);
  for (;;) {
    while (gate.state == CHECKING)
      pthread_cond_wait (&gate.cond, &gate.lock);
    if (gate.state != UNCONFIRMED)
      break;
    /* An earlier write's outcome is unknown: find it out first. */
    gate.state = CHECKING;
    pthread_mutex_unlock (&gate.lock);
    checked = check_size (gate.count, gate.offset);
    pthread_mutex_lock (&gate.lock);
    gate_set_locked (checked, gate.count, gate.offset, gate.accepted);
    if (checked == SIZE_UNKNOWN) {
      pthread_mutex_unlock (&gate.lock);
      nbdkit_error ("pwrite: %s: bytes %" PRIu64 "-%" PRIu64 ": not sent: "
                    "whether the server took an earlier write as a partial "
                    "one cannot be confirmed", cfg.shown_url, offset,
                    offset + count - 1);
      errno = EIO;
      return -1;
    }
  }
  if (gate.state == BROKEN) {
    pthread_mutex_unlock (&gate.lock);
    nbdkit_error ("pwrite: %s: writes stopped: the server ignored "
                  "Content-Range on an earlier write", cfg.shown_url);
    errno = EIO;
    return -1;
  }
  if (gate.state == CHECKED) {
    pthread_mutex_unlock (&gate.lock);
    if (put (buf, count, offset) == PUT_TAKEN)
      return 0;
    errno = EIO;
    return -1;
  }

  /* UNCHECKED: this write goes alone and is checked. */
  gate.state = CHECKING;
  pthread_mutex_unlock (&gate.lock);
  return put_and_check (buf, count, offset);
}
