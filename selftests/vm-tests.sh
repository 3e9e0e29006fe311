#!/bin/bash
# Runs inside a VM (tools/vm/run), as root: loads hgclock.ko, runs the
# kselftests and the tool's smoke tests against it, unloads it, and checks
# the kernel log.  Prints TAP lines; exits non-zero if any failed.
#
#   selftests/vm-tests.sh BUILD_DIR KO
set -u
build=${1:?usage: vm-tests.sh BUILD_DIR KO}
ko=${2:?usage: vm-tests.sh BUILD_DIR KO}
tool="$build/user/hgclock"
TAP_PREFIX=vm.
# shellcheck source=tools/tap.sh
. "$(dirname "$0")/../tools/tap.sh"

echo "# kernel $(uname -r), cmdline: $(cat /proc/cmdline)"
dmesg -C 2>/dev/null
# A kmemleak kernel: forget the suspects from before the tests.
kmemleak=/sys/kernel/debug/kmemleak
[ -w $kmemleak ] && { echo scan >$kmemleak; echo clear >$kmemleak; } 2>/dev/null

if ! insmod "$ko"; then
	tap not-ok insmod "insmod $ko failed"
	exit 1
fi
tap ok insmod
check device_node test -c /dev/hgclock
check device_mode_0600 sh -c '[ "$(stat -c %a /dev/hgclock)" = 600 ]'

# The kselftests (their own TAP streams).
for t in hgclock_test ring_test track_test perm_test leak_test fuzz_ioctl_test stress_test; do
	"$build/selftests/$t"
	rc=$?
	[ $rc -eq 0 ] || [ $rc -eq 4 ] || tap_failed=$((tap_failed + 1))
done
# Everything the tests opened and mapped is closed now: the module that
# went through the fuzzing and the stress unloads, and loads again.
check unload_after_stress rmmod hgclock
check reload_after_stress insmod "$ko"

# The tool against the live module.
check tool_info "$tool" info
check tool_info_json sh -c "'$tool' info --json | grep -q '\"abi_major\": 1'"
ncpu=$(nproc)
check tool_now_all_cpus sh -c "[ \$('$tool' now --all-cpus --json | grep -c '\"cpu\":') -eq $ncpu ]"
check tool_now_cpu0 sh -c "'$tool' now --cpu 0 --json | grep -q '\"cpu\": 0'"
check tool_now_bad_cpu sh -c "'$tool' now --cpu 4096 2>/dev/null; [ \$? -eq 1 ]"
check tool_now_usage sh -c "'$tool' now --bogus 2>/dev/null; [ \$? -eq 2 ]"

# The recorder: a timed run, a run stopped by SIGINT, both complete files
# that dump reads; a cut or damaged file is refused with status 6.
check record_duration sh -c "'$tool' record -o /tmp/rec1.hgc --duration 2 --period 100 2>/dev/null &&
	'$tool' dump --summary /tmp/rec1.hgc | grep -q ', complete' &&
	[ \$('$tool' dump --json /tmp/rec1.hgc | grep -c '\"type\": \"cyc2ns\"') -ge 2 ]"
"$tool" record -o /tmp/rec2.hgc --period 50 2>/dev/null &
recorder=$!
sleep 1.5
kill -INT $recorder
wait $recorder
rc=$?
check record_sigint_clean_exit test $rc -eq 0
check record_sigint_file_complete sh -c "'$tool' dump --summary /tmp/rec2.hgc | grep -q ', complete'"
check dump_truncated_refused sh -c "head -c \$((\$(stat -c %s /tmp/rec2.hgc) - 3)) /tmp/rec2.hgc >/tmp/cut.hgc;
	'$tool' dump /tmp/cut.hgc >/dev/null 2>/tmp/cut.err; [ \$? -eq 6 ] && grep -q truncated /tmp/cut.err"
check dump_not_a_file_refused sh -c "'$tool' dump /proc/cpuinfo >/dev/null 2>&1; [ \$? -eq 6 ]"

