#!/bin/bash
# tools/debug-kernel.sh - build (once) a debug kernel for the VM tests from
# Debian's linux-source-6.1, and print the directory that holds it.
#
#   tools/debug-kernel.sh [--print-key]
#
# The kernel is x86_64 defconfig + kvm_guest.config, with what
# tools/vm/run and the tests need built in (virtio PCI, 9p, PVH entry,
# kprobes, kallsyms, ftrace, debugfs), big driver families the VM does not
# have switched off, no debug info, and these checkers:
#
#   KASAN (generic, inline, vmalloc)      out-of-bounds, use-after-free
#   PROVE_LOCKING (lockdep)               lock order, irq safety
#   PROVE_RAW_LOCK_NESTING                a spinlock_t (a sleeping lock on
#                                         PREEMPT_RT) taken in raw atomic
#                                         context: "Invalid wait context"
#   DEBUG_ATOMIC_SLEEP                    sleeping in atomic context
#   DEBUG_KMEMLEAK, on at boot            leaks (scan with debugfs)
#   UBSAN (bounds, shift, ...)            undefined behaviour
#   plus DEBUG_LIST, DEBUG_OBJECTS_*, the lockup and hung task detectors
#
# Everything is =y; CONFIG_MODULES stays on for hgclock.ko.  The result is
# cached in $HGCLOCK_DEBUG_KERNEL_CACHE (default /var/cache/hgclock/
# debug-kernel) under a key that hashes this script, the linux-source
# package's version and the compiler's version; a second call with the
# same key prints the directory at once.  The directory holds:
#
#   build/           the kernel build tree (KDIR for tools/build-module.sh,
#                    --kernel for tools/vm/run): .config, vmlinux,
#                    arch/x86/boot/bzImage, Module.symvers, scripts
#   modroot/         "make modules_install" root (lib/modules/VER: no
#                    modules, only modules.builtin, for the VM runner)
#   kernelrelease    uname -r of the kernel
#   build-seconds    how long the build took here
#   build.log        the build's output
#
# The build runs under "nice -n 15" with -j2 (HGCLOCK_DEBUG_KERNEL_JOBS);
# on the two-core development machine, next to other engineers' VMs, it
# took 2520 s (1497 C files; 2.0 GB in the cache).  tools/vm/run boots
# its bzImage: with KASAN the vmlinux does not come up through PVH.  Only one
# build runs at a time (a lock in the cache directory).  Building needs
# flex, bison, bc and libelf-dev (tools/deps.sh).  The last line of
# the output is the directory.
set -euo pipefail

