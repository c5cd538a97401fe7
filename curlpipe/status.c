/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The transfer's outcome: why it failed, as each part of it found out
 * (struct failure), the message main.c prints, and the exit status.
 */

#include <config.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "curlpipe.h"
#include "pipe.h"
#include "secrets.h"

/* main.c's buffer for the message, empty until a failure. */
void
failure_init (struct pipe_state *st, char *msg, size_t msglen)
{
  st->failure.msg = msg;
  st->failure.msglen = msglen;
}

void
failure_report (struct pipe_state *st, const char *fmt, ...)
{
  va_list ap;

  if (st->failure.msg[0] != '\0')
    return;
  va_start (ap, fmt);
  vsnprintf (st->failure.msg, st->failure.msglen, fmt, ap);
  va_end (ap);
}

/* The message so far ("" for none), for -w's %{errormsg}. */
const char *
failure_message (const struct pipe_state *st)
{
  return st->failure.msg;
}

/* Each side's failure replaces the one before on that side: the last
 * one is the cause the transfer ended with.
 */
void
failure_input (struct pipe_state *st, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (st->failure.input, sizeof st->failure.input, fmt, ap);
  va_end (ap);
}

void
failure_output (struct pipe_state *st, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (st->failure.output, sizeof st->failure.output, fmt, ap);
  va_end (ap);
}

/* What libcurl would have put in its error buffer, for a failure that
 * curlpipe finds in libcurl's place (see loop.c's answer_over).
 */
void
failure_curl (struct pipe_state *st, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (st->failure.curl, sizeof st->failure.curl, fmt, ap);
  va_end (ap);
}

bool
failure_input_seen (const struct pipe_state *st)
{
  return st->failure.input[0] != '\0';
}

bool
failure_output_seen (const struct pipe_state *st)
{
  return st->failure.output[0] != '\0';
}

/* CURLOPT_ERRORBUFFER: libcurl writes its own failures here. */
char *
failure_curl_buffer (struct pipe_state *st)
{
  return st->failure.curl;
}

/* libcurl's error buffer quotes a URL it cannot use, password and
 * all: a proxy's from -x, or from http_proxy or ALL_PROXY, with or
 * without a scheme.  Shown with every URL in it masked.
 */
static void
hide_urls (struct pipe_state *st)
{
  char copy[CURL_ERROR_SIZE];

  shown_message (st->failure.curl, copy, sizeof copy);
  memcpy (st->failure.curl, copy, sizeof copy);
}

/* The exit status for the transfer's result, and its message: curl's
 * exit status for the same failure is its CURLcode.
 */
int
exit_status (struct pipe_state *st, CURLcode result)
{
  long code = 0;
  const char *refusal;
  CURLcode refusal_code;

  if (failure_input_seen (st)) {
    failure_report (st, "%s: %s", st->url, st->failure.input);
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
  if (failure_output_seen (st)) {
    failure_report (st, "%s: %s", st->url, st->failure.output);
    return EXIT_WRITE;
  }
  refusal = framing_refusal (st, &refusal_code);
  if (refusal != NULL) {
    failure_report (st, "%s: the answer's framing: %s", st->url, refusal);
    return refusal_code;
  }
  if (result == CURLE_SEND_FAIL_REWIND) {
    failure_report (st, "%s: -L: the redirect needs the body sent again, and "
         "standard input (a stream) cannot replay it", st->url);
    return result;
  }
  if (result != CURLE_OK) {
    hide_urls (st);
    /* The error buffer says more than curl_easy_strerror, when set. */
    failure_report (st, "%s: %s%s%s%s", st->url,
         st->failure.curl[0] ? st->failure.curl
         : curl_easy_strerror (result),
         st->opt->unix_socket ? " (through the Unix socket " : "",
         st->opt->unix_socket ? st->opt->unix_socket : "",
         st->opt->unix_socket ? ")" : "");
    return result;
  }
  return EXIT_OK;
}
