// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock: the per-CPU TSC to sched_clock conversion.
 *
 * sched_clock() is linear in the TSC on each CPU, but the kernel keeps the
 * parameters where modules cannot reach them:
 *
 *  - native TSC sched_clock: the per-CPU cyc2ns latch in
 *    arch/x86/kernel/tsc.c (cyc2ns_read_begin() is not exported);
 *  - kvm-clock in a KVM guest: the per-vCPU pvclock page (hv_clock_per_cpu
 *    is exported) minus kvm_sched_clock_offset (static).
 *
 * We find them through kallsyms (ksym.c), as data only (IBT: the module
 * never calls a function it found by name), and then prove them: a source
 * is used only if the formula, read through the same latch or version
 * protocol the kernel uses, reproduces sched_clock() inside a tight TSC
 * bracket on every one of 64 tries.  Without a proven
 * source and with a TSC-based sched_clock we fall back to deriving the
 * conversion: mult/shift as set_cyc2ns_scale() computes them from
 * tsc_khz, the offset fitted from bracketed readings, with its bound.
 *
 * hgclock_conv_init() runs once at load; hgclock_conv_read() runs on the
 * CPU it describes with interrupts disabled.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/clocksource.h>
#include <linux/math64.h>
#include <linux/module.h>
#include <linux/percpu.h>
#include <linux/sched/clock.h>
#include <linux/smp.h>
#include <linux/trace_clock.h>
#include <asm/hypervisor.h>
#include <asm/pvclock.h>
#include <asm/kvmclock.h>
#include <asm/tsc.h>

#include "hgclock_internal.h"

/*
 * Layout of struct cyc2ns in arch/x86/kernel/tsc.c (6.1 and 6.12):
 * two cyc2ns_data slots and the latch sequence (seqcount_latch_t, whose
 * first member is the unsigned sequence).  Only ever read; the bracket
 * check in hgclock_conv_init() refuses it if the layout ever differs.
 */
struct hg_cyc2ns_data {
	u32 mul;
	u32 shift;
	u64 offset;
};

struct hg_cyc2ns {
	struct hg_cyc2ns_data data[2];
	unsigned int seq;
};

static char *conversion = "auto";
module_param(conversion, charp, 0444);
MODULE_PARM_DESC(conversion,
		 "auto (prove cyc2ns/kvm-clock, else derive) or derived (always fit)");

/* Set once by hgclock_conv_init(), read-only afterwards. */
static enum hgclock_conv_source hg_source;
static struct hg_cyc2ns __percpu *hg_cyc2ns __ro_after_init;
static u64 *hg_sched_clock_offset __ro_after_init;
static u64 *hg_kvm_sched_clock_offset __ro_after_init;
static u32 hg_derived_mult __ro_after_init, hg_derived_shift __ro_after_init;

/* hv_clock_per_cpu: exported by arch/x86/kernel/kvmclock.c */

u64 hgclock_conv_apply(const struct hgclock_conversion *conv, u64 tsc)
{
	u64 delta = tsc - conv->tsc_base;

	if (conv->pre_shift >= 0)
		delta <<= conv->pre_shift;
	else
		delta >>= -conv->pre_shift;
	return conv->offset_ns + mul_u64_u32_shr(delta, conv->mult, conv->shift);
}

/* The latch protocol of cyc2ns_read_begin(), on any CPU's copy. */
static void hg_read_cyc2ns(int cpu, struct hgclock_conversion *conv)
{
	struct hg_cyc2ns *c2n = per_cpu_ptr(hg_cyc2ns, cpu);
	struct hg_cyc2ns_data data;
	unsigned int seq;

	do {
		seq = READ_ONCE(c2n->seq);
		/* The sequence before the copy it selects (the latch writer's smp_wmb). */
		smp_rmb();
		data = c2n->data[seq & 1];
		/* The copy before the sequence we compare it with. */
		smp_rmb();
	} while (unlikely(seq != READ_ONCE(c2n->seq)));

	conv->tsc_base = 0;
	conv->pre_shift = 0;
	conv->mult = data.mul;
	conv->shift = data.shift;
	conv->offset_ns = data.offset;
}

