/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Scripts: header-script, cookie-script and url-script.  script.c
 * keeps each script's output and decides when to run it again.
 * spawn.c runs a script once, with a time limit.  Requests ask here
 * for headers, a cookie or a URL.  This folder uses the object's facts,
 * configuration, the rules and the base.
 */

#ifndef SCRIPTS_H
#define SCRIPTS_H

#include "object/object.h"

/* script.c */
extern int script_init (void);
extern int script_headers (struct curl_slist **list);
extern int script_cookie (char **cookie);
extern int script_url (char **url, unsigned *serial);
extern int script_url_serial (unsigned *serial);
extern bool script_url_refused (const char *url);
extern void script_unload (void);

/* spawn.c: one run of a script. */
extern int spawn_run (const char *what, const char *script,
                      unsigned iteration, char **out);

#endif /* SCRIPTS_H */
