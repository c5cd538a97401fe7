/* nbdkit-curl-plugin tests
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Preloaded beside the ASan (or TSan) runtime into the uninstrumented
 * nbdkit; both runtimes look the same symbol up at start-up.
 *
 * A preloaded libasan is initialised last, after libp11-kit, so it
 * initialises lazily on the first malloc, which is inside p11-kit's
 * constructor while newlocale holds glibc's setlocale write lock.  Its
 * start-up looks up the optional symbol swift_demangle; the failed
 * lookup makes dlerror translate its message, and that unlocks the
 * setlocale lock it does not own.  The lock is then corrupt, and the
 * first strerror (curl's "Connection refused") leaves nbdkit deadlocked
 * at exit in p11-kit's destructor.  With the symbol present the lookup
 * succeeds and nothing is unlocked.  A NULL answer tells ASan the name
 * is not a Swift name, so its C++ demangler is used as before.
 */

#include <stddef.h>

char *swift_demangle (const char *mangled, size_t len, char *out,
                      size_t *outlen, unsigned flags);

char *
swift_demangle (const char *mangled, size_t len, char *out,
                size_t *outlen, unsigned flags)
{
  return NULL;
}
