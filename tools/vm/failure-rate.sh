#!/bin/bash
# tools/vm/failure-rate.sh - how often does a nested scenario fail, with
# hgclock loaded and without it?
#
# Usage: tools/vm/failure-rate.sh [--kernel SERIES] [--variants "module no-module"]
#                                 SCENARIO N
#
# Runs the nested SCENARIO N times with the module and N times without it
# (tools/vm/nested --no-module: the same two VMs, the same scripts, KVM
# guest, workload and tracing, but hgclock is never loaded and its tool
# is a stub; see tools/vm/nested), alternating the two so that the
# machine's load weighs on both alike.  Each run is classified by
# tools/vm/classify-console:
#   ok     passed
#   fail   tests failed, no crash (without the module the hgclock checks
#          always fail: expected there)
#   infra  the emulator's fault, a hang, a dead VM, a guest never up
#   ours   a report in hgclock
#   unexplained  a report that cannot be read while hgclock was loaded
# and the "VM failure rate" compared is (infra + ours + unexplained) /
# runs: what the module could change about the VMs' survival.
#
# SCENARIO is one of make check's nested scenarios, run as tools/check.sh
# runs them (same options and timeouts):
#   track        selftests/nested/track-*.sh
#   moving       selftests/nested/moving-*.sh, host VM tsc=unstable
#   merge        selftests/nested/merge-*.sh (trace-cmd on both sides)
#   many         selftests/nested/many-*.sh (four guests, migration, restore)
# (tools/vm/scenarios.sh: the same arguments as make check's)
# or one of make bench's (tools/bench/sync.sh):
#   sync-steady  tools/bench/sync-*.sh, host VM tsc=reliable
#   sync-moving  tools/bench/sync-*.sh, host VM tsc=unstable
#
# Options: --kernel SERIES (default 6.12, the series whose moving and
# merge scenarios make check runs); --variants: which to run (default
# both).  Each run's output and logs stay in
# build/failure-rate/SCENARIO/<variant>.<i>.out and .vm/; every run adds
# one line to build/failure-rate/results.log ("date scenario kernel
# variant class exit cause", the variant with the emulator: module@qemu-10.0.2,
# ",single" with HGCLOCK_NESTED_TCG_THREAD=single, ",cpu=MODEL" with
# HGCLOCK_NESTED_CPU, ",append=A+B" with HGCLOCK_NESTED_APPEND, the host
# VM's extra kernel parameters such as kvm_amd.vgif=0; ",guest-append=A+B"
# with HGCLOCK_NESTED_GUEST_APPEND, the nested guests' own, such as
# no5lvl; ",guest=pvh" with HGCLOCK_NESTED_GUEST_IMAGE=pvh; ",watch=0"
# with HGCLOCK_NESTED_SHUTDOWN_WATCH=0), so that runs on
# several days add up:
# tools/vm/failure-rate.sh --summary prints the counts from that log.
# A nested run takes 1.5 to 4 minutes of one core or two; 10 runs of
# each variant of one scenario take about an hour.
set -u -o pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
cd "$top" || exit 1
VM_PROG=failure-rate
# shellcheck source=tools/vm/lib.sh
. "$here/lib.sh"
build=${BUILD:-build}
out_dir=$top/$build/failure-rate
results=$out_dir/results.log

series=6.12 variants="module no-module"
# summary: the counts per scenario, kernel and variant in results.log.
summary() {
	[ -s "$results" ] || { echo "failure-rate: no results yet ($results)"; return 0; }
	awk '{ k = $2 " " $3 " " $4; n[k]++; c[k, $5]++ }
	END {
		for (k in n) {
			split(k, f, " ")
			printf "%s on %s, %s: %d runs: %d ok, %d fail, %d infra, %d ours, %d unexplained; VM failures %d/%d\n",
				f[1], f[2], f[3], n[k], c[k, "ok"], c[k, "fail"], c[k, "infra"], c[k, "ours"],
				c[k, "unexplained"], c[k, "infra"] + c[k, "ours"] + c[k, "unexplained"], n[k]
		}
	}' "$results" | sort
}

while [ $# -gt 0 ]; do
	case $1 in
	--kernel) series=$2; shift ;;
	--variants) variants=$2; shift ;;
	--summary) summary; exit 0 ;;
	-h | --help) sed -n '2,/^set -u/{/^set -u/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
	--) shift; break ;;
	-*) vm_msg "unknown option $1"; exit 2 ;;
	*) break ;;
	esac
	shift
