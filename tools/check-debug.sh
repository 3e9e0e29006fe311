#!/bin/bash
# make check-debug: the kselftest suite on a debug kernel (KASAN, lockdep,
# DEBUG_ATOMIC_SLEEP, kmemleak, UBSAN) in a VM, failing on any report.
# Ends with one line "N passed, N failed, N skipped", like make check.
#
#   tools/check-debug.sh            on the machine
#   tools/check-debug.sh --in-vm BUILD KO LOGDIR
#                                   inside the VM (run by the above)
#
# Steps, each a TAP line (log in $BUILD/check-debug/):
#   check.debug_kernel          tools/debug-kernel.sh: builds the kernel
#                               once (about 40 min), then reuses its cache
#   check.module_build_w1_debug hgclock.ko against it, warning-free (W=1)
#   vm_debug: ...               selftests/vm-tests.sh in the VM (its TAP)
#   vm_debug: debug.*           in the same VM after the suite, the module
#                               unloaded: lockdep still on, two kmemleak
#                               scans with nothing unreferenced
#   check.vm_debug              the VM's exit status
#   check.debug_checkers_on     KASAN's and kmemleak's banners at boot
#   check.debug_console_clean   no KASAN, lockdep, atomic-sleep, kmemleak,
#                               UBSAN, WARN, BUG, oops, stall or panic
#                               report in the full console log or the
#                               kernel log; each report is printed, and
#                               whether one of its frames is hgclock's
#
# Environment: HGCLOCK_DEBUG_KERNEL_CACHE (tools/debug-kernel.sh),
# HGCLOCK_DEBUG_TIMEOUT (the VM's timeout, default 2400 s), BUILD;
# HGCLOCK_DEBUG_INJECT_BOOT_REPORT=N (by hand only): the first N boots
# get a report line in their kernel log, to see the boots retried.
set -u -o pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 125

# Kernel log lines that are a report: sanitizers, lockdep (its reports
# are "WARNING: possible ... locking" and friends), atomic sleep ("BUG:
# sleeping function called from invalid context"), WARN, BUG, oopses,
# stalls, hung tasks, and the checkers switching themselves off.
REPORTS='BUG:|WARNING:|UBSAN:|KASAN|kmemleak: .*(suspected memory leak|disabled|[Ee]rror|pool empty)|unreferenced object|INFO: (possible|trying to register|task .* blocked|rcu)|DEBUG_LOCKS_WARN_ON|turning off the locking correctness validator|Oops|general protection fault|Kernel panic|Call Trace|soft lockup|hard LOCKUP|detected stall|blocked for more than'
# A report is the module's when one of its frames is: "func+0x1/0x2
# [hgclock]" ("Modules linked in: hgclock" is in every report).
OURS='\[hgclock\]'
# Lines that mention a checker without being a report.
BENIGN='KernelAddressSanitizer initialized|kmemleak: Kernel memory leak detector initialized|kmemleak: Automatic memory scanning thread started|taints kernel|module verification failed'

# The VM's exit status when the kernel reported before hgclock was loaded.
BOOT_FAULT=3

# Each report's first line in FILES (standard input without).
report_heads() {
	awk -v re="$REPORTS" -v benign="$BENIGN" \
		'$0 ~ re && $0 !~ benign && $0 !~ /Call Trace/' "$@"
}

# In the VM: lockdep still on (it switches itself off after a report).
lockdep_on() {
	[ -r /proc/lockdep_stats ] && grep -q 'debug_locks: *1' /proc/lockdep_stats
}

# The report lines of the kernel log on standard input, and "lockdep is
# off" when it is (a report that switched it off may have scrolled out).
boot_reports() {
	report_heads | head -n 5
	lockdep_on || echo "lockdep is off: $(grep debug_locks /proc/lockdep_stats 2>&1)"
}

