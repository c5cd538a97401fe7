/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The easy handle's options: what the request carries, the callbacks,
 * TLS, proxies, timeouts, and the upload's length when it is known;
 * and -v's and --trace-ascii's printer (struct trace).
 */

#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "curlpipe.h"
#include "pipe.h"
#include "secrets.h"

/* -v: the exchange's headers and libcurl's notes on stderr, without
 * secrets (common/secrets.c): verbose output gets pasted into bug
 * reports.
 */
static void
print_debug (const char *line, void *opaque)
{
  fprintf (stderr, "%s\n", line);
}

/* --trace-ascii FILE: the same lines in FILE ("-": standard error,
 * standard output being the answer's).
 */
static void
print_trace (const char *line, void *opaque)
{
  fprintf (opaque, "%s\n", line);
}

static const struct debug_printer printer = { print_debug, NULL };

static const char *
ca_bundle (const struct options *opt)
{
  if (opt->cacert)
    return opt->cacert;
  if (getenv ("CURL_CA_BUNDLE"))
    return getenv ("CURL_CA_BUNDLE");
  return getenv ("SSL_CERT_FILE");
}

/* The user's headers, then "Expect:" unless they gave one: waiting
 * for 100 Continue would hold every byte for up to a second.  With -L
 * libcurl's "Expect: 100-continue" stays, as in curl: a server that
 * redirects at once does so before the body goes, which a stream could
 * not send again.  False when out of memory.
 */
