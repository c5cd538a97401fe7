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
 * Pipes and sockets are switched to non-blocking mode (and back at exit)
 * so that neither a read nor a write can stall the loop; a terminal is
 * polled before each read instead (see make_nonblocking).
 * curl's own tool does neither: with a blocking standard input "-T -"
 * sits in read() while the answer waits, and "-T ." polls standard input
 * on a timer.
 */

#define _GNU_SOURCE            /* F_SETPIPE_SZ */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "curlpipe.h"
#include "secrets.h"

/* Bigger than libcurl's 64 KiB upload and 16 KiB download defaults:
 * fewer callbacks and system calls per byte in a bulk upload, and no
 * cost to an interactive stream, which moves what is there.
 */
#define UPLOAD_BUFFER_SIZE (512 * 1024)
#define DOWNLOAD_BUFFER_SIZE (256 * 1024)
#define PIPE_SIZE (1024 * 1024)     /* Linux's pipe-max-size default */

/* The answer is gathered while libcurl decodes what one read from the
 * socket brought, and written to standard output in one write: the
 * streaming echo sends a 64 KiB block as four chunks, which were four
 * writes.
 */
#define OUT_BUFFER_SIZE (1024 * 1024)

/* See hold_back. */
#define HOLD_MIN (16 * 1024)

#define MAX_SOCKETS 8               /* one HTTP connection, and spares */

/* Poll timeout when nothing else bounds it: libcurl shortens it for its
 * own timers (--max-time, connect timeout), so this only limits how
 * often an idle transfer wakes up.
 */
#define IDLE_POLL_MS (60 * 1000)

struct pipe_state {
  const struct options *opt;
  char *msg;                    /* the failure, for main.c to print */
  size_t msglen;
  char *url;                    /* opt->url as messages show it */
  CURL *easy;
  int in_fd, out_fd;            /* out_fd: -1 until -o FILE is opened */
  FILE *header_file;            /* -D FILE, NULL for none or "-" */

  /* The answer's chunked framing, decoded here (see take_body). */
  bool chunked;
  enum { CH_SIZE, CH_EXT, CH_DATA, CH_DATA_END, CH_TRAILER_START,
         CH_TRAILER, CH_DONE } ch_state;
  uint64_t ch_left;
  unsigned ch_digits;           /* of the size being read */
  bool ch_bad;                  /* a chunk size libcurl will refuse */
  curl_socket_t sock;           /* the connection, for answer_end */
  bool in_stream;               /* standard input is a pipe or socket */
  bool in_drained;              /* the last read took all there was */
  bool in_blocking;             /* not O_NONBLOCK (a terminal, a file) */
  bool error_unpaused;          /* see drive */
  bool in_eof;
  bool send_paused, recv_paused;
  /* Standard input's bytes held back while the answer that came during
   * their read is taken first (see read_cb): held[held_off..held_len).
   */
  char *held;
  size_t held_off, held_len;
  bool answer_first;            /* holding them */
  bool answer_read;             /* libcurl has read the socket since */
  int body_fd;                  /* out_fd, or 2 for an error body (-f) */
  bool body_started;

  /* The answer's bytes not yet written: out[out_off..out_len). */
  char *out;
  size_t out_off, out_len, out_size;

  /* libcurl's sockets (CURLMOPT_SOCKETFUNCTION) and timer. */
  struct { curl_socket_t fd; short events; } socks[MAX_SOCKETS];
  int nsocks;
  long timer_ms;                /* -1: none */
  struct timespec timer_set;

  curl_off_t sent, received;
  char in_error[128], out_error[128];
  char errbuf[CURL_ERROR_SIZE];

  bool progress;
  struct timespec start, last_progress;
};

/* Record why the transfer failed (the first reason wins); main.c, which
 * owns every message, prints it.
 */
static void say (struct pipe_state *st, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));

static void
say (struct pipe_state *st, const char *fmt, ...)
{
  va_list ap;

  if (st->msg[0] != '\0')
    return;
  va_start (ap, fmt);
  vsnprintf (st->msg, st->msglen, fmt, ap);
  va_end (ap);
}

/* File status flags to put back at exit, for each of fds 0 and 1. */
static int saved_flags[2] = { -1, -1 };

static void
restore_flags (void)
{
  int fd;

  for (fd = 0; fd <= 1; fd++)
    if (saved_flags[fd] != -1)
      fcntl (fd, F_SETFL, saved_flags[fd]);
}

static void
on_signal (int sig)
{
  restore_flags ();
  signal (sig, SIG_DFL);
  raise (sig);
}

/* Ctrl-Z and friends: the shell gets its pipes back as they were while
 * curlpipe is stopped.
 */
static void
on_stop (int sig)
{
  int fd;

  restore_flags ();
  raise (SIGSTOP);
  for (fd = 0; fd <= 1; fd++)
    if (saved_flags[fd] != -1)
      fcntl (fd, F_SETFL, saved_flags[fd] | O_NONBLOCK);
}

/* Catch sig unless it is ignored (nohup, background jobs of scripts):
 * an ignored signal stays ignored.
 */
