#!/bin/bash
# selftests/data/capture.sh - records the merge unit tests' data: a real
# KVM host and guest (tools/vm/nested, the merge scenario of
# selftests/nested/merge-host.sh with a one-second trace), trace-cmd on
# both sides (record -A, ftrace's local clock) and hgclock record.  Writes
# merge.hgc.xz, host.dat.xz and guest.dat.xz here, and capture.txt (what
# made them).  Usage, from the top of the tree after `make`:
#
#   selftests/data/capture.sh [KERNEL_SERIES]     (default 6.12)
set -eu -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
. tools/vm/lib.sh
kver=$(vm_series_kernel "${1:-6.12}")
[ -n "$kver" ] || { echo "capture: no installed ${1:-6.12} kernel" >&2; exit 1; }
tools/build-module.sh "/usr/src/linux-headers-$kver" build/module >/dev/null
logs=$top/build/capture
rm -rf "$logs"
mapfile -t files < <(vm_tracecmd_guest_files)
# The recording is what counts: a guest the emulator resets after it
# (tools/vm/README) does not spoil it.
tools/vm/nested --kernel "$kver" --timeout 900 "${files[@]}" \
	--env HGCLOCK_NESTED_LOGS="$logs" --env HGCLOCK_MERGE_SECONDS=1 \
	--env "HGCLOCK_MERGE_HOST_EVENTS=-e kvm:kvm_entry -e kvm:kvm_exit" -- \
	selftests/nested/merge-host.sh selftests/nested/merge-guest.sh | tee /tmp/capture.log || true
grep -q 'nested-host: host script exit 0' /tmp/capture.log &&
	build/user/hgclock dump --summary "$logs/merge.hgc" >/dev/null ||
	{ echo "capture: the recording failed" >&2; exit 1; }
here=$top/selftests/data
xz -9 -c "$logs/merge.hgc" >"$here/merge.hgc.xz"
xz -9 -c "$logs/host.dat" >"$here/host.dat.xz"
xz -9 -c "$logs/host-guest.dat" >"$here/guest.dat.xz"
{
	echo "Captured $(date -u +%Y-%m-%d) by selftests/data/capture.sh on $kver (host VM"
	echo "under TCG, KVM guest inside it, tsc=reliable):"
	echo "  trace-cmd record -C local -e kvm:kvm_entry -e kvm:kvm_exit \\"
	echo "      -A @3 --name guest -C local -e sched:sched_switch -e sched:sched_wakeup sleep 1"
	echo "  hgclock record -o merge.hgc --guest vsock:3    (hgclock agent in the guest)"
	echo "while the vCPU threads moved between the host's two CPUs every 300 ms."
	echo "The files are as trace-cmd and hgclock wrote them, compressed with xz -9"
	echo "(trace-cmd's own zstd leaves little for xz to gain on the .dat files)."
	trace-cmd report -i "$logs/host.dat" 2>/dev/null | grep -vc '^cpus=' | sed 's/^/host.dat events: /'
	trace-cmd report -i "$logs/host-guest.dat" 2>/dev/null | grep -vc '^cpus=' | sed 's/^/guest.dat events: /'
} >"$here/capture.txt"
ls -l "$here"
