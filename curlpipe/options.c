/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The option table: each of curl's spellings that curlpipe takes, one
 * row each, and what it sets in struct options, its value checked as
 * curl checks it.  A value refused comes back to main.c as an
 * option_verdict, with what the message needs, and main.c words the
 * message; what can block (-w @FILE, -T FILE) is left to main.c too,
 * until every secret in argv is blanked.
 */

#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "curlpipe.h"

enum {
  OPT_CACERT = 256, OPT_HTTP11, OPT_HTTP2, OPT_CONNECT_TIMEOUT,
  OPT_UNIX_SOCKET, OPT_CERT, OPT_KEY, OPT_NOPROXY, OPT_PROXY_USER,
  OPT_RESOLVE, OPT_CONNECT_TO, OPT_LIMIT_RATE, OPT_UPLOAD_SIZE,
  OPT_NO_PROGRESS_METER, OPT_EXPECT100_TIMEOUT, OPT_CAPATH,
  OPT_FAIL_WITH_BODY, OPT_MAX_REDIRS, OPT_RETRY, OPT_RETRY_DELAY,
  OPT_RETRY_MAX_TIME, OPT_RETRY_FLAG, OPT_DATA_BINARY, OPT_URL,
  OPT_COMPRESSED, OPT_TRACE, OPT_OAUTH2_BEARER,
  OPT_AWS_SIGV4,
};

static const char short_options[] = "X:H:u:A:kfo:D:w:sSvm:x:T:NhVLe:#O";

/* What a row does with its option's value. */
enum kind {
  FLAG,                         /* bool field: true */
  TEXT,                         /* const char * field: the argument */
  SECRET,                       /* char * field: a copy, blanked in argv */
  URL,                          /* char * field: a copy, its password
                                 * blanked in argv */
  SECONDS,                      /* long field: milliseconds, 0: none */
  SIZE,                         /* curl_off_t field: bytes, K, M or G */
  COUNT,                        /* long field: at least the row's min */
  LIST,                         /* struct curl_slist * field: appended */
  IGNORED,                      /* what curlpipe does anyway */
  OWN,                          /* a case of set_own's */
};

#define FIELD(name) offsetof (struct options, name)
#define NONE ((size_t) -1)      /* checked as curl checks it, not kept */

struct row {
  const char *name;             /* --name */
  int has_arg;                  /* getopt_long's */
  int c;                        /* the short option, or OPT_* */
  enum kind kind;
  size_t field;                 /* FIELD (...), or NONE */
  const char *label;            /* the option as messages name it */
  long min;                     /* COUNT's least value */
};

/* In the order getopt_long has always had them.  --retry and its kin:
 * a body from a stream cannot be sent again, so no retry is made (see
 * the man page), but the values are checked as curl checks them.  -N,
 * -S, -#, --compressed: what curlpipe does anyway: never buffer the
 * answer, always show errors, a progress line of its own, and an
 * answer asked for without compression, which comes out as curl
 * --compressed would write it.
 */
