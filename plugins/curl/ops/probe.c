/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * What the object at the URL is: its size, the proof that the server serves
 * byte ranges, and its validators.  They are found once, before nbdkit
 * serves anything.  So a URL that cannot work fails at start-up, with a
 * message, rather than on the first read.  The probe's first answer also
 * chooses the transport (transport_choose).
 */

#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include <nbdkit-plugin.h>

#include "ops/ops.h"

static int probe_on (struct conn *c);

/* The head start goes to a server at least this far away: nearer, the
 * round trip it saves is not worth the bytes a client may never read.
 */
#define HEAD_START_RTT_NS (10 * INT64_C (1000000))

/* -D curl.headstart=0: no head start (for tests of what reads start). */
NBDKIT_DLL_PUBLIC int curl_debug_headstart = 1;

/* The probe's connection, while its first request is on its way. */
static struct conn *probe_conn;

/* Whether the head start went out (head_start, probe_head_start_late). */
static bool head_start_sent;

/* Why no head start goes out now, or NULL when it went (*asked: the
 * bytes its GETs asked for).  why_not is the caller's own reason, or
 * NULL.
 */
static const char *
head_start_go (const char *why_not, uint64_t *asked)
{
  if (!curl_debug_headstart)
    return "-D curl.headstart=0";
  if (why_not != NULL)
    return why_not;
  if (!cfg.pin_object)
    return "pin-object=false (its answers could not be checked)";
  if (cfg.cache_dir != NULL)
    return "cache-dir= (the first bytes may be on disk)";
  *asked = readahead_head_start ();
  return *asked == 0 ? "no read-ahead" : NULL;
}

/* Called by mux.c once the probe's first GET has been sent over HTTP/2
 * (transport_when_sent), at each hop of its redirects: on the first whose
 * connection took h2 and goes to a distant server, the head start
 * (read/readahead.c) goes out right behind it, in the same flight and with
 * the same credentials (exchange_beside).
 */
static void
head_start (void)
{
  int64_t rtt;
  const char *none;
  uint64_t asked = 0;

  if (head_start_sent)
    return;
  /* TLS's first round trip (connection.c), else, where libcurl's TLS
   * is not OpenSSL's, the whole set-up: two round trips and both
   * sides' CPU.
   */
  rtt = probe_conn->tls_rtt_ns > 0 ? probe_conn->tls_rtt_ns
    : connection_handshake_ns (probe_conn) / 2;
  none = head_start_go (!probe_conn->alpn_h2 ? "not HTTP/2 by ALPN"
                        : rtt < HEAD_START_RTT_NS ? "a near server" : NULL,
                        &asked);
  if (none != NULL) {
    nbdkit_debug ("%s: no head start: %s", cfg.shown_url, none);
    return;
  }
  nbdkit_debug ("%s: HTTP/2, TLS answered in %" PRIi64 " ms: a head "
                "start of %" PRIu64 " KiB goes beside the probe",
                cfg.shown_url, rtt / 1000000, asked / 1024);
  head_start_sent = true;
}

/* Its GETs hold up to eight connections at once, each with three
 * descriptors (its socket, and the socket pair of libcurl's own multi
 * handle in curl_easy_perform).  With ulimit -n 40 they left nbdkit
 * none for the client's second NBD connection ("pipe2: Too many open
 * files"), and the copy hung.
 */
#define FEW_FDS 256

/* Once nbdkit runs, over HTTP/1.1: the head start goes out on the
 * pool's connections, which the spares opened during the probe (see
 * transport/spares.c).  It starts a round trip later than beside an
 * HTTP/2 probe, but the client's first reads still find its bytes on
 * their way.  Without it, CDI's qemu-img on a qcow2 at 100 ms paid a
 * round trip for each of three metadata reads, then four more while
 * read-ahead's window grew: 2.3 s where one curl GET took 1.35 s.
 */
