/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The S3 multipart upload's parts: the slots they fill from standard
 * input, in memory or spooled to a temporary file, with their MD5; and
 * each part's request, sent, retried or failed.
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
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "curlpipe.h"
#include "pipe.h"
#include "s3.h"
#include "secrets.h"

/* Part n's size: see S3_DOUBLING's comment. */
static curl_off_t
part_size (int n)
{
  int doublings = (n - 1) / S3_DOUBLING;
  curl_off_t size = s3.first_part;

  while (doublings-- > 0 && size < S3_MAX_PART)
    size *= 2;
  return size < S3_MAX_PART ? size : S3_MAX_PART;
}

/* A temporary file for a part too big for memory: unlinked from the
 * start, so nothing is left behind whatever happens.
 */
static int
spool_open (void)
{
  char name[4200];
  int fd;

#ifdef O_TMPFILE
  fd = open (s3.spool, O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0)
    return fd;
#endif
  snprintf (name, sizeof name, "%s/curlpipe-s3-XXXXXX", s3.spool);
  fd = mkostemp (name, O_CLOEXEC);
  if (fd >= 0)
    unlink (name);
  return fd;
}

/* The slot free again: its bytes and its request let go. */
void
s3_slot_free (struct part *p)
{
  if (p->easy) {
    curl_multi_remove_handle (s3.multi, p->easy);
    curl_easy_cleanup (p->easy);
    s3.in_flight--;
  }
  curl_slist_free_all (p->headers);
  if (p->buf)
    munmap (p->buf, p->target);
  free (p->answer);
  if (p->fd >= 0)
    close (p->fd);
  EVP_MD_CTX_free (p->md5);
  *p = (struct part) { .fd = -1 };
}

/* The part being filled from standard input, a new one when a slot is
 * free, or NULL (all slots busy, or a failure recorded in *status).
 */
static struct part *
filling_part (int *status)
{
  struct part *p, *free_slot = NULL;
  int i;

  for (i = 0; i < S3_SLOTS; i++) {
    p = &s3.slots[i];
    if (p->number != 0 && !p->full)
      return p;
    if (p->number == 0 && free_slot == NULL)
      free_slot = p;
  }
  if (free_slot == NULL)
    return NULL;
  p = free_slot;
  if (s3.next_number > S3_MAX_PARTS) {
    s3_fail ("the stream is longer than S3's 10,000 parts hold");
    *status = CURLE_FILESIZE_EXCEEDED;
    return NULL;
  }
  *p = (struct part) { .number = s3.next_number, .fd = -1 };
  p->target = part_size (p->number);
  p->md5 = EVP_MD_CTX_new ();
  if (p->md5 == NULL || !EVP_DigestInit_ex (p->md5, EVP_md5 (), NULL))
    goto nomem;
  if (p->target <= s3.memory_part) {
    /* Mapped, not malloc'd: unmapped when freed, it leaves no heap
     * behind, so the peak RSS stays what the slots hold.
     */
    p->buf = mmap (NULL, p->target, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p->buf == MAP_FAILED) {
      p->buf = NULL;
      goto nomem;
    }
  }
  else {
    p->fd = spool_open ();
    if (p->fd == -1) {
      s3_fail ("part %d: a temporary file in %s: %s", p->number, s3.spool,
               strerror (errno));
      s3_slot_free (p);
      *status = EXIT_WRITE;
      return NULL;
    }
  }
  s3.next_number++;
  return p;
 nomem:
  s3_slot_free (p);
  s3_fail ("out of memory");
  *status = EXIT_NOMEM;
  return NULL;
}

/* The part is filled (or standard input ended): its Content-MD5. */
static void
part_filled (struct part *p)
{
  unsigned char md[16];
  unsigned int n = 0;

  EVP_DigestFinal_ex (p->md5, md, &n);
  EVP_EncodeBlock ((unsigned char *) p->content_md5, md, n);
  p->full = true;
}

