/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * What read-ahead's three files share, and the lock that guards them all
 * (seg_lock).  readahead.c decides when a stream starts, and which stream a
 * read or cache request is for.  stream.c decides what a stream asks for
 * and serves.  segment.c makes its GETs.
 */

#ifndef SEGMENT_H
#define SEGMENT_H

#include "read/read.h"

#define MAX_SEGS 32             /* segments held, all streams */
#define BLOCK (256 * 1024)      /* a segment's bytes come in blocks */
/* A stream that no read has used for this long is stopped. */
#define IDLE_NS (1000 * INT64_C (1000000))

/* What a segment knows of the stream that asked for it (stream.c's
 * struct stream starts with one).  With seg_lock held.
 */
struct seg_owner {
  bool abandon;                 /* its segments are to stop */
  int64_t used_ns;              /* when a read last used it */
  uint64_t start;               /* where it started, for messages */
  unsigned nsegs;               /* its segments, running or holding */
  unsigned nrunning;            /* ... running */
  uint64_t fetched;             /* bytes its GETs brought */
  /* When one of its GETs has ended, with seg_lock held: ok when it
   * brought its whole range, failed when it failed of itself (not
   * stopped).
   */
  void (*ended) (struct seg_owner *o, bool ok, bool failed);
};

/* One GET of [start, end): with seg_lock held. */
struct seg {
  bool used;
  bool running;                 /* its thread runs */
  bool reaping;                 /* its thread is being joined */
  bool abandon;                 /* its thread is to stop */
  bool failed;                  /* it ended before its end */
  unsigned readers;             /* reads waiting on it */
  unsigned gen;                 /* which GET the slot holds */
  struct seg_owner *owner;
  uint64_t start, end;
  uint64_t got;                 /* the first byte not received yet */
  uint64_t base;                /* blocks before this are freed */
  uint64_t served;              /* bytes copied to reads, for stream.c */
  int64_t drain_until;          /* abandoned: read on until then */
  char **blk;                   /* one per BLOCK of the range */
  struct conn *conn;
  struct headstart *early;      /* begun before nbdkit ran (head start) */
  bool threaded;                /* thread was started */
  pthread_t thread;
};

extern pthread_mutex_t seg_lock;
extern pthread_cond_t seg_cond;     /* bytes came, a GET ended */
extern struct seg seg_table[MAX_SEGS];
extern unsigned seg_blocks, seg_peak_blocks;
extern uint64_t seg_started, seg_fetched;
extern int curl_debug_readahead;

extern bool segment_start_locked (struct seg_owner *o, uint64_t start,
                              uint64_t end);
extern void segment_release_below_locked (struct seg *g, uint64_t pos);
extern void segment_abandon_locked (struct seg *g);
extern void segment_reap_locked (struct seg *g);
extern bool segment_wait_locked (struct seg *g, int64_t until);
extern bool segment_copy_locked (struct seg *g, char *buf, uint64_t from,
                             uint64_t to);
extern void segment_init (void);
extern void segment_after_fork_locked (void);
extern void segment_stop_all_locked (void);

/* stream.c's streams, with seg_lock held: what each asks for and serves
 * is stream.c's, which one a read or a cache request is for readahead.c's.
 * Five VMs booting from one export each keep one.
 */
#define MAX_STREAMS 8
/* Bytes kept behind the highest read served, for reads a little behind
 * it (a client with a few reads in flight).
 */
#define KEEP (2 * BLOCK)
struct stream {
  struct seg_owner o;           /* first: abandon, used_ns, start... */
  bool used;
  bool retiring;                /* asks for nothing more (readahead.c) */
  uint64_t client;              /* its connection's (0: anyone's) */
  uint64_t consumed;            /* the highest end of a read served */
  uint64_t next;                /* the end of what it asked for */
  uint64_t hint;                /* NBD_CMD_CACHE asked up to here */
  uint64_t window;
  uint64_t served;
  uint64_t head_end;            /* the head start's end, 0 if not one */
};
extern struct stream stream_table[MAX_STREAMS];

/* stream.c: all with seg_lock held. */
extern struct stream *stream_start_locked (uint64_t client, uint64_t offset,
                                           uint32_t count, int64_t now);
extern uint32_t stream_serve_locked (struct stream *st, char *buf,
                                     uint32_t count, uint64_t offset,
                                     bool own);
extern uint64_t stream_head_start_locked (struct stream *st, uint64_t size,
                                         int64_t now);
extern void stream_hint_locked (struct stream *st, uint64_t offset,
                                uint32_t count, int64_t now);
extern void stream_tidy_locked (int64_t now, const struct stream *started);
extern bool stream_served_lately (int64_t now);
extern void stream_drop_all_locked (void);
extern void stream_drop_range_locked (uint64_t offset, uint32_t count);
extern void stream_stop_all_locked (void);

#endif /* SEGMENT_H */
