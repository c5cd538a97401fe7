/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * curlpipe: stream standard input to a URL as a request body and the
 * answer to standard output as it arrives.  This file: the options
 * once parsed (what they mean together, what may block), usage, exit
 * statuses and every message (options.c, which keeps the option table,
 * says why it refused a value, and transfer.c, which runs the transfer,
 * why it failed; this file words and prints them).  Option spellings
 * are curl's, so that a curl command line carries over; the curl
 * options that name what curlpipe always does (-T -, -N,
 * --expect100-timeout ...) are accepted and change nothing.
 */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "curlpipe.h"

static const char usage_text[] =
  "Usage: curlpipe [OPTIONS] URL\n"
  "Send standard input to URL as the request body (PUT unless -X) and\n"
  "write the answer's body to standard output as it arrives; with a\n"
  "ws:// or wss:// URL, the same over a WebSocket (binary frames).\n"
  "\n"
  "  -X, --request METHOD     Request method (default PUT)\n"
  "  -H, --header 'NAME: V'   Extra request header (repeatable;\n"
  "                           'NAME;' sends it empty)\n"
  "  -u, --user USER[:PASSWORD]  Credentials (HTTP basic authentication;\n"
  "                           no password: asked on the terminal)\n"
  "      --oauth2-bearer TOKEN  Bearer token for the server\n"
  "  -A, --user-agent STRING  User-Agent (default curlpipe/VERSION)\n"
  "  -k, --insecure           Do not verify the server's certificate\n"
  "      --cacert FILE        CA certificates to verify the server with\n"
  "      --capath DIR         Directory of CA certificates (hashed)\n"
  "      --cert FILE[:PASSWORD]  Client certificate (PEM), key password\n"
  "      --key FILE           Its private key\n"
  "  -f, --fail               Exit 22 on HTTP >= 400; its body to stderr\n"
  "      --fail-with-body     Exit 22 on HTTP >= 400; its body as usual\n"
  "  -L, --location           Follow redirects (a stream is not sent twice)\n"
  "      --max-redirs N       At most N redirects with -L (default 50)\n"
  "  -e, --referer URL        Referer header (';auto' with -L)\n"
  "      --url URL            The URL\n"
  "      --data-binary @-|@FILE  POST standard input (or FILE)\n"
  "  -O, --remote-name        Write the answer to the URL's file name\n"
  "  -o, --output FILE        Write the answer to FILE ('-': stdout)\n"
  "  -D, --dump-header FILE   Write the answer's headers to FILE\n"
  "  -w, --write-out FORMAT   Print FORMAT (curl's %{variables}, @FILE)\n"
  "                           to stdout at the end\n"
  "  -s, --silent             No progress line\n"
  "  -S, --show-error         Accepted: errors are always shown\n"
  "  -v, --verbose            Show the exchange's headers (no secrets)\n"
  "      --trace-ascii FILE   The same to FILE ('-': stderr)\n"
  "      --trace FILE         As --trace-ascii\n"
  "      --http1.1            Use HTTP/1.1\n"
  "      --http2              Use HTTP/2 where the server offers it\n"
  "      --connect-timeout S  Seconds allowed for connecting\n"
  "  -m, --max-time S         Seconds allowed for the transfer (0: none)\n"
  "      --unix-socket PATH   Connect through this Unix socket\n"
  "  -x, --proxy URL          Use this proxy\n"
  "      --noproxy LIST       Hosts to reach without the proxy\n"
  "      --proxy-user U:P     Proxy credentials\n"
  "      --resolve H:P:ADDR   Resolve host H, port P to ADDR\n"
  "      --connect-to H:P:H2:P2  Connect to H2:P2 for H:P\n"
  "      --limit-rate RATE    Bytes per second each way (K, M, G)\n"
  "      --upload-size N      Send Content-Length N, not chunked\n"
  "  -T, --upload-file -|.|FILE  Upload standard input (or FILE)\n"
  "  -N, --no-buffer, --no-progress-meter, --expect100-timeout S,\n"
  "  -#, --progress-bar, --compressed\n"
  "                           Accepted for curl's command lines\n"
  "      --retry N, --retry-delay S, --retry-max-time S,\n"
  "      --retry-connrefused, --retry-all-errors\n"
  "                           Accepted; nothing is retried (a stream\n"
  "                           cannot be sent twice)\n"
  "  -h, --help               This help\n"
  "  -V, --version            Version of curlpipe and libcurl\n"
  "\n"
  "Exit status: 0 success, 1 not http(s) or ws(s), 2 usage, 3 bad URL,\n"
  "5 proxy not found, 6 host not found, 7 connect, 18 partial, 22 HTTP\n"
  "error with -f (or a WebSocket upgrade refused), 23 write error, 26 read\n"
  "error, 28 timeout, 35 TLS, 47 too many redirects, 52 WebSocket closed\n"
  "without a close frame, 55 send error (a body cut short), 56 recv error\n"
  "(also a WebSocket protocol error), 60 certificate, 61 transfer coding,\n"
  "65 body not sent again; else libcurl's code, as curl.\n";

