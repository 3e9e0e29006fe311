# tools/vm/lib.sh - building blocks for booting Debian kernels in qemu.
#
# Sourced by tools/vm/run (bash). Kept free of run's option parsing so that
# other scripts (e.g. a nested host/guest testbed started from inside a VM)
# can reuse the pieces:
#
#   vm_kernels                    installed kernel versions, oldest first
#   vm_resolve_kernel SPEC        SPEC -> version (latest, 6.1, 6.12, full)
#   vm_series_kernel SERIES       newest non-RT version of a series
#                                 ("6.12"), or RT with "-rt" ("6.12-rt")
#   vm_tree_release DIR           release of a kernel build tree
#   vm_tree_image DIR             image to boot from a kernel build tree
#   vm_kernel_image VER           kernel to pass to -kernel (PVH vmlinux)
#   vm_initramfs VER [opts]       path of a cached busybox initramfs
#   vm_qemu_cmd                   fill the VM_QEMU array from VM_* variables
#
# A kernel built elsewhere (tools/debug-kernel.sh) is not under /boot and
# /lib/modules: set VM_KTREE to its build tree (its modules.builtin says
# which boot modules are built in) and, if it has modules, VM_MODROOT to
# the root it was "make modules_install"ed into (ROOT/lib/modules/VER).
#
# Nothing here touches the kernel this script runs on.

# shellcheck shell=bash
VM_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# Bump when the initramfs layout changes in a way the hash can't see.
VM_INITRAMFS_FORMAT=1

# Modules the default stage 1 needs to mount the 9p root (dependencies are
# resolved per kernel; built-in ones are skipped).
VM_BOOT_MODULES="virtio_pci 9pnet_virtio 9p"

vm_msg() { echo "${VM_PROG:-vm}: $*" >&2; }

# vm_kernels: versions that have both /boot/vmlinuz-VER and /lib/modules/VER.
vm_kernels() {
	local f v

	for f in /boot/vmlinuz-*; do
		[ -e "$f" ] || continue
		v=${f#/boot/vmlinuz-}
		[ -d "/lib/modules/$v" ] && echo "$v"
	done | sort -V
}

# vm_resolve_kernel SPEC: print the newest installed version matching SPEC.
# SPEC is "latest" (or empty), a full version, or a prefix that ends on a
# component boundary: "6.1" matches 6.1.0-56-amd64 but not 6.12.x. Only a
# full version or a SPEC ending in "-rt" ("6.12-rt", "latest-rt") picks a
# PREEMPT_RT kernel.
vm_resolve_kernel() {
	local spec=$1 v best='' rt=''

	case $spec in
	*-rt) spec=${spec%-rt}; rt=1 ;;
	esac
	while read -r v; do
		if [ "$v" != "$spec" ]; then
			case $v in
			*-rt-*) [ -n "$rt" ] || continue ;;
			*) [ -z "$rt" ] || continue ;;
			esac
		fi
		case $spec in
		"" | latest)
			best=$v ;;
		*)
			if [ "$v" = "$spec" ]; then
				best=$v
			elif [ "${v#"$spec"}" != "$v" ]; then
				case ${v#"$spec"} in
				[.+-]*) best=$v ;;
				esac
			fi ;;
		esac
	done < <(vm_kernels)
	[ -n "$best" ] || return 1
	echo "$best"
}

# vm_series_kernel SERIES: the newest installed non-RT kernel of a series
# ("6.1" -> 6.1.0-56-amd64), or with SERIES "<series>-rt" the newest
# PREEMPT_RT one ("6.12-rt" -> 6.12.117+deb12-rt-amd64); nothing, and
# status 1, if there is none.
vm_series_kernel() {
	local series=$1 rt=-v v

	case $series in
	*-rt) series=${series%-rt}; rt= ;;
	esac
	# shellcheck disable=SC2086 # $rt: grep's -v, or nothing
	v=$(ls /boot/vmlinuz-"$series".* /boot/vmlinuz-"$series"-* 2>/dev/null |
	    sed 's|^/boot/vmlinuz-||' | grep $rt -- '-rt-' | sort -uV | tail -n 1)
	[ -n "$v" ] && echo "$v"
}

