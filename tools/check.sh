#!/bin/bash
# make check: installs what is missing, builds everything, runs the unit
# tests here and the kernel tests in VMs on every target kernel, and ends
# with one line "N passed, N failed, N skipped".
#
# Environment:
#   HGCLOCK_KERNELS   kernel series to test (default "6.1 6.12 6.12-rt",
#                     "-rt": the PREEMPT_RT flavour); each is
#                     resolved to the newest installed version
#   HGCLOCK_TSC_MODES "default reliable isolated": boot each kernel as it comes
#                     (under TCG 6.1 marks the TSC unstable, 6.12 did not in
#                     our runs) and with tsc=reliable
#   HGCLOCK_VM_ACCEL  tcg (default) or kvm, passed to tools/vm/run
#   HGCLOCK_NO_RDTSCP_SERIES the series whose tsc=reliable VM boots
#                     -cpu max,-rdtscp,-rdpid (default 6.12; empty: none)
#   HGCLOCK_NESTED_KERNELS  series for the nested KVM host/guest tests
#                     (default: HGCLOCK_KERNELS without its -rt series;
#                     empty: none)
#   HGCLOCK_MOVING_KERNELS series for the nested moving-offsets test
#                          (default: the last nested series)
#   HGCLOCK_MERGE_KERNELS  series for the nested merge test (default:
#                     HGCLOCK_NESTED_KERNELS, 6.1 and 6.12; empty: none)
#   HGCLOCK_MANY_TRACE     the host's trace of the many-guests scenario's
#                          moves: "entries" (default) kvm_entry of the
#                          moving guest's vCPU threads, in a tracefs
#                          instance; 1: trace-cmd record of every
#                          kvm_entry and kvm_exit (the emulator killed
#                          that host VM in 4 of 4 runs); 0: none
#   HGCLOCK_MERGE_PERF     1 (default): perf record in both VMs of the merge
#                          test, its samples merged and checked
#   HGCLOCK_MANY_KERNELS   series for the nested many-guests test (default:
#                          the nested series)
#   HGCLOCK_MERGE_LIBVIRT  1 (default): the merge test's guest is a libvirt
#                     domain, found by record --guest domain:guest; 0: QEMU
#                     started by hand, found by its vsock CID
#   HGCLOCK_MERGE_HOG      1: the merge test's boot also runs the
#                          analysis's ground truth (a host hog against a
#                          busy guest thread, selftests/nested/check_hog.py);
#                          default 0 (Documentation/testing.rst)
#   HGCLOCK_FUZZ_SECONDS  libFuzzer time for the file reader (default 20)
#   HGCLOCK_NESTED_ATTEMPTS  attempts per nested scenario (default 5)
#   HGCLOCK_RETRY_BUDGET  no nested retry starts after this many seconds of
#                     make check (default 2400: CI's run has 90 minutes in
#                     all; after the budget each scenario left still
#                     runs once, up to its timeout (merge 10 min, many
#                     12), and the steps after the VMs take about 15)
#   HGCLOCK_CHECK_TIME_LIMIT  seconds make check may take in all (default
#                     4800; .ci/run sets it to 85 minutes less what came
#                     before).  No nested attempt starts that could run
#                     past it, its timeout and the steps after the VMs
#                     (HGCLOCK_CHECK_TAIL_S, default 1000) counted: the
#                     scenario is a skip saying so, or its retry is not
#                     made.  A CI run cut off at 90 minutes says nothing.
#
# A failed VM attempt is classified from its consoles by
# tools/vm/classify-console: "ours" (a crash, warning or checker report
# in hgclock) and "unexplained" (one that does not name hgclock but cannot
# be read while hgclock is loaded) are test failures, never retried; "infra" (the emulator's faults, hangs,
# dead VMs, guests that never came up) is retried; "fail" (failed tests)
# is not.  One line per failed attempt ("== attempt N of NAME: CLASS:
# ..."), kept in build/check/attempts.log; the retried ones are counted
# on a line of their own before the summary.
set -u -o pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
build=${BUILD:-build}
log_dir="$build/check"
mkdir -p "$log_dir"
tap_log="$log_dir/tap.log"
: >"$tap_log"
start=$(date +%s)

# shellcheck source=tools/tap.sh
. tools/tap.sh
note() { echo "== [$(($(date +%s) - start)) s] $*"; }	# the time since make check began

# A line of TAP of our own, for steps that are not test programs.
n_own=0
own() {	# own ok|not-ok|skip NAME [REASON]
	n_own=$((n_own + 1))
	case $1 in
	ok) echo "ok $n_own check.$2" ;;
	skip) echo "ok $n_own check.$2 # SKIP ${3:-}" ;;
	*) echo "not ok $n_own check.$2${3:+ # $3}" ;;
	esac | tee -a "$tap_log"
}

if [ "$(id -u)" = 0 ]; then
	tools/deps.sh || { own not-ok deps "tools/deps.sh failed"; }