static void usage_error (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2), noreturn));

static void
usage_error (const char *fmt, ...)
{
  va_list ap;

  fprintf (stderr, "curlpipe: ");
  va_start (ap, fmt);
  vfprintf (stderr, fmt, ap);
  va_end (ap);
  fprintf (stderr, "\nTry 'curlpipe --help'.\n");
  exit (EXIT_USAGE);
}

static void out_of_memory (void) __attribute__ ((noreturn));

static void
out_of_memory (void)
{
  fprintf (stderr, "curlpipe: out of memory\n");
  exit (EXIT_NOMEM);
}

/* -T: curl's "-" and "." are standard input, which curlpipe always
 * streams; a file name makes that file standard input.
 */
static void
upload_file (const char *name)
{
  int fd;

  if (strcmp (name, "-") == 0 || strcmp (name, ".") == 0)
    return;
  fd = open (name, O_RDONLY | O_CLOEXEC);
  if (fd == -1) {
    fprintf (stderr, "curlpipe: -T %s: %s\n", name, strerror (errno));
    exit (EXIT_READ);
  }
  if (dup2 (fd, STDIN_FILENO) == -1) {
    fprintf (stderr, "curlpipe: -T %s: dup2: %s\n", name, strerror (errno));
    exit (EXIT_READ);
  }
  close (fd);
}

/* The most -w @FILE reads, line ends included: a format is a line or
 * a few, and a file past this is not one (-w @/dev/zero, an endless
 * -w @-), which would otherwise be read until memory runs out.  curl
 * 7.88 refuses past 256 MiB (exit 2 too), and reads /dev/zero for ever
 * (its NULs add nothing to its count).
 */
#define WRITE_OUT_FILE_MAX (1024 * 1024)

/* -w @FILE, -w @-: the format is the file's (or standard input's)
 * lines, joined without their line ends, as curl reads it.  @- reads
 * standard input to its end, which leaves the upload empty (as in
 * curl).
 */
static char *
read_format (const char *name)
{
  FILE *fp = strcmp (name, "-") == 0 ? stdin : fopen (name, "re");
  char *text;
  size_t size = 256, n = 0, read = 0;
  int c;

  if (fp == NULL)
    usage_error ("-w @%s: %s", name, strerror (errno));
  text = malloc (size);
  if (text == NULL)
    out_of_memory ();
  for (c = getc (fp); c != EOF; c = getc (fp)) {
    if (++read > WRITE_OUT_FILE_MAX)
      usage_error ("-w @%s: longer than %d bytes", name,
                   WRITE_OUT_FILE_MAX);
    if (c == '\r' || c == '\n')
      continue;
    if (n + 1 == size) {
      size *= 2;
      text = realloc (text, size);
      if (text == NULL)
        out_of_memory ();
    }
    text[n++] = c;
  }
  text[n] = '\0';
  if (ferror (fp))
    usage_error ("-w @%s: %s", name, strerror (errno));
  if (fp != stdin)
    fclose (fp);
  return text;
}

