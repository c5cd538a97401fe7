/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * What debug output and messages may show: see secrets.h.
 */

#include <config.h>

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "secrets.h"

/* Request headers whose values carry no secret.  Any other header, of
 * any name, may be a token (X-Api-Key, X-Auth-Token, a header-script's
 * output), so it is shown as "Name: ***".
 */
bool
safe_request_header (const char *name, size_t len)
{
  static const char *const safe[] = {
    "host", "range", "accept", "user-agent", "content-range",
    "content-length", "content-type", "expect", "if-match",
    "if-unmodified-since", "x-amz-date", "x-amz-content-sha256",
    "transfer-encoding", "connection", "te", ":method", ":scheme",
    ":authority",
    /* curlpipe's WebSocket upgrade: the key is a nonce, not a secret. */
    "upgrade", "sec-websocket-version", "sec-websocket-key",
  };
  size_t i;

  for (i = 0; i < sizeof safe / sizeof safe[0]; i++)
    if (strlen (safe[i]) == len && strncasecmp (safe[i], name, len) == 0)
      return true;
  return false;
}

/* Append at most n bytes of s to buf (of size, holding *used). */
static void
add (char *buf, size_t size, size_t *used, const char *s, size_t n)
{
  if (*used + 1 >= size)
    return;
  if (n > size - 1 - *used)
    n = size - 1 - *used;
  memcpy (buf + *used, s, n);
  *used += n;
  buf[*used] = '\0';
}

/* A path, or anything ending in one, with its query hidden. */
static void
add_without_query (char *buf, size_t size, size_t *used, const char *s,
                   size_t n)
{
  const char *q = memchr (s, '?', n);
  const char *sp;

  if (q == NULL) {
    add (buf, size, used, s, n);
    return;
  }
  add (buf, size, used, s, q - s);
  add (buf, size, used, "?***", 4);
  /* What follows the path on a request line: " HTTP/1.1". */
  sp = memchr (q, ' ', n - (q - s));
  if (sp != NULL)
    add (buf, size, used, sp, n - (sp - s));
}

/* The user name and password of a URL (n bytes at s), as "***@" would
 * replace them: *start is where the authority starts and the result
 * the '@' that ends them, or NULL when there are none.  The authority
 * follows a scheme and its slashes, "http://", "http:/" (libcurl takes
 * any number), or a leading "//" (a protocol-relative Location); else
 * "://" inside the text (a word in a note), else it starts at s ("user:
 * pw@host", and "http:u:pw@host", as libcurl takes both).  It ends at
 * the first '/', '?' or '#' (RFC 3986 3.2): an '@' after that, in a
 * path or a query ("?email=me@example.com"), is no user name's end.
 */
static const char *
find_userinfo (const char *s, size_t n, const char **start)
{
  const char *end = s + n, *sep = memmem (s, n, "://", 3), *p = s;
  const char *at = NULL;
  size_t scheme = 0;

  while (scheme < n && s[scheme] != '\0' &&
         (isalnum ((unsigned char) s[scheme]) ||
          strchr ("+-.", s[scheme]) != NULL))
    scheme++;
  if (n >= 2 && s[0] == '/' && s[1] == '/')
    p = s + 2;
  else if (scheme > 0 && scheme + 1 < n && s[scheme] == ':' &&
           s[scheme + 1] == '/')
    p = s + scheme + 1;
  else if (sep != NULL)
    p = sep + 1;
  while (p < end && *p == '/')
    p++;
  *start = p;
  for (; p < end && *p != '/' && *p != '?' && *p != '#'; p++)
    if (*p == '@')
      at = p;
  return at;
}

/* A Location header, "Location: URL": without the URL's user name and
 * password (find_userinfo) and query.
 */
