/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * mirror=URL: more sources of the object at url=.  A mirror serves reads
 * only once it is proven to hold the same object as url= did when the probe
 * found it.  It must have the same size, and a content digest: one that it
 * and url= state alike, or one equal to checksum=.  url='s strong ETag
 * proves it only with mirror-same-etag=true.  An ETag names a version of
 * one URL's resource, and two files of one size and mtime get one nginx
 * ETag, even on one server.  With anything less the mirror is refused, with
 * a message that says why.  Same-sized versions of an image are common, and
 * one block of another would be served as this one's.
 *
 * Each source has a thread, on a connection of its own, started after
 * nbdkit forks.  It proves its mirror, so that none costs start-up a round
 * trip: reads go to url= until a mirror joins.  The same thread asks its
 * source again when it failed and sources.c says it is due.  That is one
 * GET of its first byte that carries its pin: a mirror that changed answers
 * 412 and stays out.  Each mirror has its own pin, made from its own
 * validators (see probe_new).  For one proven by a digest, the pin is also
 * the digest header that proved it.  Even over HTTP/2 each origin gets a
 * connection of its own from libcurl.
 */

#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-plugin.h>

#include "ops/ops.h"
#include "secrets.h"

/* One thread for each source (see prober), and its handle. */
static pthread_t threads[MAX_SOURCES];
static unsigned nthreads;
static struct conn *conns[MAX_SOURCES];

/* One mirror= URL checked into s: its scheme allowed and http or https,
 * its origin, and whether the user's secrets may go to it.
 */
static int
add_mirror (struct source *s, const char *url, const struct origin *home)
{
  CURLUcode rc;
  char *scheme = config_url_scheme (url, &rc);
  bool web;

  s->shown = shown_url (url);
  if (scheme == NULL || s->shown == NULL) {
    curl_free (scheme);
    nbdkit_error ("mirror: not a valid URL: %s",
                  scheme == NULL ? curl_url_strerror (rc) : "out of memory");
    return -1;
  }
  web = strcasecmp (scheme, "http") == 0 || strcasecmp (scheme, "https") == 0;
  if (!web || !config_allows_scheme (scheme)) {
    nbdkit_error ("mirror: %s: the scheme '%s' is %s", s->shown, scheme,
                  web ? "not in protocols=" : "not http or https");
    curl_free (scheme);
    return -1;
  }
  curl_free (scheme);
  if (redirect_origin (url, &s->origin) == -1) {
    nbdkit_error ("mirror: %s: no host", s->shown);
    return -1;
  }
  /* As for a redirect from https to http: the bytes of a plain-http
   * mirror, and the digest header that proves it, could be changed by
   * anyone on the path, where url= was asked for over TLS.
   */
  if (strcasecmp (home->scheme, "https") == 0 &&
      strcasecmp (s->origin.scheme, "https") != 0 &&
      !cfg.insecure_redirect) {
    nbdkit_error ("mirror: %s: url= is https, this mirror is not: its "
                  "bytes would travel unencrypted and unauthenticated "
                  "(insecure-redirect=true allows it)", s->shown);
    return -1;
  }
  s->url = url;
  s->home = *home;
  /* With url-script the secrets belong to the origin of the URL that
   * the script prints, which may change at each run: no mirror's.
   */
  s->trusted = cfg.url_script == NULL &&
    redirect_same_origin (&s->origin, home);
  sources_add (s, SOURCE_PROBING);
  s->pin = (struct pin) { .etag = "", .last_modified = "", .header = "" };
  return 0;
}

/* config_complete: the sources, url= first.  Secrets go to a mirror
 * only at url='s origin; with url-script there is no such origin.
 */
int
mirrors_config (void)
{
  struct origin home = { .port = -1 };
  const struct curl_slist *m;

  sources[0] = (struct source) { .id = 0, .shown = cfg.shown_url,
                                 .proven = true };
  sources_add (&sources[0], SOURCE_UP);
  if (cfg.mirrors == NULL)
    return 0;
  if (cfg.is_file) {
    nbdkit_error ("mirror: url= is a file: URL; mirrors are for http and "
                  "https");
    return -1;
  }
  if (cfg.url != NULL && redirect_origin (cfg.url, &home) == -1)
    home = (struct origin) { .port = -1 };
  for (m = cfg.mirrors; m != NULL; m = m->next) {
    if (nsources == MAX_SOURCES) {
      nbdkit_error ("mirror: at most %d mirrors", MAX_SOURCES - 1);
      return -1;
    }
    sources[nsources].id = nsources;
    if (add_mirror (&sources[nsources], m->data, &home) == -1) {
      free (sources[nsources].shown);
      sources[nsources].shown = NULL;
      return -1;
    }
    nsources++;
  }
  return 0;
}

