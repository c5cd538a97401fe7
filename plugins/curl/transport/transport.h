/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Transports: how a request set up on an easy handle reaches the
 * server.  There are two.  Over HTTP/1.1 each handle runs its request
 * on its own connection (connection.c).  Over HTTP/2 every request is
 * a stream on one shared connection (mux.c).  The probe's first answer
 * chooses one (transport_choose); nothing outside this folder knows
 * which runs.  spares.c opens spare connections beside the probe.
 * A test may put a transport of its own in (transport_use).
 *
 * This folder owns the easy handles, their connections and the multi
 * handle.  It uses the object's facts, configuration and the base.
 */

#ifndef TRANSPORT_H
#define TRANSPORT_H

#include "object/object.h"

/* A server at least SLOW_NS away (by the probe's round trip): further
 * than loopback or a LAN, which answer well within a millisecond.
 * Users' remote images are 10-150 ms away.
 */
#define SLOW_NS (2 * 1000000)

/* A connection: an easy handle and what is known of its socket. */
struct conn {
  CURL *easy;
  curl_socket_t sock;           /* its connection's socket, for ack_now */
  bool adopted;                 /* open_cb gave it a spare connection */
  bool on_spare;                /* ... since connection_took_spare asked */
  bool alpn_h2;                 /* its last request went on h2 (ALPN) */
  int64_t hello_ns;             /* its TLS's ClientHello */
  int64_t tls_rtt_ns;           /* ... and the first answer's delay */
  char errbuf[CURL_ERROR_SIZE];
};

/* A request begun before nbdkit runs (transport_begin), on its owner's
 * memory until transport_wait returns.
 */
struct transport_req {
  const struct transport *by;   /* the transport that began it */
  CURL *easy;
  CURLcode rc;
  bool done;
  pthread_cond_t cond;
  struct transport_req *next;
};

/* What each transport does. */
struct transport {
  const char *name;
  bool shared;                  /* requests share connections */
  unsigned (*slots) (void);     /* requests in flight at once */
  long (*http_version) (void);  /* CURLOPT_HTTP_VERSION for requests */
  /* Run the request set up on c, in the calling thread. */
  CURLcode (*perform) (struct conn *c, bool *client_gone);
  /* Before nbdkit runs: start r now, wait for it later.  NULL: none. */
  CURLcode (*begin) (struct transport_req *r);
  CURLcode (*wait) (struct transport_req *r, bool *client_gone);
};

/* transport.c: the one that runs. */
enum transport_choice {
  TRANSPORT_ONE,                /* one transport was possible */
  TRANSPORT_SHARED,             /* HTTP/2 kept */
  TRANSPORT_DROPPED,            /* back to HTTP/1.1 connections */
  TRANSPORT_ASK_HTTP1,          /* near: try HTTP/1.1 (transport_near) */
};
extern int transport_init (void);
extern enum transport_choice transport_choose (CURL *e, int64_t rtt);
extern void transport_near (bool http1, const char *why);
extern void transport_when_sent (void (*fn) (void));
extern int transport_start (void);
extern void transport_unload (void);
extern bool transport_shared (void);
extern unsigned transport_slots (void);
extern unsigned transport_slots_max (void);
extern long transport_http_version (void);
extern CURLcode transport_perform (struct conn *c, bool *client_gone);
extern CURLcode transport_begin (struct transport_req *r);
extern CURLcode transport_wait (struct transport_req *r, bool *client_gone);
extern void transport_use (const struct transport *t);

/* connection.c */
extern int connection_init (void);
extern void connection_unload (void);
extern struct conn *connection_new (void);
extern void connection_free (struct conn *c);
extern void connection_stop (void);
extern bool connection_took_spare (struct conn *c);
extern int64_t connection_handshake_ns (struct conn *c);

/* spares.c: connections opened beside the probe, for the pool. */
extern void spares_want (unsigned n);
extern unsigned spares_count (void);
extern void spares_drop (void);
extern void spares_start_timer (void);
extern void spares_stop (void);

#endif /* TRANSPORT_H */