static const struct row rows[] = {
  { "request", required_argument, 'X', OWN, NONE, NULL, 0 },
  { "header", required_argument, 'H', OWN, NONE, NULL, 0 },
  { "user", required_argument, 'u', SECRET, FIELD (userpwd), NULL, 0 },
  { "user-agent", required_argument, 'A', OWN, NONE, NULL, 0 },
  { "insecure", no_argument, 'k', FLAG, FIELD (insecure), NULL, 0 },
  { "cacert", required_argument, OPT_CACERT, TEXT, FIELD (cacert), NULL, 0 },
  { "cert", required_argument, OPT_CERT, OWN, NONE, NULL, 0 },
  { "key", required_argument, OPT_KEY, TEXT, FIELD (key), NULL, 0 },
  { "fail", no_argument, 'f', FLAG, FIELD (fail), NULL, 0 },
  { "output", required_argument, 'o', TEXT, FIELD (output), NULL, 0 },
  { "dump-header", required_argument, 'D', TEXT, FIELD (dump_header),
    NULL, 0 },
  { "write-out", required_argument, 'w', TEXT, FIELD (write_out_arg),
    NULL, 0 },
  { "silent", no_argument, 's', FLAG, FIELD (silent), NULL, 0 },
  { "show-error", no_argument, 'S', IGNORED, NONE, NULL, 0 },
  { "verbose", no_argument, 'v', FLAG, FIELD (verbose), NULL, 0 },
  { "http1.1", no_argument, OPT_HTTP11, OWN, NONE, NULL, 0 },
  { "http2", no_argument, OPT_HTTP2, OWN, NONE, NULL, 0 },
  { "connect-timeout", required_argument, OPT_CONNECT_TIMEOUT, SECONDS,
    FIELD (connect_timeout_ms), "--connect-timeout", 0 },
  { "max-time", required_argument, 'm', SECONDS, FIELD (max_time_ms),
    "-m", 0 },
  { "unix-socket", required_argument, OPT_UNIX_SOCKET, TEXT,
    FIELD (unix_socket), NULL, 0 },
  { "proxy", required_argument, 'x', URL, FIELD (proxy), NULL, 0 },
  { "noproxy", required_argument, OPT_NOPROXY, TEXT, FIELD (noproxy),
    NULL, 0 },
  { "proxy-user", required_argument, OPT_PROXY_USER, SECRET,
    FIELD (proxy_userpwd), NULL, 0 },
  { "resolve", required_argument, OPT_RESOLVE, LIST, FIELD (resolve),
    NULL, 0 },
  { "connect-to", required_argument, OPT_CONNECT_TO, LIST,
    FIELD (connect_to), NULL, 0 },
  { "limit-rate", required_argument, OPT_LIMIT_RATE, SIZE,
    FIELD (limit_rate), "--limit-rate", 0 },
  { "upload-size", required_argument, OPT_UPLOAD_SIZE, SIZE,
    FIELD (upload_size), "--upload-size", 0 },
  { "upload-file", required_argument, 'T', OWN, NONE, NULL, 0 },
  { "no-buffer", no_argument, 'N', IGNORED, NONE, NULL, 0 },
  { "no-progress-meter", no_argument, OPT_NO_PROGRESS_METER, FLAG,
    FIELD (silent), NULL, 0 },
  { "expect100-timeout", required_argument, OPT_EXPECT100_TIMEOUT, SECONDS,
    FIELD (expect100_ms), "--expect100-timeout", 0 },
  { "capath", required_argument, OPT_CAPATH, TEXT, FIELD (capath), NULL, 0 },
  { "fail-with-body", no_argument, OPT_FAIL_WITH_BODY, OWN, NONE, NULL, 0 },
  { "location", no_argument, 'L', FLAG, FIELD (follow), NULL, 0 },
  { "max-redirs", required_argument, OPT_MAX_REDIRS, COUNT,
    FIELD (max_redirs), "--max-redirs", -1 },
  { "retry", required_argument, OPT_RETRY, COUNT, NONE, "--retry", 0 },
  { "retry-delay", required_argument, OPT_RETRY_DELAY, SECONDS, NONE,
    "--retry-delay", 0 },
  { "retry-max-time", required_argument, OPT_RETRY_MAX_TIME, SECONDS, NONE,
    "--retry-max-time", 0 },
  { "retry-connrefused", no_argument, OPT_RETRY_FLAG, IGNORED, NONE, NULL,
    0 },
  { "retry-all-errors", no_argument, OPT_RETRY_FLAG, IGNORED, NONE, NULL,
    0 },
  { "data-binary", required_argument, OPT_DATA_BINARY, OWN, NONE, NULL, 0 },
  { "url", required_argument, OPT_URL, URL, FIELD (url), NULL, 0 },
  { "referer", required_argument, 'e', OWN, NONE, NULL, 0 },
  { "compressed", no_argument, OPT_COMPRESSED, IGNORED, NONE, NULL, 0 },
  { "trace-ascii", required_argument, OPT_TRACE, TEXT, FIELD (trace),
    NULL, 0 },
  { "trace", required_argument, OPT_TRACE, TEXT, FIELD (trace), NULL, 0 },
  { "progress-bar", no_argument, '#', IGNORED, NONE, NULL, 0 },
  { "remote-name", no_argument, 'O', FLAG, FIELD (remote_name), NULL, 0 },
  { "oauth2-bearer", required_argument, OPT_OAUTH2_BEARER, SECRET,
    FIELD (bearer), NULL, 0 },
  { "aws-sigv4", required_argument, OPT_AWS_SIGV4, TEXT, FIELD (aws_sigv4),
    NULL, 0 },
  { "help", no_argument, 'h', OWN, NONE, NULL, 0 },
  { "version", no_argument, 'V', OWN, NONE, NULL, 0 },
};

#define NROWS (sizeof rows / sizeof rows[0])

/* Seconds, possibly fractional, as milliseconds (curl's -m 0 means no
 * limit); false when s is not that.
 */
