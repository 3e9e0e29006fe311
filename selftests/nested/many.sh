# Many guests at once: sourced by selftests/nested/many-host.sh in the
# host VM, which calls many_start right after starting its main guest and
# many_run once that guest is up, its agent serving ($spec).
#
# Two more KVM guests start with the main one (extra_guest_start in
# tools/vm/nested-host): guest "extra1" (vsock CID 4) with the module and
# the agent, and guest "extra2" (CID 5) bare: no module and no agent, as a
# guest that cannot load one.  One `hgclock record` takes four guests:
#   0  the main guest ($spec)
#   1  vsock:4, whose QEMU is killed 15 s into the recording (a guest
#      that dies: lost, said, the others go on)
#   2  vm=PID,no-agent: the bare guest, from the host's records alone
#   3  vsock:6, a CID nobody has (unreachable at the start: lost, said)
# Ground truth for each guest's x86-tsc mapping is KVM's debugfs
# tsc-offset of its vCPU (guest TSC = host TSC + offset), read while the
# guest runs: a guest TSC value converts through the file to exactly the
# host TSC it was made from, by kvm-exact with a bound of 0.  A second,
# short record with --require-all refuses to start without every guest.
#
# They boot with the main guest, so that a host VM the emulator kills as
# guests boot (a triple fault in 3 of 5 such runs on 2026-12-03) dies
# before anything is recorded.
#
# TAP lines go to $out/many.tap (tools/check.sh adds them to its TAP
# log); the files stay in $out (many.hgc, many.err, many-*).

# The TAP lines' number: one more than the file has.
many_n() { echo $(($(grep -c -E '^(not )?ok ' "$out/many.tap" 2>/dev/null) + 1)); }
many_tap() {	# NAME COMMAND...: "ok/not ok N many.NAME" into many.tap
	local name=$1 r=ok
	shift
	"$@" || r="not ok"
	echo "$r $(many_n) many.$name" >>"$out/many.tap"
}
many_skip() {	# NAME REASON
	echo "ok $(many_n) many.$1 # SKIP $2" >>"$out/many.tap"
}
# The host's TSC now (hgclock now: the module's reading).
many_host_tsc() {
	"$tool" now --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["samples"][0]["tsc_before"])'
}
# many_truth ID PID: "ID HOST_TSC OFFSET" for VM PID's vCPU 0, read now.
many_truth() {
	local d off
	d=$(ls -d /sys/kernel/debug/kvm/"$2"-* 2>/dev/null | head -n 1)
	off=$(cat "$d/vcpu0/tsc-offset" 2>/dev/null) || return 1
	echo "$1 $(many_host_tsc) $off"
}
# many_exact ID: the truth lines of guest ID all convert exactly.
many_exact() {
	local id=$1 n=0 bad=0 host off gtsc line
	while read -r g host off; do
		[ "$g" = "$id" ] || continue
		gtsc=$(python3 -c "print(($host + $off) % 2**64)")
		line=$("$tool" convert "$out/many.hgc" --guest "$id" --vcpu 0 --clock x86-tsc --json "$gtsc")
		echo "# many: guest $id: $line"
		n=$((n + 1))
		case $line in
		*"\"host_value\": $host, \"method\": \"kvm-exact\", \"bound_ns\": 0,"*) ;;
		*) bad=$((bad + 1)) ;;
		esac
	done <"$out/many-truth"
	[ $n -gt 0 ] && [ $bad -eq 0 ]
}

many_checks="record_goes_on losses_said file_complete agent_as_unit main_exact dead_guest_exact_before
	bare_exact bare_no_agent_said require_all_stops"
many_up=0
many_why="many_start was not called"

# many_start: the two extra guests, booted.  Never fails the
# scenario: guests that do not come up make many_run's lines skips.
many_start() {
	local i

	rm -f "$out"/many.tap "$out"/many.hgc "$out"/many.err "$out"/many-truth "$out"/many-req.hgc \
		"$out"/many-req.err "$out"/many-dump.txt
	echo "many: starting two more guests"
	extra_guest_start 1 4 agent && extra_guest_start 2 5 bare
	for i in $(seq 1 3000); do
		grep -q 'HGCLOCK-EXTRA-READY' "$out/extra1-console.log" 2>/dev/null &&
			grep -q 'HGCLOCK-EXTRA-READY' "$out/extra2-console.log" 2>/dev/null && { many_up=1; break; }
		kill -0 "${EXTRA_GUEST_PID[1]:-0}" 2>/dev/null && kill -0 "${EXTRA_GUEST_PID[2]:-0}" 2>/dev/null ||
			break
		sleep 0.1
	done
	if [ $many_up -eq 0 ]; then
		# The emulator's nested guests do not always come up
		# (testing.rst, "Failure rates"): said, as skips.
		many_why="the extra guests did not come up in 300 s (extra1/extra2-console.log, -qemu.log)"
		echo "many: $many_why"
		tail -n 3 "$out"/extra*-qemu.log 2>/dev/null | sed 's/^/many: /'
		return 0
	fi
	echo "many: extra guests up after $((i / 10)) s"
}

