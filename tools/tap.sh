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