if [ "${1:-}" = --in-vm ]; then
	build=${2:?} ko=${3:?} logs=${4:?}
	# The boot's kernel log: vm-tests.sh clears it.
	boot_log=$(dmesg)
	echo "$boot_log" >"$logs/dmesg-boot.txt"
	# A report before the module was ever loaded is the kernel's or the
	# emulator's (CI saw "KASAN: wild-memory-access in do_raw_spin_lock"
	# 1.7 s into one boot), and it can switch lockdep off for the whole
	# run, so the suite would test nothing.  Say so and exit
	# $BOOT_FAULT: the caller boots again.  hgclock is not loaded here
	# (vm-tests.sh loads it), which lsmod confirms.
	boot_reports=$(boot_reports <<<"$boot_log")
	if [ -n "$boot_reports" ] && ! grep -q '^hgclock ' /proc/modules; then
		sed 's/^/# boot report: /' <<<"$boot_reports"
		exit $BOOT_FAULT
	fi
	selftests/vm-tests.sh "$build" "$ko"
	rc=$?
	# shellcheck source=tools/tap.sh
	. tools/tap.sh
	TAP_PREFIX=debug.
	if lockdep_on; then
		tap ok lockdep_active
	else
		tap not-ok lockdep_active "lockdep is off: $(grep debug_locks /proc/lockdep_stats 2>&1)"
	fi
	kml=/sys/kernel/debug/kmemleak
	if [ ! -w $kml ]; then
		tap not-ok kmemleak_clean "no $kml (kmemleak off?)"
	else
		# Two scans some seconds apart: an object freed late or a
		# pointer in flight is not reported twice.
		echo scan >$kml && sleep 5 && echo scan >$kml
		leaks=$(cat $kml)
		if [ -z "$leaks" ]; then
			tap ok kmemleak_clean
		else
			n=$(grep -c '^unreferenced object' <<<"$leaks")
			echo "$leaks" | sed 's/^/# kmemleak: /'
			if grep -qE "$OURS" <<<"$leaks"; then
				tap not-ok kmemleak_clean "$n unreferenced objects, hgclock in their backtraces"
			else
				tap not-ok kmemleak_clean "$n unreferenced objects, none from hgclock"
			fi
		fi
	fi
	dmesg >"$logs/dmesg-tests.txt"
	[ "$rc" -eq 0 ] && [ "$tap_failed" -eq 0 ]
	exit
fi

build=${BUILD:-build}
log_dir="$build/check-debug"
mkdir -p "$log_dir"
log_dir=$(cd "$log_dir" && pwd)
build_abs=$(cd "$build" && pwd)
tap_log="$log_dir/tap.log"
: >"$tap_log"
start=$(date +%s)

note() { echo "== $*"; }
n_own=0
own() {	# own ok|not-ok|skip NAME [REASON]
	n_own=$((n_own + 1))
	case $1 in
	ok) echo "ok $n_own check.$2" ;;
	skip) echo "ok $n_own check.$2 # SKIP ${3:-}" ;;
	*) echo "not ok $n_own check.$2${3:+ # $3}" ;;
	esac | tee -a "$tap_log"
}
finish() {
	local passed skipped failed
	passed=$(grep -E '^ok [0-9]+' "$tap_log" | grep -vc '# SKIP')
	skipped=$(grep -E '^ok [0-9]+' "$tap_log" | grep -c '# SKIP')
	failed=$(grep -cE '^not ok [0-9]+' "$tap_log")
	echo "== make check-debug took $(($(date +%s) - start)) s; TAP log: $tap_log"
	echo "$passed passed, $failed failed, $skipped skipped"
	[ "$failed" -eq 0 ]
	exit
}

if [ "$(id -u)" = 0 ]; then
	tools/deps.sh || own not-ok deps "tools/deps.sh failed"
fi

note "build: user tool, selftests"
if make -s user selftests BUILD="$build" >"$log_dir/build.log" 2>&1; then
	own ok build_user
else
	cat "$log_dir/build.log"
	own not-ok build_user "make user selftests failed"
	finish
fi

note "debug kernel (tools/debug-kernel.sh; the first build takes long)"
t=$(date +%s)
if dk=$(tools/debug-kernel.sh 2> >(tee "$log_dir/debug-kernel.log" >&2) | tail -n 1) &&
   [ -s "$dk/kernelrelease" ]; then
	note "debug kernel $(cat "$dk/kernelrelease") in $dk ($(($(date +%s) - t)) s here)"
	own ok debug_kernel
else
	own not-ok debug_kernel "tools/debug-kernel.sh failed (log: $log_dir/debug-kernel.log)"
	finish
fi

note "module for the debug kernel"
if ko=$(tools/build-module.sh "$dk/build" "$build/module" | tail -n 1) && [ -f "$ko" ]; then
	own ok module_build_w1_debug
else
	own not-ok module_build_w1_debug
	finish
fi
ko=$(realpath "$ko")

