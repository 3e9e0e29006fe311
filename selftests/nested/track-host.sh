# Host side of the vCPU tracking tests (tools/vm/nested HOST_SCRIPT),
# sourced by tools/vm/nested-host in the host VM, with nested-lib.sh.
# Prints TAP lines; returns non-zero on any failure.
tool=$HGCLOCK_TOOL
check=$(dirname "$HGCLOCK_TOOL")/../../selftests/nested/check_track.py
recs=/tmp/records.jsonl

# hgclock before kvm: KVM's tracepoints are attached when kvm.ko loads.
if insmod "$HGCLOCK_KO"; then tap ok nested.insmod_before_kvm; else tap not-ok nested.insmod_before_kvm; return 1; fi
"$tool" records --json --follow >"$recs" 2>/tmp/records.err &
reader=$!
sleep 0.5

# Before the guest runs (nested-lib.sh): the events step 4 traces, and
# every tracepoint hgclock probes, so that unloading and loading it while
# the guest runs (step 5) patches no text either.
hold_text_patches kvm:kvm_cpuid kvm:kvm_write_tsc_offset kvm:kvm_entry kvm:kvm_pvclock_update \
	sched:sched_switch sched:sched_migrate_task sched:sched_process_exit ||
	{ tap not-ok nested.hold_text_patches; return 1; }
guest_start || { tap not-ok nested.guest_start; return 1; }
# A guest's triple fault is placed (shutdown_watch_start): its self-test,
# a one-instruction guest that triple-faults at 0x1000, read back.
if [ "$HGCLOCK_KVM_MODULE" = kvm_amd ] && [ "${HGCLOCK_SHUTDOWN_WATCH:-1}" != 0 ]; then
	if [ "$SHUTDOWN_WATCH" = ok ]; then tap ok nested.shutdown_watch; else
		tap not-ok nested.shutdown_watch "$SHUTDOWN_WATCH"; fi
else
	tap skip nested.shutdown_watch "$SHUTDOWN_WATCH"
fi
if guest_wait GUEST-WAITING 300 >/dev/null; then
	tap ok nested.guest_up
else
	tap not-ok nested.guest_up "guest never reached its script (infrastructure)"
	tail -n 20 "$HGCLOCK_GUEST_QEMU_LOG" | sed 's/^/# qemu: /'
	return 125
fi
grep -q 'tracking KVM vCPUs' <(dmesg) && tap ok nested.kvm_attached_after_load ||
	tap not-ok nested.kvm_attached_after_load

# 1. Discovery: vcpu_id, thread and TSC values against qemu and debugfs.
dbg=$(guest_debugfs)
guest_vcpu_tids >/tmp/vcpu-tids
"$tool" vcpus --json >/tmp/vcpus.json
for v in "$dbg"/vcpu*; do
	echo "${v##*/vcpu} $(cat "$v/tsc-offset") $(cat "$v/tsc-scaling-ratio" 2>/dev/null || echo -)"
done >/tmp/debugfs-tsc
python3 "$check" discovery /tmp/vcpus.json /tmp/vcpu-tids /tmp/debugfs-tsc "${dbg##*/}" "$HGCLOCK_GUEST_PID"
[ $? -eq 0 ] && tap ok nested.discovery || tap not-ok nested.discovery

# 2. Migrations: move vCPU 0's thread between the host CPUs; each move is
# waited for (the thread's CPU in /proc changes), so the records must be
# exactly these moves, in order.
tid0=$(awk '$1 == 0 {print $2}' /tmp/vcpu-tids)
# Field 39 of /proc/TID/stat, counted after the ")" closing the command
# name ("CPU 0/KVM" has a space in it).
thread_cpu() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $37}'; }
host_tsc() { "$tool" now --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["samples"][0]["tsc_before"])'; }
# move TID CPU: pin the thread to CPU and wait until it is there.
move() {
	local n=0
	taskset -p -c "$2" "$1" >/dev/null
	while [ "$(thread_cpu "$1")" != "$2" ] && [ $n -lt 100 ]; do
		sleep 0.05
		n=$((n + 1))
	done
}
# Pinned where it is first: from then on, only our moves can move it.
cur=$(thread_cpu "$tid0")
move "$tid0" "$cur"
t0=$(host_tsc)
moves=""
for i in 1 2 3 4 5 6; do
	to=$((1 - cur))
	move "$tid0" "$to"
	moves="$moves $to"
	cur=$to
done
t1=$(host_tsc)
taskset -p -c 0-1 "$tid0" >/dev/null
echo "# moved vCPU 0 (tid $tid0) to:$moves"

