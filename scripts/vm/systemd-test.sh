#!/usr/bin/env bash
# The one entry point of the systemd VM rig: a Debian 12 guest with systemd
# as PID 1 (cgroup v2 unified), nginx and postgresql, 8 vCPUs, 2 NUMA nodes.
#
#   systemd-test.sh [--kernel backports|stable] [--test NAME|a,b|all]
#                   [scripts/vm/systemd/run.sh options]
#
# Builds the guest image if it is not cached ($ATOLL_VM_CACHE or
# ~/.cache/atoll-vm/systemd/), builds atoll unless ATOLL_BIN=PATH names a
# binary, builds atoll's .deb from this checkout's release binary unless
# ATOLL_DEB=PATH names one (packaging/build-deb.sh), builds the systemd
# driver's probe (cargo build --release -p atoll-systemd --example
# systemd-probe, for the `driver` test) unless ATOLL_SDPROBE=PATH names
# one, boots a copy-on-write overlay of the image, runs the guest tests of
# tests/vm-systemd/ and exits 0 only if all passed. The last line is
# "vm: N passed, M failed". --kernel also reads VM_KERNEL (default
# backports: bookworm-backports' 6.12; stable: bookworm's 6.1).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/vm/common.sh
. "${here}/common.sh"

args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --kernel) VM_KERNEL="$2"; shift 2 ;;
        -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
        *) args+=("$1"); shift ;;
    esac
done
case "${VM_KERNEL}" in
    stable | backports) export VM_KERNEL ;;
    *) vm_die "--kernel ${VM_KERNEL}: expected stable or backports" ;;
esac
[ "$(id -u)" = 0 ] || vm_die "systemd-test.sh needs root (apt-get, mmdebstrap, qemu)"
vm_apt_install qemu-system-x86 qemu-utils mmdebstrap e2fsprogs debian-archive-keyring

start=$(date +%s)
bash "${here}/systemd/build-image.sh" >/dev/null
vm_log "image ready after $(($(date +%s) - start))s"

if [ -z "${ATOLL_BIN:-}" ]; then
    vm_log "cargo build --release -p atoll-cli -p atoll-client-c"
    (cd "${VM_REPO_ROOT}" && cargo build --release -p atoll-cli -p atoll-client-c)
    ATOLL_BIN="${CARGO_TARGET_DIR:-${VM_REPO_ROOT}/target}/release/atoll"
fi
# atoll's .deb for the tests that install it (deb, service, svckill,
# svcstop): ATOLL_DEB=path, else built from the release binary of this
# checkout and the C client library (packaging/build-deb.sh; cargo-deb is
# installed if missing).
if [ -z "${ATOLL_DEB:-}" ]; then
    deb_start=$(date +%s)
    release="${CARGO_TARGET_DIR:-${VM_REPO_ROOT}/target}/release"
    if [ ! -x "${release}/atoll" ] || [ ! -e "${release}/libatoll_client.so" ]; then
        ATOLL_DEB="$(cd "${VM_REPO_ROOT}" && bash packaging/build-deb.sh | tail -n 1)"
    else
        ATOLL_DEB="$(cd "${VM_REPO_ROOT}" && bash packaging/build-deb.sh --no-build | tail -n 1)"
    fi
    vm_log "package ${ATOLL_DEB} built in $(($(date +%s) - deb_start))s"
fi

# The driver test's program: the systemd driver against systemd itself.
if [ -z "${ATOLL_SDPROBE:-}" ]; then
    vm_log "cargo build --release -p atoll-systemd --example systemd-probe"
    (cd "${VM_REPO_ROOT}" && cargo build --release -p atoll-systemd --example systemd-probe)
    ATOLL_SDPROBE="${CARGO_TARGET_DIR:-${VM_REPO_ROOT}/target}/release/examples/systemd-probe"
fi

exec bash "${here}/systemd/run.sh" --atoll "${ATOLL_BIN}" --deb "${ATOLL_DEB}" --bin "${ATOLL_SDPROBE}" "${args[@]+"${args[@]}"}"