/* -w: the format, or @FILE's; a %{name} that is not one of curl's
 * variables is written as nothing, with this warning (as curl does).
 */
static const char *
write_out_format (const char *arg, char **allocated)
{
  const char *f = arg, *p, *end;

  free (*allocated);
  *allocated = NULL;
  if (arg[0] == '@')
    f = *allocated = read_format (arg + 1);
  for (p = f; *p; p++) {
    /* "%%", "\\%", "%\\": the second character is not read again. */
    if (p[1] != '\0' && ((p[0] == '%' && p[1] != '{') || p[0] == '\\')) {
      p++;
      continue;
    }
    end = strncmp (p, "%{", 2) == 0 ? strchr (p + 2, '}') : NULL;
    if (end == NULL)
      continue;
    if (!write_out_known (p + 2, end - (p + 2)))
      fprintf (stderr, "curlpipe: warning: -w: unknown variable "
               "'%%{%.*s}', written as nothing\n", (int) (end - (p + 2)),
               p + 2);
    p = end;
  }
  return f;
}

/* An option options.c did not take, or -h or -V: the message or the
 * text, and the exit.
 */
static void
option_refused (enum option_verdict v, const struct option_fault *f)
{
  switch (v) {
  case OPTION_HELP:
    fputs (usage_text, stdout);
    exit (EXIT_OK);
  case OPTION_VERSION:
    printf ("curlpipe %s (%s)\n", PACKAGE_VERSION, curl_version ());
    exit (EXIT_OK);
  case OPTION_NO_MEMORY:
    out_of_memory ();
  case OPTION_NEEDS_VALUE:
    usage_error ("option -%c: needs a value", f->letter);
  case OPTION_UNKNOWN:
    usage_error ("option -%c: unknown", f->letter);
  case OPTION_UNKNOWN_LONG:
    /* Its name only: "--prox=http://user:pw@host" is ambiguous. */
    usage_error ("%.*s: unknown or ambiguous option, or missing value",
                 f->name_len, f->value);
  case OPTION_BAD_SECONDS:
    usage_error ("%s: '%s' is not a number of seconds", f->option, f->value);
  case OPTION_BAD_SIZE:
    usage_error ("%s '%s': not a size (a number, with K, M or G)",
                 f->option, f->value);
  case OPTION_BAD_COUNT:
    usage_error ("%s '%s': not a count", f->option, f->value);
  case OPTION_BAD_METHOD:
    usage_error ("-X %s: not an HTTP method name", f->value);
  case OPTION_BAD_USER_AGENT:
    usage_error ("-A: a User-Agent must be one line");
  case OPTION_BAD_HEADER:
    if (f->name_len > 0)
      usage_error ("-H %.*s: not one 'Name: value' or 'Name;' header "
                   "(its value is not shown)", f->name_len, f->value);
    usage_error ("-H: not one 'Name: value' or 'Name;' header (not shown)");
  case OPTION_BAD_DATA:
    usage_error ("--data-binary: only @- (standard input) or @FILE; "
                 "the body is standard input (the value is not shown)");
  case OPTION_TAKEN:
  case OPTION_END:
    break;
  }
}

/* -w's format when read from a file. */
static char *write_out_allocated;

/* -O's file: the last segment of the URL's path, as curl names it. */
static char *remote_name;

static const char *
remote_file_name (const char *url)
{
  const char *host = strstr (url, "://") ? strstr (url, "://") + 3 : url;
  size_t end = strcspn (host, "?#"), start = end;

  while (start > 0 && host[start - 1] != '/')
    start--;
  if (start == 0 || start == end) {
    fprintf (stderr, "curlpipe: -O: the URL has no file name to write "
             "the answer to\n");
    exit (EXIT_WRITE);
  }
  remote_name = strndup (host + start, end - start);
  if (remote_name == NULL)
    out_of_memory ();
  return remote_name;
}

/* What options mean together, once all are known and argv shows no
 * secret: what may block comes here.
 */