else
	note "not root: not installing packages (tools/deps.sh needs root)"
fi

note "build: user tool, unit tests, selftests"
if make -s user selftests >"$log_dir/build.log" 2>&1; then
	own ok build_user
else
	cat "$log_dir/build.log"
	own not-ok build_user "make user selftests failed"
fi
if make -s headers-check >>"$log_dir/build.log" 2>&1; then
	own ok uapi_header_c90
else
	own not-ok uapi_header_c90
fi
# The user side's layers: no circle of calls between its files
# (tools/layer-check.py, from nm's defined and undefined symbols).
make -s layer-check >"$log_dir/layer-check.out" 2>&1
if grep -qE '^(not )?ok' "$log_dir/layer-check.out"; then
	grep -E '^(not )?ok|^#' "$log_dir/layer-check.out" | tee -a "$tap_log"
else
	cat "$log_dir/layer-check.out"
	own not-ok layer_check "make layer-check printed no result"
fi

note "unit tests"
# Programs only: unit/data holds the merge test's recording, unit/bin
# test_cli's helpers.  They run at once, one per CPU (tools/tap.sh's
# tap_programs), test_cli's two halves first: the longest.  The TAP log
# gets their outputs in the programs' order.
mapfile -t units < <(unit_programs "$build/unit")
tap_programs "$log_dir/unit" "${units[@]}"
for t in "$build"/unit/*; do
	[ -f "$log_dir/unit/${t##*/}.out" ] && tee -a "$tap_log" <"$log_dir/unit/${t##*/}.out"
done

note "classify-console on synthetic console logs"
if ! tools/vm/test-classify-console.sh >"$log_dir/classify-test.out" 2>&1; then
	grep -qE '^not ok' "$log_dir/classify-test.out" ||
		own not-ok classify_console_test "tools/vm/test-classify-console.sh failed, see $log_dir/classify-test.out"
fi
grep -E '^(not )?ok' "$log_dir/classify-test.out" | tee -a "$tap_log"

note "fuzzing the correlation file reader (libFuzzer, ${HGCLOCK_FUZZ_SECONDS:-20} s)"
if make -s fuzz BUILD="$build" FUZZ_TIME="${HGCLOCK_FUZZ_SECONDS:-20}" >"$log_dir/fuzz.out" 2>&1; then
	grep -E '^(not )?ok' "$log_dir/fuzz.out" | tee -a "$tap_log"
else
	cat "$log_dir/fuzz.out"
	grep -qE '^not ok' "$log_dir/fuzz.out" && grep -E '^(not )?ok|^#' "$log_dir/fuzz.out" | tee -a "$tap_log" ||
		own not-ok fuzz_build "building or running the fuzz target failed"
fi

# kernel series -> newest installed version (never hard-coded)
# shellcheck source=tools/vm/lib.sh
. tools/vm/lib.sh
# shellcheck source=tools/vm/scenarios.sh
. tools/vm/scenarios.sh

# Failed VM attempts: each classified (tools/vm/classify-console), one
# line each in attempts.log; the retried ones in retried.log.  Files, not
# variables: run_vm runs in the background.
: >"$log_dir/attempts.log"
: >"$log_dir/retried.log"

# classify_attempt NAME ATTEMPT RC LOG...: why attempt ATTEMPT of NAME
# failed, from LOG (its output, its log directory); sets cause_class
# (ours, infra or fail; an unexplained report is ours here: never
# retried) and cause (the classifier's line, which says which), and says
# so.
classify_attempt() {
	local name=$1 attempt=$2 rc=$3
	shift 3
	local verdict="$log_dir/$name.attempt$attempt.verdict"
	tools/vm/classify-console --lines --rc "$rc" "$@" >"$verdict" 2>&1
	cause=$(head -n 1 "$verdict")
	cause_class=${cause%%:*}
	case $cause_class in
	ours | infra | fail) ;;
	unexplained) cause_class=ours ;;
	*) cause_class=fail cause="fail: exit status $rc (classify-console: $cause)" ;;
	esac
	echo "attempt $attempt of $name: $cause (exit $rc)" >>"$log_dir/attempts.log"
	note "attempt $attempt of $name: $cause"
	# A crash of ours fails the run: its report goes to the output, which
	# is all that CI keeps (the logs go with the clone).
	if [ "$cause_class" = ours ]; then
		sed -n '2,121{s/^/==     /;p}' "$verdict"
	fi
}

# retrying NAME ATTEMPT: count attempt ATTEMPT of NAME as retried (infra).
retrying() {
	echo "$1 attempt $2: $cause" >>"$log_dir/retried.log"
	note "infrastructure failure; retrying $1"
}