void
probe_head_start_late (void)
{
  const char *none = NULL;
  uint64_t asked = 0;
  struct rlimit rl;

  if (head_start_sent || cfg.is_file || transport_shared () ||
      object.size <= 0)
    return;
  if (getrlimit (RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < FEW_FDS)
    none = "few file descriptors (ulimit -n): kept for the client's";
  else if (timing_round_trip () < HEAD_START_RTT_NS)
    none = "a near server";
  none = head_start_go (none, &asked);
  if (none != NULL) {
    nbdkit_debug ("%s: no head start over HTTP/1.1: %s", cfg.shown_url,
                  none);
    return;
  }
  nbdkit_debug ("%s: HTTP/1.1: a head start of %" PRIu64 " KiB goes out "
                "as nbdkit starts", cfg.shown_url, asked / 1024);
  head_start_sent = true;
}

/* One validator of the object, from whichever probe answer carries it:
 * the GET's where both do (reads are GETs, and their answers are
 * compared with it), and an error where the two differ, which means
 * that the object changed between them (or that HEAD and GET are
 * answered from different copies), unless pin-object=false.  0 or -1.
 */
static int
take_validator (const char *name, char *dst, size_t size, const char *head,
                const char *get, bool etag)
{
  bool differ;

  if (head[0] && get[0] && cfg.pin_object) {
    differ = etag ? !validators_etag_weak_equal (head, get)
      : strcmp (head, get) != 0;
    if (differ) {
      nbdkit_error ("%s: the object changed during start-up, or HEAD and "
                    "GET are answered from different copies: HEAD gave "
                    "%s %.80s, a ranged GET %.80s (pin-object=false "
                    "serves a server whose validators change although "
                    "the object does not)", cfg.shown_url, name, head, get);
      return -1;
    }
  }
  snprintf (dst, size, "%s", get[0] ? get : head);
  return 0;
}

/* The object's validators from HEAD (empty when it was not asked or not
 * served) and the ranged GET.
 */
static int
take_validators (const struct object_info *h, const struct object_info *get)
{
  object.status = get->status;
  object.etag_on_get = get->etag[0] != '\0';
  object.last_modified_on_get = get->last_modified[0] != '\0';
  if (take_validator ("ETag", object.etag, sizeof object.etag,
                      h->etag, get->etag, true) == -1 ||
      take_validator ("Last-Modified", object.last_modified,
                      sizeof object.last_modified, h->last_modified,
                      get->last_modified, false) == -1)
    return -1;
  return 0;
}

/* On one connection borrowed from the pool: the probe's requests run
 * one after the other.
 */
int
probe_object (void)
{
  struct conn *c = pool_get ();
  int r;

  if (c == NULL)
    return -1;                  /* connection_new reported why */
  /* The pool's other connections open while the probe waits for its
   * answer (see "Spare connections" in spares.c), unless its connection
   * took HTTP/2 (connection.c).
   */
  if (!cfg.is_file)
    spares_want (cfg.connections - 1);
  r = probe_on (c);
  spares_want (0);
  pool_put (c);
  return r;
}

/* file://: libcurl's handler fakes Content-Length and seeks for a
 * range, so there is nothing more to prove, and nothing to pin.
 */
static int
probe_file (struct conn *c)
{
  struct object_info head = { .size = -1 };

  if (request_head (c, &head) != VERDICT_OK)
    return -1;                  /* reported */
  if (head.size < 0) {
    nbdkit_error ("%s: cannot find the file's size", cfg.shown_url);
    return -1;
  }
  object = head;
  object_serving ();
  return 0;
}

/* HEAD, for validators the GET's answer did not carry.  One that is not
 * served is no error (presigned URLs are signed for GET only): head
 * stays without validators.
 */
static int
probe_head (struct conn *c, struct object_info *head)
{
  enum verdict v = request_head (c, head);

  if (v == VERDICT_OK || v == VERDICT_UNSUPPORTED)
    return 0;
  return -1;                    /* reported */
}

/* One ranged GET of the object's first bytes answers everything in one
 * exchange, as a client's own first GET would: the size (Content-Range
 * total), that ranges work (Accept-Ranges is only a hint: proxies strip
 * it, and some servers send it and then answer 200; a 206 is the
 * proof), the validators, and the bytes a client most often reads first
 * (a partition table, a boot sector, a format's header), kept for it
 * (object/object.c).  An empty object answers 416 "bytes STAR/0" (or
 * 200 with no body), and a smaller one with the bytes it has.  HEAD
 * follows only when the GET's answer carries no validator.
 */
static int
probe_on (struct conn *c)
{
  static char first[FIRST_BYTES];
  struct object_info head = { .size = -1 };
  struct object_info get = { .size = -1 };
  uint32_t got;
  int r;

  if (cfg.is_file)
    return probe_file (c);
  probe_conn = c;
  transport_when_sent (head_start);
  r = request_get_first (c, NULL, &get, 0, first, sizeof first, &got);
  transport_when_sent (NULL);
  if (r == -1)
    return -1;
  switch (transport_choose (c->easy, timing_round_trip ())) {
  case TRANSPORT_SHARED:        /* spares where ALPN could not be read */
    spares_want (0);
    spares_drop ();
    break;
  case TRANSPORT_ASK_HTTP1:     /* nothing to ask of an empty object */
    if (get.size == 0)
      transport_near (false, "the object is empty");
    else
      transport_near (request_answers (c, get.size),
                      "the server does not answer HTTP/1.1");
    break;
  default:
    break;
  }
  if (get.size < 0) {
    nbdkit_error ("GET %s: the answer does not give the object's size "
                  "(Content-Range total is '*')", cfg.shown_url);
    return -1;
  }
  if (cfg.pin_object && !get.etag[0] && !get.last_modified[0] &&
      probe_head (c, &head) == -1)
    return -1;
  if (take_validators (&head, &get) == -1 ||
      digests_check (&cfg.checksum, head.digests, head.digests_cut) == -1 ||
      digests_check (&cfg.checksum, get.digests, get.digests_cut) == -1)
    return -1;
  object.size = get.size;
  /* What mirrors' digests are compared with (mirrors.c). */
  snprintf (object.digests, sizeof object.digests, "%s",
            get.digests[0] ? get.digests : head.digests);
  object.digests_cut = get.digests_cut || head.digests_cut;
  nbdkit_debug ("%s: %" PRIi64 " bytes, ETag %s, Last-Modified %s",
                cfg.shown_url, object.size,
                object.etag[0] ? object.etag : "(none)",
                object.last_modified[0] ? object.last_modified : "(none)");
  object_first_bytes (first, got);
  object_serving ();
  return 0;
}
