#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# selftests/pkg/installed.sh UPPER - inside a VM (tools/vm/run), as root:
# the packages tools/pkg-install-check.sh installed with dpkg -i into the
# overlay layer UPPER, used as installed.  UPPER goes over the VM's root
# (a read-only overlay), entered with chroot: modprobe loads the module
# DKMS built and installed for this kernel, the installed hgclock and
# hgclock-guest run, and the example of libhgclock-dev builds against the
# installed library with pkg-config and reads the clock as nobody.
# TAP lines (ok N NAME).
set -u
upper=$1
n=0
failed=0
tap() {	# ok|not-ok NAME [WHY]
	n=$((n + 1))
	if [ "$1" = ok ]; then echo "ok $n $2"; else echo "not ok $n $2${3:+ # $3}"; failed=$((failed + 1)); fi
}
check() {	# NAME WHY COMMAND...
	name=$1 why=$2
	shift 2
	if "$@"; then tap ok "$name"; else tap not-ok "$name" "$why"; fi
}
kver=$(uname -r)
root=/tmp/installed
mkdir -p $root
if ! mount -t overlay overlay -o "lowerdir=$upper:/" $root; then
	tap not-ok overlay "cannot lay $upper over /"
	exit 1
fi
mount -t proc proc $root/proc && mount -t sysfs sysfs $root/sys &&
	mount --bind /dev $root/dev && mount -t tmpfs tmpfs $root/tmp ||
	{ tap not-ok overlay "mounts in the new root"; exit 1; }
in_root() { chroot $root /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "$@"; }
tap ok overlay

# The module DKMS installed, by name, as a user loads it.
in_root modinfo -n hgclock >/tmp/modpath 2>&1
echo "# modinfo -n hgclock: $(cat /tmp/modpath)"
check module_from_dkms "modinfo: $(cat /tmp/modpath)" grep -q "/updates/dkms/hgclock.ko" /tmp/modpath
in_root modprobe hgclock >/tmp/modprobe.log 2>&1
check modprobe "modprobe hgclock: $(cat /tmp/modprobe.log)" grep -q '^hgclock ' /proc/modules
check public_clock_0444 "/dev/hgclock-clock: $(ls -l /dev/hgclock-clock 2>&1)" \
	sh -c '[ "$(stat -c %a /dev/hgclock-clock)" = 444 ]'
in_root hgclock info >/tmp/info.txt 2>&1
check installed_tool_info "hgclock info: $(head -n 3 /tmp/info.txt | tr '\n' ' ')" \
	grep -qi '^abi:' /tmp/info.txt
in_root hgclock-guest now >/tmp/now.txt 2>&1
check installed_guest_tool_now "hgclock-guest now: $(head -n 3 /tmp/now.txt | tr '\n' ' ')" \
	grep -qi 'sched_clock\|local' /tmp/now.txt

# libhgclock-dev's example, built with pkg-config against what dpkg
# installed, run as nobody: the public clock needs no privilege.
ex=/usr/share/doc/libhgclock-dev/examples/hgclock-clock.c
in_root sh -c "cc -O2 -o /tmp/hgclock-clock $ex \$(pkg-config --cflags --libs hgclock)" >/tmp/cc.log 2>&1
check example_builds "cc: $(head -n 5 /tmp/cc.log | tr '\n' ' ')" [ -x $root/tmp/hgclock-clock ]
in_root ldd /tmp/hgclock-clock >/tmp/ldd.txt 2>&1
check example_links_installed_library "ldd: $(grep hgclock /tmp/ldd.txt)" \
	grep -Eq 'libhgclock.so.1 => /(usr/)?lib/[^ ]*libhgclock.so.1 ' /tmp/ldd.txt
in_root setpriv --reuid=65534 --regid=65534 --clear-groups /tmp/hgclock-clock >/tmp/ex.txt 2>&1
rc=$?
sed 's/^/# example: /' /tmp/ex.txt
# Two readings, exact, without a syscall (perf's clock too where the
# module knows local_clock's offset: not on every kernel).
check example_as_nobody "exit $rc: $(head -n 2 /tmp/ex.txt | tr '\n' ' ')" \
	sh -c "[ $rc -eq 0 ] && [ \$(grep -c '(exact, no syscall)' /tmp/ex.txt) -eq 2 ]"
in_root modprobe -r hgclock
check modprobe_remove "hgclock still loaded" sh -c '! grep -q "^hgclock " /proc/modules'
[ $failed -eq 0 ]
