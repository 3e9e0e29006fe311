# tools/bench/attempts.sh - failed VM attempts of make bench, classified
# (sourced by tools/bench/run.sh, sync.sh and merge.sh; needs $build).
#
#   bench_attempt NAME ATTEMPT RC LOG...
#       why attempt ATTEMPT of the VM scenario NAME failed with RC, from
#       its output and log directory (tools/vm/classify-console): sets
#       cause_class (ours, infra or fail; unexplained counts as ours) and
#       cause, prints
#       "bench: attempt N of NAME: CLASS: ..." on stderr and adds the line
#       to $build/bench/attempts.log
#   bench_retrying NAME ATTEMPT
#       counts that attempt as retried (infra): $build/bench/retried.log
#
# "ours" (a report in hgclock) and "unexplained" (one that does not name
# it but cannot be read while it is loaded) are never retried and fail
# make bench; "infra" (the emulator's
# faults, hangs, dead VMs, guests that never came up) is retried, and a
# scenario whose every attempt was infra gives no figures but does not
# fail make bench; "fail" is a failure.
# shellcheck shell=bash
: "${build:=${BUILD:-build}}"

bench_attempt() {
	local name=$1 attempt=$2 rc=$3 top
	shift 3
	top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	cause=$("$top/tools/vm/classify-console" --rc "$rc" "$@" 2>&1 | head -n 1)
	cause_class=${cause%%:*}
	case $cause_class in
	ours | infra | fail) ;;
	unexplained) cause_class=ours ;;
	*) cause_class=fail cause="fail: exit status $rc (classify-console: $cause)" ;;
	esac
	mkdir -p "$build/bench"
	echo "attempt $attempt of $name: $cause (exit $rc)" >>"$build/bench/attempts.log"
	echo "bench: attempt $attempt of $name: $cause" >&2
}

bench_retrying() {
	echo "$1 attempt $2: $cause" >>"$build/bench/retried.log"
	echo "bench: infrastructure failure; retrying $1" >&2
}
