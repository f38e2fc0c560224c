#!/usr/bin/env bash
# Builds vm/build/initramfs-$VM_KERNEL.cpio.gz for the test VM (the kernel's
# modules differ, so each kernel has its own).
#
#   build-initramfs.sh [--atoll PATH | PATH] [--tests NAME,NAME] [--out FILE]
#                      [--bin PATH]...
#
# Contents: busybox-static with an applet symlink for each applet, the atoll
# binary with every library ldd lists and the dynamic loader, the guest tests
# from tests/vm/ (all, or only --tests), examples/vm-8cpu.toml if present,
# any kernel modules setup.sh selected, and /init (scripts/vm/guest-init.sh).
# --bin PATH (repeatable) and VM_EXTRA_BINS="PATH ..." add host binaries the
# same way as atoll: each at /usr/bin/<its name> (a link is copied as the
# file it points to, under the link's name), with its libraries.
# A --tests name with no test_NAME.sh takes tests/vm/bench_NAME.sh (a
# benchmark; never copied otherwise). VM_INITRAMFS_ROOT overrides the
# staging directory (default vm/build/initramfs-root).
# The archive is written with `busybox cpio -o -H newc` (no cpio needed).
set -euo pipefail
# shellcheck source=scripts/vm/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

atoll=""
tests=""
# shellcheck disable=SC2206 # a space-separated list of paths
extra_bins=(${VM_EXTRA_BINS:-})
out="${VM_BUILD}/initramfs-${VM_KERNEL}.cpio.gz"
while [ $# -gt 0 ]; do
    case "$1" in
        --atoll) atoll="$2"; shift 2 ;;
        --tests) tests="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --bin) extra_bins+=("$2"); shift 2 ;;
        -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
        -*) vm_die "unknown option $1" ;;
        *) atoll="$1"; shift ;;
    esac
done

if [ -z "${atoll}" ]; then
    for c in "${CARGO_TARGET_DIR:-${VM_REPO_ROOT}/target}/release/atoll" \
        "${VM_REPO_ROOT}/target/release/atoll" "${VM_REPO_ROOT}/target/debug/atoll"; do
        if [ -x "${c}" ]; then atoll="${c}"; break; fi
    done
fi
if [ -z "${atoll}" ] || [ ! -x "${atoll}" ]; then
    vm_die "no atoll binary '${atoll}' (give its path, or cargo build --release -p atoll-cli)"
fi
vm_load_kernel_env
busybox="$(command -v busybox)" || vm_die "no busybox: run scripts/vm/setup.sh"
file -L "${busybox}" 2>/dev/null | grep -q 'dynamically linked' && vm_die "${busybox} is not static"

root="${VM_INITRAMFS_ROOT:-${VM_BUILD}/initramfs-root}"
rm -rf "${root}"
mkdir -p "${root}"/{bin,sbin,usr/bin,usr/sbin,dev,proc,sys,run,tmp,root,etc/atoll,lib/modules,tests/vm}

# busybox and its applets
cp "${busybox}" "${root}/bin/busybox"
while read -r applet; do
    applet="${applet#/}"
    [ -e "${root}/${applet}" ] || ln -s /bin/busybox "${root}/${applet}"
done < <("${busybox}" --list-full)

# install_bin SRC NAME: SRC (links followed) as /usr/bin/NAME, with every
# library ldd lists and the loader (same paths as on the host).
install_bin() {
    local ldd_out lib
    install -m 755 "$1" "${root}/usr/bin/$2"
    if ldd_out="$(ldd "$1" 2>/dev/null)"; then
        while read -r lib; do
            [ -e "${root}${lib}" ] && continue
            mkdir -p "${root}$(dirname "${lib}")"
            cp -L "${lib}" "${root}${lib}"
        done < <(printf '%s\n' "${ldd_out}" | grep -o '/[^ ]*' | sort -u)
    else
        vm_log "ldd: $1 is not dynamic; copying it alone"
    fi
}

install_bin "${atoll}" atoll
if command -v strip >/dev/null; then strip "${root}/usr/bin/atoll"; fi
for b in "${extra_bins[@]+"${extra_bins[@]}"}"; do
    if [ ! -f "${b}" ] || [ ! -x "${b}" ]; then vm_die "--bin ${b}: not an executable file"; fi
    install_bin "${b}" "$(basename "${b}")"
    vm_log "initramfs: added ${b}"
done

# tests
cp "${VM_REPO_ROOT}/tests/vm/lib.sh" "${VM_REPO_ROOT}/tests/vm/runner.sh" \
    "${VM_REPO_ROOT}/tests/vm/jflat.awk" "${VM_REPO_ROOT}/tests/vm/bench_lib.sh" "${root}/tests/vm/"
if [ -n "${tests}" ]; then
    for t in ${tests//,/ }; do
        f="${VM_REPO_ROOT}/tests/vm/test_${t}.sh"
        [ -f "${f}" ] || [ ! -f "${VM_REPO_ROOT}/tests/vm/bench_${t}.sh" ] ||
            f="${VM_REPO_ROOT}/tests/vm/bench_${t}.sh"
        [ -f "${f}" ] || vm_die "no guest test ${f}"
        cp "${f}" "${root}/tests/vm/"
    done
else
    cp "${VM_REPO_ROOT}"/tests/vm/test_*.sh "${root}/tests/vm/"
fi
if [ -f "${VM_REPO_ROOT}/examples/vm-8cpu.toml" ]; then
    cp "${VM_REPO_ROOT}/examples/vm-8cpu.toml" "${root}/etc/atoll/"
else
    vm_log "examples/vm-8cpu.toml missing: the guest tests use their built-in equivalent"
fi

# kernel modules selected by setup.sh (usually none)
if [ -d "${VM_MODULES_DIR}" ]; then
    cp "${VM_MODULES_DIR}"/load-order "${root}/lib/modules/" 2>/dev/null || true
    find "${VM_MODULES_DIR}" -name '*.ko' -exec cp {} "${root}/lib/modules/" \;
fi

install -m 755 "${VM_REPO_ROOT}/scripts/vm/guest-init.sh" "${root}/init"
# The kernel opens /dev/console before /init runs; give it one (root only).
mknod -m 600 "${root}/dev/console" c 5 1 2>/dev/null || true

mkdir -p "$(dirname "${out}")"
(cd "${root}" && find . -mindepth 1 | LC_ALL=C sort | "${busybox}" cpio -o -H newc 2>/dev/null) |
    gzip -6 >"${out}.tmp"
mv "${out}.tmp" "${out}"
vm_log "initramfs: ${out} ($(du -h "${out}" | cut -f1), atoll from ${atoll})"
