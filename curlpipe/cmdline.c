/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * What main.c and options.c do with the command line beyond parsing
 * it: secrets are copied and blanked in argv, as curl blanks -u's (a
 * ProxyCommand runs for hours, and /proc/PID/cmdline is readable by
 * every user); -T FILE's name goes on a URL that ends in '/', as curl
 * puts it; and -u USER without a password asks for one on the
 * terminal.  main.c prints every message.
 */

#include <config.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <termios.h>
#include <unistd.h>

#include "curlpipe.h"
#include "secrets.h"

/* Spaces over len bytes of s: the argument keeps its length, as in
 * curl, and ps shows where it was.
 */
static void
blank (char *s, size_t len)
{
  memset (s, ' ', len);
}

char *
take_secret (char *arg)
{
  char *copy = strdup (arg);

  if (copy != NULL)
    blank (arg, strlen (arg));
  return copy;
}

/* -H: a header whose value may be a secret (any but the few that carry
 * none, by the rule -v shows headers with) keeps its name in argv; so
 * does a malformed one ("X;y: token"), whose rest may be a value.
 */
char *
take_header (char *arg)
{
  char *copy = strdup (arg);
  size_t name = strcspn (arg, ":;");

  if (copy != NULL && arg[name] != '\0' &&
      !(arg[name] == ':' && safe_request_header (arg, name)))
    blank (arg + name + 1, strlen (arg + name + 1));
  return copy;
}

/* --cert FILE:PASSWORD, as curl splits it (src/tool_getparam.c): the
 * first ':' ends the file name and starts the key's password, which is
 * blanked in argv; "\:" is a ':' of the name and "\\" a backslash;
 * any other backslash stays.  A "pkcs11:" URI is taken whole.  Returns
 * the file name (new), *password a new string or NULL; NULL when out of
 * memory.
 */
char *
take_cert (char *arg, char **password)
{
  char *name = malloc (strlen (arg) + 1), *out = name, *p = arg;

  *password = NULL;
  if (name == NULL)
    return NULL;
  if (strncasecmp (arg, "pkcs11:", 7) == 0) {
    strcpy (name, arg);
    return name;
  }
  while (*p != '\0' && *p != ':') {
    if (p[0] == '\\' && (p[1] == '\\' || p[1] == ':')) {
      *out++ = p[1];
      p += 2;
    }
    else
      *out++ = *p++;
  }
  *out = '\0';
  if (*p == ':' && p[1] != '\0') {
    *password = take_secret (p + 1);
    if (*password == NULL) {
      free (name);
      return NULL;
    }
  }
  return name;
}

/* A URL's user name and password, "scheme://USER:PASSWORD@host..." or
 * without a scheme "USER:PASSWORD@host" (curl takes both, for the URL
 * and for -x): all of the authority up to the last '@', which also
 * covers a password with an unencoded '/', '?' or '#', and a token
 * given as the user name with no password.
 */
char *
take_url (char *arg)
{
  char *copy = strdup (arg);
  char *auth = arg, *at;
  size_t scheme = strspn (arg, "abcdefghijklmnopqrstuvwxyz"
                          "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.");

  if (copy == NULL)
    return NULL;
  if (scheme > 0 && strncmp (arg + scheme, "://", 3) == 0)
    auth = arg + scheme + 3;
  at = strrchr (auth, '@');
  if (at != NULL)
    blank (auth, at - auth);
  return copy;
}

/* -T FILE with a URL whose path is empty or ends in '/': curl uploads
 * to the URL with FILE's base name (URL-encoded) put at the end of the
 * path, the base name being what follows the last '/' or backslash (on
 * every system, as curl takes it).  NULL when out of memory; else a new
 * string (the URL unchanged when it names a file already).
 */
char *
url_with_file_name (const char *url, const char *file)
{
  const char *scheme = strstr (url, "://");
  const char *host = scheme ? scheme + 3 : url;
  const char *path_end = host + strcspn (host, "?#");
  const char *slash = memchr (host, '/', path_end - host);
  const char *base = strrchr (file, '/'), *bs;
  char *escaped, *r = NULL;
  bool need_slash;

  base = base ? base + 1 : file;
  bs = strrchr (base, '\\');
  if (bs != NULL)
    base = bs + 1;
  if (*base == '\0' ||
      (slash != NULL && path_end[-1] != '/'))
    return strdup (url);
  need_slash = slash == NULL;
  escaped = curl_easy_escape (NULL, base, 0);
  if (escaped == NULL)
    return NULL;
  if (asprintf (&r, "%.*s%s%s%s", (int) (path_end - url), url,
                need_slash ? "/" : "", escaped, path_end) == -1)
    r = NULL;
  curl_free (escaped);
  return r;
}

/* -u USER (no ':'): curl asks for the password on the terminal.
 * Standard input is the body here, so the question goes to /dev/tty,
 * without echo; with no terminal the password is empty.  Returns
 * "USER:PASSWORD" (new), or NULL when out of memory.
 */
char *
ask_password (const char *what, const char *user)
{
  struct termios old, quiet;
  char pw[256] = "", *r = NULL, *nl;
  bool echo_off;
  FILE *tty;
  int fd = open ("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);

  if (fd >= 0) {
    tty = fdopen (fd, "r+");
    if (tty == NULL)
      close (fd);
    else {
      echo_off = tcgetattr (fd, &old) == 0;
      quiet = old;
      quiet.c_lflag &= ~(ECHO | ECHONL);
      quiet.c_lflag |= ICANON;
      if (echo_off)
        tcsetattr (fd, TCSAFLUSH, &quiet);
      fprintf (tty, "Enter %s password for user '%s':", what, user);
      fflush (tty);
      if (fgets (pw, sizeof pw, tty) == NULL)
        pw[0] = '\0';
      nl = strchr (pw, '\n');
      if (nl != NULL)
        *nl = '\0';
      if (echo_off)
        tcsetattr (fd, TCSAFLUSH, &old);
      fputc ('\n', tty);
      fclose (tty);
    }
  }
  if (asprintf (&r, "%s:%s", user, pw) == -1)
    r = NULL;
  memset (pw, 0, sizeof pw);
  return r;
}
