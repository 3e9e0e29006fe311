# tools/vm/nested-lib.sh - helpers for host scripts of tools/vm/nested.
# shellcheck shell=bash
# Sourced in the host VM; HGCLOCK_GUEST_PID and HGCLOCK_GUEST_CONSOLE are
# set once guest_start has run.

# guest_wait TEXT [TIMEOUT]: wait until the guest printed TEXT on its
# console; prints the line.  Fails on timeout or if the guest died.  Only
# a whole line counts: the console is read while the guest writes it, and
# a line caught half-written (CI on 2026-12-02: "FLOOD-SKIPPED: " without
# its reason) would hand the caller a truncated line.
guest_wait() {
	local text=$1 t=${2:-120} i=0 line

	while [ $i -lt $((t * 10)) ]; do
		line=$(T=$text perl -ne 'if (/\n\z/ && index($_, $ENV{T}) >= 0) { s/\r//g; print; exit }' \
			"$HGCLOCK_GUEST_CONSOLE" 2>/dev/null)
		[ -n "$line" ] && { echo "$line"; return 0; }
		kill -0 "$HGCLOCK_GUEST_PID" 2>/dev/null || return 1
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

# guest_send TEXT: one line to the guest's host_wait (its ttyS1).
guest_send() {
	echo "$1" >/tmp/guestctl.in
}

# vm_vcpu_tids PID: "vcpu_index tid" lines of QEMU PID's vCPU threads
# now, from their names ("CPU N/KVM", with -name ...,debug-threads=on),
# by vCPU index; nothing once QEMU is gone.
vm_vcpu_tids() {
	local t comm

	for t in /proc/"$1"/task/*; do
		comm=$(cat "$t/comm" 2>/dev/null) || continue
		case $comm in
		"CPU "*/KVM) comm=${comm#CPU }; echo "${comm%/KVM} ${t##*/}" ;;
		esac
	done | sort -n
}

# guest_vcpu_tids: the same for the main guest.
guest_vcpu_tids() {
	vm_vcpu_tids "$HGCLOCK_GUEST_PID"
}

# guest_debugfs: the guest VM's KVM debugfs directory.
guest_debugfs() {
	ls -d /sys/kernel/debug/kvm/"$HGCLOCK_GUEST_PID"-* 2>/dev/null | head -n 1
}

# hold_text_patches [EVENT...]: before guest_start, the kernel text
# patches a run would otherwise make while the guest runs.  Enabling a
# tracepoint, or adding its second probe (its static call then goes
# through the iterator, at every call site), patches kernel text; a
# third probe does not.  QEMU's multi-threaded TCG now and then runs the
# old code after such a patch ("Oops: int3", tools/vm/run): in CI on
# 2026-11-29 at __schedule right after qemu made its VM, and in
# kvm_arch_vcpu_ioctl_run after the host enabled KVM's events mid-run.
# So, with nothing of the guest running yet: KVM is loaded; each EVENT
# (as "kvm:kvm_cpuid" or "kvm") is enabled in two tracefs instances of
# their own, "hold" and "hold2" (tracing off: they record nothing),
# which keeps every later enabling of it from patching; and a VM with
# one vCPU is made and kept (its process is $HOLD_VM_PID), which turns on
# what KVM patches in for its first VM (the scheduler's preempt
# notifiers).  The held vCPU never runs; its local APIC is in the kernel
# and disabled, both in hardware (APIC base MSR written 0) and in
# software (never enabled): that holds KVM's apic_hw_disabled and
# apic_sw_disabled static keys above zero for the whole run, so the
# guest's vCPUs creating and enabling their APICs never flip them (CI on
# 2026-12-02: "Oops: int3" at apic_has_pending_timer's static branch,
# 32 s into the moving scenario, the deferred decrement of
# apic_hw_disabled patching KVM's text while vCPUs ran).  hold_release
# undoes all of it.
hold_text_patches() {
	modprobe "$HGCLOCK_KVM_MODULE" || { echo "hold: modprobe $HGCLOCK_KVM_MODULE failed"; return 1; }
	hold_events "$@" || return 1
	# KVM_CREATE_VM _IO(0xae, 1), KVM_CREATE_IRQCHIP _IO(0xae, 0x60),
	# KVM_CREATE_VCPU _IO(0xae, 0x41), KVM_SET_MSRS _IOW(0xae, 0x89,
	# struct kvm_msrs) (8 bytes), MSR_IA32_APICBASE 0x1b.
	# And perf's: a perf event bound to this task (a disabled dummy,
	# PERF_TYPE_SOFTWARE 1, PERF_COUNT_SW_DUMMY 9, perf_event_open 298)
	# holds perf_sched_events on, the key that per-task events switch and
	# that perf record's start (its feature probes) would otherwise flip
	# 0 -> 1 and, a second later, back (CI 2026-12-02: "Oops: int3" in
	# ttwu_do_activate as perf record started in the host VM).
	python3 -c 'import ctypes, fcntl, os, signal, struct
attr = bytearray(128)
struct.pack_into("<IIQ", attr, 0, 1, 128, 9)
struct.pack_into("<Q", attr, 40, 1)
libc = ctypes.CDLL(None, use_errno=True)
pfd = libc.syscall(298, ctypes.c_char_p(bytes(attr)), 0, -1, -1, 0)
if pfd < 0:
    raise SystemExit("perf_event_open: " + os.strerror(ctypes.get_errno()))
kvm = os.open("/dev/kvm", os.O_RDWR)
vm = fcntl.ioctl(kvm, 0xae01, 0)
fcntl.ioctl(vm, 0xae60, 0)
vcpu = fcntl.ioctl(vm, 0xae41, 0)
msrs = bytearray(struct.pack("<IIIIQ", 1, 0, 0x1b, 0, 0))
if fcntl.ioctl(vcpu, 0x4008ae89, msrs) != 1:
    raise SystemExit("KVM_SET_MSRS: APIC base not written")
print("ready", flush=True)
signal.pause()' >/tmp/hold-vm.out 2>&1 &
	HOLD_VM_PID=$!
	local i=0
	while ! grep -q ready /tmp/hold-vm.out && [ $i -lt 100 ]; do
		kill -0 $HOLD_VM_PID 2>/dev/null || { echo "hold: no VM: $(cat /tmp/hold-vm.out)"; return 1; }
		sleep 0.1
		i=$((i + 1))
	done
}

# hold_events EVENT...: each EVENT ("sched:sched_switch", or a whole
# system as "sched") enabled in the silent instances "hold" and "hold2".
hold_events() {
	local hold ev

	[ -d /sys/kernel/tracing/instances ] || mount -t tracefs nodev /sys/kernel/tracing
	for hold in /sys/kernel/tracing/instances/hold /sys/kernel/tracing/instances/hold2; do
		mkdir -p "$hold" && echo 0 >"$hold/tracing_on" || return 1
		for ev; do
			case $ev in
			*:*) echo 1 >"$hold/events/${ev%%:*}/${ev#*:}/enable" ;;
			*) echo 1 >"$hold/events/$ev/enable" ;;
			esac || { echo "hold: cannot enable $ev"; return 1; }
		done
	done
}

