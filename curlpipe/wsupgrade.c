/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The WebSocket upgrade's request, and the check of its answer (RFC 6455
 * section 4): pure functions on text, which websocket.c sends and
 * receives.  SHA-1 and base64 are OpenSSL's.
 */

#define _GNU_SOURCE            /* open_memstream, asprintf */
#include <config.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>

#include "curlpipe.h"
#include "websocket.h"

/* RFC 6455 section 1.3: hashed with the key for Sec-WebSocket-Accept. */
#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

/* base64 of n bytes into out (4 * ((n + 2) / 3) + 1 bytes). */
void
ws_base64 (char *out, const void *in, size_t n)
{
  EVP_EncodeBlock ((unsigned char *) out, in, n);
}

/* Sec-WebSocket-Accept for key: base64 of SHA-1 of key and the GUID. */
static bool
expected_accept (const char *key, char out[29])
{
  char text[64];
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int mdlen;

  snprintf (text, sizeof text, "%s%s", key, WS_GUID);
  if (!EVP_Digest (text, strlen (text), md, &mdlen, EVP_sha1 (), NULL) ||
      mdlen != 20)
    return false;
  ws_base64 (out, md, 20);
  return true;
}

/* The user's -H header of this name, or NULL. */
static const char *
user_header (const struct options *opt, const char *name)
{
  const struct curl_slist *u;
  size_t n = strlen (name);

  for (u = opt->headers; u != NULL; u = u->next)
    if (strncasecmp (u->data, name, n) == 0 &&
        (u->data[n] == ':' || u->data[n] == ';'))
      return u->data;
  return NULL;
}

/* A default header, unless the user gave one of that name (which goes
 * with the user's, or is removed by an empty "Name:").
 */
static void
put_default (FILE *fp, const struct options *opt, const char *name,
             const char *value)
{
  if (user_header (opt, name) == NULL)
    fprintf (fp, "%s: %s\r\n", name, value);
}

/* The user's -H headers, as curl sends them: "Name;" empty, "Name:"
 * with nothing after it not at all.
 */
static void
put_user_headers (FILE *fp, const struct options *opt)
{
  const struct curl_slist *u;
  const char *v;
  size_t n;

  for (u = opt->headers; u != NULL; u = u->next) {
    n = strcspn (u->data, ":;");
    if (u->data[n] == ';') {
      fprintf (fp, "%.*s:\r\n", (int) n, u->data);
      continue;
    }
    for (v = u->data + n + 1; *v == ' ' || *v == '\t'; v++)
      ;
    if (*v != '\0')
      fprintf (fp, "%s\r\n", u->data);
  }
}

/* "Basic ..." or "Bearer ..." from -u, --oauth2-bearer or the URL's
 * user:password, or NULL (also when out of memory).  Free it with
 * free after blanking it.
 */
static char *
authorization (const struct options *opt, CURLU *u)
{
  char *user = NULL, *password = NULL, *pair = NULL, *auth = NULL;
  size_t n;

  if (opt->bearer) {
    if (asprintf (&auth, "Bearer %s", opt->bearer) == -1)
      return NULL;
    return auth;
  }
  if (opt->userpwd)
    pair = strdup (opt->userpwd);
  else if (curl_url_get (u, CURLUPART_USER, &user, CURLU_URLDECODE) ==
           CURLUE_OK) {
    curl_url_get (u, CURLUPART_PASSWORD, &password, CURLU_URLDECODE);
    if (asprintf (&pair, "%s:%s", user, password ? password : "") == -1)
      pair = NULL;
  }
  if (password)
    explicit_bzero (password, strlen (password));
  curl_free (user);
  curl_free (password);
  if (pair == NULL)
    return NULL;
  n = strlen (pair);
  auth = malloc (6 + 4 * ((n + 2) / 3) + 1);
  if (auth != NULL) {
    memcpy (auth, "Basic ", 6);
    ws_base64 (auth + 6, pair, n);
  }
  explicit_bzero (pair, n);
  free (pair);
  return auth;
}

/* The request line, then curlpipe's headers unless -H replaces them,
 * then the user's.
 */
