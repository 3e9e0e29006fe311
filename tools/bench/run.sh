#!/bin/bash
# make bench: builds everything, measures the library's clock, its
# application events and merge --analyze's engine natively
# (bench_native_clock, bench_native_event, bench_analyze: no VM, no
# module), then boots each target kernel in
# a VM with the module loaded and runs the benchmarks there.  Every figure is one line
# "BENCH <name> <value> <unit>", prefixed by the kernel it came from.
# Under TCG absolute times mean little: read the ratios.
#
#   HGCLOCK_KERNELS   kernel series (default "6.1 6.12")
#   HGCLOCK_VM_ACCEL  tcg (default) or kvm
#   HGCLOCK_BENCH_MERGE 0 skips hgclock merge against trace-cmd report
#                     (tools/bench/merge.sh: a nested recording, then here)
#   HGCLOCK_BENCH_SYNC 0 skips the host/guest synchronization benchmark
#                     (tools/bench/sync.sh: nested KVM, several minutes)
#   HGCLOCK_BENCH_ATTEMPTS  attempts per VM scenario (default 3)
#
# A VM attempt that fails is classified from its consoles
# (tools/vm/classify-console, tools/bench/attempts.sh): a report of ours
# fails make bench at once; the emulator's faults, hangs and dead VMs
# (infra) are retried, and their BENCH lines are not printed; a scenario
# that never got through for those reasons gives no figures and does not
# fail make bench.  The failed attempts are listed at the end, with the
# number retried.
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
# shellcheck source=tools/vm/lib.sh
. tools/vm/lib.sh
build=${BUILD:-build}
# shellcheck source=tools/bench/attempts.sh
. tools/bench/attempts.sh
attempts=${HGCLOCK_BENCH_ATTEMPTS:-3}

[ "$(id -u)" = 0 ] && tools/deps.sh
make -s user selftests || exit 1
mkdir -p "$build/bench"
: >"$build/bench/attempts.log"
: >"$build/bench/retried.log"

status=0
# Natively first, on this machine's own CPU, no VM and no module: the
# library's clock read by each method against the vDSO (bench.rst).
echo "== native: the zero-syscall clock against clock_gettime (no VM, no module)"
"$build/bench/bench_native_clock" || status=1
# hgclock_event() against trace_marker and an LTTng-UST session, 1, 2 and 8
# threads; either tracer missing is a skip with its reason, never a failure.
echo "== native: hgclock_event against trace_marker and LTTng-UST (no VM, no module)"
tools/bench/native_event.sh "$build/bench/bench_native_event" || status=1
# merge --analyze's engine on a generated small and large host: its cost per
# event should not grow with the host's vCPUs, tasks and guest threads.
echo "== native: the attribution engine on a small and a large host (no VM, no module)"
"$build/bench/bench_analyze" || status=1
for series in ${HGCLOCK_KERNELS:-6.1 6.12}; do
	kver=$(vm_series_kernel "$series")
	if [ -z "$kver" ]; then
		echo "bench: no installed $series kernel, skipped" >&2
		continue
	fi
	ko=$(tools/build-module.sh "/usr/src/linux-headers-$kver" "$build/module" | tail -n 1) || exit 1
	echo "== kernel $kver (tsc=reliable)"
	name=vm_$series
	out=$build/bench/$name.out
	for attempt in $(seq 1 "$attempts"); do
		rm -rf "$build/bench/$name.attempt$attempt.vm"
		tools/vm/run --kernel "$kver" --append tsc=reliable --timeout 1500 \
			--log-dir "$build/bench/$name.attempt$attempt.vm" -- "
			insmod '$ko' || exit 1
			# The marker write bench_read_clock compares events with.
			mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
			rc=0
			for b in bench_read_clock bench_ring; do
				'$build'/bench/\$b >/tmp/\$b.out || rc=1
				sed 's/^BENCH /BENCH $series./' /tmp/\$b.out
			done
			rmmod hgclock || rc=1
			tools/bench/tracking.sh '$build' '$ko' '$series' || rc=1
			exit \$rc" >"$out" 2>&1
		rc=$?
		[ $rc -eq 0 ] && break
		bench_attempt "$name" "$attempt" "$rc" "$out" "$build/bench/$name.attempt$attempt.vm"
		if [ "$cause_class" = infra ] && [ "$attempt" -lt "$attempts" ]; then
			bench_retrying "$name" "$attempt"
			continue
		fi
		break
	done
	# The figures of the attempt that counts, once.
	if [ "$rc" -eq 0 ] || [ "$cause_class" != infra ]; then
		cat "$out"
		[ "$rc" -eq 0 ] || status=1
	else
		echo "bench: $name: no figures, every attempt failed for the emulator's reasons (see $build/bench/attempts.log)" >&2
	fi
done
echo "== correlation file compression (tools/bench/compress.sh, no VM)"
tools/bench/compress.sh || status=1
echo "== hgclock merge --perf against perf script (tools/bench/perf.sh, no VM)"
tools/bench/perf.sh || status=1
if [ "${HGCLOCK_BENCH_MERGE:-1}" != 0 ]; then
	echo "== hgclock merge against trace-cmd report (tools/bench/merge.sh)"
	tools/bench/merge.sh || status=1
fi
if [ "${HGCLOCK_BENCH_SYNC:-1}" != 0 ]; then
	echo "== host/guest synchronization against trace-cmd (tools/bench/sync.sh)"
	tools/bench/sync.sh || status=1
fi
if [ -s "$build/bench/attempts.log" ]; then
	echo "== failed VM attempts ($build/bench/attempts.log):"
	sed 's/^/==   /' "$build/bench/attempts.log"
fi
echo "== $(wc -l <"$build/bench/retried.log") attempts retried (infra), $(grep -c ': ours: ' "$build/bench/attempts.log") failed by a report of ours and $(grep -c ': unexplained: ' "$build/bench/attempts.log") by an unexplained one (not retried)"
exit $status
