#!/bin/bash
# tools/ibt-check.sh KO... - IBT safety of hgclock.ko (Documentation/clock.rst,
# "IBT").  Under CONFIG_X86_KERNEL_IBT an indirect call must land on an
# ENDBR; a function the module found by name may have none (kprobes report
# the address after it, the kernel seals unused ones at boot).  So:
#
#  1. only module/ksym.c names kallsyms_lookup_name, and no result of
#     hgclock_ksym_data() is cast to a function pointer;
#  2. in the built object, the functions that make an indirect call are
#     exactly the ones listed below, each for the reason given: the one
#     call through a looked-up address, with ENDBR tracking off, and two
#     kernel inline helpers calling a pointer the kernel itself set.
#     (Paravirt calls through pv_ops are patched by the kernel at load and
#     are not indirect calls of ours; they are not counted.)
#
# Prints TAP lines; exits 1 if any check failed.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)

declare -A allowed=(
	[hg_kallsyms_call]="kallsyms_lookup_name, ENDBR tracking cleared in S_CET around it"
	[hgclock_poll]="poll_wait(): the poll_table's queue function, set by the VFS"
	[hg_snap_timer_fn]="hrtimer_forward_now(): the clock base's get_time, set by the hrtimer core"
)

n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n ibt.$1"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n ibt.$1 # $2"; }

# 1. the source
others=$(grep -ln 'kallsyms_lookup_name' "$top"/module/*.[ch] | grep -v '/module/ksym.c$')
if [ -z "$others" ]; then
	ok only_ksym_names_kallsyms
else
	not_ok only_ksym_names_kallsyms "kallsyms_lookup_name named in: $others"
fi
casts=$(grep -n 'hgclock_ksym_data' "$top"/module/*.c | grep -E '\(\*\)|\(\*[a-z_]*\)\(' || true)
if [ -z "$casts" ]; then
	ok no_function_pointer_from_ksym
else
	not_ok no_function_pointer_from_ksym "cast to a function pointer: $casts"
fi

# 2. each built object
for ko in "$@"; do
	kver=$(basename "$(dirname "$ko")")
	if ! funcs=$(objdump -dr --no-show-raw-insn "$ko" |
		awk '/^[0-9a-f]+ <.*>:$/ { f = substr($2, 2, length($2) - 3) }
		     /__x86_indirect_thunk|__x86_indirect_call_thunk|call +\*%|jmp +\*%|call +\*\(|jmp +\*\(/ { print f }' |
		sort -u); then
		not_ok "indirect_calls_$kver" "objdump failed on $ko"
		continue
	fi
	bad=
	for f in $funcs; do
		[ -n "${allowed[$f]:-}" ] || bad="$bad $f"
	done
	if [ -z "$bad" ]; then
		ok "indirect_calls_$kver"
	else
		not_ok "indirect_calls_$kver" "indirect calls in:$bad"
	fi
	# The looked-up call must still be there, or the check checks nothing.
	if grep -qx hg_kallsyms_call <<<"$funcs"; then
		ok "kallsyms_call_present_$kver"
	else
		not_ok "kallsyms_call_present_$kver" "hg_kallsyms_call makes no indirect call"
	fi
done
echo "1..$n"
[ $failed -eq 0 ]