/* pvclock's version protocol (odd: update in progress) on a vCPU's page. */
static bool hg_read_pvclock(int cpu, struct hgclock_conversion *conv)
{
	struct pvclock_vsyscall_time_info *pvti = per_cpu(hv_clock_per_cpu, cpu);
	struct pvclock_vcpu_time_info *src;
	u64 tsc_timestamp, system_time;
	u32 version, mul;
	s8 shift;
	u8 flags;

	if (!pvti)
		return false;
	src = &pvti->pvti;
	do {
		version = READ_ONCE(src->version);
		/* The version before the fields (pvclock's writer protocol). */
		smp_rmb();
		tsc_timestamp = READ_ONCE(src->tsc_timestamp);
		system_time = READ_ONCE(src->system_time);
		mul = READ_ONCE(src->tsc_to_system_mul);
		shift = READ_ONCE(src->tsc_shift);
		flags = READ_ONCE(src->flags);
		/* The fields before the version we compare with. */
		smp_rmb();
	} while (unlikely((version & 1) || version != READ_ONCE(src->version)));

	conv->tsc_base = tsc_timestamp;
	conv->pre_shift = shift;
	conv->mult = mul;
	conv->shift = 32;
	conv->offset_ns = system_time - READ_ONCE(*hg_kvm_sched_clock_offset);
	/*
	 * Without the stable bit pvclock_clocksource_read() clamps to a
	 * global last value: then the formula is only an upper estimate.
	 */
	return flags & PVCLOCK_TSC_STABLE_BIT;
}

/*
 * Fit the offset of a TSC-based sched_clock whose mult/shift we know:
 * each bracket t1 <= t <= t2 around s = offset + f(t) gives
 * s - f(t2) <= offset <= s - f(t1); intersect a few of them.
 */
static bool hg_derive(struct hgclock_conversion *conv)
{
	s64 lo = S64_MIN, hi = S64_MAX;
	int i;

	conv->tsc_base = 0;
	conv->pre_shift = 0;
	conv->mult = hg_derived_mult;
	conv->shift = hg_derived_shift;
	for (i = 0; i < 16; i++) {
		u64 t1, t2, s;

		t1 = rdtsc_ordered();
		s = trace_clock_local();
		t2 = rdtsc_ordered();
		lo = max_t(s64, lo, s - mul_u64_u32_shr(t2, conv->mult, conv->shift));
		hi = min_t(s64, hi, s - mul_u64_u32_shr(t1, conv->mult, conv->shift));
	}
	/* Empty intersection: sched_clock is not this linear function. */
	if (hi < lo)
		return false;
	conv->offset_ns = lo + (hi - lo) / 2;
	conv->bound_ns = (hi - lo) / 2 + 1;
	return true;
}

/*
 * Fill @conv for the current CPU.  Interrupts disabled; the caller runs on
 * the CPU in question.
 */
void hgclock_conv_read(struct hgclock_conversion *conv)
{
	int cpu = smp_processor_id();
	bool exact = false;

	memset(conv, 0, sizeof(*conv));
	switch (hg_source) {
	case HGCLOCK_SRC_CYC2NS:
		hg_read_cyc2ns(cpu, conv);
		exact = true;
		break;
	case HGCLOCK_SRC_PVCLOCK:
		exact = hg_read_pvclock(cpu, conv);
		conv->flags |= HGCLOCK_CONV_PVCLOCK;
		break;
	case HGCLOCK_SRC_DERIVED:
		if (!hg_derive(conv)) {
			memset(conv, 0, sizeof(*conv));
			return;
		}
		break;
	default:
		return;
	}
	conv->flags |= HGCLOCK_CONV_VALID;
	if (exact)
		conv->flags |= HGCLOCK_CONV_EXACT;
	else if (hg_source == HGCLOCK_SRC_DERIVED)
		conv->flags |= HGCLOCK_CONV_DERIVED;
	/*
	 * kvm-clock without the stable bit: the parameters as KVM published
	 * them, with no bound we can state (VALID alone).
	 */
	if (hgclock_sched_clock_stable()) {
		conv->flags |= HGCLOCK_CONV_SCHED_CLOCK_STABLE;
		if (hg_sched_clock_offset) {
			conv->local_offset_ns = READ_ONCE(*hg_sched_clock_offset);
			conv->flags |= HGCLOCK_CONV_LOCAL_OFFSET;
		}
	}
}

