/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Which way of the transfer is paused (struct pauses): the read
 * callback pauses the upload when standard input has nothing, the
 * write callback the download when the output is full, and the loop
 * lifts each pause when it may go on.  curl_easy_pause sets both ways
 * at once, so lifting one keeps the other as it is.
 */

#include <config.h>

#include "curlpipe.h"
#include "pipe.h"

/* The read callback returns CURL_READFUNC_PAUSE. */
void
pause_upload (struct pipe_state *st)
{
  st->pauses.upload = true;
}

/* The write callback returns CURL_WRITEFUNC_PAUSE. */
void
pause_download (struct pipe_state *st)
{
  st->pauses.download = true;
}

bool
pause_holds_upload (const struct pipe_state *st)
{
  return st->pauses.upload;
}

bool
pause_holds_download (const struct pipe_state *st)
{
  return st->pauses.download;
}

/* libcurl may call the callbacks before this returns, which may pause
 * again.
 */
CURLcode
pause_lift_upload (struct pipe_state *st)
{
  st->pauses.upload = false;
  return curl_easy_pause (st->easy, st->pauses.download ? CURLPAUSE_RECV
                          : CURLPAUSE_CONT);
}

CURLcode
pause_lift_download (struct pipe_state *st)
{
  st->pauses.download = false;
  return curl_easy_pause (st->easy, st->pauses.upload ? CURLPAUSE_SEND
                          : CURLPAUSE_CONT);
}
