# Host side of the merge scenario (tools/vm/nested HOST_SCRIPT), shared by
# the merge test (tools/check.sh), make demo and tools/bench/merge.sh.
#
# hgclock records the host's tracking and the pairing with the guest;
# meanwhile trace-cmd records the host (KVM entries and exits, scheduler,
# and its IRQs and softirqs, the analysis's offenders) and, through its
# agent, the guest (scheduler), both on ftrace's local clock, while this
# script moves the guest's vCPU threads between the host CPUs.
# Everything lands in $HGCLOCK_NESTED_LOGS (the build tree, which
# outlives the VM): merge.hgc, host.dat, host-guest.dat.  The checks run
# outside the VM (selftests/nested/check_merge.py).
#
# Environment (set by tools/vm/scenarios.sh for every caller):
# HGCLOCK_APP_EVENTS (the application, "" for none),
# HGCLOCK_MERGE_SECONDS (trace length, default 6),
# HGCLOCK_MERGE_HOST_EVENTS / HGCLOCK_MERGE_GUEST_EVENTS (trace-cmd -e
# options), HGCLOCK_MERGE_MOVE_MS (how often the vCPUs move, default 300),
# HGCLOCK_MERGE_HOG (1: the analysis's ground-truth phase, below; default 0).
tool=$HGCLOCK_TOOL
out=$(dirname "$HGCLOCK_GUEST_CONSOLE")
secs=${HGCLOCK_MERGE_SECONDS:-6}
host_events=${HGCLOCK_MERGE_HOST_EVENTS:--e kvm:kvm_entry -e kvm:kvm_exit -e sched:sched_switch
	-e irq:irq_handler_entry -e irq:irq_handler_exit -e irq:softirq_entry -e irq:softirq_exit}
guest_events=${HGCLOCK_MERGE_GUEST_EVENTS:--e sched:sched_switch -e sched:sched_wakeup -e syscalls:sys_enter_clock_nanosleep -e syscalls:sys_exit_clock_nanosleep}
move_ms=${HGCLOCK_MERGE_MOVE_MS:-300}
rm -f "$out"/merge.hgc "$out"/host.dat "$out"/host-guest.dat "$out"/libvirt.tap "$out"/guest-apic \
	"$out"/merged-record.txt "$out"/host-app.hgev "$out"/guest-app.hgev "$out"/host-perf.data \
	"$out"/guest-perf.txt "$out"/guest-app.why "$out"/guest-perf.why "$out"/host-perf.why
# With HGCLOCK_GUEST_LIBVIRT=1 (make check) the guest is a libvirt domain
# (tools/vm/nested-libvirt.sh) and record finds it by name, from what
# libvirt wrote; the facts that takes are TAP lines in libvirt.tap, which
# tools/check.sh adds to the merge checks.
spec=vsock:3
lv_tap() {	# NAME COMMAND...: "ok/not ok N NAME" into libvirt.tap
	local name=$1 n
	shift
	n=$(($(cat "$out/libvirt.tap" 2>/dev/null | wc -l) + 1))
	if "$@"; then echo "ok $n $name"; else echo "not ok $n $name"; fi >>"$out/libvirt.tap"
}
[ "${HGCLOCK_GUEST_LIBVIRT:-0}" = 1 ] && spec=domain:guest