# hold_module_events: the scheduler's tracepoints that hgclock.ko attaches
# to (hg_sched_tps in module/track.c), held before the first insmod
# (tools/vm/nested-host calls it before the host script), so that
# loading and unloading hgclock patches no kernel text in the host VM.
# The host VM's kernel enabled them as it booted, before its other CPUs
# ran (vm_boot_hold_events in lib.sh: the first probe's patches); the two
# holds here add the second probe (its static call patch, made in this
# shell's write) and the third, and insmod's is a fourth.  CI on
# 2026-12-03 (nested merge, 6.1): the host VM's first insmod enabled
# sched_switch, and a CPU then sat at __schedule's patched branch for
# 21 s (an RCU stall, "in hg_attach" through insmod's wait): the
# emulator's stale-code fault of hold_text_patches, met at the module's
# own first patch.  The first-enable path itself is exercised by every
# single-level VM test, which loads and unloads the module on a kernel
# where nothing holds these tracepoints.
hold_module_events() {
	# shellcheck disable=SC2086,SC2154 # vm_module_events (lib.sh, sourced first): an event a word
	hold_events $vm_module_events || return 1
	echo "hold: the module's tracepoints held; enabled at boot (top instance):" \
		"$(cat /sys/kernel/tracing/events/sched/sched_switch/enable 2>/dev/null || echo '?')"
	# The boot-time events stay on (their probes are the holds' first)
	# but record nothing: trace-cmd turns the top instance's recording
	# on when it traces.
	echo 0 >/sys/kernel/tracing/tracing_on
}

