// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock: reading the kernel's trace clocks from user space.
 *
 * HGCLOCK_IOC_READ_CLOCK is the CLOCK_PERF that mainline never merged: it
 * returns, read together on one CPU with interrupts off, the very clocks
 * ftrace stamps its events with (trace_clock_local() for "local",
 * trace_clock() for "perf"), bracketed by two ordered TSC reads, plus the
 * POSIX clocks.  Also what GET_INFO (main.c) says of the clock setup:
 * the clocksource and hypervisor names.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/clocksource.h>
#include <linux/cpu.h>
#include <linux/jiffies.h>
#include <linux/spinlock.h>
#include <linux/uaccess.h>
#include <linux/cpumask.h>
#include <linux/fs.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/smp.h>
#include <linux/string.h>
#include <linux/timekeeping.h>
#include <linux/trace_clock.h>
#include <linux/uaccess.h>
#include <asm/cpufeature.h>
#include <asm/hypervisor.h>
#include <asm/msr.h>
#include <asm/processor.h>
#include <asm/tsc.h>

#include "hgclock_internal.h"

static_assert(sizeof(struct hgclock_clock_sample) == 64);
static_assert(sizeof(struct hgclock_read_clock) == HGCLOCK_READ_CLOCK_SIZE_VER0);

/*
 * Runs with interrupts disabled: in the interrupt of a cross-CPU call
 * (xcall.c; directly when the target is the calling CPU) or under
 * local_irq_save().  The order of the reads is ABI: see struct
 * hgclock_clock_sample.
 */
void hgclock_sample_this_cpu(struct hgclock_clock_sample *sample)
{
	sample->tsc_before = rdtsc_ordered();
	sample->sched_clock_ns = trace_clock_local();
	sample->local_clock_ns = trace_clock();
	sample->tsc_after = rdtsc_ordered();
	sample->mono_ns = ktime_get_ns();
	sample->mono_raw_ns = ktime_get_raw_ns();
	sample->boot_ns = ktime_get_boottime_ns();
	sample->cpu = smp_processor_id();
	sample->flags = HGCLOCK_SAMPLE_VALID;
}

/* The cross-CPU call's handler: into its slot, never the caller's memory. */
static void hgclock_sample_xcall(void *info)
{
	struct hgclock_xcall *xc = info;

	hgclock_sample_this_cpu(hgclock_xcall_result(xc));
	hgclock_xcall_answer(xc);
}

/*
 * Read on @cpu, bounded (xcall.c): -ETIMEDOUT if it has not answered in
 * HGCLOCK_XCALL_TIMEOUT_MS.  cpus_read_lock() keeps @cpu online while
 * the call is in flight.
 */
static int hgclock_sample_on(u32 *cpu, struct hgclock_clock_sample *s)
{
	int ret;

	cpus_read_lock();
	if (*cpu >= nr_cpu_ids || !cpu_online(*cpu))
		ret = -EINVAL;
	else
		ret = hgclock_xcall(cpumask_of(*cpu), hgclock_sample_xcall, 0,
				    s, sizeof(*s), cpu);
	cpus_read_unlock();
	return ret;
}

/*
 * Every online CPU in one call.  cpus_read_lock() keeps the online mask
 * stable between counting and sampling, so the count we report is the
 * count we fill.  -ETIMEDOUT: req->cpu is the first CPU that did not
 * answer, and the samples of those that did are written (the others
 * zeroed: no HGCLOCK_SAMPLE_VALID).
 */
static long hgclock_read_all_cpus(struct hgclock_read_clock *req)
{
	struct hgclock_clock_sample *samples;
	unsigned int nr_online;
	long ret = 0;

	cpus_read_lock();
	nr_online = num_online_cpus();
	if (req->nr_samples < nr_online) {
		req->nr_samples = nr_online;
		ret = -ENOSPC;
		goto out_unlock;
	}
	samples = kcalloc(nr_online, sizeof(*samples), GFP_KERNEL);
	if (!samples) {
		ret = -ENOMEM;
		goto out_unlock;
	}
	ret = hgclock_xcall(cpu_online_mask, hgclock_sample_xcall, 0, samples,
			    sizeof(*samples), &req->cpu);
	cpus_read_unlock();

	if ((!ret || ret == -ETIMEDOUT) &&
	    copy_to_user(u64_to_user_ptr(req->samples_ptr), samples,
			 array_size(nr_online, sizeof(*samples))))
		ret = -EFAULT;
	kfree(samples);
	req->nr_samples = nr_online;
	return ret;

out_unlock:
	cpus_read_unlock();
	return ret;
}