# 3. A TSC write in the guest: an offset-change record, equal to debugfs.
guest_send WRITE-TSC
if guest_wait TSC-WRITTEN 120 >/dev/null; then tap ok nested.guest_tsc_write; else tap not-ok nested.guest_tsc_write; fi
sleep 1
cat "$dbg/vcpu0/tsc-offset" >/tmp/tsc-offset-after
kill -INT $reader
wait $reader
python3 "$check" migrations "$recs" "$tid0" "$t0" "$t1" $moves
[ $? -eq 0 ] && tap ok nested.migrations_exact || tap not-ok nested.migrations_exact
python3 "$check" tsc_write "$recs" "$tid0" "$(cat /tmp/tsc-offset-after)" "$HGCLOCK_GUEST_PID"
[ $? -eq 0 ] && tap ok nested.tsc_offset_record || tap not-ok nested.tsc_offset_record
# The shutdown watch's self-test guest (guest_start) ran a vCPU of its
# own while the reader read: its thread is a vCPU thread too.
cp /tmp/vcpu-tids /tmp/vcpu-tids-all
if [ -n "${SHUTDOWN_WATCH_TID:-}" ]; then
	echo "# the shutdown watch's self-test guest: vCPU thread $SHUTDOWN_WATCH_TID"
	echo "selftest $SHUTDOWN_WATCH_TID" >>/tmp/vcpu-tids-all
fi
python3 "$check" only_vcpus "$recs" /tmp/vcpu-tids-all
[ $? -eq 0 ] && tap ok nested.untracked_silent || tap not-ok nested.untracked_silent

# 4. Host and guest together: record with the guest's agent over vsock
# (its snapshots join the file, its clocks are probed), while the host
# traces the guest's markers (kvm_cpuid, stamped with the host's TSC) and the
# guest writes its TSC in the middle.  Ground truth: debugfs tsc-offset.
tracefs=/sys/kernel/tracing
[ -d $tracefs/instances ] || mount -t tracefs nodev $tracefs 2>/dev/null
ftr=$tracefs/instances/hgclock-marks
mkdir -p $ftr && echo x86-tsc >$ftr/trace_clock && echo 1 >$ftr/events/kvm/kvm_cpuid/enable &&
	echo 1 >$ftr/events/kvm/kvm_write_tsc_offset/enable &&
	echo 1 >$ftr/tracing_on || echo "# cannot trace kvm_cpuid"
offsets() { for v in "$dbg"/vcpu*; do echo "${v##*/vcpu} $(cat "$v/tsc-offset")"; done; }
offsets >/tmp/offsets-1
"$tool" record -o /tmp/pair.hgc --duration 600 --probe-interval 50 --probe-burst 8 --guest vsock:3 \
	2>/tmp/pair.err &
recorder=$!
sleep 2
guest_send MARKS-1
guest_wait MARKS-1-DONE 120 >/dev/null
guest_send WRITE-TSC-2
guest_wait TSC-2-WRITTEN 120 >/dev/null
sleep 0.5
offsets >/tmp/offsets-2
guest_send MARKS-2
guest_wait MARKS-2-DONE 120 >/dev/null
sleep 1
# 4b. The flood, in the same recording (the guest's cpuid_flood on vCPU 0,
# vCPU 1 sleeping and waking): KVM's trace stops first, or the flood's
# kvm_cpuid events would overwrite the markers' in its buffer.
echo 0 >$ftr/tracing_on
"$tool" info --json >/tmp/info-before-flood.json
flood_t0=$(host_tsc)
guest_send FLOOD
flood_line=$(guest_wait FLOOD- 120)
flood_skip=
case $flood_line in
*FLOOD-SKIPPED:*)
	flood_skip=${flood_line#*FLOOD-SKIPPED: }
	flood_skip=${flood_skip:-the guest skipped the flood}
	tap skip nested.flood_ran "$flood_skip" ;;
*FLOOD-DONE*) tap ok nested.flood_ran ;;
*) tap not-ok nested.flood_ran ;;
esac
flood_t1=$(host_tsc)
# The rate's last window closes within a second; vCPU 0's thread, idle
# again, switches out and writes its EXIT_SUPPRESSED record.
sleep 2
"$tool" info --json >/tmp/info-after-flood.json
kill -INT $recorder
if wait $recorder; then
	tap ok nested.record_with_guest_agent
else
	tap not-ok nested.record_with_guest_agent
