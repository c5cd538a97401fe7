/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * What transfer.c calls of s3.c: whether an upload goes as an S3
 * multipart upload, and the upload itself.
 */

#ifndef CURLPIPE_S3_H
#define CURLPIPE_S3_H

#include <stdbool.h>
#include <stddef.h>

#include "curlpipe.h"

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

#endif /* CURLPIPE_S3_H */
