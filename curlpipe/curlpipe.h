/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * What main.c shares with options.c, cmdline.c and the files that run
 * the transfer (pipe.h lists them): the options options.c parses, the
 * copies of arguments cmdline.c makes, and transfer_run (transfer.c).
 */

#ifndef CURLPIPE_H
#define CURLPIPE_H

#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>

/* Exit statuses, documented in curlpipe(1).  A failing transfer exits
 * with libcurl's CURLcode, which is curl's exit status for the same
 * failure (3 bad URL, 6 resolve, 7 connect, 18 partial, 23 write error,
 * 28 timeout, 35 and 60 TLS ...), so scripts written for curl work.
 */
#define EXIT_OK 0
#define EXIT_USAGE 2
#define EXIT_HTTP 22            /* -f and HTTP >= 400, as curl does */
#define EXIT_WRITE 23           /* CURLE_WRITE_ERROR */
#define EXIT_READ 26            /* CURLE_READ_ERROR: standard input */
#define EXIT_NOMEM 27           /* CURLE_OUT_OF_MEMORY */

struct options {
  char *url;                    /* a copy: argv's has no password */
  const char *method;           /* NULL: PUT */
  struct curl_slist *headers;
  char *userpwd;                /* copies, blanked in argv (cmdline.c) */
  char *bearer;                 /* --oauth2-bearer */
  bool insecure;
  const char *cacert, *capath;
  char *cert;                   /* client certificate (--cert's file) */
  char *key_passwd;             /* --cert FILE:PASSWORD, blanked in argv */
  const char *key;
  bool fail;
  bool fail_with_body;          /* -f, but the error's body to output */
  const char *output;           /* NULL or "-": standard output */
  const char *dump_header;      /* -D FILE, "-" for standard output */
  const char *write_out;        /* -w FORMAT */
  const char *trace;            /* --trace-ascii FILE, "-": stderr */
  char *referer;                /* -e URL, a copy without ";auto" */
  bool autoreferer;             /* -e ';auto', -e 'URL;auto' */
  const char *upload_name;      /* -T FILE */
  bool remote_name;             /* -O */
  bool data_binary;             /* --data-binary @- */
  bool follow;                  /* -L */
  long max_redirs;              /* --max-redirs, -1: none */
  long expect100_ms;            /* with -L only; 0: libcurl's 1 s */
  bool silent;
  bool verbose;
  long http_version;
  long connect_timeout_ms;      /* 0: libcurl's default */
  long max_time_ms;             /* 0: none */
  const char *unix_socket;
  char *proxy;                  /* a copy: argv's has no password */
  const char *noproxy;
  char *proxy_userpwd;
  struct curl_slist *resolve;   /* --resolve */
  struct curl_slist *connect_to;  /* --connect-to */
  curl_off_t limit_rate;        /* bytes per second, 0: none */
  const char *user_agent;
  curl_off_t upload_size;       /* -1: from the file, else chunked */
  const char *aws_sigv4;        /* --aws-sigv4 PROVIDER1[:...], or NULL */

  /* What can block: -w @FILE and @- (a FIFO, a terminal, a pipe whose
   * writer waits), and -T FILE or --data-binary @FILE (opening a FIFO
   * waits for its writer).  main.c does them once every option is
   * parsed and every secret in argv, the URL's too, is blanked: while
   * one waits, /proc/PID/cmdline is readable by every user.
   */
  const char *write_out_arg;    /* -w's argument */
  const char *stdin_file;       /* -T FILE, --data-binary @FILE */
};

/* options.c: the next option of argv, set in struct options, or why it
 * was not (main.c words every message).
 */
enum option_verdict {
  OPTION_TAKEN,
  OPTION_END,                   /* no more options */
  OPTION_HELP,                  /* -h */
  OPTION_VERSION,               /* -V */
  OPTION_NO_MEMORY,
  OPTION_NEEDS_VALUE,           /* fault.letter: a known short option */
  OPTION_UNKNOWN,               /* fault.letter */
  OPTION_UNKNOWN_LONG,          /* fault.value, fault.name_len: its name */
  OPTION_BAD_SECONDS,           /* fault.option, fault.value */
  OPTION_BAD_SIZE,              /* fault.option, fault.value */
  OPTION_BAD_COUNT,             /* fault.option, fault.value */
  OPTION_BAD_METHOD,            /* -X fault.value */
  OPTION_BAD_USER_AGENT,        /* -A: more than one line */
  OPTION_BAD_HEADER,            /* -H: fault.name_len of fault.value,
                                 * its name; 0: none to show */
  OPTION_BAD_DATA,              /* --data-binary without @ */
};

/* What the message says of an option refused. */
struct option_fault {
  const char *option;           /* as messages name it: "-m" */
  const char *value;
  int name_len;
  int letter;                   /* a short option */
};

extern enum option_verdict options_next (int argc, char *argv[],
                                         struct options *opt,
                                         struct option_fault *fault);

/* Runs the transfer; returns the exit status, and on a failure puts
 * its reason ("URL: cause") in msg for main.c to print.
 */
extern int transfer_run (const struct options *opt, char *msg,
                         size_t msglen);

/* cmdline.c: copies of arguments, blanked in argv where secret. */
extern char *take_secret (char *arg);
extern char *take_cert (char *arg, char **password);
extern char *take_header (char *arg);
extern char *take_url (char *arg);
extern char *url_with_file_name (const char *url, const char *file);
extern char *ask_password (const char *what, const char *user);

/* Is name (len bytes) one of -w's %{variables}?  (writeout.c) */
extern bool write_out_known (const char *name, size_t len);

#endif /* CURLPIPE_H */
