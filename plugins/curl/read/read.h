/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Reads: the links of the read chain, and the pool of connections.
 * chain.c puts the links in order once, and each calls only its next:
 *
 *     checksum     hashes what the links below return (checksum=)
 *     read-ahead   serves a sequential client from GETs ahead of it
 *     split        asks a large read of several mirrors at once
 *     first bytes  the probe's bytes, for the client's first reads
 *     queue        waits for a connection, batches reads, asks them
 *
 * A link that is off is not in the chain.  The queue is the last link:
 * its batches go to requests (request/).  pool.c also lends
 * connections to the probe, writes and read-ahead's GETs.  This folder
 * uses requests and everything below them.
 */

#ifndef READ_H
#define READ_H

#include "request/request.h"
#include "store/store.h"

/* One NBD connection's reads, as read-ahead sees them: whether its
 * client waits for its answers is decided for each connection.
 * curl.c's handle holds it, zeroed at .open; its fields are
 * readahead.c's.
 */
struct ra_client {
  uint64_t id;                  /* 0 until its first read or cache */
  unsigned inside;              /* its reads in readahead.c now */
  int64_t busy_ns;              /* when more than MAX_QD were, last */
};

/* A read on its way down the chain. */
struct read_op {
  struct ra_client *client;     /* its NBD connection's reads */
  char *buf;
  uint32_t count;
  uint64_t offset;
  bool alone;                   /* a piece of a split read: not batched */
};

/* A link: 0, or -1 with errno set (the error reported). */
struct read_link {
  const char *name;
  int (*pread) (const struct read_link *self, const struct read_op *op);
  const struct read_link *next; /* NULL for the last */
};

static inline int
read_next (const struct read_link *self, const struct read_op *op)
{
  return self->next->pread (self->next, op);
}

/* The rest of op from done bytes on. */
static inline struct read_op
read_rest (const struct read_op *op, uint32_t done)
{
  struct read_op rest = *op;

  rest.buf += done;
  rest.count -= done;
  rest.offset += done;
  return rest;
}

/* checksum.c */
extern bool checksum_on (void);
extern int checksum_ready (void);
extern int checksum_link (const struct read_link *self,
                          const struct read_op *op);
extern void checksum_unload (void);

/* readahead.c */
/* The head start: bytes asked for in the probe's flight. */
#define HEAD_START (12 * 1024 * 1024)
extern bool readahead_on (void);
extern void readahead_init (void);
extern uint64_t readahead_head_start (void);
extern void readahead_after_fork (void);
extern void readahead_unload (void);
extern int readahead_link (const struct read_link *self,
                           const struct read_op *op);
extern int readahead_cache (struct ra_client *cl, uint32_t count,
                            uint64_t offset);
extern void readahead_close (struct ra_client *cl);
extern void readahead_invalidate (uint32_t count, uint64_t offset);

/* split.c */
extern int split_link (const struct read_link *self,
                       const struct read_op *op);

/* pool.c: the queue, and the connections it lends. */
extern int pool_init (void);
extern void pool_start (void);
extern void pool_unload (void);
extern int pool_link (const struct read_link *self, const struct read_op *op);
extern struct conn *pool_get (void);
extern struct conn *pool_try_get (void);
extern void pool_put (struct conn *c);

#endif /* READ_H */
