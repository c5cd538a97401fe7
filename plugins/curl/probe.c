/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * What the object at the URL is: its size, the proof that the server
 * serves byte ranges, and its validators.  Found once, before nbdkit
 * serves anything, so that a URL that cannot work fails at start-up
 * with a message rather than on the first read.
 */

#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <nbdkit-plugin.h>

#include "curldefs.h"

/* Answers to HEAD that mean "try a ranged GET instead": presigned
 * object-store URLs are signed for GET only and answer HEAD with 403,
 * and some servers do not implement HEAD at all.
 */
static bool
head_refused (long status)
{
  return status == 403 || status == 405 || status == 501;
}

static int probe_on (struct conn *c);

/* One validator of the object, from whichever probe answer carries it:
 * the GET's where both do (reads are GETs, and their answers are
 * compared with it), and an error where the two differ, which means
 * that the object changed between them (or that HEAD and GET are
 * answered from different copies), unless pin-object=false.  0 or -1.
 */
static int
take_validator (const char *name, char *dst, size_t size, const char *head,
                const char *get, bool etag)
{
  bool differ;

  if (head[0] && get[0] && cfg.pin_object) {
    differ = etag ? !verdict_etag_weak_equal (head, get)
      : strcmp (head, get) != 0;
    if (differ) {
      nbdkit_error ("%s: the object changed during start-up, or HEAD and "
                    "GET are answered from different copies: HEAD gave "
                    "%s %.80s, a ranged GET %.80s (pin-object=false "
                    "serves a server whose validators change although "
                    "the object does not)", cfg.shown_url, name, head, get);
      return -1;
    }
  }
  snprintf (dst, size, "%s", get[0] ? get : head);
  return 0;
}

/* The object's validators from HEAD (when it succeeded: a refusal's
 * validators are of the refusal) and the ranged GET.
 */
static int
take_validators (const struct object_info *head, const struct object_info *get)
{
  static const struct object_info none = { .size = -1 };
  const struct object_info *h =
    head->status >= 200 && head->status <= 299 ? head : &none;

  object.status = get->status;
  object.etag_on_get = get->etag[0] != '\0';
  object.last_modified_on_get = get->last_modified[0] != '\0';
  if (take_validator ("ETag", object.etag, sizeof object.etag,
                      h->etag, get->etag, true) == -1 ||
      take_validator ("Last-Modified", object.last_modified,
                      sizeof object.last_modified, h->last_modified,
                      get->last_modified, false) == -1)
    return -1;
  return 0;
}

/* On one connection borrowed from the pool: the probe's requests run
 * one after the other.
 */
int
probe_object (void)
{
  struct conn *c = pool_get ();
  int r;

  if (c == NULL)
    return -1;                  /* conn_new reported why */
  r = probe_on (c);
  pool_put (c);
  return r;
}

static int
probe_on (struct conn *c)
{
  struct object_info head = { .size = -1 };
  struct object_info get = { .size = -1 };

  if (engine_head (c, &head) == -1)
    return -1;

  if (cfg.is_file) {
    /* libcurl's file:// handler fakes Content-Length and seeks for a
     * range, so there is nothing more to prove.
     */
    if (head.size < 0) {
      nbdkit_error ("%s: cannot find the file's size", cfg.shown_url);
      return -1;
    }
    object = head;
    remote_serving ();
    return 0;
  }

  /* A size of 0 from HEAD is confirmed by a GET like a missing one: a
   * server that says Content-Length: 0 for an object that is not empty
   * would otherwise give an empty disk without an error.
   */
  if (head.status >= 200 && head.status <= 299 && head.size > 0)
    get.size = head.size;
  else if (head_refused (head.status) ||
           (head.status >= 200 && head.status <= 299))
    nbdkit_debug ("HEAD %s: HTTP %ld%s: finding the size with a ranged GET",
                  cfg.shown_url, head.status,
                  head.size < 0 ? " without Content-Length"
                  : head.size == 0 ? " with Content-Length: 0" : "");
  else {
    nbdkit_error ("HEAD %s: the server answered HTTP %ld",
                  cfg.shown_url, head.status);
    return -1;
  }

  /* Accept-Ranges is only a hint (proxies strip it, and some servers
   * send it and then answer 200): a 206 is the proof.  The last byte
   * when the size is known, since s3rver answers "bytes=0-0" with the
   * whole object (it takes an end of 0 for none); else the first, where
   * an empty object answers 416 "bytes STAR/0" (or 200 with no body).
   */
  if (engine_get_byte (c, &get, get.size > 0 ? get.size - 1 : 0) == -1)
    return -1;
  if (get.size < 0) {
    nbdkit_error ("GET %s: one byte: the answer does not give the "
                  "object's size (Content-Range total is '*')", cfg.shown_url);
    return -1;
  }
  if (head.size == 0 && get.size > 0)
    nbdkit_debug ("%s: HEAD said 0 bytes, a ranged GET says %" PRIi64
                  ": using %" PRIi64, cfg.shown_url, get.size, get.size);
  if (take_validators (&head, &get) == -1)
    return -1;
  object.size = get.size;
  nbdkit_debug ("%s: %" PRIi64 " bytes, ETag %s, Last-Modified %s",
                cfg.shown_url, object.size,
                object.etag[0] ? object.etag : "(none)",
                object.last_modified[0] ? object.last_modified : "(none)");
  remote_serving ();
  return 0;
}
