/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * One rule for what the plugin's -D curl.verbose=1 and curlpipe's -v
 * show of an HTTP exchange, and for how a URL appears in a message:
 * debug output and error messages end up in logs and bug reports, so
 * they never carry a credential, a cookie, a token in a header of any
 * name, or a presigned URL's signature.
 */

#ifndef COMMON_SECRETS_H
#define COMMON_SECRETS_H

#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>

/* Show libcurl's debug data (CURLOPT_DEBUGFUNCTION: type, data, size)
 * line by line, each as "DIR TEXT" ('*' libcurl's notes, '>' request
 * headers, '<' answer headers) passed to print, with secrets replaced by
 * "***".  Of the request's headers only those known to carry none are
 * shown with their values (a header= or -H value may be a token of any
 * name); of the answer's, all but Set-Cookie; query strings are hidden;
 * and libcurl's notes that quote a cookie, a user name or an HTTP/2
 * header are masked the same way.  Bodies and TLS records are not shown.
 */
extern void show_debug (curl_infotype type, const char *data, size_t size,
                        void (*print) (const char *line, void *opaque),
                        void *opaque);

/* A CURLOPT_DEBUGFUNCTION that shows the exchange by show_debug's
 * rule: CURLOPT_DEBUGDATA points to a struct debug_printer, whose print
 * gets each line.
 */
struct debug_printer {
  void (*print) (const char *line, void *opaque);
  void *opaque;
};
extern int debug_shown (CURL *easy, curl_infotype type, char *data,
                        size_t size, void *printer);

/* Does a request header of this name (len bytes) carry no secret?
 * The few that carry none (Host, Range, Content-Length ...); any other
 * may be a token.  curlpipe also blanks the others' values in argv.
 */
extern bool safe_request_header (const char *name, size_t len);

/* A message of libcurl's (its error buffer) as it may be shown: in
 * every URL in it, with or without a scheme, the user name and password
 * replaced by "***@" and the query by "?***", by the rule -v's notes
 * follow.  At most size bytes, with the '\0', go in buf.
 */
extern void shown_message (const char *text, char *buf, size_t size);

/* url without user:password@, and with "?..." for its query (a
 * presigned URL's signature), for messages; NULL when out of memory.
 * Free it with free.
 */
extern char *shown_url (const char *url);

#endif /* COMMON_SECRETS_H */