enum hgclock_conv_source hgclock_conv_source(void)
{
	return hg_source;
}

/*
 * Does @source's formula describe sched_clock() on this CPU?  Every one of
 * 64 brackets t1 <= t <= t2 around a sched_clock() reading must hold: a
 * wrong layout, field or offset gives values off by far more than the
 * few nanoseconds a bracket spans on hardware.  Interrupts disabled.
 */
static bool hg_verify(enum hgclock_conv_source source)
{
	struct hgclock_conversion conv;
	int cpu = smp_processor_id();
	int i;

	for (i = 0; i < 64; i++) {
		u64 t1, t2, s;

		memset(&conv, 0, sizeof(conv));
		if (source == HGCLOCK_SRC_CYC2NS)
			hg_read_cyc2ns(cpu, &conv);
		else
			hg_read_pvclock(cpu, &conv);
		t1 = rdtsc_ordered();
		s = trace_clock_local();
		t2 = rdtsc_ordered();
		if (hgclock_conv_apply(&conv, t1) > s ||
		    hgclock_conv_apply(&conv, t2) < s)
			return false;
	}
	return true;
}

/*
 * Only a TSC-based sched_clock can be derived: a fit whose brackets do not
 * intersect says sched_clock is something else (jiffies, a paravirt clock
 * we could not reach).  Interrupts disabled.
 */
static bool hg_derive_works(void)
{
	struct hgclock_conversion conv;
	int i;

	if (!boot_cpu_has(X86_FEATURE_TSC) || !tsc_khz)
		return false;
	for (i = 0; i < 4; i++)
		if (!hg_derive(&conv))
			return false;
	return true;
}

static void __init hg_choose_source(void)
{
	if (hg_cyc2ns && hg_verify(HGCLOCK_SRC_CYC2NS)) {
		hg_source = HGCLOCK_SRC_CYC2NS;
		return;
	}
	if (hg_kvm_sched_clock_offset && this_cpu_read(hv_clock_per_cpu) &&
	    hg_verify(HGCLOCK_SRC_PVCLOCK)) {
		hg_source = HGCLOCK_SRC_PVCLOCK;
		return;
	}
	if (hg_derive_works())
		hg_source = HGCLOCK_SRC_DERIVED;
}

void __init hgclock_conv_init(void)
{
	static const char * const names[] = {
		[HGCLOCK_SRC_NONE] = "none",
		[HGCLOCK_SRC_CYC2NS] = "cyc2ns (exact)",
		[HGCLOCK_SRC_PVCLOCK] = "kvm-clock",
		[HGCLOCK_SRC_DERIVED] = "derived from tsc_khz (bounded)",
	};

	/*
	 * set_cyc2ns_scale()'s computation, for the derived fallback.  Only
	 * with a calibrated TSC: clocks_calc_mult_shift() divides by tsc_khz,
	 * which is 0 when calibration failed, and then there is no derived
	 * conversion (hg_derive_works() refuses it).
	 */
	if (tsc_khz) {
		clocks_calc_mult_shift(&hg_derived_mult, &hg_derived_shift,
				       tsc_khz, NSEC_PER_MSEC, 0);
		if (hg_derived_shift == 32) {
			hg_derived_shift = 31;
			hg_derived_mult >>= 1;
		}
	}

	if (strcmp(conversion, "derived")) {
		hg_cyc2ns = (struct hg_cyc2ns __percpu *)hgclock_ksym_data("cyc2ns");
		hg_kvm_sched_clock_offset = hgclock_ksym_data("kvm_sched_clock_offset");
	}
	hg_sched_clock_offset = hgclock_ksym_data("__sched_clock_offset");

	local_irq_disable();
	if (strcmp(conversion, "derived"))
		hg_choose_source();
	else if (hg_derive_works())
		hg_source = HGCLOCK_SRC_DERIVED;
	local_irq_enable();
	pr_info("sched_clock conversion: %s\n", names[hg_source]);
}
