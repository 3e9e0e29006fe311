#!/bin/bash
# make demo: the whole story on a fresh machine, in about ten minutes.
#
#  1. installs what is missing (tools/deps.sh), builds the module, the
#     tool and the tests;
#  2. boots a KVM host (a VM under TCG) with a real KVM guest inside it,
#     a libvirt domain; loads hgclock.ko on both; make check's merge
#     scenario, the same run (tools/vm/scenarios.sh): `hgclock agent` in
#     the guest, `hgclock record --guest domain:guest -- trace-cmd record
#     -A ...` on the host, while an application and a sleep loop run on
#     both sides and the host moves the guest's vCPU threads between its
#     CPUs (selftests/nested/merge-host.sh);
#  3. merges and checks what make check checks (selftests/nested/
#     check_merge.py: every guest event inside its vCPU's guest mode, on
#     the host CPU the merge names), `hgclock plot`;
#  4. shows, in one screen (tools/demo-show.py, which make check runs
#     too): the merged lines around a vCPU's move between host CPUs with
#     their error bounds and trace-cmd's placement of the same events,
#     the bounds of all guest events, trace-cmd's error; then the files.
#
# Exit status 0 only when the recording, every check and the showing
# succeeded.
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

echo "== 1. a KVM host ($kver, a VM under TCG) and a KVM guest inside it (a libvirt domain)"
echo "   host: hgclock record --guest domain:guest -- trace-cmd record -A (kvm_entry/exit, sched, irq)"
echo "   guest: hgclock agent; trace-cmd agent; a sleep loop and an application on each vCPU"
echo "   the host moves the vCPU threads between its 2 CPUs every 300 ms"
# make check's merge scenario, the same run (tools/vm/scenarios.sh).
# shellcheck source=tools/vm/scenarios.sh
. tools/vm/scenarios.sh
scenario_args merge "$kver" "$build" "$out" || exit 1
log=/tmp/hgclock-demo.log
nr_attempts=3
n_infra=0	# attempts the emulator lost (classify-console: infra)
for attempt in $(seq "$nr_attempts"); do
	rm -rf "$out"
	scenario_nested --timeout 900 --log-dir "/tmp/hgclock-demo.attempt$attempt.vm"
	SCENARIO_APP_SKIP=
	tools/vm/nested "${NESTED_ARGS[@]}" >"$log" 2>&1 && break
	# A guest the emulator resets once the recording is done spoils
	# nothing (as in make check).
	scenario_merge_recorded "$log" "$out" "$build/user/hgclock" && break
	# The emulated nested setup fails now and then (tools/vm/README):
	# say why, as make check does; a crash of ours ends the demo.
	cp "$log" "/tmp/hgclock-demo.attempt$attempt.log"
	cause=$(tools/vm/classify-console --rc 1 "$log" "/tmp/hgclock-demo.attempt$attempt.vm" | head -n 1)
	echo "   (attempt $attempt failed: $cause; see /tmp/hgclock-demo.attempt$attempt.log)"
	case $cause in
	infra:*) n_infra=$((n_infra + 1)) ;;
	ours:*) echo "demo: a crash of hgclock's, not retried" >&2; exit 1 ;;
	unexplained:*) echo "demo: a crash that hgclock may have caused (unexplained), not retried" >&2; exit 1 ;;
	esac
done
if ! [ -s "$out/merge.hgc" ] || ! [ -s "$out/host.dat" ] || ! [ -s "$out/host-guest.dat" ]; then
	# Here every attempt failed, none by a crash (those ended above).
	if [ "$n_infra" -eq "$nr_attempts" ]; then
		echo "demo: the emulator lost all $nr_attempts attempts (infra, above): no test failed and nothing" \
			"of hgclock's crashed; the nested testbed under TCG dies in some runs" \
			"(Documentation/testing.rst, \"The emulator\"): run make demo again" >&2
	else
		echo "demo: the recording failed, see $log" >&2
	fi
	exit 1
fi
grep -E '^merge: |^# record: ' "$log" | sed 's/^/   /'

echo
echo "== 2. hgclock merge $build/demo/{merge.hgc,host.dat,host-guest.dat}, checked against the host's"
echo "   own KVM trace: every guest event must lie between its vCPU's kvm_entry and kvm_exit,"
echo "   on the host CPU the merge says (selftests/nested/check_merge.py, as make check runs it)"
scenario_merge_check "$kver" "$build" "$out" >"$out/check.txt" 2>&1
check_rc=$?
grep -E '^ok|^not ok' "$out/check.txt" | awk -v all="$out/check.txt" '
	/^ok/ && / # SKIP/ { s++; next } /^ok/ { p++; next } { f++; print "   " $0 }
	END { printf "   %d checks passed, %d failed, %d skipped (all: %s)\n", p, f, s, all }'
grep -E '^ok [0-9]+ merge\.(inside_guest_mode|host_cpu_matches_kvm_entry|vcpus_moved)' "$out/check.txt" |
	sed 's/^ok [0-9]* merge\./   /'
"$build/user/hgclock" plot "$out/merge.hgc" -o "$out/mapping.svg" || exit 1

echo
python3 tools/demo-show.py "$out" | sed 's/^/   /'
show_rc=${PIPESTATUS[0]}

echo
echo "== 3. the files"
echo "   text timeline:        $out/merged.txt  ($(wc -l <"$out/merged.txt") lines)"
echo "   Perfetto/Chrome JSON: $out/merged.json, native Perfetto: $out/merged.pftrace (ui.perfetto.dev)"
echo "   mapping picture:      $out/mapping.svg"
echo "   correlation file:     $out/merge.hgc  (hgclock dump, hgclock convert)"
echo "   the traces:           $out/host.dat, $out/host-guest.dat (trace-cmd report)"
[ "$check_rc" -eq 0 ] && [ "$show_rc" -eq 0 ]
