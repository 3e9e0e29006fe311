# tools/vm/nested-lib.sh - helpers for host scripts of tools/vm/nested.
# Sourced in the host VM; HGCLOCK_GUEST_PID and HGCLOCK_GUEST_CONSOLE are
# set once guest_start has run.

# guest_wait TEXT [TIMEOUT]: wait until the guest printed TEXT on its
# console; prints the line.  Fails on timeout or if the guest died.
guest_wait() {
	local text=$1 t=${2:-120} i=0 line

	while [ $i -lt $((t * 10)) ]; do
		line=$(grep -m1 -F -- "$text" "$HGCLOCK_GUEST_CONSOLE" 2>/dev/null) &&
			{ echo "$line"; return 0; }
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

# guest_vcpu_tids: "vcpu_index tid" lines, from qemu's thread names
# ("CPU N/KVM", with -name ...,debug-threads=on).
guest_vcpu_tids() {
	local t comm

	for t in /proc/"$HGCLOCK_GUEST_PID"/task/*; do
		comm=$(cat "$t/comm" 2>/dev/null) || continue
		case $comm in
		"CPU "*/KVM) echo "${comm#CPU } ${t##*/}" | sed 's|/KVM||' ;;
		esac
	done | sort -n
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
# which keeps every later enabling of it from patching; and a VM without
# vCPUs is made and kept (its process is $HOLD_VM_PID), which turns on
# what KVM patches in for its first VM (the scheduler's preempt
# notifiers).  hold_release undoes both.
hold_text_patches() {
	local hold ev

	modprobe "$HGCLOCK_KVM_MODULE" || { echo "hold: modprobe $HGCLOCK_KVM_MODULE failed"; return 1; }
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
	# KVM_CREATE_VM is _IO(0xae, 1).
	python3 -c 'import fcntl, os, signal
kvm = os.open("/dev/kvm", os.O_RDWR)
vm = fcntl.ioctl(kvm, 0xae01, 0)
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

hold_release() {
	[ -n "${HOLD_VM_PID:-}" ] && kill "$HOLD_VM_PID" 2>/dev/null && wait "$HOLD_VM_PID" 2>/dev/null
	HOLD_VM_PID=
	rmdir /sys/kernel/tracing/instances/hold /sys/kernel/tracing/instances/hold2 2>/dev/null
	return 0
}

# TAP for host scripts: tap/check from tools/tap.sh ($tap_failed).
# shellcheck source=tools/tap.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tap.sh"
