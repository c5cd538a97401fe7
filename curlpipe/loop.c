/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * curlpipe's event loop: one thread, one poll, for libcurl's sockets,
 * standard input and standard output together.
 *
 * The upload reads standard input only when it is readable, and the
 * download writes standard output only when it takes the bytes, so a
 * byte that arrives on either side moves at once and an idle curlpipe
 * sleeps in poll.  libcurl's sockets join that poll through
 * CURLMOPT_SOCKETFUNCTION.  When standard input has nothing, the read
 * callback pauses the upload and standard input joins the poll; its
 * readiness unpauses the upload.  The answer is gathered in a buffer
 * while libcurl decodes what one read from the socket brought, and
 * written after; when standard output does not take it and the buffer
 * is full, the write callback pauses the download (libcurl stops
 * reading the socket, so the server is slowed by TCP, not by a buffer
 * that grows) and standard output joins the poll until it drains.
 *
 * Neither a read nor a write can stall the loop, and no flag of a
 * descriptor shared with other processes is changed to get there (see
 * fdmodes.c).  curl's own tool does neither: with a blocking standard
 * input "-T -" sits in read() while the answer waits, and "-T ." sets
 * O_NONBLOCK on standard input and polls it on a timer.
 */

#include <config.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "curlpipe.h"
#include "pipe.h"

/* Poll timeout when nothing else bounds it: libcurl shortens it for its
 * own timers (--max-time, connect timeout), so this only limits how
 * often an idle transfer wakes up.
 */
#define IDLE_POLL_MS (60 * 1000)

/* CURLMOPT_SOCKETFUNCTION: which sockets libcurl waits on, for what.
 * Also called after loop_run, when transfer.c takes the easy handle out
 * of the multi handle: struct loop lives as long as they do.
 */
static int
socket_cb (CURL *easy, curl_socket_t fd, int what, void *opaque,
           void *socketp)
{
  struct loop *lp = &((struct pipe_state *) opaque)->loop;
  int i;

  for (i = 0; i < lp->nsocks && lp->socks[i].fd != fd; i++)
    ;
  if (what == CURL_POLL_REMOVE) {
    if (i < lp->nsocks)
      lp->socks[i] = lp->socks[--lp->nsocks];
    return 0;
  }
  if (i == lp->nsocks) {
    if (lp->nsocks == MAX_SOCKETS)
      return -1;
    lp->nsocks++;
  }
  lp->socks[i].fd = fd;
  lp->socks[i].events = ((what & CURL_POLL_IN) ? POLLIN : 0) |
    ((what & CURL_POLL_OUT) ? POLLOUT : 0);
  return 0;
}

/* CURLMOPT_TIMERFUNCTION: when libcurl next wants to be called. */
static int
timer_cb (CURLM *multi, long timeout_ms, void *opaque)
{
  struct loop *lp = &((struct pipe_state *) opaque)->loop;

  lp->timer_ms = timeout_ms;
  clock_gettime (CLOCK_MONOTONIC, &lp->timer_set);
  return 0;
}

/* Milliseconds until libcurl's timer, -1 for none. */
static int
timer_left (const struct pipe_state *st)
{
  double left;

  if (st->loop.timer_ms < 0)
    return -1;
  left = st->loop.timer_ms - seconds_since (&st->loop.timer_set) * 1000;
  return left <= 0 ? 0 : (int) left + 1;
}

/* Does libcurl wait to read from its connection?  Not once the answer
 * has ended (its last chunk, its Content-Length, or the server's close
 * of an answer without a length).
 */
static bool
reading_answer (const struct pipe_state *st)
{
  int i;

  for (i = 0; i < st->loop.nsocks; i++)
    if (st->loop.socks[i].events & POLLIN)
      return true;
  return false;
}

static bool
answer_started (const struct pipe_state *st)
{
  long code = 0;

  curl_easy_getinfo (st->easy, CURLINFO_RESPONSE_CODE, &code);
  return code != 0;
}

