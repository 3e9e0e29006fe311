// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock: reading the kernel's trace clocks from user space.
 *
 * HGCLOCK_IOC_READ_CLOCK is the CLOCK_PERF that mainline never merged: it
 * returns, read together on one CPU with interrupts off, the very clocks
 * ftrace stamps its events with (trace_clock_local() for "local",
 * trace_clock() for "perf"), bracketed by two ordered TSC reads, plus the
 * POSIX clocks.  HGCLOCK_IOC_GET_INFO describes the clock setup.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cpu.h>
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

static_assert(sizeof(struct hgclock_info) == HGCLOCK_INFO_SIZE_VER0);
static_assert(sizeof(struct hgclock_clock_sample) == 64);
static_assert(sizeof(struct hgclock_read_clock) == 120);

/* Largest argument we accept from a newer user space. */
#define HGCLOCK_MAX_ARG_SIZE	4096

/*
 * Runs with interrupts disabled, either from smp_call_function_single()
 * (IPI context on the target CPU, or directly when the target is the
 * calling CPU) or under local_irq_save().  The order of the reads is ABI:
 * see struct hgclock_clock_sample.
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

static void hgclock_sample_ipi(void *info)
{
	hgclock_sample_this_cpu(info);
}

/*
 * Read on @cpu.  smp_call_function_single() runs the function locally with
 * interrupts off when @cpu is the current CPU, and fails with -ENXIO when
 * @cpu is offline; the caller holds no lock.
 */
static int hgclock_sample_on(unsigned int cpu, struct hgclock_clock_sample *s)
{
	if (cpu >= nr_cpu_ids || !cpu_online(cpu))
		return -EINVAL;
	if (smp_call_function_single(cpu, hgclock_sample_ipi, s, 1))
		return -EINVAL;
	return 0;
}

/*
 * Every online CPU in one call.  cpus_read_lock() keeps the online mask
 * stable between counting and sampling, so the count we report is the
 * count we fill.
 */
