/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The request headers a user may add, with header= or header-script.  Each
 * is one line, with a valid name, and none that the plugin sets itself for
 * its own checks.  Pure, with no state and no I/O: header=
 * (settings/values.c) and each line of header-script's output
 * (scripts/script.c) get the same answer for the same line.
 */

#include <config.h>

#include <string.h>
#include <strings.h>

#include "rules/rules.h"

/* The headers the plugin sets for its own checks: one of these from
 * header= or header-script would replace libcurl's (Range) or the
 * plugin's (If-Match), or change the body a PUT sends (Content-Length:
 * 0 sends none, and the server takes the empty write), and the answers
 * would not be the ones the plugin checks for.  Accept-Encoding would
 * make ranges index a compressed representation, not the object.
 */
static bool
plugin_header (const char *name, size_t len)
{
  static const char *const own[] = {
    "range", "if-match", "if-unmodified-since", "if-none-match",
    "if-modified-since", "if-range", "content-range", "content-length",
    "transfer-encoding", "expect", "accept-encoding",
  };
  size_t i;

  for (i = 0; i < sizeof own / sizeof own[0]; i++)
    if (is_word (own[i], name, len))
      return true;
  return false;
}

/* RFC 9110 5.6.2: a header name is a token. */
static bool
is_token (const char *name, size_t len)
{
  size_t i;

  for (i = 0; i < len; i++) {
    unsigned char c = name[i];

    if (!(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') &&
        !(c >= '0' && c <= '9') &&
        (c == '\0' || strchr ("!#$%&'*+-.^_`|~", c) == NULL))
      return false;
  }
  return len > 0;
}

/* Why the request header LINE (LEN bytes, from header= or a line of
 * header-script's output) may not be sent, or NULL if it may.  *NAME_LEN
 * is set to the length of its name for messages, or 0 when the line
 * has no valid name: what stands before a ':' may then be a value, and
 * a value is never shown, as it may be a token.  The forms are
 * libcurl's: "Name: value", and "Name;" for a header with an empty value
 * (libcurl sends nothing for "Name; " with a blank).  A value with CR or
 * LF would smuggle a second header or a whole request into the stream; a
 * blank before the colon is refused by servers (RFC 9112 5.1), and a
 * line that starts with one would be folded into the previous header.
 */
const char *
headers_refused (const char *line, size_t len, int *name_len)
{
  size_t n = 0;

  while (n < len && line[n] != ':' && line[n] != ';')
    n++;
  *name_len = 0;
  if (memchr (line, '\0', len) != NULL)
    return "headers must not contain NUL bytes";
  if (n == len)
    return "expected 'Name: value' or 'Name;', got no ':'";
  if (!is_token (line, n))
    return "the header name is empty or not a valid token (no blanks "
      "before the ':')";
  *name_len = (int) n;
  if (memchr (line, '\r', len) != NULL || memchr (line, '\n', len) != NULL)
    return "headers must not contain CR or LF";
  if (line[n] == ';' && n + 1 != len)
    return "a header with an empty value is 'Name;', with nothing after";
  if (plugin_header (line, n))
    return "the plugin sets it itself (for the ranges it asks for, the "
      "validators it pins and the bodies it sends)";
  return NULL;
}