# The recorder and agent's command lines (the vsock host/guest path runs
# in the nested testbed): an unreachable guest fails clearly; TCP needs a
# named peer.
check record_guest_unreachable sh -c "'$tool' record -o /tmp/rec4.hgc --duration 1 --guest tcp:127.0.0.1:7199 2>/tmp/rec4.err;
	[ \$? -eq 1 ] && grep -q 'refused' /tmp/rec4.err"
check agent_tcp_needs_peer sh -c "'$tool' agent --tcp 127.0.0.1 2>/dev/null; [ \$? -eq 2 ]"
check record_bad_probe_burst sh -c "'$tool' record -o /tmp/rec5.hgc --probe-burst 0 2>/tmp/rec5.err;
	[ \$? -eq 2 ] && grep -q 'probe-burst wants a count' /tmp/rec5.err && [ ! -e /tmp/rec5.hgc ]"

# Unloading while the ring is mapped (a consumer following it) is refused.
"$tool" snapshots --follow >/dev/null 2>&1 &
follower=$!
sleep 1
if ! kill -0 $follower 2>/dev/null; then
	tap not-ok unload_refused_while_mapped "snapshots --follow did not stay up"
elif rmmod hgclock 2>/dev/null; then
	tap not-ok unload_refused_while_mapped "rmmod succeeded under a mapping"
	insmod "$ko" || exit 1
else
	tap ok unload_refused_while_mapped
fi
kill -INT $follower 2>/dev/null
wait $follower
check follower_exits_cleanly test $? -eq 0

# Unloading while the device is open is refused; closed, it succeeds.
exec 3</dev/hgclock
if rmmod hgclock 2>/dev/null; then
	tap not-ok unload_refused_while_open "rmmod succeeded with /dev/hgclock open"
	exec 3<&-
	insmod "$ko" || exit 1
else
	tap ok unload_refused_while_open
	exec 3<&-
fi
check rmmod rmmod hgclock
check device_gone test ! -e /dev/hgclock
check tool_without_module sh -c "'$tool' info 2>/dev/null; [ \$? -eq 3 ]"

# Load and unload once more: no state left behind.
check reload sh -c "insmod '$ko' && '$tool' now >/dev/null && rmmod hgclock"

# The derived conversion (what a kernel without reachable cyc2ns gets):
# the ring tests again, now checking bounds instead of exactness.
if insmod "$ko" conversion=derived; then
	tap ok insmod_derived
	echo "# ring_test with conversion=derived"
	"$build/selftests/ring_test"
	rc=$?
	[ $rc -eq 0 ] || [ $rc -eq 4 ] || tap_failed=$((tap_failed + 1))
	check derived_reported sh -c "'$tool' info | grep -q derived"
	check rmmod_derived rmmod hgclock
else
	tap not-ok insmod_derived
fi

# The kernel log since the tests started (dmesg -C above).
errs=$(dmesg | grep -E 'WARNING:|BUG:|Oops|general protection|lockdep|KASAN|UBSAN|kmemleak|Call Trace|possible circular locking|sleeping function called from invalid context|soft lockup|hard LOCKUP|blocked for more than' |
       grep -vE 'taints kernel|module verification failed')
if [ -z "$errs" ]; then
	tap ok dmesg_clean
else
	tap not-ok dmesg_clean "kernel log has errors"
	echo "$errs" | sed 's/^/# /'
fi
# kmemleak reports only objects older than 5 s: scan, wait, scan again.
if [ -w $kmemleak ]; then
	echo scan >$kmemleak
	sleep 6
	echo scan >$kmemleak
	leaks=$(cat $kmemleak)
	if [ -z "$leaks" ]; then
		tap ok kmemleak_clean
	else
		tap not-ok kmemleak_clean "$(echo "$leaks" | grep -c '^unreferenced object') suspected leaks"
		echo "$leaks" | head -60 | sed 's/^/# /'
	fi
else
	tap skip kmemleak_clean "no $kmemleak in this kernel"
fi
dmesg | grep hgclock | sed 's/^/# dmesg: /'
[ $tap_failed -eq 0 ]
