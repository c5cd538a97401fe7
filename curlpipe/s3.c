/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The S3 multipart upload: standard input of unknown size (or over
 * 5 GiB) sent as parts, which S3 and its kin want instead of a chunked
 * PUT.  The upload is created (POST ?uploads), parts are read from
 * standard input as they fill and sent, up to S3_IN_FLIGHT at once on
 * one multi handle, each with its Content-MD5 and retried on failure;
 * then the upload is completed with the parts' ETags (POST ?uploadId).
 * On any failure, or SIGINT, SIGTERM or SIGHUP, it is aborted (DELETE
 * ?uploadId) so that no parts are left billed.  Every answer is
 * hostile input: read within bounds, its few fields checked.
 *
 * This file: the loop that runs the parts, signals, and the upload from
 * start to end.
 */

#define _GNU_SOURCE             /* O_TMPFILE */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
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
#include "pipe.h"
#include "s3.h"
#include "secrets.h"

/* SIGINT, SIGTERM, SIGHUP: noted, and the loop woken through its pipe;
 * the loop aborts the upload.
 */
static void
on_signal (int sig)
{
  int saved = errno;
  char c = 0;

  if (s3_signal == 0)
    s3_signal = sig;
  s3_signals++;
  if (write (s3.signal_pipe[1], &c, 1) == -1) {
    /* A full pipe has woken the loop already. */
  }
  errno = saved;
}

/* How long the loop may wait: libcurl's timer, a retry's time. */
static int
wait_ms (void)
{
  long t = -1;
  double r;
  int i;

  curl_multi_timeout (s3.multi, &t);
  if (t < 0 || t > 1000)
    t = 1000;
  for (i = 0; i < S3_SLOTS; i++) {
    if (s3.slots[i].waiting && s3.slots[i].easy == NULL) {
      r = s3_ms_until (&s3.slots[i].retry_at);
      if (r < t)
        t = r < 0 ? 0 : (long) r + 1;
    }
  }
  return t;
}

/* Does any slot still hold a part, filling, in flight or stored? */
static bool
parts_left (void)
{
  int i;

  for (i = 0; i < S3_SLOTS; i++)
    if (s3.slots[i].number != 0)
      return true;
  return false;
}

/* The parts, from standard input to the server, until the last is
 * stored; the exit status.
 */
static int
upload_parts (void)
{
  struct curl_waitfd extra[2];
  struct CURLMsg *m;
  struct part *p;
  int status = EXIT_OK, running, left, n;
  char drain[64];

  for (;;) {
    if (s3_signal)
      return 0;
    if (s3.opt->max_time_ms &&
        -s3_ms_until (&s3.start) > s3.opt->max_time_ms) {
      s3_fail ("operation timed out after %ld ms", s3.opt->max_time_ms);
      return CURLE_OPERATION_TIMEDOUT;
    }
    if (!s3_read_input (&status))
      return status;
    status = s3_start_parts ();
    if (status != EXIT_OK)
      return status;
    curl_multi_perform (s3.multi, &running);
    for (m = curl_multi_info_read (s3.multi, &left); m != NULL;
         m = curl_multi_info_read (s3.multi, &left)) {
      if (m->msg != CURLMSG_DONE)
        continue;
      curl_easy_getinfo (m->easy_handle, CURLINFO_PRIVATE, (char **) &p);
      status = s3_part_done (p, m->data.result);
      if (status != EXIT_OK)
        return status;
    }
    status = s3_start_parts ();
    if (status != EXIT_OK)
      return status;
    /* The last part may have just been stored: no wait then. */
    if (s3.eof && !parts_left ())
      return EXIT_OK;
    n = 0;
    extra[n++] = (struct curl_waitfd) { .fd = s3.signal_pipe[0],
                                        .events = CURL_WAIT_POLLIN };
    p = NULL;
    if (!s3.eof) {
      int i;
      for (i = 0; i < S3_SLOTS; i++)
        if (s3.slots[i].number == 0 || !s3.slots[i].full)
          p = &s3.slots[i];
    }
    if (p != NULL)
      extra[n++] = (struct curl_waitfd) { .fd = s3.in.poll_fd,
                                          .events = CURL_WAIT_POLLIN };
    curl_multi_poll (s3.multi, extra, n, wait_ms (), NULL);
    if (extra[0].revents & CURL_WAIT_POLLIN) {
      if (read (s3.signal_pipe[0], drain, sizeof drain) == -1) {
        /* Nothing to drain after all. */
      }
    }
  }
}

