#!/usr/bin/env bash
# The lint tools that scripts/test.sh runs besides cargo's own, at pinned
# versions, installed on first use into a cache that outlives the work tree:
#
#   lint-tools.sh cargo-deny|typos    prints the path of the tool's binary,
#                                     installing it first if it is missing
#
# ATOLL_TOOLS_CACHE overrides the cache (default ~/.cache/atoll-tools). Each
# version has its own directory there, so changing a pin below installs the
# new version beside the old one.
#
# typos comes as the release binary inside the typos wheel its authors
# publish on PyPI, fetched with pip, checked against the sha256 pinned below
# (pip refuses any other file) and unpacked; where that wheel does not fit
# (not x86_64 Linux) or pip is missing, it is built with
# `cargo install --locked` from crates.io like cargo-deny. cargo-deny has
# no such registry package from its authors, so it is always built that
# way (once per machine; a few minutes). Both come only from the package
# registries: these machines and CI reach nothing else.
set -euo pipefail

CARGO_DENY_VERSION=0.20.2
TYPOS_VERSION=1.52.0
TYPOS_WHEEL_PLATFORM=manylinux_2_17_x86_64
TYPOS_WHEEL_SHA256=418fd85f7fc11dec14e5482e747f6e916af56da96207cde0cdd69540a4b389f6

cache="${ATOLL_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/atoll-tools}"

log() { echo "lint-tools: $*" >&2; }

# cargo install CRATE VERSION BIN: builds the crate from crates.io with its
# own lock file into $cache/BIN-VERSION and prints the binary's path.
cargo_install() {
  local crate="$1" version="$2" bin="$3"
  local root="$cache/$bin-$version"
  if [ ! -x "$root/bin/$bin" ]; then
    log "building $crate $version with cargo install (once per machine)"
    # A temporary target directory, not the workspace's: the tool is not
    # part of atoll's build.
    env -u CARGO_TARGET_DIR cargo install --quiet --locked --version "=$version" \
      --root "$root" "$crate" >&2
  fi
  echo "$root/bin/$bin"
}

typos_from_wheel() {
  local root="$cache/typos-$TYPOS_VERSION"
  local tmp
  tmp="$(mktemp -d)"
  # shellcheck disable=SC2064 # expand $tmp now
  trap "rm -rf '$tmp'; trap - RETURN" RETURN
  printf 'typos==%s --hash=sha256:%s\n' "$TYPOS_VERSION" "$TYPOS_WHEEL_SHA256" >"$tmp/req.txt"
  log "fetching typos $TYPOS_VERSION (the release binary in its wheel, sha256 pinned)"
  python3 -m pip download --quiet --disable-pip-version-check --no-deps \
    --require-hashes --only-binary=:all: --platform "$TYPOS_WHEEL_PLATFORM" \
    -r "$tmp/req.txt" -d "$tmp/wheel" >&2 || return 1
  # pip checked the hash; check it again on the file itself, so that a pip
  # that ignored --require-hashes cannot slip another binary in.
  local whl
  whl="$(echo "$tmp"/wheel/typos-"$TYPOS_VERSION"-*.whl)"
  echo "$TYPOS_WHEEL_SHA256  $whl" | sha256sum --check --quiet >&2 || return 1
  python3 -m zipfile -e "$whl" "$tmp/unpacked" || return 1
  mkdir -p "$root/bin" || return 1
  install -m 0755 "$tmp/unpacked/typos-$TYPOS_VERSION.data/scripts/typos" "$root/bin/typos.part" \
    && mv "$root/bin/typos.part" "$root/bin/typos"
}

typos_path() {
  local bin="$cache/typos-$TYPOS_VERSION/bin/typos"
  if [ ! -x "$bin" ] && [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ] \
    && python3 -m pip --version >/dev/null 2>&1; then
    typos_from_wheel || log "the typos wheel could not be installed; building it instead"
  fi
  if [ -x "$bin" ]; then
    echo "$bin"
  else
    cargo_install typos-cli "$TYPOS_VERSION" typos
  fi
}

case "${1:-}" in
  cargo-deny) cargo_install cargo-deny "$CARGO_DENY_VERSION" cargo-deny ;;
  typos) typos_path ;;
  *)
    echo "usage: $0 cargo-deny|typos" >&2
    exit 2
    ;;
esac
