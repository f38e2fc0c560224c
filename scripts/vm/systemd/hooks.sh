#!/usr/bin/env bash
# mmdebstrap hooks of the systemd guest image (called by build-image.sh, not
# by hand):   hooks.sh setup|essential|customize ROOTFS
#
#   setup      copies the cached .debs into the new root's apt archive, so a
#              rebuild downloads only what changed;
#   essential  (before apt installs the kernel) the initramfs-tools
#              configuration: MODULES=list with the virtio disk and ext4, so
#              the kernel's postinst builds a small initrd;
#   customize  the test units and script, host name, fstab, machine-id, an
#              empty root password (console login for debugging), masks for
#              timers that would only cost time under TCG, redis-server and
#              mariadb not started at boot (the benches run their own), a volatile
#              journal; then refreshes the .deb cache and empties the
#              image's apt archive.
#
# Environment (exported by build-image.sh): VM_SD_DEBCACHE, VM_SD_FILES
# (scripts/vm/systemd/image).
set -euo pipefail
stage=$1
root=$2
[ -d "${root}" ] || { echo "hooks.sh: no root ${root}" >&2; exit 1; }
files="${VM_SD_FILES:?}"
debcache="${VM_SD_DEBCACHE:?}"
log() { printf 'vm: image hook %s: %s\n' "${stage}" "$*" >&2; }

case "${stage}" in
    setup)
        mkdir -p "${root}/var/cache/apt/archives/partial" "${debcache}"
        n=$(find "${debcache}" -maxdepth 1 -name '*.deb' | wc -l)
        if [ "${n}" -gt 0 ]; then
            log "${n} cached .debs from ${debcache}"
            # Hard links where the cache and the new root share a file system.
            find "${debcache}" -maxdepth 1 -name '*.deb' -exec cp -l -t "${root}/var/cache/apt/archives/" {} + 2>/dev/null ||
                find "${debcache}" -maxdepth 1 -name '*.deb' -exec cp -t "${root}/var/cache/apt/archives/" {} +
        fi
        ;;
    essential)
        install -D -m 644 "${files}/initramfs-atoll-vm.conf" \
            "${root}/etc/initramfs-tools/conf.d/atoll-vm.conf"
        install -D -m 644 "${files}/initramfs-modules" \
            "${root}/usr/share/initramfs-tools/modules.d/atoll-vm"
        ;;
    customize)
        install -m 644 "${files}/atoll-vmtest.service" "${files}/atoll-vmtest.target" \
            "${root}/etc/systemd/system/"
        install -D -m 755 "${files}/atoll-vmtest" "${root}/usr/local/sbin/atoll-vmtest"
        echo atoll-vm >"${root}/etc/hostname"
        printf '127.0.0.1\tlocalhost\n127.0.1.1\tatoll-vm\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' \
            >"${root}/etc/hosts"
        printf '# root=/dev/vda rw on the kernel command line (scripts/vm/systemd/run.sh)\n/dev/vda / ext4 defaults,noatime 0 0\n' \
            >"${root}/etc/fstab"
        # One fixed id for the base image (each run boots a throwaway
        # overlay): no first-boot logic, no systemd-firstboot prompt.
        od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"${root}/etc/machine-id"
        echo >>"${root}/etc/machine-id"
        chroot "${root}" passwd --delete root >/dev/null
        mkdir -p "${root}/etc/systemd/journald.conf.d"
        printf '[Journal]\nStorage=volatile\n' >"${root}/etc/systemd/journald.conf.d/atoll-vm.conf"
        for u in apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer \
            e2scrub_all.timer e2scrub_reap.service fstrim.timer logrotate.timer \
            man-db.timer systemd-tmpfiles-clean.timer; do
            chroot "${root}" systemctl mask --quiet "${u}"
        done
        # Debian's redis-server and mariadb services are not started at
        # boot: `atoll bench slo` runs its own servers from its temp dirs,
        # and under TCG these would only cost boot time and memory.
        for u in redis-server.service mariadb.service; do
            chroot "${root}" systemctl disable --quiet "${u}"
        done
        # The 9p modules the share needs, and the initrd's disk modules.
        kver=$(find "${root}/boot" -maxdepth 1 -name 'vmlinuz-*' | sed 's|.*/vmlinuz-||' | sort -V | tail -n 1)
        [ -n "${kver}" ] || { log "no kernel in /boot"; exit 1; }
        for m in 9p 9pnet_virtio; do
            [ -n "$(find "${root}/lib/modules/${kver}" -name "${m}.ko*" | head -n 1)" ] ||
                grep -q "/${m}.ko" "${root}/lib/modules/${kver}/modules.builtin" ||
                { log "kernel ${kver} has no ${m} module"; exit 1; }
        done
        initrd_list=$(chroot "${root}" lsinitramfs "/boot/initrd.img-${kver}")
        for m in virtio_blk virtio_pci ext4; do
            grep -q "/${m}.ko" <<<"${initrd_list}" ||
                grep -q "/${m}.ko" "${root}/lib/modules/${kver}/modules.builtin" ||
                { log "initrd.img-${kver} lacks ${m}"; exit 1; }
        done
        # The cache becomes what apt kept: autoclean drops the .debs that
        # the package lists no longer have (superseded versions). They move
        # (same file system), leaving the image's archive empty.
        chroot "${root}" apt-get -q autoclean >/dev/null
        rm -rf "${debcache}.new"
        mkdir -p "${debcache}.new"
        find "${root}/var/cache/apt/archives" -maxdepth 1 -name '*.deb' -exec mv -t "${debcache}.new/" {} +
        rm -rf "${debcache}"
        mv "${debcache}.new" "${debcache}"
        log "$(find "${debcache}" -maxdepth 1 -name '*.deb' | wc -l) .debs cached in ${debcache}"
        # The units that run when /usr is newer than /etc/.updated
        # (ConditionNeedsUpdate: ldconfig, hwdb, sysusers, ...) already ran
        # at install time.
        touch "${root}/etc/.updated" "${root}/var/.updated"
        ;;
    *)
        echo "hooks.sh: unknown stage ${stage}" >&2
        exit 1
        ;;
esac
