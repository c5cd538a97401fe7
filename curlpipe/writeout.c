/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * -w FORMAT: curl 7.88's variables, written as curl writes them, once
 * the transfer's exit status is final.  One row per variable, whose
 * value is libcurl's (a CURLINFO) or a function's of its own
 * (value_*); a row's value is written by one function (put_var), which
 * %{name} and %{json} use, and the list of names main.c checks a format
 * against is the rows'.  The URLs
 * (%{url}, %{url_effective}, %{redirect_url}) are shown as messages
 * show them, without user name, password or query, and so is
 * %{referer}: with -e ';auto' it is the URL redirected from.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "curlpipe.h"
#include "pipe.h"
#include "secrets.h"

/* A URL as messages show it: NULL when absent. */
static char *
masked (const char *url)
{
  return url && *url ? shown_url (url) : NULL;
}

/* The certificate chain (CURLOPT_CERTINFO, asked for by easyopts.c when
 * the format names it): each field on its own line; NULL for none.
 */
static char *
certs_text (const struct pipe_state *st, long *count)
{
  struct curl_certinfo *ci = NULL;
  struct curl_slist *f;
  char *text = NULL;
  size_t len = 0;
  FILE *fp;
  int i;

  *count = 0;
  if (curl_easy_getinfo (st->easy, CURLINFO_CERTINFO, &ci) != CURLE_OK ||
      ci == NULL || ci->num_of_certs <= 0)
    return NULL;
  *count = ci->num_of_certs;
  fp = open_memstream (&text, &len);
  if (fp == NULL)
    return NULL;
  for (i = 0; i < ci->num_of_certs; i++)
    for (f = ci->certinfo[i]; f != NULL; f = f->next)
      fprintf (fp, "%s\n", f->data);
  fclose (fp);
  return text;
}

/* The values libcurl does not give as they are, one function each:
 * *number for NUMBER, else a string in *text (NULL: absent).
 */
struct value {
  const struct pipe_state *st;
  int status;                   /* the exit status */
  curl_off_t number;
  char *text;                   /* the caller frees it */
};

static void
value_certs (struct value *v)
{
  long count;

  v->text = certs_text (v->st, &count);
}

static void
value_num_certs (struct value *v)
{
  long count;

  free (certs_text (v->st, &count));
  v->number = count;
}

static void
value_errormsg (struct value *v)
{
  const char *msg = failure_message (v->st);

  v->text = v->status != 0 && msg[0] ? strdup (msg) : NULL;
}

static void
value_exitcode (struct value *v)
{
  v->number = v->status;
}

static void
value_filename_effective (struct value *v)
{
  const char *output = v->st->opt->output;

  v->text = output && strcmp (output, "-") != 0 ? strdup (output) : NULL;
}

static void
value_http_version (struct value *v)
{
  long l = 0;

  curl_easy_getinfo (v->st->easy, CURLINFO_HTTP_VERSION, &l);
  v->text = strdup (l == CURL_HTTP_VERSION_1_0 ? "1"
                    : l == CURL_HTTP_VERSION_1_1 ? "1.1"
                    : l == CURL_HTTP_VERSION_2_0 ? "2"
                    : l == CURL_HTTP_VERSION_3 ? "3" : "0");
}

static void
value_num_headers (struct value *v)
{
  v->number = download_num_headers (v->st);
}

static void
value_redirect_url (struct value *v)
{
  const char *s = NULL;

  curl_easy_getinfo (v->st->easy, CURLINFO_REDIRECT_URL, &s);
  v->text = masked (s);
}

static void
value_referer (struct value *v)
{
  const char *s = NULL;

  curl_easy_getinfo (v->st->easy, CURLINFO_REFERER, &s);
  v->text = masked (s);
}

static void
value_size_download (struct value *v)
{
  v->number = framing_received (v->st);
}

static void
value_size_upload (struct value *v)
{
  v->number = upload_sent (v->st);
}

static void
value_url (struct value *v)
{
  v->text = strdup (v->st->url);
}

static void
value_url_effective (struct value *v)
{
  const char *s = NULL;

  curl_easy_getinfo (v->st->easy, CURLINFO_EFFECTIVE_URL, &s);
  v->text = s ? masked (s) : strdup (v->st->url);
}