/* How a mirror was proven the same object as url=. */
enum proof {
  PROOF_NONE,
  PROOF_DIGEST,                 /* a digest it and url= state alike */
  PROOF_CHECKSUM,               /* a digest it states, checksum='s */
  PROOF_ETAG,                   /* url='s strong ETag, mirror-same-etag */
};

/* What proves a mirror, found at its probe to be info, the object url=
 * is: the proof, or PROOF_NONE with why (size bytes) saying why it is
 * not.  A digest proof leaves in line (size bytes) the mirror's header
 * that states it, which pins its reads.  An ETag names a version of one
 * URL's resource, not content: nginx makes it of the file's mtime and
 * size, so two images of one size and mtime (one SOURCE_DATE_EPOCH,
 * touch -r, rsync -t) have the same, on two servers or at two paths of
 * one.  checksum= alone proves nothing of the bytes a client that never
 * reads every byte gets.
 */
static enum proof
prove (const struct object_info *info, char *why, char *line, size_t size)
{
  bool strong = object.etag[0] && strncmp (object.etag, "W/", 2) != 0;
  bool same_etag = strong && strcmp (object.etag, info->etag) == 0;
  int d;

  line[0] = '\0';
  if (info->size != object.size) {
    snprintf (why, size, "its size is %" PRIi64 " bytes, url='s %" PRIi64,
              info->size, object.size);
    return PROOF_NONE;
  }
  if (info->digests_cut) {
    snprintf (why, size, "its digest headers could not all be read");
    return PROOF_NONE;
  }
  if (digests_check (&cfg.checksum, info->digests, false) == -1) {
    snprintf (why, size, "it states another digest than checksum=");
    return PROOF_NONE;
  }
  d = digests_agree (object.digests, info->digests, why, size, line, size);
  if (d == -1)
    return PROOF_NONE;
  if (d == 1)
    return PROOF_DIGEST;
  if (digests_state_wanted (&cfg.checksum, info->digests, line, size))
    return PROOF_CHECKSUM;
  if (same_etag && cfg.mirror_same_etag)
    return PROOF_ETAG;
  if (same_etag) {
    snprintf (why, size, "it has url='s strong ETag (%.80s) but at another "
              "URL, where an ETag proves nothing (nginx's is the file's "
              "mtime and size: a copy of another version with the same "
              "ones has it too); a digest header both state alike "
              "(Repr-Digest), checksum= with a mirror that states that "
              "digest, or mirror-same-etag=true for mirrors that are byte "
              "copies would prove it", object.etag);
    return PROOF_NONE;
  }
  snprintf (why, size, "no proof it is the same object: no digest it and "
            "url= state alike%s, and not url='s strong ETag (%.80s, it has "
            "%.80s)", cfg.checksum.algo != NULL
            ? " nor one equal to checksum= (checksum= alone proves "
            "nothing of the bytes a client reads)" : "",
            object.etag[0] ? object.etag : "none",
            info->etag[0] ? info->etag : "none");
  return PROOF_NONE;
}

/* What proved a mirror the same object, for debug messages. */
static const char *
proof_name (enum proof p)
{
  switch (p) {
  case PROOF_DIGEST: return "the same digest";
  case PROOF_CHECKSUM: return "its digest is checksum='s";
  case PROOF_ETAG:
    return "the same strong ETag, with mirror-same-etag=true";
  case PROOF_NONE: break;
  }
  return "?";
}

