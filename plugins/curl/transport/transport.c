/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Which transport runs, and the calls that go to it.  HTTP/2 is tried where
 * it may be offered (mux_init).  The probe's first answer then keeps it or
 * drops it (transport_choose), once, before nbdkit serves.  Either way the
 * callers ask the same questions here.  A test may put a transport of its
 * own in (transport_use).
 */

#include <config.h>

#include <nbdkit-plugin.h>

#include "transport/inside.h"

/* A test's transport, in place of both. */
static const struct transport *fake;

static const struct transport *
current (void)
{
  if (fake != NULL)
    return fake;
  return mux_on () ? &mux_transport : &connection_transport;
}

void
transport_use (const struct transport *t)
{
  fake = t;
}

/* Before the probe. */
int
transport_init (void)
{
  return fake != NULL ? 0 : mux_init ();
}

/* After the probe's first answer on handle e (see mux_choose). */
enum transport_choice
transport_choose (CURL *e, int64_t rtt)
{
  return fake != NULL ? TRANSPORT_ONE : mux_choose (e, rtt);
}

/* After TRANSPORT_ASK_HTTP1: whether the server answered HTTP/1.1. */
void
transport_near (bool http1, const char *why)
{
  mux_near (http1, why);
}

/* See mux_when_sent: the head start rides in the probe's flight. */
void
transport_when_sent (void (*fn) (void))
{
  mux_when_sent (fn);
}

/* Once nbdkit runs. */
int
transport_start (void)
{
  return fake != NULL ? 0 : mux_start ();
}

/* At unload, when no request runs. */
void
transport_unload (void)
{
  mux_unload ();
}

/* Whether requests share connections: then a handle keeps none of its
 * own, and the pool need not close handles a near server leaves idle.
 */
bool
transport_shared (void)
{
  return current ()->shared;
}

unsigned
transport_slots (void)
{
  return current ()->slots ();
}

/* The most handles either transport may want: over HTTP/1.1,
 * connections= for each source.
 */
unsigned
transport_slots_max (void)
{
  unsigned most = cfg.connections * nsources;

  return most > MUX_STREAMS ? most : MUX_STREAMS;
}

long
transport_http_version (void)
{
  return current ()->http_version ();
}

CURLcode
transport_perform (struct conn *c, bool *client_gone)
{
  return current ()->perform (c, client_gone);
}

/* Before nbdkit runs: start r; CURLE_FAILED_INIT where the transport
 * cannot (HTTP/1.1 runs each request in its caller's thread).
 */
CURLcode
transport_begin (struct transport_req *r)
{
  const struct transport *t = current ();

  r->by = t;
  r->done = false;
  r->next = NULL;
  return t->begin != NULL ? t->begin (r) : CURLE_FAILED_INIT;
}

/* The end of r, begun by transport_begin: by the transport that began
 * it, even if the probe's answer chose the other since.
 */
CURLcode
transport_wait (struct transport_req *r, bool *client_gone)
{
  return r->by->wait (r, client_gone);
}