enum shape {
  NUMBER,                       /* a JSON number */
  TEXT,                         /* a JSON string, null when absent */
  CODE,                         /* an HTTP status, 3 digits */
  SECONDS,                      /* a *_TIME_T, as seconds.micro */
  SPECIAL,                      /* stdout, stderr, onerror, json... */
};

struct var {
  const char *name;
  enum shape shape;
  CURLINFO info;                /* 0: computed, or none */
  void (*computed) (struct value *v);   /* NULL: libcurl's, or none */
};

/* In curl's order, which is also %{json}'s. */
static const struct var vars[] = {
  { "certs", TEXT, 0, value_certs },
  { "content_type", TEXT, CURLINFO_CONTENT_TYPE, NULL },
  { "errormsg", TEXT, 0, value_errormsg },
  { "exitcode", NUMBER, 0, value_exitcode },
  { "filename_effective", TEXT, 0, value_filename_effective },
  { "ftp_entry_path", TEXT, 0, NULL },
  { "http_code", CODE, CURLINFO_RESPONSE_CODE, NULL },
  { "http_connect", CODE, CURLINFO_HTTP_CONNECTCODE, NULL },
  { "http_version", TEXT, 0, value_http_version },
  { "local_ip", TEXT, CURLINFO_LOCAL_IP, NULL },
  { "local_port", NUMBER, CURLINFO_LOCAL_PORT, NULL },
  { "method", TEXT, CURLINFO_EFFECTIVE_METHOD, NULL },
  { "num_certs", NUMBER, 0, value_num_certs },
  { "num_connects", NUMBER, CURLINFO_NUM_CONNECTS, NULL },
  { "num_headers", NUMBER, 0, value_num_headers },
  { "num_redirects", NUMBER, CURLINFO_REDIRECT_COUNT, NULL },
  { "proxy_ssl_verify_result", NUMBER, CURLINFO_PROXY_SSL_VERIFYRESULT,
    NULL },
  { "redirect_url", TEXT, 0, value_redirect_url },
  { "referer", TEXT, 0, value_referer },
  { "remote_ip", TEXT, CURLINFO_PRIMARY_IP, NULL },
  { "remote_port", NUMBER, CURLINFO_PRIMARY_PORT, NULL },
  { "response_code", CODE, CURLINFO_RESPONSE_CODE, NULL },
  { "scheme", TEXT, CURLINFO_SCHEME, NULL },
  { "size_download", NUMBER, 0, value_size_download },
  { "size_header", NUMBER, CURLINFO_HEADER_SIZE, NULL },
  { "size_request", NUMBER, CURLINFO_REQUEST_SIZE, NULL },
  { "size_upload", NUMBER, 0, value_size_upload },
  { "speed_download", NUMBER, CURLINFO_SPEED_DOWNLOAD_T, NULL },
  { "speed_upload", NUMBER, CURLINFO_SPEED_UPLOAD_T, NULL },
  { "ssl_verify_result", NUMBER, CURLINFO_SSL_VERIFYRESULT, NULL },
  { "time_appconnect", SECONDS, CURLINFO_APPCONNECT_TIME_T, NULL },
  { "time_connect", SECONDS, CURLINFO_CONNECT_TIME_T, NULL },
  { "time_namelookup", SECONDS, CURLINFO_NAMELOOKUP_TIME_T, NULL },
  { "time_pretransfer", SECONDS, CURLINFO_PRETRANSFER_TIME_T, NULL },
  { "time_redirect", SECONDS, CURLINFO_REDIRECT_TIME_T, NULL },
  { "time_starttransfer", SECONDS, CURLINFO_STARTTRANSFER_TIME_T, NULL },
  { "time_total", SECONDS, CURLINFO_TOTAL_TIME_T, NULL },
  { "url", TEXT, 0, value_url },
  { "url_effective", TEXT, 0, value_url_effective },
  { "urlnum", NUMBER, 0, NULL },
  { "header_json", SPECIAL, 0, NULL },
  { "json", SPECIAL, 0, NULL },
  { "onerror", SPECIAL, 0, NULL },
  { "stderr", SPECIAL, 0, NULL },
  { "stdout", SPECIAL, 0, NULL },
};

