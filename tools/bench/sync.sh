#!/bin/bash
# tools/bench/sync.sh: hgclock's host/guest synchronization against
# trace-cmd's, both against ground truth, in the nested testbed (a real
# KVM guest inside the TCG host VM).  Scenarios:
#   steady  host VM booted with tsc=reliable: the guest's TSC offset stays
#   moving  host VM booted with tsc=unstable: KVM re-bases the guest's TSC
#           offset whenever it loads a vCPU
# Prints BENCH lines (sync_report.py): median and max error in ns per
# scenario, clock (local, x86-tsc) and method.
#
#   HGCLOCK_SYNC_KERNEL     kernel series (default 6.12)
#   HGCLOCK_SYNC_SCENARIOS  default "steady moving"
#   HGCLOCK_BENCH_SECONDS   length of each trace-cmd recording (default 10)
#   HGCLOCK_BENCH_IDLE_SECONDS  the recorder's idle window (default 60)
#   HGCLOCK_BENCH_CLOCKS    trace-cmd's clocks (default "local x86-tsc")
#   HGCLOCK_BENCH_PROBE_BURST  hgclock record --probe-burst (default: its own)
#   HGCLOCK_BENCH_PROBE_INTERVAL  hgclock record --probe-interval, ms
#                           (default: its own, so that the recorder's cost
#                           figures are the default's)
#   HGCLOCK_BENCH_ATTEMPTS  attempts per scenario (default 3)
#   HGCLOCK_BENCH_COALESCE_US  the module's coalesce_stop_us (default: its own, 100000)
#
# Each failed attempt is classified (tools/bench/attempts.sh): a report of
# ours fails the scenario and is not retried, the emulator's faults, hangs
# and dead VMs are retried; a scenario whose every attempt failed for
# those reasons gives no figures and does not fail the benchmark.  Logs:
# build/bench/sync-SCENARIO.attemptN.out and .vm/ (both consoles).
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
# shellcheck source=tools/vm/lib.sh
. tools/vm/lib.sh
build=${BUILD:-build}
# shellcheck source=tools/bench/attempts.sh
. tools/bench/attempts.sh
attempts=${HGCLOCK_BENCH_ATTEMPTS:-3}
series=${HGCLOCK_SYNC_KERNEL:-6.12}
kver=$(vm_series_kernel "$series")
[ -n "$kver" ] || { echo "bench: no installed $series kernel" >&2; exit 1; }
tools/build-module.sh "/usr/src/linux-headers-$kver" "$build/module" >/dev/null || exit 1
# trace-cmd and its libraries join the guest's initramfs.
mapfile -t files < <(vm_tracecmd_guest_files) && [ ${#files[@]} -gt 0 ] || exit 1
status=0
for scenario in ${HGCLOCK_SYNC_SCENARIOS:-steady moving}; do
	case $scenario in
	steady) append=tsc=reliable ;;
	moving) append=tsc=unstable ;;
	*) echo "bench: unknown scenario $scenario" >&2; exit 2 ;;
	esac
	echo "== sync $scenario: $kver, host VM $append"
	ok=
	name=sync-$scenario
	mkdir -p "$build/bench"
	cause_class=
	for attempt in $(seq 1 "$attempts"); do
		rm -rf "$build/nested"
		log=$build/bench/$name.attempt$attempt.out
		vmlogs=$build/bench/$name.attempt$attempt.vm
		rm -rf "$vmlogs"
		tools/vm/nested --kernel "$kver" --append "$append" --timeout 1200 "${files[@]}" \
			--log-dir "$vmlogs" \
			--env HGCLOCK_BENCH_SECONDS="${HGCLOCK_BENCH_SECONDS:-10}" \
			--env HGCLOCK_BENCH_IDLE_SECONDS="${HGCLOCK_BENCH_IDLE_SECONDS:-60}" \
			--env HGCLOCK_BENCH_CLOCKS="${HGCLOCK_BENCH_CLOCKS:-local x86-tsc}" \
			--env HGCLOCK_BENCH_PROBE_BURST="${HGCLOCK_BENCH_PROBE_BURST:-}" \
			--env HGCLOCK_BENCH_PROBE_INTERVAL="${HGCLOCK_BENCH_PROBE_INTERVAL:-}" \
			--env HGCLOCK_BENCH_COALESCE_US="${HGCLOCK_BENCH_COALESCE_US:-}" -- \
			tools/bench/sync-host.sh tools/bench/sync-guest.sh >"$log" 2>&1
		rc=$?
		[ $rc -eq 0 ] && { ok=1; break; }
		bench_attempt "$name" "$attempt" "$rc" "$log" "$vmlogs"
		# A report of ours fails the scenario, whatever was recorded.
		[ "$cause_class" = ours ] && break
		# The nested guest does not always survive trace-cmd's sessions
		# (an emulator fault in it): what was recorded until then is
		# still measured, if hgclock's file is complete.
		if "$build/user/hgclock" dump --summary "$build/nested/bench.hgc" >/dev/null 2>&1 &&
		   [ -s "$build/nested/truth.txt" ]; then
			echo "bench: the run ended early (see $log); measuring what it recorded" >&2
			ok=1
			break
		fi
		# QEMU's multi-threaded TCG now and then runs stale code after
		# the host VM patches its text (see tools/vm/run), nested TCG
		# hangs, guests die: retried.
		if [ "$cause_class" = infra ] && [ "$attempt" -lt "$attempts" ]; then
			bench_retrying "$name" "$attempt"
			continue
		fi
		break
	done
	if [ -z "$ok" ]; then
		if [ "$cause_class" = infra ]; then
			echo "bench: sync $scenario: no figures, every attempt failed for the emulator's reasons (see $build/bench/attempts.log)" >&2
		else
			echo "bench: nested run failed, see $log" >&2
			grep -v '^guest| \[' "$log" | tail -n 20 >&2
			status=1
		fi
		continue
	fi
	# Only this run's files: a trace-cmd file an earlier run left would be
	# measured against this run's truth.
	rm -rf "$build/bench/sync-$scenario"
	mkdir -p "$build/bench/sync-$scenario"
	cp "$build"/nested/* "$build/bench/sync-$scenario/"
	python3 tools/bench/sync_report.py "$build/bench/sync-$scenario" "$build/user/hgclock" \
		"$scenario" || status=1
done
exit $status
