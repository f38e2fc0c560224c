#!/usr/bin/env bash
# Prepares the host for the VM rig. Idempotent: a second run downloads nothing.
#
#  1. installs qemu-system-x86, busybox-static and debian-archive-keyring
#     (the machine's `apt-get update` runs only if an install fails);
#  2. resolves the image package Debian's linux-image-amd64 depends on, in the
#     suite VM_KERNEL selects (backports: bookworm-backports, 6.12 today;
#     stable: bookworm + bookworm-updates + bookworm-security, 6.1), through a
#     private apt configuration under $VM_CACHE/apt/$VM_KERNEL/ (the machine's
#     apt sources are neither used nor changed); `apt-get download`s it into
#     $VM_CACHE/kernels/$VM_KERNEL/debs/ WITHOUT installing it, unpacks it with
#     dpkg -x and keeps vmlinuz, its config and any module the guest needs in
#     $VM_CACHE/kernels/$VM_KERNEL/boot/ ($VM_CACHE: see common.sh, default
#     ~/.cache/atoll-vm, ATOLL_VM_CACHE overrides it);
#  3. checks the kernel config for what atoll's tests need; an option that is
#     built as a module gets its .ko (and dependencies) listed for the initramfs.
#
# Environment:
#   VM_KERNEL          backports (default) or stable
#   VM_KERNEL_PKG      use this image package instead of resolving linux-image-amd64
#   VM_EXTRA_MODULES   extra module names to load in the guest (space separated)
#   VM_APT_UPDATE=1    refresh the private package lists (picks up a newer kernel)
#   VM_DEBIAN_MIRROR, VM_DEBIAN_SECURITY_MIRROR   other Debian mirrors
#   ATOLL_VM_CACHE     the download cache (default ~/.cache/atoll-vm)
#
# Writes $VM_CACHE/kernels/$VM_KERNEL/kernel.env (VM_KERNEL_PKG, VM_KVER,
# VM_KERNEL_IMAGE, VM_KERNEL_CONFIG, VM_MODULES_DIR).
set -euo pipefail
# shellcheck source=scripts/vm/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

[ "$(id -u)" = 0 ] || vm_die "setup.sh needs root (apt-get)"

# Options that must be built in (booleans, or things the boot needs before /init).
REQUIRED_BUILTIN=(
    CGROUPS CPUSETS CGROUP_SCHED FAIR_GROUP_SCHED CFS_BANDWIDTH MEMCG BLK_CGROUP
    SMP NUMA X86_64_ACPI_NUMA PSI
    BLK_DEV_INITRD RD_GZIP DEVTMPFS TMPFS PROC_FS SYSFS BINFMT_ELF BINFMT_SCRIPT
    SERIAL_8250 SERIAL_8250_CONSOLE FUTEX EPOLL INET
)
# Options that may be modules: CONFIG_NAME:module_name.
REQUIRED_TRISTATE=(
    UNIX:unix
    BLK_DEV_NULL_BLK:null_blk
)

vm_apt_install qemu-system-x86 busybox-static debian-archive-keyring

# The old single-kernel layout (vm/build/kernel, vm/build/debs) is superseded
# by vm/build/kernels/<kernel>/.
if [ -d "${VM_BUILD}/kernel" ] || [ -d "${VM_BUILD}/debs" ] || [ -f "${VM_BUILD}/kernel.env" ]; then
    vm_log "removing the old single-kernel cache (vm/build/kernel, vm/build/debs)"
    rm -rf "${VM_BUILD}/kernel" "${VM_BUILD}/debs" "${VM_BUILD}/kernel.env" \
        "${VM_BUILD}/initramfs.cpio.gz" "${VM_BUILD}/serial.log"
fi

