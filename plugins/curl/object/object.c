/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * What is known about the object at the URL.  ops/probe.c finds its size
 * and validators once, before nbdkit serves anything.  This file keeps
 * them, with the first bytes that the probe got.  It also says whether
 * reads are pinned to the validators, and whether the server answers
 * multi-range GETs.  And it says whether the plugin serves yet, whether
 * nbdkit stops, and how often answers showed that the object changed.  It
 * is near the bottom of the plugin: requests, reads and writes look at it,
 * and it calls none of them.
 */

#include <config.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <nbdkit-plugin.h>

#include "object/object.h"

struct object_info object = { .size = -1 };

/* Set once the probe is done: connection failures are retried only
 * after it, so a wrong URL fails at start-up at once.
 */
static bool serving;

/* See object_plugin_thread and object_piece_thread. */
static __thread bool plugin_thread;
static __thread const bool *stop_flag;

/* Object pinning: every GET carries a precondition made from the
 * validators found at start-up (If-Match with a strong ETag, else
 * If-Unmodified-Since), and every answer's validators are compared with
 * them (verdict.c), so that bytes of two versions of an object are
 * never mixed in one disk.  A weak ETag cannot go into If-Match (RFC
 * 9110 13.1.1), but it is still compared: If-Unmodified-Since has a
 * resolution of one second, and an object replaced within that second
 * has another ETag.  Writes change the object, so pinning ends when a
 * writable connection opens.
 */
static pthread_mutex_t pin_lock = PTHREAD_MUTEX_INITIALIZER;
static bool pinned;
/* The probe found validators that pin the object (a precondition, or
 * one every answer must show).  Set once, before nbdkit serves, and
 * never unset: the first bytes serve every read, not only one, and the
 * head start may serve (object_pin_found).
 */
static bool pin_effective;
static struct pin pin = { .etag = "", .last_modified = "", .header = "" };
static char pin_header[sizeof object.etag + 32];  /* "If-Match: ..." */

/* The object's first bytes from the probe (FIRST_BYTES), for the
 * client's first reads.  They are the version the reads are pinned to;
 * while reads are not pinned they serve one read only, and writes (a
 * writable connection) end them.
 */
static pthread_mutex_t first_lock = PTHREAD_MUTEX_INITIALIZER;
static char first[FIRST_BYTES];
static uint32_t first_len;      /* 0: none kept */

/* Whether the server answers a GET of several ranges with the parts
 * asked for; false once it did not (batch.c then asks one range per
 * request).  Only ever goes from true to false.
 */
static bool multirange = true;

/* The probe is done (object is filled in): from now on connection
 * failures are retried, and reads are pinned to the object found.
 */
void
object_serving (void)
{
  serving = true;
  if (!cfg.pin_object || cfg.is_file)
    return;
  LOCK_FOR_SCOPE (&pin_lock);
  if (object.etag[0] == '\0' && object.last_modified[0] == '\0') {
    nbdkit_debug ("%s: no ETag or Last-Modified: the object cannot be "
                  "pinned", cfg.shown_url);
    return;
  }
  pin_effective = object_pin_of (&object, &pin, pin_header,
                                 sizeof pin_header);
  pinned = true;
  if (!pin_effective) {
    nbdkit_debug ("%s: reads cannot be pinned: only HEAD gave a validator "
                  "(a weak ETag, which cannot be sent in If-Match)",
                  cfg.shown_url);
    return;
  }
  nbdkit_debug ("%s: reads pinned: %s%s answers must show ETag %s%s, "
                "Last-Modified %s%s", cfg.shown_url,
                pin_header[0] ? pin_header : "no precondition (weak ETag)",
                pin_header[0] ? ";" : ":",
                object.etag[0] ? object.etag : "(none)",
                pin.etag_required ? " (required)" : "",
                object.last_modified[0] ? object.last_modified : "(none)",
                pin.last_modified_required ? " (required)" : "");
}

/* The pin that info's validators make, into *p (its strings are
 * info's, and header, size bytes, holds the precondition): whether it
 * pins (a precondition, or a validator every answer must show: else,
 * with HEAD's weak ETag alone, a replacement need not show anything to
 * compare).  mirrors.c makes each mirror's.
 */
