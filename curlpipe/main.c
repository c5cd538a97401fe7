/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * curlpipe: stream standard input to a URL as a request body and the
 * answer to standard output as it arrives.  This file: the options,
 * usage, exit statuses and every message (loop.c, which runs the
 * transfer, says why it failed and this file prints it).  Option
 * spellings are curl's, so that a curl command line carries over.
 */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "curlpipe.h"

static const char usage_text[] =
  "Usage: curlpipe [OPTIONS] URL\n"
  "Send standard input to URL as the request body (PUT unless -X) and\n"
  "write the answer's body to standard output as it arrives.\n"
  "\n"
  "  -X, --request METHOD     Request method (default PUT)\n"
  "  -H, --header 'NAME: V'   Extra request header (repeatable)\n"
  "  -u, --user USER:PASSWORD Credentials (HTTP basic authentication)\n"
  "  -k, --insecure           Do not verify the server's certificate\n"
  "      --cacert FILE        CA certificates to verify the server with\n"
  "  -f, --fail               Exit 22 on HTTP >= 400; its body to stderr\n"
  "  -o, --output FILE        Write the answer to FILE\n"
  "  -s, --silent             No progress line\n"
  "  -v, --verbose            Show the request and answer headers\n"
  "      --http1.1            Use HTTP/1.1\n"
  "      --http2              Use HTTP/2 where the server offers it\n"
  "      --connect-timeout S  Seconds allowed for connecting\n"
  "  -m, --max-time S         Seconds allowed for the whole transfer\n"
  "      --unix-socket PATH   Connect through this Unix socket\n"
  "  -h, --help               This help\n"
  "  -V, --version            Version of curlpipe and libcurl\n"
  "\n"
  "Exit status: 0 success, 1 transfer failed, 2 usage error,\n"
  "22 HTTP error with -f.\n";

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

/* Seconds, possibly fractional, as milliseconds. */
static long
parse_seconds (const char *s)
{
  char *end;
  double d;

  errno = 0;
  d = strtod (s, &end);
  /* Also refuses NaN, which fails every comparison. */
  if (errno != 0 || end == s || *end != '\0' || !(d > 0 && d <= 86400 * 365))
    usage_error ("'%s' is not a number of seconds (more than 0)", s);
  return (long) (d * 1000 + 0.999);   /* at least 1 ms */
}

/* An HTTP method is a token (RFC 9110 5.6.2): no spaces or controls. */
static bool
is_token (const char *s)
{
  static const char extra[] = "!#$%&'*+-.^_`|~";

  if (*s == '\0')
    return false;
  for (; *s; s++) {
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
          (*s >= '0' && *s <= '9') || strchr (extra, *s) != NULL))
      return false;
  }
  return true;
}

enum {
  OPT_CACERT = 256, OPT_HTTP11, OPT_HTTP2, OPT_CONNECT_TIMEOUT,
  OPT_UNIX_SOCKET,
};

static const struct option long_options[] = {
  { "request", required_argument, NULL, 'X' },
  { "header", required_argument, NULL, 'H' },
  { "user", required_argument, NULL, 'u' },
  { "insecure", no_argument, NULL, 'k' },
  { "cacert", required_argument, NULL, OPT_CACERT },
  { "fail", no_argument, NULL, 'f' },
  { "output", required_argument, NULL, 'o' },
  { "silent", no_argument, NULL, 's' },
  { "verbose", no_argument, NULL, 'v' },
  { "http1.1", no_argument, NULL, OPT_HTTP11 },
  { "http2", no_argument, NULL, OPT_HTTP2 },
  { "connect-timeout", required_argument, NULL, OPT_CONNECT_TIMEOUT },
  { "max-time", required_argument, NULL, 'm' },
  { "unix-socket", required_argument, NULL, OPT_UNIX_SOCKET },
  { "help", no_argument, NULL, 'h' },
  { "version", no_argument, NULL, 'V' },
  { NULL, 0, NULL, 0 },
};