# The kernels and their apt lists used to live in the checkout
# (vm/build/kernels/<kernel>, vm/build/apt/<kernel>): move them into the
# shared cache once (kernel.env is written anew, from the cached .deb).
vm_lock "kernel-${VM_KERNEL}"
for sub in kernels apt; do
    old="${VM_BUILD}/${sub}/${VM_KERNEL}"
    new="${VM_CACHE}/${sub}/${VM_KERNEL}"
    [ -d "${old}" ] || continue
    if [ -e "${new}" ]; then
        vm_log "removing ${old} (superseded by ${new})"
        rm -rf --one-file-system "${old}"
    else
        vm_log "moving ${old} to ${new}"
        mkdir -p "$(dirname "${new}")"
        mv "${old}" "${new}"
        rm -f "${new}/kernel.env"
    fi
    rmdir "${VM_BUILD}/${sub}" 2>/dev/null || true
done

# --- resolve the versioned kernel image package --------------------------------
vm_kernel_apt_config
if [ "${VM_APT_UPDATE:-0}" = 1 ]; then vm_kapt_update; fi

# The image package the candidate linux-image-amd64 depends on (empty if
# the lists are missing or do not have it).
resolve_kernel_pkg() {
    local info
    info="$(vm_kapt_cache show --no-all-versions linux-image-amd64 2>/dev/null)" || return 0
    sed -n 's/^Depends:.*\(linux-image-[0-9][^ ,]*\).*$/\1/p' <<<"${info}" | head -n 1
}

pkg="${VM_KERNEL_PKG:-}"
if [ -z "${pkg}" ]; then
    pkg="$(resolve_kernel_pkg)"
    if [ -z "${pkg}" ]; then
        vm_kapt_update
        pkg="$(resolve_kernel_pkg)"
    fi
fi
[ -n "${pkg}" ] || vm_die "could not resolve the image package of linux-image-amd64 (${VM_KERNEL})"

kdir="${VM_KDIR}/boot"
debs="${VM_KDIR}/debs"
modules_wanted="${VM_EXTRA_MODULES:-}"
make_stamp() { stamp="pkg=${pkg} tristate=${REQUIRED_TRISTATE[*]} extra=${modules_wanted}"; }
make_stamp

if [ -f "${kdir}/.stamp" ] && [ "$(cat "${kdir}/.stamp")" = "${stamp}" ] &&
    [ -f "${kdir}/vmlinuz" ] && [ -f "${VM_KDIR}/kernel.env" ] &&
    grep -qxF "VM_KERNEL_IMAGE=${kdir}/vmlinuz" "${VM_KDIR}/kernel.env"; then
    vm_log "kernel ${pkg} (${VM_KERNEL}) already prepared in ${kdir}"
    exit 0
fi

# --- download (cached) -------------------------------------------------------
mkdir -p "${debs}"
find_deb() { find "${debs}" -maxdepth 1 -name "${pkg}_*.deb" | sort | tail -n 1; }
download() { (cd "${debs}" && vm_kapt_get download "${pkg}" >/dev/null); }
deb="$(find_deb)"
if [ -z "${deb}" ]; then
    vm_log "downloading ${pkg} (${VM_KERNEL})"
    if ! download; then
        # Stale lists (the mirror dropped that version): refresh, resolve again.
        vm_kapt_update
        if [ -z "${VM_KERNEL_PKG:-}" ]; then
            pkg="$(resolve_kernel_pkg)"
            [ -n "${pkg}" ] || vm_die "could not resolve the image package of linux-image-amd64 (${VM_KERNEL})"
            make_stamp
        fi
        download || true
    fi
    deb="$(find_deb)"
    [ -n "${deb}" ] || vm_die "apt-get download ${pkg} produced no .deb"
fi
# Drop older kernels' debs so the cache does not grow with every update.
find "${debs}" -maxdepth 1 -name 'linux-image-*.deb' ! -path "${deb}" -delete

# --- unpack ----------------------------------------------------------------
mkdir -p "${VM_KDIR}"
tmp="$(mktemp -d "${VM_KDIR}/unpack.XXXXXX")"
trap 'rm -rf "${tmp}"' EXIT
vm_log "unpacking $(basename "${deb}")"
dpkg -x "${deb}" "${tmp}/root"
vmlinuz="$(find "${tmp}/root/boot" -maxdepth 1 -name 'vmlinuz-*' | head -n 1)"
[ -n "${vmlinuz}" ] || vm_die "no vmlinuz-* in ${deb}"
kver="${vmlinuz##*/vmlinuz-}"
config="${tmp}/root/boot/config-${kver}"
[ -f "${config}" ] || vm_die "no config-${kver} in ${deb}"
modroot="${tmp}/root/lib/modules/${kver}"
[ -d "${modroot}" ] || modroot="${tmp}/root/usr/lib/modules/${kver}"