static void
finish_options (struct options *opt)
{
  char *u;

  /* -w @- reads standard input as it was given, as curl does, not
   * -T's or --data-binary's file.
   */
  if (opt->write_out_arg)
    opt->write_out = write_out_format (opt->write_out_arg,
                                       &write_out_allocated);
  if (opt->stdin_file)
    upload_file (opt->stdin_file);

  /* -u USER: the password from the terminal (cmdline.c). */
  if (opt->userpwd && strchr (opt->userpwd, ':') == NULL) {
    u = ask_password ("host", opt->userpwd);
    if (u == NULL)
      out_of_memory ();
    free (opt->userpwd);
    opt->userpwd = u;
  }
  if (opt->proxy_userpwd && strchr (opt->proxy_userpwd, ':') == NULL) {
    u = ask_password ("proxy", opt->proxy_userpwd);
    if (u == NULL)
      out_of_memory ();
    free (opt->proxy_userpwd);
    opt->proxy_userpwd = u;
  }
  if (opt->upload_name) {
    u = url_with_file_name (opt->url, opt->upload_name);
    if (u == NULL)
      out_of_memory ();
    free (opt->url);
    opt->url = u;
  }
  if (opt->remote_name && opt->output == NULL)
    opt->output = remote_file_name (opt->url);
}

/* A closed standard descriptor would be reused by the next open, and
 * the answer (or messages) would go into whatever got number 1 or 2:
 * libcurl's own socketpair, or the connection to the server.
 */
static void
check_standard_fds (const struct options *opt)
{
  if (fcntl (STDERR_FILENO, F_GETFD) == -1 &&
      open ("/dev/null", O_WRONLY) != STDERR_FILENO)
    exit (EXIT_USAGE);
  if (fcntl (STDIN_FILENO, F_GETFD) == -1) {
    fprintf (stderr, "curlpipe: standard input is not open\n");
    exit (EXIT_USAGE);
  }
  if ((opt->output == NULL || strcmp (opt->output, "-") == 0) &&
      fcntl (STDOUT_FILENO, F_GETFD) == -1) {
    fprintf (stderr, "curlpipe: standard output is not open "
             "(use -o FILE)\n");
    exit (EXIT_USAGE);
  }
}

int
main (int argc, char *argv[])
{
  struct options opt = {
    .http_version = CURL_HTTP_VERSION_NONE, .upload_size = -1,
    .max_redirs = 50,             /* curl's default */
  };
  struct option_fault fault;
  enum option_verdict v;
  CURLcode rc;
  int status;
  char msg[512] = "";

  for (;;) {
    v = options_next (argc, argv, &opt, &fault);
    if (v == OPTION_END)
      break;
    option_refused (v, &fault);
  }
  if (optind < argc && opt.url != NULL)
    usage_error ("only one URL is allowed (--url gave one)");
  if (optind < argc - 1 || (optind == argc && opt.url == NULL))
    usage_error ("%s", optind == argc ? "a URL is required"
                 : "only one URL is allowed");
  if (opt.url == NULL) {
    opt.url = take_url (argv[optind]);
    if (opt.url == NULL)
      out_of_memory ();
  }
  finish_options (&opt);
  check_standard_fds (&opt);

  rc = curl_global_init (CURL_GLOBAL_DEFAULT);
  if (rc != CURLE_OK) {
    fprintf (stderr, "curlpipe: curl_global_init: %s\n",
             curl_easy_strerror (rc));
    exit (rc);
  }
  status = transfer_run (&opt, msg, sizeof msg);
  if (msg[0] != '\0')
    fprintf (stderr, "curlpipe: %s\n", msg);
  curl_slist_free_all (opt.headers);
  curl_slist_free_all (opt.resolve);
  curl_slist_free_all (opt.connect_to);
  free (write_out_allocated);
  free (opt.url);
  free (opt.userpwd);
  free (opt.proxy_userpwd);
  free (opt.proxy);
  free (opt.bearer);
  free (opt.cert);
  free (opt.key_passwd);
  free (opt.referer);
  free (remote_name);
  curl_global_cleanup ();
  return status;
}