bool
ws_request (const struct options *opt, CURLU *u, const char *key,
            char **req, size_t *len)
{
  char *host = NULL, *port = NULL, *path = NULL, *query = NULL, *auth;
  FILE *fp;
  bool ok;

  fp = open_memstream (req, len);
  if (fp == NULL)
    return false;
  curl_url_get (u, CURLUPART_HOST, &host, 0);
  curl_url_get (u, CURLUPART_PORT, &port, 0);
  curl_url_get (u, CURLUPART_PATH, &path, 0);
  curl_url_get (u, CURLUPART_QUERY, &query, 0);
  fprintf (fp, "GET %s%s%s HTTP/1.1\r\n", path ? path : "/",
           query ? "?" : "", query ? query : "");
  if (user_header (opt, "Host") == NULL)
    fprintf (fp, "Host: %s%s%s\r\n", host ? host : "", port ? ":" : "",
             port ? port : "");
  put_default (fp, opt, "User-Agent",
               opt->user_agent ? opt->user_agent
               : "curlpipe/" PACKAGE_VERSION);
  put_default (fp, opt, "Upgrade", "websocket");
  put_default (fp, opt, "Connection", "Upgrade");
  put_default (fp, opt, "Sec-WebSocket-Key", key);
  put_default (fp, opt, "Sec-WebSocket-Version", "13");
  auth = authorization (opt, u);
  if (auth) {
    put_default (fp, opt, "Authorization", auth);
    explicit_bzero (auth, strlen (auth));
    free (auth);
  }
  put_user_headers (fp, opt);
  fputs ("\r\n", fp);
  ok = !ferror (fp);
  fflush (fp);
  /* The request holds the credentials: the caller blanks it once sent. */
  ok = fclose (fp) == 0 && ok;
  curl_free (host);
  curl_free (port);
  curl_free (path);
  curl_free (query);
  return ok;
}

/* A header's value in the answer's headers [p, end), or NULL; *len
 * its length, spaces trimmed.
 */
static const char *
answer_header (const char *p, const char *end, const char *name,
               size_t *len)
{
  size_t n = strlen (name);
  const char *eol, *v, *e;

  for (; p < end; p = eol + 1) {
    eol = memchr (p, '\n', end - p);
    if (eol == NULL)
      eol = end;
    if ((size_t) (eol - p) > n && strncasecmp (p, name, n) == 0 &&
        p[n] == ':') {
      for (v = p + n + 1; v < eol && (*v == ' ' || *v == '\t'); v++)
        ;
      for (e = eol; e > v && (e[-1] == '\r' || e[-1] == ' ' ||
                              e[-1] == '\t'); e--)
        ;
      *len = e - v;
      return v;
    }
  }
  return NULL;
}

/* Does the comma-separated value [v, v + len) hold token? */
static bool
has_token (const char *v, size_t len, const char *token)
{
  size_t t = strlen (token), i = 0, s, e;

  while (i < len) {
    while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
      i++;
    s = i;
    while (i < len && v[i] != ',')
      i++;
    e = i;
    while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
      e--;
    if (e - s == t && strncasecmp (v + s, token, t) == 0)
      return true;
  }
  return false;
}

/* 101, Upgrade, Connection and the Accept the key calls for; a refusal
 * is curl's 22, as curl words it.
 */
CURLcode
ws_check_answer (const char *buf, size_t hlen, const char *key, char *why,
                 size_t whylen)
{
  const char *end = buf + hlen, *v, *eol = memchr (buf, '\n', hlen);
  char want[29], line[64];
  size_t len;
  int status = 0;

  /* The status line alone, as a string: buf has no '\0' of its own. */
  if (eol != NULL)
    snprintf (line, sizeof line, "%.*s", (int) (eol - buf), buf);
  if (eol == NULL || sscanf (line, "HTTP/1.%*1[01] %3d", &status) != 1 ||
      status < 100) {
    snprintf (why, whylen,
              "the answer to the WebSocket upgrade is not HTTP/1.1");
    return CURLE_WEIRD_SERVER_REPLY;
  }
  if (status != 101) {
    snprintf (why, whylen, "Refused WebSocket upgrade: %d",
              status);
    return CURLE_HTTP_RETURNED_ERROR;
  }
  v = answer_header (eol + 1, end, "Upgrade", &len);
  if (v == NULL || !has_token (v, len, "websocket")) {
    snprintf (why, whylen, "Refused WebSocket upgrade: "
              "101 without 'Upgrade: websocket'");
    return CURLE_HTTP_RETURNED_ERROR;
  }
  v = answer_header (eol + 1, end, "Connection", &len);
  if (v == NULL || !has_token (v, len, "upgrade")) {
    snprintf (why, whylen, "Refused WebSocket upgrade: "
              "101 without 'Connection: upgrade'");
    return CURLE_HTTP_RETURNED_ERROR;
  }
  if (!expected_accept (key, want)) {
    snprintf (why, whylen, "SHA-1 failed");
    return CURLE_OUT_OF_MEMORY;
  }
  v = answer_header (eol + 1, end, "Sec-WebSocket-Accept", &len);
  if (v == NULL || len != strlen (want) || memcmp (v, want, len) != 0) {
    snprintf (why, whylen, "Refused WebSocket upgrade: "
              "%s Sec-WebSocket-Accept", v ? "a wrong" : "no");
    return CURLE_HTTP_RETURNED_ERROR;
  }
  /* No extension is offered, so none may be taken. */
  if (answer_header (eol + 1, end, "Sec-WebSocket-Extensions", &len)) {
    snprintf (why, whylen, "Refused WebSocket upgrade: "
              "the server chose an extension curlpipe did not offer");
    return CURLE_HTTP_RETURNED_ERROR;
  }
  return CURLE_OK;
}
