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
#include <pthread.h>

#include <curl/curl.h>

/* verdict.c: is an answer the one asked for (its own header, so that
 * tests/test-verdict.c can use it alone).
 */
#include "verdict.h"

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
 * After config_complete the struct is read-only, so the engine reads it
 * from any thread without a lock.
 */
struct curl_config {
  const char *url;
  char *shown_url;              /* url= for messages: no secrets */
  unsigned connections;         /* size of the handle pool */
  unsigned timeout;             /* seconds: connect and stall limit */
  unsigned retries;             /* for transient failures */
  unsigned retry_delay_ms;      /* the first; doubled each time */
  bool pin_object;              /* send and check the validators */
  bool sslverify;
  const char *cainfo;
  const char *capath;
  struct curl_slist *headers;   /* header=, in the order given */
  const char *user;
  char *password;               /* from nbdkit_read_password */
  bool followlocation;
  bool redirect_cache;          /* reads go to the chain's end */
  bool location_trusted;        /* secrets to other origins too */
  bool insecure_redirect;       /* follow https to http */
  const char *protocols;        /* allowed schemes, libcurl spelling */
  const char *user_agent;
  bool is_file;                 /* the URL's scheme is file:// */
  char *cookie;                 /* from nbdkit_read_password */
  const char *cookiefile, *cookiejar;
  const char *proxy, *proxy_user;
  const char *proxy_cainfo, *proxy_capath;  /* an HTTPS proxy's CA */
  char *proxy_password;         /* from nbdkit_read_password */
  long http_version;            /* CURL_HTTP_VERSION_* */
  long ssl_version;             /* CURL_SSLVERSION_* */
  const char *ssl_cipher_list, *tls13_ciphers;
  bool tcp_keepalive, tcp_nodelay;
  const char *unix_socket_path;
  struct curl_slist *resolve;   /* resolve=, CURLOPT_RESOLVE */
  long ipresolve;               /* CURL_IPRESOLVE_* */
  const char *header_script, *cookie_script, *url_script;
  unsigned header_script_renew, cookie_script_renew;  /* s, 0 never */
  unsigned url_script_renew;
  const char *aws_sigv4;        /* PROVIDER[:REGION[:SERVICE]] */
  bool readahead;               /* start streams on sequential reads */
  uint64_t readahead_size;      /* bytes read ahead, at most; 0 none */
};
extern struct curl_config cfg;

extern int config_set (const char *key, const char *value);
extern int config_complete (void);
extern bool config_allows_scheme (const char *scheme);
extern char *config_url_scheme (const char *url, CURLUcode *rc);
extern const char *config_header_refused (const char *line, size_t len,
                                          int *name_len);
extern void config_unload (void);
extern CURLcode config_apply (CURL *e);

#define DEFAULT_CONNECTIONS 16
#define DEFAULT_TIMEOUT 60
#define DEFAULT_RETRIES 5
#define DEFAULT_RETRY_DELAY_MS 1000
#define MAX_RETRY_DELAY_MS 30000    /* backoff and Retry-After cap */

#define CONFIG_HELP \
  "url=<URL>                 (required) The disk image URL.\n"         \
  "connections=<N>           Parallel HTTP connections (default 16).\n" \
  "timeout=<SECS>            Connect and stall timeout (default 60;\n" \
  "                          0 is the default).\n"                    \
  "retries=<N>               Retries after a transient error (5).\n"  \
  "retry-delay=<SECS>        First retry delay, then doubled (1).\n"  \
  "pin-object=false          Do not pin the object's validators.\n"   \
  "sslverify=false           Do not verify the server's certificate.\n" \
  "cainfo=<FILE>             CA certificates to verify with.\n"        \
  "capath=<DIR>              Directory of CA certificates.\n"          \
  "header=<HEADER>           Extra request header (repeatable).\n"     \
  "user=<USER>               User name for authentication.\n"          \
  "password=<PASSWORD>       Password (or -, +FILE, -FD).\n"           \
  "followlocation=false      Do not follow redirects.\n"               \
  "redirect-cache=false      Follow url='s redirects for every read.\n" \
  "location-trusted=true     Send credentials to redirected origins.\n" \
  "insecure-redirect=true    Follow redirects from https to http.\n"   \
  "protocols=<LIST>          Allowed schemes (default http,https,file).\n" \
  "user-agent=<STR>          User-Agent header to send.\n"            \
  "cookie=<COOKIE>           Cookie to send (or -, +FILE, -FD).\n"     \
  "cookiefile=<FILE>         Read cookies from FILE (\"\" for none).\n" \
  "cookiejar=<FILE>          Write cookies to FILE at exit.\n"         \
  "cookie-script=<SCRIPT>    Its output is the cookie.\n"              \
  "cookie-script-renew=<SECS> Run cookie-script again this often.\n"   \
  "header-script=<SCRIPT>    Its output lines are request headers.\n"  \
  "header-script-renew=<SECS> Run header-script again this often.\n"   \
  "url-script=<SCRIPT>       Its output is the URL (instead of url=).\n" \
  "url-script-renew=<SECS>   Run url-script again this often.\n"      \
  "proxy=<PROXY>             Proxy URL.\n"                             \
  "proxy-user=<USER>         Proxy user name.\n"                       \
  "proxy-password=<PASSWORD> Proxy password (or -, +FILE, -FD).\n"     \
  "proxy-cainfo=<FILE>       CA certificates for an HTTPS proxy.\n"    \
  "proxy-capath=<DIR>        Directory of CA certificates for it.\n"  \
  "http-version=<VERSION>    none, 1.0, 1.1 (default), 2.0, 2TLS,\n"   \
  "                          2-prior-knowledge, 3, 3only.\n"           \
  "ssl-version=<VERSION>     default, tlsv1, tlsv1.0 ... tlsv1.3.\n"   \
  "ssl-cipher-list=<LIST>    TLS 1.2 and older cipher list.\n"         \
  "tls13-ciphers=<LIST>      TLS 1.3 cipher suites.\n"                 \
  "tcp-keepalive=true        Enable TCP keepalive probes.\n"           \
  "tcp-nodelay=false         Allow Nagle's algorithm.\n"               \
  "unix-socket-path=<PATH>   Connect through a Unix socket.\n"         \
  "resolve=<HOST:PORT:ADDR>  Resolve HOST:PORT to ADDR (repeatable).\n" \
  "ipresolve=<any|v4|v6>     Which IP versions to use.\n"              \
  "aws-sigv4=<PROVIDER...>   Sign requests with AWS Signature V4.\n" \
  "readahead=false           Do not read ahead of sequential reads.\n" \
  "readahead-size=<SIZE>     Bytes read ahead at most (default 32M;\n" \
  "                          0: none, and no NBD_CMD_CACHE)."

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
};

