# Host side of tools/bench/sync.sh (tools/vm/nested HOST_SCRIPT), sourced
# by tools/vm/nested-host.  hgclock records the whole time; meanwhile
# trace-cmd records the host and the guest twice, once on ftrace's local
# clock (its ptp sync) and once on x86-tsc (its kvm sync).  Ground truth:
# KVM's own kvm_write_tsc_offset trace on the host's TSC.
tool=$HGCLOCK_TOOL
out=$(dirname "$HGCLOCK_GUEST_CONSOLE")
secs=${HGCLOCK_BENCH_SECONDS:-10}
# The idle window: the file grows by a section about once a second, so a
# window of 10 s would measure its bytes to +-10%; 60 s, to +-2%.
idle_secs=${HGCLOCK_BENCH_IDLE_SECONDS:-60}
# HGCLOCK_BENCH_COALESCE_US: the module's coalesce_stop_us (default: its own).
insmod "$HGCLOCK_KO" ${HGCLOCK_BENCH_COALESCE_US:+coalesce_stop_us=$HGCLOCK_BENCH_COALESCE_US} ||
	return 1
tracefs=/sys/kernel/tracing
# The events trace-cmd and the truth will enable, enabled once before the
# guest starts (text patching under multi-threaded TCG, nested-lib.sh).
hold_text_patches sched:sched_switch kvm:kvm_cpuid kvm:kvm_write_tsc_offset || return 1
guest_start || return 1
guest_wait GUEST-WAITING 300 >/dev/null || { echo "bench: the guest never came up"; return 125; }
sleep 1
truth=$tracefs/instances/hgclock-truth
mkdir -p $truth && echo x86-tsc >$truth/trace_clock &&
	echo 8192 >$truth/buffer_size_kb &&
	echo 1 >$truth/events/kvm/kvm_write_tsc_offset/enable &&
	echo 1 >$truth/events/kvm/kvm_cpuid/enable &&
	echo 1 >$truth/tracing_on || { echo "bench: cannot trace kvm_write_tsc_offset"; return 1; }
dbg=$(guest_debugfs)
for v in "$dbg"/vcpu*; do echo "${v##*/vcpu} $(cat "$v/tsc-offset")"; done >"$out/offsets-start"
# The recorder's own probe interval unless HGCLOCK_BENCH_PROBE_INTERVAL
# (ms; 50 until 2026-12-07): its cost figures below are the default's.
"$tool" record -o "$out/bench.hgc" --duration 900 --guest vsock:3 \
	${HGCLOCK_BENCH_PROBE_INTERVAL:+--probe-interval "$HGCLOCK_BENCH_PROBE_INTERVAL"} \
	${HGCLOCK_BENCH_PROBE_BURST:+--probe-burst "$HGCLOCK_BENCH_PROBE_BURST"} \
	2>"$out/record.err" &
recorder=$!
sleep 2
# usage_sample: "wall_ns cpu_ticks file_bytes guest_alive" of the
# recorder now: its user+system time (/proc/PID/stat, clock ticks), the
# size of the file it is writing (FILE.tmp-XXXXXX until the end), and 1
# if the guest's QEMU still runs (a guest the emulator killed inside a
# window writes nothing more: its bytes per second would be too low).
usage_sample() {
	local stat f bytes=0
	stat=$(cat /proc/$recorder/stat 2>/dev/null) || return 1
	stat=${stat##*) }
	for f in "$out"/bench.hgc.tmp-*; do [ -f "$f" ] && bytes=$(stat -c %s "$f"); done
	# shellcheck disable=SC2086
	set -- $stat
	echo "$(date +%s%N) $(( ${12} + ${13} )) $bytes $(kill -0 "$HGCLOCK_GUEST_PID" 2>/dev/null && echo 1 || echo 0)"
}
# The record's cost per guest, idle: the guest idles (its agent answers
# the recorder's probes) for HGCLOCK_BENCH_IDLE_SECONDS.  Busy: the
# same measure over the trace-cmd runs below (the guest's trace-cmd agent
# records and ships its buffers; every vCPU switch is a record).
{ echo "ticks_per_s $(getconf CLK_TCK)"; echo "guest_vcpus $(guest_vcpu_tids | wc -l)"; } \
	>"$out/record-usage.txt"
echo "idle_start $(usage_sample)" >>"$out/record-usage.txt"
sleep "$idle_secs"
echo "idle_end $(usage_sample)" >>"$out/record-usage.txt"
echo "busy_start $(usage_sample)" >>"$out/record-usage.txt"
rc=0
for clock in ${HGCLOCK_BENCH_CLOCKS:-local x86-tsc}; do
	# trace-cmd picks its sync protocol from the clock (kvm for x86-tsc).
	# Options before -A are the host's, after it the guest's; -o first.
	# --notimeout: see selftests/nested/merge-host.sh.
	(cd /tmp && trace-cmd record -o "$out/tc-$clock.dat" --notimeout -C $clock -e sched:sched_switch \
		-A @3 --name guest -C $clock -e sched:sched_switch sleep "$secs") \
		>"$out/tc-$clock.log" 2>&1 ||
		echo "bench: trace-cmd record ($clock) failed (its figures will be missing)"
	tail -n 3 "$out/tc-$clock.log"
done
echo "busy_end $(usage_sample)" >>"$out/record-usage.txt"
kill -INT $recorder
wait $recorder || rc=1
sed 's/^/# /' "$out/record.err"
echo 0 >$truth/tracing_on
cat $truth/trace >"$out/truth.txt"
rmdir $truth 2>/dev/null
for v in "$dbg"/vcpu*; do echo "${v##*/vcpu} $(cat "$v/tsc-offset")"; done >"$out/offsets-end"
ls -la "$out"/tc-*.dat | sed 's/^/# /'
guest_send DONE
guest_wait "guest: done" 60 >/dev/null
grep -a -o 'MARK {[^}]*}' "$HGCLOCK_GUEST_CONSOLE" | sed 's/^MARK //' >"$out/marks.jsonl"
hold_release
return $rc