# vm_tree_release DIR: the release (uname -r) of the kernel built in DIR.
vm_tree_release() {
	[ -s "$1/include/config/kernel.release" ] || return 1
	cat "$1/include/config/kernel.release"
}

# vm_tree_image DIR: the kernel to boot from a build tree: its vmlinux if
# it has PVH entry (no decompressor under TCG), else its bzImage. Not with
# KASAN: the 6.1 debug kernel's vmlinux dies through PVH before printing
# anything (qemu exits at once), its bzImage boots.
vm_tree_image() {
	if grep -qx 'CONFIG_PVH=y' "$1/.config" 2>/dev/null &&
	   ! grep -qx 'CONFIG_KASAN=y' "$1/.config" && [ -s "$1/vmlinux" ]; then
		echo "$1/vmlinux"
	elif [ -s "$1/arch/x86/boot/bzImage" ]; then
		echo "$1/arch/x86/boot/bzImage"
	else
		return 1
	fi
}

vm_cache_dir() {
	echo "${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/hgclock"
}

# vm_kernel_image VER: print the image to boot. Under TCG the bzImage's own
# decompressor costs seconds (xz on 6.1: ~4.5 s of a ~7 s boot), so when
# the kernel supports PVH entry (CONFIG_PVH=y) the ELF vmlinux is extracted
# once from the bzImage payload into the cache and qemu boots it directly.
# Falls back to /boot/vmlinuz-VER if anything does not fit.
vm_kernel_image() {
	local ver=$1 src=/boot/vmlinuz-$1 cache out tmp ss po pl start size magic dec

	cache=$(vm_cache_dir)
	grep -qx 'CONFIG_PVH=y' "/boot/config-$ver" 2>/dev/null || { echo "$src"; return 0; }
	out=$cache/vmlinux-$ver-$(stat -Lc '%s-%Y' "$src")
	if [ -s "$out" ]; then
		echo "$out"
		return 0
	fi
	# x86 boot protocol: setup_sects at 0x1f1, payload_offset at 0x248 and
	# payload_length at 0x24c; the payload's last 4 bytes hold the size
	# of the uncompressed ELF.
	ss=$(od -An -tu1 -j$((0x1f1)) -N1 "$src" | tr -d ' ')
	po=$(od -An -tu4 -j$((0x248)) -N4 "$src" | tr -d ' ')
	pl=$(od -An -tu4 -j$((0x24c)) -N4 "$src" | tr -d ' ')
	if [ -n "$ss" ] && [ -n "$po" ] && [ -n "$pl" ] && [ "$pl" -gt 4 ]; then
		start=$(((ss + 1) * 512 + po))
		size=$(od -An -tu4 -j$((start + pl - 4)) -N4 "$src" | tr -d ' ')
		magic=$(od -An -tx1 -j"$start" -N4 "$src" | tr -d ' ')
	else
		magic=
	fi
	case $magic in
	fd377a58) dec="xz -dcq --single-stream" ;;
	28b52ffd) dec="zstd -dcq" ;;
	1f8b08*) dec="gzip -dcq" ;;
	*) echo "$src"; return 0 ;;
	esac
	mkdir -p "$cache" || { echo "$src"; return 0; }
	tmp=$(mktemp "$cache/vmlinux.XXXXXX") || { echo "$src"; return 0; }
	# The 4-byte size trailer makes some decompressors complain: the
	# result is checked by size and ELF magic instead of exit status.
	tail -c +$((start + 1)) "$src" | head -c "$pl" | $dec >"$tmp" 2>/dev/null
	if [ "$(stat -c %s "$tmp")" = "$size" ] &&
	   [ "$(od -An -tx1 -N4 "$tmp" | tr -d ' ')" = 7f454c46 ]; then
		find "$cache" -maxdepth 1 -name "vmlinux-$ver-*" ! -name "${out##*/}" \
			-delete 2>/dev/null
		mv -f "$tmp" "$out"
		echo "$out"
	else
		rm -f "$tmp"
		vm_msg "cannot extract vmlinux from $src; booting it as is"
		echo "$src"
	fi
}

