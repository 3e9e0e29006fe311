#!/bin/bash
# tools/module-review.sh [BUILD] - the review tools the kernel community
# runs on a driver, on module/:
#
#  - checkpatch.pl on module/ and the UAPI header, taken from Debian's
#    linux-source-* tarball (nothing of it is kept in the repository;
#    extracted once into BUILD/checkpatch).  Every warning left is
#    explained at the place it points to, with a comment carrying
#    "checkpatch:"; a message with such a comment within the five lines
#    above is reported as explained;
#  - sparse (C=2, W=1) against every installed linux-headers tree: no
#    message at all.
#
# Prints TAP lines; exits 1 on any unexplained message.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
# Kbuild's M= wants an absolute path (make check passes "build").
mkdir -p "$build" && build=$(cd "$build" && pwd)
dir=$build/checkpatch
tarball=$(ls /usr/src/linux-source-*.tar.* 2>/dev/null | sort -V | tail -n 1)
if [ -z "$tarball" ]; then
	echo "ok 1 checkpatch.module # SKIP no /usr/src/linux-source-*.tar.* (tools/deps.sh installs it)"
	echo "1..1"
	exit 0
fi
if [ ! -x "$dir/scripts/checkpatch.pl" ]; then
	src=$(basename "$tarball" | sed 's/\.tar\..*$//')
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	tar -xf "$tarball" -C "$tmp" "$src/scripts/checkpatch.pl" "$src/scripts/spelling.txt" \
		"$src/scripts/const_structs.checkpatch" || exit 1
	mkdir -p "$dir"
	cp -r "$tmp/$src/scripts" "$dir/"