# many_run: the record of four guests and its checks, into many.tap.
many_run() {
	local t pid

	if [ $many_up -eq 0 ]; then
		for t in $many_checks; do many_skip "$t" "$many_why"; done
	elif ! kill -0 "$HGCLOCK_GUEST_PID" 2>/dev/null; then
		echo "many: the main guest is gone"
		for t in $many_checks; do
			many_skip "$t" "the main guest died before these checks (emulator; guest-console.log)"
		done
	else
		many_record
	fi
	for pid in "${EXTRA_GUEST_PID[@]}"; do
		kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	done
	EXTRA_GUEST_PID=()
	sed 's/^/many: /' "$out/many.tap"
}

many_record() {
	local pid1=${EXTRA_GUEST_PID[1]} pid2=${EXTRA_GUEST_PID[2]} rec rc

	echo "many: $(free -m | awk '/^Mem/ { print $7 " MiB available" }')"
	"$tool" record -o "$out/many.hgc" --duration 40 --guest "$spec" --guest vsock:4 \
		--guest "vm=$pid2,no-agent" --guest vsock:6 2>"$out/many.err" &
	rec=$!
	sleep 5
	many_truth 0 "$HGCLOCK_GUEST_PID" >>"$out/many-truth"
	many_truth 1 "$pid1" >>"$out/many-truth"
	many_truth 2 "$pid2" >>"$out/many-truth"
	sleep 5
	many_truth 1 "$pid1" >>"$out/many-truth"
	sleep 5
	# Guest 1 dies: its QEMU killed, as by the OOM killer.
	kill -KILL "$pid1"
	wait "$pid1" 2>/dev/null
	sleep 5
	many_truth 0 "$HGCLOCK_GUEST_PID" >>"$out/many-truth"
	many_truth 2 "$pid2" >>"$out/many-truth"
	wait "$rec"
	rc=$?
	sed 's/^/many: record: /' "$out/many.err"
	sed 's/^/many: truth: /' "$out/many-truth"
	many_tap record_goes_on [ "$rc" -eq 0 ]
	# Guest 1 lost when it died, not at the start; guest 3 at the start.
	many_tap losses_said sh -c "grep 'guest 1 (vsock:4) lost' '$out/many.err' |
		grep -v -q 'not reached at the start' &&
		grep -q 'guest 3 (vsock:6) lost.*not reached at the start' '$out/many.err'"
	"$tool" dump "$out/many.hgc" >"$out/many-dump.txt" 2>&1
	many_tap file_complete sh -c "'$tool' dump --summary '$out/many.hgc' | grep -q ', complete' &&
		grep -q 'guest 1 (vsock:4) lost' '$out/many-dump.txt' &&
		grep -q 'guest 3 (vsock:6) lost' '$out/many-dump.txt'"
	# Guest 1's agent ran as hgclock-agent.service runs it (its
	# ExecStart, CAP_PERFMON only: tools/vm/guest-init) and served.
	if grep -q 'agent as hgclock-agent.service' "$out/extra1-console.log"; then
		many_tap agent_as_unit grep -Eq 'guest 1: [1-9][0-9]* kvm-exact segments \([1-9]' "$out/many.err"
	else
		many_skip agent_as_unit "the agent guest had no unit file, hgclock-guest or setpriv (tools/vm/lib.sh vm_unit_guest_files)"
	fi
	if kill -0 "$HGCLOCK_GUEST_PID" 2>/dev/null; then
		many_tap main_exact many_exact 0
	else
		many_skip main_exact "the main guest died during the recording (emulator; guest-console.log)"
	fi
	many_tap dead_guest_exact_before many_exact 1
	many_tap bare_exact many_exact 2
	many_tap bare_no_agent_said grep -q "^note: guest 2 (vm=$pid2) is VM $pid2 without an agent" \
		"$out/many-dump.txt"
	# --require-all: a guest not reached at the start means no recording:
	# exit 1, said, and no file left behind.
	timeout 120 "$tool" record -o "$out/many-req.hgc" --duration 60 --require-all \
		--guest "vm=$pid2,no-agent" --guest vsock:6 2>"$out/many-req.err"
	rc=$?
	sed 's/^/many: record --require-all: /' "$out/many-req.err"
	many_tap require_all_stops sh -c "[ $rc -eq 1 ] && [ ! -e '$out/many-req.hgc' ] &&
		grep -q 'could not be reached (--require-all): not recording' '$out/many-req.err'"
}
