/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The S3 multipart upload's steps around the parts: creating the
 * upload (its ID from the answer), completing it with the parts' ETags,
 * aborting it; and the completion's answer written out.
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

/* The upload ID, from the creation's answer: printable, bounded, no XML
 * markup, and percent-encoded where not unreserved in a query.
 */
static bool
take_upload_id (const struct answer *a)
{
  static const char hex[] = "0123456789ABCDEF";
  char id[S3_UPLOAD_ID_MAX + 1];
  size_t i, n = 0;

  if (a->cut || !s3_xml_field (a, "UploadId", id, sizeof id) || id[0] == '\0')
    return false;
  s3.upload_id = malloc (strlen (id) * 3 + 1);
  if (s3.upload_id == NULL)
    return false;
  for (i = 0; id[i]; i++) {
    unsigned char c = id[i];
    if (c < 0x21 || c > 0x7e || strchr ("<>&\"'", c) != NULL) {
      free (s3.upload_id);
      s3.upload_id = NULL;
      return false;
    }
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
        (c >= '0' && c <= '9') || strchr ("-._~", c) != NULL)
      s3.upload_id[n++] = c;
    else {
      s3.upload_id[n++] = '%';
      s3.upload_id[n++] = hex[c >> 4];
      s3.upload_id[n++] = hex[c & 15];
    }
  }
  s3.upload_id[n] = '\0';
  return true;
}

/* Create the upload: its ID, or the exit status of the failure. */
int
s3_create_upload (struct answer *a)
{
  char *url = s3_url_with ("uploads");
  char what[128];
  CURLcode rc;
  long code;
  int tries;

  if (url == NULL)
    return EXIT_NOMEM;
  for (tries = 1; ; tries++) {
    rc = s3_run_control ("POST", url, NULL, a, &code, true);
    /* An <Error> in a 200 answer is no upload, whatever else it holds. */
    if (rc == CURLE_OK && code == 200 && strstr (a->body, "<Error>") == NULL &&
        take_upload_id (a))
      break;
    if (rc == CURLE_OK && code == 200) {
      free (url);
      s3_fail ("creating the upload: no valid UploadId in the answer");
      return CURLE_WEIRD_SERVER_REPLY;
    }
    if (tries == S3_TRIES || !s3_retryable (rc, code, a) || s3_signal) {
      free (url);
      if (rc != CURLE_OK)
        s3_fail ("creating the upload: %s", curl_easy_strerror (rc));
      else {
        s3_describe (a, code, what, sizeof what);
        s3_fail ("creating the upload: %s", what);
      }
      return s3_status_of (rc);
    }
    s3_backoff_sleep (tries);
  }
  free (url);
  return EXIT_OK;
}

/* Abort the upload, so that its parts are not left billed; a note in
 * the message when that failed too.
 */
void
s3_abort_upload (struct answer *a)
{
  char *url = s3_url_with ("uploadId=%s", s3.upload_id);
  char what[128];
  size_t n;
  CURLcode rc = CURLE_OUT_OF_MEMORY;
  long code = 0;
  int tries;

  s3_abort_signals = s3_signals;
  for (tries = 1; url != NULL && tries <= 2; tries++) {
    rc = s3_run_control ("DELETE", url, NULL, a, &code, false);
    if (s3_signals != s3_abort_signals)
      break;
    if (rc == CURLE_OK && code >= 200 && code < 300)
      break;
    if (rc == CURLE_OK && code == 404 &&
        s3_xml_field (a, "Code", what, sizeof what) &&
        strcmp (what, "NoSuchUpload") == 0)
      break;
  }
  free (url);
  if (rc == CURLE_OK && ((code >= 200 && code < 300) || code == 404))
    return;
  if (rc != CURLE_OK)
    snprintf (what, sizeof what, "%s", curl_easy_strerror (rc));
  else
    s3_describe (a, code, what, sizeof what);
  n = strlen (s3.msg);
  snprintf (s3.msg + n, s3.msglen - n, "; aborting upload %s failed (%s): "
            "its parts may be left on the server", s3.upload_id, what);
}

