# tools/vm/scenarios.sh - the nested scenarios' tools/vm/nested arguments,
# in one place (sourced, after tools/vm/lib.sh).
#
# make check (tools/check.sh), make demo (tools/demo.sh), make bench
# (tools/bench/merge.sh) and tools/vm/failure-rate.sh all run the nested
# scenarios through scenario_args, so that a scenario is the same run
# wherever it is started: the same guest files, the same environment for
# the scripts (every variable a script reads is set here, with its
# default), the same timeout.  make demo broke once because check set a
# variable for merge-host.sh that the demo did not (2026-12-04); a caller
# may still add --env words after these (tools/vm/nested takes the last
# one of a name), but never has to.
#
# scenario_args SCENARIO KVER BUILD LOGS: sets the array SCENARIO_ARGS to
# the arguments of "tools/vm/nested --kernel KVER" for SCENARIO, up to and
# including "-- HOST_SCRIPT GUEST_SCRIPT" (the caller inserts its own
# options, --log-dir and --env, before them with scenario_nested).
# LOGS is the scenario's result directory (HGCLOCK_NESTED_LOGS), "" for
# the scenarios that keep none.  Returns 1 (with a message) for an
# unknown scenario or a missing helper program.
#
#   track    KVM tracking and pairing, a guest TSC write, the guest's CPUID
#            flood (HGCLOCK_NESTED_FLOOD=0 leaves it out)
#   moving   host VM booted tsc=unstable: KVM re-bases the guest's offsets
#   many     four guests in one record, a migration and a restore
#   merge    trace-cmd record -A on both sides, hgclock record --guest,
#            the merged timeline (make demo's scenario); the knobs below
#
# The merge scenario's knobs (environment of the caller):
#   HGCLOCK_MERGE_LIBVIRT  1 (default): the guest is a libvirt domain
#   HGCLOCK_MERGE_APIC_GAP  1: the guest's vCPUs have APIC IDs 0 and 4
#                          (default: 1 on 6.12, 0 on 6.1, testing.rst)
#   HGCLOCK_MERGE_PERF     1 (default): perf record on both sides
#   HGCLOCK_MERGE_SECONDS, HGCLOCK_MERGE_HOST_EVENTS: see merge-host.sh
#   HGCLOCK_MERGE_HOG      1: the analysis's ground-truth phase after the
#                          recording (a host hog against a busy guest
#                          thread, selftests/nested/check_hog.py); default
#                          0 (make demo never runs it)
SCENARIO_ARGS=()

# scenario_series_of KVER: the series (6.1, 6.12, 6.12-rt) of a version.
scenario_series_of() {
	case $1 in
	*-rt-*) echo "$(echo "$1" | cut -d. -f1,2)-rt" ;;
	*) echo "$1" | cut -d. -f1,2 ;;
	esac
}

scenario_args() {
	local scenario=$1 kver=$2 build=$3 logs=$4 gap f merge_host_events
	local -a files=()

	SCENARIO_ARGS=(--kernel "$kver")
	case $scenario in
	track)
		files=(--guest-file "$build/selftests/tsc_adjust:tsc_adjust")
		# The CPUID flood by default since QEMU 10 (4 of 4 runs
		# passed; under 7.2 the stack died at 6 of 7: testing.rst).
		if [ "${HGCLOCK_NESTED_FLOOD:-1}" = 1 ]; then
			[ -x "$build/selftests/cpuid_flood" ] ||
				{ vm_msg "scenario track: $build/selftests/cpuid_flood not built"; return 1; }
			files+=(--guest-file "$build/selftests/cpuid_flood:cpuid_flood")
		fi
		SCENARIO_ARGS+=(--timeout 420 "${files[@]}" --
			selftests/nested/track-host.sh selftests/nested/track-guest.sh) ;;
	moving)
		# Its checks read only files: run here after the VM (--after).
		SCENARIO_ARGS+=(--append tsc=unstable --timeout 540
			--after selftests/nested/moving-after.sh --
			selftests/nested/moving-host.sh selftests/nested/moving-guest.sh) ;;
	many)
		mapfile -t files < <(vm_unit_guest_files "$build")
		SCENARIO_ARGS+=(--timeout 720 "${files[@]}"
			--env HGCLOCK_NESTED_LOGS="$logs"
			--env HGCLOCK_MANY_TRACE="${HGCLOCK_MANY_TRACE:-entries}" --
			selftests/nested/many-host.sh selftests/nested/many-guest.sh) ;;
	merge)
		mapfile -t files < <(vm_tracecmd_guest_files) && [ ${#files[@]} -gt 0 ] || return 1
		# The application for both sides (merge-host.sh, merge-guest.sh):
		# "" when it is not built, and the scripts say so.
		f=$(realpath -m "$build/selftests/hgclock-events")
		[ -x "$f" ] && files+=(--guest-file "$f:bin/hgclock-events") || f=
		if [ "${HGCLOCK_MERGE_PERF:-1}" = 1 ] && command -v perf >/dev/null; then
			mapfile -t -O "${#files[@]}" files < <(vm_perf_guest_files)
		fi
		# The APIC ID gap on 6.12 only by default: on 6.1 the nested
		# guest with the gapped topology reset itself mid-recording in
		# 3 runs of 3 (2026-12-03), cause not established (testing.rst).
		gap=$(scenario_merge_gap "$kver")
		# The host's events: KVM's entries and exits and the scheduler
		# (every guest event's check), its IRQs and softirqs (the
		# analysis's interrupt offenders, check_merge.py's
		# analyze_irq_bounds).
		merge_host_events="-e kvm:kvm_entry -e kvm:kvm_exit -e sched:sched_switch"
		merge_host_events+=" -e irq:irq_handler_entry -e irq:irq_handler_exit"
		merge_host_events+=" -e irq:softirq_entry -e irq:softirq_exit"
		# The hog phase (HGCLOCK_MERGE_HOG=1) is a second recording:
		# 4 minutes more allowed for it on a loaded machine.
		SCENARIO_ARGS+=(--timeout "$([ "${HGCLOCK_MERGE_HOG:-0}" = 1 ] && echo 840 || echo 600)" "${files[@]}"
			--env HGCLOCK_NESTED_LOGS="$logs"
			--env HGCLOCK_APP_EVENTS="$f"
			--env HGCLOCK_GUEST_LIBVIRT="${HGCLOCK_MERGE_LIBVIRT:-1}"
			--env HGCLOCK_GUEST_APIC_GAP="$gap"
			--env HGCLOCK_MERGE_PERF="${HGCLOCK_MERGE_PERF:-1}"
			--env HGCLOCK_MERGE_SECONDS="${HGCLOCK_MERGE_SECONDS:-6}"
			--env HGCLOCK_MERGE_HOG="${HGCLOCK_MERGE_HOG:-0}"
			--env "HGCLOCK_MERGE_HOST_EVENTS=${HGCLOCK_MERGE_HOST_EVENTS:-$merge_host_events}" --
			selftests/nested/merge-host.sh selftests/nested/merge-guest.sh) ;;
	*)
		vm_msg "unknown nested scenario '$scenario' (track, moving, many, merge)"
		return 1 ;;
	esac
}

