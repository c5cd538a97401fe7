/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Requests: every request the plugin makes goes through this folder.
 * request.c builds each one and retries it.  route.c takes it along its
 * redirects and to its source.  exchange.c sends it once.  callbacks.c
 * takes the answer in, and the rules judge it as it comes.
 * headstart.c begins GETs beside the probe's, and timing.c measures.
 *
 * A request runs on a connection its caller borrowed and gives back.
 * This folder uses the transports, scripts, the object's facts,
 * configuration, the rules and the base.
 */

#ifndef REQUEST_H
#define REQUEST_H

#include "scripts/scripts.h"
#include "transport/transport.h"

#define MAX_SPANS 32            /* ranges in one request */

/* A body's bytes as they come: pos is the object's offset of data. */
typedef bool (*request_sink) (void *opaque, uint64_t pos, const char *data,
                              size_t len);

/* request.c */
extern int request_init (void);
extern void request_unload (void);
extern enum verdict request_head (struct conn *c, struct object_info *info);
extern bool request_answers (struct conn *c, int64_t size);
extern int request_get_first (struct conn *c, struct source *src,
                              struct object_info *info,
                              uint64_t offset, char *buf, uint32_t len,
                              uint32_t *got);
extern enum verdict request_put (struct conn *c, const void *buf,
                                 uint32_t count, uint64_t offset,
                                 long *status);
extern enum verdict request_get_spans (struct conn *c, struct span *spans,
                                       unsigned nspans);
extern enum verdict request_get_stream (struct conn *c, uint64_t first,
                                        uint64_t last, request_sink sink,
                                        void *opaque);

/* headstart.c: a GET begun beside the probe's, judged at its end. */
struct headstart;
extern struct headstart *headstart_begin (struct conn *c, uint64_t first,
                                          uint64_t last, request_sink sink,
                                          void *opaque);
extern enum verdict headstart_end (struct headstart *g);

/* timing.c: how long requests take. */
extern int64_t timing_answer_wait_ns (struct conn *c);
extern int64_t timing_round_trip (void);

#endif /* REQUEST_H */
