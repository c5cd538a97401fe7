#!/usr/bin/env bash
# test-debian-package.sh: the Debian package (debian/) builds with
# dpkg-buildpackage -us -uc -b from a clean copy of the tree, lintian
# finds no error in it, and installed it makes "nbdkit curl" this plugin:
#  - Debian's curl plugin and its man page are diverted (kept aside with
#    the same bytes, and man-db does not complain);
#  - make install's notice (scripts/plugin-owner) names the package whose
#    file it would replace, Debian's nbdkit before, ours after;
#  - nbdkit curl --dump-plugin names this project's version;
#  - nbdkit -r curl URL, by name, copies an image byte-exactly;
#  - curlpipe is in /usr/bin, both man pages are installed;
#  - installing it again, and reinstalling nbdkit (from apt's cache of
#    its .deb, when there is one), keep all of that;
# and removed (then purged), Debian's plugin and man page are back, the
# same bytes as before, with no diversion and no file of the package left.
#
# It installs a package, so it needs root; it leaves the machine as it
# found it even when it fails (the package purged, the diversions
# removed), and does not run when the package or a diversion of those
# files is already there.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

set -e
source "${srcdir:-$(dirname "$0")/..}/functions.sh"

pkg=nbdkit-curl-plugin-ng
[ "$(id -u)" -eq 0 ] || skip "installing a package needs root"
requires dpkg-buildpackage
requires dh
requires lintian
requires nbdcopy
requires nbdkit curl --version
plugindir=$(pkg-config --variable=plugindir nbdkit)
[ -n "$plugindir" ] || fail "pkg-config names no plugindir for nbdkit"
so=$plugindir/nbdkit-curl-plugin.so
man=/usr/share/man/man1/nbdkit-curl-plugin.1.gz
# Where the package moves Debian's files.
so_aside=$so.distrib
man_aside=/usr/share/man/man1/nbdkit-curl-plugin.distrib.1.gz
if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q installed; then
  skip "$pkg is installed already: this test would replace it"
fi
if [ "$(dpkg-divert --truename "$so")" != "$so" ] ||
   [ "$(dpkg-divert --truename "$man")" != "$man" ]; then
  skip "$so or $man is diverted already"
fi

version=$(sed -n 's/^PACKAGE_VERSION = //p' "$abs_top_builddir/Makefile")
[ -n "$version" ] || fail "no PACKAGE_VERSION in $abs_top_builddir/Makefile"

# On any exit: purge the package and remove the diversions it may have
# left (an install that failed half-way), then functions.sh's clean-up.
restore_machine ()
{
  local f status
  # "install ok not-installed" after a dpkg -i that failed: purged too.
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  if [ -n "$status" ] && [ "$status" != "unknown ok not-installed" ]; then
    dpkg --purge --force-remove-reinstreq "$pkg" >"$tmp/restore.log" 2>&1 ||
      echo "FAIL: $(basename "$0"): could not purge $pkg:" \
           "$(cat "$tmp/restore.log")" >&2
  fi
  for f in "$so" "$man"; do
    if dpkg-divert --listpackage "$f" 2>/dev/null | grep -qx "$pkg"; then
      dpkg-divert --package "$pkg" --remove --rename "$f" >/dev/null ||
        echo "FAIL: $(basename "$0"): could not remove the diversion" \
             "of $f" >&2
    fi
  done
}
trap '_st=$?; restore_machine; (exit "$_st"); _cleanup' EXIT

sha256sum "$so" "$man" >"$tmp/debian.sha256"
debian_version=$(nbdkit curl --dump-plugin | sed -n 's/^version=//p')
[ "$debian_version" != "$version" ] ||
  fail "Debian's curl plugin has this project's version $version:" \
       "the test could not tell them apart"

# The tree as a clean checkout holds it: git's files when it is one
# (committed or not, never build output), or else the whole source tree.
src=$tmp/build/$pkg-$version
mkdir -p "$src"
if git -C "$abs_top_srcdir" rev-parse --is-inside-work-tree >/dev/null 2>&1
then
  (cd "$abs_top_srcdir" &&
     git ls-files -z --cached --others --exclude-standard |
     while IFS= read -r -d '' f; do
       [ -e "$f" ] && printf '%s\0' "$f"
     done | tar --null -T - -cf -) | tar -xf - -C "$src"
else
  tar -C "$abs_top_srcdir" --exclude='./build*' -cf - . | tar -xf - -C "$src"
fi
changelog_version=$(cd "$src" && dpkg-parsechangelog -S Version)
[ "$changelog_version" = "$version" ] ||
  fail "debian/changelog says $changelog_version, configure.ac $version"

# Both cores build: the package is built as its users would, only sooner.
(cd "$src" && DEB_BUILD_OPTIONS="parallel=$(nproc) ${DEB_BUILD_OPTIONS:-}" \
   timeout 600 dpkg-buildpackage -us -uc -b) \
  >"$tmp/build.log" 2>&1 ||
  fail "dpkg-buildpackage failed: $(tail -n 20 "$tmp/build.log")"
arch=$(dpkg --print-architecture)
deb=$tmp/build/${pkg}_${version}_$arch.deb
[ -f "$deb" ] || fail "no $deb after dpkg-buildpackage"

timeout 300 lintian --fail-on error "$tmp/build/${pkg}_${version}_$arch.changes" \
  >"$tmp/lintian.log" 2>&1 ||
  problem "lintian reports errors: $(grep '^E:' "$tmp/lintian.log")"

# Its files, for the check that none is left.
dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { sub(/^\./, "", $6); print $6 }' \
  >"$tmp/files"
