/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * What the plugin's files share, grouped by the file that defines it.
 */

#ifndef CURLDEFS_H
#define CURLDEFS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <pthread.h>

#include <curl/curl.h>

/* verdict.c: is an answer the one asked for (its own header, so that
 * tests/unit/test-verdict.c can use it alone).
 */
#include "verdict.h"
#include "redirect.h"

static inline uint64_t
min64 (uint64_t a, uint64_t b)
{
  return a < b ? a : b;
}

static inline uint64_t
max64 (uint64_t a, uint64_t b)
{
  return a > b ? a : b;
}

/* Whether the n bytes at s are word, ignoring case. */
static inline bool
is_word (const char *word, const char *s, size_t n)
{
  return strlen (word) == n && strncasecmp (word, s, n) == 0;
}

/* Scope-based cleanup. */
static inline void
cleanup_free (void *ptr)
{
  free (* (void **) ptr);
}
#define CLEANUP_FREE __attribute__ ((cleanup (cleanup_free)))

static inline void
cleanup_slist (struct curl_slist **list)
{
  curl_slist_free_all (*list);
}
#define CLEANUP_SLIST __attribute__ ((cleanup (cleanup_slist)))

static inline void
cleanup_unlock (pthread_mutex_t **lock)
{
  pthread_mutex_unlock (*lock);
}
#define LOCK_FOR_SCOPE(m)                                               \
  __attribute__ ((cleanup (cleanup_unlock)))                            \
  pthread_mutex_t *scope_lock_ = (m);                                   \
  pthread_mutex_lock (scope_lock_)

/* config.c: every parameter, parsed and checked before anything runs.
 * After .get_ready (script_init may set shown_url when url= is absent)
 * the struct is read-only, so the engine reads it from any thread
 * without a lock.  Its fields are params.h's rows.
 */
#include "params.h"

struct curl_config {
#define FIELD_OF(key, kind, type, field, dflt, lo, hi, origin, help) \
  type field;
  CURL_PARAMS (FIELD_OF)
#undef FIELD_OF
  char *shown_url;              /* url= for messages: no secrets */
  bool is_file;                 /* the URL's scheme is file:// */
};
extern struct curl_config cfg;

extern int config_set (const char *key, const char *value);
extern int config_complete (void);
extern bool config_allows_scheme (const char *scheme);
extern char *config_url_scheme (const char *url, CURLUcode *rc);
extern void config_unload (void);
extern CURLcode config_apply (CURL *e);
extern void config_dump (void);
/* The help text: every row's. */
#define HELP_OF(key, kind, type, field, dflt, lo, hi, origin, help) help
#define CONFIG_HELP CURL_PARAMS (HELP_OF)

/* headers.c: the request headers a user may add. */
extern const char *headers_refused (const char *line, size_t len,
                                    int *name_len);

/* What the object at the URL is: probe.c finds it once at start-up. */
struct object_info {
  long status;                  /* HTTP status, 0 for file:// */
  int64_t size;                 /* -1 when unknown */
  char etag[ETAG_SIZE];         /* "" when absent */
  char last_modified[LAST_MODIFIED_SIZE];  /* "" when absent */
  /* The probe's ranged GET carried them, so every read's answer must
   * (remote.c).
   */
  bool etag_on_get, last_modified_on_get;
  char digests[DIGESTS_SIZE];   /* see struct answer */
  bool digests_cut;
};

/* The object's first bytes, which the probe asks for along with its
 * size and keeps for the client's first reads: a partition table, a
 * boot sector, a format's header.  8 KiB fit, with the answer's headers,
 * in the first flight of a new connection (10 segments of 1,448 bytes).
 */
#define FIRST_BYTES 8192

/* sources.c: where reads go when mirror= names more sources than url=:
 * each source's state, its pin and how fast it answers.  Source 0 is
 * url= (its pin is remote.c's); with it alone reads name no source and
 * go as they always did.
 */
