/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Every parameter: each value is parsed and checked as it arrives, and
 * combinations are checked in config_complete, so that a bad command
 * line fails before nbdkit serves anything; config_apply sets the
 * libcurl options that follow from them on every handle.  A parameter
 * that only sets such an option touches this file and the man page
 * only.  One that changes what a request carries to whom (credentials,
 * cookies and headers go to url='s own origin only) or how an answer is
 * judged touches the engine too.
 */

#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <nbdkit-plugin.h>

#include "curldefs.h"
#include "secrets.h"

struct curl_config cfg = {
  .connections = DEFAULT_CONNECTIONS,
  .timeout = DEFAULT_TIMEOUT,
  .retries = DEFAULT_RETRIES,
  .retry_delay_ms = DEFAULT_RETRY_DELAY_MS,
  .pin_object = true,
  .readahead = true,
  .readahead_size = DEFAULT_READAHEAD_SIZE,
  .sslverify = true,
  .followlocation = true,
  .redirect_cache = true,
  .protocols = "http,https,file",
  .http_version = CURL_HTTP_VERSION_1_1,
  .ssl_version = CURL_SSLVERSION_DEFAULT,
  .tcp_nodelay = true,
  .ipresolve = CURL_IPRESOLVE_WHATEVER,
};

/* The highest connections= accepted.  Each connection is a socket and
 * a receive buffer; past this a typo is more likely than a need.
 */
#define MAX_CONNECTIONS 256

/* The words nbdkit_parse_bool takes; its own error does not name the
 * parameter, so the parsing is done here.
 */
static int
parse_bool (const char *key, const char *value, bool *out)
{
  static const char *const yes[] = { "1", "true", "t", "yes", "y", "on" };
  static const char *const no[] = { "0", "false", "f", "no", "n", "off" };
  size_t i;

  for (i = 0; i < sizeof yes / sizeof yes[0]; i++) {
    if (strcasecmp (value, yes[i]) == 0) {
      *out = true;
      return 0;
    }
    if (strcasecmp (value, no[i]) == 0) {
      *out = false;
      return 0;
    }
  }
  nbdkit_error ("%s: invalid value '%s': expected true or false", key, value);
  return -1;
}

/* A decimal number from min to max.  nbdkit 1.32's nbdkit_parse_unsigned
 * does not name the value it rejects, so this parses by itself.
 */
static int
parse_range (const char *key, const char *value,
             unsigned min, unsigned max, unsigned *out)
{
  unsigned long r;
  char *end;

  errno = 0;
  r = strtoul (value, &end, 10);
  if (value[0] < '0' || value[0] > '9' || *end != '\0' || errno != 0 ||
      r < min || r > max) {
    nbdkit_error ("%s: invalid value '%s': expected a number from %u to %u",
                  key, value, min, max);
    return -1;
  }
  *out = r;
  return 0;
}

/* Seconds with up to three decimals, from 0 to 3600, as milliseconds. */
static int
parse_delay (const char *key, const char *value, unsigned *ms)
{
  char *end;
  double d;

  errno = 0;
  d = strtod (value, &end);
  if (value[0] < '0' || value[0] > '9' || *end != '\0' || errno != 0 ||
      !(d >= 0 && d <= 3600)) {
    nbdkit_error ("%s: invalid value '%s': expected seconds from 0 to 3600",
                  key, value);
    return -1;
  }
  *ms = (unsigned) (d * 1000 + 0.5);
  return 0;
}

/* One of a fixed set of words, mapped to a libcurl constant. */
struct word {
  const char *name;
  long value;
};

static int
parse_word (const char *key, const char *value, const struct word *words,
            size_t n, long *out)
{
  size_t i;
  char list[256] = "";

  for (i = 0; i < n; i++) {
    if (strcmp (value, words[i].name) == 0) {
      *out = words[i].value;
      return 0;
    }
    snprintf (list + strlen (list), sizeof list - strlen (list), "%s%s",
              i > 0 ? ", " : "", words[i].name);
  }
  nbdkit_error ("%s: invalid value '%s': expected one of %s", key, value,
                list);
  return -1;
}

/* Whether this libcurl has a feature; the message names what lacks it. */
static int
need_feature (const char *key, const char *value, int feature,
              const char *what)
{
  curl_version_info_data *v = curl_version_info (CURLVERSION_NOW);

  if (v->features & feature)
    return 0;
  nbdkit_error ("%s=%s: this libcurl (%s) was built without %s", key, value,
                v->version, what);
  return -1;
}

static int
parse_http_version (const char *key, const char *value)
{
  static const struct word words[] = {
    { "none", CURL_HTTP_VERSION_NONE },
    { "1.0", CURL_HTTP_VERSION_1_0 },
    { "1.1", CURL_HTTP_VERSION_1_1 },
    { "2.0", CURL_HTTP_VERSION_2_0 },
    { "2TLS", CURL_HTTP_VERSION_2TLS },
    { "2-prior-knowledge", CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE },
    { "3", CURL_HTTP_VERSION_3 },
    { "3only", CURL_HTTP_VERSION_3ONLY },
  };

  if (parse_word (key, value, words, sizeof words / sizeof words[0],
                  &cfg.http_version) == -1)
    return -1;
  if (value[0] == '2')
    return need_feature (key, value, CURL_VERSION_HTTP2, "HTTP/2");
  if (value[0] == '3')
    return need_feature (key, value, CURL_VERSION_HTTP3, "HTTP/3");
  return 0;
}

static int
parse_ssl_version (const char *key, const char *value)
{
  static const struct word words[] = {
    { "default", CURL_SSLVERSION_DEFAULT },
    { "tlsv1", CURL_SSLVERSION_TLSv1 },
    { "tlsv1.0", CURL_SSLVERSION_TLSv1_0 },
    { "tlsv1.1", CURL_SSLVERSION_TLSv1_1 },
    { "tlsv1.2", CURL_SSLVERSION_TLSv1_2 },
    { "tlsv1.3", CURL_SSLVERSION_TLSv1_3 },
  };

  if (strcmp (value, "sslv2") == 0 || strcmp (value, "sslv3") == 0) {
    nbdkit_error ("%s=%s: SSL 2 and 3 are broken and libcurl no longer "
                  "speaks them", key, value);
    return -1;
  }
  return parse_word (key, value, words, sizeof words / sizeof words[0],
                     &cfg.ssl_version);
}

static int
parse_ipresolve (const char *key, const char *value)
{
  static const struct word words[] = {
    { "any", CURL_IPRESOLVE_WHATEVER },
    { "v4", CURL_IPRESOLVE_V4 },
    { "v6", CURL_IPRESOLVE_V6 },
  };

  return parse_word (key, value, words, sizeof words / sizeof words[0],
                     &cfg.ipresolve);
}

/* HOST:PORT:ADDRESS[,ADDRESS...] (CURLOPT_RESOLVE); a leading '-'
 * removes an entry and '+' makes it provisional, as in curl.
 */
static int
add_resolve (const char *key, const char *value)
{
  struct curl_slist *list;
  const char *p = value + (value[0] == '+' || value[0] == '-');
  const char *c1 = strchr (p, ':');
  const char *c2 = c1 ? strchr (c1 + 1, ':') : NULL;

  if (c1 == NULL || c1 == p || c2 == NULL || c2 == c1 + 1 ||
      (value[0] != '-' && c2[1] == '\0')) {
    nbdkit_error ("%s: invalid value '%s': expected HOST:PORT:ADDRESS",
                  key, value);
    return -1;
  }
  list = curl_slist_append (cfg.resolve, value);
  if (list == NULL) {
    nbdkit_error ("%s: curl_slist_append: out of memory", key);
    return -1;
  }
  cfg.resolve = list;
  return 0;
}

/* A secret read the way password= is (VALUE, -, +FILE, -FD), which must
 * fit on one line of a request.
 */
static int
read_secret (const char *key, const char *value, char **out)
{
  free (*out);
  *out = NULL;
  if (nbdkit_read_password (value, out) == -1)
    return -1;
  if (strpbrk (*out, "\r\n") != NULL) {
    nbdkit_error ("%s: the value must not contain CR or LF", key);
    return -1;
  }
  return 0;
}

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
    if (strlen (own[i]) == len && strncasecmp (own[i], name, len) == 0)
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
config_header_refused (const char *line, size_t len, int *name_len)
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

static int
add_header (const char *value)
{
  struct curl_slist *list;
  int name_len;
  const char *why = config_header_refused (value, strlen (value), &name_len);

  if (why != NULL) {
    nbdkit_error ("header: %.*s: %s", name_len, value, why);
    return -1;
  }
  list = curl_slist_append (cfg.headers, value);
  if (list == NULL) {
    nbdkit_error ("header: curl_slist_append: out of memory");
    return -1;
  }
  cfg.headers = list;
  return 0;
}

/* The parameters whose value is kept as given, or is a boolean. */
static const struct {
  const char *key;
  const char **string;
  bool *flag;
} plain[] = {
  { "url", &cfg.url, NULL },
  { "cainfo", &cfg.cainfo, NULL },
  { "capath", &cfg.capath, NULL },
  { "user", &cfg.user, NULL },
  { "cookiefile", &cfg.cookiefile, NULL },
  { "cookiejar", &cfg.cookiejar, NULL },
  { "proxy", &cfg.proxy, NULL },
  { "proxy-user", &cfg.proxy_user, NULL },
  { "proxy-cainfo", &cfg.proxy_cainfo, NULL },
  { "proxy-capath", &cfg.proxy_capath, NULL },
  { "ssl-cipher-list", &cfg.ssl_cipher_list, NULL },
  { "tls13-ciphers", &cfg.tls13_ciphers, NULL },
  { "unix-socket-path", &cfg.unix_socket_path, NULL },
  { "header-script", &cfg.header_script, NULL },
  { "cookie-script", &cfg.cookie_script, NULL },
  { "url-script", &cfg.url_script, NULL },
  { "aws-sigv4", &cfg.aws_sigv4, NULL },
  { "protocols", &cfg.protocols, NULL },
  { "pin-object", NULL, &cfg.pin_object },
  { "readahead", NULL, &cfg.readahead },
  { "sslverify", NULL, &cfg.sslverify },
  { "tcp-keepalive", NULL, &cfg.tcp_keepalive },
  { "tcp-nodelay", NULL, &cfg.tcp_nodelay },
  { "followlocation", NULL, &cfg.followlocation },
  { "redirect-cache", NULL, &cfg.redirect_cache },
  { "location-trusted", NULL, &cfg.location_trusted },
  { "insecure-redirect", NULL, &cfg.insecure_redirect },
};

/* timeout=0 is what scripts written for upstream's plugin pass for
 * "libcurl's default": here it is the plugin's default, since requests,
 * ignored bodies and scripts must all be bounded in time.
 */
static int
parse_timeout (const char *key, const char *value)
{
  if (parse_range (key, value, 0, 86400, &cfg.timeout) == -1)
    return -1;
  if (cfg.timeout == 0) {
    nbdkit_debug ("timeout=0: using the default, %d seconds",
                  DEFAULT_TIMEOUT);
    cfg.timeout = DEFAULT_TIMEOUT;
  }
  return 0;
}

/* readahead-size=: nbdkit's size syntax (16M), up to 1 GiB. */
static int
parse_readahead_size (const char *key, const char *value)
{
  int64_t r = nbdkit_parse_size (value);

  if (r == -1)
    return -1;
  if (r > 1024 * 1024 * 1024) {
    nbdkit_error ("%s: %s: at most 1G", key, value);
    return -1;
  }
  cfg.readahead_size = r;
  return 0;
}

/* The parameters with a parser of their own; 1 for an unknown key. */
static int
set_parsed (const char *key, const char *value)
{
  if (strcmp (key, "connections") == 0)
    return parse_range (key, value, 1, MAX_CONNECTIONS, &cfg.connections);
  if (strcmp (key, "timeout") == 0)
    return parse_timeout (key, value);
  if (strcmp (key, "retries") == 0)
    return parse_range (key, value, 0, 100, &cfg.retries);
  if (strcmp (key, "retry-delay") == 0)
    return parse_delay (key, value, &cfg.retry_delay_ms);
  if (strcmp (key, "header") == 0)
    return add_header (value);
  if (strcmp (key, "readahead-size") == 0)
    return parse_readahead_size (key, value);
  if (strcmp (key, "password") == 0)
    return read_secret (key, value, &cfg.password);
  if (strcmp (key, "cookie") == 0)
    return read_secret (key, value, &cfg.cookie);
  if (strcmp (key, "proxy-password") == 0)
    return read_secret (key, value, &cfg.proxy_password);
  if (strcmp (key, "http-version") == 0)
    return parse_http_version (key, value);
  if (strcmp (key, "ssl-version") == 0)
    return parse_ssl_version (key, value);
  if (strcmp (key, "resolve") == 0)
    return add_resolve (key, value);
  if (strcmp (key, "ipresolve") == 0)
    return parse_ipresolve (key, value);
  if (strcmp (key, "header-script-renew") == 0)
    return parse_range (key, value, 0, 86400 * 365, &cfg.header_script_renew);
  if (strcmp (key, "cookie-script-renew") == 0)
    return parse_range (key, value, 0, 86400 * 365, &cfg.cookie_script_renew);
  if (strcmp (key, "url-script-renew") == 0)
    return parse_range (key, value, 0, 86400 * 365, &cfg.url_script_renew);
  if (strcmp (key, "user-agent") == 0) {
    if (strpbrk (value, "\r\n") != NULL) {
      nbdkit_error ("user-agent: the value must not contain CR or LF");
      return -1;
    }
    cfg.user_agent = value;
    return 0;
  }
  return 1;
}

int
config_set (const char *key, const char *value)
{
  size_t i;
  int r;

  for (i = 0; i < sizeof plain / sizeof plain[0]; i++) {
    if (strcmp (key, plain[i].key) != 0)
      continue;
    if (plain[i].string) {
      *plain[i].string = value;
      return 0;
    }
    return parse_bool (key, value, plain[i].flag);
  }
  r = set_parsed (key, value);
  if (r == 1) {
    nbdkit_error ("unknown parameter '%s'", key);
    return -1;
  }
  return r;
}

/* Is NAME one of the protocols this libcurl was built with? */
static bool
libcurl_has_protocol (const char *name, size_t len)
{
  const curl_version_info_data *v = curl_version_info (CURLVERSION_NOW);
  const char *const *p;

  for (p = v->protocols; *p != NULL; p++)
    if (strlen (*p) == len && strncasecmp (*p, name, len) == 0)
      return true;
  return false;
}

/* Check protocols=: every name must be a protocol this libcurl has.
 * (Redirects may use the same list without file: route.c checks each
 * redirect itself.)
 */
static int
check_protocols (void)
{
  const char *p = cfg.protocols;
  size_t len;

  while (*p != '\0') {
    len = strcspn (p, ",");
    if (len == 0 || !libcurl_has_protocol (p, len)) {
      nbdkit_error ("protocols: invalid value '%s': '%.*s' is not a "
                    "protocol this libcurl supports",
                    cfg.protocols, (int) len, p);
      return -1;
    }
    p += len;
    if (*p == ',')
      p++;
  }
  return 0;
}

/* Is the scheme (of url= or of a redirect) one that protocols= allows? */
bool
config_allows_scheme (const char *scheme)
{
  const char *p;
  size_t len;

  for (p = cfg.protocols; *p != '\0'; p += len + (p[len] == ',')) {
    len = strcspn (p, ",");
    if (strlen (scheme) == len && strncasecmp (p, scheme, len) == 0)
      return true;
  }
  return false;
}

/* The scheme of url as libcurl parses it (to curl_free), or NULL with
 * *rc saying why.  url= and url-script's output are checked with it.
 */
char *
config_url_scheme (const char *url, CURLUcode *rc)
{
  CURLU *u = curl_url ();
  char *scheme = NULL;

  *rc = u == NULL ? CURLUE_OUT_OF_MEMORY
    : curl_url_set (u, CURLUPART_URL, url, 0);
  if (*rc == CURLUE_OK)
    *rc = curl_url_get (u, CURLUPART_SCHEME, &scheme, 0);
  curl_url_cleanup (u);
  return *rc == CURLUE_OK ? scheme : NULL;
}

/* The URL must parse and its scheme must be allowed by protocols=. */
static int
check_url (void)
{
  CURLUcode rc;
  char *scheme = config_url_scheme (cfg.url, &rc);
  bool allowed;

  if (scheme == NULL) {
    nbdkit_error ("url: not a valid URL: %s", curl_url_strerror (rc));
    return -1;
  }
  /* Messages may end up in logs: url= itself is never printed. */
  cfg.shown_url = shown_url (cfg.url);
  if (cfg.shown_url == NULL) {
    curl_free (scheme);
    nbdkit_error ("url: out of memory");
    return -1;
  }

  allowed = config_allows_scheme (scheme);
  cfg.is_file = strcasecmp (scheme, "file") == 0;
  if (!allowed)
    nbdkit_error ("url: the scheme '%s' of '%s' is not in protocols=%s",
                  scheme, cfg.shown_url, cfg.protocols);
  curl_free (scheme);
  return allowed ? 0 : -1;
}

int
config_complete (void)
{
  if (cfg.url == NULL && cfg.url_script == NULL) {
    nbdkit_error ("the url parameter is required: "
                  "nbdkit curl URL [key=value ...]");
    return -1;
  }
  if (check_protocols () == -1)
    return -1;
  /* url-script's URL is checked as each run prints it (script.c). */
  if (cfg.url == NULL) {
    cfg.shown_url = strdup ("url-script");
    if (cfg.shown_url == NULL) {
      nbdkit_error ("strdup: %m");
      return -1;
    }
  }
  else if (check_url () == -1)
    return -1;
  if (cfg.url_script_renew && cfg.url_script == NULL) {
    nbdkit_error ("url-script-renew needs url-script");
    return -1;
  }
  if (cfg.url_script && cfg.is_file) {
    nbdkit_error ("url-script: url= is a file: URL, which needs no script");
    return -1;
  }
  if (cfg.password != NULL && cfg.user == NULL)
    nbdkit_debug ("password given without user: libcurl sends an empty "
                  "user name");
  if (cfg.header_script_renew && cfg.header_script == NULL) {
    nbdkit_error ("header-script-renew needs header-script");
    return -1;
  }
  if (cfg.cookie_script_renew && cfg.cookie_script == NULL) {
    nbdkit_error ("cookie-script-renew needs cookie-script");
    return -1;
  }
  if (cfg.cookie_script && cfg.cookie) {
    nbdkit_error ("cookie and cookie-script cannot be used together");
    return -1;
  }
  if (cfg.aws_sigv4 && (cfg.user == NULL || cfg.password == NULL)) {
    nbdkit_error ("aws-sigv4 needs user= (the access key id) and "
                  "password= (the secret access key)");
    return -1;
  }
  return 0;
}

void
config_unload (void)
{
  curl_slist_free_all (cfg.headers);
  cfg.headers = NULL;
  free (cfg.password);
  cfg.password = NULL;
  free (cfg.cookie);
  cfg.cookie = NULL;
  free (cfg.proxy_password);
  cfg.proxy_password = NULL;
  curl_slist_free_all (cfg.resolve);
  cfg.resolve = NULL;
  free (cfg.shown_url);
  cfg.shown_url = NULL;
}

/* curl_easy_setopt on e, until one fails: rc says which. */
#define SET(opt, val) \
  if (rc == CURLE_OK) rc = curl_easy_setopt (e, opt, val)

/* The libcurl options that follow from the parameters, the same on every
 * handle: protocols, HTTP version, time limits, TLS, identity, cookies,
 * proxy, TCP and name resolution.
 */
CURLcode
config_apply (CURL *e)
{
  CURLcode rc = CURLE_OK;

  SET (CURLOPT_PROTOCOLS_STR, cfg.protocols);
  /* HTTP/1.1 by default (http-version= changes it), even where the
   * server offers HTTP/2 over TLS: each handle
   * owns its connection, so multiplexing gains nothing, and libcurl
   * 7.88's HTTP/2 receive path cost a third of the throughput here
   * (bench/run seq-r-h2 against seq-r-https, 1 GiB: 2.73 s vs 1.98 s).
   */
  SET (CURLOPT_HTTP_VERSION, cfg.http_version);
  SET (CURLOPT_CONNECTTIMEOUT, (long) cfg.timeout);
  /* A stall, not a slow but moving transfer, is what timeout= bounds:
   * a healthy 32 MiB request on a slow link may take longer than that.
   */
  SET (CURLOPT_LOW_SPEED_LIMIT, 1L);
  SET (CURLOPT_LOW_SPEED_TIME, (long) cfg.timeout);
  SET (CURLOPT_SSL_VERIFYPEER, cfg.sslverify ? 1L : 0L);
  SET (CURLOPT_SSL_VERIFYHOST, cfg.sslverify ? 2L : 0L);
  if (cfg.cainfo)
    SET (CURLOPT_CAINFO, cfg.cainfo);
  if (cfg.capath)
    SET (CURLOPT_CAPATH, cfg.capath);
  if (cfg.user_agent)
    SET (CURLOPT_USERAGENT, cfg.user_agent);
  if (cfg.cookiefile)
    SET (CURLOPT_COOKIEFILE, cfg.cookiefile);
  if (cfg.cookiejar)
    SET (CURLOPT_COOKIEJAR, cfg.cookiejar);
  if (cfg.proxy)
    SET (CURLOPT_PROXY, cfg.proxy);
  if (cfg.proxy_user)
    SET (CURLOPT_PROXYUSERNAME, cfg.proxy_user);
  if (cfg.proxy_password)
    SET (CURLOPT_PROXYPASSWORD, cfg.proxy_password);
  if (cfg.proxy_cainfo)
    SET (CURLOPT_PROXY_CAINFO, cfg.proxy_cainfo);
  if (cfg.proxy_capath)
    SET (CURLOPT_PROXY_CAPATH, cfg.proxy_capath);
  if (cfg.ssl_version != CURL_SSLVERSION_DEFAULT)
    SET (CURLOPT_SSLVERSION, cfg.ssl_version);
  if (cfg.ssl_cipher_list)
    SET (CURLOPT_SSL_CIPHER_LIST, cfg.ssl_cipher_list);
  if (cfg.tls13_ciphers)
    SET (CURLOPT_TLS13_CIPHERS, cfg.tls13_ciphers);
  SET (CURLOPT_TCP_KEEPALIVE, cfg.tcp_keepalive ? 1L : 0L);
  SET (CURLOPT_TCP_NODELAY, cfg.tcp_nodelay ? 1L : 0L);
  if (cfg.unix_socket_path)
    SET (CURLOPT_UNIX_SOCKET_PATH, cfg.unix_socket_path);
  if (cfg.resolve)
    SET (CURLOPT_RESOLVE, cfg.resolve);
  SET (CURLOPT_IPRESOLVE, cfg.ipresolve);
  return rc;
}
#undef SET
