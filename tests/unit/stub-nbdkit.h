/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * stub-nbdkit.c: the few nbdkit functions the plugin's lower folders
 * call, for unit tests that link those folders without nbdkit.  Every
 * message is kept, so that a test can look at the last error and show
 * the whole log when a case fails.
 */

#ifndef STUB_NBDKIT_H
#define STUB_NBDKIT_H

#include <stddef.h>

/* The last nbdkit_error's message ("" if none), and how many came. */
extern const char *stub_last_error (void);
extern unsigned stub_errors (void);

/* Forget the messages kept so far. */
extern void stub_clear (void);

/* Print every message kept, debug and error, to stderr. */
extern void stub_print_log (void);

#endif /* STUB_NBDKIT_H */
