/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The plugin table and the NBD callbacks, nothing else.
 *
 * How it works.  settings/ parses the parameters.  In .get_ready, before
 * nbdkit forks or accepts a client, ops/probe.c asks for the object's first
 * bytes with one ranged GET.  Its 206 proves that the server answers
 * ranges, and its Content-Range gives the size.  HEAD follows only when
 * that answer carries no validator.  The first bytes are kept for the
 * client's first reads.
 *
 * Then chain.c builds the read chain, which every NBD read goes down.  Each
 * read becomes a GET with "Range: bytes=A-B", exactly the bytes asked for.
 * Reads that wait together share one GET of several ranges, answered as
 * multipart/byteranges.  read/pool.c gathers them, read/batch.c asks for
 * them, rules/ranges.c parses the answer.  A client that keeps few reads in
 * flight and reads sequentially is read ahead of (read/readahead.c).
 * NBD_CMD_CACHE asks for read-ahead too.  Every NBD write is one PUT with
 * "Content-Range: bytes A-B/TOTAL", TOTAL being "*" (ops/writing.c).
 * request/ makes all of these requests.  rules/verdict.c judges every
 * answer, HEAD and PUT by their status.
 *
 * Threads.  The thread model is parallel: nbdkit runs all clients' requests
 * at once in its own worker threads.  Each worker runs its HTTP request
 * itself, on a connection borrowed from the pool of connections= handles,
 * and waits when all are busy.  Over HTTP/2 the request goes instead to the
 * one thread that drives every stream (transport/mux.c), and the worker
 * waits for it.  The plugin's own threads start only after the fork that
 * follows .get_ready.  Those are HTTP/2's thread, one per read-ahead
 * segment, one per extra piece of a split read, one per source when there
 * are mirrors, and the spares' timer.  A script run's waiter thread
 * (scripts/spawn.c) lives only as long as the run.  The connection the
 * probe opened survives the fork and is reused.  So are the spare
 * connections opened beside it (transport/spares.c).  pool_start keeps them
 * for a server far away and closes them for one near.
 *
 * Multi-conn.  A client may open several NBD connections only when each
 * sees every other's writes at once and a flush on one covers all.  Reads
 * through any connection see the same object, so read-only handles
 * advertise multi-conn.  HTTP has no flush, and a PUT in flight on one
 * connection may not be visible to a GET on another.  So a writable handle
 * does not.
 */

#include <config.h>

#define NBDKIT_API_VERSION 2

#include <stdio.h>
#include <stdlib.h>

#include <nbdkit-plugin.h>

#include "chain.h"

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

struct handle {
  bool readonly;
  struct ra_client ra;          /* its reads, for read-ahead */
};

static void
curl_load (void)
{
  CURLcode rc = curl_global_init (CURL_GLOBAL_DEFAULT);

  if (rc != CURLE_OK) {
    nbdkit_error ("curl_global_init: %s", curl_easy_strerror (rc));
    exit (EXIT_FAILURE);
  }
}

/* Each module frees its own state, in the reverse order of set-up. */
static void
curl_unload (void)
{
  mirrors_unload ();
  fill_stop ();
  readahead_unload ();
  checksum_unload ();
  cache_unload ();
  pool_unload ();
  mirrors_free ();
  request_unload ();
  connection_unload ();
  script_unload ();
  config_unload ();
  curl_global_cleanup ();
}

/* The parameters checked (config.c), then the sources they name. */
static int
curl_config_complete (void)
{
  if (config_complete () == -1 || cache_config () == -1)
    return -1;
  return mirrors_config ();
}

static int
curl_get_ready (void)
{
  if (script_init () == -1 || connection_init () == -1 ||
      transport_init () == -1 || request_init () == -1 || pool_init () == -1)
    return -1;
  readahead_init ();
  if (probe_object () == -1)
    return -1;
  cache_ready ();
  chain_build ();
  return checksum_ready ();
}

/* After nbdkit forked into the background: threads may start now. */
static int
curl_after_fork (void)
{
  if (transport_start () == -1)
    return -1;
  pool_start ();
  readahead_after_fork ();
  probe_head_start_late ();
  chain_start ();
  return mirrors_start ();
}