static bool hgclock_reserved_zero(const __u64 *words, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (words[i])
			return false;
	return true;
}

long hgclock_ioctl_read_clock(struct file *file, void __user *uarg)
{
	struct hgclock_read_clock req;
	long ret;

	ret = hgclock_copy_args(&req, uarg);
	if (ret)
		return ret;
	if (req.flags & ~HGCLOCK_READ_FLAGS_ALL)
		return -EINVAL;
	if ((req.flags & HGCLOCK_READ_FLAGS_ALL) == HGCLOCK_READ_FLAGS_ALL)
		return -EINVAL;
	if (!hgclock_reserved_zero(req.reserved, ARRAY_SIZE(req.reserved)))
		return -EINVAL;
	if (!(req.flags & HGCLOCK_READ_CPU) && req.cpu)
		return -EINVAL;
	/* nr_samples is output-only here, so a struct can be reused as is. */
	if (!(req.flags & HGCLOCK_READ_ALL_CPUS) && req.samples_ptr)
		return -EINVAL;

	/* Output only: whatever the caller left there is overwritten. */
	memset(&req.sample, 0, sizeof(req.sample));

	if (req.flags & HGCLOCK_READ_ALL_CPUS) {
		ret = hgclock_cross_cpu_budget(file, num_online_cpus());
		if (ret)
			return ret;
		ret = hgclock_read_all_cpus(&req);
		/* ENOSPC still reports the needed count, ETIMEDOUT the CPU. */
		if (ret && ret != -ENOSPC && ret != -ETIMEDOUT)
			return ret;
	} else if (req.flags & HGCLOCK_READ_CPU) {
		ret = hgclock_cross_cpu_budget(file, 1);
		if (ret)
			return ret;
		ret = hgclock_sample_on(&req.cpu, &req.sample);
		if (ret && ret != -ETIMEDOUT)
			return ret;
		req.nr_samples = ret ? 0 : 1;
	} else {
		unsigned long irqflags;

		local_irq_save(irqflags);
		hgclock_sample_this_cpu(&req.sample);
		local_irq_restore(irqflags);
		req.nr_samples = 1;
		ret = 0;
	}

	if (copy_to_user(uarg, &req, sizeof(req)))
		return -EFAULT;
	return ret;
}

/*
 * The current clocksource's name.  The clocksource core keeps the
 * current clocksource in a static pointer (curr_clocksource), found at
 * load as data (ksym.c) and read here without its mutex: the pointer is
 * one aligned word, and a clocksource is freed only if a module provided
 * it, so the name is copied with a no-fault copy that at worst yields a
 * wrong or empty string, never a fault.  Not a path in the file system:
 * sysfs as the caller's mount namespace shows it may be absent or forged
 * inside a container.  Empty when the symbol is unknown.
 */
static struct clocksource **hg_curr_clocksource __ro_after_init;

void __init hgclock_clock_init(void)
{
	hg_curr_clocksource = hgclock_ksym_data("curr_clocksource");
}

void hgclock_read_clocksource(char *buf, size_t len)
{
	struct clocksource *cs;
	const char *name;
	size_t i;

	memset(buf, 0, len);
	if (!hg_curr_clocksource)
		return;
	cs = READ_ONCE(*hg_curr_clocksource);
	if (!cs || copy_from_kernel_nofault(&name, &cs->name, sizeof(name)) ||
	    !name)
		return;
	/* Byte by byte: a name may end just before an unmapped page. */
	for (i = 0; i + 1 < len; i++) {
		if (copy_from_kernel_nofault(&buf[i], name + i, 1)) {
			memset(buf, 0, len);
			return;
		}
		if (!buf[i])
			break;
	}
	buf[len - 1] = '\0';
}

/* CPUID 0x40000000 vendor signature, as KVM, Xen, Hyper-V and QEMU set it. */
void hgclock_read_hypervisor(char *buf, size_t len)
{
	unsigned int eax, sig[3];

	memset(buf, 0, len);
	if (!boot_cpu_has(X86_FEATURE_HYPERVISOR))
		return;
	cpuid(0x40000000, &eax, &sig[0], &sig[1], &sig[2]);
	memcpy(buf, sig, min(len - 1, sizeof(sig)));
}

