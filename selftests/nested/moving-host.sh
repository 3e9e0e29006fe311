# Host side of the moving-offsets scenario (tools/vm/nested HOST_SCRIPT),
# sourced by tools/vm/nested-host in a host VM booted with tsc=unstable:
# KVM re-bases the guest's TSC offsets at every vCPU load and rewrites
# its kvm-clock parameters each time.  hgclock records with the guest's
# agent while the guest places markers; the host traces KVM's offset
# writes and the markers' CPUID exits on its TSC (the ground truth).
# Prints TAP lines; returns non-zero on any failure.
tool=$HGCLOCK_TOOL
out=$(dirname "$HGCLOCK_GUEST_CONSOLE")
if insmod "$HGCLOCK_KO"; then tap ok nested_moving.insmod; else tap not-ok nested_moving.insmod; return 1; fi
# The truth's events, enabled before the guest runs (nested-lib.sh).
hold_text_patches kvm:kvm_write_tsc_offset kvm:kvm_cpuid || return 1
guest_start || { tap not-ok nested_moving.guest_start; return 1; }
if guest_wait GUEST-WAITING 300 >/dev/null; then
	tap ok nested_moving.guest_up
else
	tap not-ok nested_moving.guest_up "guest never reached its script (infrastructure)"
	return 125
fi
grep -q 'tsc=unstable' /proc/cmdline && grep -q 'unstable' <(dmesg | grep -i 'kvm.*tsc') &&
	tap ok nested_moving.tsc_unstable || tap not-ok nested_moving.tsc_unstable
tracefs=/sys/kernel/tracing
[ -d $tracefs/instances ] || mount -t tracefs nodev $tracefs 2>/dev/null
truth=$tracefs/instances/hgclock-truth
mkdir -p $truth && echo x86-tsc >$truth/trace_clock && echo 8192 >$truth/buffer_size_kb &&
	echo 1 >$truth/events/kvm/kvm_write_tsc_offset/enable &&
	echo 1 >$truth/events/kvm/kvm_cpuid/enable &&
	echo 1 >$truth/tracing_on || echo "# cannot trace KVM's offset writes"
dbg=$(guest_debugfs)
for v in "$dbg"/vcpu*; do echo "${v##*/vcpu} $(cat "$v/tsc-offset")"; done >"$out/offsets-start"
# moving_record NAME TEST MARKS LINES ARGS...: records $out/NAME.hgc (record's
# ARGS) while the guest places the series MARKS, stops it with SIGINT, taps
# nested_moving.TEST on its exit status, and shows the last LINES of its
# stderr (/tmp/NAME.err).
moving_record() {
	local name=$1 test=$2 marks=$3 lines=$4 recorder
	shift 4
	"$tool" record -o "$out/$name.hgc" --duration 600 "$@" 2>/tmp/$name.err &
	recorder=$!
	sleep 2
	guest_send $marks
	guest_wait $marks-DONE 300 >/dev/null
	sleep 1
	kill -INT $recorder
	if wait $recorder; then tap ok nested_moving.$test; else tap not-ok nested_moving.$test; fi
	sed 's/^/# /' /tmp/$name.err | tail -n $lines
}
moving_record moving record MARKS 5 --probe-interval 50 --guest vsock:3
# The same VM recorded from the host alone (--guest vm=PID: no agent, as
# for a guest without the module) while the guest places a second series
# of markers (seq 500 and up): its x86-tsc values must be KVM-exact from
# the host's records only, its local ones refused.
moving_record moving-noagent noagent_record MARKS2 3 --guest "vm=$HGCLOCK_GUEST_PID"
echo 0 >$truth/tracing_on
cat $truth/trace >"$out/truth.txt"
echo 0 >$truth/events/kvm/kvm_write_tsc_offset/enable
echo 0 >$truth/events/kvm/kvm_cpuid/enable
rmdir $truth 2>/dev/null
grep -a -o 'MARK {[^}]*}' "$HGCLOCK_GUEST_CONSOLE" | sed 's/^MARK //' >"$out/marks.jsonl"
# The guest ends here; the checks, which need only the files, run on the
# machine itself after the host VM is gone (selftests/nested/
# moving-after.sh, tools/vm/nested --after): under the emulator they took
# minutes, and the host VM died silently in 3 of 10 runs while they ran
# (2026-12-02, Documentation/testing.rst).
guest_send DONE
guest_wait "guest: done" 120 >/dev/null
guest_wait "HGCLOCK-GUEST-EXIT:" 120 >/dev/null

hold_release
rmmod hgclock && tap ok nested_moving.rmmod || tap not-ok nested_moving.rmmod
errs=$(dmesg | grep -E 'WARNING:|BUG:|Oops|general protection|lockdep|KASAN|UBSAN|Call Trace')
[ -z "$errs" ] && tap ok nested_moving.dmesg_clean || { tap not-ok nested_moving.dmesg_clean; echo "$errs" | sed 's/^/# /'; }
[ $tap_failed -eq 0 ]
