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

# TAP for host scripts: tap/check from tools/tap.sh ($tap_failed).
# shellcheck source=tools/tap.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tap.sh"
