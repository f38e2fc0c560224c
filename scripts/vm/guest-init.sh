#!/bin/sh
# /init of the test VM (copied into the initramfs by build-initramfs.sh).
# Mounts the pseudo filesystems and cgroup2, loads any modules setup.sh found
# necessary, runs the tests named by atoll.test= on the kernel command line,
# prints the results on the serial console and powers off. It enables no
# cgroup controller itself: that is the daemon's job.
export PATH=/usr/bin:/usr/sbin:/bin:/sbin
export HOME=/root

mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec </dev/console >/dev/console 2>&1
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t tmpfs -o mode=755 tmpfs /run
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t cgroup2 cgroup2 /sys/fs/cgroup
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up

if [ -s /lib/modules/load-order ]; then
    while read -r m; do
        [ -n "$m" ] || continue
        insmod "/lib/modules/$m.ko" && echo "vm-init: loaded module $m"
    done </lib/modules/load-order
fi

echo "vm-init: kernel $(uname -r), $(grep -c ^processor /proc/cpuinfo) CPUs, up $(cut -d' ' -f1 /proc/uptime)s"
spec=$(sed -n 's/.*atoll\.test=\([^ ]*\).*/\1/p' /proc/cmdline)
sh /tests/vm/runner.sh "${spec:-all}"
echo "vm-init: finished, up $(cut -d' ' -f1 /proc/uptime)s"
# Let the serial port drain before the machine goes away.
sleep 1
poweroff -f
