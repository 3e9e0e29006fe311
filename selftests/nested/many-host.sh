# Host side of the many-guests scenario (tools/vm/nested HOST_SCRIPT):
# the main guest (selftests/nested/many-guest.sh: the module and the
# agent) and two more (selftests/nested/many.sh) boot together, and one
# `hgclock record` takes four guests at once.  Sourced by
# tools/vm/nested-host in the host VM, with nested-lib.sh.  TAP lines
# (many.*) go to many.tap beside the guest's console and to stdout.
tool=$HGCLOCK_TOOL
out=$(dirname "$HGCLOCK_GUEST_CONSOLE")
spec=vsock:3
rm -f "$out"/many.tap

insmod "$HGCLOCK_KO" || { echo "many: insmod failed"; return 1; }
# Nothing of the guests runs yet: the kernel text patches a run makes
# are made now (nested-lib.sh).
# kvm_exit only for the opt-in host trace (many.sh, many_trace_start):
# the runs on 6.1 where its event was held saw the first guest die as
# it booted in 3 of 4 (and 2 of 5 in CI before it).
if [ "${HGCLOCK_MANY_TRACE:-0}" = 1 ]; then
	hold_text_patches kvm:kvm_entry kvm:kvm_exit || return 1
else
	hold_text_patches kvm:kvm_entry || return 1
fi
guest_start || return 1
# shellcheck source=selftests/nested/many.sh
. "$(dirname "$tool")/../../selftests/nested/many.sh"
many_start
guest_wait GUEST-WAITING 300 >/dev/null || { echo "many: the main guest never came up"; return 125; }
echo "many: main guest up"
many_run
# many_record told the main guest it is done, unless it did not get
# that far (many_run has killed the extra guests).
if [ "$many_done" != 1 ]; then
	guest_send DONE
	guest_wait "HGCLOCK-GUEST-EXIT:" 120 >/dev/null
fi
# The hold goes only once no guest runs: its release flips KVM's static
# keys, a text patch, which the emulator may run stale under running
# vCPUs (nested-lib.sh).
hold_release
# Extra guests that never came up: their lines are skips, and the run is
# the emulator's failure (125, "never came up": classify-console's
# infra), which tools/check.sh retries.
if [ "$many_up" != 1 ]; then
	echo "many: the extra guests never came up"
	return 125
fi
rmmod hgclock || echo "many: rmmod failed"
# Every check passed or was a skip.
! grep -q '^not ok' "$out/many.tap"
