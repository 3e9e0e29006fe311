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
#include <linux/completion.h>
#include <linux/jiffies.h>
#include <linux/refcount.h>
#include <linux/slab.h>
#include <linux/workqueue.h>
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
static_assert(sizeof(struct hgclock_exit_pair) == HGCLOCK_EXIT_PAIR_SIZE_VER0);

static u32 hg_pair_key;
static atomic_t hg_pair_seq = ATOMIC_INIT(0);

/*
 * The pairings' own workqueue (per-CPU, high priority), not a system one:
 * a caller that gave up waiting leaves its item queued, and only a
 * workqueue of ours can be drained before the module's code and the
 * rings the item writes to are freed (hgclock_pair_exit()).
 */
static struct workqueue_struct *hg_pair_wq;

bool hgclock_pair_available(void)
{
	return boot_cpu_has(X86_FEATURE_HYPERVISOR);
}

/*
 * Interrupts off, on the CPU it describes.  Returns whether the ring took
 * the record.
 */
static bool hg_pair_this_cpu(void)
{
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
	return hgclock_ring_write(&rec.hdr);
}

/*
 * A pairing on another CPU runs in a work item bound to it, and the
 * caller sleeps, with a deadline, until it is done.  Not an IPI with
 * smp_call_function_single(..., wait=1): that spins with preemption off
 * until the target answers, and a vCPU the host does not run answers
 * when the host runs it again (seconds on a busy host), which is a soft
 * lockup here.  Lifetime: the caller and the work item each hold a
 * reference; whoever drops the last frees it, so a caller that gave up
 * waiting may return while the work item is still queued (on a CPU that
 * does not run, or that a real-time task keeps to itself).  The late
 * item then pairs when it runs (a record nobody waits for, still valid);
 * hg_pair_wq is drained at unload, so it never runs after the module.
 */
struct hg_pair_work {
	struct work_struct work;
	struct completion done;
	refcount_t ref;
	bool written;
};

static void hg_pair_work_put(struct hg_pair_work *pw)
{
	if (refcount_dec_and_test(&pw->ref))
		kfree(pw);
}

static void hg_pair_work_fn(struct work_struct *work)
{
	struct hg_pair_work *pw = container_of(work, struct hg_pair_work, work);
	unsigned long irqflags;

	local_irq_save(irqflags);
	pw->written = hg_pair_this_cpu();
	local_irq_restore(irqflags);
	complete(&pw->done);
	hg_pair_work_put(pw);
}

/*
 * Pair on each CPU of @cpus (online, cpus_read_lock() held).  Returns 0,
 * or -ETIMEDOUT with *@late_cpu the first CPU that had not answered by
 * the deadline, or -ENOMEM; *@nr_written counts the records written.
 */
static int hg_pair_on_cpus(const struct cpumask *cpus, u32 *nr_written,
			   u32 *late_cpu)
{
	unsigned long deadline = jiffies + HGCLOCK_EXIT_PAIR_TIMEOUT_MS * HZ / 1000;
	struct hg_pair_work **pws;
	unsigned int cpu;
	int ret = 0;

	pws = kcalloc(nr_cpu_ids, sizeof(*pws), GFP_KERNEL);
	if (!pws)
		return -ENOMEM;
	for_each_cpu(cpu, cpus) {
		struct hg_pair_work *pw = kzalloc(sizeof(*pw), GFP_KERNEL);

		if (!pw) {
			ret = -ENOMEM;
			break;
		}
		INIT_WORK(&pw->work, hg_pair_work_fn);
		init_completion(&pw->done);
		refcount_set(&pw->ref, 2);
		pws[cpu] = pw;
		queue_work_on(cpu, hg_pair_wq, &pw->work);
	}
	for_each_cpu(cpu, cpus) {
		struct hg_pair_work *pw = pws[cpu];
		long left = (long)(deadline - jiffies);
		bool done;

		if (!pw)
			continue;
		/* Past a failure, only what is done already is counted. */
		if (ret) {
			done = try_wait_for_completion(&pw->done);
		} else {
			done = left > 0 && wait_for_completion_timeout(&pw->done, left);
			if (!done) {
				ret = -ETIMEDOUT;
				*late_cpu = cpu;
			}
		}
		/* Only a completed item's result is ours to read. */
		if (done && pw->written)
			(*nr_written)++;
		hg_pair_work_put(pw);
	}
	kfree(pws);
	return ret;
}

long hgclock_ioctl_exit_pair(struct file *file, void __user *uarg)
{
	struct hgclock_exit_pair req;
	unsigned int nr_remote;
	long ret = 0;

	ret = hgclock_copy_args(&req, uarg);
	if (ret)
		return ret;
	if ((req.flags & ~HGCLOCK_READ_FLAGS_ALL) ||
	    req.flags == HGCLOCK_READ_FLAGS_ALL || req.reserved[0] || req.reserved[1] ||
	    req.nr_written || (!(req.flags & HGCLOCK_READ_CPU) && req.cpu))
		return -EINVAL;
	if (!hgclock_pair_available())
		return -ENODEV;

	/* The online mask holds still while we walk it. */
	cpus_read_lock();
	if (req.flags & HGCLOCK_READ_ALL_CPUS) {
		nr_remote = num_online_cpus();
		ret = hgclock_cross_cpu_budget(file, nr_remote);
		if (!ret)
			ret = hg_pair_on_cpus(cpu_online_mask, &req.nr_written,
					      &req.cpu);
	} else if (req.flags & HGCLOCK_READ_CPU) {
		if (req.cpu >= nr_cpu_ids || !cpu_online(req.cpu))
			ret = -EINVAL;
		else
			ret = hgclock_cross_cpu_budget(file, 1);
		if (!ret)
			ret = hg_pair_on_cpus(cpumask_of(req.cpu), &req.nr_written,
					      &req.cpu);
	} else {
		unsigned long irqflags;

		local_irq_save(irqflags);
		req.nr_written = hg_pair_this_cpu();
		local_irq_restore(irqflags);
	}
	cpus_read_unlock();
	/* ETIMEDOUT: @cpu names the CPU that did not answer in time. */
	if ((!ret || ret == -ETIMEDOUT) && copy_to_user(uarg, &req, sizeof(req)))
		ret = -EFAULT;
	return ret;
}

int __init hgclock_pair_init(void)
{
	hg_pair_key = get_random_u32() & 0xffff;
	/*
	 * Bound (per-CPU): an item runs on the CPU it was queued on while
	 * that CPU is online.  HIGHPRI: a pairing waits behind no ordinary
	 * work on a busy CPU.
	 */
	hg_pair_wq = alloc_workqueue("hgclock_pair", WQ_HIGHPRI, 0);
	if (!hg_pair_wq)
		return -ENOMEM;
	return 0;
}

/*
 * After the devices are gone (no caller can queue more), before the
 * rings are freed: waits for the items callers left behind, which run
 * when their CPU next runs the workqueue's worker, and frees them.
 */
void hgclock_pair_exit(void)
{
	destroy_workqueue(hg_pair_wq);
}