# --- check the config ------------------------------------------------------
config_value() { sed -n "s/^CONFIG_$1=\(.*\)$/\1/p" "${config}" | head -n 1; }

missing=()
for opt in "${REQUIRED_BUILTIN[@]}"; do
    [ "$(config_value "${opt}")" = y ] || missing+=("CONFIG_${opt}=$(config_value "${opt}")")
done
for entry in "${REQUIRED_TRISTATE[@]}"; do
    opt="${entry%%:*}"
    case "$(config_value "${opt}")" in
        y) ;;
        m) modules_wanted="${modules_wanted} ${entry#*:}" ;;
        *) missing+=("CONFIG_${opt}=$(config_value "${opt}")") ;;
    esac
done
[ "${#missing[@]}" -eq 0 ] || vm_die "kernel ${kver} lacks: ${missing[*]}"
[ "$(config_value PSI_DEFAULT_DISABLED)" = y ] && vm_log "PSI is off by default in ${kver}; run.sh passes psi=1"

# --- collect modules (dependencies first) ----------------------------------
find_module() {
    local alt="${1//_/-}" alt2="${1//-/_}"
    find "${modroot}" \( -name "$1.ko*" -o -name "${alt}.ko*" -o -name "${alt2}.ko*" \) | head -n 1
}
# The `depends=` entry of the module's .modinfo section (NUL-separated strings).
module_depends() {
    local f="$1"
    case "${f}" in
        *.ko.xz) xz -dc "${f}" ;;
        *.ko.zst) zstd -dcq "${f}" ;;
        *.ko.gz) gzip -dc "${f}" ;;
        *) cat "${f}" ;;
    esac | tr '\0' '\n' | sed -n 's/^depends=//p' | head -n 1 | tr ',' ' '
}
order=()
visit() {
    local name="$1" f dep seen
    for seen in "${order[@]+"${order[@]}"}"; do
        [ "${seen}" = "${name}" ] && return 0
    done
    f="$(find_module "${name}")"
    [ -n "${f}" ] || vm_die "module ${name} not found under ${modroot}"
    for dep in $(module_depends "${f}"); do
        visit "${dep}"
    done
    order+=("${name}")
    case "${f}" in
        *.ko.xz) xz -dc "${f}" ;;
        *.ko.zst) zstd -dcq "${f}" ;;
        *.ko.gz) gzip -dc "${f}" ;;
        *) cat "${f}" ;;
    esac >"${tmp}/out/modules/${name}.ko"
}
mkdir -p "${tmp}/out/modules"
for m in ${modules_wanted}; do
    visit "${m}"
done
printf '%s\n' "${order[@]+"${order[@]}"}" >"${tmp}/out/modules/load-order"
[ "${#order[@]}" -eq 0 ] || vm_log "guest modules: ${order[*]}"

cp "${vmlinuz}" "${tmp}/out/vmlinuz"
cp "${config}" "${tmp}/out/config"
printf '%s\n' "${stamp}" >"${tmp}/out/.stamp"
rm -rf "${kdir}"
mv "${tmp}/out" "${kdir}"

cat >"${VM_KDIR}/kernel.env" <<EOF
# Written by scripts/vm/setup.sh (VM_KERNEL=${VM_KERNEL})
VM_KERNEL_PKG=${pkg}
VM_KVER=${kver}
VM_KERNEL_IMAGE=${kdir}/vmlinuz
VM_KERNEL_CONFIG=${kdir}/config
VM_MODULES_DIR=${kdir}/modules
EOF
vm_log "kernel ${kver} (${VM_KERNEL}) ready: ${kdir}/vmlinuz"