#define NVARS (sizeof vars / sizeof vars[0])

static const struct var *
find_var (const char *name, size_t len)
{
  size_t i;

  for (i = 0; i < NVARS; i++)
    if (strlen (vars[i].name) == len && strncmp (vars[i].name, name, len) == 0)
      return &vars[i];
  return NULL;
}

bool
write_out_known (const char *name, size_t len)
{
  return find_var (name, len) != NULL;
}

/* JSON's string escapes. */
static void
put_json_string (FILE *fp, const char *s)
{
  putc ('"', fp);
  for (; *s; s++) {
    switch (*s) {
    case '"': fputs ("\\\"", fp); break;
    case '\\': fputs ("\\\\", fp); break;
    case '\n': fputs ("\\n", fp); break;
    case '\r': fputs ("\\r", fp); break;
    case '\t': fputs ("\\t", fp); break;
    case '\b': fputs ("\\b", fp); break;
    case '\f': fputs ("\\f", fp); break;
    default:
      if ((unsigned char) *s < 0x20)
        fprintf (fp, "\\u%04x", (unsigned char) *s);
      else
        putc (*s, fp);
    }
  }
  putc ('"', fp);
}

/* A row's value as libcurl gives it (CURLINFO_*): *number for NUMBER,
 * CODE and SECONDS (microseconds), else a string in *text.
 */
static void
info_value (const struct pipe_state *st, CURLINFO info, struct value *v)
{
  const char *s = NULL;
  long l = 0;
  curl_off_t o = 0;

  switch (info & CURLINFO_TYPEMASK) {
  case CURLINFO_STRING:
    if (curl_easy_getinfo (st->easy, info, &s) == CURLE_OK && s != NULL)
      v->text = strdup (s);
    break;
  case CURLINFO_LONG:
    curl_easy_getinfo (st->easy, info, &l);
    v->number = l;
    break;
  case CURLINFO_OFF_T:
    curl_easy_getinfo (st->easy, info, &o);
    v->number = o;
    break;
  }
}

/* One variable as %{name} writes it (json: as %{json} does). */
static void
put_var (const struct pipe_state *st, int status, const struct var *var,
         FILE *fp, bool json)
{
  struct value v = { .st = st, .status = status };

  if (var->info != 0)
    info_value (st, var->info, &v);
  else if (var->computed != NULL)
    var->computed (&v);
  switch (var->shape) {
  case NUMBER:
    fprintf (fp, "%" CURL_FORMAT_CURL_OFF_T, v.number);
    break;
  case CODE:
    fprintf (fp, json ? "%" CURL_FORMAT_CURL_OFF_T
             : "%03" CURL_FORMAT_CURL_OFF_T, v.number);
    break;
  case SECONDS:
    fprintf (fp, "%" CURL_FORMAT_CURL_OFF_T ".%06" CURL_FORMAT_CURL_OFF_T,
             v.number / 1000000, v.number % 1000000);
    break;
  case TEXT:
    if (json && v.text == NULL)
      fputs (strcmp (var->name, "certs") == 0 ? "\"\"" : "null", fp);
    else if (json)
      put_json_string (fp, v.text);
    else if (v.text)
      fputs (v.text, fp);
    break;
  case SPECIAL:
    break;
  }
  free (v.text);
}

static void
put_json (const struct pipe_state *st, int status, FILE *fp)
{
  size_t i;

  putc ('{', fp);
  for (i = 0; i < NVARS && vars[i].shape != SPECIAL; i++) {
    fprintf (fp, "\"%s\":", vars[i].name);
    put_var (st, status, &vars[i], fp, true);
    putc (',', fp);
  }
  fputs ("\"curl_version\":", fp);
  put_json_string (fp, curl_version ());
  putc ('}', fp);
}

/* %{header_json}: the last answer's headers, each name once (lower
 * case, where it first came) with all its values, as curl writes them.
 * libcurl's header iterator has one struct per handle, so the names are
 * copied first and the values looked up after.
 */
