/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Every parameter, one row each.  From this table come the fields of struct
 * curl_config (settings.h), their defaults, and the parser each value goes
 * through (config.c's table, values.c's parsers).  So do the help text, and
 * --dump-plugin's list of the parameters that go only to url='s origin.
 * Adding a parameter is a row here, and an item in the man page;
 * test-curl-docs.sh holds the man page to this table.  One that sets a
 * libcurl option is also a line in config_apply.
 *
 * PARAM (KEY, KIND, TYPE, FIELD, DEFAULT, LO, HI, ORIGIN, HELP):
 *   KIND     how the value is parsed (values.c's values_KIND):
 *            string   kept as given
 *            text     kept as given, one line (no CR or LF)
 *            flag     true or false (nbdkit's words)
 *            number   a decimal number from LO to HI
 *            timeout  the same, 0 for the default
 *            delay    seconds with up to three decimals, to ms
 *            bytes    nbdkit's size syntax (16M), up to HI MiB
 *            secret   read as password= is (VALUE, -, +FILE, -FD)
 *            header   a request header, added to the list
 *            resolve  HOST:PORT:ADDRESS, added to the list
 *            mirror   a URL, added to the list (checked by mirrors.c)
 *            http, ssl, ip  one of a set of words (a libcurl constant)
 *            checksum  ALGO:HEX, a digest the object must have
 *   ORIGIN   the value goes only to url='s origin (and with
 *            location-trusted=true to every origin): credentials,
 *            cookies, headers
 *   HELP     its lines of --help, each ending in \n
 */

#ifndef PARAMS_H
#define PARAMS_H

#define DEFAULT_CONNECTIONS 16
#define DEFAULT_TIMEOUT 60
#define DEFAULT_RETRIES 5
#define DEFAULT_RETRY_DELAY_MS 1000
#define DEFAULT_READAHEAD_SIZE (32 * 1024 * 1024)
/* The highest connections= accepted.  Each connection is a socket and
 * a receive buffer; past this a typo is more likely than a need.
 */
#define MAX_CONNECTIONS 256
#define MAX_RENEW (86400 * 365)
/* http-version=auto: HTTP/2 on one connection where the server offers
 * it and is far, else HTTP/1.1 (mux.c).  Not one of libcurl's values.
 */
#define HTTP_VERSION_AUTO (-1L)

#define CURL_PARAMS(P)                                                  \
  P ("url", string, const char *, url, NULL, 0, 0, false,              \
     "url=<URL>                 (required) The disk image URL.\n")      \
  P ("connections", number, unsigned, connections, DEFAULT_CONNECTIONS, \
     1, MAX_CONNECTIONS, false,                                         \
     "connections=<N>           Parallel HTTP connections (default 16).\n") \
  P ("timeout", timeout, unsigned, timeout, DEFAULT_TIMEOUT, 0, 86400,  \
     false,                                                             \
     "timeout=<SECS>            Connect and stall timeout (default 60;\n" \
     "                          0 is the default).\n")                 \
  P ("retries", number, unsigned, retries, DEFAULT_RETRIES, 0, 100, false, \
     "retries=<N>               Retries after a transient error (5).\n") \
  P ("retry-delay", delay, unsigned, retry_delay_ms,                    \
     DEFAULT_RETRY_DELAY_MS, 0, 3600, false,                            \
     "retry-delay=<SECS>        First retry delay, then doubled (1).\n") \
  P ("pin-object", flag, bool, pin_object, true, 0, 0, false,           \
     "pin-object=false          Do not pin the object's validators.\n") \
  P ("sslverify", flag, bool, sslverify, true, 0, 0, false,             \
     "sslverify=false           Do not verify the server's certificate.\n") \
  P ("cainfo", string, const char *, cainfo, NULL, 0, 0, false,         \
     "cainfo=<FILE>             CA certificates to verify with.\n")     \
  P ("capath", string, const char *, capath, NULL, 0, 0, false,         \
     "capath=<DIR>              Directory of CA certificates.\n")       \
  P ("header", header, struct curl_slist *, headers, NULL, 0, 0, true,  \
     "header=<HEADER>           Extra request header (repeatable).\n")  \
  P ("user", string, const char *, user, NULL, 0, 0, true,              \
     "user=<USER>               User name for authentication.\n")       \
  P ("password", secret, char *, password, NULL, 0, 0, true,            \
     "password=<PASSWORD>       Password (or -, +FILE, -FD).\n")        \
  P ("followlocation", flag, bool, followlocation, true, 0, 0, false,   \
     "followlocation=false      Do not follow redirects.\n")            \
  P ("redirect-cache", flag, bool, redirect_cache, true, 0, 0, false,   \
     "redirect-cache=false      Follow url='s redirects for every read.\n") \
  P ("location-trusted", flag, bool, location_trusted, false, 0, 0, false, \
     "location-trusted=true     Send credentials to redirected origins.\n") \
  P ("insecure-redirect", flag, bool, insecure_redirect, false, 0, 0,   \
     false,                                                             \
     "insecure-redirect=true    Follow redirects from https to http.\n") \
  P ("protocols", string, const char *, protocols, "http,https,file",   \
     0, 0, false,                                                       \
     "protocols=<LIST>          Allowed schemes (default http,https,file).\n") \
  P ("user-agent", text, const char *, user_agent, NULL, 0, 0, false,   \
     "user-agent=<STR>          User-Agent header to send.\n")          \
  P ("cookie", secret, char *, cookie, NULL, 0, 0, true,                \
     "cookie=<COOKIE>           Cookie to send (or -, +FILE, -FD).\n")  \
  P ("cookiefile", string, const char *, cookiefile, NULL, 0, 0, false, \
     "cookiefile=<FILE>         Read cookies from FILE (\"\" for none).\n") \
  P ("cookiejar", string, const char *, cookiejar, NULL, 0, 0, false,   \
     "cookiejar=<FILE>          Write cookies to FILE at exit.\n")      \
  P ("cookie-script", string, const char *, cookie_script, NULL, 0, 0,  \
     true,                                                              \
     "cookie-script=<SCRIPT>    Its output is the cookie.\n")           \
  P ("cookie-script-renew", number, unsigned, cookie_script_renew, 0,   \
     0, MAX_RENEW, false,                                               \
     "cookie-script-renew=<SECS> Run cookie-script again this often.\n") \
  P ("header-script", string, const char *, header_script, NULL, 0, 0,  \
     true,                                                              \
     "header-script=<SCRIPT>    Its output lines are request headers.\n") \
  P ("header-script-renew", number, unsigned, header_script_renew, 0,   \
     0, MAX_RENEW, false,                                               \
     "header-script-renew=<SECS> Run header-script again this often.\n") \
  P ("url-script", string, const char *, url_script, NULL, 0, 0, false, \
     "url-script=<SCRIPT>       Its output is the URL (instead of url=).\n") \
  P ("url-script-renew", number, unsigned, url_script_renew, 0,         \
     0, MAX_RENEW, false,                                               \
     "url-script-renew=<SECS>   Run url-script again this often.\n")    \
  P ("proxy", string, const char *, proxy, NULL, 0, 0, false,           \
     "proxy=<PROXY>             Proxy URL.\n")                          \
  P ("proxy-user", string, const char *, proxy_user, NULL, 0, 0, false, \
     "proxy-user=<USER>         Proxy user name.\n")                    \
  P ("proxy-password", secret, char *, proxy_password, NULL, 0, 0, false, \
     "proxy-password=<PASSWORD> Proxy password (or -, +FILE, -FD).\n")  \
  P ("proxy-cainfo", string, const char *, proxy_cainfo, NULL, 0, 0,    \
     false,                                                             \
     "proxy-cainfo=<FILE>       CA certificates for an HTTPS proxy.\n") \
  P ("proxy-capath", string, const char *, proxy_capath, NULL, 0, 0,    \
     false,                                                             \
     "proxy-capath=<DIR>        Directory of CA certificates for it.\n") \
  P ("http-version", http, long, http_version, HTTP_VERSION_AUTO,       \
     0, 0, false,                                                       \
     "http-version=<VERSION>    auto (default), none, 1.0, 1.1, 2.0,\n" \
     "                          2TLS, 2-prior-knowledge, 3, 3only.\n")  \
  P ("ssl-version", ssl, long, ssl_version, CURL_SSLVERSION_DEFAULT,    \
     0, 0, false,                                                       \
     "ssl-version=<VERSION>     default, tlsv1, tlsv1.0 ... tlsv1.3.\n") \
  P ("ssl-cipher-list", string, const char *, ssl_cipher_list, NULL,    \
     0, 0, false,                                                       \
     "ssl-cipher-list=<LIST>    TLS 1.2 and older cipher list.\n")      \
  P ("tls13-ciphers", string, const char *, tls13_ciphers, NULL, 0, 0,  \
     false,                                                             \
     "tls13-ciphers=<LIST>      TLS 1.3 cipher suites.\n")              \
  P ("tcp-keepalive", flag, bool, tcp_keepalive, false, 0, 0, false,    \
     "tcp-keepalive=true        Enable TCP keepalive probes.\n")        \
  P ("tcp-nodelay", flag, bool, tcp_nodelay, true, 0, 0, false,         \
     "tcp-nodelay=false         Allow Nagle's algorithm.\n")            \
  P ("unix-socket-path", string, const char *, unix_socket_path, NULL,  \
     0, 0, false,                                                       \
     "unix-socket-path=<PATH>   Connect through a Unix socket.\n")      \
  P ("resolve", resolve, struct curl_slist *, resolve, NULL, 0, 0, false, \
     "resolve=<HOST:PORT:ADDR>  Resolve HOST:PORT to ADDR (repeatable).\n") \
  P ("ipresolve", ip, long, ipresolve, CURL_IPRESOLVE_WHATEVER, 0, 0,   \
     false,                                                             \
     "ipresolve=<any|v4|v6>     Which IP versions to use.\n")           \
  P ("aws-sigv4", string, const char *, aws_sigv4, NULL, 0, 0, true,    \
     "aws-sigv4=<PROVIDER...>   Sign requests with AWS Signature V4.\n") \
  P ("mirror", mirror, struct curl_slist *, mirrors, NULL, 0, 0, false,  \
     "mirror=<URL>              Another URL of the same object, read from\n" \
     "                          beside url= (repeatable).\n")          \
  P ("mirror-same-etag", flag, bool, mirror_same_etag, false, 0, 0,     \
     false,                                                             \
     "mirror-same-etag=true     A mirror at another origin with url='s\n" \
     "                          strong ETag is the same object.\n")    \
  P ("checksum", checksum, struct checksum_want, checksum, { NULL }, 0, 0, \
     false,                                                             \
     "checksum=<ALGO:HEX>       The object's sha256, sha512 or md5: once\n" \
     "                          every byte was read, a mismatch fails.\n") \
  P ("readahead", flag, bool, readahead, true, 0, 0, false,             \
     "readahead=false           Do not read ahead of sequential reads.\n") \
  P ("readahead-size", bytes, uint64_t, readahead_size,                  \
     DEFAULT_READAHEAD_SIZE, 0, 1024, false,                            \
     "readahead-size=<SIZE>     Bytes read ahead at most (default 32M;\n" \
     "                          0: none, and no NBD_CMD_CACHE).\n")   \
  P ("cache-dir", string, const char *, cache_dir, NULL, 0, 0, false,   \
     "cache-dir=<DIR>           Keep fetched blocks in DIR across runs.\n") \
  P ("cache-size", bytes, uint64_t, cache_size, 0, 0, 1u << 30, false, \
     "cache-size=<SIZE>         Keep DIR under SIZE (least recently\n" \
     "                          used out first).\n")                   \
  P ("cache-fill", flag, bool, cache_fill, false, 0, 0, false,          \
     "cache-fill=true           Fetch the rest of the object into the\n" \
     "                          cache while clients are idle.\n")

/* values.c: each kind's parser, the value into *field (of the row's
 * TYPE), or an error that names the parameter and what was expected.
 */
#define VALUE_PARSER(kind)                                              \
  extern int values_##kind (const char *key, const char *value,         \
                           void *field, unsigned lo, unsigned hi);
VALUE_PARSER (string)
VALUE_PARSER (text)
VALUE_PARSER (flag)
VALUE_PARSER (number)
VALUE_PARSER (timeout)
VALUE_PARSER (delay)
VALUE_PARSER (bytes)
VALUE_PARSER (secret)
VALUE_PARSER (header)
VALUE_PARSER (resolve)
VALUE_PARSER (mirror)
VALUE_PARSER (http)
VALUE_PARSER (ssl)
VALUE_PARSER (ip)
VALUE_PARSER (checksum)
#undef VALUE_PARSER

#endif /* PARAMS_H */
