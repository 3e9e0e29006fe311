#!/bin/bash
# Runs inside a VM (tools/bench/run.sh): context-switch cost of the
# tracking probes, two ways.  Prints BENCH lines.
#
#  1. A pipe ping-pong on one CPU (bench_pingpong) with hgclock not
#     loaded, loaded (the ping-pong threads untracked: the cost every task
#     pays), loaded with both tracked, with 300 more tracked threads, and
#     with only one of the two tracked; the states interleaved within
#     each round, so that the VM's drift falls on all of them alike.
#     Medians of the rounds with an order-statistic confidence interval,
#     and the same for the per-round ratios to "not loaded".
#  2. The probes' own time, counted by the module (probe_stats=1, debugfs
#     hgclock/probe_stats): the sched_switch probe's ns per call, and that
#     over the cost of one context switch in the same run (half a round
#     trip), untracked, tracked with 1, 16 and max_sessions sessions
#     mapped as consumers, tracked with 300 more tracked threads, and
#     "coalesced" with 16 and max_sessions sessions.
#
# With both threads tracked, each switch puts one tracked thread in where
# the other went out: the module writes the incoming thread's STOP and its
# RUN into every session (a stop is coalesced only when no other tracked
# thread ran on that CPU in between, Documentation/tracking.rst): what a
# host CPU switching between two vCPUs costs.  The "coalesced" states
# track one thread only (bench_pingpong track1): it stops and runs again
# on one CPU with an untracked task in between, which the module counts
# instead of recording (coalesce_stop_us, 100 ms by default): what an
# idle vCPU that halts and wakes where it slept costs.
#
#   tools/bench/tracking.sh BUILD_DIR KO SERIES
#
# HGCLOCK_BENCH_PP_ROUNDS (default 9) rounds of HGCLOCK_BENCH_PP_TRIPS
# (default 5000) round trips; the probe runs use a quarter of the trips.
set -u
build=$1 ko=$2 series=$3
pp=$build/bench/bench_pingpong
nr_rounds=${HGCLOCK_BENCH_PP_ROUNDS:-9}
trips=${HGCLOCK_BENCH_PP_TRIPS:-5000}
probe_trips=$((trips / 4))
stats_file=/sys/kernel/debug/hgclock/probe_stats
stats_param=/sys/module/hgclock/parameters/probe_stats
# many: 300 more tracked threads (asleep), more than the old table's
# 256: a tracked thread's lookup is one hash bucket, whatever the count.
nr_many=300
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# One probe run: "<round trip ns> <probe calls> <probe ns>" appended to
# $out/probe_<name>.
probe_run() {
	local name=$1 res
	shift
	echo 1 >"$stats_param" || return 1
	res=$(HGCLOCK_PROBE_STATS=$stats_file "$pp" $probe_trips "$@") || return 1
	echo 0 >"$stats_param"
	echo "$res" | awk 'NR == 1 {rt = $1} $1 == "probe" {print rt, $2, $3}' >>"$out/probe_$name"
}

pp_to() {
	local file=$1
	shift
	"$pp" "$@" >>"$out/$file"
}

max_sessions=
for r in $(seq "$nr_rounds"); do
	rmmod hgclock 2>/dev/null
	"$pp" $trips >>"$out/not_loaded" || exit 1
	# probe_stats off for the ping-pong figures: its clock reads are not
	# the module's cost.
	insmod "$ko" || exit 1
	if [ -z "$max_sessions" ]; then
		max_sessions=$(cat /sys/module/hgclock/parameters/max_sessions) || exit 1
		if [ ! -w "$stats_param" ] || [ ! -e "$stats_file" ]; then
			echo "# tracking.sh: no $stats_param or $stats_file: no probe figures"
			stats_param=
		fi
	fi
	"$pp" $trips >>"$out/loaded_untracked" || exit 1
	"$pp" $trips track >>"$out/loaded_tracked" || exit 1
	"$pp" $trips track $nr_many >>"$out/loaded_tracked_many" || exit 1
	pp_to loaded_tracked_coalesced $trips track1 || exit 1
	if [ -n "$stats_param" ]; then
		probe_run untracked || exit 1
		probe_run sessions_1 track 0 1 || exit 1
		probe_run sessions_16 track 0 16 || exit 1
		probe_run sessions_max track 0 "$max_sessions" || exit 1
		probe_run sessions_16_${nr_many}_more track $nr_many 16 || exit 1
		probe_run coalesced_sessions_16 track1 0 16 || exit 1
		probe_run coalesced_sessions_max track1 0 "$max_sessions" || exit 1
	fi
