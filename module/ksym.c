// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock: looking up kernel symbols that are not exported to modules.
 *
 * The per-CPU TSC to sched_clock conversion (cyc2ns), whether sched_clock
 * is stable and local_clock()'s offset are all kept in symbols the kernel
 * does not export.  kallsyms_lookup_name() itself stopped being exported in
 * 5.7; like lttng-modules we find its address by registering a kprobe on
 * it and reading back the address the kprobe resolved, then unregister.
 *
 * Everything found here is optional: a missing symbol only means the
 * conversion is reported as derived instead of exact (see conv.c), never
 * a failure to load.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kprobes.h>
#include <linux/module.h>
#include <linux/string.h>

#include "hgclock_internal.h"

typedef unsigned long (*kallsyms_lookup_name_t)(const char *name);

/* Written once in hgclock_ksym_init(), read-only afterwards. */
static kallsyms_lookup_name_t hgclock_kallsyms_lookup_name;
static int (*hgclock_sched_clock_stable_fn)(void);

int hgclock_ksym_init(void)
{
	struct kprobe kp = { .symbol_name = "kallsyms_lookup_name" };
	int ret;

#ifdef CONFIG_KPROBES
	ret = register_kprobe(&kp);
	if (ret == 0) {
		hgclock_kallsyms_lookup_name = (kallsyms_lookup_name_t)kp.addr;
		unregister_kprobe(&kp);
	}
#else
	ret = -EOPNOTSUPP;
#endif
	if (!hgclock_kallsyms_lookup_name) {
		pr_info("kallsyms lookup unavailable (%d): conversions will be derived, not exact\n",
			ret);
		return 0;
	}
	hgclock_sched_clock_stable_fn =
		(int (*)(void))hgclock_ksym("sched_clock_stable");
	return 0;
}

/* Returns 0 when the symbol (or the lookup itself) is unavailable. */
unsigned long hgclock_ksym(const char *name)
{
	if (!hgclock_kallsyms_lookup_name)
		return 0;
	return hgclock_kallsyms_lookup_name(name);
}

/*
 * sched_clock_stable() says whether sched_clock() agrees across CPUs, in
 * which case local_clock() is sched_clock() plus a constant.  Without the
 * symbol we can only say what the TSC says.
 */
bool hgclock_sched_clock_stable(void)
{
	if (hgclock_sched_clock_stable_fn)
		return hgclock_sched_clock_stable_fn() != 0;
	return !check_tsc_unstable();
}