static void *
curl_open (int readonly)
{
  struct handle *h = calloc (1, sizeof *h);

  if (h == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  /* The digest is of the object as it was: writes would change it
   * (file: URLs and S3 take none, see curl_can_write).
   */
  if (!readonly && !cfg.is_file && !cfg.aws_sigv4 && checksum_on ()) {
    nbdkit_error ("checksum= needs a read-only export (nbdkit -r): "
                  "writes would change the object it checks");
    free (h);
    return NULL;
  }
  /* Nor would the blocks kept on disk be the object any more. */
  if (!readonly && !cfg.is_file && !cfg.aws_sigv4 && cfg.cache_dir) {
    nbdkit_error ("cache-dir= needs a read-only export (nbdkit -r): "
                  "writes would change the object whose blocks it keeps");
    free (h);
    return NULL;
  }
  /* Nor do mirrors see what is written at url=. */
  if (!readonly && !cfg.aws_sigv4 && sources_many ()) {
    nbdkit_error ("mirror= needs a read-only export (nbdkit -r): the "
                  "mirrors would not have what is written to url=");
    free (h);
    return NULL;
  }
  h->readonly = readonly;
  /* Our own writes will change the object's validators.  Where no write
   * can happen (curl_can_write) the object changes only under someone
   * else's, which pinning is for.
   */
  if (!readonly && !cfg.is_file && !cfg.aws_sigv4)
    object_unpin ();
  return h;
}

static void
curl_close (void *handle)
{
  struct handle *h = handle;

  readahead_close (&h->ra);
  free (h);
}

static int64_t
curl_get_size (void *handle)
{
  return object.size;
}

static int
curl_can_write (void *handle)
{
  struct handle *h = handle;

  /* libcurl's file:// upload truncates the file, and S3 (aws-sigv4)
   * has no partial PUT: no partial writes either way.
   */
  return !h->readonly && !cfg.is_file && !cfg.aws_sigv4;
}

/* --dump-plugin: what this libcurl can do, for bug reports and for
 * choosing http-version= and the TLS options.  The keys nbdkit's own
 * curl plugin prints mean the same here (curl_version is the libcurl the
 * plugin was built against, curl_dynamic_version the one it runs with,
 * curl_protocol_NAME=yes for each protocol), so scripts written for it
 * work; curl_features and curl_protocols list the same in one line.
 * curl_origin_only lists the parameters that go only to url='s origin
 * (params.h's ORIGIN column).
 */
static void
curl_dump_plugin (void)
{
  curl_version_info_data *v = curl_version_info (CURLVERSION_NOW);
  const char *const *p;

  printf ("curl_version=%s\n", LIBCURL_VERSION);
  printf ("curl_dynamic_version=%s\n", v->version);
  printf ("curl_ssl_version=%s\n", v->ssl_version ? v->ssl_version : "");
  printf ("curl_features=");
  for (p = v->feature_names; p && *p; p++)
    printf ("%s%s", p == v->feature_names ? "" : ",", *p);
  printf ("\ncurl_protocols=");
  for (p = v->protocols; p && *p; p++)
    printf ("%s%s", p == v->protocols ? "" : ",", *p);
  printf ("\n");
  for (p = v->protocols; p && *p; p++)
    printf ("curl_protocol_%s=yes\n", *p);
  config_dump ();
}

static int
curl_can_multi_conn (void *handle)
{
  struct handle *h = handle;

  return h->readonly;
}

/* Each HTTP request has a cost of its own, so fewer, larger requests
 * cost less per byte.  nbdcopy sizes its requests by the preferred block size
 * (256 KiB when none is given) and keeps up to 16 MiB in flight per NBD
 * connection, all of it buffered in nbdkit.  Measured on a 1 GiB copy
 * (bench/run, interleaved medians): 2 MiB took -r from about 1.05 s to
 * 0.89 s but raised nbdkit's peak RSS to 84 MiB, over the 64 MiB budget;
 * 1 MiB keeps most of the gain (read-write on one connection 1.83x
 * Debian's plugin, against 1.37x with none) at 52 MiB.  The minimum
 * stays 1: any range can be read and any write made, without
 * read-modify-write.  32 MiB is the largest request NBD clients send.
 */
#define PREFERRED_BLOCK_SIZE (1024 * 1024)
#define MAXIMUM_BLOCK_SIZE (32 * 1024 * 1024)

static int
curl_block_size (void *handle, uint32_t *minimum, uint32_t *preferred,
                 uint32_t *maximum)
{
  *minimum = 1;
  *preferred = PREFERRED_BLOCK_SIZE;
  *maximum = MAXIMUM_BLOCK_SIZE;
  return 0;
}

static int
curl_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
            uint32_t flags)
{
  struct handle *h = handle;

  return chain_pread (&h->ra, buf, count, offset);
}

static int
curl_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
             uint32_t flags)
{
  int r;

  /* What was read ahead of the range before the PUT, or while it was
   * on its way, is of the old bytes.
   */
  readahead_invalidate (count, offset);
  r = writing_pwrite (buf, count, offset);
  readahead_invalidate (count, offset);
  return r;
}

/* NBD_CMD_CACHE, which nbdkit's readahead and scan filters send too:
 * read the range ahead (read/readahead.c).  Without read-ahead memory
 * (readahead-size=0) there is nothing to cache into.
 */
static int
curl_can_cache (void *handle)
{
  return cfg.readahead_size > 0 && !cfg.is_file ? NBDKIT_CACHE_NATIVE
    : NBDKIT_CACHE_NONE;
}

static int
curl_cache (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  struct handle *h = handle;

  return readahead_cache (&h->ra, count, offset);
}

static struct nbdkit_plugin plugin = {
  .name = "curl",
  .longname = "nbdkit curl plugin (nbdkit-curl-plugin project)",
  .version = PACKAGE_VERSION,
  .load = curl_load,
  .unload = curl_unload,
  .config = config_set,
  .config_complete = curl_config_complete,
  .config_help = CONFIG_HELP,
  .dump_plugin = curl_dump_plugin,
  .magic_config_key = "url",
  .get_ready = curl_get_ready,
  .after_fork = curl_after_fork,
  .open = curl_open,
  .close = curl_close,
  .get_size = curl_get_size,
  .can_write = curl_can_write,
  .can_multi_conn = curl_can_multi_conn,
  .block_size = curl_block_size,
  .pread = curl_pread,
  .pwrite = curl_pwrite,
  .can_cache = curl_can_cache,
  .cache = curl_cache,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
