#!/bin/bash
# The native event bench (bench_native_event, no VM, no module):
# hgclock_event() against trace_marker and against an LTTng-UST
# tracepoint that a session records.  This script makes that session: a
# session daemon of its own when none runs (lttng-sessiond --no-kernel: no
# kernel tracer, no module loaded), a session writing to a temporary
# directory with the bench's tracepoint (and the thread id, vtid, which an
# application event carries too) enabled, started around the run, then
# stopped and destroyed.  Without lttng the bench runs the rest and says
# why LTTng was skipped; it never fails for a missing tracer.
#
#	tools/bench/native_event.sh BENCH_NATIVE_EVENT [MS_PER_LOOP]
set -u -o pipefail
bench=$1
shift

tmp=$(mktemp -d /tmp/hgclock-lttng.XXXXXX) || exit 1
session=hgclock-bench-$$
sessiond_pid=
created=
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	if [ -n "$created" ]; then
		lttng destroy "$session" >/dev/null 2>&1
	fi
	if [ -n "$sessiond_pid" ]; then
		kill "$sessiond_pid" 2>/dev/null
		wait "$sessiond_pid" 2>/dev/null
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

# Sets $why: the reason LTTng cannot be used here, or nothing.
why=
lttng_setup() {
	command -v lttng >/dev/null 2>&1 || { why="no lttng (lttng-tools not installed)"; return; }
	command -v lttng-sessiond >/dev/null 2>&1 || { why="no lttng-sessiond"; return; }
	if ! lttng list >/dev/null 2>&1; then
		# No session daemon answers: one of ours, its user's own
		# (HOME a temporary directory when not root).
		[ "$(id -u)" = 0 ] || export HOME=$tmp
		lttng-sessiond --no-kernel >"$tmp/sessiond.log" 2>&1 &
		sessiond_pid=$!
		for _ in $(seq 1 50); do
			lttng list >/dev/null 2>&1 && break
			sleep 0.1
		done
		lttng list >/dev/null 2>&1 ||
			{ why="lttng-sessiond did not start: $(tail -n 1 "$tmp/sessiond.log")"; return; }
	fi
	# Buffers large enough that the consumer keeps up (discards are reported).
	lttng create "$session" --output="$tmp/trace" >"$tmp/lttng.log" 2>&1 &&
		created=1 &&
		lttng enable-channel -u -s "$session" --subbuf-size=4M --num-subbuf=4 bench >>"$tmp/lttng.log" 2>&1 &&
		lttng enable-event -u -s "$session" -c bench hgclock_bench:event >>"$tmp/lttng.log" 2>&1 &&
		lttng add-context -u -s "$session" -c bench -t vtid >>"$tmp/lttng.log" 2>&1 &&
		lttng start "$session" >>"$tmp/lttng.log" 2>&1 ||
		why="lttng session: $(tail -n 1 "$tmp/lttng.log")"
}

lttng_setup
if [ -n "$why" ]; then
	HGCLOCK_BENCH_LTTNG_WHY=$why "$bench" "$@"
	exit
fi
"$bench" --lttng "$@"
status=$?
lttng stop "$session" >"$tmp/stop.log" 2>&1
lttng list "$session" >"$tmp/list.log" 2>&1
# A count of 19 digits or more is LTTng's -1: it could not be read.
discarded=$(grep -o 'Discarded events: [0-9]*' "$tmp/list.log" |
	awk '{ if (length($3) >= 19) bad = 1; n += $3 } END { print bad ? "" : n + 0 }')
if [ -n "$discarded" ]; then
	echo "BENCH native.lttng_ust_discarded $discarded events"
else
	echo "# native events: LTTng's count of discarded events could not be read"
fi
# What the session holds, read back when babeltrace (lttng-tools'
# recommendation) is there: the warm-up's events and the measured ones.
if command -v babeltrace >/dev/null 2>&1; then
	echo "BENCH native.lttng_ust_recorded $(babeltrace "$tmp/trace" 2>/dev/null |
		grep -c 'hgclock_bench:event') events"
fi
echo "# native events: LTTng recorded $(du -sm "$tmp/trace" | cut -f1) MiB into $tmp/trace (removed)"
exit $status
