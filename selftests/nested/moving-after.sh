#!/bin/bash
# selftests/nested/moving-after.sh NESTED_LOGS - the moving-offsets
# scenario's checks, run on this machine by tools/vm/nested --after once
# the host VM has exited, on the files its host script left in
# NESTED_LOGS (the project's build tree, shared with the VM): the two
# recordings, the guest's markers, KVM's own trace of its offset writes
# and CPUID exits (the truth) and the offsets at the start.
#
# They read a 20-30 MB recording and its JSON dump in Python: minutes of
# emulated time in the host VM (on 2026-12-05 a run timed out at 540 s in
# them, the recording done), and the host VM died silently in 3 of 10
# runs while they ran (2026-12-02; Documentation/testing.rst).  Here
# they take seconds, and the emulator is not in the way.
#
# Prints TAP lines (numbered from 101, after the host script's) and exits
# non-zero when a check failed.
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tools/tap.sh
. "$top/tools/tap.sh"
tap_n=100
out=${1:?usage: moving-after.sh NESTED_LOGS}
tool=${HGCLOCK_TOOL:-$top/build/user/hgclock}
check=$top/selftests/nested/check_track.py
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hgclock-moving.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
rm -f "$out/moving-results.json" "$out/moving-noagent-results.json"	# an earlier run's

"$tool" dump --json "$out/moving.hgc" >"$tmp/moving.jsonl" 2>"$tmp/dump.err"
[ $? -eq 0 ] && tap ok nested_moving.file_complete ||
	{ tap not-ok nested_moving.file_complete; sed 's/^/# /' "$tmp/dump.err"; }
python3 "$check" moving "$tool" "$out/moving.hgc" "$tmp/moving.jsonl" "$out/marks.jsonl" \
	"$out/truth.txt" "$out/offsets-start" "$out/moving-results.json"
rc=$?
result() {
	python3 -c "import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if r.get(sys.argv[2]) else 1)" \
		"$1" "$2" 2>/dev/null
}
for t in offsets_moved pvclock_records tsc_exact local_kvm_exact local_within_10ns \
	local_within_bound; do
	result "$out/moving-results.json" $t && tap ok nested_moving.$t || tap not-ok nested_moving.$t
done
[ $rc -le 1 ] || tap not-ok nested_moving.checker "exit $rc"
"$tool" dump --json "$out/moving-noagent.hgc" >"$tmp/moving-noagent.jsonl" 2>"$tmp/dump.err" ||
	sed 's/^/# /' "$tmp/dump.err"
python3 "$check" moving_noagent "$tool" "$out/moving-noagent.hgc" "$tmp/moving-noagent.jsonl" \
	"$out/marks.jsonl" "$out/truth.txt" "$out/offsets-start" "$out/moving-noagent-results.json"
rc=$?
for t in tsc_exact local_refused; do
	result "$out/moving-noagent-results.json" $t && tap ok nested_moving.noagent_$t ||
		tap not-ok nested_moving.noagent_$t
done
[ $rc -le 1 ] || tap not-ok nested_moving.noagent_checker "exit $rc"
[ "$tap_failed" -eq 0 ]
