#!/usr/bin/env bash
# The one entry point of the VM rig: prepare the host, build atoll, build the
# initramfs, boot the VM and run the guest tests.
#
#   test.sh [run.sh options]        (default: --test all)
#
# VM_KERNEL=backports|stable picks the guest kernel (default backports, 6.12).
# ATOLL_BIN=PATH skips the cargo build and uses that binary.
# VM_TESTS=a,b puts only those guest tests into the initramfs.
set -euo pipefail
# shellcheck source=scripts/vm/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
here="${VM_REPO_ROOT}/scripts/vm"

bash "${here}/setup.sh"

if [ -z "${ATOLL_BIN:-}" ]; then
    vm_log "cargo build --release -p atoll-cli"
    (cd "${VM_REPO_ROOT}" && cargo build --release -p atoll-cli)
    ATOLL_BIN="${CARGO_TARGET_DIR:-${VM_REPO_ROOT}/target}/release/atoll"
fi

bash "${here}/build-initramfs.sh" --atoll "${ATOLL_BIN}" ${VM_TESTS:+--tests "${VM_TESTS}"}

# All tests take a few minutes under TCG; run.sh's own default is 300 s.
[ $# -gt 0 ] || set -- --test all --timeout 900
exec bash "${here}/run.sh" "$@"
