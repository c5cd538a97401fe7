/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Every parameter.  params.h's table gives each its field, default, kind
 * and help line.  config_set parses each value as it arrives, with its
 * kind's parser (values.c).  config_complete checks the combinations, so
 * that a bad command line fails before nbdkit serves anything.
 * config_apply sets the libcurl options that follow from them on every
 * handle.  A parameter that only sets such an option is a row in params.h,
 * a line in config_apply and an item in the man page.  Some change what a
 * request carries to whom: credentials, cookies and headers go to url='s
 * own origin only (the ORIGIN column).  Those, and parameters that change
 * how an answer is judged, touch request/ or the rules too.
 */

#include <config.h>

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <nbdkit-plugin.h>

#include "settings/settings.h"
#include "secrets.h"

struct curl_config cfg = {
#define DEFAULT_OF(key, kind, type, field, dflt, lo, hi, origin, help) \
  .field = dflt,
  CURL_PARAMS (DEFAULT_OF)
#undef DEFAULT_OF
};

/* The field's type for each kind: a row whose TYPE is another is a
 * compile error (below).
 */
typedef const char *kind_string, *kind_text;
typedef bool kind_flag;
typedef unsigned kind_number, kind_timeout, kind_delay;
typedef uint64_t kind_bytes;
typedef char *kind_secret;
typedef struct curl_slist *kind_header, *kind_resolve, *kind_mirror;
typedef long kind_http, kind_ssl, kind_ip;
typedef struct checksum_want kind_checksum;

#define TYPE_CHECK(key, kind, type, field, dflt, lo, hi, origin, help) \
  _Static_assert (__builtin_types_compatible_p (type, kind_##kind),     \
                  key ": the field's type is not the kind's");
CURL_PARAMS (TYPE_CHECK)
#undef TYPE_CHECK

/* The table: each row's parser and field. */
static const struct param {
  const char *key;
  int (*parse) (const char *key, const char *value, void *field,
                unsigned lo, unsigned hi);
  size_t offset;                /* of the field in struct curl_config */
  unsigned lo, hi;
  bool origin;                  /* goes only to url='s origin */
} params[] = {
#define ROW_OF(key, kind, type, field, dflt, lo, hi, origin, help)      \
  { key, values_##kind, offsetof (struct curl_config, field), lo, hi, origin },
  CURL_PARAMS (ROW_OF)
#undef ROW_OF
};

int
config_set (const char *key, const char *value)
{
  size_t i;

  for (i = 0; i < sizeof params / sizeof params[0]; i++)
    if (strcmp (key, params[i].key) == 0)
      return params[i].parse (key, value, (char *) &cfg + params[i].offset,
                              params[i].lo, params[i].hi);
  nbdkit_error ("unknown parameter '%s'", key);
  return -1;
}

/* --dump-plugin: the parameters whose values go only to url='s origin. */
void
config_dump (void)
{
  size_t i;
  const char *sep = "";

  printf ("curl_origin_only=");
  for (i = 0; i < sizeof params / sizeof params[0]; i++)
    if (params[i].origin) {
      printf ("%s%s", sep, params[i].key);
      sep = ",";
    }
  printf ("\n");
}

/* Is NAME one of the protocols this libcurl was built with? */
static bool
libcurl_has_protocol (const char *name, size_t len)
{
  const curl_version_info_data *v = curl_version_info (CURLVERSION_NOW);
  const char *const *p;

  for (p = v->protocols; *p != NULL; p++)
    if (is_word (*p, name, len))
      return true;
  return false;
}

/* Check protocols=: every name must be a protocol this libcurl has.
 * (Redirects may use the same list without file: redirect.c checks each
 * hop, redirect_next.)
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
    if (is_word (scheme, p, len))
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
  size_t i;

  /* What the parsers allocated: secrets and lists, by their kind. */
  for (i = 0; i < sizeof params / sizeof params[0]; i++) {
    void *field = (char *) &cfg + params[i].offset;

    if (params[i].parse == values_secret) {
      free (*(char **) field);
      *(char **) field = NULL;
    }
    else if (params[i].parse == values_header ||
             params[i].parse == values_resolve ||
             params[i].parse == values_mirror) {
      curl_slist_free_all (*(struct curl_slist **) field);
      *(struct curl_slist **) field = NULL;
    }
  }
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
  /* Each request sets its own (exchange.c, from mux.c): with
   * http-version=auto, HTTP/1.1 unless the probe chose HTTP/2.  Each
   * handle owning its connection, HTTP/2 without mux.c's multi handle
   * gains nothing, and libcurl 7.88's HTTP/2 receive path cost a third
   * of the throughput here (bench/run seq-r-h2 against seq-r-https,
   * 1 GiB: 2.73 s vs 1.98 s).
   */
  SET (CURLOPT_HTTP_VERSION, cfg.http_version == HTTP_VERSION_AUTO
       ? CURL_HTTP_VERSION_1_1 : cfg.http_version);
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
