#!/usr/bin/env bash
# test-curl-dump-plugin.sh: nbdkit PLUGIN --dump-plugin names the
# plugin's version and this libcurl's version, TLS library, features and
# protocols (what a bug report and http-version= need), with the keys of
# nbdkit's own curl plugin (curl_version, curl_dynamic_version,
# curl_protocol_NAME=yes).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"
requires_plugin

nbdkit "$PLUGIN" --dump-plugin >"$tmp/dump" 2>&1 ||
  { cat "$tmp/dump" >&2; fail "--dump-plugin failed"; }
curl_v=$(curl --version | awk 'NR == 1 { print $2 }')
curl_built=$(sed -n 's/^#define LIBCURL_VERSION "\(.*\)"$/\1/p' \
             "$(pkg-config --variable=includedir libcurl)/curl/curlver.h")
[ -n "$curl_built" ] || fail "no LIBCURL_VERSION in curl/curlver.h"
for want in '^name=curl$' '^version=[0-9]' "^curl_version=$curl_built\$" \
            "^curl_dynamic_version=$curl_v\$" \
            '^curl_ssl_version=OpenSSL/' '^curl_features=.*HTTP2' \
            '^curl_protocols=.*https' '^curl_protocol_https=yes$' \
            '^curl_protocol_http=yes$' '^curl_protocol_file=yes$'; do
  grep -qE -- "$want" "$tmp/dump" || {
    cat "$tmp/dump" >&2
    fail "--dump-plugin: no line matching $want"
  }
done
# As nbdkit's own curl plugin: one curl_protocol_NAME=yes line for each
# protocol this libcurl speaks, and none for another.
protocols=$(sed -n 's/^curl_protocols=//p' "$tmp/dump" | tr ',' '\n' | sort)
lines=$(sed -n 's/^curl_protocol_\(.*\)=yes$/\1/p' "$tmp/dump" | sort)
[ -n "$protocols" ] && [ "$protocols" = "$lines" ] ||
  fail "--dump-plugin: curl_protocol_NAME=yes lines ($(echo $lines))" \
       "differ from curl_protocols ($(echo $protocols))"
