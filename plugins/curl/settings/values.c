/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * How each kind of parameter value is read (params.h's KIND column):
 * every parser names the parameter and what it expected when it
 * refuses a value.  They write only the field they are given.
 */

#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <nbdkit-plugin.h>

#include "settings/settings.h"

int
values_string (const char *key, const char *value, void *field,
              unsigned lo, unsigned hi)
{
  (void) key, (void) lo, (void) hi;
  *(const char **) field = value;
  return 0;
}

int
values_text (const char *key, const char *value, void *field,
            unsigned lo, unsigned hi)
{
  if (strpbrk (value, "\r\n") != NULL) {
    nbdkit_error ("%s: the value must not contain CR or LF", key);
    return -1;
  }
  return values_string (key, value, field, lo, hi);
}

/* The words nbdkit_parse_bool takes; its own error does not name the
 * parameter, so the parsing is done here.
 */
int
values_flag (const char *key, const char *value, void *field,
            unsigned lo, unsigned hi)
{
  static const char *const yes[] = { "1", "true", "t", "yes", "y", "on" };
  static const char *const no[] = { "0", "false", "f", "no", "n", "off" };
  bool *out = field;
  size_t i;

  (void) lo, (void) hi;
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

/* A decimal number from lo to hi.  nbdkit 1.32's nbdkit_parse_unsigned
 * does not name the value it rejects, so this parses by itself.
 */
int
values_number (const char *key, const char *value, void *field,
              unsigned lo, unsigned hi)
{
  unsigned long r;
  char *end;

  errno = 0;
  r = strtoul (value, &end, 10);
  if (value[0] < '0' || value[0] > '9' || *end != '\0' || errno != 0 ||
      r < lo || r > hi) {
    nbdkit_error ("%s: invalid value '%s': expected a number from %u to %u",
                  key, value, lo, hi);
    return -1;
  }
  *(unsigned *) field = r;
  return 0;
}

/* timeout=0 is what scripts written for upstream's plugin pass for
 * "libcurl's default": here it is the plugin's default, since requests,
 * ignored bodies and scripts must all be bounded in time.
 */
int
values_timeout (const char *key, const char *value, void *field,
               unsigned lo, unsigned hi)
{
  unsigned *out = field;

  if (values_number (key, value, field, lo, hi) == -1)
    return -1;
  if (*out == 0) {
    nbdkit_debug ("%s=0: using the default, %d seconds", key,
                  DEFAULT_TIMEOUT);
    *out = DEFAULT_TIMEOUT;
  }
  return 0;
}

/* Seconds with up to three decimals, from lo to hi, as milliseconds. */
int
values_delay (const char *key, const char *value, void *field,
             unsigned lo, unsigned hi)
{
  char *end;
  double d;

  errno = 0;
  d = strtod (value, &end);
  if (value[0] < '0' || value[0] > '9' || *end != '\0' || errno != 0 ||
      !(d >= lo && d <= hi)) {
    nbdkit_error ("%s: invalid value '%s': expected seconds from %u to %u",
                  key, value, lo, hi);
    return -1;
  }
  *(unsigned *) field = (unsigned) (d * 1000 + 0.5);
  return 0;
}

/* nbdkit's size syntax (16M), up to hi MiB. */
int
values_bytes (const char *key, const char *value, void *field,
             unsigned lo, unsigned hi)
{
  int64_t r = nbdkit_parse_size (value);

  (void) lo;
  if (r == -1)
    return -1;
  if (r > (int64_t) hi * 1024 * 1024) {
    nbdkit_error ("%s: %s: at most %uM", key, value, hi);
    return -1;
  }
  *(uint64_t *) field = r;
  return 0;
}

/* A secret read the way password= is (VALUE, -, +FILE, -FD), which must
 * fit on one line of a request.
 */
int
values_secret (const char *key, const char *value, void *field,
              unsigned lo, unsigned hi)
{
  char **out = field;

  (void) lo, (void) hi;
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

int
values_http (const char *key, const char *value, void *field,
            unsigned lo, unsigned hi)
{
  static const struct word words[] = {
    { "auto", HTTP_VERSION_AUTO },
    { "none", CURL_HTTP_VERSION_NONE },
    { "1.0", CURL_HTTP_VERSION_1_0 },
    { "1.1", CURL_HTTP_VERSION_1_1 },
    { "2.0", CURL_HTTP_VERSION_2_0 },
    { "2TLS", CURL_HTTP_VERSION_2TLS },
    { "2-prior-knowledge", CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE },
    { "3", CURL_HTTP_VERSION_3 },
    { "3only", CURL_HTTP_VERSION_3ONLY },
  };

  (void) lo, (void) hi;
  if (parse_word (key, value, words, sizeof words / sizeof words[0],
                  field) == -1)
    return -1;
  if (value[0] == '2')
    return need_feature (key, value, CURL_VERSION_HTTP2, "HTTP/2");
  if (value[0] == '3')
    return need_feature (key, value, CURL_VERSION_HTTP3, "HTTP/3");
  return 0;
}

int
values_ssl (const char *key, const char *value, void *field,
           unsigned lo, unsigned hi)
{
  static const struct word words[] = {
    { "default", CURL_SSLVERSION_DEFAULT },
    { "tlsv1", CURL_SSLVERSION_TLSv1 },
    { "tlsv1.0", CURL_SSLVERSION_TLSv1_0 },
    { "tlsv1.1", CURL_SSLVERSION_TLSv1_1 },
    { "tlsv1.2", CURL_SSLVERSION_TLSv1_2 },
    { "tlsv1.3", CURL_SSLVERSION_TLSv1_3 },
  };

  (void) lo, (void) hi;
  if (strcmp (value, "sslv2") == 0 || strcmp (value, "sslv3") == 0) {
    nbdkit_error ("%s=%s: SSL 2 and 3 are broken and libcurl no longer "
                  "speaks them", key, value);
    return -1;
  }
  return parse_word (key, value, words, sizeof words / sizeof words[0],
                     field);
}

int
values_ip (const char *key, const char *value, void *field,
          unsigned lo, unsigned hi)
{
  static const struct word words[] = {
    { "any", CURL_IPRESOLVE_WHATEVER },
    { "v4", CURL_IPRESOLVE_V4 },
    { "v6", CURL_IPRESOLVE_V6 },
  };

  (void) lo, (void) hi;
  return parse_word (key, value, words, sizeof words / sizeof words[0],
                     field);
}

/* value appended to the list *field. */
static int
append_to (const char *key, const char *value, void *field)
{
  struct curl_slist **list = field, *n = curl_slist_append (*list, value);

  if (n == NULL) {
    nbdkit_error ("%s: curl_slist_append: out of memory", key);
    return -1;
  }
  *list = n;
  return 0;
}

/* HOST:PORT:ADDRESS[,ADDRESS...] (CURLOPT_RESOLVE); a leading '-'
 * removes an entry and '+' makes it provisional, as in curl.
 */
int
values_resolve (const char *key, const char *value, void *field,
               unsigned lo, unsigned hi)
{
  const char *p = value + (value[0] == '+' || value[0] == '-');
  const char *c1 = strchr (p, ':');
  const char *c2 = c1 ? strchr (c1 + 1, ':') : NULL;

  (void) lo, (void) hi;
  if (c1 == NULL || c1 == p || c2 == NULL || c2 == c1 + 1 ||
      (value[0] != '-' && c2[1] == '\0')) {
    nbdkit_error ("%s: invalid value '%s': expected HOST:PORT:ADDRESS",
                  key, value);
    return -1;
  }
  return append_to (key, value, field);
}

/* A mirror's URL: config_complete checks it (mirrors.c), once
 * protocols= is known.
 */
int
values_mirror (const char *key, const char *value, void *field,
              unsigned lo, unsigned hi)
{
  (void) lo, (void) hi;
  return append_to (key, value, field);
}

/* A request header, refused when the plugin sets it itself or it would
 * not go out as one header (headers.c).
 */
int
values_header (const char *key, const char *value, void *field,
              unsigned lo, unsigned hi)
{
  int name_len;
  const char *why = headers_refused (value, strlen (value), &name_len);

  (void) lo, (void) hi;
  if (why != NULL) {
    nbdkit_error ("%s: %.*s: %s", key, name_len, value, why);
    return -1;
  }
  return append_to (key, value, field);
}

/* checksum=ALGO:HEX (rules/digests.c reads it). */
int
values_checksum (const char *key, const char *value, void *field,
                 unsigned lo, unsigned hi)
{
  (void) key, (void) lo, (void) hi;
  return digests_parse (value, field);
}
