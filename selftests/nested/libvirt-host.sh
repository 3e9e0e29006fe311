# Host side of the libvirt scenario (tools/vm/nested HOST_SCRIPT): the
# guest runs as a libvirt domain (HGCLOCK_GUEST_LIBVIRT=1, see
# tools/vm/nested-libvirt.sh), and hgclock has to find it from what libvirt
# wrote: the pid file, qemu's threads, its command line (libvirt's JSON
# -device form) and the domain's XML.  Sourced by tools/vm/nested-host in
# the host VM, with nested-lib.sh; prints TAP lines, returns non-zero on any
# failure.
tool=$HGCLOCK_TOOL
# HGCLOCK_GUEST_LIBVIRT=0: the same checks that do not need libvirt, with
# qemu started by hand (the boot time without libvirt, for comparison).
HGCLOCK_GUEST_LIBVIRT=${HGCLOCK_GUEST_LIBVIRT:-1}
lv() { [ "$HGCLOCK_GUEST_LIBVIRT" = 1 ]; }
virsh_() { virsh -q -c qemu:///system "$@"; }

insmod "$HGCLOCK_KO" && tap ok libvirt.insmod || { tap not-ok libvirt.insmod; return 1; }
# The events hgclock probes, held before any VM runs (nested-lib.sh).
hold_text_patches kvm:kvm_cpuid kvm:kvm_write_tsc_offset kvm:kvm_entry kvm:kvm_pvclock_update \
	sched:sched_switch sched:sched_migrate_task sched:sched_process_exit ||
	{ tap not-ok libvirt.hold_text_patches; return 1; }
t_start=$(date +%s.%N)
if guest_start; then tap ok libvirt.guest_start; else tap not-ok libvirt.guest_start; return 125; fi
t_started=$(date +%s.%N)

if lv; then
	# The domain runs, and HGCLOCK_GUEST_PID is the qemu of libvirt's pid file.
	state=$(virsh_ domstate guest 2>&1)
	[ "$state" = running ] && tap ok libvirt.domain_running ||
		tap not-ok libvirt.domain_running "domstate: $state"
	virsh_ list --name >/tmp/virsh-list
	grep -qx guest /tmp/virsh-list && tap ok libvirt.virsh_list || tap not-ok libvirt.virsh_list
	tr '\0' '\n' <"/proc/$HGCLOCK_GUEST_PID/cmdline" | sed 's/^/# argv: /'
	pid=$(cat /run/libvirt/qemu/guest.pid 2>/dev/null)
	exe=$(readlink "/proc/$HGCLOCK_GUEST_PID/exe" 2>/dev/null)
	if [ -n "$pid" ] && [ "$pid" = "$HGCLOCK_GUEST_PID" ] && [ "${exe##*/}" = qemu-system-x86_64 ]; then
		tap ok libvirt.pid_file
	else
		tap not-ok libvirt.pid_file "pid file '$pid', HGCLOCK_GUEST_PID $HGCLOCK_GUEST_PID, exe '$exe'"
	fi
	# What libvirt 9.0 writes: the vsock device in QEMU's JSON -device form
	# (not "vhost-vsock-pci,guest-cid=3").  This domain's command line is
	# short (1.7 KB); with disks, NICs and named CPU models a real one runs
	# past the 4 KiB that hgclock record's old CID lookup read.
	tr '\0' '\n' <"/proc/$HGCLOCK_GUEST_PID/cmdline" >/tmp/qemu-cmdline
	echo "# qemu command line: $(wc -c <"/proc/$HGCLOCK_GUEST_PID/cmdline") bytes, $(wc -l </tmp/qemu-cmdline) arguments"
	grep '"driver":"vhost-vsock-pci"' /tmp/qemu-cmdline | sed 's/^/# /'
	if grep '^{"driver":"vhost-vsock-pci"' /tmp/qemu-cmdline | grep '"guest-cid":3[,}]' >/dev/null; then
		tap ok libvirt.cmdline_json_vsock
	else
		tap not-ok libvirt.cmdline_json_vsock
		sed 's/^/# cmdline: /' /tmp/qemu-cmdline
	fi
	grep -q 'guest-cid=3' /tmp/qemu-cmdline && tap not-ok libvirt.cmdline_no_keyval_cid ||
		tap ok libvirt.cmdline_no_keyval_cid
	virsh_ dumpxml guest >/tmp/guest-dumpxml.xml
	grep -q "<cid auto='no' address='3'/>" /tmp/guest-dumpxml.xml && tap ok libvirt.dumpxml_vsock ||
		tap not-ok libvirt.dumpxml_vsock
fi

if guest_wait GUEST-WAITING 300 >/dev/null; then
	tap ok libvirt.guest_up
	awk -v a="$t_start" -v b="$t_started" -v c="$(date +%s.%N)" 'BEGIN {
		printf "# guest_start took %.1f s; the guest was up %.1f s after it began\n", b - a, c - a }'
else
	tap not-ok libvirt.guest_up "guest never reached its script (infrastructure)"
	tail -n 20 "$HGCLOCK_GUEST_QEMU_LOG" | sed 's/^/# qemu: /'
	return 125
fi

# qemu's threads by their names ("CPU n/KVM": libvirt passes
# debug-threads=on), KVM's debugfs directory of the VM, and the module's
# table: the same two threads of the same process.
guest_vcpu_tids >/tmp/vcpu-tids
sed 's/^/# vcpu tid: /' /tmp/vcpu-tids
[ "$(wc -l </tmp/vcpu-tids)" -eq 2 ] && tap ok libvirt.vcpu_threads ||
	tap not-ok libvirt.vcpu_threads "$(wc -l </tmp/vcpu-tids) CPU n/KVM threads"