insmod "$HGCLOCK_KO" || { echo "merge: insmod failed"; return 1; }
# The traced events enabled once before the guest starts (nested-lib.sh):
# trace-cmd's enabling later then patches no kernel text.
# shellcheck disable=SC2046
hold_text_patches $(printf '%s\n' $host_events | grep -v '^-e$') || return 1
guest_start || return 1
guest_wait GUEST-WAITING 300 >/dev/null || { echo "merge: the guest never came up"; return 125; }
echo "merge: guest up"
# The guest's CPU -> APIC ID lines, printed before GUEST-WAITING (whole).
grep -a -o 'APICID [0-9]* [0-9]*' "$HGCLOCK_GUEST_CONSOLE" | cut -d' ' -f2,3 >"$out/guest-apic"
echo "merge: guest CPU APIC IDs: $(tr '\n' ' ' <"$out/guest-apic")"
if [ "$spec" = domain:guest ]; then
	# libvirt's pid file names the guest's QEMU, whose command line has
	# the vsock device in JSON form (not guest-cid=3).
	tr '\0' '\n' <"/proc/$HGCLOCK_GUEST_PID/cmdline" >"$out/qemu-cmdline"
	lv_tap libvirt.pid_file_names_guest [ "$(cat /run/libvirt/qemu/guest.pid 2>/dev/null)" = "$HGCLOCK_GUEST_PID" ]
	lv_tap libvirt.cmdline_json_vsock grep -q '^{"driver":"vhost-vsock-pci".*"guest-cid":3[,}]' "$out/qemu-cmdline"
fi
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

# A host application's events during the recording, in the traces' local
# clock (the guest runs the same program: merge-guest.sh).  Its path comes
# from tools/vm/scenarios.sh, "" when it is not built.
app=
if [ -n "${HGCLOCK_APP_EVENTS:-}" ] && [ -x "$HGCLOCK_APP_EVENTS" ]; then
	"$HGCLOCK_APP_EVENTS" -l -i 100 "$out/host-app.hgev" 900 >/tmp/app.log 2>&1 &
	app=$!
fi
# perf record of the whole host VM (cpu-clock: no PMU under the
# emulator), into tmpfs and copied out after.  Starting perf flips the
# scheduler's perf_sched_events key, a text patch that QEMU's
# multi-threaded TCG once ran stale (CI 2026-12-02: "Oops: int3" in
# ttwu_do_activate); hold_text_patches above holds that key on since
# before the guest started, so this start patches nothing.
hperf=
if [ "${HGCLOCK_MERGE_PERF:-1}" = 1 ] && command -v perf >/dev/null; then
	perf record -e cpu-clock -a -F 100 -o /tmp/host-perf.data >/tmp/host-perf.log 2>&1 &
	hperf=$!
elif [ "${HGCLOCK_MERGE_PERF:-1}" = 1 ]; then
	echo "no perf in the host VM (tools/deps.sh installs linux-perf)" >"$out/host-perf.why"
fi

# One command, as README's quick start: record for the life of
# trace-cmd record -A, then merge what it wrote (host.dat, and the
# guest's host-guest.dat found by the VM's name) into merged-record.txt.
# trace-cmd's options before -A are the host's, after it the guest's.
# --notimeout: trace-cmd waits 5 s at most for each message of the
# guest's agent, and a metadata message later than that leaves the
# guest's file empty (its read ends as if the guest had finished), so
# that the record fails at its end with "cannot create output handle",
# exit 22.  A nested guest under TCG takes longer than that to gather
# its metadata (kallsyms, the event formats) when the host is busy.
# shellcheck disable=SC2086
(cd /tmp && "$tool" record -o "$out/merge.hgc" --guest "$spec" \
	--merge "$out/merged-record.txt" --merge-host "$out/host.dat" -- \
	trace-cmd record -o "$out/host.dat" --notimeout -C local $host_events \
	-A @3 --name guest -C local $guest_events sleep "$secs") >"$out/trace-cmd.log" 2>"$out/record.err"
rc=$?
touch /tmp/stop-moving
wait $mover
if [ -n "$app" ]; then
	kill -TERM "$app"
	wait "$app"
	echo "merge: host app exit $? $(cat /tmp/app.log)"