# run_vm NAME KVER APPEND KO [CPU] [CMD]: the kselftests (or CMD) in a VM
# booting KVER (QEMU CPU model CPU, default tools/vm/run's), output
# in NAME.out, exit status in NAME.rc and, if one of ours failed it, the
# cause in NAME.ours under $log_dir.  An attempt that fails for the
# emulator's reasons (classify-console: infra) is retried once.
run_vm() {
	local name=$1 kver=$2 append=$3 ko=$4 cpu_model=${5:-} attempt rc
	local cmd=${6:-"selftests/vm-tests.sh '$build' '$ko'"}

	rm -rf "$log_dir/$name.rc" "$log_dir/$name.ours" "$log_dir/$name".attempt*
	for attempt in 1 2; do
		# Single-threaded TCG: loading the module patches kernel
		# text (tracepoint static keys), which multi-threaded TCG
		# in QEMU 7.2 sometimes misses ("Oops: int3", see
		# tools/vm/run).  The nested testbed needs multi.
		tools/vm/run --kernel "$kver" ${append:+--append "$append"} \
			${cpu_model:+--cpu "$cpu_model"} --tcg-thread single --timeout 900 \
			--log-dir "$log_dir/$name.attempt$attempt.vm" -- "$cmd" \
			>"$log_dir/$name.out" 2>&1
		rc=$?
		cp "$log_dir/$name.out" "$log_dir/$name.attempt$attempt.out"
		[ $rc -eq 0 ] && break
		classify_attempt "$name" "$attempt" "$rc" "$log_dir/$name.out" "$log_dir/$name.attempt$attempt.vm"
		case $cause_class in
		ours) echo "$cause" >"$log_dir/$name.ours" ;;
		infra) [ $attempt -eq 1 ] && { retrying "$name" "$attempt"; continue; } ;;
		esac
		break
	done
	echo "$rc" >"$log_dir/$name.rc"
}

# vm_result NAME RC: the VM's own TAP line; a crash of ours says so.
vm_result() {
	local name=$1 rc=$2
	if [ "$rc" -ne 0 ] && [ -s "$log_dir/$name.ours" ]; then
		own not-ok "$name" "not retried: $(cat "$log_dir/$name.ours")"
		return
	fi
	case $rc in
	0) own ok "$name" ;;
	124) own not-ok "$name" "VM timed out" ;;
	125) own not-ok "$name" "infrastructure: VM never reached the tests" ;;
	*) own not-ok "$name" "exit status $rc" ;;
	esac
}

