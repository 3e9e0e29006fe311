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
# many: 300 more tracked threads (asleep), more than the old table's
# 256: a tracked thread's lookup is one hash bucket, whatever the count.
nr_many=300
base=() loaded=() tracked=() many=()
for r in 1 2 3 4 5; do
	rmmod hgclock 2>/dev/null
	base+=("$("$pp" $rounds)")
	insmod "$ko" || exit 1
	loaded+=("$("$pp" $rounds)")
	tracked+=("$("$pp" $rounds track)")
	many+=("$("$pp" $rounds track $nr_many)")
done
# Ring memory with the defaults on this VM, and the same for 256 CPUs.
info=$("$build/user/hgclock" info --json)
rmmod hgclock
b=$(printf '%s\n' "${base[@]}" | median)
l=$(printf '%s\n' "${loaded[@]}" | median)
t=$(printf '%s\n' "${tracked[@]}" | median)
m=$(printf '%s\n' "${many[@]}" | median)
echo "BENCH $series.pingpong_not_loaded $b ns"
echo "BENCH $series.pingpong_loaded_untracked $l ns"
echo "BENCH $series.pingpong_loaded_tracked $t ns"
echo "BENCH $series.pingpong_loaded_tracked_${nr_many}_more $m ns"
awk -v b="$b" -v l="$l" -v t="$t" -v m="$m" -v n="$nr_many" -v s="$series" 'BEGIN {
	printf "BENCH %s.switch_overhead_untracked %.3f ratio\n", s, l / b
	printf "BENCH %s.switch_overhead_tracked %.3f ratio\n", s, t / b
	printf "BENCH %s.switch_overhead_tracked_%d_more %.3f ratio\n", s, n, m / b
}'
python3 - "$series" "$info" <<'PY'
import json, sys
series, info = sys.argv[1], json.loads(sys.argv[2])
page = 4096
def ring_bytes(nr_cpus, ring_size):
    meta = -(-(128 + nr_cpus * 72) // page) * page
    consumer = -(-(nr_cpus * 8) // page) * page
    return meta + consumer + nr_cpus * ring_size
print(f"BENCH {series}.ring_memory_default {info['ring_bytes'] / 1024:.0f} KiB")
print(f"BENCH {series}.ring_memory_default_256_cpus {ring_bytes(256, info['ring_size']) / 2**20:.1f} MiB")
print(f"BENCH {series}.ring_memory_record_256_cpus {ring_bytes(256, 4 << 20) / 2**20:.1f} MiB")
print(f"BENCH {series}.ring_memory_cap {info['ring_max_bytes'] / 2**20:.0f} MiB")
PY
