# Host side of the merge scenario (tools/vm/nested HOST_SCRIPT), shared by
# the merge test (tools/check.sh), make demo and tools/bench/merge.sh.
#
# hgclock records the host's tracking and the pairing with the guest;
# meanwhile trace-cmd records the host (KVM entries and exits, scheduler)
# and, through its agent, the guest (scheduler), both on ftrace's local
# clock, while this script moves the guest's vCPU threads between the
# host CPUs.  Everything lands in $HGCLOCK_NESTED_LOGS (the build tree,
# which outlives the VM): merge.hgc, host.dat, host-guest.dat.  The
# checks run outside the VM (selftests/nested/check_merge.py).
#
# Environment: HGCLOCK_MERGE_SECONDS (trace length, default 6),
# HGCLOCK_MERGE_HOST_EVENTS / HGCLOCK_MERGE_GUEST_EVENTS (trace-cmd -e
# options), HGCLOCK_MERGE_MOVE_MS (how often the vCPUs move, default 300).
tool=$HGCLOCK_TOOL
out=$(dirname "$HGCLOCK_GUEST_CONSOLE")
secs=${HGCLOCK_MERGE_SECONDS:-6}
host_events=${HGCLOCK_MERGE_HOST_EVENTS:--e kvm:kvm_entry -e kvm:kvm_exit -e sched:sched_switch}
guest_events=${HGCLOCK_MERGE_GUEST_EVENTS:--e sched:sched_switch -e sched:sched_wakeup}
move_ms=${HGCLOCK_MERGE_MOVE_MS:-300}
rm -f "$out"/merge.hgc "$out"/host.dat "$out"/host-guest.dat

insmod "$HGCLOCK_KO" || { echo "merge: insmod failed"; return 1; }
# The traced events enabled once before the guest starts (nested-lib.sh):
# trace-cmd's enabling later then patches no kernel text.
# shellcheck disable=SC2046
hold_text_patches $(printf '%s\n' $host_events | grep -v '^-e$') || return 1
guest_start || return 1
guest_wait GUEST-WAITING 300 >/dev/null || { echo "merge: the guest never came up"; return 125; }
echo "merge: guest up"
"$tool" record -o "$out/merge.hgc" --duration 900 --guest vsock:3 2>"$out/record.err" &
recorder=$!
sleep 2

# Move each vCPU thread to the other host CPU every move_ms, all along.
guest_vcpu_tids >"$out/vcpu-tids"
rm -f /tmp/stop-moving
(
	n=0
	while [ ! -e /tmp/stop-moving ]; do
		while read -r vcpu tid; do
			taskset -pc $(((vcpu + n) % 2)) "$tid" >/dev/null 2>&1
		done <"$out/vcpu-tids"
		n=$((n + 1))
		sleep "$(awk -v ms="$move_ms" 'BEGIN { printf "%.3f", ms / 1000 }')"
	done
	echo "$n" >/tmp/moves
) &
mover=$!

# Options before -A are the host's, after it the guest's; -o first.
# shellcheck disable=SC2086
(cd /tmp && trace-cmd record -o "$out/host.dat" -C local $host_events \
	-A @3 --name guest -C local $guest_events sleep "$secs") >"$out/trace-cmd.log" 2>&1
tc=$?
touch /tmp/stop-moving
wait $mover
echo "merge: trace-cmd record exit $tc, vCPU moves $(cat /tmp/moves 2>/dev/null)"
tail -n 4 "$out/trace-cmd.log"
kill -INT $recorder
wait $recorder
rc=$?
sed 's/^/# record: /' "$out/record.err" | tail -n 3
guest_send DONE
guest_wait "guest: done" 60 >/dev/null
hold_release
ls -l "$out"/merge.hgc "$out"/host.dat "$out"/host-guest.dat 2>&1 | sed 's/^/merge: /'
[ $tc -eq 0 ] && [ $rc -eq 0 ]
