// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock: CYC2NS snapshots of every CPU's clocks and conversion.
 *
 * A snapshot is taken on the CPU it describes, with interrupts off: TSC,
 * sched_clock, local_clock, TSC, and the conversion (conv.c).  Snapshots
 * are written to that CPU's ring and the conversion is republished in the
 * meta area for the zero-syscall clock.  They are taken:
 *
 *  - periodically (snapshot_period_ms, default 1 s), from a pinned
 *    hrtimer on each housekeeping CPU: not on CPUs isolated from kernel
 *    noise (nohz_full=, isolcpus=), which get no hgclock timer interrupt
 *    and are snapshotted only by the events below;
 *  - when a CPU comes online (CPU hotplug callback, on that CPU);
 *  - when the system resumes from sleep (PM notifier, every CPU): resume
 *    may rewrite the cyc2ns data (tsc_restore_sched_clock_state()), and
 *    with periodic snapshots off the published conversion would
 *    otherwise stay stale for good;
 *  - on demand (HGCLOCK_IOC_SNAPSHOT);
 *  - and a snapshot whose conversion differs from the published one is
 *    marked HGCLOCK_SNAP_CHANGED.
 *
 * HGCLOCK_IOC_PRODUCE writes test records at full rate: a test and
 * benchmark aid for the ring.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cpu.h>
#include <linux/cpuhotplug.h>
#include <linux/hrtimer.h>
#include <linux/capability.h>
#include <linux/module.h>
#include <linux/notifier.h>
#include <linux/suspend.h>
#include <linux/sched.h>
#include <linux/sched/clock.h>
#include <linux/sched/isolation.h>
#include <linux/slab.h>
#include <linux/smp.h>
#include <linux/trace_clock.h>
#include <linux/uaccess.h>
#include <linux/workqueue.h>
#include <asm/msr.h>
#include <asm/tsc.h>

#include "hgclock_internal.h"

static_assert(sizeof(struct hgclock_rec_cyc2ns) == 112);
static_assert(sizeof(struct hgclock_snapshot) == HGCLOCK_SNAPSHOT_SIZE_VER0);
static_assert(sizeof(struct hgclock_produce) == HGCLOCK_PRODUCE_SIZE_VER0);

static unsigned int snapshot_period_ms = 1000;
module_param(snapshot_period_ms, uint, 0444);
MODULE_PARM_DESC(snapshot_period_ms, "period of CYC2NS snapshots at load, ms (0: off)");

static u64 hg_period_ns;		/* 0: periodic snapshots off */
/* Snapshots taken on each CPU, counted by that CPU, interrupts off. */
static DEFINE_PER_CPU(u64, hg_snap_seq);
static enum cpuhp_state hg_cpuhp_state;
static bool hg_started;			/* hotplug callbacks after setup */

/*
 * Periodic snapshots come from a pinned hrtimer on each CPU, so that no
 * CPU ever has to interrupt another for them (an IPI to a CPU that is
 * running a guest costs that guest a VM exit).  Each timer is started and
 * cancelled on its own CPU: by the hotplug callbacks, and by
 * hgclock_snapshot_set_period() through on_each_cpu_cond().  HARD: expire in
 * hard interrupt context on PREEMPT_RT too; the snapshot path takes no
 * lock.
 */
static DEFINE_PER_CPU(struct hrtimer, hg_snap_timer);

/*
 * Whether @cpu gets the periodic timer.  Not a CPU isolated from kernel
 * noise: nohz_full= takes it out of HK_TYPE_TIMER (no unbound timers,
 * the tick stopped), isolcpus= out of HK_TYPE_DOMAIN; people run
 * latency-critical vCPUs there, and each expiry would cost such a vCPU
 * an interrupt (a VM exit).  Such a CPU is snapshotted at load, when it
 * comes online, at resume, into a session's new rings (RING_CONFIG) and
 * on demand (SNAPSHOT), each time by a call on it; never by a timer.
 * The boot-time isolation masks never change after boot.
 */