# The VM writes only the project tree and --results: a BUILD outside the
# tree is shared as --results.
results=()
case $build_abs/ in
"$top"/*) ;;
*) results=(--results "$build_abs") ;;
esac

name=vm_debug
note "VM on the debug kernel: kselftests, kmemleak (single-threaded TCG, slow)"
t=$(date +%s)
rm -rf "$log_dir"/vm.boot*
# loglevel=1: only emergencies on the serial console.  With lockdep's
# PROVE_RAW_LOCK_NESTING, 6.1's 8250 console driver is itself a report
# (printk from a hard irq takes its spinlock_t port lock: "Invalid wait
# context"), after which lockdep is off for the rest of the run.  The
# whole kernel log is saved instead, at boot and after the tests, by dmesg
# in the VM.  acpi=noirq: evaluating the PCI routing AML under TCG with
# every checker on hits ACPICA's 30 s loop timeout twice per boot; the
# virtio devices use MSI-X anyway.
#
# Boots again (up to three boots) only when the VM never started or when
# the kernel reported before hgclock was ever loaded ($BOOT_FAULT, see
# --in-vm); each such boot's logs stay in vm.bootN/ and its reports are
# TAP comments.  Anything after the module was loaded is never retried.
attempts=3
for attempt in $(seq 1 $attempts); do
	rm -rf "$log_dir/vm" "$log_dir"/dmesg-*.txt
	# The retry itself, tested by hand: a report line written into the
	# kernel log of the first N boots before the check.
	inject=
	[ "$attempt" -le "${HGCLOCK_DEBUG_INJECT_BOOT_REPORT:-0}" ] &&
		inject="echo 'BUG: injected by HGCLOCK_DEBUG_INJECT_BOOT_REPORT' >/dev/kmsg; "
	tools/vm/run --kernel "$dk/build" --modules "$dk/modroot" \
		--tcg-thread single --append "loglevel=1 acpi=noirq" \
		--timeout "${HGCLOCK_DEBUG_TIMEOUT:-2400}" --boot-timeout 600 \
		--log-dir "$log_dir/vm" "${results[@]}" -- \
		"${inject}tools/check-debug.sh --in-vm '$build_abs' '$ko' '$log_dir'" \
		>"$log_dir/$name.out" 2>&1
	rc=$?
	[ $attempt -eq $attempts ] && break
	case $rc in
	125) why="the VM did not start" ;;
	"$BOOT_FAULT") why="the kernel reported at boot, before hgclock was loaded (not ours)" ;;
	*) break ;;
	esac
	note "boot $attempt: $why; booting again (logs: $log_dir/vm.boot$attempt)"
	{
		echo "# boot $attempt of $name: $why"
		grep '^# boot report: ' "$log_dir/$name.out"
	} | tee -a "$tap_log"
	rm -rf "$log_dir/vm.boot$attempt"
	mv "$log_dir/vm" "$log_dir/vm.boot$attempt"
	for f in "$log_dir"/dmesg-*.txt; do
		[ -e "$f" ] && mv "$f" "$log_dir/vm.boot$attempt/"
	done
done
note "the VM took $(($(date +%s) - t)) s"
sed "s/^\(\(not \)\?ok [0-9]*\) /\1 $name: /" "$log_dir/$name.out" | tee -a "$tap_log"
case $rc in
0) own ok "$name" ;;
124) own not-ok "$name" "VM timed out" ;;
"$BOOT_FAULT") own not-ok "$name" "the kernel reported at boot before hgclock was loaded, $attempts boots in a row (not ours; the suite did not run)" ;;
125) own not-ok "$name" "infrastructure: VM never reached the tests" ;;
126) own not-ok "$name" "kernel log errors or the VM died (exit 126)" ;;
*) own not-ok "$name" "exit status $rc" ;;
esac

# The checkers were on in that kernel (lockdep: debug.lockdep_active).
boot="$log_dir/dmesg-boot.txt"
if grep -q 'KernelAddressSanitizer initialized' "$boot" 2>/dev/null &&
   grep -q 'kmemleak: Kernel memory leak detector initialized' "$boot"; then
	own ok debug_checkers_on
else
	own not-ok debug_checkers_on "no KASAN or kmemleak banner in $boot"
fi

# Every report in the full console log (boot included) and in the kernel
# log the VM saved after the tests: one block per report, the lines after
# its first up to the next blank-ish header, enough to see where it is.
scan() {
	awk -v re="$REPORTS" -v benign="$BENIGN" '
		{ sub(/\r$/, "") }
		$0 ~ re && $0 !~ benign { print "@@ " FILENAME ":" FNR; n = 40 }
		n > 0 { print; n-- }' "$@"
}
files=()
for f in "$log_dir"/vm/console.log "$log_dir"/dmesg-boot.txt \
	 "$log_dir"/dmesg-tests.txt "$log_dir"/vm/ctl/dmesg; do
	[ -s "$f" ] && files+=("$f")
done
if [ ${#files[@]} -eq 0 ]; then
	own not-ok debug_console_clean "no console log or kernel log from the VM"
else
	scan "${files[@]}" >"$log_dir/reports.txt"
	heads=$(report_heads "${files[@]}" | sort -u)
	if [ ! -s "$log_dir/reports.txt" ]; then
		own ok debug_console_clean
	else
		echo "# kernel reports (full blocks in $log_dir/reports.txt):"
		sed 's/^/#   /' <<<"$heads" | head -n 40
		if grep -qE "$OURS" "$log_dir/reports.txt"; then
			own not-ok debug_console_clean "$(wc -l <<<"$heads") report lines, hgclock named in them"
		else
			own not-ok debug_console_clean "$(wc -l <<<"$heads") report lines, none naming hgclock"
		fi
	fi
fi
finish