/* The transfer's result once libcurl says it is done. */
static CURLcode
done_result (CURLM *multi, CURLcode result)
{
  CURLMsg *msg;
  int left;

  for (msg = curl_multi_info_read (multi, &left); msg != NULL;
       msg = curl_multi_info_read (multi, &left))
    if (msg->msg == CURLMSG_DONE)
      result = msg->data.result;
  return result;
}

/* The answer may end while standard input is still open (a tunnel whose
 * far end went away): libcurl 7.88 then still waits for the rest of the
 * upload, which may never come, so a paused upload with an answer that
 * libcurl no longer reads ends the transfer here.  A connection that
 * drops in the middle of an answer is libcurl's error, as usual.
 * True when the transfer is over, with its result in *result.
 */
static bool
answer_over (struct pipe_state *st, CURLcode *result)
{
  int end;

  if (pause_holds_upload (st) && !pause_holds_download (st) &&
      !upload_ended (st) && !reading_answer (st) && answer_started (st)) {
    end = framing_answer_end (st);
    if (end != 0) {
      if (*result == CURLE_OK && end == -1) {
        failure_curl (st, "the connection closed in the middle of the "
                      "answer");
        *result = CURLE_PARTIAL_FILE;
      }
      return true;
    }
  }
  return false;
}

/* Let a paused upload or download go on once it can; false when the
 * answer could not be written.
 */
static bool
lift_pauses (struct pipe_state *st)
{
  /* The held-back upload goes once libcurl has read the socket (once:
   * a server that never stops sending must not starve the upload), or
   * when it cannot read it now.
   */
  if (upload_holding (st) &&
      (upload_answer_read (st) || pause_holds_download (st) ||
       !reading_answer (st) || !connection_answer_waiting (st))) {
    if (upload_release (st) != CURLE_OK || failure_output_seen (st))
      return false;
  }

  /* Unpausing may call the callbacks at once, which may pause again. */
  if (pause_holds_download (st) && !output_pending (st)) {
    if (pause_lift_download (st) != CURLE_OK || failure_output_seen (st))
      return false;
  }
  return true;
}

/* What to poll: libcurl's sockets, standard input while the upload
 * waits for it, the answer's output while it has bytes to take.
 * Returns how many; *in_at and *out_at are where standard input and the
 * output are in pfd, -1 when not there.
 */
static int
poll_set (const struct pipe_state *st, struct pollfd *pfd, int *in_at,
          int *out_at)
{
  int n = 0, i;

  for (i = 0; i < st->loop.nsocks; i++)
    pfd[n++] = (struct pollfd) { .fd = st->loop.socks[i].fd,
                                 .events = st->loop.socks[i].events };
  *in_at = *out_at = -1;
  if (pause_holds_upload (st) && !upload_ended (st) &&
      !upload_holding (st)) {
    *in_at = n;
    pfd[n++] = (struct pollfd) { .fd = upload_poll_fd (st),
                                 .events = POLLIN };
  }
  if (output_pending (st)) {
    *out_at = n;
    pfd[n++] = (struct pollfd) { .fd = output_poll_fd (st),
                                 .events = POLLOUT };
  }
  return n;
}

static int
poll_timeout (const struct pipe_state *st)
{
  int timeout, left;

  timeout = progress_wait_ms (st);
  if (timeout < 0)
    timeout = IDLE_POLL_MS;
  left = timer_left (st);
  if (left >= 0 && left < timeout)
    timeout = left;
  return timeout;
}

/* Hand what poll saw to libcurl: standard input's readiness unpauses
 * the upload, a socket's events go to curl_multi_socket_action.  False
 * when the answer could not be written.
 */
