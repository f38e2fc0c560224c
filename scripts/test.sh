#!/usr/bin/env bash
# The whole test suite, as the README and CI run it:
#   1. gates: cargo fmt --check; with a nightly rustfmt (installed through
#      rustup when missing and possible) the nightly-only options of
#      .rustfmt-nightly.toml (imports grouped std, other crates, this crate);
#      cargo clippy -D warnings (with the workspace lints of Cargo.toml);
#      cargo deny (licenses, bans, sources: deny.toml) and typos
#      (_typos.toml), both at versions pinned in scripts/lint-tools.sh,
#      which installs them into ~/.cache/atoll-tools when missing
#   2. cargo test: unit tests on fake sysfs/cgroupfs/proc trees, plus the
#      real cgroup v1 tests on this machine (they skip themselves, saying why,
#      when not root or when the v1 hierarchies are not writable), `atoll
#      top` under tmux (installs tmux) and a real Prometheus scraping a daemon
#      (installs Debian's prometheus); then the C and Python client libraries
#      against a fake daemon (clients/test.sh)
#   3. the qemu VM tests: real cgroup v2 kernels (Debian's 6.12 from
#      backports and its stable 6.1), 8 vCPUs, 2 NUMA nodes (installs
#      qemu-system-x86, busybox-static and the kernel images); then the
#      systemd guest (Debian 12, systemd as PID 1) with atoll's .deb
#      (installs mmdebstrap and cargo-deb, builds the image once)
# Options: --no-vm skips step 3; --vm-only runs only step 3.
set -euo pipefail
cd "$(dirname "$0")/.."

run_unit=1
run_vm=1
for arg in "$@"; do
  case "$arg" in
    --no-vm) run_vm=0 ;;
    --vm-only) run_unit=0 ;;
    *) echo "usage: $0 [--no-vm|--vm-only]" >&2; exit 2 ;;
  esac
done

if ! command -v cargo >/dev/null 2>&1; then
  echo "test.sh: cargo is required (install Rust with rustup)" >&2
  exit 1
fi

status=0
if [ "$run_unit" = 1 ]; then
  echo "== cargo fmt --check"
  cargo fmt --all -- --check
  # Options only nightly rustfmt has (stable rustfmt warns about them on
  # every file, so they are not in rustfmt.toml).
  if ! cargo +nightly fmt --version >/dev/null 2>&1 && command -v rustup >/dev/null 2>&1; then
    echo "== installing nightly rustfmt"
    rustup toolchain install nightly --profile minimal --component rustfmt >/dev/null 2>&1 || true
  fi
  if cargo +nightly fmt --version >/dev/null 2>&1; then
    echo "== cargo +nightly fmt --check --config-path .rustfmt-nightly.toml"
    cargo +nightly fmt --all -- --check --config-path .rustfmt-nightly.toml
  else
    echo "== skipped: cargo +nightly fmt --check (no nightly rustfmt could be installed)"
  fi
  echo "== cargo clippy --all-targets -- -D warnings"
  cargo clippy --workspace --all-targets --locked -- -D warnings
  echo "== cargo deny check licenses bans sources"
  cargo_deny="$(bash scripts/lint-tools.sh cargo-deny)"
  "$cargo_deny" --locked check -D warnings licenses bans sources
  echo "== typos"
  typos="$(bash scripts/lint-tools.sh typos)"
  "$typos"
  # tmux runs `atoll top` in a real terminal (crates/atoll-cli/tests/top_tmux.rs).
  if ! command -v tmux >/dev/null 2>&1; then
    echo "== installing tmux"
    { apt-get update -q && apt-get install -y -q tmux; } >/dev/null ||
      echo "tmux could not be installed: the tmux test of atoll top will say it skipped"
  fi
  # The Prometheus test (crates/atoll-cli/tests/metrics_scrape.rs) runs
  # Debian's prometheus itself; the package's service is not started (a
  # policy-rc.d refuses it while installing, unless one is already there).
  if ! command -v prometheus >/dev/null 2>&1; then
    echo "== installing prometheus"
    policy=/usr/sbin/policy-rc.d
    own_policy=0
    if [ ! -e "$policy" ]; then
      printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && own_policy=1
    fi
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus; } >/dev/null ||
      echo "could not install prometheus: the Prometheus test will skip"
    if [ "$own_policy" = 1 ]; then rm -f "$policy"; fi
  fi
  # nft and ip drive the network-island tests (crates/atoll-net/tests/
  # real_nft.rs, real_tc.rs); they say they skipped without them.
  if ! command -v nft >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1; then
    echo "== installing nftables iproute2"
    { apt-get update -q && apt-get install -y -q nftables iproute2; } >/dev/null ||
      echo "could not install nftables/iproute2: the nft and tc tests will skip"
  fi
  echo "== cargo test"
  test_log="${CARGO_TARGET_DIR:-target}/cargo-test.log"
  mkdir -p "$(dirname "$test_log")"
  cargo test --workspace --locked 2>&1 | tee "$test_log" || { status=1; echo "cargo test FAILED (see the errors above)"; }
  # One closing line for the whole cargo run, from cargo's own per-binary lines.
  awk '/^test result:/ { p += $4; f += $6; i += $8 } END { printf "cargo: %d passed, %d failed, %d skipped\n", p, f, i }' "$test_log"
  # The C and Python client libraries need a C compiler, nm, pkg-config,
  # python3 and its venv module (pip in a fresh virtual environment).
  missing=""
  command -v cc >/dev/null 2>&1 || missing="$missing gcc"
  command -v nm >/dev/null 2>&1 || missing="$missing binutils"
  command -v pkg-config >/dev/null 2>&1 || missing="$missing pkg-config"
  command -v python3 >/dev/null 2>&1 || missing="$missing python3"
  python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing="$missing python3-venv"
  if [ -n "$missing" ]; then
    echo "== installing${missing}"
    # shellcheck disable=SC2086 # a list of package names
    { apt-get update -q && apt-get install -y -q $missing; } >/dev/null
  fi
  echo "== client libraries (C and Python)"
  bash clients/test.sh || status=1
fi
if [ "$run_vm" = 1 ]; then
  # Debian's backports kernel (6.12: islands are real partitions) and its
  # stable one (6.1: the kernel refuses them and atoll must fall back).
  echo "== VM tests on Linux 6.12 (cgroup v2, 8 vCPUs, 2 NUMA nodes)"
  VM_KERNEL=backports bash scripts/vm/test.sh || status=1
  echo "== VM tests on Linux 6.1"
  VM_KERNEL=stable bash scripts/vm/test.sh || status=1
  # Debian 12 with systemd 252 as PID 1 (Linux 6.12): atoll's .deb and
  # atoll.service (delegation, start, kill and restart, stop).
  echo "== VM tests under systemd (atoll.service from the .deb)"
  bash scripts/vm/systemd-test.sh || status=1
fi
exit "$status"
