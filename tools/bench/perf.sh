#!/bin/bash
# tools/bench/perf.sh - hgclock merge --perf against perf script on the
# same perf.data: merge decodes through perf script itself (merge.rst,
# "perf samples"), so its time is perf script's plus the conversion and
# the merge; the ratio says what hgclock adds.  Needs no VM: perf records
# this machine for a few seconds (perf record -a, cpu-clock, 999 Hz), and
# the merge maps it against the capture of selftests/data (--force: not
# that machine's; the host samples keep their times).
#
#   tools/bench/perf.sh [SECONDS]
#
# BUILD names the build directory (default build), HGCLOCK_TOOL the
# hgclock binary timed (default $BUILD/user/hgclock: another, e.g. an
# older one kept aside, to compare on the same perf.data and machine).
#
# "BENCH perf.<name> <value> <unit>" lines (make bench); the median of 5
# runs of each, interleaved.
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
build=${BUILD:-build}
secs=${1:-5}
tool=${HGCLOCK_TOOL:-$build/user/hgclock}

command -v perf >/dev/null || { echo "perf.sh: no perf (tools/deps.sh installs linux-perf): skipped" >&2; exit 0; }
make -s BUILD="$build" user "$build/unit/data/merge.hgc" || exit 1
tmp=$(mktemp -d /tmp/hgclock-perfbench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
if ! perf record -q -e cpu-clock -a -F 999 -o "$tmp/perf.data" -- sleep "$secs" >"$tmp/rec.log" 2>&1; then
	echo "perf.sh: perf record failed: $(tail -n 2 "$tmp/rec.log")" >&2
	exit 1
fi
# The fields hgclock merge --perf asks perf script for (perf_in.c's PERF_FIELDS).
fields=comm,tid,cpu,time,event,ip,sym,dso
samples=$(perf script -i "$tmp/perf.data" -F "$fields" --ns 2>/dev/null | wc -l)
# Each writes its output to a file in $tmp: perf script through its
# standard output (as a user redirects it), the merge with -o.
ms() { local t0 t1; t0=$(date +%s%N); "$@" >/dev/null 2>&1 || return 1; t1=$(date +%s%N); echo $(((t1 - t0) / 1000000)); }
ps=() hm=()
for i in 1 2 3 4 5; do
	ps+=("$(ms sh -c 'exec perf script -i "$1" -F "$3" --ns >"$2"' \
		sh "$tmp/perf.data" "$tmp/ps.txt" "$fields")") || exit 1
	hm+=("$(ms "$tool" merge "$build/unit/data/merge.hgc" --perf "$tmp/perf.data" \
		--force -q -o "$tmp/out.txt")") || { echo "perf.sh: hgclock merge failed" >&2; exit 1; }
done
med() { printf '%s\n' "$@" | sort -n | sed -n 3p; }
p=$(med "${ps[@]}") h=$(med "${hm[@]}")
echo "BENCH perf.samples $samples samples"
echo "BENCH perf.perf_script_ms $p ms"
echo "BENCH perf.merge_ms $h ms"
awk -v h="$h" -v p="$p" 'BEGIN { if (p > 0) printf "BENCH perf.merge_vs_perf_script %.3f ratio\n", h / p }'

# The same samples as perf script's text, their CPUs given in turn among
# 2 and then among 64 (the times kept): the merge of a many-CPU host's
# samples against a 2-CPU one's.  Each CPU is a stream of the merge, and
# until 2026-12-07 each stream read the whole file: 64 CPUs took about
# 10 times as long.  Now the file is read once (merge.c, "hgm_app_reader").
perf script -i "$tmp/perf.data" -F "$fields" --ns --header \
	>"$tmp/ps.txt" 2>/dev/null || { echo "perf.sh: perf script failed" >&2; exit 1; }
for c in 2 64; do
	awk -v c="$c" '/^#/ { print; next }
		{ if (match($0, /\[[0-9]+\]/)) { $0 = substr($0, 1, RSTART - 1) sprintf("[%03d]", n % c) substr($0, RSTART + RLENGTH); n++ } print }' \
		"$tmp/ps.txt" >"$tmp/ps$c.txt"
done
t2=() t64=()
for i in 1 2 3 4 5; do
	for c in 2 64; do
		t=$(ms "$tool" merge "$build/unit/data/merge.hgc" --perf "$tmp/ps$c.txt" --force -q \
			-o "$tmp/out$c.txt") || { echo "perf.sh: hgclock merge of ps$c.txt failed" >&2; exit 1; }
		if [ "$c" = 2 ]; then t2+=("$t"); else t64+=("$t"); fi
	done
done
a=$(med "${t2[@]}") b=$(med "${t64[@]}")
echo "BENCH perf.text_merge_2cpus_ms $a ms"
echo "BENCH perf.text_merge_64cpus_ms $b ms"
awk -v a="$a" -v b="$b" 'BEGIN { if (a > 0) printf "BENCH perf.text_merge_64cpus_over_2cpus %.3f ratio\n", b / a }'
