#!/usr/bin/env bash
# Checks what atoll's .deb (packaging/build-deb.sh, which runs this on the
# package it built) installs:
#
#   bash packaging/check-deb.sh PATH.deb
#
# * the paths (dpkg-deb -c): the binary, the unit, the config, a man page,
#   the completions; the C client library as Debian lays out a shared
#   library, /usr/lib/libatoll_client.so.X.Y.Z with the symlinks
#   libatoll_client.so.X (its soname) -> .so.X.Y.Z and libatoll_client.so
#   -> .so.X, /usr/include/atoll.h and /usr/lib/pkgconfig/atoll.pc;
# * the library's soname (readelf) and that atoll.pc names /usr and the
#   version of the header (X.Y.Z is ATOLL_VERSION_STRING of atoll.h).
# Prints what it checked; exits 1 on the first difference.
set -euo pipefail
[ $# = 1 ] && [ -f "$1" ] || { echo "usage: $0 PATH.deb" >&2; exit 2; }
deb=$(realpath "$1")
cd "$(dirname "${BASH_SOURCE[0]}")/.."

die() {
    echo "check-deb: $deb: $*" >&2
    exit 1
}

version=$(sed -n 's/^#define ATOLL_VERSION_STRING "\(.*\)"$/\1/p' crates/atoll-client-c/include/atoll.h)
[ -n "$version" ] || die "no ATOLL_VERSION_STRING in atoll.h"
major=${version%%.*}
lib=libatoll_client.so

# "TYPE PATH[ -> TARGET]" per entry: d, - (file) or l (symlink).
listing=$(dpkg-deb -c "$deb" | awk '{
    type = substr($1, 1, 1); path = $6
    sub(/^\.\//, "/", path)
    if (type == "l") print type, path, "->", $8; else print type, path }')
want=(
    "- /usr/bin/atoll"
    "- /usr/lib/systemd/system/atoll.service"
    "- /etc/atoll/atoll.toml"
    "- /usr/share/man/man1/atoll.1.gz"
    "- /usr/share/bash-completion/completions/atoll"
    "- /usr/lib/$lib.$version"
    "l /usr/lib/$lib.$major -> $lib.$version"
    "l /usr/lib/$lib -> $lib.$major"
    "- /usr/include/atoll.h"
    "- /usr/lib/pkgconfig/atoll.pc"
)
for w in "${want[@]}"; do
    grep -qxF -- "$w" <<<"$listing" || die "lacks '$w'; it has:
$listing"
done
echo "check-deb: ${#want[@]} paths present (library ${lib}.${version}, soname symlinks)"

work=$(mktemp -d "${TMPDIR:-/tmp}/atoll-check-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
dpkg-deb -x "$deb" "$work"
soname=$(readelf -d "$work/usr/lib/$lib.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "$lib.$major" ] || die "the library's soname is '$soname', want $lib.$major"
pc=$work/usr/lib/pkgconfig/atoll.pc
grep -qx "prefix=/usr" "$pc" || die "atoll.pc: no prefix=/usr: $(cat "$pc")"
grep -qx "Version: $version" "$pc" || die "atoll.pc: no Version: $version"
cmp -s "$work/usr/include/atoll.h" crates/atoll-client-c/include/atoll.h ||
    die "/usr/include/atoll.h is not crates/atoll-client-c/include/atoll.h"
echo "check-deb: soname $soname, atoll.pc for /usr, version $version"