done
# Ring memory with the defaults on this VM, and the same for 256 CPUs.
info=$("$build/user/hgclock" info --json)
rmmod hgclock

python3 - "$series" "$out" "$nr_many" "$max_sessions" "$probe_trips" "$info" <<'PY'
import json, math, os, sys
series, out, nr_many, max_sessions, probe_trips, info = sys.argv[1:7]
probe_trips = int(probe_trips)
info = json.loads(info)

def read(name):
    with open(os.path.join(out, name)) as f:
        return [[float(x) for x in line.split()] for line in f if line.strip()]

def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2

# The median's distribution-free interval: [x(k), x(n+1-k)] (1-based
# order statistics) covers the true median with probability
# 1 - 2 P(Binomial(n, 1/2) <= k - 1); the largest k with at least 95%,
# else (few rounds) the widest interval, whatever its coverage.
def ci(v):
    v = sorted(v)
    n = len(v)
    def cover(k):
        return 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2 ** n
    k = 1
    while k + 1 <= (n + 1) // 2 and cover(k + 1) >= 0.95:
        k += 1
    return v[k - 1], v[n - k], cover(k), k, n

def bench(name, value, unit, fmt="%.3f"):
    print(f"BENCH {series}.{name} {fmt % value} {unit}")

def with_ci(name, v, unit, fmt="%.3f"):
    lo, hi, c, k, n = ci(v)
    bench(name, median(v), unit, fmt)
    bench(name + "_ci_low", lo, unit, fmt)
    bench(name + "_ci_high", hi, unit, fmt)
    return c, k, n

base = [r[0] for r in read("not_loaded")]
states = [("loaded_untracked", "untracked"), ("loaded_tracked", "tracked"),
          ("loaded_tracked_many", f"tracked_{nr_many}_more")]
if os.path.exists(os.path.join(out, "loaded_tracked_coalesced")):
    states.append(("loaded_tracked_coalesced", "tracked_coalesced"))
c, k, n = with_ci("pingpong_not_loaded", base, "ns", "%.1f")
print(f"# confidence intervals: order statistics {k} and {n + 1 - k} of {n} rounds, "
      f"coverage {100 * c:.1f}% of the median")
for f, label in states:
    v = [r[0] for r in read(f)]
    with_ci("pingpong_" + f.replace("_many", f"_{nr_many}_more"), v, "ns", "%.1f")
for f, label in states:
    v = [r[0] for r in read(f)]
    # Same round, same drift: the ratio of each round's pair.
    with_ci("switch_overhead_" + label, [a / b for a, b in zip(v, base)], "ratio")

if os.path.exists(os.path.join(out, "probe_untracked")):
    floor = None
    for name in ["untracked", "sessions_1", "sessions_16", "sessions_max",
                 f"sessions_16_{nr_many}_more", "coalesced_sessions_16",
                 "coalesced_sessions_max"]:
        if not os.path.exists(os.path.join(out, "probe_" + name)):
            continue
        rows = read("probe_" + name)
        label = name.replace("sessions_max", f"sessions_max_{max_sessions}")
        per_call = [ns / calls for rt, calls, ns in rows]
        # A context switch: half a ping-pong round trip of the same run.
        frac = [ns / calls / (rt / 2) for rt, calls, ns in rows]
        with_ci("probe_ns_per_switch_" + label, per_call, "ns", "%.1f")
        with_ci("probe_fraction_of_switch_" + label, frac, "ratio", "%.4f")
        if name == "untracked":
            floor = median(per_call)
        else:
            # Less the untracked probe: what tracking and sessions add.
            net = [(ns / calls - floor) / (rt / 2) for rt, calls, ns in rows]
            with_ci("probe_added_fraction_of_switch_" + label, net, "ratio", "%.4f")
    # About 2: the probe counted the ping-pong's switches (and a few others).
    bench("probe_calls_per_round_trip",
          median([calls / probe_trips for rt, calls, ns in read("probe_sessions_1")]),
          "calls", "%.2f")

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
