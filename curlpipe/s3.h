/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The S3 multipart upload's files: what transfer.c calls (whether an
 * upload goes as a multipart upload, and the upload itself), and what
 * s3.c, s3part.c, s3steps.c and s3req.c share.
 */

#ifndef CURLPIPE_S3_H
#define CURLPIPE_S3_H

#include <stdbool.h>
#include <stddef.h>

#include <signal.h>
#include <time.h>

#include <openssl/evp.h>

#include "curlpipe.h"
#include "pipe.h"

/* The largest body sent as one PUT, S3's own limit: 5 GiB. */
#define S3_SINGLE_PUT_MAX ((curl_off_t) 5 << 30)

/* --aws-sigv4 with a body of unknown size, or one over 5 GiB: a
 * multipart upload.
 */
extern bool s3_multipart_wanted (const struct options *opt);

/* The multipart upload of standard input; the exit status, with the
 * reason of a failure in msg.
 */
extern int s3_multipart_run (const struct options *opt, char *msg,
                             size_t msglen);

/* What s3.c, s3part.c, s3steps.c and s3req.c share (calls go down that
 * list, never back): the limits, the upload's state, their functions.
 */
#define MIB ((curl_off_t) 1 << 20)

/* The part sizes.  Part n (from 1) is S3_FIRST_PART doubled every
 * S3_DOUBLING parts, at most S3_MAX_PART: 20 parts each of 8, 16, 32
 * ... 4096 MiB (160 GiB in all), then 5 GiB parts.  The 10,000 parts
 * then hold 48.0 TiB, near S3's 48.8 TiB object limit, while a small
 * stream goes in small parts; 4 GiB takes 94 parts of up to 128 MiB.
 */
#define S3_FIRST_PART (8 * MIB)
#define S3_MAX_PART ((curl_off_t) 5 << 30)
#define S3_DOUBLING 20
#define S3_MAX_PARTS 10000

/* Parts in flight at once, each on a kept-alive HTTP/1.1 connection;
 * one more slot fills from standard input meanwhile.
 */
#define S3_IN_FLIGHT 4
#define S3_SLOTS (S3_IN_FLIGHT + 1)

/* Parts up to this size are held in memory; bigger ones are spooled
 * to an unlinked temporary file, so that five slots stay under
 * 128 MiB whatever the part size and a retry can send them again.
 */
#define S3_MEMORY_PART (16 * MIB)

/* Tries of a part, or of the completion, before the upload fails; the
 * backoff doubles from S3_BACKOFF_MS between them.
 */
#define S3_TRIES 4

/* A request that moves no byte for this long fails (28). */
#define S3_STALL_SECONDS 120

/* Each of the abort's two tries, at most: it also runs after -m. */
#define S3_ABORT_MS 10000
#define S3_BACKOFF_MS 100

/* The most of an answer's body kept: S3's answers are a few hundred
 * bytes; a longer one is cut, and read no further.
 */
#define S3_ANSWER_MAX (64 * 1024)
#define S3_ETAG_MAX 128
#define S3_UPLOAD_ID_MAX 1024

/* Standard input is read in chunks of at most this much per turn of
 * the loop, so that the parts in flight keep being served.
 */
#define S3_READ_TURN (4 * MIB)
#define S3_SPOOL_CHUNK (1 * MIB)

/* A request's answer, kept within bounds. */
struct answer {
  char body[S3_ANSWER_MAX + 1];
  size_t len;
  bool cut;                     /* longer than S3_ANSWER_MAX */
  char etag[S3_ETAG_MAX + 1];   /* the ETag header, "" when none */
  bool etag_bad;                /* one came, unquoted or too long */
};

/* A part: its bytes, in memory or spooled, and its request. */
struct part {
  int number;                   /* 0: the slot is free */
  curl_off_t size, target;      /* filled so far, and its full size */
  bool full;                    /* filled: ready to send */
  char *buf;                    /* in memory, target bytes */
  int fd;                       /* spooled, or -1 */
  curl_off_t offset;            /* what the read callback sends next */
  EVP_MD_CTX *md5;
  char content_md5[32];         /* base64 */
  int tries;
  struct timespec retry_at;     /* when set, not before */
  bool waiting;                 /* a retry waits for retry_at */
  CURL *easy;                   /* in flight, or NULL */
  struct curl_slist *headers;
  struct answer *answer;
};

struct s3 {
  const struct options *opt;
  char *url;                    /* as messages show it */
  char *msg;
  size_t msglen;
  struct io in;
  bool eof;
  CURLM *multi;
  struct part slots[S3_SLOTS];
  int next_number;              /* of the next part to fill */
  int in_flight;
  char **etags;                 /* [S3_MAX_PARTS + 1], by part number */
  char *upload_id;              /* percent-encoded for the query */
  curl_off_t first_part, memory_part;
  char spool[4096];             /* the temporary files' folder */
  char *zero;                   /* a spare buffer for the spool */
  struct timespec start;
  int signal_pipe[2];
};

extern struct s3 s3;

/* The signal that came, or 0. */
extern volatile sig_atomic_t s3_signal;

/* Every signal that came, and how many had when the abort started. */
extern volatile sig_atomic_t s3_signals;
extern sig_atomic_t s3_abort_signals;


/* s3part.c: the parts, from standard input to their requests. */
extern bool s3_read_input (int *status);
extern void s3_slot_free (struct part *p);
extern int s3_start_parts (void);
extern int s3_part_done (struct part *p, CURLcode rc);

/* s3steps.c: the upload created, completed or aborted; the answer. */
extern int s3_create_upload (struct answer *a);
extern void s3_abort_upload (struct answer *a);
extern int s3_complete_upload (struct answer *a, int parts);
extern int s3_write_answer (const struct answer *a);

/* s3req.c: requests, their answers, and the message of a failure. */
extern void s3_fail (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2)));
extern double s3_ms_until (const struct timespec *t);
extern curl_off_t s3_env_size (const char *name, curl_off_t dflt);
extern bool s3_xml_field (const struct answer *a, const char *tag, char *out,
                          size_t max);
extern void s3_describe (const struct answer *a, long code, char *buf,
                         size_t size);
extern char *s3_url_with (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2)));
extern CURL *s3_new_request (const char *url, struct answer *a,
                             struct curl_slist *headers);
extern struct curl_slist *s3_headers_with (const char *sha256,
                                           const char *extra);
extern CURLcode s3_run_control (const char *method, const char *url,
                                const char *body, struct answer *a,
                                long *code, bool interruptible);
extern bool s3_retryable (CURLcode rc, long code, const struct answer *a);
extern void s3_backoff_sleep (int tries);
extern int s3_status_of (CURLcode rc);

#endif /* CURLPIPE_S3_H */