#define MAX_SOURCES 9           /* url= and 8 mirrors */
enum source_state {
  SOURCE_PROBING,               /* not proven the same object yet */
  SOURCE_UP,
  SOURCE_DOWN,                  /* failed: asked again at down_until */
  SOURCE_REFUSED,               /* not the object: never used */
};
struct source {
  unsigned id;                  /* 0: url=, then mirror= in order */
  const char *url;              /* mirror=; NULL for url= (route.c) */
  char *shown;                  /* the URL for messages: no secrets */
  struct origin origin, home;   /* its own, and url='s (or none) */
  bool trusted;                 /* the same origin as url=: secrets */
  /* Set by mirrors.c before the source is first up, then read-only. */
  struct object_info info;
  struct pin pin;
  bool pinned;
  bool proven;                  /* the same object as url= */
  char pin_header[ETAG_SIZE + 32];
  char pin_digest[DIGESTS_SIZE];  /* its pin's digest line, "" if none */
  /* sources.c's, under its lock (recv: atomic). */
  enum source_state state;
  int64_t down_until, down_ns;  /* when to ask again, how long after */
  unsigned running;             /* requests out */
  unsigned flowing;             /* ... whose answers are coming */
  uint64_t outstanding;         /* bytes its running requests asked */
  uint64_t recv, recv_sampled;  /* body bytes come (atomic) */
  uint64_t recv_ended;          /* ... for requests that ended */
  int64_t busy_start, busy_total, busy_sampled;  /* ns with requests out */
  double rate;                  /* bytes/ns when busy; 0: unknown */
  int64_t lat_ns;               /* to the first byte, recent */
  uint64_t requests, failures, hedges;
};
extern unsigned nsources;
extern struct source sources[MAX_SOURCES];
extern bool sources_many (void);
extern uint64_t sources_window (void);
/* Why a request was found too slow at its source (sources_hedge_due):
 * its connection was not set up, it ran much longer than expected, no
 * byte came for long, or its bytes come far slower than another source
 * would send them.
 */
enum hedge { HEDGE_NONE, HEDGE_SETUP, HEDGE_LATE, HEDGE_STALL, HEDGE_DRIP };

/* A request at its source, as sources_hedge_due judges it. */
struct source_clock {
  int64_t picked_ns;            /* when it was given to its source */
  int64_t sent_ns;              /* when it went out (0: not yet) */
  int64_t last_byte_ns;         /* its last byte, or when it went out */
  int64_t late_ns;              /* too late from then (0: no limit) */
  int64_t checked_ns;           /* sources_hedge_due's last look */
  uint64_t asked, got;          /* its body bytes */
  uint64_t recv_sent;           /* its source's bytes when it went out */
  double pace;                  /* HEDGE_DRIP: its source's, bytes/ns */
};
extern struct source *sources_pick (uint64_t bytes,
                                    const struct source *avoid,
                                    struct source_clock *k);
extern void sources_sent (const struct source *s, struct source_clock *k);
extern void sources_got (struct source *s, size_t n, bool first);
extern void sources_end (struct source *s, uint64_t asked, uint64_t got,
                         int64_t first_byte_ns);
extern bool sources_fail (struct source *s, const char *why, bool hedged);
extern enum hedge sources_hedge_due (const struct source *s,
                                     struct source_clock *k);
extern void sources_why_slow (enum hedge h, const struct source_clock *k,
                              char *why, size_t size);
extern void sources_probed (struct source *s, int64_t wait_ns);
extern void sources_set (struct source *s, enum source_state state,
                         const char *why);
extern bool sources_await (struct source *s);
extern void sources_start (void);
extern void sources_print (void);
extern void sources_stop (void);
extern bool sources_stopping (void);

/* mirrors.c: mirror= checked, each mirror proven the same object (and
 * asked again after it failed) in a thread of its own.
 */
extern int mirrors_config (void);
extern int mirrors_start (void);
extern void mirrors_unload (void);
extern void mirrors_free (void);

/* remote.c: what is known about the object (probe.c fills it in and
 * calls remote_serving): pin, multi-range answers, serving yet.
 */
extern struct object_info object;
extern void remote_serving (void);
extern bool remote_is_serving (void);
extern bool remote_stopping (void);
extern void remote_unpin (void);
extern bool remote_pin (struct pin *pin);
extern bool remote_pin_found (struct pin *pin);
extern bool remote_pin_of (const struct object_info *info, struct pin *p,
                           char *header, size_t size);
extern void remote_plugin_thread (void);
extern void remote_piece_thread (const bool *flag);
extern void remote_first_bytes (const char *buf, uint32_t len);
extern bool remote_read_first (void *buf, uint32_t count, uint64_t offset);
extern bool remote_multirange (void);
extern void remote_changed_now (void);
extern unsigned remote_changed (void);
extern void remote_no_multirange (void);