static void
add_location (char *buf, size_t size, size_t *used, const char *s, size_t n)
{
  const char *end = s + n, *url = memchr (s, ':', n), *start, *at;

  for (url++; url < end && (*url == ' ' || *url == '\t'); url++)
    ;
  at = find_userinfo (url, end - url, &start);
  if (at == NULL) {
    add_without_query (buf, size, used, s, n);
    return;
  }
  add (buf, size, used, s, start - s);
  add (buf, size, used, "***@", 4);
  add_without_query (buf, size, used, at + 1, end - (at + 1));
}

/* One header, "Name: value", of the request (incoming false) or the
 * answer: shown, or with its value masked.
 */
static void
add_header (char *buf, size_t size, size_t *used, const char *s, size_t n,
            size_t namelen, bool incoming)
{
  /* Set-Cookie, and RFC 2965's obsolete Set-Cookie2, which a server may
   * still send.
   */
  bool safe = incoming
    ? !((namelen == 10 || namelen == 11) &&
        strncasecmp (s, "set-cookie2", namelen) == 0)
    : safe_request_header (s, namelen);

  /* A path's query, or a redirect's, may be a presigned signature; a
   * redirect's user name and password are the server's secret.
   */
  if (safe && incoming && namelen == 8 && strncasecmp (s, "location", 8) == 0)
    add_location (buf, size, used, s, n);
  else if (safe && !incoming && namelen == 5 &&
           strncasecmp (s, ":path", 5) == 0)
    add_without_query (buf, size, used, s, n);
  else if (safe)
    add (buf, size, used, s, n);
  else {
    add (buf, size, used, s, namelen);
    add (buf, size, used, ": ***", 5);
  }
}

/* The length of the header name at s ("Name: value" or, for HTTP/2,
 * ":name: value"), or 0 when s is no header.
 */