static void
put_header_json (const struct pipe_state *st, FILE *fp)
{
  struct curl_header *h, *each;
  char **names = NULL, **more, *p;
  size_t n = 0, i, j, k;

  for (h = curl_easy_nextheader (st->easy, CURLH_HEADER, -1, NULL);
       h != NULL; h = curl_easy_nextheader (st->easy, CURLH_HEADER, -1, h)) {
    for (j = 0; j < n && strcasecmp (names[j], h->name) != 0; j++)
      ;
    if (j < n)
      continue;
    more = realloc (names, (n + 1) * sizeof *names);
    if (more == NULL)
      break;
    names = more;
    names[n] = strdup (h->name);
    if (names[n] == NULL)
      break;
    n++;
  }
  putc ('{', fp);
  for (i = 0; i < n; i++) {
    fputs (i ? ",\n" : "", fp);
    for (p = names[i]; *p; p++)
      if (*p >= 'A' && *p <= 'Z')
        *p += 'a' - 'A';
    put_json_string (fp, names[i]);
    fputs (":[", fp);
    for (k = 0;
         curl_easy_header (st->easy, names[i], k, CURLH_HEADER, -1, &each)
           == CURLHE_OK; k++) {
      fputs (k ? "," : "", fp);
      put_json_string (fp, each->value);
    }
    putc (']', fp);
    free (names[i]);
  }
  fputs ("\n}", fp);
  free (names);
}

/* %header{name}: the last answer's header, trimmed, as curl shows it. */
static void
put_header (const struct pipe_state *st, const char *name, size_t len,
            FILE *fp)
{
  struct curl_header *h;
  char *n = strndup (name, len);

  if (n != NULL &&
      curl_easy_header (st->easy, n, 0, CURLH_HEADER, -1, &h) == CURLHE_OK)
    fputs (h->value, fp);
  free (n);
}

/* The format, as curl reads it: %{name}, %header{name}, %%, and \n, \r,
 * \t; anything else as it is, also '%' or '\' and the character after
 * it, which is then not read again ("%\n" and "\%{name}" are written as
 * they are).  An unknown %{name} writes nothing (main.c warned about
 * it).
 */
void
write_out_print (const struct pipe_state *st, int status)
{
  const char *p = st->opt->write_out, *end;
  const struct var *v;
  FILE *fp = stdout;

  for (; *p; p++) {
    if (*p == '\\' && p[1] && strchr ("nrt", p[1])) {
      p++;
      putc (*p == 'n' ? '\n' : *p == 'r' ? '\r' : '\t', fp);
      continue;
    }
    if (*p == '\\' && p[1]) {
      putc (*p++, fp);
      putc (*p, fp);
      continue;
    }
    if (*p == '%' && p[1] == '%') {
      putc (*p++, fp);
      continue;
    }
    if (*p == '%' && strncmp (p, "%header{", 8) == 0 &&
        strchr (p + 8, '}') != NULL) {
      end = strchr (p + 8, '}');
      put_header (st, p + 8, end - (p + 8), fp);
      p = end;
      continue;
    }
    if (*p == '%' && p[1] && p[1] != '{') {
      putc (*p++, fp);
      putc (*p, fp);
      continue;
    }
    end = strncmp (p, "%{", 2) == 0 ? strchr (p + 2, '}') : NULL;
    if (end == NULL) {
      putc (*p, fp);
      continue;
    }
    v = find_var (p + 2, end - (p + 2));
    p = end;
    if (v == NULL)
      continue;
    if (strcmp (v->name, "stdout") == 0 || strcmp (v->name, "stderr") == 0) {
      fflush (fp);
      fp = strcmp (v->name, "stdout") == 0 ? stdout : stderr;
    }
    else if (strcmp (v->name, "onerror") == 0) {
      if (status == 0)
        break;
    }
    else if (strcmp (v->name, "json") == 0)
      put_json (st, status, fp);
    else if (strcmp (v->name, "header_json") == 0)
      put_header_json (st, fp);
    else
      put_var (st, status, v, fp, false);
  }
  fflush (stdout);
  fflush (stderr);
}