fi
sed 's/^/# /' /tmp/pair.err
echo 0 >$ftr/tracing_on
cat $ftr/trace >/tmp/ftrace.txt
echo 0 >$ftr/events/kvm/kvm_cpuid/enable
echo 0 >$ftr/events/kvm/kvm_write_tsc_offset/enable
rmdir $ftr 2>/dev/null
grep -a -o 'MARK {[^}]*}' "$HGCLOCK_GUEST_CONSOLE" | sed 's/^MARK //' >/tmp/marks.jsonl
"$tool" dump --json /tmp/pair.hgc >/tmp/pair.jsonl 2>/tmp/dump.err
[ $? -eq 0 ] && tap ok nested.pair_file_complete || { tap not-ok nested.pair_file_complete; sed 's/^/# /' /tmp/dump.err; }
python3 "$check" pairing /tmp/pair.jsonl
[ $? -eq 0 ] && tap ok nested.guest_records_in_file || tap not-ok nested.guest_records_in_file
# The flood: nothing of either vCPU lost, vCPU 0's excess counted and
# shown, vCPU 1 untouched, at most 100 recorded a second.
"$tool" dump /tmp/pair.hgc >/tmp/pair.txt 2>>/tmp/dump.err
flood_checks="no_lost run_stop_consistent suppressed_counted vcpu1_not_suppressed rate_limited
	dump_shows_suppressed"
if [ -n "$flood_skip" ]; then
	for t in $flood_checks; do tap skip nested.flood_$t "$flood_skip"; done
else
	grep -a -o 'FLOOD {[^}]*}' "$HGCLOCK_GUEST_CONSOLE" | sed 's/^FLOOD //' >/tmp/flood.json
	python3 "$check" flood /tmp/pair.jsonl /tmp/pair.txt /tmp/vcpu-tids /tmp/flood.json \
		"$flood_t0" "$flood_t1" /tmp/info-before-flood.json /tmp/info-after-flood.json \
		/tmp/flood-results.json
	rc=$?
	check_flood() { python3 -c "import json,sys; r=json.load(open('/tmp/flood-results.json')); sys.exit(0 if r.get('$1') else 1)" 2>/dev/null; }
	for t in $flood_checks; do
		check_flood $t && tap ok nested.flood_$t || tap not-ok nested.flood_$t
	done
	[ $rc -le 1 ] || tap not-ok nested.flood_checker "exit $rc"
	sed 's/^/# flood: /' /tmp/flood.json
	grep -a exit_suppressed /tmp/pair.txt | tail -n 2 | sed 's/^/# /'
fi
# Every marker through the file's mapping, against KVM's trace, debugfs and
# the marker's own exit.
python3 "$check" sync "$tool" /tmp/pair.hgc /tmp/pair.jsonl /tmp/marks.jsonl /tmp/ftrace.txt \
	/tmp/offsets-1 /tmp/offsets-2 /tmp/sync-results.json
rc=$?
check_sync() { python3 -c "import json,sys; r=json.load(open('/tmp/sync-results.json')); sys.exit(0 if r.get('$1') else 1)" 2>/dev/null; }
for t in segments_after_tsc_write debugfs_matches_trace tsc_exact local_within_10ns exit_causal \
	probe_within_bound exit_within_bound; do
	check_sync $t && tap ok nested.sync_$t || tap not-ok nested.sync_$t
done
[ $rc -le 1 ] || tap not-ok nested.sync_checker "exit $rc"
# Kept with the guest's logs (build/nested): the benchmark reads them.
cp /tmp/sync-results.json /tmp/flood-results.json /tmp/pair.hgc /tmp/marks.jsonl /tmp/ftrace.txt /tmp/offsets-1 \
	/tmp/offsets-2 "$(dirname "$HGCLOCK_GUEST_CONSOLE")/" 2>/dev/null

# 5. Unload while the guest runs, then load again after kvm: the vCPUs
# are found again.
dmesg -C
if rmmod hgclock; then tap ok nested.unload_while_guest_runs; else tap not-ok nested.unload_while_guest_runs; fi
if insmod "$HGCLOCK_KO"; then tap ok nested.insmod_after_kvm; else tap not-ok nested.insmod_after_kvm; fi
n=0
until [ "$("$tool" vcpus --json | grep -c '"kvm": true')" -ge 2 ] || [ $n -ge 100 ]; do
	sleep 0.1
	n=$((n + 1))
done
[ $n -lt 100 ] && tap ok nested.rediscovered_after_reload || tap not-ok nested.rediscovered_after_reload
"$tool" vcpus

guest_send DONE
guest_wait "guest: done" 120 >/dev/null
guest_wait "HGCLOCK-GUEST-EXIT:" 120 >/dev/null
sleep 1
# The vCPU threads are gone: so are their table entries.
n=$("$tool" vcpus --json | grep -c '"kvm": true')
[ "$n" -eq 0 ] && tap ok nested.vcpu_exit_untracks || tap not-ok nested.vcpu_exit_untracks "$n left"
hold_release
rmmod hgclock && tap ok nested.rmmod || tap not-ok nested.rmmod
errs=$(dmesg | grep -E 'WARNING:|BUG:|Oops|general protection|lockdep|KASAN|UBSAN|Call Trace')
[ -z "$errs" ] && tap ok nested.dmesg_clean || { tap not-ok nested.dmesg_clean; echo "$errs" | sed 's/^/# /'; }
[ $tap_failed -eq 0 ]
