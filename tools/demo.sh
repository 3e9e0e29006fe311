#!/bin/bash
# make demo: the whole story on a fresh machine, in about ten minutes.
#
#  1. installs what is missing (tools/deps.sh), builds the module, the
#     tool and the tests;
#  2. boots a KVM host (a VM under TCG) with a real KVM guest inside it;
#     loads hgclock.ko on both; runs `hgclock agent` in the guest and
#     `hgclock record --guest vsock:3` on the host; records both sides
#     with trace-cmd (record -A, ftrace's local clock) while a workload
#     runs in the guest and the host moves the guest's vCPU threads
#     between its CPUs (selftests/nested/merge-host.sh);
#  3. merges: `hgclock merge` (text and Perfetto JSON), `hgclock plot`;
#  4. shows the first lines of the annotated timeline, the sync error
#     (checked against the host's own kvm_entry/kvm_exit trace, and
#     trace-cmd's own placement of the same events), and where the files
#     are.
#
#   HGCLOCK_DEMO_KERNEL   kernel series of the host and guest (default 6.12)
#   make demo-module      the module alone in one VM (the earlier demo)
set -u -o pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
build=${BUILD:-build}
out=$top/$build/demo

if [ "$(id -u)" = 0 ]; then
	tools/deps.sh || exit 1
else
	echo "demo: not root, not installing packages (run tools/deps.sh as root)" >&2
fi
make -s user selftests || exit 1
# shellcheck source=tools/vm/lib.sh
. tools/vm/lib.sh
kver=$(vm_series_kernel "${HGCLOCK_DEMO_KERNEL:-6.12}")
[ -n "$kver" ] || { echo "demo: no installed ${HGCLOCK_DEMO_KERNEL:-6.12} kernel: run tools/deps.sh" >&2; exit 1; }
tools/build-module.sh "/usr/src/linux-headers-$kver" "$build/module" >/dev/null || exit 1

echo "== 1. a KVM host ($kver, a VM under TCG) and a KVM guest inside it"
echo "   host: hgclock record --guest vsock:3; trace-cmd record -A (kvm_entry/exit, sched)"
echo "   guest: hgclock agent; trace-cmd agent; a sleep loop on each vCPU"
echo "   the host moves the vCPU threads between its 2 CPUs every 300 ms"
mapfile -t files < <(vm_tracecmd_guest_files)
for attempt in 1 2 3; do
	rm -rf "$out"
	tools/vm/nested --kernel "$kver" --timeout 900 "${files[@]}" \
		--env HGCLOCK_NESTED_LOGS="$out" -- \
		selftests/nested/merge-host.sh selftests/nested/merge-guest.sh \
		>"/tmp/hgclock-demo.log" 2>&1 && break
	# A guest the emulator resets once the recording is done spoils nothing.
	grep -q 'nested-host: host script exit 0' /tmp/hgclock-demo.log &&
		"$build/user/hgclock" dump --summary "$out/merge.hgc" >/dev/null 2>&1 && break
	# The emulated nested setup fails now and then (tools/vm/README).
	cp /tmp/hgclock-demo.log "/tmp/hgclock-demo.attempt$attempt.log"
	echo "   (attempt $attempt failed, see /tmp/hgclock-demo.attempt$attempt.log:" \
		"$(grep -E 'nested-host: |merge: |Oops|timed out' /tmp/hgclock-demo.log | tail -n 1))"
done
[ -s "$out/merge.hgc" ] && [ -s "$out/host.dat" ] && [ -s "$out/host-guest.dat" ] ||
	{ echo "demo: the recording failed, see /tmp/hgclock-demo.log" >&2; exit 1; }
grep -E '^merge: |^# record: ' /tmp/hgclock-demo.log | sed 's/^/   /'

echo
echo "== 2. hgclock merge $build/demo/{merge.hgc,host.dat,host-guest.dat}"
"$build/user/hgclock" merge "$out/merge.hgc" "$out/host.dat" "$out/host-guest.dat" \
	-o "$out/merged.txt" --json "$out/merged.json" || exit 1
"$build/user/hgclock" plot "$out/merge.hgc" -o "$out/mapping.svg" || exit 1

echo
echo "== 3. the timeline around the first guest events (host lines, then guest lines tagged"
echo "   gG vV hHHH = guest, vCPU, host CPU; {host thread, error bound, method}):"
first=$(grep -n -m1 '^g0 ' "$out/merged.txt" | cut -d: -f1)
sed -n "$((first > 6 ? first - 6 : 1)),$((first + 12))p" "$out/merged.txt" | cut -c1-170

echo
echo "== 4. is it right?  Every guest event against the host's own KVM trace:"
python3 selftests/nested/check_merge.py "$build/user/hgclock" "$out" |
	grep -E '^(not )?ok|^# (inside|host_cpu|vcpus_moved|trace-cmd)' | grep -v '^ok.*runs$'

echo
echo "== 5. the files"
echo "   text timeline:        $out/merged.txt  ($(wc -l <"$out/merged.txt") lines)"
echo "   Perfetto/Chrome JSON: $out/merged.json (open it in ui.perfetto.dev or chrome://tracing)"
echo "   mapping picture:      $out/mapping.svg"
echo "   correlation file:     $out/merge.hgc  (hgclock dump, hgclock convert)"
echo "   the traces:           $out/host.dat, $out/host-guest.dat (trace-cmd report)"