fi
if [ -n "$hperf" ]; then
	kill -INT "$hperf"
	wait "$hperf"
	prc=$?
	echo "merge: host perf record exit $prc: $(tail -n 2 /tmp/host-perf.log | tr '\n' ' ')"
	if [ -s /tmp/host-perf.data ] && cp /tmp/host-perf.data "$out/host-perf.data"; then :; else
		echo "perf record exit $prc, no file: $(tail -n 3 /tmp/host-perf.log | tr '\n' ' ')" \
			>"$out/host-perf.why"
	fi
fi
echo "merge: record -- trace-cmd record exit $rc, vCPU moves $(cat /tmp/moves 2>/dev/null)"
# All of a failed record's last lines (the agent's side is in the
# guest's console: merge-guest.sh).
lines=5
[ "$rc" = 0 ] || lines=25
tail -n "$lines" "$out/trace-cmd.log"
sed 's/^/# record: /' "$out/record.err" | tail -n "$lines"
tc=0
grep -q 'not merging' "$out/record.err" && tc=1
if [ "$spec" = domain:guest ]; then
	"$tool" dump "$out/merge.hgc" >"$out/merge-dump.txt" 2>&1
	grep -a '^guest0:' "$out/merge-dump.txt" | sed 's/^/merge: /'
	lv_tap libvirt.record_domain_finds_vm grep -q "^guest0: domain:guest.*VM process $HGCLOCK_GUEST_PID " \
		"$out/merge-dump.txt"
	lv_tap libvirt.record_domain_kvm_exact grep -Eq 'guest 0: [1-9][0-9]* kvm-exact segments' "$out/record.err"
	# --merge found the guest's trace by the domain's name and merged.
	lv_tap libvirt.record_merge_one_command sh -c "[ $rc -eq 0 ] &&
		grep -q -- '--guest 0=$out/host-guest.dat' '$out/record.err' &&
		grep -q '^g0 v1 .* kvm-exact}' '$out/merged-record.txt'"