fi
out=$build/checkpatch.out
(cd "$top" && "$dir/scripts/checkpatch.pl" --no-tree --terse --show-types --max-line-length=100 \
	--ignore FILE_PATH_CHANGES,SPDX_LICENSE_TAG \
	-f module/*.[ch] include/uapi/linux/hgclock.h) >"$out" 2>&1
n=0 bad=0
while IFS= read -r line; do
	case $line in
	*:[0-9]*:*) ;;
	*) continue ;;
	esac
	file=${line%%:*}
	rest=${line#*:}
	lno=${rest%%:*}
	n=$((n + 1))
	from=$((lno > 5 ? lno - 5 : 1))
	if sed -n "${from},${lno}p" "$top/$file" | grep -q 'checkpatch:'; then
		echo "# explained: $line"
	else
		echo "# $line"
		bad=$((bad + 1))
	fi
done <"$out"
t=1 failed=0
if [ $bad -eq 0 ]; then
	echo "ok $t checkpatch.module ($n messages, each explained in a comment)"
else
	echo "not ok $t checkpatch.module # $bad of $n messages unexplained (see $out)"
	failed=1
fi

# Guards that no test can reach on a machine whose TSC calibrated (issue
# 30 item 2): clocks_calc_mult_shift() divides by tsc_khz, which is 0
# when calibration failed; every call in module/ must sit right under an
# "if (tsc_khz" test (within the three lines above it; comments aside).
t=$((t + 1))
unguarded=$(cd "$top" && awk 'FNR == 1 { guard = 0 } /if \(tsc_khz/ { guard = FNR }
	/^[ \t]*(\/\*|\*|\/\/)/ { next }
	/clocks_calc_mult_shift\(/ && !(guard && FNR - guard <= 3) { print FILENAME ":" FNR }' module/*.c)
if [ -z "$unguarded" ] && grep -q 'clocks_calc_mult_shift(' "$top"/module/*.c; then
	echo "ok $t guard.tsc_khz_divisor"
else
	echo "not ok $t guard.tsc_khz_divisor # clocks_calc_mult_shift() without an 'if (tsc_khz' above it: ${unguarded:-no call found}"
	failed=1
fi

# The guest's TSC is L1's (issue 14 item 2): while a vCPU runs a nested
# guest, vcpu->arch.tsc_offset and tsc_scaling_ratio hold the combined
# L2 values.  No code line in module/ may read them (through "arch." or
# "arch->"), and the L1 fields must be read, so that a revert to the
# L2 fields, or dropping the reads, fails here; no test reaches it
# without a nested guest that runs a guest of its own.
t=$((t + 1))
l2_reads=$(cd "$top" && awk '/^[ \t]*(\/\*|\*|\/\/)/ { next }
	{ sub(/\/\*.*$/, ""); sub(/\/\/.*$/, "") }
	/arch(\.|->)[ \t]*(tsc_offset|tsc_scaling_ratio)([^a-z_]|$)/ { print FILENAME ":" FNR }' module/*.c module/*.h)
if [ -z "$l2_reads" ] && grep -q 'arch\.l1_tsc_offset' "$top"/module/*.c &&
	grep -q 'arch\.l1_tsc_scaling_ratio' "$top"/module/*.c; then
	echo "ok $t guard.l1_tsc_offset"
else
	echo "not ok $t guard.l1_tsc_offset # L2 TSC fields read (use arch.l1_tsc_offset, arch.l1_tsc_scaling_ratio): ${l2_reads:-no read of the L1 fields found}"
	failed=1
fi

# Slots are freed only after a grace period (issue 14 item 4): in
# hgclock_track_reclaim(), the pass that marks DEAD slots RECLAIMING, a
# synchronize_rcu(), then the pass that frees the RECLAIMING ones, in
# that order.  Reverting to freeing at once passes every test: the window
# it opens is one probe's run on another CPU (track_test's
# reclaim_churn_records_name_tracked_threads did not catch it in two
# runs of the reverted module, 2026-12-05), so the order is checked here.
t=$((t + 1))
order=$(awk '/^void hgclock_track_reclaim\(void\)/ { f = 1 }
	f && /^}/ { f = 0 }
	!f { next }
	/^[ \t]*(\/\*|\*|\/\/)/ { next }
	/state = HG_SLOT_RECLAIMING;/ { printf "R" }
	/synchronize_rcu\(\);/ { printf "S" }
	/state = HG_SLOT_FREE;/ { printf "F" }' "$top/module/track.c")
if [ "$order" = RSF ]; then
	echo "ok $t guard.reclaim_grace_period"
else
	echo "not ok $t guard.reclaim_grace_period # hgclock_track_reclaim(): want RECLAIMING, synchronize_rcu(), FREE in that order, found '${order}'"
	failed=1
fi

# Exit pairing's rate window is timed with one clock for all CPUs
# (track.c, hg_pair_admit()): local_clock() is per CPU when sched_clock
# is unstable, reads earlier on the next CPU a vCPU thread moves to, and
# the unsigned difference then opens a new window and admits another
# HGCLOCK_PAIR_MAX_PER_SEC.  No nested run here has an unstable
# sched_clock during the flood, so no test reaches it: every call must
# pass ktime_get_mono_fast_ns().
t=$((t + 1))
calls=$(grep -n 'hg_pair_admit(' "$top/module/track.c" | grep -v 'static bool hg_pair_admit(')
bad_calls=$(printf '%s\n' "$calls" | grep -v 'ktime_get_mono_fast_ns()' | grep .)
if [ -n "$calls" ] && [ -z "$bad_calls" ]; then
	echo "ok $t guard.pair_window_clock"
else
	echo "not ok $t guard.pair_window_clock # hg_pair_admit() not given ktime_get_mono_fast_ns(): ${bad_calls:-no call found}"
	failed=1
fi

# sparse, on a copy of the sources per kernel (as tools/build-module.sh).
for kdir in /usr/src/linux-headers-*-amd64; do
	[ -f "$kdir/Makefile" ] || continue
	kver=${kdir##*/linux-headers-}
	t=$((t + 1))
	if ! command -v sparse >/dev/null; then
		echo "ok $t sparse.$kver # SKIP sparse not installed (tools/deps.sh installs it)"
		continue
	fi
	dest=$build/sparse/$kver
	rm -rf "$dest"
	mkdir -p "$dest/include"
	cp -r "$top/Kbuild" "$top/module" "$dest/"
	cp -r "$top/include/uapi" "$dest/include/"
	make -C "$kdir" M="$dest" C=2 W=1 KCFLAGS=-fstack-usage modules >"$dest.log" 2>&1
	msgs=$(grep -E '(warning|error):' "$dest.log" | grep -c .)
	if [ "$msgs" -eq 0 ] && grep -q 'CHECK ' "$dest.log"; then
		echo "ok $t sparse.$kver"
	else
		grep -E '(warning|error):' "$dest.log" | sed 's/^/# /'
		echo "not ok $t sparse.$kver # $msgs messages (see $dest.log)"
		failed=1
	fi
	# Stack frames (gcc's -fstack-usage, from the same build): the
	# probes run on whatever stack the traced kernel code is on
	# (sched_switch deep in the scheduler, KVM's entry path), so no
	# function may take more than stack_max bytes, nor a size known only
	# at run time (a VLA, alloca).  The largest today is 256 bytes
	# (hg_probe_kvm_entry); a host VM that hit its stack's guard page
	# under the emulator (CI, 2026-12-07) is why this is checked.
	t=$((t + 1))
	stack_max=384
	su=$(cat "$dest"/module/*.su 2>/dev/null)
	big=$(printf '%s\n' "$su" | awk -F'\t' -v max=$stack_max 'NF >= 3 && ($2 > max || $3 !~ /^static/) { print }')
	top1=$(printf '%s\n' "$su" | sort -t$'\t' -k2,2 -n | tail -n 1 | awk -F'\t' '{ n = split($1, a, ":"); print a[n] " " $2 " bytes" }')
	if [ -z "$su" ]; then
		echo "not ok $t stack.$kver # no .su file: -fstack-usage gave nothing (see $dest.log)"
		failed=1
	elif [ -z "$big" ]; then
		echo "ok $t stack.$kver (largest frame: $top1; limit $stack_max, none dynamic)"
	else
		printf '%s\n' "$big" | sed 's/^/# /'
		echo "not ok $t stack.$kver # frames over $stack_max bytes or dynamic"
		failed=1
	fi
done
echo "1..$t"
[ $failed -eq 0 ]