static bool
dispatch (struct pipe_state *st, CURLM *multi, const struct pollfd *pfd,
          int n, int in_at, int out_at, int *running)
{
  int i, ev;

  /* Readable, end of file and error all mean "call read()", which
   * tells which.
   */
  if (in_at >= 0 && pfd[in_at].revents) {
    if (pause_lift_upload (st) != CURLE_OK || failure_output_seen (st))
      return false;
    /* Tell libcurl the socket can take the bytes: with no events it
     * would first try a read, which says EAGAIN (one system call in
     * eight of a 64-byte echo round trip).  If the socket cannot
     * take them after all, libcurl waits for it as usual.
     */
    if (st->loop.nsocks == 1 && pfd[0].revents == 0) {
      curl_multi_socket_action (multi, st->loop.socks[0].fd, CURL_CSELECT_OUT,
                                running);
    }
  }
  for (i = 0; i < n; i++) {
    if (i == in_at || i == out_at || pfd[i].revents == 0)
      continue;
    ev = ((pfd[i].revents & POLLIN) ? CURL_CSELECT_IN : 0) |
      ((pfd[i].revents & POLLOUT) ? CURL_CSELECT_OUT : 0) |
      ((pfd[i].revents & (POLLERR | POLLHUP)) ? CURL_CSELECT_ERR : 0);
    if (pfd[i].fd == connection_socket (st) && (ev & CURL_CSELECT_IN))
      upload_note_answer_read (st);
    curl_multi_socket_action (multi, pfd[i].fd, ev, running);
  }
  return true;
}

/* An error answer (>= 300) before the end of the upload makes libcurl
 * 7.88 stop sending but leaves the upload paused, and the transfer then
 * waits for standard input for ever: unpause it once, so that libcurl
 * can finish.
 */
static void
unpause_after_error (struct pipe_state *st)
{
  long code = 0;

  if (pause_holds_upload (st) && !st->loop.error_unpaused) {
    curl_easy_getinfo (st->easy, CURLINFO_RESPONSE_CODE, &code);
    if (code >= 300) {
      st->loop.error_unpaused = true;
      pause_lift_upload (st);
    }
  }
}

/* Run the transfer on multi until it ends; returns libcurl's result.
 *
 * curl_multi_socket_action with the events poll reported lets libcurl
 * skip the poll of its own that curl_multi_perform makes on every call
 * (one system call in four in an echo round trip).
 */
CURLcode
loop_run (struct pipe_state *st, CURLM *multi)
{
  struct pollfd pfd[MAX_SOCKETS + 2];
  int running = 1, n, in_at, out_at, r;
  CURLcode result = CURLE_OK;

  st->loop = (struct loop) { .timer_ms = -1 };
  curl_multi_setopt (multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
  curl_multi_setopt (multi, CURLMOPT_SOCKETDATA, st);
  curl_multi_setopt (multi, CURLMOPT_TIMERFUNCTION, timer_cb);
  curl_multi_setopt (multi, CURLMOPT_TIMERDATA, st);
  curl_multi_add_handle (multi, st->easy);
  curl_multi_socket_action (multi, CURL_SOCKET_TIMEOUT, 0, &running);
  while (running) {
    result = done_result (multi, result);
    if (answer_over (st, &result))
      return result;
    if (!output_flush (st))
      return CURLE_WRITE_ERROR;
    progress_show (st, false);
    if (!lift_pauses (st))
      return CURLE_WRITE_ERROR;

    n = poll_set (st, pfd, &in_at, &out_at);
    r = poll (pfd, n, poll_timeout (st));
    if (r == -1 && errno != EINTR) {
      failure_input (st, "poll: %s", strerror (errno));
      return CURLE_READ_ERROR;
    }
    if (!dispatch (st, multi, pfd, n, in_at, out_at, &running))
      return CURLE_WRITE_ERROR;
    unpause_after_error (st);
    if (timer_left (st) == 0) {
      st->loop.timer_ms = -1;
      curl_multi_socket_action (multi, CURL_SOCKET_TIMEOUT, 0, &running);
    }
  }
  /* Also when the transfer ended in the first call, before any poll
   * (a malformed URL, an unknown scheme): never a silent success.
   */
  return done_result (multi, result);
}