static long hgclock_read_all_cpus(struct hgclock_read_clock *req)
{
	struct hgclock_clock_sample *samples;
	unsigned int cpu, nr_online, i = 0;
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
	for_each_online_cpu(cpu) {
		ret = smp_call_function_single(cpu, hgclock_sample_ipi,
					       &samples[i], 1);
		if (ret)
			break;
		i++;
	}
	cpus_read_unlock();

	if (!ret && copy_to_user(u64_to_user_ptr(req->samples_ptr), samples,
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

long hgclock_ioctl_read_clock(void __user *uarg)
{
	struct hgclock_read_clock req;
	long ret;

	if (copy_from_user(&req, uarg, sizeof(req)))
		return -EFAULT;
	if (req.size != sizeof(req))
		return -EINVAL;
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
		ret = hgclock_read_all_cpus(&req);
		/* ENOSPC still reports the needed count. */
		if (ret && ret != -ENOSPC)
			return ret;
	} else if (req.flags & HGCLOCK_READ_CPU) {
		ret = hgclock_sample_on(req.cpu, &req.sample);
		if (ret)
			return ret;
		req.nr_samples = 1;
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
 * The clocksource core keeps the current clocksource in a static pointer
 * guarded by a mutex we cannot take; sysfs reads it under that mutex.
 * Process context only.  Leaves @buf empty when sysfs is not reachable.
 */
static void hgclock_read_clocksource(char *buf, size_t len)
{
	static const char path[] =
		"/sys/devices/system/clocksource/clocksource0/current_clocksource";
	struct file *filp;
	loff_t pos = 0;
	ssize_t n;

	buf[0] = '\0';
	filp = filp_open(path, O_RDONLY, 0);
	if (IS_ERR(filp))
		return;
	n = kernel_read(filp, buf, len - 1, &pos);
	filp_close(filp, NULL);
	if (n <= 0) {
		buf[0] = '\0';
		return;
	}
	buf[n] = '\0';
	strim(buf);
}

/* CPUID 0x40000000 vendor signature, as KVM, Xen, Hyper-V and QEMU set it. */
static void hgclock_read_hypervisor(char *buf, size_t len)
{
	unsigned int eax, sig[3];

	memset(buf, 0, len);
	if (!boot_cpu_has(X86_FEATURE_HYPERVISOR))
		return;
	cpuid(0x40000000, &eax, &sig[0], &sig[1], &sig[2]);
	memcpy(buf, sig, min(len - 1, sizeof(sig)));
}

/*
 * Whether KVM is loaded here: kvm.ko exports kvm_get_kvm.  symbol_get
 * pins the module for the instant we look; we drop it at once.
 */
static bool hgclock_kvm_loaded(void)
{
	void *sym = __symbol_get("kvm_get_kvm");

	if (!sym)
		return false;
	__symbol_put("kvm_get_kvm");
	return true;
}

long hgclock_ioctl_get_info(void __user *uarg)
{
	struct hgclock_info info;
	__u32 usize, flags;
	bool guest, host;

	if (get_user(usize, (__u32 __user *)uarg))
		return -EFAULT;
	if (usize < HGCLOCK_INFO_SIZE_VER0 || usize > HGCLOCK_MAX_ARG_SIZE)
		return -EINVAL;
	if (get_user(flags, (__u32 __user *)uarg + 1))
		return -EFAULT;
	if (flags)
		return -EINVAL;

	memset(&info, 0, sizeof(info));
	info.size = min_t(__u32, usize, sizeof(info));
	info.abi_major = HGCLOCK_ABI_MAJOR;
	info.abi_minor = HGCLOCK_ABI_MINOR;
	info.nr_cpu_ids = nr_cpu_ids;
	info.nr_online_cpus = num_online_cpus();
	info.tsc_khz = tsc_khz;
	info.features = HGCLOCK_FEAT_READ_CLOCK | HGCLOCK_FEAT_READ_ALL_CPUS |
			HGCLOCK_FEAT_RING | HGCLOCK_FEAT_TRACK;
	if (hgclock_track_kvm_attached())
		info.features |= HGCLOCK_FEAT_KVM_TRACK;
	if (hgclock_track_exit_attached())
		info.features |= HGCLOCK_FEAT_EXIT_TRACK;
	if (hgclock_track_pvclock_attached())
		info.features |= HGCLOCK_FEAT_PVCLOCK_TRACK;
	if (hgclock_pair_available())
		info.features |= HGCLOCK_FEAT_EXIT_PAIR;
	if (hgclock_conv_source() != HGCLOCK_SRC_NONE)
		info.features |= HGCLOCK_FEAT_USER_CLOCK;
	if (hgclock_conv_source() == HGCLOCK_SRC_PVCLOCK)
		info.clock_flags |= HGCLOCK_CLK_PVCLOCK_SCHED_CLOCK;
	else if (hgclock_conv_source() != HGCLOCK_SRC_NONE)
		info.clock_flags |= HGCLOCK_CLK_NATIVE_SCHED_CLOCK;
	hgclock_ring_fill_info(&info);
	info.snapshot_period_ns = hgclock_snapshot_period();

	if (check_tsc_unstable())
		info.clock_flags |= HGCLOCK_CLK_TSC_UNSTABLE;
	if (hgclock_sched_clock_stable())
		info.clock_flags |= HGCLOCK_CLK_SCHED_CLOCK_STABLE;
	if (boot_cpu_has(X86_FEATURE_CONSTANT_TSC))
		info.clock_flags |= HGCLOCK_CLK_CONSTANT_TSC;
	if (boot_cpu_has(X86_FEATURE_NONSTOP_TSC))
		info.clock_flags |= HGCLOCK_CLK_NONSTOP_TSC;

	guest = boot_cpu_has(X86_FEATURE_HYPERVISOR);
	host = hgclock_kvm_loaded();
	if (guest && host)
		info.role = HGCLOCK_ROLE_NESTED;
	else if (guest)
		info.role = HGCLOCK_ROLE_GUEST;
	else if (host)
		info.role = HGCLOCK_ROLE_HOST;
	else
		info.role = HGCLOCK_ROLE_BARE;

	hgclock_read_clocksource(info.clocksource, sizeof(info.clocksource));
	hgclock_read_hypervisor(info.hypervisor, sizeof(info.hypervisor));

	/*
	 * A larger caller buffer than ours: we write only what we know and
	 * say so in info.size, the caller's tail is left as it was.
	 */
	if (copy_to_user(uarg, &info, info.size))
		return -EFAULT;
	return 0;
}