/* Complete the upload with the parts' ETags; its answer's body to
 * standard output (or -o's file), as curl -T shows a PUT's.
 */
int
s3_complete_upload (struct answer *a, int parts)
{
  char *url = s3_url_with ("uploadId=%s", s3.upload_id), *xml, *p;
  size_t size = 64 + (size_t) parts * (S3_ETAG_MAX + 64);
  char what[128];
  CURLcode rc;
  long code;
  int i, tries;

  xml = malloc (size);
  if (url == NULL || xml == NULL) {
    free (url);
    free (xml);
    s3_fail ("out of memory");
    return EXIT_NOMEM;
  }
  /* Every part stored has its ETag; one missing would complete an
   * object without its bytes.
   */
  for (i = 1; i <= parts; i++) {
    if (s3.etags[i] == NULL) {
      free (url);
      free (xml);
      s3_fail ("part %d: no ETag recorded, the upload not completed", i);
      return CURLE_SEND_ERROR;
    }
  }
  p = xml + sprintf (xml, "<CompleteMultipartUpload>");
  for (i = 1; i <= parts; i++)
    p += sprintf (p, "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag>"
                  "</Part>", i, s3.etags[i]);
  sprintf (p, "</CompleteMultipartUpload>");
  for (tries = 1; ; tries++) {
    rc = s3_run_control ("POST", url, xml, a, &code, true);
    /* S3 may answer 200 and then an <Error> in the body. */
    if (rc == CURLE_OK && code == 200 && !a->cut &&
        strstr (a->body, "<Error>") == NULL &&
        strstr (a->body, "CompleteMultipartUploadResult") != NULL)
      break;
    if (tries == S3_TRIES || s3_signal ||
        !(s3_retryable (rc, code, a) ||
          (rc == CURLE_OK && code == 200 && strstr (a->body, "<Error>")))) {
      free (url);
      free (xml);
      if (rc != CURLE_OK)
        s3_fail ("completing the upload: %s after %d %s",
                 curl_easy_strerror (rc), tries, tries > 1 ? "tries" : "try");
      else {
        s3_describe (a, code, what, sizeof what);
        s3_fail ("completing the upload: %s%s after %d %s", what,
                 code == 200 ? " in a 200 answer" : "", tries,
                 tries > 1 ? "tries" : "try");
      }
      return s3_status_of (rc);
    }
    s3_backoff_sleep (tries);
  }
  free (url);
  free (xml);
  return EXIT_OK;
}

/* The answer's body to standard output or -o's file, waiting in poll
 * when it takes nothing for now.
 */
int
s3_write_answer (const struct answer *a)
{
  const char *out = s3.opt->output;
  struct io io;
  struct pollfd pfd;
  int fd;
  size_t off = 0;
  ssize_t n;

  if (out != NULL && strcmp (out, "-") != 0) {
    fd = open (out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd == -1) {
      s3_fail ("%s: %s", out, strerror (errno));
      return EXIT_WRITE;
    }
    io_own (&io, fd);
  }
  else
    io_open (&io, STDOUT_FILENO, O_WRONLY);
  while (off < a->len) {
    n = io_write (&io, a->body + off, a->len - off);
    if (n == -1 && (errno == EAGAIN || errno == EINTR)) {
      pfd = (struct pollfd) { .fd = io.poll_fd, .events = POLLOUT };
      poll (&pfd, 1, 1000);
      continue;
    }
    if (n == -1) {
      s3_fail ("writing the answer: %s", strerror (errno));
      io_close (&io);
      return EXIT_WRITE;
    }
    off += n;
  }
  if (!io_close (&io)) {
    s3_fail ("%s: %s", out ? out : "standard output", strerror (errno));
    return EXIT_WRITE;
  }
  return EXIT_OK;
}