kernels=${HGCLOCK_KERNELS:-6.1 6.12 6.12-rt}
for series in $kernels; do
	kver=$(vm_series_kernel "$series")
	if [ -z "$kver" ]; then
		own skip "kernel_$series" "no installed $series kernel"
		continue
	fi
	kdir="/usr/src/linux-headers-$kver"
	note "module for $kver"
	if ko=$(tools/build-module.sh "$kdir" "$build/module" | tail -n 1) && [ -f "$ko" ]; then
		own ok "module_build_w1_$series"
	else
		own not-ok "module_build_w1_$series"
		continue
	fi
	# The module's layers too (design.rst): no circle of calls between
	# its files, from the objects Kbuild left beside the .ko.
	if tools/layer-check.py "$(dirname "$ko")"/module/*.o >"$log_dir/module-layers-$series.out" 2>&1; then
		own ok "module_layers_$series"
	else
		cat "$log_dir/module-layers-$series.out"
		own not-ok "module_layers_$series" "a circle of calls between module/ files"
	fi
	# The TSC modes of a series boot side by side (HGCLOCK_VM_JOBS,
	# default 2): each VM is one single-threaded TCG process, one host
	# core; their results are then read in order.  "isolated" is a
	# third, short boot with CPU 1 isolated from kernel noise
	# (nohz_full=1 isolcpus=1) for ring_test alone: no snapshot timer
	# there (ring.no_timer_on_isolated_cpus, which skips elsewhere).
	# The whole suite does not run so: CPU 1 cannot go offline, and
	# the kernel itself warns in its deadline scheduler when it is
	# tried (6.12, 2026-12-05).
	modes=${HGCLOCK_TSC_MODES:-default reliable isolated}
	running=0
	for mode in $modes; do
		append="" cmd=""
		[ "$mode" = reliable ] && append="tsc=reliable"
		if [ "$mode" = isolated ]; then
			append="nohz_full=1 isolcpus=1"
			cmd="insmod '$ko' && '$build/selftests/ring_test'"
		fi
		# One VM's CPU has neither RDTSCP nor RDPID, as many cloud
		# VMs: the zero-syscall clock's rseq method (library.rst)
		# against READ_CLOCK (uclock_test, ring_test, perm_test).
		cpu_model=""
		[ "$mode" = reliable ] && [ "$series" = "${HGCLOCK_NO_RDTSCP_SERIES-6.12}" ] &&
			cpu_model="max,-rdtscp,-rdpid"
		what=kselftests
		[ -n "$cmd" ] && what=ring_test
		note "VM $kver ($mode${append:+: $append}${cpu_model:+, -cpu $cpu_model}): $what"
		name=vm_${series}_tsc_${mode}
		[ "$mode" = isolated ] && name=vm_${series}_isolated
		run_vm "$name" "$kver" "$append" "$ko" "$cpu_model" "$cmd" &
		running=$((running + 1))
		if [ "$running" -ge "${HGCLOCK_VM_JOBS:-2}" ]; then
			wait -n
			running=$((running - 1))
		fi
	done
	wait
	for mode in $modes; do
		name="vm_${series}_tsc_${mode}"
		[ "$mode" = isolated ] && name=vm_${series}_isolated
		rc=$(cat "$log_dir/$name.rc" 2>/dev/null || echo 125)
		sed "s/^\(\(not \)\?ok [0-9]*\) /\1 $name: /" "$log_dir/$name.out" | tee -a "$tap_log"
		vm_result "$name" "$rc"
	done
done

# Attempts per nested scenario when the emulator fails it.  Each fails
# now and then for the emulator's reasons (below); in the CI run of
# 2026-11-29 the tracking and merge runs on 6.12 each needed three.  A
# failed attempt mostly ends within a minute or two; a hang costs its
# timeout.
nested_attempts=${HGCLOCK_NESTED_ATTEMPTS:-5}
retry_budget=${HGCLOCK_RETRY_BUDGET:-2400}
time_limit=${HGCLOCK_CHECK_TIME_LIMIT:-4800}
tail_s=${HGCLOCK_CHECK_TAIL_S:-1000}

# attempt_fits ARGS...: whether an attempt of the nested scenario whose
# tools/vm/nested arguments are ARGS (its --timeout; 900 s without one,
# tools/vm/nested's default) still ends, at its timeout, before
# HGCLOCK_CHECK_TIME_LIMIT less the steps after the VMs.  Sets fit_why.
attempt_fits() {
	local timeout_s=900 elapsed_s

	while [ $# -gt 0 ]; do
		case $1 in
		--timeout) timeout_s=$2; shift ;;
		--) break ;;
		esac
		shift
	done
	elapsed_s=$(($(date +%s) - start))
	fit_why="make check has run ${elapsed_s} s; an attempt may take ${timeout_s} s and the steps after the VMs ${tail_s} s, past HGCLOCK_CHECK_TIME_LIMIT (${time_limit} s)"
	[ $((elapsed_s + timeout_s + tail_s)) -le "$time_limit" ]
}

# scenario_fits NAME ARGS...: the same before a scenario's first
# attempt; when it does not fit, NAME is a skip saying why (never a pass).
scenario_fits() {
	local name=$1

	shift
	attempt_fits "$@" && return 0
	note "not starting $name: $fit_why"
	own skip "$name" "no time left: $fit_why"
	return 1
}

# nested_attempt NAME ATTEMPT RC: after attempt ATTEMPT of the nested
# scenario NAME failed with RC, classify it from its output (NAME.out) and
# its logs (NAME.attemptN.vm: the host VM's console, the guest's);
# sets cause_class and cause.  A crash of ours is kept in NAME.ours.
nested_attempt() {
	classify_attempt "$1" "$2" "$3" "$log_dir/$1.out" "$log_dir/$1.attempt$2.vm"
	[ "$cause_class" = ours ] && echo "$cause" >"$log_dir/$1.ours"
	return 0
}

# nested_prepare NAME: forget the logs of NAME's earlier runs.
nested_prepare() {
	rm -rf "$log_dir/$1.ours" "$log_dir/$1".attempt*
}

# nested_run NAME WHAT CLEAN ACCEPT -- NESTED-ARGS...: the nested
# scenario NAME, up to nested_attempts times: tools/vm/nested NESTED-ARGS
# with its logs in NAME.attemptN.vm, its output in NAME.out (and a copy
# in NAME.attemptN.out), the directory CLEAN (if not "") removed before
# each attempt.  A failed attempt is classified from its consoles
# (nested_attempt): a crash of ours ends the run, never retried nor
# accepted.  Else ACCEPT (a function, "" for none), given NAME ATTEMPT RC,
# may say what the attempt recorded is still to be checked (a guest the
# emulator reset after the host's part ended): then rc is 0.  Emulator
# faults, hangs and VMs or guests the emulator killed are retried
# (retrying).  Sets rc, and cause_class for the last failed attempt.
nested_run() {
	local name=$1 what=$2 clean=$3 accept=$4 attempt
	shift 5
	for attempt in $(seq 1 "$nested_attempts"); do
		note "$what (attempt $attempt)"
		[ -z "$clean" ] || rm -rf "$clean"
		tools/vm/nested --log-dir "$log_dir/$name.attempt$attempt.vm" "$@" \
			>"$log_dir/$name.out" 2>&1
		rc=$?
		cp "$log_dir/$name.out" "$log_dir/$name.attempt$attempt.out"
		[ $rc -eq 0 ] && return 0
		nested_attempt "$name" "$attempt" "$rc"
		[ "$cause_class" = ours ] && return 0
		if [ -n "$accept" ] && "$accept" "$name" "$attempt" "$rc"; then
			rc=0
			return 0
		fi
		if [ "$cause_class" = infra ] && [ "$attempt" -lt "$nested_attempts" ]; then
			if [ $(($(date +%s) - start)) -ge "$retry_budget" ]; then
				note "no retry of $name: make check has run for over $retry_budget s (HGCLOCK_RETRY_BUDGET)"
				return 0
			fi
			if ! attempt_fits "$@"; then
				note "no retry of $name: $fit_why"
				return 0
			fi
			retrying "$name" "$attempt"
			continue
		fi
		return 0
	done
}

# emulator_exhausted NAME: after nested_run, every attempt of NAME failed
# and each was the emulator's (classify-console's infra: a fault, hang or
# death located outside hgclock, or no boot); says so as a skip of NAME
# (never a pass: its checks did not run) and returns 0.  A crash of ours
# (never retried) or any other failure is not this.
exhausted() {	# NAME: the condition alone
	[ "$rc" -ne 0 ] && [ "$cause_class" = infra ] && [ ! -s "$log_dir/$1.ours" ]
}
emulator_exhausted() {
	exhausted "$1" || return 1
	own skip "$1" "the emulator failed every attempt ($(grep -c " of $1: " "$log_dir/attempts.log")), no attempt's checks count (attempts.log; last: ${cause#infra: })"
}

# all_skipped FILE: FILE has TAP results and every one is a skip.
all_skipped() {
	grep -qE '^(not )?ok [0-9]+' "$1" && ! grep -E '^(not )?ok [0-9]+' "$1" | grep -qv '# SKIP'
}

# scenario_tap NAME: NAME's output (the guests' console lines left out)
# into the TAP log, its TAP lines named after NAME.  When every attempt
# was the emulator's, the last one's TAP lines are comments ("# the
# emulator's attempt: not ok ..."), as the earlier attempts' were never
# counted: checks of a run the emulator killed are neither passes nor
# failures (CI, 2026-12-06: a guest that died during the CPUID flood
# failed the flood's checks of the fifth attempt).  NAME itself is then
# the skip (emulator_exhausted).
scenario_tap() {
	local ex=
	exhausted "$1" && ex="# the emulator's attempt: "
	grep -v '^guest| \[' "$log_dir/$1.out" |
		sed "s/^\(\(not \)\?ok [0-9]*\) /$ex\1 $1: /" | tee -a "$tap_log"
}

# The nested host/guest testbed: one boot per kernel series runs all the
# nested tests (a KVM guest inside the TCG host VM takes a minute to boot).
# A guest that never comes up is infrastructure: retried once.
# Not on PREEMPT_RT by default: the testbed's KVM pairing is checked on
# the kernels KVM hosts run.
nested_kernels=${HGCLOCK_NESTED_KERNELS-$(for s in $kernels; do
	case $s in *-rt) ;; *) echo "$s" ;; esac
done)}
for series in $nested_kernels; do
	kver=$(vm_series_kernel "$series")
	[ -n "$kver" ] && [ -f "$build/module/$kver/hgclock.ko" ] || continue
	name="nested_${series}"
	nested_prepare "$name"
	# The guest's helpers (selftests/nested): its TSC writes and its
	# CPUID flood (HGCLOCK_NESTED_FLOOD=0: none; tools/vm/scenarios.sh).
	scenario_args track "$kver" "$build" "" || { own not-ok "$name" "scenario_args track failed"; continue; }
	scenario_fits "$name" "${SCENARIO_ARGS[@]}" || continue
	# Emulator faults (QEMU's multi-threaded TCG can run stale code
	# after the host VM's kernel patches its text, see tools/vm/run),
	# hangs (nested TCG now and then stalls both levels), a host VM that
	# dies (qemu gone without a panic on the console, as in CI on
	# 2026-11-29) and guests that never come up: the emulator's, not
	# ours; retried.  A crash of ours is not.
	nested_run "$name" "nested KVM host and guest on $kver" "" "" -- "${SCENARIO_ARGS[@]}"
	scenario_tap "$name"
	if [ -s "$log_dir/$name.ours" ]; then
		own not-ok "$name" "not retried: $(cat "$log_dir/$name.ours")"
	elif emulator_exhausted "$name"; then
		:
	elif ! grep -q '^ok [0-9]* nested.guest_up' "$log_dir/$name.out"; then
		own not-ok "$name" "infrastructure: the nested guest never came up (retried)"
	elif [ $rc -eq 0 ]; then
		own ok "$name"
	else
		own not-ok "$name" "exit status $rc"
	fi
done

# Moving offsets: the host VM booted with tsc=unstable, so KVM re-bases
# the guest's TSC offsets and rewrites its kvm-clock at every vCPU load.
# Markers against KVM's own trace: x86-tsc exact, ftrace's local clock
# through the host's PVCLOCK records (selftests/nested/moving-host.sh).
# One kernel (the last nested series), retried as the nested tests are.
# The checks are the host script's and, on the files it left, those of
# selftests/nested/moving-after.sh, run here after the VM: a guest the
# emulator resets after they passed does not spoil them (as in the merge
# test).
moving_checks_ran() {
	grep -q 'nested-host: host script exit 0' "$log_dir/$1.out" &&
		grep -q '^nested: after-VM checks .* exit 0' "$log_dir/$1.out" || return 1
	note "the guest died after the host's checks passed (exit $3)"
}
moving_kernels=${HGCLOCK_MOVING_KERNELS-$(echo $nested_kernels | awk '{ print $NF }')}
for series in $moving_kernels; do
	kver=$(vm_series_kernel "$series")
	[ -n "$kver" ] && [ -f "$build/module/$kver/hgclock.ko" ] || continue
	name="nested_moving_${series}"
	nested_prepare "$name"
	scenario_args moving "$kver" "$build" "" || { own not-ok "$name" "scenario_args moving failed"; continue; }
	scenario_fits "$name" "${SCENARIO_ARGS[@]}" || continue
	nested_run "$name" "nested moving-offsets scenario on $kver" "" moving_checks_ran -- "${SCENARIO_ARGS[@]}"
	scenario_tap "$name"
	if [ -s "$log_dir/$name.ours" ]; then
		own not-ok "$name" "not retried: $(cat "$log_dir/$name.ours")"
	elif [ $rc -eq 0 ]; then
		own ok "$name"
	elif ! emulator_exhausted "$name"; then
		own not-ok "$name" "exit status $rc, see $log_dir/$name.out"
	fi
done

# Before the many-guests scenario: the merge scenario is the most
# complete end-to-end test (make demo's own run), so it comes first while
# retries are still in HGCLOCK_RETRY_BUDGET (.ci/run, 2026-12-07: both
# merge scenarios, last in line, failed once each past the budget and
# were not retried).
# hgclock merge on a real host/guest recording: trace-cmd record -A on both
# sides while hgclock records and the vCPU threads move between host
# CPUs (selftests/nested/merge-host.sh); the merged timeline is then
# checked here against the host's own kvm_entry/kvm_exit trace
# (selftests/nested/check_merge.py).  Retries as the nested tests do.
# Every nested series (a boot of about three minutes each): the merged
# timeline, application events and the outputs on each kernel the guest
# and host may run.
# The recording is what is tested: a guest the emulator resets after the
# host script finished does not spoil it.  Its application's file leaves
# after the recording: when the guest died before saying it was out, the
# guest-side checks are skips (SCENARIO_APP_SKIP, tools/vm/scenarios.sh).  $logs: the scenario's directory.
merge_recorded() {
	scenario_merge_recorded "$log_dir/$1.out" "$logs" "$build/user/hgclock" || return 1
	note "the guest died after the recording (exit $3); checking what was recorded"
	[ -z "$SCENARIO_APP_SKIP" ] || SCENARIO_APP_SKIP="$SCENARIO_APP_SKIP (exit $3, see $log_dir/$1.attempt$2.out)"
	return 0
}
merge_kernels=${HGCLOCK_MERGE_KERNELS-$nested_kernels}
for series in $merge_kernels; do
	kver=$(vm_series_kernel "$series")
	[ -n "$kver" ] && [ -f "$build/module/$kver/hgclock.ko" ] || continue
	name="nested_merge_${series}"
	logs=$top/$build/nested-merge-$series
	# The same run as make demo's (tools/vm/scenarios.sh): the guest a
	# libvirt domain found by record --guest domain:guest, its vCPUs'
	# APIC IDs 0 and 4 on 6.12 (guest CPU, qemu's CPU number and KVM's
	# vcpu_id all differ for guest CPU 1), the application and perf on
	# both sides.
	scenario_args merge "$kver" "$build" "$logs" || { own not-ok "$name" "scenario_args merge failed"; continue; }
	scenario_fits "$name" "${SCENARIO_ARGS[@]}" || continue
	nested_prepare "$name"
	SCENARIO_APP_SKIP=
	nested_run "$name" "nested merge scenario on $kver" "$logs" merge_recorded -- "${SCENARIO_ARGS[@]}"
	if [ -s "$log_dir/$name.ours" ]; then
		grep -v '^guest| \[' "$log_dir/$name.out" | tail -n 20
		own not-ok "$name" "not retried: $(cat "$log_dir/$name.ours")"
		continue
	fi
	if [ $rc -ne 0 ]; then
		grep -v '^guest| \[' "$log_dir/$name.out" | tail -n 20
		emulator_exhausted "$name" ||
			own not-ok "$name" "the nested recording failed (exit $rc), see $log_dir/$name.out"
		continue
	fi
	own ok "$name"
	scenario_merge_check "$kver" "$build" "$logs" >"$log_dir/$name.check" 2>&1
	crc=$?
	sed "s/^\(\(not \)\?ok [0-9]*\) /\1 $name: /" "$log_dir/$name.check" | tee -a "$tap_log"
	if [ $crc -eq 124 ]; then
		own not-ok "${name}_check" "check_merge.py did not finish (stacks in $log_dir/$name.check)"
	elif ! grep -qE '^(not )?ok' "$log_dir/$name.check"; then
		own not-ok "${name}_check" "check_merge.py failed"
	fi
	# The analysis against the host trace and the guest's steal (the
	# hog phase of the same boot, HGCLOCK_MERGE_HOG=1).
	if [ "${HGCLOCK_MERGE_HOG:-0}" = 1 ]; then
		python3 selftests/nested/check_hog.py "$build/user/hgclock" "$logs" >"$log_dir/$name.hog" 2>&1
		sed "s/^\(\(not \)\?ok [0-9]*\) /\1 $name: /" "$log_dir/$name.hog" | tee -a "$tap_log"
		grep -qE '^(not )?ok' "$log_dir/$name.hog" || own not-ok "${name}_hog" "check_hog.py failed, see $log_dir/$name.hog"
	fi
	# make demo's screen on the same recording (tools/demo.sh runs the
	# same scenario, check and tools/demo-show.py): CI fails whenever
	# the demo would show nothing.
	if python3 tools/demo-show.py "$logs" >"$log_dir/$name.demo" 2>&1; then
		sed 's/^/# /' "$log_dir/$name.demo"
		own ok "${name}_demo_show"
	else
		sed 's/^/# /' "$log_dir/$name.demo"
		own not-ok "${name}_demo_show" "$(tail -n 1 "$log_dir/$name.demo")"
	fi
	if [ "${HGCLOCK_MERGE_LIBVIRT:-1}" = 1 ]; then
		if [ -s "$logs/libvirt.tap" ]; then
			sed "s/^\(\(not \)\?ok [0-9]*\) /\1 $name: /" "$logs/libvirt.tap" | tee -a "$tap_log"
		else
			own not-ok "${name}_libvirt" "the libvirt checks left no results ($logs/libvirt.tap)"
		fi
	fi
done

# Many guests at once: the main guest and two more (one with the agent
# run as the guest package's unit would, one bare: no module), one record
# of four guests, one of which dies and one never reachable
# (selftests/nested/many-host.sh, many.sh).  A boot of its own: three
# guests booting together are where the emulator most often kills the
# host VM, and a retry here costs less than in the merge scenario.
# The checks ran (many.tap has every line, and the host script did not
# call the run the emulator's): a guest the emulator resets afterwards
# does not spoil them.  $logs: the scenario's directory.
many_checks_ran() {
	grep -q 'nested-host: host script exit [0-9]' "$log_dir/$1.out" &&
		! grep -q 'nested-host: host script exit 125' "$log_dir/$1.out" &&
		[ "$(grep -c -E '^(not )?ok ' "$logs/many.tap" 2>/dev/null)" -ge 16 ] || return 1
	note "the checks ran (exit $3)"
}
many_kernels=${HGCLOCK_MANY_KERNELS-$nested_kernels}
for series in $many_kernels; do
	kver=$(vm_series_kernel "$series")
	[ -n "$kver" ] && [ -f "$build/module/$kver/hgclock.ko" ] || continue
	name="nested_many_${series}"
	logs=$top/$build/nested-many-$series
	nested_prepare "$name"
	scenario_args many "$kver" "$build" "$logs" || { own not-ok "$name" "scenario_args many failed"; continue; }
	scenario_fits "$name" "${SCENARIO_ARGS[@]}" || continue
	nested_run "$name" "nested many-guests scenario on $kver" "$logs" many_checks_ran -- "${SCENARIO_ARGS[@]}"
	if [ -s "$log_dir/$name.ours" ]; then
		own not-ok "$name" "not retried: $(cat "$log_dir/$name.ours")"
		continue
	fi
	if [ -s "$logs/many.tap" ] && all_skipped "$logs/many.tap"; then
		# Nothing was checked (CI 2026-12-07: the extra guests never
		# came up, every check a skip, and the scenario was called a
		# pass): a skip with the scenario's own reason.
		sed "s/^\(\(not \)\?ok [0-9]*\) /\1 $name: /" "$logs/many.tap" | tee -a "$tap_log"
		own skip "$name" "every check skipped: $(sed -n 's/^ok [0-9]* [^#]*# SKIP //p' "$logs/many.tap" | head -n 1) (attempts.log)"
		own skip "${name}_merge_marks" "the scenario checked nothing"
	elif [ -s "$logs/many.tap" ]; then
		sed "s/^\(\(not \)\?ok [0-9]*\) /\1 $name: /" "$logs/many.tap" | tee -a "$tap_log"
		own ok "$name"
		# merge of the moving guest's recording and the host's trace
		# (many-host.dat), here rather than in the emulator: each
		# disruption marked in the text, the JSON and trace.dat, and
		# the events of every buffer (by default the trace is one
		# instance's, trace-cmd extract -B) in all three and in
		# trace-cmd report of the --dat file.
		if [ -s "$logs/many-host.dat" ] && [ -s "$logs/many.hgc" ] &&
		   grep -q 'many.guest_mode_after_moves$' "$logs/many.tap"; then
			if python3 selftests/nested/check_moves.py merge "$build/user/hgclock" \
				"$logs/many.hgc" "$logs/many-host.dat" "$logs/many-dump.txt" "$logs" \
				>"$log_dir/$name.merge" 2>&1; then
				sed 's/^/# /' "$log_dir/$name.merge"
				own ok "${name}_merge_marks"
			else
				sed 's/^/# /' "$log_dir/$name.merge"
				own not-ok "${name}_merge_marks" "$(tail -n 1 "$log_dir/$name.merge")"
			fi
		else
			own skip "${name}_merge_marks" "no host trace of the moves (HGCLOCK_MANY_TRACE=0), or the moves did not all happen"
		fi
	elif emulator_exhausted "$name"; then
		grep -v '^guest| \[' "$log_dir/$name.out" | tail -n 20
	else
		grep -v '^guest| \[' "$log_dir/$name.out" | tail -n 20
		own not-ok "$name" "no results (exit $rc), see $log_dir/$name.out"
	fi
done

# Installing like a kernel tool (Documentation/install.rst): make install
# into a DESTDIR, the man pages against the tool's --help, DKMS builds for
# every kernel with headers (nothing left in the system's DKMS tree), and
# user space under ASan/UBSan.  Each tools/*-check.sh also runs alone.
tap_script() {	# NAME OUTPUT COMMAND...: the command's TAP lines into the log
	local name=$1 out="$log_dir/$2"
	shift 2
	if "$@" >"$out" 2>&1; then
		grep -E '^(not )?ok' "$out" | tee -a "$tap_log"
	else
		grep -E '^(not )?ok|^#' "$out" | tee -a "$tap_log"
		grep -qE '^not ok' "$out" || own not-ok "$name" "$1 failed, see $out"
	fi
}
note "IBT: no indirect call but the one kallsyms wrapper (tools/ibt-check.sh)"
# shellcheck disable=SC2206
kos=("$build"/module/*/hgclock.ko)
tap_script ibt ibt-check.out tools/ibt-check.sh "${kos[@]}"
note "module review: checkpatch (explained warnings only), sparse on every kernel"
tap_script module_review module-review.out nice tools/module-review.sh "$build"
note "make install DESTDIR=<tmp>, make uninstall"
if tools/install-check.sh "$build" >"$log_dir/install-check.out" 2>&1; then
	own ok install_destdir
