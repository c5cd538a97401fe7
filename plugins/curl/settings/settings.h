/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Settings: every parameter, parsed and checked before anything
 * runs.  params.h is the table, values.c parses each kind of value,
 * config.c checks them together and sets libcurl's options from them.
 * After .get_ready the struct is read-only, so any thread reads it
 * without a lock.  This folder uses the rules and the base.
 */

#ifndef SETTINGS_H
#define SETTINGS_H

#include "rules/rules.h"
#include "settings/params.h"

/* Its fields are params.h's rows. */
struct curl_config {
#define FIELD_OF(key, kind, type, field, dflt, lo, hi, origin, help) \
  type field;
  CURL_PARAMS (FIELD_OF)
#undef FIELD_OF
  char *shown_url;              /* url= for messages: no secrets */
  bool is_file;                 /* the URL's scheme is file:// */
};
extern struct curl_config cfg;

extern int config_set (const char *key, const char *value);
extern int config_complete (void);
extern bool config_allows_scheme (const char *scheme);
extern char *config_url_scheme (const char *url, CURLUcode *rc);
extern void config_unload (void);
extern CURLcode config_apply (CURL *e);
extern void config_dump (void);
/* The help text: every row's. */
#define HELP_OF(key, kind, type, field, dflt, lo, hi, origin, help) help
#define CONFIG_HELP CURL_PARAMS (HELP_OF)

#endif /* SETTINGS_H */
