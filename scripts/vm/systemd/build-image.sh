#!/usr/bin/env bash
# Builds the Debian 12 (bookworm) + systemd guest image, or finds it cached.
#
#   build-image.sh [--kernel backports|stable] [--rebuild]
#
# mmdebstrap (root mode, --variant=required, no Recommends) installs the
# packages of packages.txt plus linux-image-amd64 from bookworm-backports
# (--kernel backports, 6.12, the default) or bookworm (--kernel stable, 6.1)
# into a directory; the kernel's postinst builds a small initrd with
# initramfs-tools (virtio-blk, ext4; see image/). hooks.sh adds the test
# units (image/atoll-vmtest.{target,service}, /usr/local/sbin/atoll-vmtest).
# `mkfs.ext4 -d` turns the directory into a raw ext4 image: no loop mount.
#
# Output, in $VM_CACHE/systemd/<kernel>-<key>/ ($VM_CACHE: ATOLL_VM_CACHE or
# ~/.cache/atoll-vm):
#   base.raw     the root file system (sparse; runs boot a qcow2 overlay of it)
#   vmlinuz, initrd.img   the kernel and initrd from the image's /boot
#   packages.list         the packages in the image (name version)
#   image.env    VM_SD_KVER, VM_SD_SYSTEMD, VM_SD_KEY, VM_SD_BUILT; written
#                last, so an image without it is incomplete
# <key> is a hash of this script, hooks.sh, the names in packages.txt,
# image/* and the kernel choice: changing any of them builds a new image on
# the next run.
# The image's package versions are those of the day it was built; --rebuild
# (or VM_IMAGE_REBUILD=1) builds it again from today's archive. The .debs
# are cached in $VM_CACHE/systemd/debs/ for the next build. A build deletes
# images not booted for 14 days and keeps three per kernel (the least
# recently booted go). Prints the image directory on stdout.
#
# Environment: VM_DEBIAN_MIRROR, VM_DEBIAN_SECURITY_MIRROR (see common.sh),
# VM_IMAGE_FREE_MB (free space in the image, default 1536).
# The whole script is one { } block, which bash reads before running any of
# it: editing this file during a (long) build does not derail that build.
{
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

rebuild="${VM_IMAGE_REBUILD:-0}"
while [ $# -gt 0 ]; do
    case "$1" in
        --kernel) VM_KERNEL="$2"; export VM_KERNEL; shift 2 ;;
        --rebuild) rebuild=1; shift ;;
        -h | --help) sed -n '2,31p' "$0"; exit 0 ;;
        *) printf 'vm: error: unknown argument %s\n' "$1" >&2; exit 1 ;;
    esac
done
# shellcheck source=scripts/vm/common.sh
. "${here}/../common.sh"
[ "$(id -u)" = 0 ] || vm_die "build-image.sh needs root (apt-get, mmdebstrap --mode=root)"

case "${VM_KERNEL}" in
    backports) kernel_pkg=linux-image-amd64/bookworm-backports ;;
    stable) kernel_pkg=linux-image-amd64 ;;
esac
mapfile -t packages < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "${here}/packages.txt")
packages+=("${kernel_pkg}")

# --- the key ------------------------------------------------------------------
key="$(
    {
        printf 'kernel=%s\n' "${kernel_pkg}"
        printf 'package=%s\n' "${packages[@]}"
        for f in "${here}/build-image.sh" "${here}/hooks.sh" "${here}"/image/*; do
            printf '== %s\n' "${f##*/}"
            cat "${f}"
        done
    } | sha256sum | cut -c1-16
)"
sd_root="${VM_CACHE}/systemd"
out="${sd_root}/${VM_KERNEL}-${key}"
cached() { [ "${rebuild}" != 1 ] && [ -f "${out}/image.env" ] && [ -f "${out}/base.raw" ]; }
if cached; then
    vm_log "systemd image ${out##*/} is cached"
    echo "${out}"
    exit 0
fi
# Only one build at a time in the cache (another checkout may be building
# the same image: then it is there when the lock is ours).
mkdir -p "${sd_root}"
vm_lock "systemd-image"
if cached; then
    vm_log "systemd image ${out##*/} was built meanwhile"
    echo "${out}"
    exit 0
fi

# Old images go: those nobody booted for 14 days, and all but the two most
# recently used of this kernel (the new one makes three). last-used is
# touched by every run.
{
    find "${sd_root}" -mindepth 2 -maxdepth 2 -name last-used -mtime +14 -printf '%h\n'
    find "${sd_root}" -mindepth 2 -maxdepth 2 -path "${sd_root}/${VM_KERNEL}-*/last-used" \
        -printf '%T@ %h\n' | sort -rn | tail -n +3 | cut -d' ' -f2-
} | sort -u | while read -r old; do
    [ "${old}" = "${out}" ] && continue
    vm_log "deleting the old image ${old}"
    rm -rf --one-file-system "${old}"
done

vm_apt_install mmdebstrap e2fsprogs debian-archive-keyring qemu-utils

