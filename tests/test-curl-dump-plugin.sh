#!/usr/bin/env bash
# test-curl-dump-plugin.sh: nbdkit PLUGIN --dump-plugin names the
# plugin's version and this libcurl's version, TLS library, features and
# protocols (what a bug report and http-version= need).
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")}/functions.sh"
requires_plugin

nbdkit "$PLUGIN" --dump-plugin >"$tmp/dump" 2>&1 ||
  { cat "$tmp/dump" >&2; fail "--dump-plugin failed"; }
curl_v=$(curl --version | awk 'NR == 1 { print $2 }')
for want in '^name=curl$' '^version=[0-9]' "^curl_version=$curl_v\$" \
            '^curl_ssl_version=OpenSSL/' '^curl_features=.*HTTP2' \
            '^curl_protocols=.*https'; do
  grep -qE -- "$want" "$tmp/dump" || {
    cat "$tmp/dump" >&2
    fail "--dump-plugin: no line matching $want"
  }
done