# scenario_merge_gap KVER: the APIC ID gap scenario_args gives the merge
# scenario on KVER (1 or 0), for the checks that expect it.
scenario_merge_gap() {
	local series
	series=$(scenario_series_of "$1")
	echo "${HGCLOCK_MERGE_APIC_GAP:-$([ "$series" = 6.1 ] && echo 0 || echo 1)}"
}

# scenario_nested OPTION...: SCENARIO_ARGS with OPTION... (--log-dir,
# --timeout, --env) put before its "--": into the array NESTED_ARGS.
scenario_nested() {
	local i n=${#SCENARIO_ARGS[@]}
	NESTED_ARGS=()
	for ((i = 0; i < n; i++)); do
		[ "${SCENARIO_ARGS[i]}" = -- ] && break
		NESTED_ARGS+=("${SCENARIO_ARGS[i]}")
	done
	NESTED_ARGS+=("$@" "${SCENARIO_ARGS[@]:i}")
}

# scenario_merge_recorded OUTPUT LOGS TOOL: after a failed run of the
# merge scenario (its tools/vm/nested output in OUTPUT, its results in
# LOGS), is what it recorded whole?  The host script ended 0 and the
# correlation file reads: a guest the emulator reset once the recording
# was done spoils nothing.  Sets SCENARIO_APP_SKIP to the reason when the
# guest died before its own files came out (its application events and
# perf samples): their checks are then skips, not failures.
SCENARIO_APP_SKIP=
scenario_merge_recorded() {
	SCENARIO_APP_SKIP=
	grep -q 'nested-host: host script exit 0' "$1" &&
		"$3" dump --summary "$2/merge.hgc" >/dev/null 2>&1 || return 1
	grep -q '^guest| guest: out: guest-app.hgev ' "$1" ||
		SCENARIO_APP_SKIP="the emulator reset the guest after the recording, before its files came out"
	return 0
}

# scenario_merge_check KVER BUILD LOGS: selftests/nested/check_merge.py on
# the merge scenario's recording in LOGS, with what scenario_args gave the
# run to expect (the APIC ID gap, perf, the guest's application) and
# SCENARIO_APP_SKIP; its TAP on standard output, its exit status.  Each
# command it runs has a limit (tools/checkrun.py: the stacks of one that
# outlives it); the script as a whole has HGCLOCK_CHECK_SCRIPT_TIMEOUT_S
# (default 1800 s), past which it is killed, says so and returns 124.
scenario_merge_check() {
	local perf= app= rc limit_s=${HGCLOCK_CHECK_SCRIPT_TIMEOUT_S:-1800}
	[ "${HGCLOCK_MERGE_PERF:-1}" = 1 ] && command -v perf >/dev/null && perf=1
	[ -x "$2/selftests/hgclock-events" ] && app=1
	HGCLOCK_EXPECT_APIC_GAP=$(scenario_merge_gap "$1") HGCLOCK_EXPECT_PERF=$perf \
	HGCLOCK_EXPECT_GUEST_APP=$app HGCLOCK_GUEST_APP_SKIP=$SCENARIO_APP_SKIP \
		timeout -k 30 "$limit_s" python3 -u selftests/nested/check_merge.py "$2/user/hgclock" "$3"
	rc=$?
	if [ $rc -eq 137 ]; then
		rc=124
	fi
	if [ $rc -eq 124 ]; then
		echo "# TIMEOUT: check_merge.py killed after ${limit_s} s (HGCLOCK_CHECK_SCRIPT_TIMEOUT_S)"
	fi
	return $rc
}
