/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The verdict on an answer: what was asked, what came back, and one pure
 * function (verdict.c).  It says whether the answer is the one asked for,
 * and if not, what to do about it.  callbacks.c gathers the facts as
 * libcurl hands them over, into struct answer, with answer.c's functions.
 * It acts on the verdict.  Nothing here does I/O or reads the plugin's
 * globals, so tests/unit/test-verdict.c can feed it answers without a
 * server.
 */

#ifndef VERDICT_H
#define VERDICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "rules/ranges.h"

/* The object's identity found at start-up (object/object.c), which the answer
 * to every read must still show: each validator the probe found is
 * compared where the answer carries it, and one the probe's own ranged
 * GET carried must be there.  A strong ETag compares exactly (as
 * If-Match does), a weak one (W/"...") by weak comparison (RFC 9110
 * 8.8.3.2): a weak ETag cannot go into If-Match, but a different one
 * proves a different representation.
 */
struct pin {
  const char *etag;             /* "" if none */
  const char *last_modified;    /* "" if none */
  bool etag_required;           /* an answer without an ETag is refused */
  bool last_modified_required;  /* ... without Last-Modified */
  const char *header;           /* the precondition sent, "" if none */
  /* A mirror proven by a digest it states (mirrors.c): the digest
   * header line, "name:value", that every answer must carry as it is;
   * NULL or "" if none.  Its ETag, if any, was made by another origin
   * and proves nothing of the bytes.
   */
  const char *digest;
};

/* What was asked.  Built before the request and not changed while it
 * runs (the head start's, asked before the object was known, is
 * completed after its transfer: headstart_end).
 */
struct asked {
  enum method { HEAD, GET, PUT } method;
  unsigned nranges;             /* GET: ranges in the Range header */
  uint64_t first, last;         /* GET of one range: inclusive */
  int64_t expect_total;         /* Content-Range total, -1 if unknown */
  bool allow_empty;             /* probe: an empty object is an answer */
  bool allow_short;             /* probe: ... and one shorter than asked */
  bool is_file;                 /* file://: no status, no headers */
  bool follow_redirects;        /* followlocation= */
  bool serving;                 /* the probe is done */
  bool pinned;                  /* the answer must show pin */
  struct pin pin;               /* exchange.c sends pin.header */
};

/* What came back, as far as it has arrived: the header facts of the
 * last header block, what the body did, and at the end (complete) how
 * the transfer ended.  answer_reset starts a new header block, and
 * answer_header takes in each of its lines (answer.c).
 */
/* Validators go into struct object_info (object/object.h) as they are. */
#define ETAG_SIZE 256
#define LAST_MODIFIED_SIZE 64

/* The longest wait between tries: the backoff's and Retry-After's. */
#define MAX_RETRY_DELAY_MS 30000

/* Room for the digest headers of one answer (struct answer). */
#define DIGESTS_SIZE 4096

struct answer {
  long status;                  /* 0 before a status line, and file:// */
  bool in_block;                /* a line of this header block came */
  bool headers_done;            /* the last header block has ended */
  int64_t content_length;       /* -1 if none or unparsable */
  bool cl_seen, cr_seen;        /* Content-Length, Content-Range */
  bool framing_twice;           /* ... came twice, differently */
  bool has_content_range;       /* a valid "bytes FIRST-LAST/TOTAL" */
  uint64_t cr_first, cr_last;
  int64_t cr_total;             /* -1 for '*' */
  int64_t unsatisfied_total;    /* "bytes STAR/N": N, else -1 */
  char boundary[72];            /* multipart/byteranges, "" if not */
  bool has_location;
  char location[8192];          /* "" if too long or with a NUL */
  char etag[ETAG_SIZE];         /* "" when absent */
  char last_modified[LAST_MODIFIED_SIZE];
  bool bad_etag;                /* unusable: see copy_validator */
  bool bad_last_modified;
  unsigned retry_after_ms;      /* from Retry-After, 0 if none */
  /* Headers that state the object's digest, "name:value" lines
   * (checksum.c reads them); a line that does not fit is left out.
   */
  char digests[DIGESTS_SIZE];
  bool digests_cut;             /* one did not fit */
  bool last_was_digest;         /* for a folded line after it */

  /* The body. */
  uint64_t body_len;            /* bytes received, ignored ones too */
  bool body_early;              /* bytes before the headers ended */
  struct multipart mp;          /* VERDICT_PARTS: the body's parts */
  bool ignore_cut;              /* an ignored body was cut off */
  bool stopped;                 /* nbdkit is shutting down */

  /* At the end only. */
  bool complete;                /* the transfer has ended */
  CURLcode rc;                  /* how */
  const char *rc_text;          /* curl_easy_strerror (rc) */
  const char *errbuf;           /* CURLOPT_ERRORBUFFER */
};

extern void answer_reset (struct answer *a);
extern bool answer_header (struct answer *a, const char *name,
                           const char *v, size_t vlen);
extern void answer_long_header (struct answer *a, const char *data,
                                size_t len);
extern void answer_folded (struct answer *a);

enum verdict {
  VERDICT_OK,                   /* the bytes asked for (so far) */
  VERDICT_PARTS,                /* ... as multipart/byteranges */
  VERDICT_EMPTY,                /* proof that the object is empty */
  VERDICT_REDIRECT,             /* follow Location; body ignored */
  /* Failures from here on. */
  VERDICT_RETRY,                /* "not now": worth another try */
  VERDICT_RETRY_FRESH,          /* worth one try on a new connection */
  VERDICT_REFUSED,              /* not the answer; asking again won't do */
  VERDICT_UNSUPPORTED,          /* HEAD or partial PUT: not served here */
  VERDICT_NOT_THE_PARTS_ASKED_FOR, /* several ranges: ask one by one */
  VERDICT_OBJECT_CHANGED,       /* not the object opened at start-up */
  VERDICT_STOPPED,              /* nbdkit is shutting down */
};

static inline bool
verdict_failed (enum verdict v)
{
  return v >= VERDICT_RETRY;
}

extern const char *verdict_name (enum verdict v);
extern bool verdict_body_has_bytes (const struct asked *q, enum verdict v);
extern enum verdict verdict_judge (const struct asked *q,
                                   const struct answer *a,
                                   char *why, size_t size);

#endif /* VERDICT_H */