hold_release() {
	[ -n "${HOLD_VM_PID:-}" ] && kill "$HOLD_VM_PID" 2>/dev/null && wait "$HOLD_VM_PID" 2>/dev/null
	HOLD_VM_PID=
	rmdir /sys/kernel/tracing/instances/hold /sys/kernel/tracing/instances/hold2 2>/dev/null
	return 0
}

# shutdown_watch_start: from now on, every guest's triple fault is kept
# with the guest's registers.  A nested guest that triple-faults ends its
# QEMU silently under -no-reboot (status 0: "the guest's qemu had exited
# by itself"), and on AMD KVM re-initializes the vCPU at the shutdown
# exit (shutdown_interception), so neither QEMU nor its monitor can say
# where the guest was.  A kprobe on shutdown_interception can: it reads
# the RIP, RSP and CR2 that svm_vcpu_run copied from the VMCB into
# vcpu->arch just before (their offsets from KVM's BTF, by pahole), into
# the tracefs instance "hgshut" with each event's QEMU (record-tgid).
# The probe goes through ftrace at that one function's entry, so its
# text patch is a call site that runs only at a triple fault: nothing
# else the guests run is patched (hold_text_patches).  Once per host
# VM; call after KVM is loaded and before a guest starts.  Says why and
# goes on when it cannot (Intel: VMX reads RIP lazily, no copy to read).
# The self-test guest's vCPU thread is a vCPU thread like any: hgclock,
# when loaded, records it; its TID is in SHUTDOWN_WATCH_TID.
# shutdown_watch_pid PID CONSOLE names the console of each guest QEMU;
# shutdown_watch_report prints where each triple fault was
# (tools/vm/place-guest-rip).
SHUTDOWN_WATCH="not started" SHUTDOWN_WATCH_TID=
shutdown_watch_start() {
	local t=/sys/kernel/tracing btf=/sys/kernel/btf arch regs cr2 base

	[ -d "$t/instances/hgshut" ] && return 0
	: >/tmp/shutdown-watch.pids
	if [ "${HGCLOCK_SHUTDOWN_WATCH:-1}" = 0 ]; then
		SHUTDOWN_WATCH="off (HGCLOCK_NESTED_SHUTDOWN_WATCH=0)"
		echo "shutdown-watch: $SHUTDOWN_WATCH"
		return 0
	fi
	if [ "$HGCLOCK_KVM_MODULE" != kvm_amd ]; then
		SHUTDOWN_WATCH="not on $HGCLOCK_KVM_MODULE (VMX keeps no copy of a guest's RIP to read)"
		echo "shutdown-watch: $SHUTDOWN_WATCH"
		return 0
	fi
	command -v pahole >/dev/null || { SHUTDOWN_WATCH="no pahole (tools/deps.sh)"; echo "shutdown-watch: $SHUTDOWN_WATCH"; return 0; }
	# "	struct kvm_vcpu_arch   arch;   /*   576  8448 */": the offset.
	arch=$(pahole -C kvm_vcpu --btf_base "$btf/vmlinux" "$btf/kvm" 2>/dev/null |
		awk '$NF == "*/" && $(NF-4) == "arch;" { print $(NF-2); exit }')
	base=$(pahole -C kvm_vcpu_arch --btf_base "$btf/vmlinux" "$btf/kvm" 2>/dev/null)
	regs=$(awk '$NF == "*/" && $(NF-4) ~ /^regs\[/ { print $(NF-2); exit }' <<<"$base")
	cr2=$(awk '$NF == "*/" && $(NF-4) == "cr2;" { print $(NF-2); exit }' <<<"$base")
	if [ -z "$arch" ] || [ -z "$regs" ] || [ -z "$cr2" ]; then
		SHUTDOWN_WATCH="no offsets of kvm_vcpu's arch.regs and arch.cr2 in KVM's BTF"
		echo "shutdown-watch: $SHUTDOWN_WATCH"
		return 0
	fi
	# VCPU_REGS_RSP is 4, VCPU_REGS_RIP 16; unsigned longs.
	if ! echo "p:hgshut/shutdown kvm_amd:shutdown_interception" \
		"rip=+$((arch + regs + 16 * 8))(%di):x64 rsp=+$((arch + regs + 4 * 8))(%di):x64" \
		"cr2=+$((arch + cr2))(%di):x64" >>"$t/kprobe_events"; then
		SHUTDOWN_WATCH="the kprobe on shutdown_interception was refused"
		echo "shutdown-watch: $SHUTDOWN_WATCH"
		return 0
	fi
	mkdir "$t/instances/hgshut" && echo 1 >"$t/instances/hgshut/options/record-tgid" &&
		echo 1 >"$t/instances/hgshut/events/hgshut/shutdown/enable" ||
		{ SHUTDOWN_WATCH="cannot enable the kprobe in instance hgshut"; echo "shutdown-watch: $SHUTDOWN_WATCH"; return 0; }
	# The self-test: a guest of one ud2 at 0x1000 that triple-faults
	# (tools/vm/kvm-triple-fault), read back, then forgotten.
	local out
	out=$(timeout 60 python3 "$(dirname "${BASH_SOURCE[0]}")/kvm-triple-fault" 2>&1)
	SHUTDOWN_WATCH_TID=$(sed -n 's/^shutdown at 0x1000, vCPU thread \([0-9]*\)$/\1/p' <<<"$out")
	if grep -q 'shutdown: .* rip=0x1000 ' "$t/instances/hgshut/trace"; then
		SHUTDOWN_WATCH=ok
	else
		SHUTDOWN_WATCH="its self-test's triple fault was not read back (${out:-no output}):"
		SHUTDOWN_WATCH+=" $(grep -v '^#' "$t/instances/hgshut/trace" | tail -n 1)"
	fi
	echo >"$t/instances/hgshut/trace"
	echo "shutdown-watch: on (vcpu arch at $arch, regs at +$regs, cr2 at +$cr2); self-test:" \
		"$SHUTDOWN_WATCH${SHUTDOWN_WATCH_TID:+ (its vCPU thread $SHUTDOWN_WATCH_TID)}"
}

shutdown_watch_pid() {
	echo "$1 $2" >>/tmp/shutdown-watch.pids
}

shutdown_watch_report() {
	local t=/sys/kernel/tracing/instances/hgshut

	[ -r "$t/trace" ] || return 0
	python3 "$(dirname "${BASH_SOURCE[0]}")/place-guest-rip" "$t/trace" \
		/proc/kallsyms /tmp/shutdown-watch.pids
}

# A no-module run (tools/vm/nested --no-module, HGCLOCK_NO_MODULE=1): the
# host script's "insmod $HGCLOCK_KO" and "rmmod hgclock" do nothing (its
# $HGCLOCK_TOOL is a stub); every other module loads as usual.
if [ "${HGCLOCK_NO_MODULE:-0}" = 1 ]; then
	insmod() {
		case $1 in
		*/hgclock.ko) echo "# no-module run, not loading $1"; return 0 ;;
		esac
		command insmod "$@"
	}
	rmmod() {
		case $1 in
		hgclock | */hgclock.ko) return 0 ;;
		esac
		command rmmod "$@"
	}
fi

# TAP for host scripts: tap/check from tools/tap.sh ($tap_failed).
# shellcheck source=tools/tap.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tap.sh"