static bool
parse_seconds (const char *s, long *ms)
{
  char *end;
  double d;

  errno = 0;
  d = strtod (s, &end);
  /* Also refuses NaN, which fails every comparison. */
  if (errno != 0 || end == s || *end != '\0' ||
      !(d >= 0 && d <= 86400 * 365))
    return false;
  *ms = d == 0 ? 0 : (long) (d * 1000 + 0.999);   /* at least 1 ms */
  return true;
}

/* A size with an optional K, M or G (powers of 1024), as curl takes. */
static bool
parse_size (const char *s, curl_off_t *size)
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
    return false;
  *size = (curl_off_t) (n << shift);
  return true;
}

/* A count: a whole number of at least min. */
static bool
parse_count (const char *s, long min, long *count)
{
  char *end;
  long n;

  errno = 0;
  n = strtol (s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || n < min || n > 1000000)
    return false;
  *count = n;
  return true;
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

/* -H: "Name: value", or curl's "Name;" for an empty header.  A CR or LF
 * would start another header or end the request.  "Content-Length: N"
 * on its own is --upload-size N (libcurl would send it beside a chunked
 * body).  The message names the header when it has a name, never more:
 * the rest may be a token ("Authorization: Bearer T\r", "X;y: T"), and
 * argv keeps only the name (cmdline.c's take_header).
 */
static enum option_verdict
add_header (struct options *opt, char *arg, struct option_fault *fault)
{
  char *h = take_header (arg);
  struct curl_slist *list;
  size_t name;

  if (h == NULL)
    return OPTION_NO_MEMORY;
  name = strcspn (h, ":;");
  if (strpbrk (h, "\r\n") != NULL || name == 0 || h[name] == '\0' ||
      (h[name] == ';' && h[name + 1] != '\0')) {
    fault->value = arg;
    fault->name_len = h[name] != '\0' && is_token_n (h, name) ? name : 0;
    free (h);
    return OPTION_BAD_HEADER;
  }
  if (name == 14 && strncasecmp (h, "content-length", 14) == 0 &&
      h[name] == ':') {
    /* h stays for the message, until main.c exits. */
    fault->option = "-H Content-Length";
    fault->value = h + 15 + strspn (h + 15, " \t");
    if (!parse_size (fault->value, &opt->upload_size))
      return OPTION_BAD_SIZE;
    free (h);
    return OPTION_TAKEN;
  }
  list = curl_slist_append (opt->headers, h);
  free (h);
  if (list == NULL)
    return OPTION_NO_MEMORY;
  opt->headers = list;
  return OPTION_TAKEN;
}

/* -e: as curl reads it, ";auto" anywhere turns on the automatic
 * Referer of -L's redirects and ends the URL sent as the first one
 * ("URL;auto": Referer URL; ";auto": none).
 */
static enum option_verdict
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
      return OPTION_NO_MEMORY;
  }
  return OPTION_TAKEN;
}

/* --cert FILE[:PASSWORD] (cmdline.c's take_cert). */
static enum option_verdict
set_cert (struct options *opt, char *arg)
{
  free (opt->cert);
  free (opt->key_passwd);
  opt->cert = take_cert (arg, &opt->key_passwd);
  return opt->cert == NULL ? OPTION_NO_MEMORY : OPTION_TAKEN;
}

/* -T FILE and --data-binary @FILE make FILE standard input (main.c
 * opens it); -T's "-" and "." are standard input itself.  curl's
 * --data-binary @-: the body from standard input, POST, and curl's
 * Content-Type for -d unless -H gives one: libcurl's own for
 * CURLOPT_POST, which it leaves off the GET after a 301, 302 or 303 (a
 * -H header would go with the GET too).  @FILE uploads FILE (without
 * -T's file name on the URL).
 */
static enum option_verdict
set_body_file (struct options *opt, int c, char *arg)
{
  if (c == OPT_DATA_BINARY) {
    if (arg[0] != '@')
      return OPTION_BAD_DATA;
    opt->stdin_file = arg + 1;
    opt->data_binary = true;
    return OPTION_TAKEN;
  }
  opt->stdin_file = arg;
  if (strcmp (arg, "-") != 0 && strcmp (arg, ".") != 0)
    opt->upload_name = arg;
  return OPTION_TAKEN;
}