static size_t
header_name (const char *s, size_t n)
{
  size_t i;

  /* RFC 9110 5.6.2: a token. */
  static const char tchar[] = "!#$%&'*+-.^_`|~";

  for (i = 0; i < n; i++) {
    if (s[i] == ':' && i > 0)
      return i;
    if (!((s[i] == ':' && i == 0) || (s[i] != '\0' && strchr (tchar, s[i])) ||
          (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
          (s[i] >= '0' && s[i] <= '9')))
      return 0;
  }
  return 0;
}

/* A word of a message that may be a URL ("http://user:pw@host/p?sig",
 * or without a scheme "user:pw@host"): its user name and password
 * (find_userinfo) become "***@", and its query "?***" (a redirect's URL
 * may be presigned).  Anything with neither "://" nor a user name is
 * shown as it is.
 */
static void
add_url_like (char *buf, size_t size, size_t *used, const char *s, size_t n)
{
  const char *end = s + n, *auth, *at = find_userinfo (s, n, &auth), *q;

  if (memmem (s, n, "://", 3) == NULL && at == NULL) {
    add (buf, size, used, s, n);
    return;
  }
  add (buf, size, used, s, auth - s);
  if (at != NULL) {
    add (buf, size, used, "***@", 4);
    auth = at + 1;
  }
  q = memchr (auth, '?', end - auth);
  if (q == NULL)
    add (buf, size, used, auth, end - auth);
  else {
    add (buf, size, used, auth, q - auth);
    add (buf, size, used, "?***", 4);
  }
}

/* Words separated by spaces, each shown by add_url_like. */
static void
add_words (char *buf, size_t size, size_t *used, const char *s, size_t n)
{
  size_t w;

  while (n > 0) {
    for (w = 0; w < n && s[w] != ' ' && s[w] != '\t'; w++)
      ;
    add_url_like (buf, size, used, s, w);
    s += w;
    n -= w;
    for (w = 0; w < n && (s[w] == ' ' || s[w] == '\t'); w++)
      ;
    add (buf, size, used, s, w);
    s += w;
    n -= w;
  }
}

/* A message of libcurl's (a note, or its error buffer) with the URLs
 * in it masked.  libcurl quotes a URL it cannot use as given,
 * "Unsupported proxy syntax in 'URL'", and that URL may hold spaces or
 * quotes of its own: all between the first quote and the last is one
 * URL.  Elsewhere a URL ends at a space.
 */
static void
add_text (char *buf, size_t size, size_t *used, const char *s, size_t n)
{
  const char *open = memchr (s, '\'', n), *close = NULL, *p;

  for (p = s + n; open != NULL && p > open + 1 && close == NULL; p--)
    if (p[-1] == '\'')
      close = p - 1;
  if (close == NULL) {
    add_words (buf, size, used, s, n);
    return;
  }
  add_words (buf, size, used, s, open + 1 - s);
  add_url_like (buf, size, used, open + 1, close - (open + 1));
  add_words (buf, size, used, close, s + n - close);
}

/* libcurl's notes: most are harmless, but some quote a secret. */
static void
add_note (char *buf, size_t size, size_t *used, const char *s, size_t n)
{
  const char *p, *open = NULL;
  size_t name;

  if ((n >= 12 && strncmp (s, "Added cookie", 12) == 0) ||
      (n >= 15 && strncmp (s, "Replaced cookie", 15) == 0) ||
      (n >= 14 && strncmp (s, "Skipped cookie", 14) == 0)) {
    add (buf, size, used, "(a cookie note, not shown)", 26);
    return;
  }
  /* "Server auth using Basic with user 'NAME'" (with aws-sigv4 the
   * name is the access key id).
   */
  p = memmem (s, n, " with user ", 11);
  if (p != NULL) {
    add (buf, size, used, s, p - s);
    add (buf, size, used, " with user ***", 14);
    return;
  }
  /* "Uses proxy env variable http_proxy == 'http://user:pw@...'". */
  p = memmem (s, n, " == '", 5);
  if (p != NULL && memmem (s, p - s, "proxy", 5) != NULL) {
    add (buf, size, used, s, p - s);
    add (buf, size, used, " == '***'", 9);
    return;
  }
  /* HTTP/2 requests are shown as notes, one header each:
   * "h2h3 [authorization: Basic ...]", "[HTTP/2] [1] [cookie: ...]":
   * the first '[' that opens a header (a value may have '[' in it).
   */
  for (p = s; p < s + n && open == NULL; p++)
    if (*p == '[' && header_name (p + 1, n - (p + 1 - s)) > 0)
      open = p;
  if (open != NULL) {
    name = header_name (open + 1, n - (open + 1 - s));
    add_text (buf, size, used, s, open + 1 - s);
    add_header (buf, size, used, open + 1, n - (open + 1 - s), name, false);
    if (buf[*used - 1] != ']')
      add (buf, size, used, "]", 1);
    return;
  }
  /* "Unsupported proxy syntax in 'user:pw@host:99999'", "Issue another
   * request to this URL: 'http://host/p?sig=...'".
   */
  add_text (buf, size, used, s, n);
}

void
show_debug (curl_infotype type, const char *data, size_t size,
            void (*print) (const char *line, void *opaque), void *opaque)
{
  char buf[2048];
  size_t len, used, name;
  char dir;
  bool first = true;            /* HEADER_OUT's request line */
  static const char unparsed[] = "(a header line that does not parse, "
    "not shown)";

  switch (type) {
  case CURLINFO_TEXT: dir = '*'; break;
  case CURLINFO_HEADER_IN: dir = '<'; break;
  case CURLINFO_HEADER_OUT: dir = '>'; break;
  default: return;              /* bodies and TLS records */
  }

  /* HEADER_OUT is the whole request head; the others are single lines. */
  while (size > 0) {
    for (len = 0; len < size && data[len] != '\n'; len++)
      ;
    buf[0] = dir;
    buf[1] = ' ';
    buf[2] = '\0';
    used = 2;
    if (len > 0 && data[len - 1] == '\r')
      len--;
    if (len > 0) {
      name = header_name (data, len);
      if (type == CURLINFO_TEXT)
        add_note (buf, sizeof buf, &used, data, len);
      else if (name > 0)
        add_header (buf, sizeof buf, &used, data, len, name,
                    type == CURLINFO_HEADER_IN);
      else if (type == CURLINFO_HEADER_OUT && first)
        add_without_query (buf, sizeof buf, &used, data, len);
      else if (type == CURLINFO_HEADER_OUT)
        /* "Name : value" and other lines a sender should not make: what
         * is a name and what a secret cannot be told apart.
         */
        add (buf, sizeof buf, &used, unparsed, sizeof unparsed - 1);
      else
        add (buf, sizeof buf, &used, data, len);
      print (buf, opaque);
      first = false;
    }
    while (len < size && data[len] != '\n')
      len++;
    if (len < size)
      len++;
    data += len;
    size -= len;
  }
}

void
shown_message (const char *text, char *buf, size_t size)
{
  size_t used = 0;

  if (size == 0)
    return;
  buf[0] = '\0';
  add_text (buf, size, &used, text, strlen (text));
}

/* The same by hand, for a URL that libcurl does not parse: all up to
 * the last '@' (the user name and password) and the query go.  Such a
 * URL may be one whose password holds an unencoded '/', '?' or '#'
 * ("http://u:pw/SEC@host", a port that is no number), so the authority
 * cannot be told from the rest: an '@' in the path or the query then
 * hides too much, never a password.
 */
static char *
strip_url (const char *url)
{
  const char *sep = strstr (url, "://");
  const char *rest = sep ? sep + 3 : url;
  const char *at = strrchr (rest, '@');
  char *r;

  if (at != NULL)
    rest = at + 1;
  if (asprintf (&r, "%.*s%.*s%s", (int) (sep ? sep + 3 - url : 0), url,
                (int) strcspn (rest, "?#"), rest,
                rest[strcspn (rest, "?#")] == '?' ? "?..." : "") == -1)
    return NULL;
  return r;
}

int
debug_shown (CURL *easy, curl_infotype type, char *data, size_t size,
             void *printer)
{
  const struct debug_printer *p = printer;

  show_debug (type, data, size, p->print, p->opaque);
  return 0;
}

char *
shown_url (const char *url)
{
  CURLU *u = curl_url ();
  char *query = NULL, *shown = NULL, *r = NULL;
  bool has_query;

  if (u == NULL)
    return NULL;
  /* A URL libcurl parses is shown as libcurl reads it: its user name
   * ends at an '@' inside the authority, and an '@' in the path or the
   * query ("?email=me@example.com") is left where it is.  libcurl goes
   * to the host it parses, so a password with an unencoded '/' and a
   * numeric start ("u:12/x@h", host u, port 12) was no password.
   */
  if (curl_url_set (u, CURLUPART_URL, url,
                    CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK) {
    curl_url_cleanup (u);
    return strip_url (url);
  }
  has_query = curl_url_get (u, CURLUPART_QUERY, &query, 0) == CURLUE_OK;
  curl_free (query);
  if (curl_url_set (u, CURLUPART_USER, NULL, 0) == CURLUE_OK &&
      curl_url_set (u, CURLUPART_PASSWORD, NULL, 0) == CURLUE_OK &&
      curl_url_set (u, CURLUPART_OPTIONS, NULL, 0) == CURLUE_OK &&
      curl_url_set (u, CURLUPART_QUERY, NULL, 0) == CURLUE_OK &&
      curl_url_set (u, CURLUPART_FRAGMENT, NULL, 0) == CURLUE_OK &&
      curl_url_get (u, CURLUPART_URL, &shown, 0) == CURLUE_OK &&
      asprintf (&r, "%s%s", shown, has_query ? "?..." : "") == -1)
    r = NULL;
  curl_free (shown);
  curl_url_cleanup (u);
  return r;
}