# vm_module_list VER MOD...: "insmod PATH ARGS" lines in load order, each
# module once, built-ins dropped. Modules come from /lib/modules/VER, or
# $VM_MODROOT/lib/modules/VER; a $VM_KTREE kernel without either must
# have them all built in.
vm_module_list() {
	local ver=$1 m
	shift
	[ $# -gt 0 ] || return 0
	if [ -n "${VM_MODROOT:-}" ]; then
		modprobe -d "$VM_MODROOT" -S "$ver" -D -a "$@" |
			awk '$1 == "insmod" && !seen[$2]++'
	elif [ -n "${VM_KTREE:-}" ] && [ ! -d "/lib/modules/$ver" ]; then
		for m in "$@"; do
			grep -q "/$m\.ko\$" "$VM_KTREE/modules.builtin" 2>/dev/null || {
				vm_msg "$m is not built into $VM_KTREE and no module root was given"
				return 1
			}
		done
	else
		modprobe -S "$ver" -D -a "$@" | awk '$1 == "insmod" && !seen[$2]++'
	fi
}

# vm_unpack_module SRC DST: copy a module, decompressing .xz/.zst/.gz so
# that busybox insmod never has to.
vm_unpack_module() {
	case $1 in
	*.ko.xz) xz -dc "$1" >"$2" ;;
	*.ko.zst) zstd -qdc "$1" >"$2" ;;
	*.ko.gz) gzip -dc "$1" >"$2" ;;
	*) cp "$1" "$2" ;;
	esac
}

vm_busybox() {
	local bb

	for bb in /bin/busybox /usr/bin/busybox; do
		[ -x "$bb" ] || continue
		if command -v readelf >/dev/null &&
		   LC_ALL=C readelf -l "$bb" 2>/dev/null | grep -q 'program interpreter'; then
			continue	# dynamic: useless in an initramfs
		fi
		echo "$bb"
		return 0
	done
	return 1
}