/* Bytes read into a part: kept in memory or written to its spool. */
static bool
part_add (struct part *p, const char *data, size_t len)
{
  ssize_t w;
  size_t off = 0;

  EVP_DigestUpdate (p->md5, data, len);
  if (p->buf) {
    if (data != p->buf + p->size)
      memcpy (p->buf + p->size, data, len);
  }
  else {
    while (off < len) {
      w = pwrite (p->fd, data + off, len - off, p->size + off);
      if (w == -1 && errno == EINTR)
        continue;
      if (w == -1)
        return false;
      off += w;
    }
  }
  p->size += len;
  return true;
}

/* Standard input into the filling parts, at most S3_READ_TURN bytes a
 * turn; false on a failure (recorded in *status).
 */
bool
s3_read_input (int *status)
{
  curl_off_t budget = S3_READ_TURN;
  struct part *p;
  char *dst;
  size_t want;
  ssize_t n;

  while (!s3.eof && budget > 0) {
    p = filling_part (status);
    if (p == NULL)
      return *status == EXIT_OK;
    want = p->target - p->size;
    if ((curl_off_t) want > budget)
      want = budget;
    if (p->buf)
      dst = p->buf + p->size;
    else {
      dst = s3.zero;
      if (want > S3_SPOOL_CHUNK)
        want = S3_SPOOL_CHUNK;
    }
    n = io_read (&s3.in, dst, want);
    if (n == -1 && errno == EINTR)
      continue;
    if (n == -1 && errno == EAGAIN)
      return true;
    if (n == -1) {
      s3_fail ("reading standard input: %s (part %d)", strerror (errno),
               p->number);
      *status = EXIT_READ;
      return false;
    }
    if (n == 0) {
      s3.eof = true;
      /* An empty last part is dropped, unless it is the only one. */
      if (p->size == 0 && p->number > 1) {
        s3_slot_free (p);
        s3.next_number--;
      }
      else
        part_filled (p);
      return true;
    }
    if (!part_add (p, dst, n)) {
      s3_fail ("part %d: writing its temporary file: %s", p->number,
               strerror (errno));
      *status = EXIT_WRITE;
      return false;
    }
    budget -= n;
    if (p->size == p->target)
      part_filled (p);
  }
  return true;
}

/* libcurl reads the part from its buffer or its spool. */
static size_t
part_read_cb (char *buf, size_t size, size_t nitems, void *opaque)
{
  struct part *p = opaque;
  size_t len = size * nitems;
  curl_off_t left = p->size - p->offset;
  ssize_t n;

  if ((curl_off_t) len > left)
    len = left;
  if (len == 0)
    return 0;
  if (p->buf) {
    memcpy (buf, p->buf + p->offset, len);
    n = len;
  }
  else {
    n = pread (p->fd, buf, len, p->offset);
    if (n <= 0)
      return CURL_READFUNC_ABORT;
  }
  p->offset += n;
  return n;
}

/* libcurl rewinds the part to send it again (a redirect, an auth). */
static int
part_seek_cb (void *opaque, curl_off_t offset, int origin)
{
  struct part *p = opaque;

  if (origin != SEEK_SET || offset < 0 || offset > p->size)
    return CURL_SEEKFUNC_CANTSEEK;
  p->offset = offset;
  return CURL_SEEKFUNC_OK;
}