grep -qx "$so" "$tmp/files" || fail "the package does not install $so"
grep -qx /usr/bin/curlpipe "$tmp/files" ||
  fail "the package does not install /usr/bin/curlpipe"
! grep '\.la$' "$tmp/files" ||
  problem "the package installs libtool's .la (nbdkit does not use it)"

# check_installed WHEN: the package's plugin is nbdkit's curl.
check_installed ()
{
  local when=$1 got
  got=$(nbdkit curl --dump-plugin | sed -n 's/^version=//p')
  [ "$got" = "$version" ] ||
    problem "$when: nbdkit curl --dump-plugin says version=$got," \
            "not $version"
  [ "$(dpkg-divert --truename "$so")" = "$so_aside" ] ||
    problem "$when: $so is not diverted to $so_aside"
  [ "$(dpkg-divert --truename "$man")" = "$man_aside" ] ||
    problem "$when: $man is not diverted to $man_aside"
  sed "s|  $so\$|  $so_aside|; s|  $man\$|  $man_aside|" \
    "$tmp/debian.sha256" | sha256sum --quiet -c - >/dev/null 2>&1 ||
    problem "$when: Debian's plugin and man page are not kept aside"
  man -w nbdkit-curl-plugin >"$tmp/man.log" 2>&1 &&
    [ "$(cat "$tmp/man.log")" = "$man" ] ||
    problem "$when: man -w nbdkit-curl-plugin: $(cat "$tmp/man.log")"
  # (Not dpkg -V nbdkit: it skips diverted files.)
  zcat "$man" | grep -q 'REMOTE SERVERS' ||
    problem "$when: $man is not this project's man page"
  [ -s /usr/share/man/man1/curlpipe.1.gz ] ||
    problem "$when: no curlpipe man page"
  /usr/bin/curlpipe --version >/dev/null 2>&1 ||
    problem "$when: /usr/bin/curlpipe --version failed"
}

# owner_notice WHEN PACKAGE: make install would name PACKAGE.
owner_notice ()
{
  sh "$abs_top_srcdir/scripts/plugin-owner" "$so" >"$tmp/owner.log" 2>&1
  grep -q "belongs to the package $2 " "$tmp/owner.log" &&
    grep -q "apt-get install --reinstall $2\.\$" "$tmp/owner.log" ||
    problem "$1: make install's notice does not name $2:" \
            "$(cat "$tmp/owner.log")"
}
owner_notice "before" nbdkit

dpkg -i "$deb" >"$tmp/install.log" 2>&1 ||
  fail "dpkg -i failed: $(cat "$tmp/install.log")"
check_installed "installed"
owner_notice "installed" "$pkg"

# nbdkit -r curl URL, by name, copies an image byte-exactly.
size=$((8 * 1024 * 1024 + 4321))
serve_image "$size"
start_nbdkit ro -r curl "$url"
timeout "$client_timeout" nbdcopy "$uri" "$tmp/out.img"
stop_nbdkit ro
assert_same_file "$image" "$tmp/out.img"

dpkg -i "$deb" >"$tmp/install.log" 2>&1 ||
  fail "installing again failed: $(cat "$tmp/install.log")"
check_installed "installed again"

# What the diversion is for: nbdkit reinstalled (or upgraded) puts its
# curl plugin aside, not over this one.  Done with apt's copy of the
# installed nbdkit's .deb, when apt kept one (the test reaches no network).
nbdkit_version=$(dpkg-query -W -f='${Version}' nbdkit)
nbdkit_deb=/var/cache/apt/archives/nbdkit_${nbdkit_version//:/%3a}_$arch.deb
if [ -f "$nbdkit_deb" ]; then
  dpkg -i "$nbdkit_deb" >"$tmp/install.log" 2>&1 ||
    fail "reinstalling nbdkit failed: $(cat "$tmp/install.log")"
  check_installed "nbdkit reinstalled"
else
  echo "$(basename "$0"): note: no $nbdkit_deb in apt's cache:" \
       "nbdkit was not reinstalled over the package" >&2
fi

# Removed, Debian's files are back; purged, nothing of ours is left.
dpkg --remove "$pkg" >"$tmp/remove.log" 2>&1 ||
  fail "dpkg --remove failed: $(cat "$tmp/remove.log")"
got=$(nbdkit curl --dump-plugin | sed -n 's/^version=//p')
[ "$got" = "$debian_version" ] ||
  problem "removed: nbdkit curl --dump-plugin says version=$got," \
          "not Debian's $debian_version"
sha256sum --quiet -c "$tmp/debian.sha256" >/dev/null 2>&1 ||
  problem "removed: Debian's plugin or man page differ from before"
dpkg --purge "$pkg" >"$tmp/remove.log" 2>&1 ||
  fail "dpkg --purge failed: $(cat "$tmp/remove.log")"
for f in "$so" "$man"; do
  [ "$(dpkg-divert --truename "$f")" = "$f" ] ||
    problem "purged: $f is still diverted"
done
for f in "$so_aside" "$man_aside"; do
  [ ! -e "$f" ] || problem "purged: $f is left"
done
while read -r f; do
  [ -e "$f" ] || continue
  # The diverted paths are Debian's files again.
  [ "$f" = "$so" ] || [ "$f" = "$man" ] && continue
  problem "purged: $f is left"
done <"$tmp/files"
[ ! -e "/usr/share/doc/$pkg" ] || problem "purged: /usr/share/doc/$pkg is left"
dpkg -V nbdkit >"$tmp/verify.log" 2>&1 && [ ! -s "$tmp/verify.log" ] ||
  problem "purged: dpkg -V nbdkit: $(cat "$tmp/verify.log")"

check_problems
