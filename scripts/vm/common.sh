# shellcheck shell=bash
# Shared helpers for the VM rig scripts (sourced, not executed).
#
# VM_KERNEL picks the guest kernel (every script honours it):
#   backports  Debian bookworm-backports' linux-image-amd64 (6.12 today; has
#              cpuset.cpus.exclusive and remote partitions). The default.
#   stable     Debian bookworm's linux-image-amd64 (6.1).
#
# Downloads are cached outside the checkout, so that every clone, worktree and
# CI run on the machine reuses them; per-run outputs stay in the checkout:
#   $VM_CACHE = ${ATOLL_VM_CACHE:-$HOME/.cache/atoll-vm}
#   $VM_CACHE/apt/<kernel>/        private apt configuration, package lists and cache
#                                  (the machine's own apt sources are not touched)
#   $VM_CACHE/kernels/<kernel>/debs/      the cached kernel .deb
#   $VM_CACHE/kernels/<kernel>/boot/      vmlinuz, config, the few .ko files the guest needs
#   $VM_CACHE/kernels/<kernel>/kernel.env what setup.sh found (sourced by the other scripts)
#   $VM_CACHE/systemd/             the systemd guest images (scripts/vm/systemd/)
#   vm/build/ (in the checkout, gitignored): initramfs-<kernel>.cpio.gz,
#                                  serial-<kernel>.log, benchmark outputs, systemd-<kernel>/

VM_REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck disable=SC2034 # used by the scripts that source this file
VM_BUILD="${VM_REPO_ROOT}/vm/build"
VM_CACHE="${ATOLL_VM_CACHE:-${HOME:-/root}/.cache/atoll-vm}"
export DEBIAN_FRONTEND=noninteractive

VM_KERNEL="${VM_KERNEL:-backports}"
case "${VM_KERNEL}" in
    stable | backports) ;;
    *) printf 'vm: error: VM_KERNEL=%s: expected stable or backports\n' "${VM_KERNEL}" >&2; exit 1 ;;
esac
export VM_KERNEL
VM_KDIR="${VM_CACHE}/kernels/${VM_KERNEL}"
VM_APT_DIR="${VM_CACHE}/apt/${VM_KERNEL}"
VM_DEBIAN_MIRROR="${VM_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
VM_DEBIAN_SECURITY_MIRROR="${VM_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"

vm_log() { printf 'vm: %s\n' "$*" >&2; }
vm_die() { printf 'vm: error: %s\n' "$*" >&2; exit 1; }

# vm_lock NAME: holds $VM_CACHE/.lock-NAME (file descriptor 9) until the
# script exits, so that two checkouts filling the shared cache at the same
# time wait for each other instead of racing.
vm_lock() {
    mkdir -p "${VM_CACHE}"
    exec 9>"${VM_CACHE}/.lock-$1"
    if ! flock -n 9; then
        vm_log "waiting for another run to release ${VM_CACHE}/.lock-$1"
        flock 9
    fi
}

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

# Loads $VM_CACHE/kernels/$VM_KERNEL/kernel.env written by setup.sh
# (VM_KERNEL_PKG, VM_KVER, VM_KERNEL_IMAGE, VM_KERNEL_CONFIG, VM_MODULES_DIR).
vm_load_kernel_env() {
    [ -f "${VM_KDIR}/kernel.env" ] ||
        vm_die "no ${VM_KDIR}/kernel.env: run VM_KERNEL=${VM_KERNEL} scripts/vm/setup.sh first"
    # shellcheck source=/dev/null
    . "${VM_KDIR}/kernel.env"
}

# The private apt configuration of the selected kernel: the Debian suites it
# comes from, in a deb822 file of its own; lists and caches under
# $VM_APT_DIR. Nothing of the machine's apt sources or lists is read or written.
vm_kernel_apt_config() {
    local parts="${VM_APT_DIR}/sources.list.d" src
    mkdir -p "${parts}" "${VM_APT_DIR}/preferences.d" "${VM_APT_DIR}/lists/partial" \
        "${VM_APT_DIR}/cache/archives/partial"
    case "${VM_KERNEL}" in
        backports)
            src="Types: deb
URIs: ${VM_DEBIAN_MIRROR}
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
            ;;
        stable)
            src="Types: deb
URIs: ${VM_DEBIAN_MIRROR}
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${VM_DEBIAN_SECURITY_MIRROR}
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
            ;;
    esac
    # A changed source (another mirror) invalidates the lists.
    if [ "$(cat "${parts}/vm-kernel.sources" 2>/dev/null)" != "${src}" ]; then
        printf '%s\n' "${src}" >"${parts}/vm-kernel.sources"
        find "${VM_APT_DIR}/lists" -maxdepth 1 -type f -delete
    fi
}

# apt-get / apt-cache with the private configuration (see vm_kernel_apt_config).
vm_kapt_opts() {
    VM_KAPT_OPTS=(-o "Dir::Etc::sourcelist=/dev/null"
        -o "Dir::Etc::sourceparts=${VM_APT_DIR}/sources.list.d"
        -o "Dir::Etc::preferences=/dev/null"
        -o "Dir::Etc::preferencesparts=${VM_APT_DIR}/preferences.d"
        -o "Dir::State::Lists=${VM_APT_DIR}/lists"
        -o "Dir::Cache=${VM_APT_DIR}/cache"
        -o "APT::Sandbox::User=root")
}
vm_kapt_get() { vm_kapt_opts; apt-get -q "${VM_KAPT_OPTS[@]}" "$@"; }
vm_kapt_cache() { vm_kapt_opts; apt-cache "${VM_KAPT_OPTS[@]}" "$@"; }

VM_KAPT_UPDATED=0
# `apt-get update` of the private lists, at most once per script run.
vm_kapt_update() {
    if [ "${VM_KAPT_UPDATED}" = 0 ]; then
        vm_log "apt-get update (private lists for the ${VM_KERNEL} kernel in ${VM_APT_DIR})"
        vm_kapt_get update >/dev/null
        VM_KAPT_UPDATED=1
    fi
}