# --- mmdebstrap into a directory -----------------------------------------------
tmp="$(mktemp -d "${sd_root}/build.XXXXXX")"
# mmdebstrap unmounts what it mounted in the root, even when it fails; were
# anything left (a killed run), it is unmounted before the directory goes.
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
    local m
    while read -r m; do
        umount -l "${m}" 2>/dev/null || true
    done < <(awk -v t="${tmp}/" 'index($5, t) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
    rm -rf --one-file-system "${tmp}"
}
trap cleanup EXIT
root="${tmp}/root"
export VM_SD_FILES="${here}/image" VM_SD_DEBCACHE="${sd_root}/debs"
mirror="${VM_DEBIAN_MIRROR}"
security="${VM_DEBIAN_SECURITY_MIRROR}"
include="$(IFS=,; echo "${packages[*]}")"
start=$(date +%s)
vm_log "building the systemd image ${out##*/} (mmdebstrap bookworm, ${#packages[@]} packages; log: ${tmp}/mmdebstrap.log)"
# bookworm-backports is in every image's sources (its packages have a low
# priority, so only what is asked for comes from there): then the cached
# .debs of both kernels survive apt-get autoclean in either build. The hooks
# are run by mmdebstrap's sh, which sets $1 to the new root.
# shellcheck disable=SC2016
if ! LC_ALL=C.UTF-8 nice -n 10 mmdebstrap --mode=root --variant=required --format=directory \
    --aptopt='Acquire::Retries "3"' --aptopt='APT::Sandbox::User "root"' \
    --include="${include}" \
    --skip=essential/unlink --skip=cleanup/reproducible \
    --setup-hook='bash "$VM_SD_FILES/../hooks.sh" setup "$1"' \
    --essential-hook='bash "$VM_SD_FILES/../hooks.sh" essential "$1"' \
    --customize-hook='bash "$VM_SD_FILES/../hooks.sh" customize "$1"' \
    bookworm "${root}" \
    "deb ${mirror} bookworm main" \
    "deb ${mirror} bookworm-updates main" \
    "deb ${security} bookworm-security main" \
    "deb ${mirror} bookworm-backports main" \
    >"${tmp}/mmdebstrap.log" 2>&1; then
    tail -n 30 "${tmp}/mmdebstrap.log" | sed 's/^/  mmdebstrap| /' >&2
    vm_die "mmdebstrap failed"
fi
vm_log "mmdebstrap took $(($(date +%s) - start))s"

# --- kernel, initrd, manifest -----------------------------------------------------
kver="$(find "${root}/boot" -maxdepth 1 -name 'vmlinuz-*' | sed 's|.*/vmlinuz-||' | sort -V | tail -n 1)"
if [ -z "${kver}" ] || [ ! -f "${root}/boot/initrd.img-${kver}" ]; then
    vm_die "no vmlinuz/initrd.img in the image's /boot"
fi
# shellcheck disable=SC2016 # dpkg-query's format
systemd_version="$(chroot "${root}" dpkg-query -W -f '${Version}' systemd)"
mkdir -p "${tmp}/out"
cp "${root}/boot/vmlinuz-${kver}" "${tmp}/out/vmlinuz"
cp "${root}/boot/initrd.img-${kver}" "${tmp}/out/initrd.img"
cp "${root}/boot/config-${kver}" "${tmp}/out/config"
# shellcheck disable=SC2016 # dpkg-query's format
chroot "${root}" dpkg-query -W -f '${Package} ${Version}\n' >"${tmp}/out/packages.list"
cp "${tmp}/mmdebstrap.log" "${tmp}/out/mmdebstrap.log"

# --- the ext4 image ----------------------------------------------------------------
used_mb=$(du -sm --one-file-system "${root}" | cut -f1)
size_mb=$((used_mb + used_mb / 5 + ${VM_IMAGE_FREE_MB:-1536}))
truncate -s "${size_mb}M" "${tmp}/out/base.raw"
mkfs.ext4 -q -F -L atoll-root -m 0 -d "${root}" "${tmp}/out/base.raw" "${size_mb}M"
cat >"${tmp}/out/image.env" <<EOF
# Written by scripts/vm/systemd/build-image.sh
VM_SD_KEY=${key}
VM_SD_KERNEL=${VM_KERNEL}
VM_SD_KVER=${kver}
VM_SD_SYSTEMD=${systemd_version}
VM_SD_BUILT='$(date -u +%Y-%m-%dT%H:%M:%SZ)'
EOF
touch "${tmp}/out/last-used"
rm -rf --one-file-system "${root}" "${out}"
mv "${tmp}/out" "${out}"
vm_log "systemd image ready in $(($(date +%s) - start))s: ${out} (kernel ${kver}, systemd ${systemd_version}," \
    "$(wc -l <"${out}/packages.list") packages, ${used_mb} MB of files, image ${size_mb} MB sparse," \
    "$(du -m "${out}/base.raw" | cut -f1) MB on disk)"
echo "${out}"
exit 0
}
