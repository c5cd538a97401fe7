/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * curlpipe: stream standard input to a URL as a request body and the
 * answer to standard output as it arrives.  This file: the options,
 * usage, exit statuses and every message (transfer.c, which runs the
 * transfer, says why it failed and this file prints it).  Option
 * spellings are curl's, so that a curl command line carries over; the
 * curl options that name what curlpipe always does (-T -, -N,
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
  "write the answer's body to standard output as it arrives.\n"
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
  "Exit status: 0 success, 1 not http(s), 2 usage, 3 bad URL, 5 proxy\n"
  "not found, 6 host not found, 7 connect, 18 partial, 22 HTTP error with\n"
  "-f, 23 write error, 26 read error, 28 timeout, 35 TLS, 47 too many\n"
  "redirects, 56 recv error, 60 certificate, 61 transfer coding, 65 body\n"
  "not sent again; else libcurl's code, as curl.\n";

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

static void
out_of_memory (void)
{
  fprintf (stderr, "curlpipe: out of memory\n");
  exit (EXIT_NOMEM);
}

/* Seconds, possibly fractional, as milliseconds; 0 only if zero_ok
 * (curl's -m 0 means no limit).
 */
static long
parse_seconds (const char *opt, const char *s, bool zero_ok)
{
  char *end;
  double d;

  errno = 0;
  d = strtod (s, &end);
  /* Also refuses NaN, which fails every comparison. */
  if (errno != 0 || end == s || *end != '\0' ||
      !((d > 0 || (zero_ok && d == 0)) && d <= 86400 * 365))
    usage_error ("%s: '%s' is not a number of seconds%s", opt, s,
                 zero_ok ? "" : " (more than 0)");
  return d == 0 ? 0 : (long) (d * 1000 + 0.999);   /* at least 1 ms */
}

/* A size with an optional K, M or G (powers of 1024), as curl takes. */
static curl_off_t
parse_size (const char *opt, const char *s)
{
  char *end;
  unsigned long long n;
  int shift = 0;

  errno = 0;
  n = strtoull (s, &end, 10);
  if (*end != '\0' && end[1] == '\0') {
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    }
  }
  if (errno != 0 || end == s || *end != '\0' || s[0] < '0' || s[0] > '9' ||
      n > (0x7fffffffffffffffULL >> shift))
    usage_error ("%s '%s': not a size (a number, with K, M or G)", opt, s);
  return (curl_off_t) (n << shift);
}

/* An HTTP method or header name is a token (RFC 9110 5.6.2): no
 * spaces or controls.  The first len bytes of s.
 */
static bool
is_token_n (const char *s, size_t len)
{
  static const char extra[] = "!#$%&'*+-.^_`|~";
  size_t i;

  if (len == 0)
    return false;
  for (i = 0; i < len; i++) {
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
          (s[i] >= '0' && s[i] <= '9') ||
          (s[i] != '\0' && strchr (extra, s[i]) != NULL)))
      return false;
  }
  return true;
}

static bool
is_token (const char *s)
{
  return is_token_n (s, strlen (s));
}

static struct curl_slist *
append (struct curl_slist *list, const char *s)
{
  struct curl_slist *n = curl_slist_append (list, s);

  if (n == NULL)
    out_of_memory ();
  return n;
}

/* -H: "Name: value", or curl's "Name;" for an empty header.  A CR or LF
 * would start another header or end the request.  "Content-Length: N"
 * on its own is --upload-size N (libcurl would send it beside a chunked
 * body).
 */