/* Signals that end curlpipe abort the upload first. */
static void
catch_signals (bool on)
{
  static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
  struct sigaction sa = { .sa_handler = on ? on_signal : SIG_DFL };
  size_t i;

  sigemptyset (&sa.sa_mask);
  for (i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    sigaction (sigs[i], &sa, NULL);
}

bool
s3_multipart_wanted (const struct options *opt)
{
  struct stat sb;
  off_t at;

  if (opt->aws_sigv4 == NULL || opt->data_binary ||
      (opt->method && strcmp (opt->method, "PUT") != 0))
    return false;
  if (opt->upload_size >= 0)
    return opt->upload_size > S3_SINGLE_PUT_MAX;
  if (fstat (STDIN_FILENO, &sb) == -1 || !S_ISREG (sb.st_mode))
    return true;
  at = lseek (STDIN_FILENO, 0, SEEK_CUR);
  return sb.st_size - (at > 0 ? at : 0) > S3_SINGLE_PUT_MAX;
}

/* The signal's name, for the message. */
static const char *
signal_name (int sig)
{
  return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP";
}

/* The upload from creation to completion, aborted on a failure or a
 * signal; the exit status.
 */
static int
run (struct answer *a)
{
  int status;
  int i;

  /* For tests only (curlpipe(1)): a smaller first part, down to 1 MiB,
   * which s3rver takes although S3 wants 5 MiB; and parts spooled
   * from a smaller size.
   */
  s3.first_part = s3_env_size ("CURLPIPE_S3_PART_SIZE", S3_FIRST_PART);
  if (s3.first_part < MIB || s3.first_part > S3_MAX_PART)
    s3.first_part = S3_FIRST_PART;
  s3.memory_part = s3_env_size ("CURLPIPE_S3_MEMORY_PART", S3_MEMORY_PART);
  if (s3.memory_part > S3_MEMORY_PART)
    s3.memory_part = S3_MEMORY_PART;
  snprintf (s3.spool, sizeof s3.spool, "%s",
            getenv ("TMPDIR") && *getenv ("TMPDIR") ? getenv ("TMPDIR")
            : "/tmp");
  s3.etags = calloc (S3_MAX_PARTS + 1, sizeof *s3.etags);
  s3.zero = malloc (S3_SPOOL_CHUNK);
  s3.multi = curl_multi_init ();
  if (s3.etags == NULL || s3.zero == NULL || s3.multi == NULL) {
    s3_fail ("out of memory");
    return EXIT_NOMEM;
  }
  curl_multi_setopt (s3.multi, CURLMOPT_MAX_HOST_CONNECTIONS,
                     (long) S3_IN_FLIGHT);
  for (i = 0; i < S3_SLOTS; i++)
    s3.slots[i] = (struct part) { .fd = -1 };
  s3.next_number = 1;

  status = s3_create_upload (a);
  if (status != EXIT_OK || s3_signal)
    goto failed;
  io_open (&s3.in, STDIN_FILENO, O_RDONLY);
  status = upload_parts ();
  for (i = 0; i < S3_SLOTS; i++)
    s3_slot_free (&s3.slots[i]);
  if (status == EXIT_OK && !s3_signal)
    status = s3_complete_upload (a, s3.next_number - 1);
  if (status == EXIT_OK && !s3_signal)
    return s3_write_answer (a);
 failed:
  if (s3_signal) {
    s3.msg[0] = '\0';
    s3_fail ("interrupted by %s, %s", signal_name (s3_signal),
             s3.upload_id ? "the upload aborted"
             : "before the upload was created");
    status = 128 + s3_signal;
  }
  if (s3.upload_id)
    s3_abort_upload (a);
  return status;
}

int
s3_multipart_run (const struct options *opt, char *msg, size_t msglen)
{
  struct answer *a = malloc (sizeof *a);
  int status, i;

  const char *refused = opt->write_out ? "-w" : opt->dump_header ? "-D"
    : opt->trace ? "--trace-ascii" : opt->follow ? "-L" : NULL;

  /* Options that name one request's exchange mean nothing for many. */
  if (refused) {
    free (a);
    snprintf (msg, msglen, "%s: not supported in an S3 multipart upload "
              "(a stream of unknown size with --aws-sigv4)", refused);
    return EXIT_USAGE;
  }
  s3 = (struct s3) { .opt = opt, .msg = msg, .msglen = msglen,
                     .signal_pipe = { -1, -1 } };
  s3.in.fd = -1;
  clock_gettime (CLOCK_MONOTONIC, &s3.start);
  s3.url = shown_url (opt->url);
  if (a == NULL || s3.url == NULL ||
      pipe2 (s3.signal_pipe, O_CLOEXEC | O_NONBLOCK) == -1) {
    free (a);
    free (s3.url);
    snprintf (msg, msglen, "out of memory");
    return EXIT_NOMEM;
  }
  io_ignore_sigpipe ();
  catch_signals (true);
  status = run (a);
  catch_signals (false);
  if (s3.in.fd >= 0)
    io_close (&s3.in);
  for (i = 0; s3.etags && i <= S3_MAX_PARTS; i++)
    free (s3.etags[i]);
  free (s3.etags);
  free (s3.zero);
  free (s3.upload_id);
  curl_multi_cleanup (s3.multi);
  close (s3.signal_pipe[0]);
  close (s3.signal_pipe[1]);
  free (s3.url);
  free (a);
  return status;
}
