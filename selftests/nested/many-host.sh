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
hold_text_patches kvm:kvm_entry || return 1
guest_start || return 1
# shellcheck source=selftests/nested/many.sh
. "$(dirname "$tool")/../../selftests/nested/many.sh"
many_start
guest_wait GUEST-WAITING 300 >/dev/null || { echo "many: the main guest never came up"; return 125; }
echo "many: main guest up"
many_run
# Extra guests that never came up: their lines are skips, and the run is
# the emulator's failure (125), which tools/check.sh retries.
[ "$many_up" = 1 ] || { guest_send DONE; hold_release; return 125; }
guest_send DONE
guest_wait "HGCLOCK-GUEST-EXIT:" 120 >/dev/null
hold_release
rmmod hgclock || echo "many: rmmod failed"
# Every check passed or was a skip.
! grep -q '^not ok' "$out/many.tap"