/* Send a filled part: PUT ?partNumber=N&uploadId=ID. */
static int
part_start (struct part *p)
{
  char md5[64], *url;
  CURLcode rc = CURLE_OK;

  if (p->answer == NULL) {
    p->answer = malloc (sizeof *p->answer);
    if (p->answer == NULL)
      goto nomem;
  }
  p->answer->len = 0;
  p->answer->cut = false;
  p->answer->body[0] = '\0';
  p->answer->etag[0] = '\0';
  p->answer->etag_bad = false;
  snprintf (md5, sizeof md5, "Content-MD5: %s", p->content_md5);
  curl_slist_free_all (p->headers);
  p->headers = s3_headers_with ("UNSIGNED-PAYLOAD",
                             p->content_md5[0] ? md5 : NULL);
  url = s3_url_with ("partNumber=%d&uploadId=%s", p->number, s3.upload_id);
  if (p->headers == NULL || url == NULL) {
    free (url);
    goto nomem;
  }
  p->easy = s3_new_request (url, p->answer, p->headers);
  free (url);
  if (p->easy == NULL)
    goto nomem;
  p->offset = 0;
  p->tries++;
  p->waiting = false;
#define SET(o, v) \
  if (rc == CURLE_OK) rc = curl_easy_setopt (p->easy, o, v)
  SET (CURLOPT_UPLOAD, 1L);
  SET (CURLOPT_INFILESIZE_LARGE, p->size);
  SET (CURLOPT_READFUNCTION, part_read_cb);
  SET (CURLOPT_READDATA, p);
  SET (CURLOPT_SEEKFUNCTION, part_seek_cb);
  SET (CURLOPT_SEEKDATA, p);
  SET (CURLOPT_PRIVATE, p);
  SET (CURLOPT_UPLOAD_BUFFERSIZE, (long) UPLOAD_BUFFER_SIZE);
#undef SET
  if (rc == CURLE_OK)
    rc = curl_multi_add_handle (s3.multi, p->easy) == CURLM_OK
      ? CURLE_OK : CURLE_OUT_OF_MEMORY;
  if (rc != CURLE_OK) {
    curl_easy_cleanup (p->easy);
    p->easy = NULL;
    s3_fail ("part %d: %s", p->number, curl_easy_strerror (rc));
    return rc;
  }
  s3.in_flight++;
  return EXIT_OK;
 nomem:
  s3_fail ("out of memory");
  return EXIT_NOMEM;
}

/* A part's request ended: its ETag kept and its slot freed, or a retry
 * set, or the failure; the exit status.
 */
int
s3_part_done (struct part *p, CURLcode rc)
{
  struct answer *a = p->answer;
  char what[160];
  long code = 0;

  curl_easy_getinfo (p->easy, CURLINFO_RESPONSE_CODE, &code);
  curl_multi_remove_handle (s3.multi, p->easy);
  curl_easy_cleanup (p->easy);
  p->easy = NULL;
  s3.in_flight--;
  if (rc == CURLE_OK && code == 200) {
    if (a->etag[0] == '\0') {
      s3_fail ("part %d: the answer has %s ETag", p->number,
               a->etag_bad ? "an invalid" : "no");
      return CURLE_WEIRD_SERVER_REPLY;
    }
    s3.etags[p->number] = strdup (a->etag);
    if (s3.etags[p->number] == NULL) {
      s3_fail ("out of memory");
      return EXIT_NOMEM;
    }
    s3_slot_free (p);
    return EXIT_OK;
  }
  if (p->tries < S3_TRIES && s3_retryable (rc, code, a)) {
    clock_gettime (CLOCK_MONOTONIC, &p->retry_at);
    p->retry_at.tv_nsec += (long) S3_BACKOFF_MS * 1000000L << (p->tries - 1);
    while (p->retry_at.tv_nsec >= 1000000000L) {
      p->retry_at.tv_sec++;
      p->retry_at.tv_nsec -= 1000000000L;
    }
    p->waiting = true;
    return EXIT_OK;
  }
  if (rc != CURLE_OK)
    snprintf (what, sizeof what, "%s", curl_easy_strerror (rc));
  else
    s3_describe (a, code, what, sizeof what);
  s3_fail ("part %d: %s after %d %s", p->number, what, p->tries,
           p->tries > 1 ? "tries" : "try");
  return s3_status_of (rc);
}

/* Start the filled parts that wait, as slots in flight allow. */
int
s3_start_parts (void)
{
  struct part *p;
  int i, status;

  for (i = 0; i < S3_SLOTS && s3.in_flight < S3_IN_FLIGHT; i++) {
    p = &s3.slots[i];
    if (p->number == 0 || !p->full || p->easy != NULL)
      continue;
    if (p->waiting && s3_ms_until (&p->retry_at) > 0)
      continue;
    status = part_start (p);
    if (status != EXIT_OK)
      return status;
  }
  return EXIT_OK;
}