else
	cat "$log_dir/install-check.out"
	own not-ok install_destdir "$(tail -n 1 "$log_dir/install-check.out")"
fi
note "man pages (make man) against hgclock --help"
tap_script man_pages man-check.out tools/man-check.sh "$build"
note "DKMS: dkms build for every kernel with headers, in a temporary tree"
tap_script dkms dkms-check.out tools/dkms-check.sh "$build"
note "Debian packages: make deb in a copy of the tree, lintian, contents (nothing installed)"
tap_script deb deb-check.out tools/deb-check.sh "$build"
note "Debian packages installed with dpkg -i (an overlay over this machine's root, in a mount namespace; DKMS builds the module) and used in a VM per nested kernel"
# shellcheck disable=SC2086 # the kernel series, one word each
tap_script pkg pkg-install.out tools/pkg-install-check.sh "$build" $nested_kernels
note "user space under ASan and UBSan (make asan)"
if nice make -s asan BUILD="$build" >"$log_dir/asan-build.log" 2>&1; then
	tap_script asan asan-check.out tools/asan-check.sh "$build"
else
	tail -n 30 "$log_dir/asan-build.log"
	own not-ok asan_build "make asan failed, see $log_dir/asan-build.log"
fi

passed=$(grep -E '^ok [0-9]+' "$tap_log" | grep -vc '# SKIP')
skipped=$(grep -E '^ok [0-9]+' "$tap_log" | grep -c '# SKIP')
failed=$(grep -cE '^not ok [0-9]+' "$tap_log")
# The failed VM attempts and why; the retried count on a line of its own
# (the last line stays the summary that .ci/run reads).
if [ -s "$log_dir/attempts.log" ]; then
	note "failed VM attempts ($log_dir/attempts.log):"
	sed 's/^/==   /' "$log_dir/attempts.log"
fi
note "$(wc -l <"$log_dir/retried.log") attempts retried (infra), $(grep -c ': ours: ' "$log_dir/attempts.log") failed by a crash of ours and $(grep -c ': unexplained: ' "$log_dir/attempts.log") by an unexplained one (not retried)"
echo "== make check took $(( $(date +%s) - start )) s; TAP log: $tap_log"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