dbg=$(guest_debugfs)
[ -n "$dbg" ] && [ -d "$dbg/vcpu0" ] && [ -d "$dbg/vcpu1" ] && tap ok libvirt.kvm_debugfs ||
	tap not-ok libvirt.kvm_debugfs "'$dbg'"
n=0
until [ "$("$tool" vcpus --json | grep -c '"kvm": true')" -ge 2 ] || [ $n -ge 100 ]; do
	sleep 0.1
	n=$((n + 1))
done
"$tool" vcpus --json >/tmp/vcpus.json
python3 - "$HGCLOCK_GUEST_PID" /tmp/vcpus.json /tmp/vcpu-tids <<'PY'
import json, sys
pid = int(sys.argv[1])
seen = {(v["vcpu_id"], v["tid"]) for v in json.load(open(sys.argv[2]))["vcpus"]
        if v["kvm"] and v["vm_pid"] == pid}
want = {tuple(int(x) for x in l.split()) for l in open(sys.argv[3]) if l.strip()}
print("# hgclock vcpus of pid %d: %s; qemu's threads: %s" % (pid, sorted(seen), sorted(want)))
sys.exit(0 if want and seen == want else 1)
PY
[ $? -eq 0 ] && tap ok libvirt.hgclock_vcpus || tap not-ok libvirt.hgclock_vcpus

# record against the guest's agent, the VM found by its vsock CID on the
# command line libvirt wrote; then by domain name where the tool has it.
"$tool" record -o /tmp/lv.hgc --guest vsock:3 --duration 5 2>/tmp/lv-record.err
rc=$?
sed 's/^/# record: /' /tmp/lv-record.err
[ $rc -eq 0 ] && tap ok libvirt.record || tap not-ok libvirt.record "exit $rc"
"$tool" dump /tmp/lv.hgc 2>&1 | grep -a '^guest0:' >/tmp/lv-dump-guest
sed 's/^/# dump: /' /tmp/lv-dump-guest
grep -q "^guest0: vsock:3, VM process $HGCLOCK_GUEST_PID (found by" /tmp/lv-dump-guest &&
	tap ok libvirt.record_found_vm_by_cid ||
	tap not-ok libvirt.record_found_vm_by_cid "libvirt's JSON -device form not understood?"
# Told which process (libvirt's pid file): the VM is known, so the file
# has KVM-exact segments, whatever the CID lookup makes of libvirt's
# command line.
pidf=$(cat /run/libvirt/qemu/guest.pid 2>/dev/null || echo "$HGCLOCK_GUEST_PID")
"$tool" record -o /tmp/lv-pid.hgc --guest "vsock:3,vm=$pidf" --duration 5 2>/tmp/lv-pid.err
rc=$?
sed 's/^/# record vm=PID: /' /tmp/lv-pid.err
"$tool" dump /tmp/lv-pid.hgc 2>&1 | grep -a '^guest0:' >/tmp/lv-dump-pid
sed 's/^/# dump: /' /tmp/lv-dump-pid
# (No "grep -q" at the end of a pipe: nested-host runs with pipefail, and
# the writer may get SIGPIPE.)
if [ $rc -eq 0 ] && grep -q "^guest0: .*VM process $HGCLOCK_GUEST_PID (given)" /tmp/lv-dump-pid &&
	grep -Eq 'guest 0: [1-9][0-9]* kvm-exact segments' /tmp/lv-pid.err; then
	tap ok libvirt.record_vm_pid_kvm_exact
else
	tap not-ok libvirt.record_vm_pid_kvm_exact "exit $rc"
fi
record_help=$("$tool" record --help 2>&1)
if lv && [ -z "${record_help##*domain:*}" ]; then
	"$tool" record -o /tmp/lv-domain.hgc --guest domain:guest --duration 5 2>/tmp/lv-domain.err
	rc=$?
	sed 's/^/# record domain: /' /tmp/lv-domain.err
	"$tool" dump /tmp/lv-domain.hgc 2>&1 | grep -a '^guest0:' >/tmp/lv-dump-domain
	sed 's/^/# dump: /' /tmp/lv-dump-domain
	[ $rc -eq 0 ] && grep -q "VM process $HGCLOCK_GUEST_PID " /tmp/lv-dump-domain &&
		tap ok libvirt.record_domain || tap not-ok libvirt.record_domain "exit $rc"
else
	tap skip libvirt.record_domain "this hgclock has no --guest domain:NAME"
fi

guest_send DONE
guest_wait "guest: done" 120 >/dev/null && tap ok libvirt.guest_done || tap not-ok libvirt.guest_done
guest_wait "HGCLOCK-GUEST-EXIT:" 120 >/dev/null
hold_release
# The guest powered off: libvirt saw it go (on_poweroff destroy).
n=0
while kill -0 "$HGCLOCK_GUEST_PID" 2>/dev/null && [ $n -lt 100 ]; do
	sleep 0.1
	n=$((n + 1))
done
if lv; then
	reason=$(libvirt_guest_exit_reason)
	echo "# libvirt: $reason"
	case $reason in
	*reason=shutdown*) tap ok libvirt.guest_poweroff_seen ;;
	*) tap not-ok libvirt.guest_poweroff_seen "'$reason'" ;;
	esac
fi
rmmod hgclock && tap ok libvirt.rmmod || tap not-ok libvirt.rmmod
errs=$(dmesg | grep -E 'WARNING:|BUG:|Oops|general protection|lockdep|KASAN|UBSAN|Call Trace')
[ -z "$errs" ] && tap ok libvirt.dmesg_clean || { tap not-ok libvirt.dmesg_clean; echo "$errs" | sed 's/^/# /'; }
[ $tap_failed -eq 0 ]
