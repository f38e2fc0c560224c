#!/usr/bin/env bash
# Boots the systemd guest (Debian 12, systemd as PID 1) and reports its tests.
#
#   run.sh [--kernel backports|stable] [--test NAME|a,b|all] [--atoll PATH]
#          [--deb FILE]... [--bin PATH]... [--smp 8] [--nodes 2] [--mem 2048]
#          [--timeout 600] [--shell]
#
# Builds the image if it is not cached (build-image.sh), fills the 9p share
# vm/build/systemd-<kernel>/share/ (bin/atoll stripped, tests/ = tests/vm's
# runner.sh, lib.sh, jflat.awk + tests/vm-systemd/*, etc/ = examples/*.toml,
# debs/ = the --deb files, out/ = what the guest leaves for the host),
# bin/ also gets the --bin programs (test helpers such as systemd-probe),
# creates a fresh qcow2 overlay of the cached base image and boots it under
# TCG with -kernel/-initrd from the image, root=/dev/vda, the share as
# virtio-9p (mount tag atoll). systemd.unit=atoll-vmtest.target runs the
# tests (tests/vm-systemd/main.sh) after multi-user.target; the guest
# prints VMTEST lines on the serial console and powers off. Parsing, exit
# status and the one extra boot after an early guest panic are report.sh's
# (shared with the busybox rig). The console is saved to
# vm/build/systemd-<kernel>/serial.log; the guest's journal and
# systemd-analyze output land in vm/build/systemd-<kernel>/share/out/.
#
# --shell boots the same machine without the tests, with a root login on
# the serial console (empty password) and no time limit: Ctrl-a x quits.
# Without --atoll: $CARGO_TARGET_DIR/release/atoll or target/release/atoll.
# VM_APPEND adds kernel arguments. VM_SD_RUN_DIR=DIR puts the share,
# overlay and console log in DIR instead (a benchmark beside a test run).
# One { } block, read whole before it runs: editing this file while a
# guest runs does not derail the run.
{
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

smp=8
nodes=2
mem=2048
timeout_s=600
test_spec=all
atoll=""
debs=()
bins=()
shell=0
while [ $# -gt 0 ]; do
    case "$1" in
        --kernel) VM_KERNEL="$2"; export VM_KERNEL; shift 2 ;;
        --test) test_spec="$2"; shift 2 ;;
        --atoll) atoll="$2"; shift 2 ;;
        --deb) debs+=("$2"); shift 2 ;;
        --bin) bins+=("$2"); shift 2 ;;
        --smp) smp="$2"; shift 2 ;;
        --nodes) nodes="$2"; shift 2 ;;
        --mem) mem="$2"; shift 2 ;;
        --timeout) timeout_s="$2"; shift 2 ;;
        --shell) shell=1; shift ;;
        -h | --help) sed -n '2,28p' "$0"; exit 0 ;;
        *) printf 'vm: error: unknown argument %s\n' "$1" >&2; exit 1 ;;
    esac
done
# shellcheck source=scripts/vm/common.sh
. "${here}/../common.sh"
# shellcheck source=scripts/vm/report.sh
. "${here}/../report.sh"

[ "$(id -u)" = 0 ] || vm_die "run.sh needs root"
vm_apt_install qemu-system-x86 qemu-utils
[ $((smp % nodes)) -eq 0 ] || vm_die "--smp ${smp} is not a multiple of --nodes ${nodes}"
[ $((mem % nodes)) -eq 0 ] || vm_die "--mem ${mem} is not a multiple of --nodes ${nodes}"
if [ -z "${atoll}" ]; then
    atoll="${CARGO_TARGET_DIR:-${VM_REPO_ROOT}/target}/release/atoll"
fi
[ -x "${atoll}" ] || vm_die "no atoll binary ${atoll} (give --atoll PATH, or cargo build --release -p atoll-cli)"
for d in "${debs[@]+"${debs[@]}"}"; do
    [ -f "${d}" ] || vm_die "--deb ${d}: no such file"
done
for b in "${bins[@]+"${bins[@]}"}"; do
    [ -x "${b}" ] || vm_die "--bin ${b}: no such program"
done

image="$(bash "${here}/build-image.sh")"
# shellcheck source=/dev/null
. "${image}/image.env"
touch "${image}/last-used"

# --- the share ------------------------------------------------------------------
run="${VM_SD_RUN_DIR:-${VM_BUILD}/systemd-${VM_KERNEL}}"
share="${run}/share"
rm -rf --one-file-system "${share}"
mkdir -p "${share}"/{bin,tests,etc,debs,out}
cp "${atoll}" "${share}/bin/atoll"
for b in "${bins[@]+"${bins[@]}"}"; do
    cp "${b}" "${share}/bin/"
done
if command -v strip >/dev/null; then strip "${share}/bin/"*; fi
cp "${VM_REPO_ROOT}"/tests/vm/{runner.sh,lib.sh,jflat.awk} "${VM_REPO_ROOT}"/tests/vm-systemd/* "${share}/tests/"
cp "${VM_REPO_ROOT}"/examples/*.toml "${share}/etc/" 2>/dev/null || true
for d in "${debs[@]+"${debs[@]}"}"; do
    cp "${d}" "${share}/debs/"
done

# --- the machine ----------------------------------------------------------------
overlay="${run}/overlay.qcow2"
# A fresh copy-on-write overlay for every boot: the cached base stays pristine.
vm_before_boot() {
    rm -f "${overlay}"
    qemu-img create -q -f qcow2 -b "${image}/base.raw" -F raw "${overlay}"
    find "${share}/out" -mindepth 1 -delete
}
per_node=$((smp / nodes))
numa=()
for ((n = 0; n < nodes; n++)); do
    numa+=(-object "memory-backend-ram,id=mem${n},size=$((mem / nodes))M"
        -numa "node,nodeid=${n},cpus=$((n * per_node))-$(((n + 1) * per_node - 1)),memdev=mem${n}")
done
append="console=ttyS0 root=/dev/vda rw rootfstype=ext4 quiet psi=1 panic=-1 fsck.mode=skip"
append+=" systemd.unified_cgroup_hierarchy=1 systemd.firstboot=off"
if [ "${shell}" = 0 ]; then
    append+=" systemd.unit=atoll-vmtest.target systemd.mask=serial-getty@ttyS0.service atoll.test=${test_spec}"
fi
append+=" ${VM_APPEND:-}"
cmd=(qemu-system-x86_64 -accel tcg -m "${mem}M"
    -smp "${smp},sockets=${nodes},cores=${per_node},threads=1" "${numa[@]}"
    -kernel "${image}/vmlinuz" -initrd "${image}/initrd.img" -append "${append}"
    -drive "file=${overlay},format=qcow2,if=virtio,cache=unsafe"
    -virtfs "local,path=${share},mount_tag=atoll,security_model=none,id=atoll"
    -nic none -nographic -no-reboot)
vm_log "image ${image##*/}: kernel ${VM_SD_KVER}, systemd ${VM_SD_SYSTEMD}, built ${VM_SD_BUILT}"
vm_log "${cmd[*]}"

if [ "${shell}" = 1 ]; then
    vm_before_boot
    exec "${cmd[@]}"
fi
status=0
vm_boot_report "${run}/serial.log" "${timeout_s}" "${cmd[@]}" || status=$?
[ ! -s "${share}/out/journal.txt" ] || vm_log "guest journal: ${share}/out/journal.txt, systemd-analyze: ${share}/out/systemd-analyze.txt"
rm -f "${overlay}"
exit "${status}"
}