/* probe.c: what the object is, found once at start-up. */
extern int probe_object (void);

/* pool.c: the connections (easy handles) and the queue of reads
 * waiting for one.
 */
struct read_req {
  uint64_t offset;
  uint32_t count;
  char *buf;
  enum { REQ_QUEUED, REQ_RUNNING, REQ_DONE } state;
  bool failed;
  bool alone;                   /* a piece of a split read (split.c) */
  int64_t queued_ns;            /* when it was queued (CLOCK_MONOTONIC) */
  pthread_cond_t cond;          /* signalled when done or to lead */
  struct read_req *next;        /* in the queue */
};

struct conn;
extern int pool_init (void);
extern void pool_start (void);
extern void pool_unload (void);
extern struct conn *pool_get (void);
extern struct conn *pool_try_get (void);
extern void pool_put (struct conn *c);
extern int pool_pread (void *buf, uint32_t count, uint64_t offset,
                       bool alone);

/* split.c */
extern int split_pread (void *buf, uint32_t count, uint64_t offset);

/* batch.c: a batch of reads asked for. */
#define MAX_BATCH 64            /* reads in one batch */
extern void batch_run (struct conn *c, struct read_req **batch,
                       unsigned n);

/* connection.c: the easy handles, each with its own connection. */
struct conn {
  CURL *easy;
  curl_socket_t sock;           /* its connection's socket, for ack_now */
  bool adopted;                 /* open_cb gave it a spare connection */
  bool on_spare;                /* ... since conn_took_spare last asked */
  bool alpn_h2;                 /* its last request went on h2 (ALPN) */
  int64_t hello_ns;             /* connection.c: its TLS's ClientHello */
  int64_t tls_rtt_ns;           /* ... and the first answer's delay */
  char errbuf[CURL_ERROR_SIZE];
};
extern int connection_init (void);
extern void connection_unload (void);
extern struct conn *conn_new (void);
extern void conn_free (struct conn *c);
extern void conn_stop (void);
extern bool conn_took_spare (struct conn *c);
extern int64_t conn_handshake_ns (struct conn *c);

/* mux.c: HTTP/2, every request a stream on one connection.  At most
 * MUX_STREAMS requests in flight (the pool's handles): 16 nbdkit
 * threads for each of nbdcopy's 4 connections.
 */
#define MUX_STREAMS 64
/* One request handed to mux.c: on the waiting thread's stack, or (one
 * begun before nbdkit runs: mux_begin) wherever its owner keeps it.
 */
struct mux_req {
  CURL *easy;
  CURLcode rc;
  bool done;
  pthread_cond_t cond;
  struct mux_req *next;
};
/* Requests begun before the thread: the head start's GETs, at most
 * read-ahead's RUNNING_PER_STREAM (8) with room to spare.
 */
#define MUX_EARLY 16
extern int mux_init (void);
extern bool mux_on (void);
extern long mux_http_version (void);
enum mux_choice { MUX_OFF, MUX_KEPT, MUX_DROPPED, MUX_ASK_HTTP1 };
extern enum mux_choice mux_choose (CURL *e, int64_t rtt);
extern void mux_near (bool http1, const char *why);
extern int mux_start (void);
extern CURLcode mux_perform (CURL *e, bool *client_gone);
extern void mux_when_sent (void (*fn) (void));
extern CURLcode mux_begin (struct mux_req *r);
extern CURLcode mux_wait (struct mux_req *r, bool *client_gone);
extern void mux_unload (void);

/* spares.c: connections opened beside the probe, for the pool. */
extern void spares_want (unsigned n);
extern void spares_open_to (const char *ip, int port);
extern curl_socket_t spares_take (const struct curl_sockaddr *a);
extern unsigned spares_count (void);
extern void spares_drop (void);
extern void spares_start_timer (void);
extern void spares_stop (void);
extern void spares_unload (void);

/* script.c: header-script, cookie-script and url-script. */
extern int script_init (void);
extern int script_headers (struct curl_slist **list);
extern int script_cookie (char **cookie);
extern int script_url (char **url, unsigned *serial);
extern int script_url_serial (unsigned *serial);
extern bool script_url_refused (const char *url);
extern void script_unload (void);

/* spawn.c: one run of a script. */
extern int spawn_run (const char *what, const char *script,
                      unsigned iteration, char **out);

