#!/usr/bin/env bash
# Boots the test VM and reports the guest tests' results.
#
#   run.sh [--smp 8] [--nodes 2] [--mem 2048] [--timeout 300] [--test NAME|all]
#          [--initrd FILE]
#
# TCG emulation (KVM guests hang on these machines), sockets = NUMA nodes,
# memory split evenly over the nodes. VM_KERNEL (backports|stable) picks the
# kernel setup.sh prepared and the default initramfs. The serial console is
# echoed and saved to vm/build/serial-$VM_KERNEL.log. Exit status 0 only if
# the guest printed "VMTEST DONE passed=N failed=0" with N > 0. The last line
# is always "vm: N passed, M failed". VM_APPEND adds kernel arguments. A
# guest kernel panic before any test failed gets one more boot (boot, retry
# and parsing: report.sh, shared with the systemd rig).
set -euo pipefail
# shellcheck source=scripts/vm/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# shellcheck source=scripts/vm/report.sh
. "$(dirname "${BASH_SOURCE[0]}")/report.sh"

smp=8
nodes=2
mem=2048
timeout_s=300
test_spec=all
initrd="${VM_BUILD}/initramfs-${VM_KERNEL}.cpio.gz"
while [ $# -gt 0 ]; do
    case "$1" in
        --smp) smp="$2"; shift 2 ;;
        --nodes) nodes="$2"; shift 2 ;;
        --mem) mem="$2"; shift 2 ;;
        --timeout) timeout_s="$2"; shift 2 ;;
        --test) test_spec="$2"; shift 2 ;;
        --initrd) initrd="$2"; shift 2 ;;
        -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
        *) vm_die "unknown argument $1" ;;
    esac
done

vm_load_kernel_env
[ -f "${VM_KERNEL_IMAGE}" ] || vm_die "no kernel ${VM_KERNEL_IMAGE}: run VM_KERNEL=${VM_KERNEL} scripts/vm/setup.sh"
[ -f "${initrd}" ] || vm_die "no ${initrd}: run VM_KERNEL=${VM_KERNEL} scripts/vm/build-initramfs.sh"
command -v qemu-system-x86_64 >/dev/null || vm_die "no qemu-system-x86_64: run scripts/vm/setup.sh"
[ $((smp % nodes)) -eq 0 ] || vm_die "--smp ${smp} is not a multiple of --nodes ${nodes}"
[ $((mem % nodes)) -eq 0 ] || vm_die "--mem ${mem} is not a multiple of --nodes ${nodes}"

per_node=$((smp / nodes))
numa=()
for ((n = 0; n < nodes; n++)); do
    numa+=(-object "memory-backend-ram,id=mem${n},size=$((mem / nodes))M"
        -numa "node,nodeid=${n},cpus=$((n * per_node))-$(((n + 1) * per_node - 1)),memdev=mem${n}")
done

log="${VM_BUILD}/serial-${VM_KERNEL}.log"
cmd=(qemu-system-x86_64 -accel tcg -m "${mem}M"
    -smp "${smp},sockets=${nodes},cores=${per_node},threads=1" "${numa[@]}"
    -kernel "${VM_KERNEL_IMAGE}" -initrd "${initrd}"
    -append "console=ttyS0 quiet psi=1 panic=-1 atoll.test=${test_spec} ${VM_APPEND:-}"
    -nic none -nographic -no-reboot)
vm_log "kernel ${VM_KVER} (VM_KERNEL=${VM_KERNEL}, ${VM_KERNEL_PKG})"
vm_log "${cmd[*]}"

vm_boot_report "${log}" "${timeout_s}" "${cmd[@]}"