prog=${0##*/}
self=$(realpath "$0")
src_tar=/usr/src/linux-source-6.1.tar.xz
cache=${HGCLOCK_DEBUG_KERNEL_CACHE:-/var/cache/hgclock/debug-kernel}
jobs=${HGCLOCK_DEBUG_KERNEL_JOBS:-2}
localversion=-hgclock-debug

msg() { echo "$prog: $*" >&2; }
die() { msg "$*"; exit 1; }

src_ver=$(dpkg-query -W -f='${Version}' linux-source-6.1 2>/dev/null) ||
	die "linux-source-6.1 is not installed (tools/deps.sh installs it)"
[ -r "$src_tar" ] || die "cannot read $src_tar"
for t in flex bison bc make gcc; do
	command -v "$t" >/dev/null || die "$t not found (tools/deps.sh installs it)"
done
[ -r /usr/include/gelf.h ] || die "no libelf headers (tools/deps.sh installs libelf-dev)"
cc_ver=$(${CC:-gcc} --version | head -n 1)
# The key covers the script's code, not its comments.
key=$({ grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' "$self"; echo "linux-source-6.1 $src_ver"; echo "$cc_ver"; } |
	sha256sum | cut -c1-16)
if [ "${1:-}" = --print-key ]; then
	echo "$key"
	exit 0
fi
out=$cache/$key
if [ -s "$out/kernelrelease" ]; then
	echo "$out"
	exit 0
fi

mkdir -p "$cache"
exec 8>"$cache/.lock"
if ! flock -n 8; then
	msg "another build holds $cache/.lock; waiting"
	flock 8
fi
# Built by whoever held the lock?
if [ -s "$out/kernelrelease" ]; then
	echo "$out"
	exit 0
fi

tmp=$cache/$key.tmp
rm -rf "$tmp"
mkdir -p "$tmp"
log=$tmp/build.log
trap 'msg "failed (line $LINENO); log: $log"; tail -n 5 "$log" >&2' ERR
t0=$(date +%s)
msg "building the debug kernel (linux-source-6.1 $src_ver) in $tmp; log: $log"

# The tarball's top directory is linux-source-6.1.
nice -n 15 tar -xJf "$src_tar" -C "$tmp"
mv "$tmp/linux-source-6.1" "$tmp/build"
cd "$tmp/build"

kmake() { nice -n 15 make -j"$jobs" "$@" >>"$log" 2>&1; }

kmake defconfig
kmake kvm_guest.config
c() { scripts/config --file .config "$@"; }
# What the runner's stage 1 and 2 need, built in: virtio PCI and 9p (the
# root), devtmpfs, tmpfs, debugfs, tracefs, the serial console, PVH entry
# (qemu boots vmlinux without the decompressor).
c -e VIRTIO -e VIRTIO_PCI -e VIRTIO_CONSOLE -e NET_9P -e NET_9P_VIRTIO \
  -e 9P_FS -e 9P_FS_POSIX_ACL -e DEVTMPFS -e DEVTMPFS_MOUNT -e TMPFS \
  -e TMPFS_POSIX_ACL -e DEBUG_FS -e SERIAL_8250 -e SERIAL_8250_CONSOLE \
  -e BLK_DEV_INITRD -e PVH -e HYPERVISOR_GUEST -e PARAVIRT -e KVM_GUEST \
  -e ACPI -e VSOCKETS -e VIRTIO_VSOCKETS
# What hgclock and its tests use: modules, kprobes (kallsyms_lookup_name),
# all symbols, ftrace (trace_marker, trace_clock), perf, CPU hotplug.
c -e MODULES -e MODULE_UNLOAD -e MODULE_FORCE_UNLOAD -d MODULE_SIG \
  -e KPROBES -e KALLSYMS -e KALLSYMS_ALL -e FTRACE -e FUNCTION_TRACER \
  -e DYNAMIC_FTRACE -e PERF_EVENTS -e HOTPLUG_CPU -e X86_MSR -e HIGH_RES_TIMERS \
  --set-str LOCALVERSION "$localversion" -d LOCALVERSION_AUTO
# Small: no debug info, none of the hardware a qemu VM does not have.
c -d DEBUG_INFO -e DEBUG_INFO_NONE -d DEBUG_INFO_DWARF_TOOLCHAIN_DEFAULT \
  -d DEBUG_INFO_DWARF4 -d DEBUG_INFO_DWARF5 -d DEBUG_INFO_BTF \
  -d DRM -d SOUND -d USB_SUPPORT -d WLAN -d WIRELESS -d CFG80211 \
  -d MAC80211 -d BT -d RFKILL -d NETFILTER -d IP_VS -d NET_SCHED \
  -d IPV6 -d NFS_FS -d ROOT_NFS -d NFSD -d ETHERNET -d NET_VENDOR_INTEL \
  -d ATA -d SCSI -d MD -d BLK_DEV_DM -d INPUT_JOYSTICK -d INPUT_TABLET \
  -d INPUT_TOUCHSCREEN -d HID -d AGP -d FB -d PCCARD -d HIBERNATION \
  -d SUSPEND -d CPU_FREQ -d SECURITY_SELINUX -d AUDIT -d EXT4_FS \
  -d ISO9660_FS -d MSDOS_FS -d VFAT_FS -d AUTOFS_FS -d QUOTA -d EFI \
  -d MICROCODE -d X86_MCE -d PERF_EVENTS_INTEL_UNCORE \
  -d PERF_EVENTS_INTEL_RAPL -d PERF_EVENTS_INTEL_CSTATE -d PERF_EVENTS_AMD_POWER \
  -d HWMON -d THERMAL -d WATCHDOG -d RTC_CLASS -d LOGO -d MACINTOSH_DRIVERS \
  -d NFS_V4 -d CRYPTO_AES_NI_INTEL \
  -d BLOCK -d VT -d INPUT -d SERIO -d CGROUPS -d NAMESPACES -d SECURITY \
  -d KEYS -d NETDEVICES -d PHYLIB -d I2C -d X86_PLATFORM_DEVICES \
  -d IOMMU_SUPPORT -d HW_RANDOM -d POWER_SUPPLY -d GPIOLIB -d NEW_LEDS \
  -d DMADEVICES -d VGA_ARB -d VGA_CONSOLE -d X86_CPU_RESCTRL -d KEXEC \
  -d CRASH_DUMP -d PROFILING -d HUGETLBFS -d FUSE_FS -d OVERLAY_FS -d NLS \
  -d XFRM_USER -d NET_KEY -d IP_MULTICAST -d IP_ADVANCED_ROUTER -d IP_PNP \
  -d NETLABEL -d NETWORK_SECMARK -d BPF_SYSCALL -d DCB -d BRIDGE \
  -d VLAN_8021Q -d EDAC -d PPS -d PTP_1588_CLOCK -d IA32_EMULATION \
  -d X86_X32_ABI -d NUMA -d SWAP -d MTRR_SANITIZER -d INTEL_IDLE \
  -d KVM_DEBUG_FS -d XFRM -d INET_DIAG -d SYN_COOKIES -d TCP_CONG_ADVANCED \
  -d FW_LOADER_USER_HELPER -d MAGIC_SYSRQ_SERIAL -d PNP -d DEBUG_BOOT_PARAMS \
  -d UNIX_DIAG -d PACKET_DIAG -d WIRELESS_EXT -d NET_9P_FD
# The checkers.
c -e DEBUG_KERNEL -e KASAN -e KASAN_GENERIC -e KASAN_INLINE -e KASAN_VMALLOC \
  -e PROVE_LOCKING -e PROVE_RAW_LOCK_NESTING -e DEBUG_ATOMIC_SLEEP -e DEBUG_KMEMLEAK \
  -d DEBUG_KMEMLEAK_DEFAULT_OFF -e DEBUG_KMEMLEAK_AUTO_SCAN \
  --set-val DEBUG_KMEMLEAK_MEM_POOL_SIZE 64000 \
  -e UBSAN -e UBSAN_BOUNDS -e UBSAN_SHIFT -e UBSAN_DIV_ZERO -e UBSAN_BOOL \
  -e UBSAN_ENUM -e UBSAN_SANITIZE_ALL -d UBSAN_ALIGNMENT -d UBSAN_TRAP \
  -d TEST_UBSAN -e DEBUG_LIST -e DEBUG_OBJECTS -e DEBUG_OBJECTS_TIMERS \
  -e DEBUG_OBJECTS_WORK -e DEBUG_OBJECTS_RCU_HEAD -e SOFTLOCKUP_DETECTOR \
  -e DETECT_HUNG_TASK -e PROVE_RCU -d PANIC_ON_OOPS -d WERROR
kmake olddefconfig

# A dependency can silently drop an option: check the ones that matter.
missing=
for o in VIRTIO_PCI NET_9P_VIRTIO 9P_FS DEVTMPFS TMPFS DEBUG_FS SERIAL_8250_CONSOLE \
	BLK_DEV_INITRD PVH MODULES MODULE_UNLOAD KPROBES KALLSYMS_ALL FTRACE \
	FUNCTION_TRACER PERF_EVENTS HOTPLUG_CPU KASAN KASAN_GENERIC KASAN_VMALLOC \
	PROVE_LOCKING PROVE_RAW_LOCK_NESTING DEBUG_ATOMIC_SLEEP DEBUG_KMEMLEAK UBSAN UBSAN_BOUNDS \
	UBSAN_SANITIZE_ALL; do
	grep -qx "CONFIG_$o=y" .config || missing="$missing $o"
done
for o in DEBUG_KMEMLEAK_DEFAULT_OFF DEBUG_INFO MODULE_SIG WERROR; do
	! grep -qx "CONFIG_$o=y" .config || missing="$missing !$o"
done
[ -z "$missing" ] || die "the configuration lost:$missing (see $tmp/build/.config)"

msg "configured; building (nice -n 15, -j$jobs)"
kmake all || { tail -n 40 "$log" >&2; die "kernel build failed (log: $log)"; }
kmake modules_install INSTALL_MOD_PATH="$tmp/modroot" ||
	{ tail -n 20 "$log" >&2; die "modules_install failed (log: $log)"; }
rel=$(cat include/config/kernel.release)
[ -d "$tmp/modroot/lib/modules/$rel" ] || die "no $tmp/modroot/lib/modules/$rel"
# The source link points into the temporary name.
rm -f "$tmp/modroot/lib/modules/$rel/build" "$tmp/modroot/lib/modules/$rel/source"
ln -s ../../../../build "$tmp/modroot/lib/modules/$rel/build"

echo $(($(date +%s) - t0)) >"$tmp/build-seconds"
echo "$rel" >"$tmp/kernelrelease.tmp"
cd /
rm -rf "$out"
mv "$tmp" "$out"
mv "$out/kernelrelease.tmp" "$out/kernelrelease"
# Older keys are older scripts or sources: drop them.
find "$cache" -mindepth 1 -maxdepth 1 -type d ! -name "$key" ! -name "$key.tmp" \
	-exec rm -rf {} + 2>/dev/null || true
msg "built $rel in $(cat "$out/build-seconds") s"
echo "$out"