/* engine.c: every request the plugin makes goes through these. */
#define MAX_SPANS 32            /* ranges in one request */
extern int engine_init (void);
extern void engine_unload (void);
extern enum verdict engine_head (struct conn *c, struct object_info *info);
extern bool engine_answers (struct conn *c, int64_t size);
extern int engine_get_first (struct conn *c, struct source *src,
                             struct object_info *info,
                             uint64_t offset, char *buf, uint32_t len,
                             uint32_t *got);
extern enum verdict engine_put (struct conn *c, const void *buf,
                               uint32_t count, uint64_t offset,
                               long *status);
extern enum verdict engine_get_spans (struct conn *c, struct span *spans,
                                      unsigned nspans);
extern enum verdict engine_get_stream (struct conn *c, uint64_t first,
                                       uint64_t last,
                                       bool (*sink) (void *, uint64_t,
                                                     const char *, size_t),
                                       void *opaque);
struct early_get;
extern struct early_get *engine_stream_begin (struct conn *c, uint64_t first,
                                              uint64_t last,
                                              bool (*sink) (void *, uint64_t,
                                                            const char *,
                                                            size_t),
                                              void *opaque);
extern enum verdict engine_stream_end (struct early_get *g);

/* timing.c: how long requests take, and the clock for them. */
extern int64_t timing_answer_wait_ns (struct conn *c);
extern int64_t timing_round_trip (void);
extern int64_t monotonic_ns (void);
extern struct timespec monotonic_at (int64_t ns);
/* A server at least SLOW_NS away (timing_round_trip): further than
 * loopback or a LAN, which answer well within a millisecond; users'
 * remote images are 10-150 ms away.  pool.c and prefetch.c.
 */
#define SLOW_NS (2 * 1000000)

/* prefetch.c: read-ahead for sequential streams (see there). */
/* The head start: bytes asked for in the probe's flight (prefetch.c). */
#define HEAD_START (12 * 1024 * 1024)
extern void prefetch_init (void);
extern uint64_t prefetch_head_start (void);
extern void prefetch_after_fork (void);
extern void prefetch_unload (void);
/* One NBD connection's reads, as read-ahead sees them: whether its
 * client waits for its answers is decided for each connection.  curl.c's
 * handle holds it, zeroed at .open; its fields are prefetch.c's.
 */
struct ra_client {
  uint64_t id;                  /* 0 until its first read or cache */
  unsigned inside;              /* its reads in prefetch.c now */
  int64_t busy_ns;              /* when more than MAX_QD were, last */
};
extern int prefetch_client_pread (struct ra_client *cl, void *buf,
                                  uint32_t count, uint64_t offset);
extern int prefetch_pread (void *buf, uint32_t count, uint64_t offset);
extern void prefetch_close (struct ra_client *cl);
/* digests.c: checksum=ALGO:HEX, and the digests servers state. */
struct checksum_want {
  const char *algo;             /* "sha256", "sha512", "md5"; NULL: none */
  unsigned len;                 /* the digest's bytes */
  unsigned char digest[64];
};
extern struct checksum_want wanted;
extern int checksum_config (const char *value);
extern int checksum_headers (const char *digests, bool cut);
extern int digests_agree (const char *a, const char *b, char *why,
                          size_t size, char *pin, size_t pin_size);
extern int digests_state_wanted (const char *digests, char *line,
                                 size_t size);
extern void digest_hex (const unsigned char *d, unsigned n, char *out);
/* checksum.c: the object's digest, as reads cover it. */
extern int checksum_ready (void);
extern int checksum_read (const void *buf, uint32_t count, uint64_t offset);
extern void checksum_unload (void);
/* served.c: checksum='s fallback, digests of bytes served that the
 * spill file could not keep, compared when they are hashed again.
 */
extern bool served_keep (const char *buf, uint64_t start, uint64_t end);
extern void served_reach (uint64_t to);
extern void served_hash (const char *data, size_t len, uint64_t pos);
extern bool served_differ (uint64_t *start, uint64_t *end);
extern bool served_all_compared (void);
extern unsigned served_max (void);
extern void served_free (void);
extern int prefetch_cache (struct ra_client *cl, uint32_t count,
                           uint64_t offset);
extern void prefetch_invalidate (uint32_t count, uint64_t offset);

/* writing.c: NBD writes, each checked (see there). */
extern int writing_pwrite (const void *buf, uint32_t count, uint64_t offset);

#endif /* CURLDEFS_H */
