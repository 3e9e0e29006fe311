// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock: exit pairing, the guest's half.
 *
 * A guest cannot read the host's clock, but it can make the host read
 * it at a moment the guest brackets: CPUID always exits to the
 * hypervisor.  With interrupts off we read the TSC and sched_clock,
 * execute CPUID with a leaf only hgclock uses (HGCLOCK_PAIR_LEAF(key),
 * ECX = a sequence number), and read both again.  On a KVM host running
 * hgclock, the kvm_cpuid tracepoint runs in the vCPU thread between that
 * exit and the next entry, and track.c writes the host's TSC and
 * sched_clock there into an EXIT_HOST record carrying the same key and
 * sequence number.  The host's reading lies between the guest's two, so
 * each pairing bounds the guest-to-host mapping by the time the exit
 * took as the guest saw it (microseconds), not by a network round trip.
 *
 * The records travel with the guest's ring (the agent forwards it); the
 * host side needs nothing from us but the leaf.  The key, random per
 * module load, tells our pairings from a guest process executing the same
 * leaf by chance (CPUID is not privileged).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/cpu.h>
#include <linux/random.h>
#include <linux/smp.h>
#include <linux/trace_clock.h>
#include <linux/uaccess.h>
#include <asm/cpufeature.h>
#include <asm/processor.h>
#include <asm/msr.h>

#include "hgclock_internal.h"

static_assert(sizeof(struct hgclock_rec_exit_pair) == 64);
static_assert(sizeof(struct hgclock_rec_exit_host) == 48);
static_assert(sizeof(struct hgclock_exit_pair) == 32);

static u32 hg_pair_key;
static atomic_t hg_pair_seq = ATOMIC_INIT(0);

bool hgclock_pair_available(void)
{
	return boot_cpu_has(X86_FEATURE_HYPERVISOR);
}

struct hg_pair_req {
	atomic_t nr_written;
};

/* On the target CPU with interrupts off (IPI, or local with irqs off). */
static void hg_pair_this_cpu(void *info)
{
	struct hg_pair_req *req = info;
	struct hgclock_rec_exit_pair rec;
	unsigned int eax, ebx, ecx, edx;

	memset(&rec, 0, sizeof(rec));
	rec.seq = (u32)atomic_inc_return(&hg_pair_seq);
	rec.key = hg_pair_key;
	eax = HGCLOCK_PAIR_LEAF(hg_pair_key);
	ecx = rec.seq;
	rec.tsc_before = rdtsc_ordered();
	rec.sched_clock_before_ns = trace_clock_local();
	/* Serialising, and it exits: the host reads its clocks in there. */
	native_cpuid(&eax, &ebx, &ecx, &edx);
	rec.sched_clock_after_ns = trace_clock_local();
	rec.tsc_after = rdtsc_ordered();
	hgclock_rec_init(&rec.hdr, HGCLOCK_REC_EXIT_PAIR, sizeof(rec));
	if (hgclock_ring_write(&rec.hdr))
		atomic_inc(&req->nr_written);
}

long hgclock_ioctl_exit_pair(void __user *uarg)
{
	struct hgclock_exit_pair req;
	struct hg_pair_req one = { .nr_written = ATOMIC_INIT(0) };
	unsigned int cpu;
	long ret = 0;

	if (copy_from_user(&req, uarg, sizeof(req)))
		return -EFAULT;
	if (req.size != sizeof(req) || (req.flags & ~HGCLOCK_READ_FLAGS_ALL) ||
	    req.flags == HGCLOCK_READ_FLAGS_ALL || req.reserved[0] || req.reserved[1] ||
	    req.nr_written || (!(req.flags & HGCLOCK_READ_CPU) && req.cpu))
		return -EINVAL;
	if (!hgclock_pair_available())
		return -ENODEV;

	/* The online mask holds still while we walk it. */
	cpus_read_lock();
	if (req.flags & HGCLOCK_READ_ALL_CPUS) {
		for_each_online_cpu(cpu)
			smp_call_function_single(cpu, hg_pair_this_cpu, &one, 1);
	} else if (req.flags & HGCLOCK_READ_CPU) {
		if (req.cpu >= nr_cpu_ids || !cpu_online(req.cpu))
			ret = -EINVAL;
		else
			smp_call_function_single(req.cpu, hg_pair_this_cpu, &one, 1);
	} else {
		unsigned long irqflags;

		local_irq_save(irqflags);
		hg_pair_this_cpu(&one);
		local_irq_restore(irqflags);
	}
	cpus_read_unlock();
	req.nr_written = atomic_read(&one.nr_written);
	if (!ret && copy_to_user(uarg, &req, sizeof(req)))
		ret = -EFAULT;
	return ret;
}

void hgclock_pair_init(void)
{
	hg_pair_key = get_random_u32() & 0xffff;
}
