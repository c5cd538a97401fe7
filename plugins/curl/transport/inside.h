/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * What the transport folder's files share, and nobody else sees: the
 * two transports, HTTP/2's functions, and the spares' sockets.
 */

#ifndef TRANSPORT_INSIDE_H
#define TRANSPORT_INSIDE_H

#include "transport/transport.h"

/* connection.c: HTTP/1.1, each handle on its own connection. */
extern const struct transport connection_transport;

/* mux.c: HTTP/2, every request a stream on one connection.  At most
 * MUX_STREAMS requests in flight (the pool's handles): 16 nbdkit
 * threads for each of nbdcopy's 4 connections.
 */
#define MUX_STREAMS 64
/* Requests begun before the thread: the head start's GETs, at most
 * read-ahead's RUNNING_PER_STREAM (8) with room to spare.
 */
#define MUX_EARLY 16
extern const struct transport mux_transport;
extern int mux_init (void);
extern bool mux_on (void);
extern enum transport_choice mux_choose (CURL *e, int64_t rtt);
extern void mux_near (bool http1, const char *why);
extern int mux_start (void);
extern void mux_when_sent (void (*fn) (void));
extern void mux_unload (void);

/* streams.c: the multi handle and its streams, whose state mux.c and
 * streams.c share under its lock (the thread's own fields excepted).
 */
struct mux_state {
  pthread_mutex_t lock;
  CURLM *multi;
  bool on;                      /* requests go through the multi handle */
  bool running;                 /* its thread runs */
  bool stop;                    /* ... and is to end */
  pthread_t thread;
  struct transport_req *head, *tail;  /* handed over, not yet added */
  pthread_condattr_t cond_attr; /* CLOCK_MONOTONIC, for streams_wait */
  bool cond_attr_made;
  unsigned added;               /* in the multi handle: whoever drives */
  /* Added before the thread ran (mux_begin), until mux_wait. */
  struct transport_req *early[MUX_EARLY];
  void (*when_sent) (void);     /* see mux_when_sent */
};
extern struct mux_state mux;
extern CURLcode streams_add (struct transport_req *r);
extern void streams_finish (struct transport_req *r, CURLcode rc);
extern void *streams_drive (void *arg);
extern void streams_drive_here (struct transport_req *r, CURL *e);
extern void streams_wait (struct transport_req *r, bool *client_gone);

/* spares.c */
extern void spares_open_to (const char *ip, int port);
extern curl_socket_t spares_take (const struct curl_sockaddr *a);
extern void spares_unload (void);

#endif /* TRANSPORT_INSIDE_H */
