# tools/tap.sh - TAP lines for the shell tests (sourced).
#
#   tap ok|not-ok|skip NAME [REASON]   one line, numbered from 1
#   check NAME COMMAND...              ok when COMMAND succeeds
#
# Names get $TAP_PREFIX in front; $tap_failed counts the failures.
tap_n=0
tap_failed=0

tap() {
	tap_n=$((tap_n + 1))
	case $1 in
	ok) echo "ok $tap_n ${TAP_PREFIX:-}$2" ;;
	skip) echo "ok $tap_n ${TAP_PREFIX:-}$2 # SKIP ${3:-}" ;;
	*) echo "not ok $tap_n ${TAP_PREFIX:-}$2${3:+ # $3}"; tap_failed=$((tap_failed + 1)) ;;
	esac
}

check() {
	local name=$1
	shift
	if "$@"; then tap ok "$name"; else tap not-ok "$name"; fi
}

# unit_programs DIR: the unit test programs in DIR, one path a line, in
# the order tap_programs should start them: test_cli's two halves first
# (the longest), then the rest; programs only (DIR/data holds the merge
# test's recording, DIR/bin test_cli's helpers).  make check's unit step
# and tools/asan-check.sh both run this list.
unit_programs() {
	local t seen=" "

	for t in "$1"/test_cli "$1"/test_cli_outputs "$1"/*; do
		[ -f "$t" ] && [ -x "$t" ] || continue
		case $seen in *" $t "*) continue ;; esac
		seen="$seen$t "
		echo "$t"
	done
}

# tap_programs OUTDIR PROGRAM...: the test programs run at once, as many
# as there are CPUs, in the order given (put the longest first); each
# one's output (standard output and error) in OUTDIR/NAME.out and its
# exit status in OUTDIR/NAME.rc.  Returns when all have ended; the caller
# reads the outputs in the order it wants (the TAP log stays in order).
tap_programs() {
	local dir=$1 jobs running=0 t
	shift
	jobs=$(nproc 2>/dev/null || echo 1)
	mkdir -p "$dir"
	for t in "$@"; do
		if [ "$running" -ge "$jobs" ]; then
			wait -n
			running=$((running - 1))
		fi
		(
			"$t" >"$dir/${t##*/}.out" 2>&1
			echo $? >"$dir/${t##*/}.rc"
		) &
		running=$((running + 1))
	done
	wait
}