# vm_initramfs VER [-m MODULE]... [-f SRC:DST]... [-i INIT] [-s STAGE2] [-n NAME]
#
# Print the path of an uncompressed initramfs for kernel VER, building it
# under $(vm_cache_dir) if no cached copy matches. Contents:
#   /init              INIT (default tools/vm/init)
#   /stage2            STAGE2 (default tools/vm/stage2), "" for none
#   /bin/busybox       static busybox
#   /modules/order     "FILE ARGS" lines: VM_BOOT_MODULES + each -m, with
#                      dependencies, decompressed into /modules/
#   /extra/DST         each -f SRC:DST
# The cache key covers all of the above, so editing a script rebuilds.
vm_initramfs() {
	local ver=$1
	shift
	local init=$VM_LIB_DIR/init stage2=$VM_LIB_DIR/stage2 name=initramfs
	local mods=$VM_BOOT_MODULES files=() opt OPTIND=1

	while getopts "m:f:i:s:n:" opt; do
		case $opt in
		m) mods="$mods $OPTARG" ;;
		f) files+=("$OPTARG") ;;
		i) init=$OPTARG ;;
		s) stage2=$OPTARG ;;
		n) name=$OPTARG ;;
		*) return 2 ;;
		esac
	done

	local bb modlist cache key out tmp f src dst n ko args
	bb=$(vm_busybox) || { vm_msg "no static busybox (install busybox-static)"; return 1; }
	for f in "${files[@]}"; do
		[ -r "${f%%:*}" ] || { vm_msg "initramfs: cannot read ${f%%:*}"; return 1; }
	done
	# shellcheck disable=SC2086
	modlist=$(vm_module_list "$ver" $mods) ||
		{ vm_msg "cannot resolve modules for $ver: $mods"; return 1; }

	key=$({
		echo "format $VM_INITRAMFS_FORMAT $ver${VM_KTREE:+ tree $VM_KTREE}${VM_MODROOT:+ modules $VM_MODROOT}"
		cat "$init"
		[ -z "$stage2" ] || cat "$stage2"
		ls -lL "$bb"
		while read -r _ ko _; do
			[ -n "$ko" ] && ls -lL "$ko"
		done <<<"$modlist"
		echo "$modlist"
		for f in "${files[@]}"; do
			echo "file ${f#*:}"
			cat "${f%%:*}"
		done
	} | sha256sum | cut -c1-16) || return 1

	cache=$(vm_cache_dir)
	out=$cache/$name-$ver-$key.cpio
	if [ -s "$out" ]; then
		touch "$out"
		echo "$out"
		return 0
	fi

	mkdir -p "$cache" || return 1
	# Entries not used for two weeks are stale (old kernels, old scripts).
	find "$cache" -maxdepth 1 -name '*.cpio' -mtime +14 -delete 2>/dev/null
	tmp=$(mktemp -d "$cache/build.XXXXXX") || return 1
	(
		set -e
		cd "$tmp"
		mkdir -p root/bin root/dev root/proc root/sys root/newroot root/modules
		cp "$bb" root/bin/busybox
		cp "$init" root/init
		chmod 755 root/init
		if [ -n "$stage2" ]; then
			cp "$stage2" root/stage2
			chmod 755 root/stage2
		fi
		n=10
		: >root/modules/order
		while read -r _ ko args; do
			[ -n "$ko" ] || continue
			f=$n-$(basename "${ko%%.ko*}").ko
			vm_unpack_module "$ko" "root/modules/$f" || exit 1
			echo "$f $args" >>root/modules/order
			n=$((n + 1))
		done <<<"$modlist"
		# Explicit checks: callers write "x=$(vm_initramfs ...) || ...",
		# which switches set -e off in here.
		for f in "${files[@]}"; do
			src=${f%%:*}
			dst=root/extra/${f#*:}
			mkdir -p "$(dirname "$dst")" || exit 1
			cp -L "$src" "$dst" || exit 1
		done
		# The kernel's built-in cpio usually has it; be sure anyway.
		mknod -m 600 root/dev/console c 5 1 2>/dev/null || true
		cd root
		find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet >../out.cpio || exit 1
	)
	# Not "( ... ) || ...": that would switch off set -e inside.
	# shellcheck disable=SC2181
	if [ $? -ne 0 ]; then
		rm -rf "$tmp"
		vm_msg "building initramfs for $ver failed"
		return 1
	fi
	mv -f "$tmp/out.cpio" "$out"
	rm -rf "$tmp"
	echo "$out"
}

# vm_qemu_cmd: set the array VM_QEMU to a qemu command line. Inputs:
#   VM_KVER          kernel version (required)
#   VM_IMAGE         -kernel image, default /boot/vmlinuz-$VM_KVER
#   VM_INITRD        initramfs path (required)
#   VM_CONSOLE       file receiving ttyS0 (required)
#   VM_ACCEL         tcg (default) or kvm
#   VM_TCG_THREAD    multi (default: a host thread per vCPU) or single;
#                    see "run --help" for the trade-off
#   VM_CPU           default: max for tcg, host for kvm
#   VM_SMP, VM_MEM   default 2, 2048 (MiB)
#   VM_APPEND        extra kernel command line
#   VM_SHARES        array of "TAG=DIR" or "TAG=DIR:ro" 9p exports, in
#                    addition to the read-only root ("hostroot")
#   VM_QEMU_EXTRA    array of extra qemu arguments
#   VM_MONITOR       a unix socket path for QEMU's human monitor
#                    (tools/vm/last-look reads a hung VM through it);
#                    default: no monitor
# Commas in paths are doubled, as qemu's option syntax wants.
# The VM gets no network card and no display; ttyS0 is the kernel console.
vm_qemu_cmd() {
	local accel=${VM_ACCEL:-tcg} cpu=${VM_CPU:-} s tag dir ro mon=none

	case $accel in
	tcg) VM_QEMU=(-accel "tcg,thread=${VM_TCG_THREAD:-multi}"); cpu=${cpu:-max} ;;
	kvm) VM_QEMU=(-accel kvm); cpu=${cpu:-host} ;;
	*) vm_msg "unknown accelerator '$accel' (tcg or kvm)"; return 1 ;;
	esac
	[ -z "${VM_MONITOR:-}" ] || mon="unix:${VM_MONITOR//,/,,},server=on,wait=off"
	# shellcheck disable=SC2054 # commas belong to qemu's option syntax
	VM_QEMU=(qemu-system-x86_64 -nodefaults -no-user-config -no-reboot
		-display none -monitor "$mon" "${VM_QEMU[@]}"
		-cpu "$cpu" -smp "${VM_SMP:-2}" -m "${VM_MEM:-2048}"
		-kernel "${VM_IMAGE:-/boot/vmlinuz-$VM_KVER}" -initrd "$VM_INITRD"
		-append "console=ttyS0 quiet panic=-1 ${VM_APPEND:-}"
		-chardev "file,id=con0,path=${VM_CONSOLE//,/,,},append=on"
		-serial chardev:con0
		-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap)
	for s in "${VM_SHARES[@]}"; do
		tag=${s%%=*}
		dir=${s#*=}
		ro=
		case $dir in
		*:ro) dir=${dir%:ro}; ro=,readonly=on ;;
		esac
		VM_QEMU+=(-virtfs "local,path=${dir//,/,,},mount_tag=$tag,security_model=none,multidevs=remap$ro")
	done
	VM_QEMU+=("${VM_QEMU_EXTRA[@]}")
}

