/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The object: what is known about it, and where it can be read.
 * object.c holds its facts (size, validators, pin, first bytes) and
 * whether the plugin serves yet.  sources.c holds url= and each mirror,
 * and picks the source for each request.  hedge.c says when a request
 * is too slow at its source.  The probe (ops/) fills the
 * facts in once; after that everyone reads them.  This folder uses
 * configuration, the rules and the base.
 */

#ifndef OBJECT_H
#define OBJECT_H

#include "settings/settings.h"

/* What the object at a URL is, as its answers show it. */
struct object_info {
  long status;                  /* HTTP status, 0 for file:// */
  int64_t size;                 /* -1 when unknown */
  char etag[ETAG_SIZE];         /* "" when absent */
  char last_modified[LAST_MODIFIED_SIZE];  /* "" when absent */
  /* The probe's ranged GET carried them, so every read's answer must. */
  bool etag_on_get, last_modified_on_get;
  char digests[DIGESTS_SIZE];   /* see struct answer */
  bool digests_cut;
};

/* The object's first bytes, which the probe asks for along with its
 * size.  They serve the client's first reads: a partition table, a
 * boot sector, a format's header.  8 KiB fit, with the answer's
 * headers, in the first flight of a new connection.
 */
#define FIRST_BYTES 8192

/* object.c */
extern struct object_info object;
extern void object_serving (void);
extern bool object_is_serving (void);
extern bool object_stopping (void);
extern void object_unpin (void);
extern bool object_pin (struct pin *pin);
extern bool object_pin_found (struct pin *pin);
extern bool object_pin_of (const struct object_info *info, struct pin *p,
                           char *header, size_t size);
extern void object_plugin_thread (void);
extern void object_piece_thread (const bool *flag);
extern void object_first_bytes (const char *buf, uint32_t len);
extern bool object_read_first (void *buf, uint32_t count, uint64_t offset);
extern bool object_multirange (void);
extern void object_changed_now (void);
extern unsigned object_changed (void);
extern void object_no_multirange (void);

/* sources.c: where reads go when mirror= names more sources than url=.
 * Source 0 is url= (its pin is object.c's); with it alone reads name no
 * source.  How fast each answers is sources.c's own.
 */
#define MAX_SOURCES 9           /* url= and 8 mirrors */
enum source_state {
  SOURCE_PROBING,               /* not proven the same object yet */
  SOURCE_UP,
  SOURCE_DOWN,                  /* failed: asked again later */
  SOURCE_REFUSED,               /* not the object: never used */
};
struct source {
  unsigned id;                  /* 0: url=, then mirror= in order */
  const char *url;              /* mirror=; NULL for url= */
  char *shown;                  /* the URL for messages: no secrets */
  struct origin origin, home;   /* its own, and url='s (or none) */
  bool trusted;                 /* the same origin as url=: secrets */
  /* Set by ops/mirrors.c before the source is first up, then
   * read-only.
   */
  struct object_info info;
  struct pin pin;
  bool pinned;
  bool proven;                  /* the same object as url= */
  char pin_header[ETAG_SIZE + 32];
  char pin_digest[DIGESTS_SIZE];  /* its pin's digest line, "" if none */
};
extern unsigned nsources;
extern struct source sources[MAX_SOURCES];
extern bool sources_many (void);
extern void sources_cap (unsigned per_source);
extern unsigned sources_up (void);
extern unsigned sources_room (void);
extern uint64_t sources_window (void);
/* Why a request was found too slow at its source (hedge_due):
 * its connection was not set up, it ran much longer than expected, no
 * byte came for long, or its bytes come far slower than another source
 * would send them.
 */
enum hedge { HEDGE_NONE, HEDGE_SETUP, HEDGE_LATE, HEDGE_STALL, HEDGE_DRIP };

/* A request at its source, as hedge_due judges it. */
struct source_clock {
  int64_t picked_ns;            /* when it was given to its source */
  int64_t sent_ns;              /* when it went out (0: not yet) */
  int64_t last_byte_ns;         /* its last byte, or when it went out */
  int64_t late_ns;              /* too late from then (0: no limit) */
  int64_t checked_ns;           /* hedge_due's last look */
  uint64_t asked, got;          /* its body bytes */
  uint64_t recv_sent;           /* its source's bytes when it went out */
  double pace;                  /* HEDGE_DRIP: its source's, bytes/ns */
};
extern void sources_add (struct source *s, enum source_state state);
extern void sources_round_trip (int64_t ns);
extern struct source *sources_pick (uint64_t bytes,
                                    const struct source *avoid,
                                    struct source_clock *k);
extern void sources_sent (const struct source *s, struct source_clock *k);
extern void sources_got (struct source *s, size_t n, bool first);
extern void sources_end (struct source *s, uint64_t asked, uint64_t got,
                         int64_t first_byte_ns);
extern bool sources_fail (struct source *s, const char *why, bool hedged);
extern void sources_probed (struct source *s, int64_t wait_ns);
extern void sources_set (struct source *s, enum source_state state,
                         const char *why);
extern bool sources_await (struct source *s);
extern void sources_start (void);
extern void sources_print (void);
extern void sources_stop (void);
extern bool sources_stopping (void);

/* hedge.c: whether a running request is too slow at its source. */
extern enum hedge hedge_due (const struct source *s, struct source_clock *k);
extern void hedge_why (enum hedge h, const struct source_clock *k, char *why,
                       size_t size);

#endif /* OBJECT_H */