bool
object_pin_of (const struct object_info *info, struct pin *p, char *header,
               size_t size)
{
  /* Every validator the probe's own ranged GET carried, every read's
   * answer must carry: the same server answers the same request.  A
   * validator only HEAD gave is compared where an answer has it, and
   * the server checks it if it is the precondition.
   */
  *p = (struct pin) {
    .etag = info->etag, .last_modified = info->last_modified,
    .etag_required = info->etag_on_get,
    .last_modified_required = info->last_modified_on_get,
    .header = header,
  };
  header[0] = '\0';
  if (info->etag[0] && strncmp (info->etag, "W/", 2) != 0)
    snprintf (header, size, "If-Match: %s", info->etag);
  else if (info->last_modified[0])
    snprintf (header, size, "If-Unmodified-Since: %s", info->last_modified);
  return header[0] != '\0' || p->etag_required;
}

/* The probe's first len bytes of the object (all of it when it is
 * smaller): kept, if the probe gave the whole of them.
 */
void
object_first_bytes (const char *buf, uint32_t len)
{
  uint64_t want = object.size < FIRST_BYTES ? object.size : FIRST_BYTES;
  LOCK_FOR_SCOPE (&first_lock);

  first_len = 0;
  if (len != want || len > sizeof first)
    return;
  memcpy (first, buf, len);
  first_len = len;
}

/* Serve a read from the first bytes if they hold it: true if they did.
 * On every read, so one outside them takes no lock.
 */
bool
object_read_first (void *buf, uint32_t count, uint64_t offset)
{
  if (offset >= FIRST_BYTES || count > FIRST_BYTES - offset)
    return false;
  LOCK_FOR_SCOPE (&first_lock);
  if (offset >= first_len || count > first_len - offset)
    return false;
  memcpy (buf, first + offset, count);
  if (!pin_effective)
    first_len = 0;
  return true;
}

/* A writable connection opened: the object will change under our own
 * writes, so validators no longer identify it, and the first bytes kept
 * may be overwritten.
 */
void
object_unpin (void)
{
  {
    LOCK_FOR_SCOPE (&first_lock);
    first_len = 0;
  }
  LOCK_FOR_SCOPE (&pin_lock);

  if (pinned)
    nbdkit_debug ("%s: a writable connection: reads no longer pinned",
                  cfg.shown_url);
  pinned = false;
}

/* Are reads pinned now?  If so (or once they were), *p says to what;
 * its strings do not change after the probe.
 */
bool
object_pin (struct pin *p)
{
  LOCK_FOR_SCOPE (&pin_lock);

  *p = pin;
  return pinned;
}

/* Whether the probe found validators that pin the object (a
 * precondition, or one every answer must show), whether or not reads
 * are still pinned: *p says to what.  The head start, asked for before
 * the object was known, is judged against them (headstart_end);
 * writes since drop what it holds of their ranges (curl.c).
 */
bool
object_pin_found (struct pin *p)
{
  LOCK_FOR_SCOPE (&pin_lock);

  *p = pin;
  return pin_effective;
}

/* libcurl's file:// handler reads one range only. */
bool
object_multirange (void)
{
  return !cfg.is_file && __atomic_load_n (&multirange, __ATOMIC_RELAXED);
}

/* The server answered a multi-range GET with something else. */
void
object_no_multirange (void)
{
  __atomic_store_n (&multirange, false, __ATOMIC_RELAXED);
}

bool
object_is_serving (void)
{
  return serving;
}

/* Is nbdkit shutting down, or has the client of the calling request
 * gone away?  nbdkit_nanosleep says so, but only in the threads that
 * serve connections: called from .get_ready (the probe, the first run
 * of the scripts) nbdkit 1.32 aborts in an assertion.
 */
bool
object_stopping (void)
{
  if (stop_flag != NULL)
    return __atomic_load_n (stop_flag, __ATOMIC_RELAXED);
  return serving && !plugin_thread && nbdkit_nanosleep (0, 0) == -1;
}

/* The calling thread is one of the plugin's own (mux.c's, read-ahead's
 * segments'): it serves no client, and is stopped at unload.  There
 * nbdkit 1.32's nbdkit_nanosleep reports "aborting sleep" as an error
 * while nbdkit shuts down, so object_stopping does not ask it.
 */
void
object_plugin_thread (void)
{
  plugin_thread = true;
}

/* The calling thread runs a piece of a read for the nbdkit thread
 * that serves it (split.c), which sets *flag when its client went or
 * nbdkit stops: object_stopping says so here then.
 */
void
object_piece_thread (const bool *flag)
{
  plugin_thread = true;
  stop_flag = flag;
}

/* How many answers showed that the object changed: read-ahead drops what
 * it holds when this moves (read/readahead.c).
 */
static unsigned changed;

void
object_changed_now (void)
{
  __atomic_add_fetch (&changed, 1, __ATOMIC_SEQ_CST);
}

unsigned
object_changed (void)
{
  return __atomic_load_n (&changed, __ATOMIC_SEQ_CST);
}