# vm_boot_hold_events: kernel command line words for the nested scenarios'
# host VM: the scheduler's tracepoints that hgclock.ko attaches to
# (hg_sched_tps in module/track.c), enabled by the kernel itself as it
# boots, in the top tracefs instance, before its other CPUs start: their
# first probe's text patches (the static key, the static call) are made
# where no other CPU can run stale code.  The holds later
# (hold_module_events in nested-lib.sh) then add the second probe, whose
# patch (the static call to the iterator) is made in a shell's write,
# not in hgclock's insmod, and the third; insmod and everything after
# patch nothing for these four.  The guests boot without it, as before
# (their insmod's stall was never seen; the nested tracking scenario on
# 6.1 hung twice at its guest's TSC write with holds in the guest,
# cause not established).
vm_module_events="sched:sched_switch sched:sched_migrate_task sched:sched_process_exit sched:sched_process_exec"
vm_boot_hold_events() {
	echo "trace_event=${vm_module_events// /,}"
}

# vm_perf_guest_files: the same for perf (Debian's linux-perf) and the
# libraries it needs that trace-cmd's do not bring; nothing without perf.
vm_perf_guest_files() {
	local perf lib

	perf=$(command -v perf) || return 0
	echo --guest-file
	echo "$perf:bin/perf"
	for lib in $(ldd "$perf" | awk '/=> \//{print $3}'); do
		echo --guest-file
		echo "$lib:${lib#/}"
	done
}

# vm_unit_guest_files BUILD: "--guest-file SRC:DST" pairs (one word a
# line) for running the agent in a nested guest as hgclock-agent.service
# would (tools/vm/guest-init): the guest tool, the unit file, setpriv.
vm_unit_guest_files() {
	local top
	top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	printf '%s\n' --guest-file "$1/user/hgclock-guest:usr/bin/hgclock-guest" \
		--guest-file "$top/debian/hgclock-guest.hgclock-agent.service:hgclock-agent.service"
	command -v setpriv >/dev/null &&
		printf '%s\n' --guest-file "$(command -v setpriv):usr/bin/setpriv"
	return 0
}

# vm_tracecmd_guest_files: "--guest-file SRC:DST" pairs (one word a line)
# that put trace-cmd and its libraries into the nested guest's initramfs.
vm_tracecmd_guest_files() {
	local tc lib

	tc=$(command -v trace-cmd) || { vm_msg "trace-cmd missing (tools/deps.sh)"; return 1; }
	echo --guest-file
	echo "$tc:bin/trace-cmd"
	# libgcc_s: dlopen()ed by glibc for pthread_exit, not listed by ldd.
	for lib in $(ldd "$tc" | awk '/=> \//{print $3}') $(ls /lib/x86_64-linux-gnu/libgcc_s.so.1 2>/dev/null); do
		echo --guest-file
		echo "$lib:${lib#/}"
	done
}
