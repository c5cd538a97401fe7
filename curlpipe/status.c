/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The transfer's outcome: why it failed (failure_report, for main.c to print),
 * and its exit status.
 */

#include <config.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "curlpipe.h"
#include "pipe.h"
#include "secrets.h"

void
failure_report (struct pipe_state *st, const char *fmt, ...)
{
  va_list ap;

  if (st->msg[0] != '\0')
    return;
  va_start (ap, fmt);
  vsnprintf (st->msg, st->msglen, fmt, ap);
  va_end (ap);
}

/* libcurl's error buffer quotes a URL it cannot use, password and
 * all: a proxy's from -x, or from http_proxy or ALL_PROXY, with or
 * without a scheme.  Shown with every URL in it masked.
 */
static void
hide_urls (struct pipe_state *st)
{
  char copy[CURL_ERROR_SIZE];

  shown_message (st->errbuf, copy, sizeof copy);
  memcpy (st->errbuf, copy, sizeof copy);
}

/* The exit status for the transfer's result, and its message: curl's
 * exit status for the same failure is its CURLcode.
 */
int
exit_status (struct pipe_state *st, CURLcode result)
{
  long code = 0;

  if (st->in_error[0]) {
    failure_report (st, "%s: %s", st->url, st->in_error);
    return EXIT_READ;
  }
  /* As curl's -f, an error status counts before whatever came after
   * it (a proxy's 407 and then a reset).
   */
  curl_easy_getinfo (st->easy, CURLINFO_RESPONSE_CODE, &code);
  if (st->opt->fail && code >= 400) {
    failure_report (st, "%s: the server answered HTTP %ld", st->url, code);
    return EXIT_HTTP;
  }
  if (st->out_error[0]) {
    failure_report (st, "%s: %s", st->url, st->out_error);
    return EXIT_WRITE;
  }
  if (st->ch_bad) {
    failure_report (st, "%s: the answer's framing: %s", st->url, st->ch_bad);
    return st->ch_bad_code;
  }
  /* The server ended a whole answer and closed while more was being
   * sent: the exchange is done, as for curl.
   */
  if (result == CURLE_SEND_ERROR && framing_answer_whole (st) == 1)
    result = CURLE_OK;
  if (result == CURLE_SEND_FAIL_REWIND) {
    failure_report (st, "%s: -L: the redirect needs the body sent again, and "
         "standard input (a stream) cannot replay it", st->url);
    return result;
  }
  if (result != CURLE_OK) {
    hide_urls (st);
    /* The error buffer says more than curl_easy_strerror, when set. */
    failure_report (st, "%s: %s%s%s%s", st->url,
         st->errbuf[0] ? st->errbuf : curl_easy_strerror (result),
         st->opt->unix_socket ? " (through the Unix socket " : "",
         st->opt->unix_socket ? st->opt->unix_socket : "",
         st->opt->unix_socket ? ")" : "");
    return result;
  }
  return EXIT_OK;
}
