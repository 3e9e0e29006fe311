#!/bin/bash
# Runs inside a VM (tools/bench/run.sh): context-switch cost of the
# tracking probes.  A pipe ping-pong on one CPU with hgclock not loaded,
# loaded (the ping-pong threads untracked: the cost every task pays), and
# loaded with both tracked; alternated over several rounds, medians
# compared.  Prints BENCH lines.
#
#   tools/bench/tracking.sh BUILD_DIR KO SERIES
set -u
build=$1 ko=$2 series=$3
pp=$build/bench/bench_pingpong
rounds=20000
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
base=() loaded=() tracked=()
for r in 1 2 3 4 5; do
	rmmod hgclock 2>/dev/null
	base+=("$("$pp" $rounds)")
	insmod "$ko" || exit 1
	loaded+=("$("$pp" $rounds)")
	tracked+=("$("$pp" $rounds track)")
done
rmmod hgclock
b=$(printf '%s\n' "${base[@]}" | median)
l=$(printf '%s\n' "${loaded[@]}" | median)
t=$(printf '%s\n' "${tracked[@]}" | median)
echo "BENCH $series.pingpong_not_loaded $b ns"
echo "BENCH $series.pingpong_loaded_untracked $l ns"
echo "BENCH $series.pingpong_loaded_tracked $t ns"
awk -v b="$b" -v l="$l" -v t="$t" -v s="$series" 'BEGIN {
	printf "BENCH %s.switch_overhead_untracked %.3f ratio\n", s, l / b
	printf "BENCH %s.switch_overhead_tracked %.3f ratio\n", s, t / b
}'