done
if [ $# -ne 2 ] || ! [[ $2 =~ ^[1-9][0-9]*$ ]]; then
	vm_msg "usage: failure-rate.sh [--kernel SERIES] [--variants LIST] SCENARIO N (see --help)"
	exit 2
fi
scenario=$1 n=$2
for v in $variants; do
	case $v in module | no-module) ;; *) vm_msg "unknown variant $v"; exit 2 ;; esac
done

kver=$(vm_series_kernel "$series") || { vm_msg "no installed $series kernel"; exit 2; }
ko=$build/module/$kver/hgclock.ko
if [ ! -f "$ko" ]; then
	tools/build-module.sh "/usr/src/linux-headers-$kver" "$build/module" >/dev/null ||
		{ vm_msg "cannot build the module for $kver"; exit 2; }
fi
[ -x "$build/user/hgclock" ] || { vm_msg "build first: make user selftests"; exit 2; }

# The scenario's tools/vm/nested arguments: make check's
# (tools/vm/scenarios.sh), or tools/bench/sync.sh's.
# shellcheck source=tools/vm/scenarios.sh
. "$here/scenarios.sh"
args=()
case $scenario in
track | moving | many | merge)
	scenario_args "$scenario" "$kver" "$build" "$out_dir/$scenario-logs" || exit 2
	args=("${SCENARIO_ARGS[@]:2}") ;;	# without its --kernel KVER
sync-steady | sync-moving)
	mapfile -t tc < <(vm_tracecmd_guest_files)
	append=tsc=reliable
	[ "$scenario" = sync-moving ] && append=tsc=unstable
	args=(--append "$append" --timeout 1200 "${tc[@]}"
		--env HGCLOCK_BENCH_SECONDS=10 --env "HGCLOCK_BENCH_CLOCKS=local x86-tsc" --
		tools/bench/sync-host.sh tools/bench/sync-guest.sh) ;;
*) vm_msg "unknown scenario $scenario (track, moving, many, merge, sync-steady, sync-moving)"; exit 2 ;;
esac

# The emulator a run used, in its variant's name (module@qemu-10.0.2,
# ...,single for single-threaded TCG in the host VM): runs of different
# emulators are counted apart.
emu=@qemu-$(qemu-system-x86_64 --version | sed -n '1s/^QEMU emulator version \([^ ]*\).*/\1/p')
[ "${HGCLOCK_NESTED_TCG_THREAD:-multi}" = single ] && emu=$emu,single
[ -n "${HGCLOCK_NESTED_CPU:-}" ] && emu=$emu,cpu=$HGCLOCK_NESTED_CPU
[ -n "${HGCLOCK_NESTED_APPEND:-}" ] && emu=$emu,append=$(echo "$HGCLOCK_NESTED_APPEND" | tr ' ' '+')
[ -n "${HGCLOCK_NESTED_GUEST_APPEND:-}" ] && emu=$emu,guest-append=$(echo "$HGCLOCK_NESTED_GUEST_APPEND" | tr ' ' '+')
[ "${HGCLOCK_NESTED_GUEST_IMAGE:-bzimage}" = pvh ] && emu=$emu,guest=pvh
[ "${HGCLOCK_NESTED_SHUTDOWN_WATCH:-1}" = 0 ] && emu=$emu,watch=0

dir=$out_dir/$scenario
mkdir -p "$dir"
for i in $(seq 1 "$n"); do
	for v in $variants; do
		opt=()
		[ "$v" = no-module ] && opt=(--no-module)
		# A fresh name per run: earlier runs' logs stay.
		k=1
		while [ -e "$dir/$v.$k.out" ]; do k=$((k + 1)); done
		log=$dir/$v.$k.out vmlogs=$dir/$v.$k.vm
		rm -rf "$top/$build/nested" "$out_dir/$scenario-logs"
		t0=$(date +%s)
		tools/vm/nested --kernel "$kver" --log-dir "$vmlogs" "${opt[@]}" "${args[@]}" >"$log" 2>&1
		rc=$?
		if [ $rc -eq 0 ]; then
			cause="ok: passed"
		else
			cause=$("$here/classify-console" --rc "$rc" "$log" "$vmlogs" | head -n 1)
		fi
		class=${cause%%:*}
		echo "failure-rate: $scenario $v run $i/$n ($(( $(date +%s) - t0 )) s, exit $rc): $cause"
		echo "$(date -u +%FT%TZ) $scenario $kver $v$emu $class $rc ${cause#*: }" >>"$results"
	done
done
summary | grep -F "$scenario on $kver"