static bool hg_snap_timer_wanted(int cpu, void *unused)
{
	return housekeeping_cpu(cpu, HK_TYPE_TIMER) &&
	       housekeeping_cpu(cpu, HK_TYPE_DOMAIN);
}

/*
 * Interrupts disabled, on the CPU described.  Returns whether the ring
 * took the record.
 */
static bool hg_snapshot_this_cpu(u32 reason)
{
	struct hgclock_rec_cyc2ns rec;
	bool changed;

	memset(&rec, 0, sizeof(rec));
	hgclock_conv_read(&rec.conv);
	/* Header: type, size, cpu, tsc (before), sched_clock. */
	hgclock_rec_init(&rec.hdr, HGCLOCK_REC_CYC2NS, sizeof(rec));
	rec.local_clock_ns = trace_clock();
	rec.tsc_after = rdtsc_ordered();
	rec.tsc_khz = tsc_khz;

	hgclock_ring_publish_conv(&rec.conv, &changed);
	rec.reason = changed ? HGCLOCK_SNAP_CHANGED : reason;
	rec.seq = this_cpu_inc_return(hg_snap_seq);
	return hgclock_ring_write(&rec.hdr);
}

/* PM_POST_*: process context, every CPU back online and thawed. */
static int hg_pm_notify(struct notifier_block *nb, unsigned long action, void *data)
{
	u32 nr_written, late_cpu;

	switch (action) {
	case PM_POST_SUSPEND:
	case PM_POST_HIBERNATION:
	case PM_POST_RESTORE:
		/* A CPU that does not answer in time snapshots when it does. */
		cpus_read_lock();
		hgclock_snapshot_all(HGCLOCK_SNAP_RESUME, &nr_written, &late_cpu);
		cpus_read_unlock();
		break;
	}
	return NOTIFY_DONE;
}

static struct notifier_block hg_pm_nb = {
	.notifier_call = hg_pm_notify,
};

/*
 * The cross-CPU call's handler (xcall.c): the snapshot, and whether the
 * ring took it, into its slot.  A caller that gave up still gets the
 * snapshot in the ring when the CPU answers; only the count misses it.
 */
static void hg_snapshot_xcall(void *info)
{
	struct hgclock_xcall *xc = info;
	u32 *written = hgclock_xcall_result(xc);

	*written = hg_snapshot_this_cpu((u32)hgclock_xcall_arg(xc));
	hgclock_xcall_answer(xc);
}

/*
 * Each CPU of @cpus (cpus_read_lock() held), bounded: 0 or -ETIMEDOUT
 * with *@late_cpu the first CPU that did not answer; *@nr_written counts
 * the snapshots the rings took from those that did.
 */
static int hg_snapshot_cpus(const struct cpumask *cpus, u32 reason,
			    u32 *nr_written, u32 *late_cpu)
{
	unsigned int i, n = cpumask_weight(cpus);
	u32 *written;
	int ret;

	written = kcalloc(n, sizeof(*written), GFP_KERNEL);
	if (!written)
		return -ENOMEM;
	ret = hgclock_xcall(cpus, hg_snapshot_xcall, reason, written,
			    sizeof(*written), late_cpu);
	*nr_written = 0;
	for (i = 0; i < n; i++)
		*nr_written += written[i];
	kfree(written);
	return ret;
}

/* Every online CPU (cpus_read_lock() held); as hg_snapshot_cpus(). */
int hgclock_snapshot_all(u32 reason, u32 *nr_written, u32 *late_cpu)
{
	return hg_snapshot_cpus(cpu_online_mask, reason, nr_written, late_cpu);
}

static enum hrtimer_restart hg_snap_timer_fn(struct hrtimer *timer)
{
	u64 period = READ_ONCE(hg_period_ns);

	if (!period)
		return HRTIMER_NORESTART;
	hg_snapshot_this_cpu(HGCLOCK_SNAP_PERIODIC);
	hrtimer_forward_now(timer, ns_to_ktime(period));
	return HRTIMER_RESTART;
}

/*
 * On the timer's own CPU, interrupts disabled (IPI or hotplug).  An
 * isolated CPU's timer is never armed (hg_snap_timer_wanted()).
 */
