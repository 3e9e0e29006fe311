#!/bin/bash
# make bench: builds everything, boots each target kernel in a VM with the
# module loaded and runs the benchmarks there.  Every figure is one line
# "BENCH <name> <value> <unit>", prefixed by the kernel it came from.
# Under TCG absolute times mean little: read the ratios.
#
#   HGCLOCK_KERNELS   kernel series (default "6.1 6.12")
#   HGCLOCK_VM_ACCEL  tcg (default) or kvm
#   HGCLOCK_BENCH_MERGE 0 skips hgclock merge against trace-cmd report
#                     (tools/bench/merge.sh: a nested recording, then here)
#   HGCLOCK_BENCH_SYNC 0 skips the host/guest synchronization benchmark
#                     (tools/bench/sync.sh: nested KVM, several minutes)
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
# shellcheck source=tools/vm/lib.sh
. tools/vm/lib.sh
build=${BUILD:-build}

[ "$(id -u)" = 0 ] && tools/deps.sh
make -s user selftests || exit 1

status=0
for series in ${HGCLOCK_KERNELS:-6.1 6.12}; do
	kver=$(vm_series_kernel "$series")
	if [ -z "$kver" ]; then
		echo "bench: no installed $series kernel, skipped" >&2
		continue
	fi
	ko=$(tools/build-module.sh "/usr/src/linux-headers-$kver" "$build/module" | tail -n 1) || exit 1
	echo "== kernel $kver (tsc=reliable)"
	tools/vm/run --kernel "$kver" --append tsc=reliable --timeout 900 -- "
		insmod '$ko' || exit 1
		rc=0
		for b in bench_read_clock bench_ring; do
			'$build'/bench/\$b >/tmp/\$b.out || rc=1
			sed 's/^BENCH /BENCH $series./' /tmp/\$b.out
		done
		rmmod hgclock || rc=1
		tools/bench/tracking.sh '$build' '$ko' '$series' || rc=1
		exit \$rc" || status=1
done
if [ "${HGCLOCK_BENCH_MERGE:-1}" != 0 ]; then
	echo "== hgclock merge against trace-cmd report (tools/bench/merge.sh)"
	tools/bench/merge.sh || status=1
fi
if [ "${HGCLOCK_BENCH_SYNC:-1}" != 0 ]; then
	echo "== host/guest synchronization against trace-cmd (tools/bench/sync.sh)"
	tools/bench/sync.sh || status=1
fi
exit $status