/* The object's first bytes, which the probe asks for along with its
 * size and keeps for the client's first reads: a partition table, a
 * boot sector, a format's header.  8 KiB fit, with the answer's headers,
 * in the first flight of a new connection (10 segments of 1,448 bytes).
 */
#define FIRST_BYTES 8192

/* remote.c: what is known about the object (probe.c fills it in and
 * calls remote_serving): pin, multi-range answers, serving yet.
 */
extern struct object_info object;
extern void remote_serving (void);
extern bool remote_is_serving (void);
extern bool remote_stopping (void);
extern void remote_unpin (void);
extern bool remote_pin (struct pin *pin);
extern void remote_first_bytes (const char *buf, uint32_t len);
extern bool remote_read_first (void *buf, uint32_t count, uint64_t offset);
extern bool remote_multirange (void);
extern void remote_changed_now (void);
extern unsigned remote_changed (void);
extern void remote_no_multirange (void);

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

struct conn;
extern int pool_init (void);
extern void pool_start (void);
extern void pool_unload (void);
extern struct conn *pool_get (void);
extern struct conn *pool_try_get (void);
extern void pool_put (struct conn *c);
extern int pool_pread (void *buf, uint32_t count, uint64_t offset);

/* ranges.c: byte-range answers. */
extern int64_t parse_number (const char *p, const char **end);
extern bool parse_content_range (const char *v, uint64_t *first,
                                 uint64_t *last, int64_t *total);
extern void span_scatter (const struct span *s, uint64_t pos,
                          const char *data, size_t len);
extern bool parse_multipart_type (const char *v, char *boundary,
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
  char why[128];                /* why the answer was refused */
};
extern void multipart_start (struct multipart *mp, const char *boundary,
                             struct span *spans, unsigned nspans,
                             int64_t total);
extern bool multipart_feed (struct multipart *mp, const char *data,
                            size_t len);
extern bool multipart_complete (struct multipart *mp);

/* connection.c: the easy handles, each with its own connection. */
struct conn {
  CURL *easy;
  curl_socket_t sock;           /* its connection's socket, for ack_now */
  bool adopted;                 /* open_cb gave it a spare connection */
  bool on_spare;                /* ... since conn_took_spare last asked */
  char errbuf[CURL_ERROR_SIZE];
};
extern int connection_init (void);
extern void connection_unload (void);
extern struct conn *conn_new (void);
extern void conn_free (struct conn *c);
extern void conn_stop (void);
extern void conn_want_spares (unsigned n);
extern unsigned conn_spares (void);
extern void conn_drop_spares (void);
extern bool conn_took_spare (struct conn *c);
extern void conn_spare_timer (void);
extern int64_t monotonic_ns (void);

/* script.c: header-script, cookie-script and url-script. */
extern int script_init (void);
extern int script_headers (struct curl_slist **list);
extern int script_cookie (char **cookie);
extern int script_url (char **url);
extern bool script_url_refused (const char *url);
extern void script_unload (void);

/* engine.c: every request the plugin makes goes through these. */
#define MAX_SPANS 32            /* ranges in one request */
extern int engine_init (void);
extern void engine_unload (void);
extern int engine_head (struct conn *c, struct object_info *info);
extern int engine_get_first (struct conn *c, struct object_info *info,
                             uint64_t offset, char *buf, uint32_t len,
                             uint32_t *got);
extern int engine_put (struct conn *c, const void *buf, uint32_t count,
                       uint64_t offset, long *status);
extern enum verdict engine_get_spans (struct conn *c, struct span *spans,
                                      unsigned nspans);
extern enum verdict engine_get_stream (struct conn *c, uint64_t first,
                                       uint64_t last,
                                       bool (*sink) (void *, uint64_t,
                                                     const char *, size_t),
                                       void *opaque);

/* timing.c: how long requests take. */
extern int64_t timing_answer_wait_ns (struct conn *c);
extern int64_t timing_round_trip (void);
/* A server at least SLOW_NS away (timing_round_trip): further than
 * loopback or a LAN, which answer well within a millisecond; users'
 * remote images are 10-150 ms away.  pool.c and prefetch.c.
 */
#define SLOW_NS (2 * 1000000)

/* prefetch.c: read-ahead for sequential streams (see there). */
#define DEFAULT_READAHEAD_SIZE (32 * 1024 * 1024)
extern void prefetch_unload (void);
extern int prefetch_pread (void *buf, uint32_t count, uint64_t offset);
extern int prefetch_cache (uint32_t count, uint64_t offset);
extern void prefetch_invalidate (uint32_t count, uint64_t offset);

/* writing.c: NBD writes, each checked (see there). */
extern int writing_pwrite (const void *buf, uint32_t count, uint64_t offset);

#endif /* CURLDEFS_H */