/* The first probe of mirror s: one GET of its first byte. */
static void
probe_new (struct source *s, struct conn *c)
{
  struct object_info info = { .size = -1 };
  char byte, why[sizeof s->pin_digest];
  enum proof p;
  uint32_t got;

  if (request_get_first (c, s, &info, 0, &byte, 1, &got) == -1) {
    sources_set (s, SOURCE_DOWN, "no answer (reported above)");
    return;
  }
  p = prove (&info, why, s->pin_digest, sizeof why);
  if (p == PROOF_NONE) {
    nbdkit_error ("mirror %s: not used: %s", s->shown, why);
    sources_set (s, SOURCE_REFUSED, why);
    return;
  }
  sources_probed (s, timing_answer_wait_ns (c));
  info.etag_on_get = info.etag[0] != '\0';
  info.last_modified_on_get = info.last_modified[0] != '\0';
  s->info = info;
  s->pinned = object_pin_of (&s->info, &s->pin, s->pin_header,
                             sizeof s->pin_header) && cfg.pin_object;
  if (!cfg.pin_object) {
    s->pin_header[0] = '\0';
    s->pin = (struct pin) { .etag = "", .last_modified = "",
                            .header = s->pin_header };
  }
  /* Its own validators pin it as url='s pin url= (not with
   * pin-object=false, for ETags that change by themselves); a digest
   * proves the bytes, so every answer must state the digest that proved
   * them, whatever pin-object=: a mirror replaced by another object of
   * its size, with no validator or new ones, states another or none.
   */
  if (p == PROOF_DIGEST || p == PROOF_CHECKSUM) {
    s->pin.digest = s->pin_digest;
    s->pinned = true;
  }
  nbdkit_debug ("mirror %s: the same object (%s)%s: in use", s->shown,
                proof_name (p), !s->pinned ? ""
                : p == PROOF_ETAG ? ", reads pinned"
                : ", reads pinned, and to its digest");
  sources_set (s, SOURCE_UP, NULL);
}

/* A source that failed, asked again with its pin. */
static void
probe_again (struct source *s, struct conn *c)
{
  struct object_info info = { .size = object.size };
  char byte;
  uint32_t got;

  if (request_get_first (c, s, &info, 0, &byte, 1, &got) == 0)
    sources_set (s, SOURCE_UP, NULL);
  else
    sources_set (s, SOURCE_DOWN, "asked again: it still fails");
}

/* Each source's own thread, on a connection of its own (not the
 * pool's: a probe that hangs until timeout= holds neither the reads nor
 * the other sources' probes): proves a mirror, and asks a source that
 * failed again when it is due.
 */
static void *
prober (void *arg)
{
  struct source *s = arg;
  struct conn *c = connection_new ();

  object_plugin_thread ();
  if (c == NULL) {
    nbdkit_error ("mirror %s: not used: no connection for it", s->shown);
    return NULL;
  }
  conns[s - sources] = c;
  while (sources_await (s)) {
    if (!s->proven)
      probe_new (s, c);
    else
      probe_again (s, c);
  }
  return NULL;
}

/* .after_fork: the threads that prove mirrors, when there are any. */
int
mirrors_start (void)
{
  unsigned i;
  int err;

  if (nsources == 1)
    return 0;
  sources_round_trip (timing_round_trip ());
  /* Over HTTP/1.1 a request in flight is a connection: connections= of
   * them at each source, as at url= alone.
   */
  sources_cap (transport_shared () ? 0 : cfg.connections);
  sources_start ();
  for (i = 0; i < nsources; i++) {
    err = pthread_create (&threads[i], NULL, prober, &sources[i]);
    if (err != 0) {
      nbdkit_error ("mirror: pthread_create: %s", strerror (err));
      return -1;
    }
    nthreads++;
  }
  return 0;
}

void
mirrors_unload (void)
{
  unsigned i;

  if (nthreads > 0) {
    sources_stop ();
    for (i = 0; i < nthreads; i++)
      pthread_join (threads[i], NULL);
    nthreads = 0;
    sources_print ();
  }
}

/* After pool_unload: over HTTP/2 the connections a prober's handle
 * opened stay in mux.c's multi handle, and are closed through that
 * handle's callbacks when it is cleaned up (its close_cb).  Freed in
 * the prober's thread, a handle whose source had been asked again
 * before nbdkit stopped was used after it was freed.
 */
void
mirrors_free (void)
{
  unsigned i;

  for (i = 0; i < MAX_SOURCES; i++) {
    if (conns[i] != NULL)
      connection_free (conns[i]);
    conns[i] = NULL;
  }
  for (i = 1; i < nsources; i++)
    free (sources[i].shown);
  nsources = 1;
}