static void
catch (int sig, void (*handler) (int))
{
  struct sigaction sa, old;

  if (sigaction (sig, NULL, &old) == 0 && old.sa_handler == SIG_IGN)
    return;
  memset (&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigemptyset (&sa.sa_mask);
  sigaction (sig, &sa, NULL);
}

/* O_NONBLOCK on a pipe or socket.  Regular files and devices like
 * /dev/null never block.  A terminal is left alone too: its file
 * description is shared with the shell and with our own standard error,
 * whose messages would then fail with EAGAIN; read_cb polls it instead.
 * A pipe also gets a
 * bigger buffer where the system allows it: with Linux's default 64 KiB
 * each loop turn moved at most 64 KiB, and a 1 GiB upload through a pipe
 * ran at 550 MiB/s against 930 for curl -T - with its blocking reads;
 * fewer, bigger reads close most of that gap.
 */
static void
make_nonblocking (int fd)
{
  struct stat st;
  int flags;

  if (fstat (fd, &st) == -1)
    return;
  if (S_ISFIFO (st.st_mode)) {
#if HAVE_DECL_F_SETPIPE_SZ
    fcntl (fd, F_SETPIPE_SZ, PIPE_SIZE);
#endif
  }
  else if (!S_ISSOCK (st.st_mode))
    return;
  flags = fcntl (fd, F_GETFL);
  if (flags == -1 || (flags & O_NONBLOCK))
    return;
  if (fcntl (fd, F_SETFL, flags | O_NONBLOCK) == 0 && fd <= 1)
    saved_flags[fd] = flags;
}

/* Has the server sent something libcurl has not read yet (bytes, its
 * end, or a reset)?  The connection is looked at without taking
 * anything from it.
 */
static bool
answer_waiting (const struct pipe_state *st)
{
  char c;

  if (st->sock == CURL_SOCKET_BAD)
    return false;
  return recv (st->sock, &c, 1, MSG_PEEK | MSG_DONTWAIT) >= 0 ||
    (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* The upload's next bytes came from standard input while the server's
 * answer arrived: keep them, and let libcurl read the answer before it
 * sends them.  A server that answers at once and closes without reading
 * the upload makes the kernel reset the connection, and libcurl gives
 * up on the first send that fails, before it has read an answer that
 * came in the meantime.  libcurl looks at the socket just before it
 * calls us, but reading standard input takes long enough for the
 * answer and the reset to come in between: without this, 1 in 5 of
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
  if (n > UPLOAD_BUFFER_SIZE)
    return false;
  if (st->held == NULL)
    st->held = malloc (UPLOAD_BUFFER_SIZE);
  if (st->held == NULL)
    return false;
  memcpy (st->held, buf, n);
  st->held_off = 0;
  st->held_len = n;
  st->answer_first = true;
  st->answer_read = false;
  st->send_paused = true;
  return true;
}

static size_t
read_cb (char *buf, size_t size, size_t nitems, void *opaque)
{
  struct pipe_state *st = opaque;
  size_t want;
  ssize_t n;

  want = size * nitems;
  if (st->held_off < st->held_len) {
    n = st->held_len - st->held_off < want ? st->held_len - st->held_off
      : want;
    memcpy (buf, st->held + st->held_off, n);
    st->held_off += n;
    return n;
  }
  if (st->in_eof)
    return 0;
  /* A short read from a pipe or socket means it is empty for now: wait
   * for it in the poll rather than spend a read() on EAGAIN.
   */
  if (st->in_drained) {
    st->in_drained = false;
    st->send_paused = true;
    return CURL_READFUNC_PAUSE;
  }
  /* A blocking descriptor (a terminal) is read only when it has data. */
  if (st->in_blocking) {
    struct pollfd pfd = { .fd = st->in_fd, .events = POLLIN };

    if (poll (&pfd, 1, 0) == 0) {
      st->send_paused = true;
      return CURL_READFUNC_PAUSE;
    }
  }
  /* Never more than --upload-size: what follows would be taken by the
   * server for the start of another request.
   */
  if (st->opt->upload_size >= 0 &&
      (curl_off_t) want > st->opt->upload_size - st->sent)
    want = st->opt->upload_size - st->sent;
  if (want == 0)
    return 0;
  n = read (st->in_fd, buf, want);
  if (n > 0) {
    st->sent += n;
    st->in_drained = st->in_stream && (size_t) n < want;
    if (n >= HOLD_MIN && !st->recv_paused && answer_waiting (st) &&
        hold_back (st, buf, n))
      return CURL_READFUNC_PAUSE;
    return n;
  }
  if (n == 0) {
    /* libcurl would wait for the rest of the promised body for ever. */
    if (st->opt->upload_size >= 0 && st->sent < st->opt->upload_size) {
      snprintf (st->in_error, sizeof st->in_error, "standard input ended "
                "after %" CURL_FORMAT_CURL_OFF_T " of the %"
                CURL_FORMAT_CURL_OFF_T " bytes of --upload-size", st->sent,
                st->opt->upload_size);
      return CURL_READFUNC_ABORT;
    }
    st->in_eof = true;
    return 0;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
    st->send_paused = true;
    return CURL_READFUNC_PAUSE;
  }
  snprintf (st->in_error, sizeof st->in_error, "reading standard input: %s",
            strerror (errno));
  return CURL_READFUNC_ABORT;
}

/* Write what is buffered.  Returns false on an error (recorded). */
static bool
flush_out (struct pipe_state *st)
{
  ssize_t n;

  while (st->out_off < st->out_len) {
    n = write (st->body_fd, st->out + st->out_off, st->out_len - st->out_off);
    if (n == -1) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        break;
      snprintf (st->out_error, sizeof st->out_error,
                "writing the answer: %s", strerror (errno));
      return false;
    }
    st->out_off += n;
  }
  if (st->out_off == st->out_len)
    st->out_off = st->out_len = 0;
  return true;
}

/* -o FILE is opened (and an existing one truncated) only when there is
 * an answer to put in it: a transfer that fails before it leaves the
 * file as it was.  False after recording an error.
 */
static bool
open_output (struct pipe_state *st)
{
  const char *name = st->opt->output;

  if (st->out_fd >= 0)
    return true;
  st->out_fd = open (name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (st->out_fd == -1) {
    snprintf (st->out_error, sizeof st->out_error, "%s: %s", name,
              strerror (errno));
    return false;
  }
  st->body_fd = st->out_fd;
  return true;
}

/* Does s (len bytes) contain word, in any case (RFC 9110 7: transfer
 * codings are case-insensitive)?
 */
static bool
has_word (const char *s, size_t len, const char *word)
{
  size_t n = strlen (word), i;

  for (i = 0; i + n <= len; i++)
    if (strncasecmp (s + i, word, n) == 0)
      return true;
  return false;
}

/* Each header line of the answers: whether the body is chunked (see
 * take_body), and with -D the line itself, to the file or to the
 * answer's stream ("-"), as curl writes them.
 */
static size_t
header_cb (char *data, size_t size, size_t nmemb, void *opaque)
{
  struct pipe_state *st = opaque;
  size_t len = size * nmemb;

  if (len >= 5 && strncmp (data, "HTTP/", 5) == 0) {
    st->chunked = false;
    st->ch_state = CH_SIZE;
    st->ch_left = 0;
    st->ch_digits = 0;
  }
  else if (len > 18 && strncasecmp (data, "transfer-encoding:", 18) == 0 &&
           has_word (data + 18, len - 18, "chunked"))
    st->chunked = true;
  if (st->opt->dump_header == NULL)
    return len;
  if (st->header_file != NULL) {
    if (fwrite (data, 1, len, st->header_file) != len) {
      snprintf (st->out_error, sizeof st->out_error, "-D: %s",
                strerror (errno));
      return 0;
    }
    return len;
  }
  if (len > st->out_size - st->out_len) {
    snprintf (st->out_error, sizeof st->out_error, "-D -: headers too long");
    return 0;
  }
  memcpy (st->out + st->out_len, data, len);
  st->out_len += len;
  return len;
}

/* Put len bytes of the answer as libcurl gives them into the buffer,
 * which has room (the decoded bytes are never more).
 *
 * libcurl is asked for the raw body (CURLOPT_HTTP_TRANSFER_DECODING 0)
 * so that curlpipe knows whether a chunked answer ended with its last
 * chunk or was cut off: an answer can end while the upload goes on (see
 * drive), and libcurl would only check its framing at the end of the
 * whole transfer.  libcurl still checks the framing as it reads.
 */
static void
take_body (struct pipe_state *st, const char *p, size_t len)
{
  const char *end = p + len;
  size_t n;
  int d;

  if (!st->chunked) {
    memcpy (st->out + st->out_len, p, len);
    st->out_len += len;
    st->received += len;
    return;
  }
  while (p < end) {
    switch (st->ch_state) {
    case CH_SIZE:
      /* Hex digits, then whatever comes up to the line's end (";ext",
       * or junk that libcurl ignores too).  Sizes libcurl refuses (no
       * digit, more than 16) stop the answer here, before any of their
       * bytes is written.
       */
      d = *p >= '0' && *p <= '9' ? *p - '0'
        : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
        : *p >= 'A' && *p <= 'F' ? *p - 'A' + 10 : -1;
      if (d >= 0 && ++st->ch_digits > 16) {
        st->ch_bad = true;
        return;
      }
      if (d >= 0)
        st->ch_left = st->ch_left * 16 + d;
      else if (st->ch_digits == 0) {
        st->ch_bad = true;
        return;
      }
      else
        st->ch_state = *p == '\n'
          ? (st->ch_left ? CH_DATA : CH_TRAILER_START) : CH_EXT;
      p++;
      break;
    case CH_EXT:
      if (*p++ == '\n')
        st->ch_state = st->ch_left ? CH_DATA : CH_TRAILER_START;
      break;
    case CH_DATA:
      n = (size_t) (end - p) < st->ch_left ? (size_t) (end - p)
        : st->ch_left;
      memcpy (st->out + st->out_len, p, n);
      st->out_len += n;
      st->received += n;
      st->ch_left -= n;
      p += n;
      if (st->ch_left == 0)
        st->ch_state = CH_DATA_END;
      break;
    case CH_DATA_END:           /* the CRLF after the data */
      if (*p++ == '\n') {
        st->ch_state = CH_SIZE;
        st->ch_digits = 0;
      }
      break;
    case CH_TRAILER_START:      /* a trailer line, or the empty last line */
      if (*p == '\n')
        st->ch_state = CH_DONE;
      else if (*p != '\r')
        st->ch_state = CH_TRAILER;
      p++;
      break;
    case CH_TRAILER:
      if (*p++ == '\n')
        st->ch_state = CH_TRAILER_START;
      break;
    case CH_DONE:
      return;
    }
  }
}

/* Has the answer come whole by its own framing: its last chunk, or its
 * Content-Length?  -1 when it has no framing (it ends when the server
 * closes).
 */
static int
answer_whole (const struct pipe_state *st)
{
  curl_off_t length = -1;

  if (st->chunked)
    return st->ch_state == CH_DONE;
  curl_easy_getinfo (st->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
  return length < 0 ? -1 : st->received == length;
}

/* libcurl no longer reads the connection while the upload waits for
 * standard input: has the answer ended?  1 whole, -1 cut off (the server
 * closed or reset the connection before its end), 0 not ended (libcurl
 * waits for --limit-rate's timer).  The connection is looked at without
 * taking anything from it.
 */
static int
answer_end (const struct pipe_state *st)
{
  int whole = answer_whole (st);
  char c;
  ssize_t r;

  if (whole == 1)
    return 1;
  if (st->sock == CURL_SOCKET_BAD)
    return 0;
  r = recv (st->sock, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (r == 0)
    return whole == -1 ? 1 : -1;
  if (r == -1 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
    return -1;
  return 0;
}

static void drain_output (struct pipe_state *st);

static size_t
write_cb (char *data, size_t size, size_t nmemb, void *opaque)
{
  struct pipe_state *st = opaque;
  size_t len = size * nmemb;
  long code = 0;

  /* With -f an error answer's body is a message for the user. */
  if (!st->body_started) {
    st->body_started = true;
    curl_easy_getinfo (st->easy, CURLINFO_RESPONSE_CODE, &code);
    if (st->opt->fail && code >= 400) {
      /* -D -'s headers, already buffered, still go to stdout. */
      drain_output (st);
      st->body_fd = STDERR_FILENO;
    }
    else if (!open_output (st))
      return 0;
  }

  if (len > st->out_size - st->out_len) {
    if (!flush_out (st))
      return 0;
    if (st->out_off > 0) {
      memmove (st->out, st->out + st->out_off, st->out_len - st->out_off);
      st->out_len -= st->out_off;
      st->out_off = 0;
    }
    /* Standard output is not taking it: libcurl keeps the bytes and
     * gives them again after the pause, and stops reading the socket.
     */
    if (len > st->out_size - st->out_len) {
      st->recv_paused = true;
      return CURL_WRITEFUNC_PAUSE;
    }
  }
  take_body (st, data, len);
  if (st->ch_bad) {
    snprintf (st->errbuf, sizeof st->errbuf, "a malformed chunk size in "
              "the answer");
    return 0;
  }
  return len;
}

/* -v: the exchange's headers and libcurl's notes on stderr, without
 * secrets (common/secrets.c): verbose output gets pasted into bug
 * reports.
 */
static void
print_debug (const char *line, void *opaque)
{
  fprintf (stderr, "%s\n", line);
}

static int
debug_cb (CURL *easy, curl_infotype type, char *data, size_t size,
          void *opaque)
{
  show_debug (type, data, size, print_debug, NULL);
  return 0;
}

static double
seconds_since (const struct timespec *t)
{
  struct timespec now;

  clock_gettime (CLOCK_MONOTONIC, &now);
  return (now.tv_sec - t->tv_sec) + (now.tv_nsec - t->tv_nsec) / 1e9;
}

static void
show_progress (struct pipe_state *st, bool last)
{
  double secs = seconds_since (&st->start);

  if (!st->progress)
    return;
  if (!last && seconds_since (&st->last_progress) < 1)
    return;
  clock_gettime (CLOCK_MONOTONIC, &st->last_progress);
  if (secs <= 0)
    secs = 1e-9;
  fprintf (stderr, "\rcurlpipe: sent %.1f MiB (%.1f MiB/s), received "
           "%.1f MiB (%.1f MiB/s)  %s",
           st->sent / 1048576.0, st->sent / 1048576.0 / secs,
           st->received / 1048576.0, st->received / 1048576.0 / secs,
           last ? "\n" : "");
}

/* The connection's socket, for answer_end. */
static int
sockopt_cb (void *opaque, curl_socket_t fd, curlsocktype purpose)
{
  struct pipe_state *st = opaque;

  st->sock = fd;
  return CURL_SOCKOPT_OK;
}

static const char *
ca_bundle (const struct options *opt)
{
  if (opt->cacert)
    return opt->cacert;
  if (getenv ("CURL_CA_BUNDLE"))
    return getenv ("CURL_CA_BUNDLE");
  return getenv ("SSL_CERT_FILE");
}

/* Options of the transfer; false after reporting a failure. */
static bool
setup (struct pipe_state *st, struct curl_slist **headers)
{
  const struct options *opt = st->opt;
  CURL *e = st->easy;
  struct curl_slist *h, *u;
  struct stat sb;
  off_t pos;
  CURLcode rc = CURLE_OK;

  /* The user's headers, then "Expect:" unless they gave one: waiting
   * for 100 Continue would hold every byte for up to a second.
   */
  *headers = NULL;
  for (u = opt->headers; u != NULL; u = u->next) {
    h = curl_slist_append (*headers, u->data);
    if (h == NULL)
      goto nomem;
    *headers = h;
  }
  for (u = opt->headers; u != NULL; u = u->next)
    if (strncasecmp (u->data, "expect:", 7) == 0)
      break;
  if (u == NULL) {
    h = curl_slist_append (*headers, "Expect:");
    if (h == NULL)
      goto nomem;
    *headers = h;
  }

#define SET(o, v) \
  if (rc == CURLE_OK) rc = curl_easy_setopt (e, o, v)
  SET (CURLOPT_URL, opt->url);
  SET (CURLOPT_ERRORBUFFER, st->errbuf);
  SET (CURLOPT_NOSIGNAL, 1L);
  SET (CURLOPT_UPLOAD, 1L);
  if (opt->method)
    SET (CURLOPT_CUSTOMREQUEST, opt->method);
  SET (CURLOPT_HTTPHEADER, *headers);
  SET (CURLOPT_READFUNCTION, read_cb);
  SET (CURLOPT_READDATA, st);
  SET (CURLOPT_WRITEFUNCTION, write_cb);
  SET (CURLOPT_WRITEDATA, st);
  SET (CURLOPT_UPLOAD_BUFFERSIZE, (long) UPLOAD_BUFFER_SIZE);
  SET (CURLOPT_BUFFERSIZE, (long) DOWNLOAD_BUFFER_SIZE);
  SET (CURLOPT_PROTOCOLS_STR, "http,https");
  if (opt->userpwd)
    SET (CURLOPT_USERPWD, opt->userpwd);
  SET (CURLOPT_USERAGENT, opt->user_agent ? opt->user_agent
       : "curlpipe/" PACKAGE_VERSION);
  if (opt->insecure) {
    SET (CURLOPT_SSL_VERIFYPEER, 0L);
    SET (CURLOPT_SSL_VERIFYHOST, 0L);
  }
  /* As curl does: --cacert, else $CURL_CA_BUNDLE, else $SSL_CERT_FILE
   * (and $SSL_CERT_DIR), else libcurl's default.
   */
  if (ca_bundle (opt))
    SET (CURLOPT_CAINFO, ca_bundle (opt));
  if (opt->cacert == NULL && getenv ("SSL_CERT_DIR") != NULL)
    SET (CURLOPT_CAPATH, getenv ("SSL_CERT_DIR"));
  if (opt->cert)
    SET (CURLOPT_SSLCERT, opt->cert);
  if (opt->key)
    SET (CURLOPT_SSLKEY, opt->key);
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
  if (opt->limit_rate) {
    SET (CURLOPT_MAX_SEND_SPEED_LARGE, opt->limit_rate);
    SET (CURLOPT_MAX_RECV_SPEED_LARGE, opt->limit_rate);
  }
  SET (CURLOPT_HEADERFUNCTION, header_cb);
  SET (CURLOPT_HEADERDATA, st);
  SET (CURLOPT_HTTP_TRANSFER_DECODING, 0L);   /* see take_body */
  SET (CURLOPT_SOCKOPTFUNCTION, sockopt_cb);
  SET (CURLOPT_SOCKOPTDATA, st);
  /* HTTP/1.1 unless --http2, also over TLS: over HTTP/2 libcurl 7.88
   * gives no sign that the answer's stream has ended while the upload
   * waits for standard input, so a tunnel whose far end went away would
   * not end (see drive).
   */
  SET (CURLOPT_HTTP_VERSION, opt->http_version != CURL_HTTP_VERSION_NONE
       ? opt->http_version : CURL_HTTP_VERSION_1_1);
  if (opt->connect_timeout_ms)
    SET (CURLOPT_CONNECTTIMEOUT_MS, opt->connect_timeout_ms);
  if (opt->max_time_ms)
    SET (CURLOPT_TIMEOUT_MS, opt->max_time_ms);
  if (opt->unix_socket)
    SET (CURLOPT_UNIX_SOCKET_PATH, opt->unix_socket);
  if (opt->verbose) {
    SET (CURLOPT_VERBOSE, 1L);
    SET (CURLOPT_DEBUGFUNCTION, debug_cb);
  }
  /* A regular file's remaining length is known: Content-Length.
   * Anything else is sent chunked (HTTP/1.1) as it comes, unless the
   * user gave the length (S3, Azure and some WebDAV servers refuse
   * chunked bodies).
   */
  if (opt->upload_size >= 0) {
    SET (CURLOPT_INFILESIZE_LARGE, opt->upload_size);
  }
  else if (fstat (st->in_fd, &sb) == 0 && S_ISREG (sb.st_mode)) {
    pos = lseek (st->in_fd, 0, SEEK_CUR);
    if (pos >= 0 && pos <= sb.st_size)
      SET (CURLOPT_INFILESIZE_LARGE, (curl_off_t) (sb.st_size - pos));
  }
#undef SET
  if (rc != CURLE_OK) {
    say (st, "%s: %s", st->url, curl_easy_strerror (rc));
    return false;
  }
  return true;

 nomem:
  say (st, "out of memory");
  return false;
}

/* CURLMOPT_SOCKETFUNCTION: which sockets libcurl waits on, for what. */
static int
socket_cb (CURL *easy, curl_socket_t fd, int what, void *opaque,
           void *socketp)
{
  struct pipe_state *st = opaque;
  int i;

  for (i = 0; i < st->nsocks && st->socks[i].fd != fd; i++)
    ;
  if (what == CURL_POLL_REMOVE) {
    if (i < st->nsocks)
      st->socks[i] = st->socks[--st->nsocks];
    return 0;
  }
  if (i == st->nsocks) {
    if (st->nsocks == MAX_SOCKETS)
      return -1;
    st->nsocks++;
  }
  st->socks[i].fd = fd;
  st->socks[i].events = ((what & CURL_POLL_IN) ? POLLIN : 0) |
    ((what & CURL_POLL_OUT) ? POLLOUT : 0);
  return 0;
}

/* CURLMOPT_TIMERFUNCTION: when libcurl next wants to be called. */
static int
timer_cb (CURLM *multi, long timeout_ms, void *opaque)
{
  struct pipe_state *st = opaque;

  st->timer_ms = timeout_ms;
  clock_gettime (CLOCK_MONOTONIC, &st->timer_set);
  return 0;
}

/* Milliseconds until libcurl's timer, -1 for none. */
static int
timer_left (const struct pipe_state *st)
{
  double left;

  if (st->timer_ms < 0)
    return -1;
  left = st->timer_ms - seconds_since (&st->timer_set) * 1000;
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

  for (i = 0; i < st->nsocks; i++)
    if (st->socks[i].events & POLLIN)
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

/* Drive the transfer until it ends; returns libcurl's result.
 *
 * curl_multi_socket_action with the events poll reported lets libcurl
 * skip the poll of its own that curl_multi_perform makes on every call
 * (one system call in four in an echo round trip).
 *
 * The answer may end while standard input is still open (a tunnel whose
 * far end went away): libcurl 7.88 then still waits for the rest of the
 * upload, which may never come, so a paused upload with an answer that
 * libcurl no longer reads ends the transfer here.  A connection that
 * drops in the middle of an answer is libcurl's error, as usual.
 */
static CURLcode
drive (struct pipe_state *st, CURLM *multi)
{
  struct pollfd pfd[MAX_SOCKETS + 2];
  int running = 1, n, i, in_at, out_at, timeout, left, ev, r, end;
  CURLcode result = CURLE_OK;

  curl_multi_socket_action (multi, CURL_SOCKET_TIMEOUT, 0, &running);
  while (running) {
    result = done_result (multi, result);
    if (st->send_paused && !st->recv_paused && !st->in_eof &&
        !reading_answer (st) && answer_started (st)) {
      end = answer_end (st);
      if (end != 0) {
        if (result == CURLE_OK && end == -1) {
          snprintf (st->errbuf, sizeof st->errbuf, "the connection closed "
                    "in the middle of the answer");
          result = CURLE_PARTIAL_FILE;
        }
        return result;
      }
    }
    if (!flush_out (st))
      return CURLE_WRITE_ERROR;
    show_progress (st, false);

    /* The held-back upload goes once libcurl has read the socket (once:
     * a server that never stops sending must not starve the upload), or
     * when it cannot read it now.
     */
    if (st->answer_first &&
        (st->answer_read || st->recv_paused || !reading_answer (st) ||
         !answer_waiting (st))) {
      st->answer_first = false;
      st->send_paused = false;
      if (curl_easy_pause (st->easy, st->recv_paused ? CURLPAUSE_RECV
                           : CURLPAUSE_CONT) != CURLE_OK || st->out_error[0])
        return CURLE_WRITE_ERROR;
    }

    /* Unpausing may call the callbacks at once, which may pause again. */
    if (st->recv_paused && st->out_len == 0) {
      st->recv_paused = false;
      if (curl_easy_pause (st->easy, st->send_paused ? CURLPAUSE_SEND
                           : CURLPAUSE_CONT) != CURLE_OK || st->out_error[0])
        return CURLE_WRITE_ERROR;
    }

    n = 0;
    for (i = 0; i < st->nsocks; i++)
      pfd[n++] = (struct pollfd) { .fd = st->socks[i].fd,
                                   .events = st->socks[i].events };
    in_at = out_at = -1;
    if (st->send_paused && !st->in_eof && !st->answer_first) {
      in_at = n;
      pfd[n++] = (struct pollfd) { .fd = st->in_fd, .events = POLLIN };
    }
    if (st->out_len > 0) {
      out_at = n;
      pfd[n++] = (struct pollfd) { .fd = st->body_fd, .events = POLLOUT };
    }
    timeout = st->progress ? 1000 : IDLE_POLL_MS;
    left = timer_left (st);
    if (left >= 0 && left < timeout)
      timeout = left;

    r = poll (pfd, n, timeout);
    if (r == -1 && errno != EINTR) {
      snprintf (st->in_error, sizeof st->in_error, "poll: %s",
                strerror (errno));
      return CURLE_READ_ERROR;
    }

    /* Readable, end of file and error all mean "call read()", which
     * tells which.
     */
    if (in_at >= 0 && pfd[in_at].revents) {
      st->send_paused = false;
      if (curl_easy_pause (st->easy, st->recv_paused ? CURLPAUSE_RECV
                           : CURLPAUSE_CONT) != CURLE_OK || st->out_error[0])
        return CURLE_WRITE_ERROR;
      /* Tell libcurl the socket can take the bytes: with no events it
       * would first try a read, which says EAGAIN (one system call in
       * eight of a 64-byte echo round trip).  If the socket cannot
       * take them after all, libcurl waits for it as usual.
       */
      if (st->nsocks == 1 && pfd[0].revents == 0) {
        curl_multi_socket_action (multi, st->socks[0].fd, CURL_CSELECT_OUT,
                                  &running);
      }
    }
    for (i = 0; i < n; i++) {
      if (i == in_at || i == out_at || pfd[i].revents == 0)
        continue;
      ev = ((pfd[i].revents & POLLIN) ? CURL_CSELECT_IN : 0) |
        ((pfd[i].revents & POLLOUT) ? CURL_CSELECT_OUT : 0) |
        ((pfd[i].revents & (POLLERR | POLLHUP)) ? CURL_CSELECT_ERR : 0);
      if (pfd[i].fd == st->sock && (ev & CURL_CSELECT_IN))
        st->answer_read = true;
      curl_multi_socket_action (multi, pfd[i].fd, ev, &running);
    }
    /* An error answer (>= 300) before the end of the upload makes
     * libcurl 7.88 stop sending but leaves the upload paused, and the
     * transfer then waits for standard input for ever: unpause it once,
     * so that libcurl can finish.
     */
    if (st->send_paused && !st->error_unpaused) {
      long code = 0;

      curl_easy_getinfo (st->easy, CURLINFO_RESPONSE_CODE, &code);
      if (code >= 300) {
        st->error_unpaused = true;
        st->send_paused = false;
        curl_easy_pause (st->easy, st->recv_paused ? CURLPAUSE_RECV
                         : CURLPAUSE_CONT);
      }
    }
    if (timer_left (st) == 0) {
      st->timer_ms = -1;
      curl_multi_socket_action (multi, CURL_SOCKET_TIMEOUT, 0, &running);
    }
  }
  /* Also when the transfer ended in the first call, before any poll
   * (a malformed URL, an unknown scheme): never a silent success.
   */
  return done_result (multi, result);
}

/* -w: curl's %{variable} names for what users of a streaming upload
 * check, and \n, \r, \t.  Printed to standard output after the answer.
 */
static void
write_out (const struct pipe_state *st, int status)
{
  const char *p = st->opt->write_out, *end;
  curl_off_t n;
  long code = 0;
  double secs = 0;
  size_t len;

  for (; *p; p++) {
    if (*p == '\\' && p[1] && strchr ("nrt\\", p[1])) {
      p++;
      putchar (*p == 'n' ? '\n' : *p == 'r' ? '\r' : *p == 't' ? '\t' : '\\');
      continue;
    }
    end = strncmp (p, "%{", 2) == 0 ? strchr (p, '}') : NULL;
    if (end == NULL) {
      putchar (*p);
      continue;
    }
    p += 2;
    len = end - p;
#define IS(name) (len == strlen (name) && strncmp (p, name, len) == 0)
    if (IS ("http_code") || IS ("response_code")) {
      curl_easy_getinfo (st->easy, CURLINFO_RESPONSE_CODE, &code);
      printf ("%03ld", code);
    }
    else if (IS ("size_upload") || IS ("size_download")) {
      curl_easy_getinfo (st->easy, IS ("size_upload")
                         ? CURLINFO_SIZE_UPLOAD_T : CURLINFO_SIZE_DOWNLOAD_T,
                         &n);
      printf ("%" CURL_FORMAT_CURL_OFF_T, n);
    }
    else if (IS ("time_total")) {
      curl_easy_getinfo (st->easy, CURLINFO_TOTAL_TIME, &secs);
      printf ("%.6f", secs);
    }
    else if (IS ("exitcode"))
      printf ("%d", status);
    else if (IS ("url"))
      printf ("%s", st->url);
    else
      printf ("%%{%.*s}", (int) len, p);
#undef IS
    p = end;
  }
  fflush (stdout);
}

/* --upload-size N sent N bytes: standard input must end there.  Bytes
 * beyond N mean the size was wrong and the server got a truncated body:
 * an error, not a success.  A writer that neither writes nor closes
 * within 5 s is given the benefit of the doubt.
 */
static void
check_upload_end (struct pipe_state *st)
{
  struct pollfd pfd = { .fd = st->in_fd, .events = POLLIN };
  char c;
  ssize_t n;
  struct stat sb;

  if (st->opt->upload_size < 0 || st->in_eof || st->in_error[0] ||
      fstat (st->in_fd, &sb) == -1)
    return;
  /* A terminal is left alone: reading it would wait for the user. */
  if (!S_ISREG (sb.st_mode) && !st->in_stream)
    return;
  if (st->in_stream && poll (&pfd, 1, 5000) <= 0)
    return;
  n = read (st->in_fd, &c, 1);
  if (n > 0)
    snprintf (st->in_error, sizeof st->in_error, "standard input has more "
              "than the %" CURL_FORMAT_CURL_OFF_T " bytes of --upload-size",
              st->opt->upload_size);
}

/* Write what standard output has not taken yet, also after a failure:
 * the bytes that did arrive are delivered.
 */
static void
drain_output (struct pipe_state *st)
{
  struct pollfd pfd;

  while (st->out_error[0] == '\0' && st->out_len > 0) {
    if (!flush_out (st))
      break;
    if (st->out_len > 0) {
      pfd = (struct pollfd) { .fd = st->body_fd, .events = POLLOUT };
      if (poll (&pfd, 1, -1) == -1 && errno != EINTR) {
        snprintf (st->out_error, sizeof st->out_error,
                  "writing the answer: poll: %s", strerror (errno));
        break;
      }
    }
  }
}

/* libcurl quotes a proxy URL it cannot use, password and all. */
static void
hide_proxy (struct pipe_state *st)
{
  const char *proxy = st->opt->proxy;
  char copy[CURL_ERROR_SIZE], *at, *shown;
  size_t n;

  if (proxy == NULL || proxy[0] == '\0')
    return;
  at = strstr (st->errbuf, proxy);
  if (at == NULL)
    return;
  shown = shown_url (proxy);
  n = strlen (proxy);
  snprintf (copy, sizeof copy, "%.*s%s%s", (int) (at - st->errbuf),
            st->errbuf, shown ? shown : "(the proxy)", at + n);
  snprintf (st->errbuf, sizeof st->errbuf, "%s", copy);
  free (shown);
}

/* The exit status for the transfer's result, and its message: curl's
 * exit status for the same failure is its CURLcode.
 */
static int
exit_status (struct pipe_state *st, CURLcode result)
{
  long code = 0;

  if (st->in_error[0]) {
    say (st, "%s: %s", st->url, st->in_error);
    return EXIT_READ;
  }
  /* As curl's -f, an error status counts before whatever came after
   * it (a proxy's 407 and then a reset).
   */
  curl_easy_getinfo (st->easy, CURLINFO_RESPONSE_CODE, &code);
  if (st->opt->fail && code >= 400) {
    say (st, "%s: the server answered HTTP %ld", st->url, code);
    return EXIT_HTTP;
  }
  if (st->out_error[0]) {
    say (st, "%s: %s", st->url, st->out_error);
    return EXIT_WRITE;
  }
  if (st->ch_bad) {
    say (st, "%s: %s", st->url, st->errbuf);
    return CURLE_RECV_ERROR;
  }
  /* The server ended a whole answer and closed while more was being
   * sent: the exchange is done, as for curl.
   */
  if (result == CURLE_SEND_ERROR && answer_whole (st) == 1)
    result = CURLE_OK;
  if (result != CURLE_OK) {
    hide_proxy (st);
    /* The error buffer says more than curl_easy_strerror, when set. */
    say (st, "%s: %s%s%s%s", st->url,
         st->errbuf[0] ? st->errbuf : curl_easy_strerror (result),
         st->opt->unix_socket ? " (through the Unix socket " : "",
         st->opt->unix_socket ? st->opt->unix_socket : "",
         st->opt->unix_socket ? ")" : "");
    return result;
  }
  return EXIT_OK;
}

static void
catch_signals (void)
{
  /* A reader of standard output that went away is an error to report,
   * not a signal that kills curlpipe mid-message.
   */
  signal (SIGPIPE, SIG_IGN);
  catch (SIGINT, on_signal);
  catch (SIGTERM, on_signal);
  catch (SIGHUP, on_signal);
  catch (SIGQUIT, on_signal);
  /* Other signals that end a process by default: the shell's pipes
   * are put back as they were all the same.
   */
  catch (SIGUSR1, on_signal);
  catch (SIGUSR2, on_signal);
  catch (SIGALRM, on_signal);
  catch (SIGVTALRM, on_signal);
  catch (SIGPROF, on_signal);
  catch (SIGXCPU, on_signal);
  catch (SIGXFSZ, on_signal);
  catch (SIGTSTP, on_stop);
  catch (SIGTTIN, on_stop);
  catch (SIGTTOU, on_stop);
}

/* Standard input and output, -D's file. */
static bool
open_streams (struct pipe_state *st)
{
  const struct options *opt = st->opt;
  struct stat sb;

  if (opt->output != NULL && strcmp (opt->output, "-") != 0)
    st->out_fd = -1;            /* see open_output */
  st->body_fd = st->out_fd;
  /* -D - goes with the body, unless that goes to a file. */
  if (opt->dump_header && strcmp (opt->dump_header, "-") == 0 &&
      st->out_fd == -1)
    st->header_file = stdout;
  else if (opt->dump_header && strcmp (opt->dump_header, "-") != 0) {
    st->header_file = fopen (opt->dump_header, "we");
    if (st->header_file == NULL) {
      snprintf (st->out_error, sizeof st->out_error, "-D %s: %s",
                opt->dump_header, strerror (errno));
      return false;
    }
  }
  make_nonblocking (st->in_fd);
  if (st->out_fd >= 0)
    make_nonblocking (st->out_fd);
  st->in_blocking = !(fcntl (st->in_fd, F_GETFL) & O_NONBLOCK);
  st->in_stream = fstat (st->in_fd, &sb) == 0 &&
    (S_ISFIFO (sb.st_mode) || S_ISSOCK (sb.st_mode));
  return true;
}

int
run_transfer (const struct options *opt, char *msg, size_t msglen)
{
  struct pipe_state st = {
    .opt = opt, .msg = msg, .msglen = msglen,
    .in_fd = STDIN_FILENO, .out_fd = STDOUT_FILENO, .timer_ms = -1,
    .sock = CURL_SOCKET_BAD,
  };
  struct curl_slist *headers = NULL;
  CURLM *multi = NULL;
  CURLcode result = CURLE_FAILED_INIT;
  int status;

  st.url = shown_url (opt->url);
  st.out_size = OUT_BUFFER_SIZE;
  st.out = malloc (st.out_size);
  st.easy = curl_easy_init ();
  multi = curl_multi_init ();
  if (st.url == NULL || st.out == NULL || st.easy == NULL || multi == NULL) {
    say (&st, "out of memory");
    status = EXIT_NOMEM;
    goto out;
  }
  catch_signals ();
  st.progress = !opt->silent && isatty (STDERR_FILENO);
  clock_gettime (CLOCK_MONOTONIC, &st.start);
  st.last_progress = st.start;

  if (open_streams (&st) && setup (&st, &headers)) {
    curl_multi_setopt (multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
    curl_multi_setopt (multi, CURLMOPT_SOCKETDATA, &st);
    curl_multi_setopt (multi, CURLMOPT_TIMERFUNCTION, timer_cb);
    curl_multi_setopt (multi, CURLMOPT_TIMERDATA, &st);
    curl_multi_add_handle (multi, st.easy);
    result = drive (&st, multi);
    show_progress (&st, true);
    if (result == CURLE_OK)
      check_upload_end (&st);
    /* An answer with no body still makes the -o file, as curl does. */
    if (result == CURLE_OK && opt->output && st.out_error[0] == '\0' &&
        !(opt->fail && st.body_fd == STDERR_FILENO))
      open_output (&st);
    drain_output (&st);
  }
  status = exit_status (&st, result);
  if (st.msg[0] == '\0' && status != EXIT_OK)
    say (&st, "%s: %s", st.url, curl_easy_strerror (result));

 out:
  if (multi && st.easy)
    curl_multi_remove_handle (multi, st.easy);
  restore_flags ();
  if (opt->write_out && st.easy)
    write_out (&st, status);
  curl_easy_cleanup (st.easy);
  curl_multi_cleanup (multi);
  curl_slist_free_all (headers);
  free (st.out);
  free (st.held);
  if (st.header_file != NULL &&
      (st.header_file == stdout ? fflush (stdout) : fclose (st.header_file))
      == EOF && status == EXIT_OK) {
    say (&st, "-D %s: %s", opt->dump_header, strerror (errno));
    status = EXIT_WRITE;
  }
  if (st.out_fd > STDERR_FILENO && close (st.out_fd) == -1 &&
      status == EXIT_OK) {
    say (&st, "%s: %s", opt->output, strerror (errno));
    status = EXIT_WRITE;
  }
  free (st.url);
  return status;
}
