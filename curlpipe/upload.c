/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The upload (struct upload): standard input opened, its length when
 * it is known, CURLOPT_READFUNCTION reading it as far as it has bytes
 * and holding them back while an answer that came meanwhile is read
 * first, CURLOPT_SEEKFUNCTION going back to its start for -L, and at
 * the end the checks that the promised length (--upload-size, or a
 * regular file's size at the start) went out and was the whole of it.
 */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "curlpipe.h"
#include "pipe.h"

/* See hold_back. */
#define HOLD_MIN (16 * 1024)

/* Nothing open yet. */
void
upload_init (struct pipe_state *st)
{
  st->upload.in = (struct io) { .fd = -1, .poll_fd = -1 };
  st->upload.promised = -1;
}

void
upload_open (struct pipe_state *st)
{
  io_open (&st->upload.in, STDIN_FILENO, O_RDONLY);
}

void
upload_close (struct pipe_state *st)
{
  io_close (&st->upload.in);
  free (st->upload.held);
  st->upload.held = NULL;
}

/* The upload's length when it is known, else -1: --upload-size, or
 * what is left of a regular file.  Also notes where -L's rewind
 * (upload_seek_cb) goes back to in a regular file.
 */
curl_off_t
upload_length (struct pipe_state *st)
{
  struct upload *u = &st->upload;
  struct stat sb;
  off_t pos;

  u->start = lseek (u->in.fd, 0, SEEK_CUR);
  u->promised = -1;
  if (st->opt->upload_size >= 0)
    u->promised = st->opt->upload_size;
  else if (fstat (u->in.fd, &sb) == 0 && S_ISREG (sb.st_mode)) {
    pos = lseek (u->in.fd, 0, SEEK_CUR);
    if (pos >= 0 && pos <= sb.st_size)
      u->promised = sb.st_size - pos;
  }
  return u->promised;
}

/* The transfer is over (result): did the whole promised body go out?
 * A server that answers a success before it has read a body of known
 * length and closes has cut that body short: it was promised and not
 * delivered, a failure (55, as curl's send error) even though the
 * answer came whole.  A body of unknown length (chunked) has no such
 * promise: there a send that failed because the server closed after a
 * whole answer is the normal end of a tunnel, a success (curl says
 * 55).  An error answer (300 or more) is left alone: libcurl stops
 * sending on its own then, as curl does; so is a redirect followed with
 * a request that has no body.
 */
CURLcode
upload_check_sent (struct pipe_state *st, CURLcode result)
{
  curl_off_t sent = 0;
  long code = 0;
  char *method = NULL;

  if (st->upload.promised < 0)
    return result == CURLE_SEND_ERROR && framing_answer_whole (st) == 1
      ? CURLE_OK : result;
  if (result != CURLE_OK && result != CURLE_SEND_ERROR)
    return result;
  curl_easy_getinfo (st->easy, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_getinfo (st->easy, CURLINFO_EFFECTIVE_METHOD, &method);
  curl_easy_getinfo (st->easy, CURLINFO_SIZE_UPLOAD_T, &sent);
  if (code >= 300 || sent >= st->upload.promised ||
      (method != NULL && (strcmp (method, "GET") == 0 ||
                          strcmp (method, "HEAD") == 0)))
    return result;
  failure_curl (st, "the server answered before the whole body was sent: %"
                CURL_FORMAT_CURL_OFF_T " of the %" CURL_FORMAT_CURL_OFF_T
                " bytes of its Content-Length went out", sent,
                st->upload.promised);
  return CURLE_SEND_ERROR;
}

/* What the loop needs to know of the upload. */
curl_off_t
upload_sent (const struct pipe_state *st)
{
  return st->upload.sent;
}

bool
upload_ended (const struct pipe_state *st)
{
  return st->upload.eof;
}

int
upload_poll_fd (const struct pipe_state *st)
{
  return st->upload.in.poll_fd;
}

/* Are bytes held back (see hold_back), and has libcurl read the
 * connection since?
 */
bool
upload_holding (const struct pipe_state *st)
{
  return st->upload.answer_first;
}

bool
upload_answer_read (const struct pipe_state *st)
{
  return st->upload.answer_read;
}

/* libcurl has been given the connection's readable bytes. */
void
upload_note_answer_read (struct pipe_state *st)
{
  st->upload.answer_read = true;
}

/* The held bytes may go: the upload's pause is lifted, and libcurl may
 * take them at once.
 */
CURLcode
upload_release (struct pipe_state *st)
{
  st->upload.answer_first = false;
  return pause_lift_upload (st);
}

/* The upload's next bytes came from standard input while the server's
 * answer arrived: keep them, and let libcurl read the answer before it
 * sends them.  A server that answers at once and closes without reading
 * the upload makes the kernel reset the connection, and libcurl gives
 * up on the first send that fails, before it has read an answer that
 * came in the meantime.  libcurl acts on what the last poll saw
 * (socket writable), and reading standard input takes long enough for
 * the answer and the reset to come in between: without this, 1 in 5 of
 * `yes | curlpipe URL` lost the answer on an idle machine and 6 in 10
 * on a loaded one.  Only reads of HOLD_MIN bytes or more are checked:
 * a smaller read leaves a window as short as libcurl's own, and the
 * check would cost a system call per message of an interactive stream.
 * Returns false when the bytes could not be kept (they are then sent as
 * usual).
 */
static bool
hold_back (struct pipe_state *st, const char *buf, size_t n)
{
  struct upload *u = &st->upload;

  if (n > UPLOAD_BUFFER_SIZE)
    return false;
  if (u->held == NULL)
    u->held = malloc (UPLOAD_BUFFER_SIZE);
  if (u->held == NULL)
    return false;
  memcpy (u->held, buf, n);
  u->held_off = 0;
  u->held_len = n;
  u->answer_first = true;
  u->answer_read = false;
  pause_upload (st);
  return true;
}

/* Standard input's end, or a read that found nothing (n 0 or -1, with
 * errno): what the read callback returns for it.
 */
static size_t
read_ended (struct pipe_state *st, ssize_t n)
{
  struct upload *u = &st->upload;

  if (n == 0) {
    /* libcurl would wait for the rest of the promised body for ever. */
    if (u->promised >= 0 && u->sent < u->promised) {
      if (st->opt->upload_size >= 0)
        failure_input (st, "standard input ended after %"
                       CURL_FORMAT_CURL_OFF_T " of the %"
                       CURL_FORMAT_CURL_OFF_T " bytes of --upload-size",
                       u->sent, u->promised);
      else
        failure_input (st, "standard input (a regular file) ended after %"
                       CURL_FORMAT_CURL_OFF_T " of the %"
                       CURL_FORMAT_CURL_OFF_T " bytes it had at the start",
                       u->sent, u->promised);
      return CURL_READFUNC_ABORT;
    }
    u->eof = true;
    return 0;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
    pause_upload (st);
    return CURL_READFUNC_PAUSE;
  }
  failure_input (st, "reading standard input: %s", strerror (errno));
  return CURL_READFUNC_ABORT;
}

size_t
upload_read_cb (char *buf, size_t size, size_t nitems, void *opaque)
{
  struct pipe_state *st = opaque;
  struct upload *u = &st->upload;
  size_t want;
  ssize_t n;

  want = size * nitems;
  if (u->held_off < u->held_len) {
    n = u->held_len - u->held_off < want ? u->held_len - u->held_off : want;
    memcpy (buf, u->held + u->held_off, n);
    u->held_off += n;
    return n;
  }
  if (u->eof)
    return 0;
  /* A short read from a pipe or socket means it is empty for now: wait
   * for it in the poll rather than spend a read() on EAGAIN.
   */
  if (u->drained) {
    u->drained = false;
    pause_upload (st);
    return CURL_READFUNC_PAUSE;
  }
  /* Never more than the Content-Length sent (--upload-size, or a
   * regular file's size at the start, which may grow): what follows
   * would be taken by the server for the start of another request.
   */
  if (u->promised >= 0 && (curl_off_t) want > u->promised - u->sent)
    want = u->promised - u->sent;
  if (want == 0)
    return 0;
  n = io_read (&u->in, buf, want);
  if (n <= 0)
    return read_ended (st, n);
  u->sent += n;
  u->drained = u->in.stream && (size_t) n < want;
  if (n >= HOLD_MIN && !pause_holds_download (st) &&
      connection_answer_waiting (st) && hold_back (st, buf, n))
    return CURL_READFUNC_PAUSE;
  return n;
}

/* -L to a redirect that needs the body again: libcurl asks to go back
 * to its start.  A regular file can; a stream cannot replay what it
 * has given, so the transfer fails with curl's exit status for that
 * (65), unless nothing of it was read yet.
 */
int
upload_seek_cb (void *opaque, curl_off_t offset, int origin)
{
  struct pipe_state *st = opaque;
  struct upload *u = &st->upload;
  struct stat sb;

  if (origin != SEEK_SET || offset != 0)
    return CURL_SEEKFUNC_CANTSEEK;
  if (u->sent == 0 && u->held_len == 0)
    return CURL_SEEKFUNC_OK;
  if (fstat (u->in.fd, &sb) == 0 && S_ISREG (sb.st_mode) &&
      lseek (u->in.fd, u->start, SEEK_SET) == u->start) {
    u->sent = 0;
    u->eof = false;
    u->held_off = u->held_len = 0;
    return CURL_SEEKFUNC_OK;
  }
  return CURL_SEEKFUNC_CANTSEEK;
}

/* A promised length N was sent whole (--upload-size N, or a regular
 * file's size at the start): standard input must end there.  Bytes
 * beyond N mean the size was wrong, or the file grew while it was sent,
 * and the server got a truncated body: an error, not a success.  A
 * writer that neither writes nor closes within 5 s is given the benefit
 * of the doubt.  Fewer than N bytes read means the server's answer
 * stopped the upload (an error answer, see upload_check_sent), not
 * that standard input has more.
 */
void
upload_check_end (struct pipe_state *st)
{
  struct upload *u = &st->upload;
  struct pollfd pfd = { .fd = u->in.poll_fd, .events = POLLIN };
  char c;
  ssize_t n;
  struct stat sb;

  if (u->promised < 0 || u->sent < u->promised || u->eof ||
      failure_input_seen (st) || fstat (u->in.fd, &sb) == -1)
    return;
  /* A terminal is left alone: reading it would wait for the user. */
  if (!S_ISREG (sb.st_mode) && !u->in.stream)
    return;
  if (u->in.stream && poll (&pfd, 1, 5000) <= 0)
    return;
  n = io_read (&u->in, &c, 1);
  if (n > 0 && st->opt->upload_size >= 0)
    failure_input (st, "standard input has more than the %"
                   CURL_FORMAT_CURL_OFF_T " bytes of --upload-size",
                   u->promised);
  else if (n > 0)
    failure_input (st, "standard input (a regular file) grew past the %"
                   CURL_FORMAT_CURL_OFF_T " bytes it had at the start: "
                   "the rest was not sent", u->promised);
}