static void hg_snap_timer_start(void *unused)
{
	struct hrtimer *timer = this_cpu_ptr(&hg_snap_timer);
	u64 period = READ_ONCE(hg_period_ns);

	if (period && hg_snap_timer_wanted(smp_processor_id(), NULL))
		hrtimer_start(timer, ns_to_ktime(period), HRTIMER_MODE_REL_PINNED_HARD);
	else
		hrtimer_try_to_cancel(timer);
}

void hgclock_snapshot_set_period(u64 period_ns)
{
	WRITE_ONCE(hg_period_ns, period_ns);
	/*
	 * (Re)arm or stop each CPU's timer on that CPU; no call on an
	 * isolated CPU, whose timer is never armed.
	 */
	cpus_read_lock();
	on_each_cpu_cond(hg_snap_timer_wanted, hg_snap_timer_start, NULL, true);
	cpus_read_unlock();
}

u64 hgclock_snapshot_period(void)
{
	return READ_ONCE(hg_period_ns);
}

/* CPU hotplug: runs on @cpu, in its hotplug thread. */
static int hg_cpu_online(unsigned int cpu)
{
	hgclock_ring_set_online(cpu, true);
	local_irq_disable();
	hg_snapshot_this_cpu(READ_ONCE(hg_started) ? HGCLOCK_SNAP_HOTPLUG :
			     HGCLOCK_SNAP_START);
	hg_snap_timer_start(NULL);
	local_irq_enable();
	return 0;
}

/* On @cpu, before it goes: its timer must not fire elsewhere. */
static int hg_cpu_offline(unsigned int cpu)
{
	hrtimer_cancel(this_cpu_ptr(&hg_snap_timer));
	hgclock_ring_set_online(cpu, false);
	return 0;
}

long hgclock_ioctl_snapshot(struct file *file, void __user *uarg)
{
	struct hgclock_snapshot req;
	long ret = 0;

	ret = hgclock_copy_args(&req, uarg);
	if (ret)
		return ret;
	if ((req.flags & ~HGCLOCK_SNAPSHOT_ALL_CPUS) ||
	    req.reserved[0] || req.reserved[1] || req.nr_written)
		return -EINVAL;
	if ((req.flags & HGCLOCK_SNAPSHOT_ALL_CPUS) && req.cpu)
		return -EINVAL;

	cpus_read_lock();
	ret = hgclock_cross_cpu_budget(file, (req.flags & HGCLOCK_SNAPSHOT_ALL_CPUS) ?
				       num_online_cpus() : 1);
	if (!ret && (req.flags & HGCLOCK_SNAPSHOT_ALL_CPUS))
		ret = hgclock_snapshot_all(HGCLOCK_SNAP_IOCTL, &req.nr_written, &req.cpu);
	else if (!ret && (req.cpu >= nr_cpu_ids || !cpu_online(req.cpu)))
		ret = -EINVAL;
	else if (!ret)
		ret = hg_snapshot_cpus(cpumask_of(req.cpu), HGCLOCK_SNAP_IOCTL,
				       &req.nr_written, &req.cpu);
	cpus_read_unlock();
	/* ETIMEDOUT: @cpu names the CPU that did not answer in time. */
	if ((!ret || ret == -ETIMEDOUT) && copy_to_user(uarg, &req, sizeof(req)))
		ret = -EFAULT;
	return ret;
}

/*
 * PRODUCE: runs in a kworker bound to the target CPU (work_on_cpu), in
 * batches with interrupts off, giving the CPU back between batches.
 */
#define HG_PRODUCE_BATCH 256

struct hg_produce_work {
	struct file *file;		/* the caller's session takes the records */
	struct hgclock_produce req;
};

