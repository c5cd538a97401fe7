/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Byte-range answers (ranges.c): Content-Range, the spans of a request, and
 * the multipart/byteranges parser.  The parser's state is part of the
 * answer (verdict.h's struct answer), so that the verdict reads it there.
 */

#ifndef RANGES_H
#define RANGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>

/* A read waiting for its bytes: where they go, and (for read/pool.c's
 * queue) how far it has come.
 */
struct read_req {
  uint64_t offset;
  uint32_t count;
  char *buf;
  enum { REQ_QUEUED, REQ_RUNNING, REQ_DONE } state;
  bool failed;
  bool alone;                   /* a piece of a split read */
  int64_t queued_ns;            /* when it was queued (CLOCK_MONOTONIC) */
  pthread_cond_t cond;          /* signalled when done or to lead */
  struct read_req *next;        /* in the queue */
};

/* One contiguous byte range of a request, covering one or more reads. */
struct span {
  uint64_t first, last;         /* inclusive, as in HTTP */
  struct read_req **reqs;
  unsigned nreqs;
  bool filled;
};

extern int64_t ranges_number (const char *p, const char **end);
extern bool ranges_content_range (const char *v, uint64_t *first,
                                 uint64_t *last, int64_t *total);
extern void ranges_scatter (const struct span *s, uint64_t pos,
                          const char *data, size_t len);
extern bool ranges_multipart_type (const char *v, char *boundary,
                                  size_t size);

struct multipart {
  enum {
    MP_PREAMBLE,                /* lines before the first delimiter */
    MP_HEADERS,                 /* a part's header lines */
    MP_DATA,                    /* a part's bytes, counted */
    MP_BREAK,                   /* the line break right after them */
    MP_DELIM,                   /* then a delimiter line, nothing else */
    MP_END,                     /* the epilogue, ignored */
  } state;
  char delim[80];               /* "--" BOUNDARY */
  struct span *spans;
  unsigned nspans, nfilled;
  int64_t total;                /* expected Content-Range total, or -1 */
  char line[1024];
  size_t linelen;
  unsigned preamble_lines;
  unsigned header_lines;        /* of the current part */
  uint64_t epilogue;            /* bytes after the close delimiter */
  bool crlf;                    /* framing: CRLF, else a bare LF */
  unsigned breakpos;            /* MP_BREAK: its bytes seen so far */
  bool part_range_seen;         /* a Content-Range header, valid or not */
  bool part_has_range;          /* a valid one */
  uint64_t part_first, part_last;
  int64_t part_total;
  struct span *cur;             /* MP_DATA: the part's span */
  uint64_t pos;                 /* bytes of it received */
  bool refused;                 /* the body is not the parts asked for */
  bool complete;                /* ranges_multipart_complete found every part */
  char why[128];                /* why it was refused */
};
extern void ranges_multipart_start (struct multipart *mp, const char *boundary,
                             struct span *spans, unsigned nspans,
                             int64_t total);
extern bool ranges_multipart_feed (struct multipart *mp, const char *data,
                            size_t len);
extern bool ranges_multipart_complete (struct multipart *mp);

#endif /* RANGES_H */