static bool
request_headers (const struct options *opt, struct curl_slist **headers)
{
  struct curl_slist *h, *u;

  *headers = NULL;
  for (u = opt->headers; u != NULL; u = u->next) {
    h = curl_slist_append (*headers, u->data);
    if (h == NULL)
      return false;
    *headers = h;
  }
  for (u = opt->headers; u != NULL; u = u->next)
    if (strncasecmp (u->data, "expect:", 7) == 0)
      break;
  if (u == NULL && !opt->follow) {
    h = curl_slist_append (*headers, "Expect:");
    if (h == NULL)
      return false;
    *headers = h;
  }
  /* libcurl 7.88 signs a body it reads through a callback without this
   * header, which S3 requires: the body goes unsigned, as S3 allows.
   */
  for (u = opt->headers; u != NULL; u = u->next)
    if (strncasecmp (u->data, "x-amz-content-sha256", 20) == 0)
      break;
  if (opt->aws_sigv4 && u == NULL) {
    h = curl_slist_append (*headers, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (h == NULL)
      return false;
    *headers = h;
  }
  return true;
}

/* Each option is set while the ones before it succeeded: rc holds the
 * first failure.
 */
#define SET(o, v) \
  if (rc == CURLE_OK) rc = curl_easy_setopt (e, o, v)

/* The way to the server: TLS, keepalive, proxies, names (also for
 * s3.c's requests).
 */
CURLcode
easy_connection_set (const struct options *opt, CURL *e)
{
  CURLcode rc = CURLE_OK;

  if (opt->insecure) {
    SET (CURLOPT_SSL_VERIFYPEER, 0L);
    SET (CURLOPT_SSL_VERIFYHOST, 0L);
  }
  /* As curl does: --cacert, else $CURL_CA_BUNDLE, else $SSL_CERT_FILE
   * (and $SSL_CERT_DIR), else libcurl's default.
   */
  if (ca_bundle (opt))
    SET (CURLOPT_CAINFO, ca_bundle (opt));
  if (opt->capath) {
    SET (CURLOPT_CAPATH, opt->capath);
  }
  else if (opt->cacert == NULL && getenv ("SSL_CERT_DIR") != NULL) {
    SET (CURLOPT_CAPATH, getenv ("SSL_CERT_DIR"));
  }
  if (opt->cert)
    SET (CURLOPT_SSLCERT, opt->cert);
  if (opt->key)
    SET (CURLOPT_SSLKEY, opt->key);
  if (opt->key_passwd)
    SET (CURLOPT_KEYPASSWD, opt->key_passwd);
  /* An idle tunnel behind a NAT would never notice a dead peer. */
  SET (CURLOPT_TCP_KEEPALIVE, 1L);
  SET (CURLOPT_TCP_KEEPIDLE, 60L);
  SET (CURLOPT_TCP_KEEPINTVL, 60L);
  /* Without -x, libcurl reads http_proxy, HTTPS_PROXY, NO_PROXY... */
  if (opt->proxy)
    SET (CURLOPT_PROXY, opt->proxy);
  if (opt->noproxy)
    SET (CURLOPT_NOPROXY, opt->noproxy);
  if (opt->proxy_userpwd)
    SET (CURLOPT_PROXYUSERPWD, opt->proxy_userpwd);
  if (opt->resolve)
    SET (CURLOPT_RESOLVE, opt->resolve);
  if (opt->connect_to)
    SET (CURLOPT_CONNECT_TO, opt->connect_to);
  return rc;
}

/* A regular file's remaining length is known: Content-Length.
 * Anything else is sent chunked (HTTP/1.1) as it comes, unless the
 * user gave the length (S3, Azure and some WebDAV servers refuse
 * chunked bodies).
 */
static CURLcode
set_upload_size (struct pipe_state *st, CURL *e)
{
  curl_off_t size = upload_length (st);
  CURLcode rc = CURLE_OK;

  if (size >= 0 && st->opt->data_binary) {
    SET (CURLOPT_POSTFIELDSIZE_LARGE, size);
  }
  else if (size >= 0) {
    SET (CURLOPT_INFILESIZE_LARGE, size);
  }
  return rc;
}

/* --trace-ascii's file; false after recording the failure. */
static bool
open_trace (struct pipe_state *st)
{
  const char *name = st->opt->trace;

  if (name == NULL)
    return true;
  st->trace.file = strcmp (name, "-") == 0 ? stderr : fopen (name, "we");
  if (st->trace.file == NULL) {
    failure_report (st, "--trace-ascii %s: %s", name, strerror (errno));
    return false;
  }
  st->trace.printer = (struct debug_printer) { print_trace, st->trace.file };
  return true;
}

/* What the request is and carries: URL, method, headers, the body's
 * and the answer's callbacks, credentials, Referer and User-Agent.
 */
static CURLcode
set_request (struct pipe_state *st, CURL *e, struct curl_slist *headers)
{
  const struct options *opt = st->opt;
  CURLcode rc = CURLE_OK;

  SET (CURLOPT_URL, opt->url);
  SET (CURLOPT_ERRORBUFFER, failure_curl_buffer (st));
  SET (CURLOPT_NOSIGNAL, 1L);
  /* --data-binary: a real POST (its body from upload_read_cb, chunked
   * when its length is unknown), which -L turns into a GET without a
   * body on 301, 302 and 303, as curl does; a PUT, or -X's method,
   * stays.
   */
  if (opt->data_binary) {
    SET (CURLOPT_POST, 1L);
  }
  else {
    SET (CURLOPT_UPLOAD, 1L);
  }
  if (opt->method)
    SET (CURLOPT_CUSTOMREQUEST, opt->method);
  SET (CURLOPT_HTTPHEADER, headers);
  SET (CURLOPT_READFUNCTION, upload_read_cb);
  SET (CURLOPT_READDATA, st);
  SET (CURLOPT_WRITEFUNCTION, download_write_cb);
  SET (CURLOPT_WRITEDATA, st);
  SET (CURLOPT_UPLOAD_BUFFERSIZE, (long) UPLOAD_BUFFER_SIZE);
  SET (CURLOPT_BUFFERSIZE, (long) DOWNLOAD_BUFFER_SIZE);
  SET (CURLOPT_PROTOCOLS_STR, "http,https");
  if (opt->userpwd)
    SET (CURLOPT_USERPWD, opt->userpwd);
  if (opt->aws_sigv4)
    SET (CURLOPT_AWS_SIGV4, opt->aws_sigv4);
  if (opt->bearer) {
    SET (CURLOPT_XOAUTH2_BEARER, opt->bearer);
    SET (CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
  }
  if (opt->referer)
    SET (CURLOPT_REFERER, opt->referer);
  if (opt->autoreferer)
    SET (CURLOPT_AUTOREFERER, 1L);
  SET (CURLOPT_USERAGENT, opt->user_agent ? opt->user_agent
       : "curlpipe/" PACKAGE_VERSION);
  return rc;
}

/* -L: a body read from a stream cannot be sent again, so a redirect
 * that needs it again fails (see upload_seek_cb); credentials stay with
 * the first host, as in curl.
 */
static CURLcode
set_redirects (struct pipe_state *st, CURL *e)
{
  const struct options *opt = st->opt;
  CURLcode rc = CURLE_OK;

  if (opt->follow) {
    SET (CURLOPT_FOLLOWLOCATION, 1L);
    SET (CURLOPT_MAXREDIRS, opt->max_redirs);
    SET (CURLOPT_SEEKFUNCTION, upload_seek_cb);
    SET (CURLOPT_SEEKDATA, st);
    if (opt->expect100_ms)
      SET (CURLOPT_EXPECT_100_TIMEOUT_MS, opt->expect100_ms);
  }
  return rc;
}

/* How the exchange goes: its speed, the raw answer and the socket
 * curlpipe looks at, the HTTP version, the time allowed.
 */
static CURLcode
set_exchange (struct pipe_state *st, CURL *e)
{
  const struct options *opt = st->opt;
  CURLcode rc = CURLE_OK;

  if (opt->limit_rate) {
    SET (CURLOPT_MAX_SEND_SPEED_LARGE, opt->limit_rate);
    SET (CURLOPT_MAX_RECV_SPEED_LARGE, opt->limit_rate);
  }
  SET (CURLOPT_HEADERFUNCTION, download_header_cb);
  SET (CURLOPT_HEADERDATA, st);
  SET (CURLOPT_HTTP_TRANSFER_DECODING, 0L);   /* see framing_decode */
  SET (CURLOPT_SOCKOPTFUNCTION, connection_sockopt_cb);
  SET (CURLOPT_SOCKOPTDATA, st);
  /* HTTP/1.1 unless --http2, also over TLS: over HTTP/2 libcurl 7.88
   * gives no sign that the answer's stream has ended while the upload
   * waits for standard input, so a tunnel whose far end went away would
   * not end (see loop.c's answer_over).
   */
  SET (CURLOPT_HTTP_VERSION, opt->http_version != CURL_HTTP_VERSION_NONE
       ? opt->http_version : CURL_HTTP_VERSION_1_1);
  if (opt->connect_timeout_ms)
    SET (CURLOPT_CONNECTTIMEOUT_MS, opt->connect_timeout_ms);
  if (opt->max_time_ms)
    SET (CURLOPT_TIMEOUT_MS, opt->max_time_ms);
  if (opt->unix_socket)
    SET (CURLOPT_UNIX_SOCKET_PATH, opt->unix_socket);
  return rc;
}

/* What is shown of the exchange: -v, --trace-ascii, -w's certificates. */
static CURLcode
set_reports (struct pipe_state *st, CURL *e)
{
  const struct options *opt = st->opt;
  CURLcode rc = CURLE_OK;

  if (opt->verbose || st->trace.file) {
    SET (CURLOPT_VERBOSE, 1L);
    SET (CURLOPT_DEBUGFUNCTION, debug_shown);
    SET (CURLOPT_DEBUGDATA, st->trace.file ? &st->trace.printer : &printer);
  }
  /* -w's %{certs} and %{num_certs} need libcurl to keep the chain. */
  if (opt->write_out && (strstr (opt->write_out, "certs}") ||
                         strstr (opt->write_out, "%{json}")))
    SET (CURLOPT_CERTINFO, 1L);
  return rc;
}

/* --trace-ascii's file, when it is one. */
void
easy_options_close (struct pipe_state *st)
{
  if (st->trace.file != NULL && st->trace.file != stderr)
    fclose (st->trace.file);
  st->trace.file = NULL;
}

/* The easy handle's options, each group set while the ones before it
 * succeeded; false after reporting a failure.
 */
bool
easy_options_set (struct pipe_state *st, struct curl_slist **headers)
{
  CURL *e = st->easy;
  CURLcode rc;

  if (!request_headers (st->opt, headers)) {
    failure_report (st, "out of memory");
    return false;
  }
  if (!open_trace (st))
    return false;

  rc = set_request (st, e, *headers);
  if (rc == CURLE_OK)
    rc = set_redirects (st, e);
  if (rc == CURLE_OK)
    rc = easy_connection_set (st->opt, e);
  if (rc == CURLE_OK)
    rc = set_exchange (st, e);
  if (rc == CURLE_OK)
    rc = set_reports (st, e);
  if (rc == CURLE_OK)
    rc = set_upload_size (st, e);
  if (rc != CURLE_OK) {
    failure_report (st, "%s: %s", st->url, curl_easy_strerror (rc));
    return false;
  }
  return true;
}

/* ws:// and wss:// (websocket.c): a connection only, to the URL given
 * (its scheme http or https), set up as the HTTP path sets up its own:
 * TLS, proxies (a tunnel, through which the upgrade goes), names,
 * timeouts, -v and --trace-ascii.  False after reporting a failure.
 */
bool
easy_options_connect (struct pipe_state *st, const char *url)
{
  const struct options *opt = st->opt;
  CURL *e = st->easy;
  CURLcode rc = CURLE_OK;

  if (!open_trace (st))
    return false;
  SET (CURLOPT_URL, url);
  SET (CURLOPT_ERRORBUFFER, failure_curl_buffer (st));
  SET (CURLOPT_NOSIGNAL, 1L);
  SET (CURLOPT_CONNECT_ONLY, 1L);
  SET (CURLOPT_HTTPPROXYTUNNEL, 1L);
  SET (CURLOPT_PROTOCOLS_STR, "http,https");
  SET (CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
  /* curl_easy_recv reads at most this much a call: 16 KiB by default,
   * a system call and a write to the output each.
   */
  SET (CURLOPT_BUFFERSIZE, (long) DOWNLOAD_BUFFER_SIZE);
  if (opt->connect_timeout_ms)
    SET (CURLOPT_CONNECTTIMEOUT_MS, opt->connect_timeout_ms);
  if (opt->max_time_ms)
    SET (CURLOPT_TIMEOUT_MS, opt->max_time_ms);
  if (opt->unix_socket)
    SET (CURLOPT_UNIX_SOCKET_PATH, opt->unix_socket);
  if (rc == CURLE_OK)
    rc = easy_connection_set (opt, e);
  if (rc == CURLE_OK)
    rc = set_reports (st, e);
  if (rc != CURLE_OK) {
    failure_report (st, "%s: %s", st->url, curl_easy_strerror (rc));
    return false;
  }
  return true;
}

/* Headers curlpipe sends or gets itself (the WebSocket upgrade), shown
 * by -v and --trace-ascii as libcurl's own are, secrets blanked.
 */
void
easy_show_headers (struct pipe_state *st, curl_infotype type,
                   const char *data, size_t size)
{
  if (st->trace.file)
    show_debug (type, data, size, print_trace, st->trace.file);
  else if (st->opt->verbose)
    show_debug (type, data, size, print_debug, NULL);
}

#undef SET
