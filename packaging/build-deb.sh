#!/usr/bin/env bash
# Builds atoll's Debian package:
#
#   bash packaging/build-deb.sh [--no-build]     # prints the .deb's path last
#
# 1. cargo build --release -p atoll-cli -p atoll-client-c (skipped with
#    --no-build);
# 2. generates the man pages (`atoll man`) and the bash, zsh and fish
#    completions (`atoll completions SHELL`) into
#    $CARGO_TARGET_DIR/release/pkg/, and stages the C client library there
#    (crates/atoll-client-c/install.sh --prefix /usr: the shared library,
#    stripped, with its soname symlinks, atoll.h and atoll.pc);
# 3. cargo deb -p atoll-cli --no-build: the binary (stripped), the systemd
#    unit packaging/systemd/atoll.service, /etc/atoll/atoll.toml (a
#    conffile), the man pages and completions, the library (see
#    [package.metadata.deb] in crates/atoll-cli/Cargo.toml). The package
#    is written to $CARGO_TARGET_DIR/debian/;
# 4. packaging/check-deb.sh checks its paths.
#
# Installs cargo-deb with `cargo install --locked cargo-deb` when it is
# missing (about 2 minutes on 2 cores). The package does not enable or
# start the service: `systemctl enable --now atoll`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build=1
for arg in "$@"; do
    case "$arg" in
        --no-build) build=0 ;;
        -h | --help) sed -n '2,24p' "$0"; exit 0 ;;
        *) echo "usage: $0 [--no-build]" >&2; exit 2 ;;
    esac
done

target="${CARGO_TARGET_DIR:-$PWD/target}"
if ! cargo deb --version >/dev/null 2>&1; then
    echo "build-deb: installing cargo-deb (cargo install --locked cargo-deb)" >&2
    cargo install --locked cargo-deb >&2
fi
if [ "$build" = 1 ]; then
    cargo build --release --locked -p atoll-cli -p atoll-client-c >&2
fi
atoll="${target}/release/atoll"
[ -x "$atoll" ] || { echo "build-deb: no ${atoll} (build it, or drop --no-build)" >&2; exit 1; }

pkg="${target}/release/pkg"
rm -rf "$pkg"
mkdir -p "${pkg}/man1" "${pkg}/completions"
"$atoll" man "${pkg}/man1"
gzip -9n "${pkg}"/man1/*.1
"$atoll" completions bash >"${pkg}/completions/atoll.bash"
"$atoll" completions zsh >"${pkg}/completions/_atoll"
"$atoll" completions fish >"${pkg}/completions/atoll.fish"
CARGO_TARGET_DIR="$target" bash crates/atoll-client-c/install.sh --no-build --release \
    --prefix /usr --destdir "${pkg}/c" --no-static --strip

# cargo deb prints the package's path on stdout.
deb=$(cargo deb -p atoll-cli --no-build --strip --no-separate-debug-symbols --output "${target}/debian/")
bash packaging/check-deb.sh "$deb" >&2
echo "$deb"