fi
# The analysis's ground truth (HGCLOCK_MERGE_HOG=1; tools/check.sh's
# merge test, never make demo's): vCPU 0's thread pinned to host CPU 1
# (vCPU 1's to CPU 0), a second recording in which a busy guest thread
# spins on vCPU 0 between two reads of its /proc/stat steal while a host
# task (hog.py: 20 ms busy, 30 ms asleep, 4 s, SCHED_OTHER nice 0 like
# the vCPU threads) runs on CPU 1.  Into hog.hgc, hog-host.dat,
# hog-host-guest.dat, hog.json, hog-guest.txt: check_hog.py compares
# merge --analyze-json with the host trace and with the guest's steal.
# Its own failures are said in hog.why and fail nothing here.
hog_phase() {
	local v0 v1 rec n=0 hog hrc
	rm -f "$out"/hog.hgc "$out"/hog-host.dat "$out"/hog-host-guest.dat "$out"/hog.json \
		"$out"/hog-guest.txt "$out"/hog.why /tmp/hog-rec /tmp/hog-end
	v0=$(awk '$1 == 0 { print $2 }' "$out/vcpu-tids")
	# The other vCPU: QEMU's index 3 with the APIC ID gap (6.12).
	v1=$(awk '$1 != 0 { print $2; exit }' "$out/vcpu-tids")
	[ -n "$v0" ] && [ -n "$v1" ] || { echo "no vCPU threads" >"$out/hog.why"; return 1; }
	taskset -pc 1 "$v0" >/dev/null && taskset -pc 0 "$v1" >/dev/null ||
		{ echo "cannot pin the vCPU threads" >"$out/hog.why"; return 1; }
	guest_send HOG-START
	guest_wait HOG-AGENT-UP 120 >/dev/null || { echo "the guest never started its agent again" >"$out/hog.why"; return 1; }
	# shellcheck disable=SC2086
	(cd /tmp && timeout 400 "$tool" record -o "$out/hog.hgc" --guest "$spec" -- \
		trace-cmd record -o "$out/hog-host.dat" --notimeout -C local $host_events \
		-A @3 --name guest -C local $guest_events \
		sh -c 'touch /tmp/hog-rec; n=0; while [ ! -e /tmp/hog-end ] && [ $n -lt 900 ]; do sleep 0.1; n=$((n + 1)); done') \
		>"$out/hog-trace-cmd.log" 2>"$out/hog-record.err" &
	rec=$!
	while [ ! -e /tmp/hog-rec ] && kill -0 $rec 2>/dev/null && [ $n -lt 3000 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	if [ ! -e /tmp/hog-rec ]; then
		touch /tmp/hog-end
		wait $rec
		echo "the recording never started (exit $?): $(tail -n 2 "$out/hog-record.err" | tr '\n' ' ')" >"$out/hog.why"
		guest_send HOG-BUSY
		guest_send HOG-STOP
		return 1
	fi
	sleep 1
	guest_send HOG-BUSY
	if guest_wait HOG-STEAL-BEFORE 60 >/dev/null; then
		hog=$(python3 "$(dirname "$tool")/../../selftests/nested/hog.py" 1 4 20 30)
		echo "$hog" >"$out/hog.json"
		echo "merge: hog: $hog; vCPU 0 thread $v0 nice $(sed 's/.*) //' "/proc/$v0/stat" | awk '{ print $17 }')"
	else
		echo "the guest's busy thread never started" >"$out/hog.why"
	fi
	guest_send HOG-STOP
	guest_wait HOG-STEAL-AFTER 60 >/dev/null
	sleep 0.5
	touch /tmp/hog-end
	wait $rec
	hrc=$?
	echo "merge: hog recording exit $hrc"
	sed 's/^/# hog record: /' "$out/hog-record.err" | tail -n 3
	[ $hrc -eq 0 ] || echo "the hog's recording ended with exit $hrc" >>"$out/hog.why"
	grep -a -E 'HOG-(STEAL|BUSY)' "$HGCLOCK_GUEST_CONSOLE" | tr -d '\r' | sed 's/.*\(HOG-\)/\1/' >"$out/hog-guest.txt"
	echo "$v0 $v1" >"$out/hog-vcpus"
	taskset -pc 0-1 "$v0" >/dev/null
	taskset -pc 0-1 "$v1" >/dev/null
	return 0
}
if [ "${HGCLOCK_MERGE_HOG:-0}" = 1 ]; then
	hog_phase
	[ -s "$out/hog.why" ] && echo "merge: hog: $(cat "$out/hog.why")"
fi
guest_send DONE
# Long enough for the guest's three tries at its file (merge-guest.sh).
guest_wait "guest: done" 480 >/dev/null
# The guest's files (its application's events, perf's samples), through
# the guestout share: each taken only when the guest said it is whole
# out (a file cut short would fail the checks for the wrong reason);
# else the guest's words about them go to NAME.why, which check_merge.py
# quotes.
for f in guest-app.hgev:guest-app.why guest-perf.txt:guest-perf.why; do
	name=${f%%:*} why=${f#*:}
	if grep -q "^guest: out: $name " "$HGCLOCK_GUEST_CONSOLE" && [ -s "/tmp/guest-out/$name" ]; then
		cp "/tmp/guest-out/$name" "$out/$name"
		echo "merge: guest's $name: $(stat -c %s "$out/$name") bytes"
	else
		grep -a -E '^guest: (app|perf|cannot mount|copying|guestout|stopping)' "$HGCLOCK_GUEST_CONSOLE" |
			tr '\n' ';' >"$out/$why"
		[ -s "$out/$why" ] || echo "the guest never reached its files' copy" >"$out/$why"
		echo "merge: no $name from the guest: $(cat "$out/$why")"
	fi
done
hold_release
ls -l "$out"/merge.hgc "$out"/host.dat "$out"/host-guest.dat 2>&1 | sed 's/^/merge: /'
[ $tc -eq 0 ] && [ $rc -eq 0 ]