static void
add_header (struct options *opt, char *arg)
{
  char *h = take_header (arg);
  size_t name;

  if (h == NULL)
    out_of_memory ();
  name = strcspn (h, ":;");

  /* The message names the header when it has a name, never more: the
   * rest may be a token ("Authorization: Bearer T\r", "X;y: T").
   */
  if (strpbrk (h, "\r\n") != NULL || name == 0 || h[name] == '\0' ||
      (h[name] == ';' && h[name + 1] != '\0')) {
    if (h[name] != '\0' && is_token_n (h, name))
      usage_error ("-H %.*s: not one 'Name: value' or 'Name;' header "
                   "(its value is not shown)", (int) name, h);
    usage_error ("-H: not one 'Name: value' or 'Name;' header (not shown)");
  }
  if (name == 14 && strncasecmp (h, "content-length", 14) == 0 &&
      h[name] == ':') {
    opt->upload_size = parse_size ("-H Content-Length", h + 15 +
                                   strspn (h + 15, " \t"));
    free (h);
    return;
  }
  opt->headers = append (opt->headers, h);
  free (h);
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
  size_t size = 256, n = 0;
  int c;

  if (fp == NULL)
    usage_error ("-w @%s: %s", name, strerror (errno));
  text = malloc (size);
  if (text == NULL)
    out_of_memory ();
  for (c = getc (fp); c != EOF; c = getc (fp)) {
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

enum {
  OPT_CACERT = 256, OPT_HTTP11, OPT_HTTP2, OPT_CONNECT_TIMEOUT,
  OPT_UNIX_SOCKET, OPT_CERT, OPT_KEY, OPT_NOPROXY, OPT_PROXY_USER,
  OPT_RESOLVE, OPT_CONNECT_TO, OPT_LIMIT_RATE, OPT_UPLOAD_SIZE,
  OPT_NO_PROGRESS_METER, OPT_EXPECT100_TIMEOUT, OPT_CAPATH,
  OPT_FAIL_WITH_BODY, OPT_MAX_REDIRS, OPT_RETRY, OPT_RETRY_DELAY,
  OPT_RETRY_MAX_TIME, OPT_RETRY_FLAG, OPT_DATA_BINARY, OPT_URL,
  OPT_COMPRESSED, OPT_TRACE, OPT_OAUTH2_BEARER,
};

static const char short_options[] = "X:H:u:A:kfo:D:w:sSvm:x:T:NhVLe:#O";

static const struct option long_options[] = {
  { "request", required_argument, NULL, 'X' },
  { "header", required_argument, NULL, 'H' },
  { "user", required_argument, NULL, 'u' },
  { "user-agent", required_argument, NULL, 'A' },
  { "insecure", no_argument, NULL, 'k' },
  { "cacert", required_argument, NULL, OPT_CACERT },
  { "cert", required_argument, NULL, OPT_CERT },
  { "key", required_argument, NULL, OPT_KEY },
  { "fail", no_argument, NULL, 'f' },
  { "output", required_argument, NULL, 'o' },
  { "dump-header", required_argument, NULL, 'D' },
  { "write-out", required_argument, NULL, 'w' },
  { "silent", no_argument, NULL, 's' },
  { "show-error", no_argument, NULL, 'S' },
  { "verbose", no_argument, NULL, 'v' },
  { "http1.1", no_argument, NULL, OPT_HTTP11 },
  { "http2", no_argument, NULL, OPT_HTTP2 },
  { "connect-timeout", required_argument, NULL, OPT_CONNECT_TIMEOUT },
  { "max-time", required_argument, NULL, 'm' },
  { "unix-socket", required_argument, NULL, OPT_UNIX_SOCKET },
  { "proxy", required_argument, NULL, 'x' },
  { "noproxy", required_argument, NULL, OPT_NOPROXY },
  { "proxy-user", required_argument, NULL, OPT_PROXY_USER },
  { "resolve", required_argument, NULL, OPT_RESOLVE },
  { "connect-to", required_argument, NULL, OPT_CONNECT_TO },
  { "limit-rate", required_argument, NULL, OPT_LIMIT_RATE },
  { "upload-size", required_argument, NULL, OPT_UPLOAD_SIZE },
  { "upload-file", required_argument, NULL, 'T' },
  { "no-buffer", no_argument, NULL, 'N' },
  { "no-progress-meter", no_argument, NULL, OPT_NO_PROGRESS_METER },
  { "expect100-timeout", required_argument, NULL, OPT_EXPECT100_TIMEOUT },
  { "capath", required_argument, NULL, OPT_CAPATH },
  { "fail-with-body", no_argument, NULL, OPT_FAIL_WITH_BODY },
  { "location", no_argument, NULL, 'L' },
  { "max-redirs", required_argument, NULL, OPT_MAX_REDIRS },
  { "retry", required_argument, NULL, OPT_RETRY },
  { "retry-delay", required_argument, NULL, OPT_RETRY_DELAY },
  { "retry-max-time", required_argument, NULL, OPT_RETRY_MAX_TIME },
  { "retry-connrefused", no_argument, NULL, OPT_RETRY_FLAG },
  { "retry-all-errors", no_argument, NULL, OPT_RETRY_FLAG },
  { "data-binary", required_argument, NULL, OPT_DATA_BINARY },
  { "url", required_argument, NULL, OPT_URL },
  { "referer", required_argument, NULL, 'e' },
  { "compressed", no_argument, NULL, OPT_COMPRESSED },
  { "trace-ascii", required_argument, NULL, OPT_TRACE },
  { "trace", required_argument, NULL, OPT_TRACE },
  { "progress-bar", no_argument, NULL, '#' },
  { "remote-name", no_argument, NULL, 'O' },
  { "oauth2-bearer", required_argument, NULL, OPT_OAUTH2_BEARER },
  { "help", no_argument, NULL, 'h' },
  { "version", no_argument, NULL, 'V' },
  { NULL, 0, NULL, 0 },
};

static void
bad_option (int argc, char *argv[])
{
  if (optopt != 0 && optopt < 256)
    fprintf (stderr, "curlpipe: option -%c: %s\n", optopt,
             strchr (short_options, optopt) ? "needs a value" : "unknown");
  else
    /* Its name only: "--prox=http://user:pw@host" is ambiguous. */
    fprintf (stderr, "curlpipe: %.*s: unknown or ambiguous option, or "
             "missing value\n", (int) strcspn (argv[optind - 1], "="),
             argv[optind - 1]);
  fprintf (stderr, "Try 'curlpipe --help'.\n");
  exit (EXIT_USAGE);
}

/* -w's format when read from a file. */
static char *write_out_allocated;

/* What can block: -w @FILE and @- (a FIFO, a terminal, a pipe whose
 * writer waits), and -T FILE or --data-binary @FILE (opening a FIFO
 * waits for its writer).  They are done once every option is parsed and
 * every secret in argv, the URL's too, is blanked: while one waits,
 * /proc/PID/cmdline is readable by every user.
 */
static const char *write_out_arg, *stdin_file;

/* One option; false for one that getopt did not know. */
/* Copies of the arguments that argv no longer shows (cmdline.c). */
static char *
secret_copy (char *arg)
{
  char *copy = take_secret (arg);

  if (copy == NULL)
    out_of_memory ();
  return copy;
}

static char *
url_copy (char *arg)
{
  char *copy = take_url (arg);

  if (copy == NULL)
    out_of_memory ();
  return copy;
}

/* A count: a whole number of at least 0 (-1 for --max-redirs). */
static long
parse_count (const char *opt, const char *s, long min)
{
  char *end;
  long n;

  errno = 0;
  n = strtol (s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || n < min || n > 1000000)
    usage_error ("%s '%s': not a count", opt, s);
  return n;
}

/* -e: as curl reads it, ";auto" anywhere turns on the automatic
 * Referer of -L's redirects and ends the URL sent as the first one
 * ("URL;auto": Referer URL; ";auto": none).
 */
static void
set_referer (struct options *opt, const char *arg)
{
  const char *at = strstr (arg, ";auto");
  size_t len = at ? (size_t) (at - arg) : strlen (arg);

  free (opt->referer);
  opt->referer = NULL;
  opt->autoreferer = at != NULL;
  if (len > 0) {
    opt->referer = strndup (arg, len);
    if (opt->referer == NULL)
      out_of_memory ();
  }
}

static bool
set_option (struct options *opt, int c, char *arg)
{
  switch (c) {
  case 'X':
    if (!is_token (arg))
      usage_error ("-X %s: not an HTTP method name", arg);
    opt->method = arg;
    break;
  case 'H': add_header (opt, arg); break;
  case 'u':
    free (opt->userpwd);
    opt->userpwd = secret_copy (arg);
    break;
  case 'A':
    if (strpbrk (arg, "\r\n") != NULL)
      usage_error ("-A: a User-Agent must be one line");
    opt->user_agent = arg;
    break;
  case 'k': opt->insecure = true; break;
  case OPT_CACERT: opt->cacert = arg; break;
  case OPT_CERT:
    free (opt->cert);
    free (opt->key_passwd);
    opt->cert = take_cert (arg, &opt->key_passwd);
    if (opt->cert == NULL)
      out_of_memory ();
    break;
  case OPT_KEY: opt->key = arg; break;
  case 'f': opt->fail = true; break;
  case OPT_FAIL_WITH_BODY: opt->fail = opt->fail_with_body = true; break;
  case 'o': opt->output = arg; break;
  case 'D': opt->dump_header = arg; break;
  case 'w': write_out_arg = arg; break;
  case 's': opt->silent = true; break;
  case OPT_NO_PROGRESS_METER: opt->silent = true; break;
  case 'v': opt->verbose = true; break;
  case OPT_HTTP11: opt->http_version = CURL_HTTP_VERSION_1_1; break;
  case OPT_HTTP2: opt->http_version = CURL_HTTP_VERSION_2_0; break;
  case OPT_CONNECT_TIMEOUT:
    opt->connect_timeout_ms = parse_seconds ("--connect-timeout", arg, true);
    break;
  case 'm': opt->max_time_ms = parse_seconds ("-m", arg, true); break;
  case OPT_UNIX_SOCKET: opt->unix_socket = arg; break;
  case 'x':
    free (opt->proxy);
    opt->proxy = url_copy (arg);
    break;
  case OPT_NOPROXY: opt->noproxy = arg; break;
  case OPT_PROXY_USER:
    free (opt->proxy_userpwd);
    opt->proxy_userpwd = secret_copy (arg);
    break;
  case OPT_OAUTH2_BEARER:
    free (opt->bearer);
    opt->bearer = secret_copy (arg);
    break;
  case OPT_URL:
    free (opt->url);
    opt->url = url_copy (arg);
    break;
  case OPT_CAPATH: opt->capath = arg; break;
  case 'e': set_referer (opt, arg); break;
  case 'L': opt->follow = true; break;
  case OPT_MAX_REDIRS:
    opt->max_redirs = parse_count ("--max-redirs", arg, -1);
    break;
  case OPT_TRACE: opt->trace = arg; break;
  case 'O': opt->remote_name = true; break;
  /* A body from a stream cannot be sent again: no retry is made (see
   * the man page), but the values are checked as curl checks them.
   */
  case OPT_RETRY: parse_count ("--retry", arg, 0); break;
  case OPT_RETRY_DELAY: parse_seconds ("--retry-delay", arg, true); break;
  case OPT_RETRY_MAX_TIME:
    parse_seconds ("--retry-max-time", arg, true);
    break;
  case OPT_RETRY_FLAG: break;
  /* curl's --data-binary @-: the body from standard input, POST, and
   * curl's Content-Type for -d unless -H gives one: libcurl's own for
   * CURLOPT_POST, which it leaves off the GET after a 301, 302 or 303
   * (a -H header would go with the GET too).  @FILE uploads FILE
   * (without -T's file name on the URL).
   */
  case OPT_DATA_BINARY:
    if (arg[0] != '@')
      usage_error ("--data-binary: only @- (standard input) or @FILE; "
                   "the body is standard input (the value is not shown)");
    stdin_file = arg + 1;
    opt->data_binary = true;
    break;
  case OPT_RESOLVE: opt->resolve = append (opt->resolve, arg); break;
  case OPT_CONNECT_TO: opt->connect_to = append (opt->connect_to, arg); break;
  case OPT_LIMIT_RATE:
    opt->limit_rate = parse_size ("--limit-rate", arg);
    break;
  case OPT_UPLOAD_SIZE:
    opt->upload_size = parse_size ("--upload-size", arg);
    break;
  case 'T':
    stdin_file = arg;
    if (strcmp (arg, "-") != 0 && strcmp (arg, ".") != 0)
      opt->upload_name = arg;
    break;
  /* What curlpipe does anyway: never buffer the answer, never wait for
   * 100 Continue, always show errors, a progress line of its own;
   * --compressed: the answer is asked for without compression, so it
   * comes out as curl --compressed would write it.
   */
  case 'N': case 'S': case '#': case OPT_COMPRESSED: break;
  case OPT_EXPECT100_TIMEOUT:
    opt->expect100_ms = parse_seconds ("--expect100-timeout", arg, true);
    break;
  case 'h':
    fputs (usage_text, stdout);
    exit (EXIT_OK);
  case 'V':
    printf ("curlpipe %s (%s)\n", PACKAGE_VERSION, curl_version ());
    exit (EXIT_OK);
  default:
    return false;
  }
  return true;
}

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
  if (write_out_arg)
    opt->write_out = write_out_format (write_out_arg, &write_out_allocated);
  if (stdin_file)
    upload_file (stdin_file);

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
  CURLcode rc;
  int c, status;
  char msg[512] = "";

  opterr = 0;
  for (;;) {
    c = getopt_long (argc, argv, short_options, long_options, NULL);
    if (c == -1)
      break;
    if (!set_option (&opt, c, optarg))
      bad_option (argc, argv);
  }
  if (optind < argc && opt.url != NULL)
    usage_error ("only one URL is allowed (--url gave one)");
  if (optind < argc - 1 || (optind == argc && opt.url == NULL))
    usage_error ("%s", optind == argc ? "a URL is required"
                 : "only one URL is allowed");
  if (opt.url == NULL)
    opt.url = url_copy (argv[optind]);
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
