/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * transfer_run: the transfer from start to end.  It sets up each part's
 * state, opens the streams, sets the easy handle's options
 * (easyopts.c), runs the loop (loop.c), reports the outcome (status.c)
 * and closes what it opened; what happens while the transfer runs is in
 * loop.c's top comment.
 */

#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "curlpipe.h"
#include "pipe.h"
#include "secrets.h"
#include "websocket.h"

/* -D's file, standard input and output. */
static bool
open_streams (struct pipe_state *st)
{
  if (!download_headers_open (st))
    return false;
  upload_open (st);
  output_start (st);
  return true;
}

/* Open the streams, set the easy handle's options, run it to its end
 * and deliver the answer; CURLE_FAILED_INIT (with the reason recorded)
 * when it could not start.
 */
static CURLcode
run_to_end (struct pipe_state *st, CURLM *multi, struct curl_slist **headers)
{
  const struct options *opt = st->opt;
  CURLcode result;

  if (!open_streams (st) || !easy_options_set (st, headers))
    return CURLE_FAILED_INIT;
  result = upload_check_sent (st, loop_run (st, multi));
  progress_show (st, true);
  if (result == CURLE_OK)
    upload_check_end (st);
  /* An answer with no body still makes the -o file, as curl does. */
  if (result == CURLE_OK && opt->output && !failure_output_seen (st) &&
      !output_on_stderr (st))
    output_file_open (st);
  output_drain (st);
  return result;
}

/* -D's file and -o's file: a failure to close one is a write error,
 * unless the transfer has failed already.  Returns the exit status.
 */
static int
close_files (struct pipe_state *st, int status)
{
  const struct options *opt = st->opt;
  bool to_file = opt->output != NULL && strcmp (opt->output, "-") != 0;

  if (!download_headers_close (st) && status == EXIT_OK) {
    failure_report (st, "-D %s: %s", opt->dump_header, strerror (errno));
    status = EXIT_WRITE;
  }
  if (!output_close (st) && to_file && status == EXIT_OK) {
    failure_report (st, "%s: %s", opt->output, strerror (errno));
    status = EXIT_WRITE;
  }
  upload_close (st);
  easy_options_close (st);
  return status;
}

int
transfer_run (const struct options *opt, char *msg, size_t msglen)
{
  struct pipe_state st = {
    .opt = opt,
  };
  struct curl_slist *headers = NULL;
  CURLM *multi = NULL;
  CURLcode result = CURLE_FAILED_INIT;
  int status;
  bool output_ok;

  /* ws:// and wss:// run a loop of their own (websocket.c). */
  if (websocket_url (opt->url))
    return websocket_run (opt, msg, msglen);
  failure_init (&st, msg, msglen);
  connection_init (&st);
  upload_init (&st);
  st.url = shown_url (opt->url);
  output_ok = output_init (&st);
  st.easy = curl_easy_init ();
  multi = curl_multi_init ();
  if (st.url == NULL || !output_ok || st.easy == NULL || multi == NULL) {
    failure_report (&st, "out of memory");
    status = EXIT_NOMEM;
    goto out;
  }
  io_ignore_sigpipe ();
  progress_start (&st);

  result = run_to_end (&st, multi, &headers);
  status = exit_status (&st, result);
  if (failure_message (&st)[0] == '\0' && status != EXIT_OK)
    failure_report (&st, "%s: %s", st.url, curl_easy_strerror (result));

 out:
  if (multi && st.easy)
    curl_multi_remove_handle (multi, st.easy);
  status = close_files (&st, status);
  /* -w last, once the status is final: %{exitcode} is what curlpipe
   * exits with, also when closing -D's or -o's file failed.
   */
  if (opt->write_out && st.easy)
    write_out_print (&st, status);
  curl_easy_cleanup (st.easy);
  curl_multi_cleanup (multi);
  curl_slist_free_all (headers);
  free (st.url);
  return status;
}