/* The options that are not one field set from one value. */
static enum option_verdict
set_own (struct options *opt, int c, char *arg, struct option_fault *fault)
{
  fault->value = arg;
  switch (c) {
  case 'X':
    if (!is_token_n (arg, strlen (arg)))
      return OPTION_BAD_METHOD;
    opt->method = arg;
    return OPTION_TAKEN;
  case 'H':
    return add_header (opt, arg, fault);
  case 'A':
    if (strpbrk (arg, "\r\n") != NULL)
      return OPTION_BAD_USER_AGENT;
    opt->user_agent = arg;
    return OPTION_TAKEN;
  case OPT_CERT:
    return set_cert (opt, arg);
  case OPT_FAIL_WITH_BODY:
    opt->fail = opt->fail_with_body = true;
    return OPTION_TAKEN;
  case OPT_HTTP11:
    opt->http_version = CURL_HTTP_VERSION_1_1;
    return OPTION_TAKEN;
  case OPT_HTTP2:
    opt->http_version = CURL_HTTP_VERSION_2_0;
    return OPTION_TAKEN;
  case 'e':
    return set_referer (opt, arg);
  case 'T':
  case OPT_DATA_BINARY:
    return set_body_file (opt, c, arg);
  case 'h':
    return OPTION_HELP;
  case 'V':
    return OPTION_VERSION;
  }
  return OPTION_UNKNOWN;
}

/* A copy of arg kept in the row's field, the one before freed. */
static enum option_verdict
set_copy (char **field, char *copy)
{
  if (copy == NULL)
    return OPTION_NO_MEMORY;
  free (*field);
  *field = copy;
  return OPTION_TAKEN;
}

/* One option by its row. */
static enum option_verdict
set_by_row (struct options *opt, const struct row *r, char *arg,
            struct option_fault *fault)
{
  void *field = r->field == NONE ? NULL : (char *) opt + r->field;
  struct curl_slist *list;
  long n;

  fault->option = r->label;
  fault->value = arg;
  switch (r->kind) {
  case FLAG:
    *(bool *) field = true;
    return OPTION_TAKEN;
  case TEXT:
    *(const char **) field = arg;
    return OPTION_TAKEN;
  case SECRET:
    return set_copy (field, take_secret (arg));
  case URL:
    return set_copy (field, take_url (arg));
  case SECONDS:
  case COUNT:
    if (!(r->kind == SECONDS ? parse_seconds (arg, &n)
          : parse_count (arg, r->min, &n)))
      return r->kind == SECONDS ? OPTION_BAD_SECONDS : OPTION_BAD_COUNT;
    if (field != NULL)
      *(long *) field = n;
    return OPTION_TAKEN;
  case SIZE:
    return parse_size (arg, field) ? OPTION_TAKEN : OPTION_BAD_SIZE;
  case LIST:
    list = curl_slist_append (*(struct curl_slist **) field, arg);
    if (list == NULL)
      return OPTION_NO_MEMORY;
    *(struct curl_slist **) field = list;
    return OPTION_TAKEN;
  case IGNORED:
    return OPTION_TAKEN;
  case OWN:
    return set_own (opt, r->c, arg, fault);
  }
  return OPTION_UNKNOWN;
}

/* getopt_long's table, from the rows. */
static struct option long_options[NROWS + 1];

static void
make_long_options (void)
{
  size_t i;

  for (i = 0; i < NROWS; i++)
    long_options[i] = (struct option) { rows[i].name, rows[i].has_arg,
                                        NULL, rows[i].c };
}

/* getopt_long could not take it: which kind of mistake, for main.c. */
static enum option_verdict
not_taken (char *argv[], struct option_fault *fault)
{
  if (optopt != 0 && optopt < 256) {
    fault->letter = optopt;
    return strchr (short_options, optopt) ? OPTION_NEEDS_VALUE
      : OPTION_UNKNOWN;
  }
  /* Its name only: "--prox=http://user:pw@host" is ambiguous. */
  fault->value = argv[optind - 1];
  fault->name_len = strcspn (argv[optind - 1], "=");
  return OPTION_UNKNOWN_LONG;
}

/* The next option of argv, set in opt; OPTION_END after the last. */
enum option_verdict
options_next (int argc, char *argv[], struct options *opt,
              struct option_fault *fault)
{
  int c;
  size_t i;

  if (long_options[0].name == NULL)
    make_long_options ();
  opterr = 0;
  *fault = (struct option_fault) { NULL };
  c = getopt_long (argc, argv, short_options, long_options, NULL);
  if (c == -1)
    return OPTION_END;
  for (i = 0; i < NROWS; i++)
    if (rows[i].c == c)
      return set_by_row (opt, &rows[i], optarg, fault);
  return not_taken (argv, fault);
}
