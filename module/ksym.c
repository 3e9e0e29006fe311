// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock: looking up kernel data that is not exported to modules.
 *
 * The per-CPU TSC to sched_clock conversion (cyc2ns), whether sched_clock
 * is stable and local_clock()'s offset are all kept in symbols the kernel
 * does not export.  kallsyms_lookup_name() itself stopped being exported
 * in 5.7; like lttng-modules we find its address by registering a kprobe
 * on it and reading back the address the kprobe resolved.
 *
 * Indirect Branch Tracking (CONFIG_X86_KERNEL_IBT, Debian's 6.12 kernels)
 * makes every indirect call land on an ENDBR instruction, or the CPU
 * raises #CP and the kernel oopses.  That rules out calling anything we
 * found by name: a kprobe reports a function's address *after* its ENDBR,
 * and functions the kernel never takes the address of have their ENDBR
 * sealed (overwritten) at boot.  So:
 *
 *  - hg_kallsyms_call() is the one place the module calls through a
 *    looked-up address.  It runs with preemption off and, where the CPU
 *    enforces IBT, with ENDBR tracking cleared in this CPU's S_CET MSR for
 *    the duration of the call (what the kernel's own ibt_save() and
 *    ibt_restore() do around firmware calls), then restored.
 *  - Everything else found by name is data, read with plain loads: the
 *    cyc2ns latch, __sched_clock_offset, kvm_sched_clock_offset and the
 *    __sched_clock_stable static key.  No function we find is called.
 *  - All lookups happen at module load (__init); nothing in a probe,
 *    timer or ioctl path ever reaches kallsyms.
 *
 * tools/ibt-check.sh enforces the first point on the built object: the
 * only function in hgclock.ko that makes an indirect call is
 * hg_kallsyms_call().
 *
 * Everything found here is optional: a missing symbol only means the
 * conversion is reported as derived instead of exact (see conv.c), never
 * a failure to load.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/jump_label.h>
#include <linux/kprobes.h>
#include <linux/module.h>
#include <linux/preempt.h>
#include <linux/string.h>
#include <asm/cpufeature.h>
#include <asm/msr.h>
#include <asm/tsc.h>

#include "hgclock_internal.h"

typedef unsigned long (*hg_kallsyms_lookup_name_t)(const char *name);

/* Set and used during module init only. */
static hg_kallsyms_lookup_name_t hg_kallsyms_lookup_name __initdata;

/* Read-only after init: the __sched_clock_stable static key, or NULL. */
static struct static_key_false *hg_sched_clock_stable_key __ro_after_init;

/*
 * The only indirect call into the kernel: see the comment at the top.
 * Preemption stays off from the MSR read to its restore, so the MSR we
 * restore is the one we changed.  An interrupt taken meanwhile runs
 * without ENDBR checks on this CPU for that long (a lookup takes
 * microseconds, at module load only).
 */
static noinline unsigned long __init hg_kallsyms_call(const char *name)
{
	unsigned long addr;
#ifdef CONFIG_X86_KERNEL_IBT
	u64 s_cet = 0;
#endif

	preempt_disable();
#ifdef CONFIG_X86_KERNEL_IBT
	if (cpu_feature_enabled(X86_FEATURE_IBT)) {
		rdmsrl(MSR_IA32_S_CET, s_cet);
		if (s_cet & CET_ENDBR_EN)
			wrmsrl(MSR_IA32_S_CET, s_cet & ~CET_ENDBR_EN);
	}
#endif
	addr = hg_kallsyms_lookup_name(name);
#ifdef CONFIG_X86_KERNEL_IBT
	if (s_cet & CET_ENDBR_EN)
		wrmsrl(MSR_IA32_S_CET, s_cet);
#endif
	preempt_enable();
	return addr;
}

/*
 * The address of a data symbol, or NULL when it (or the lookup itself) is
 * unavailable.  Module init only.  Never cast the result to a function
 * pointer: tools/ibt-check.sh fails the build's check if the module makes
 * any other indirect call.
 */
void * __init hgclock_ksym_data(const char *name)
{
	if (!hg_kallsyms_lookup_name)
		return NULL;
	return (void *)hg_kallsyms_call(name);
}

int __init hgclock_ksym_init(void)
{
	int ret = -EOPNOTSUPP;
#ifdef CONFIG_KPROBES
	struct kprobe kp = { .symbol_name = "kallsyms_lookup_name" };

	/*
	 * kp.addr is the probed instruction: past the ENDBR when the
	 * function has one.  Calling there is right only with ENDBR
	 * tracking off, which hg_kallsyms_call() ensures.
	 */
	ret = register_kprobe(&kp);
	if (ret == 0) {
		hg_kallsyms_lookup_name = (hg_kallsyms_lookup_name_t)kp.addr;
		unregister_kprobe(&kp);
	}
#endif
	if (!hg_kallsyms_lookup_name) {
		pr_info("kallsyms lookup unavailable (%d): conversions will be derived, not exact\n",
			ret);
		return 0;
	}
	hg_sched_clock_stable_key = hgclock_ksym_data("__sched_clock_stable");
	return 0;
}

/*
 * sched_clock_stable() says whether sched_clock() agrees across CPUs, in
 * which case local_clock() is sched_clock() plus a constant.  It is
 * static_branch_likely(&__sched_clock_stable): we read the key's count as
 * data, which is what static_key_enabled() does.  Without the symbol we
 * can only say what the TSC says.
 */
bool hgclock_sched_clock_stable(void)
{
	if (hg_sched_clock_stable_key)
		return static_key_enabled(hg_sched_clock_stable_key);
	return !check_tsc_unstable();
}