int
main (int argc, char *argv[])
{
  struct options opt = { .http_version = CURL_HTTP_VERSION_NONE };
  struct curl_slist *h;
  CURLcode rc;
  int c, status;
  char msg[512] = "";

  opterr = 0;
  for (;;) {
    c = getopt_long (argc, argv, "X:H:u:kfo:svm:hV", long_options, NULL);
    if (c == -1)
      break;
    switch (c) {
    case 'X':
      if (!is_token (optarg))
        usage_error ("-X %s: not an HTTP method name", optarg);
      opt.method = optarg;
      break;
    case 'H':
      /* A CR or LF would start another header or end the request. */
      if (strpbrk (optarg, "\r\n") != NULL || strchr (optarg, ':') == NULL)
        usage_error ("-H: '%s' is not one 'Name: value' header", optarg);
      h = curl_slist_append (opt.headers, optarg);
      if (h == NULL) {
        fprintf (stderr, "curlpipe: out of memory\n");
        exit (EXIT_TRANSFER);
      }
      opt.headers = h;
      break;
    case 'u':
      if (strchr (optarg, ':') == NULL)
        usage_error ("-u needs USER:PASSWORD");
      opt.userpwd = optarg;
      break;
    case 'k': opt.insecure = true; break;
    case OPT_CACERT: opt.cacert = optarg; break;
    case 'f': opt.fail = true; break;
    case 'o': opt.output = optarg; break;
    case 's': opt.silent = true; break;
    case 'v': opt.verbose = true; break;
    case OPT_HTTP11: opt.http_version = CURL_HTTP_VERSION_1_1; break;
    case OPT_HTTP2: opt.http_version = CURL_HTTP_VERSION_2_0; break;
    case OPT_CONNECT_TIMEOUT:
      opt.connect_timeout_ms = parse_seconds (optarg);
      break;
    case 'm':
      opt.max_time_ms = parse_seconds (optarg);
      break;
    case OPT_UNIX_SOCKET: opt.unix_socket = optarg; break;
    case 'h':
      fputs (usage_text, stdout);
      exit (EXIT_OK);
    case 'V':
      printf ("curlpipe %s (%s)\n", PACKAGE_VERSION, curl_version ());
      exit (EXIT_OK);
    default:
      if (optopt != 0 && optopt < 256)
        fprintf (stderr, "curlpipe: option -%c: %s\n", optopt,
                 strchr ("XHuom", optopt) ? "needs a value" : "unknown");
      else
        fprintf (stderr, "curlpipe: %s: unknown option or missing value\n",
                 argv[optind - 1]);
      fprintf (stderr, "Try 'curlpipe --help'.\n");
      exit (EXIT_USAGE);
    }
  }
  if (optind != argc - 1)
    usage_error ("%s", optind == argc ? "a URL is required"
                 : "only one URL is allowed");
  opt.url = argv[optind];

  /* A closed standard descriptor would be reused by the next open, and
   * the answer (or messages) would go into whatever got number 1 or 2:
   * libcurl's own socketpair, or the connection to the server.
   */
  if (fcntl (STDERR_FILENO, F_GETFD) == -1 &&
      open ("/dev/null", O_WRONLY) != STDERR_FILENO)
    exit (EXIT_USAGE);
  if (fcntl (STDIN_FILENO, F_GETFD) == -1) {
    fprintf (stderr, "curlpipe: standard input is not open\n");
    exit (EXIT_USAGE);
  }
  if (opt.output == NULL && fcntl (STDOUT_FILENO, F_GETFD) == -1) {
    fprintf (stderr, "curlpipe: standard output is not open "
             "(use -o FILE)\n");
    exit (EXIT_USAGE);
  }

  rc = curl_global_init (CURL_GLOBAL_DEFAULT);
  if (rc != CURLE_OK) {
    fprintf (stderr, "curlpipe: curl_global_init: %s\n",
             curl_easy_strerror (rc));
    exit (EXIT_TRANSFER);
  }
  status = run_transfer (&opt, msg, sizeof msg);
  if (msg[0] != '\0')
    fprintf (stderr, "curlpipe: %s\n", msg);
  curl_slist_free_all (opt.headers);
  curl_global_cleanup ();
  return status;
}
