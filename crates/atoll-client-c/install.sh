#!/usr/bin/env bash
# Installs atoll's C client library under a prefix:
#
#   bash crates/atoll-client-c/install.sh [--prefix DIR] [--libdir DIR]
#        [--includedir DIR] [--destdir DIR] [--release] [--no-build]
#        [--no-static] [--strip]
#
#   LIBDIR/libatoll_client.so.X.Y.Z          the library (soname libatoll_client.so.X)
#   LIBDIR/libatoll_client.so.X -> .so.X.Y.Z what programs load
#   LIBDIR/libatoll_client.so -> .so.X       what -latoll_client finds
#   LIBDIR/libatoll_client.a                 (not with --no-static)
#   LIBDIR/pkgconfig/atoll.pc                from atoll.pc.in, for this prefix
#   INCLUDEDIR/atoll.h
#
# Defaults: --prefix /usr/local, --libdir PREFIX/lib, --includedir
# PREFIX/include. --destdir stages the files under DIR (the paths inside,
# and in atoll.pc, stay those of the prefix), as packages do. The library
# comes from ${CARGO_TARGET_DIR:-target}/debug (--release: /release), built
# first with cargo unless --no-build. --strip strips the shared library's
# debug information. X.Y.Z is ATOLL_VERSION_STRING of the header (a test
# checks that it is the crate's version). Then:
#
#   PKG_CONFIG_PATH=LIBDIR/pkgconfig cc prog.c $(pkg-config --cflags --libs atoll)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

prefix=/usr/local
libdir=
includedir=
destdir=
profile=debug
build=1
static=1
strip=0
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=$2; shift ;;
        --libdir) libdir=$2; shift ;;
        --includedir) includedir=$2; shift ;;
        --destdir) destdir=$2; shift ;;
        --release) profile=release ;;
        --no-build) build=0 ;;
        --no-static) static=0 ;;
        --strip) strip=1 ;;
        -h | --help) sed -n '2,24p' "$0"; exit 0 ;;
        *) echo "install.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
libdir=${libdir:-$prefix/lib}
includedir=${includedir:-$prefix/include}
for d in "$prefix" "$libdir" "$includedir"; do
    case $d in /*) ;; *) echo "install.sh: $d is not an absolute path" >&2; exit 2 ;; esac
done

target=${CARGO_TARGET_DIR:-$root/target}
case $target in /*) ;; *) target=$root/$target ;; esac
if [ "$build" = 1 ]; then
    flags=()
    [ "$profile" = release ] && flags=(--release)
    (cd "$root" && cargo build "${flags[@]}" -p atoll-client-c >&2)
fi
built=$target/$profile
for f in libatoll_client.so libatoll_client.a; do
    [ -f "$built/$f" ] || { echo "install.sh: no $built/$f (build it, or drop --no-build)" >&2; exit 1; }
done

header=$here/include/atoll.h
version=$(sed -n 's/^#define ATOLL_VERSION_STRING "\(.*\)"$/\1/p' "$header")
case $version in
    [0-9]*.[0-9]*.[0-9]*) ;;
    *) echo "install.sh: no ATOLL_VERSION_STRING in $header" >&2; exit 1 ;;
esac
major=${version%%.*}

lib=$destdir$libdir
inc=$destdir$includedir
install -d "$lib/pkgconfig" "$inc"
install -m 644 "$built/libatoll_client.so" "$lib/libatoll_client.so.$version"
if [ "$strip" = 1 ]; then
    strip --strip-unneeded "$lib/libatoll_client.so.$version"
fi
ln -sfn "libatoll_client.so.$version" "$lib/libatoll_client.so.$major"
ln -sfn "libatoll_client.so.$major" "$lib/libatoll_client.so"
if [ "$static" = 1 ]; then
    install -m 644 "$built/libatoll_client.a" "$lib/libatoll_client.a"
fi
install -m 644 "$header" "$inc/atoll.h"
sed -e "s|@prefix@|$prefix|g" -e "s|@libdir@|$libdir|g" \
    -e "s|@includedir@|$includedir|g" -e "s|@version@|$version|g" \
    "$here/atoll.pc.in" >"$lib/pkgconfig/atoll.pc"
chmod 644 "$lib/pkgconfig/atoll.pc"
echo "installed libatoll_client $version into $destdir$prefix" >&2
