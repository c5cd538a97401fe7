/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * What curlpipe's two files share: the options main.c parses and the
 * event loop (loop.c) that runs the transfer.
 */

#ifndef CURLPIPE_H
#define CURLPIPE_H

#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>

/* Exit statuses, documented in curlpipe(1). */
#define EXIT_OK 0
#define EXIT_TRANSFER 1         /* connection, TLS, timeout, I/O errors */
#define EXIT_USAGE 2
#define EXIT_HTTP 22            /* -f and HTTP >= 400, as curl does */

struct options {
  const char *url;
  const char *method;           /* NULL: PUT */
  struct curl_slist *headers;
  const char *userpwd;
  bool insecure;
  const char *cacert;
  bool fail;
  const char *output;           /* NULL: standard output */
  bool silent;
  bool verbose;
  long http_version;
  long connect_timeout_ms;      /* 0: libcurl's default */
  long max_time_ms;             /* 0: none */
  const char *unix_socket;
};

/* Runs the transfer; returns the exit status, and on a failure puts
 * its reason ("URL: cause") in msg for main.c to print.
 */
extern int run_transfer (const struct options *opt, char *msg,
                         size_t msglen);

#endif /* CURLPIPE_H */