static long hg_produce_fn(void *arg)
{
	struct hg_produce_work *pw = arg;
	struct hgclock_produce *req = &pw->req;
	struct hgclock_rec_test rec;
	u64 seq = 0, t0, sink = 0;

	memset(&rec, 0, sizeof(rec));
	t0 = trace_clock_local();
	while (seq < req->count) {
		u64 end = min(req->count, seq + HG_PRODUCE_BATCH);

		local_irq_disable();
		for (; seq < end; seq++) {
			hgclock_rec_init(&rec.hdr, HGCLOCK_REC_TEST, sizeof(rec));
			rec.seq = seq;
			rec.check = ~seq;
			if (hgclock_ring_write_file(pw->file, &rec.hdr))
				req->nr_written++;
			else
				req->nr_lost++;
		}
		local_irq_enable();
		cond_resched();
	}
	req->produce_ns = trace_clock_local() - t0;

	/* Baseline: the same loop shape around a bare local_clock(). */
	t0 = trace_clock_local();
	for (seq = 0; seq < req->count; ) {
		u64 end = min(req->count, seq + HG_PRODUCE_BATCH);

		local_irq_disable();
		for (; seq < end; seq++)
			sink += local_clock();
		local_irq_enable();
		cond_resched();
	}
	req->local_clock_ns = trace_clock_local() - t0;
	/* Keep the baseline loop from being optimised away. */
	OPTIMIZER_HIDE_VAR(sink);
	return 0;
}

long hgclock_ioctl_produce(struct file *file, void __user *uarg)
{
	struct hg_produce_work pw = { .file = file };
	struct hgclock_produce *req = &pw.req;
	long ret;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	ret = hgclock_copy_args(req, uarg);
	if (ret)
		return ret;
	if (req->reserved[0] || req->reserved[1] ||
	    req->nr_written || req->nr_lost || req->produce_ns || req->local_clock_ns)
		return -EINVAL;
	if (!req->count || req->count > (1ULL << 24))
		return -EINVAL;

	cpus_read_lock();
	if (req->cpu >= nr_cpu_ids || !cpu_online(req->cpu))
		ret = -EINVAL;
	else
		ret = work_on_cpu(req->cpu, hg_produce_fn, &pw);
	cpus_read_unlock();
	if (ret)
		return ret;
	if (copy_to_user(uarg, req, sizeof(*req)))
		return -EFAULT;
	return 0;
}

int hgclock_snapshot_init(void)
{
	unsigned int cpu;
	int ret;

	for_each_possible_cpu(cpu) {
		hrtimer_init(per_cpu_ptr(&hg_snap_timer, cpu), CLOCK_MONOTONIC,
			     HRTIMER_MODE_REL_PINNED_HARD);
		per_cpu_ptr(&hg_snap_timer, cpu)->function = hg_snap_timer_fn;
	}
	if ((u64)snapshot_period_ms * NSEC_PER_MSEC > HGCLOCK_SNAPSHOT_PERIOD_MAX_NS) {
		pr_err("snapshot_period_ms=%u: at most %llu\n", snapshot_period_ms,
		       HGCLOCK_SNAPSHOT_PERIOD_MAX_NS / NSEC_PER_MSEC);
		return -EINVAL;
	}
	WRITE_ONCE(hg_period_ns, (u64)snapshot_period_ms * NSEC_PER_MSEC);
	/*
	 * Registering runs hg_cpu_online() on every online CPU: the START
	 * snapshots, and each CPU's timer.  Later calls are real hotplug
	 * events.
	 */
	ret = cpuhp_setup_state(CPUHP_AP_ONLINE_DYN, "hgclock:online",
				hg_cpu_online, hg_cpu_offline);
	if (ret < 0)
		return ret;
	hg_cpuhp_state = ret;
	WRITE_ONCE(hg_started, true);
	/* Cannot fail: it only adds us to a chain. */
	register_pm_notifier(&hg_pm_nb);
	return 0;
}

void hgclock_snapshot_exit(void)
{
	unsigned int cpu;

	WRITE_ONCE(hg_period_ns, 0);
	unregister_pm_notifier(&hg_pm_nb);
	/* Runs hg_cpu_offline() on every online CPU: their timers stop. */
	cpuhp_remove_state(hg_cpuhp_state);
	for_each_possible_cpu(cpu)
		hrtimer_cancel(per_cpu_ptr(&hg_snap_timer, cpu));
}
