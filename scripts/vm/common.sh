# shellcheck shell=bash
# Shared helpers for the VM rig scripts (sourced, not executed).
#
# Paths are repo-relative so the rig works from any fresh clone:
#   vm/build/            everything the rig downloads or builds (gitignored)
#   vm/build/debs/       cached .deb files (kernel image)
#   vm/build/kernel/     vmlinuz, config and the few .ko files the guest needs
#   vm/build/kernel.env  what setup.sh found (sourced by the other scripts)

VM_REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VM_BUILD="${VM_REPO_ROOT}/vm/build"
export DEBIAN_FRONTEND=noninteractive

vm_log() { printf 'vm: %s\n' "$*" >&2; }
vm_die() { printf 'vm: error: %s\n' "$*" >&2; exit 1; }

# True if the Debian package $1 is installed.
vm_pkg_installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

VM_APT_UPDATED=0
# Runs `apt-get update` at most once per script run.
vm_apt_update() {
    if [ "${VM_APT_UPDATED}" = 0 ]; then
        vm_log "apt-get update"
        apt-get update -q >/dev/null
        VM_APT_UPDATED=1
    fi
}

# Installs the given packages if any is missing (no recommends, no prompts).
vm_apt_install() {
    local missing=() p
    for p in "$@"; do
        vm_pkg_installed "$p" || missing+=("$p")
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    vm_log "installing ${missing[*]}"
    # A stale or empty package list fails the install: update once and retry.
    if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
        vm_apt_update
        apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
    fi
}

# Loads vm/build/kernel.env written by setup.sh.
vm_load_kernel_env() {
    [ -f "${VM_BUILD}/kernel.env" ] || vm_die "no ${VM_BUILD}/kernel.env: run scripts/vm/setup.sh first"
    # shellcheck source=/dev/null
    . "${VM_BUILD}/kernel.env"
}
