// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock: calls on other CPUs, in interrupt context, with a deadline.
 *
 * READ_CLOCK and SNAPSHOT read clocks on the CPU they describe with
 * interrupts off: an IPI.  smp_call_function_single(..., wait=1) spins
 * with preemption off until the target answers, and a vCPU its host does
 * not run answers when the host runs it again (seconds in an
 * overcommitted guest): a soft lockup in the caller.  Here the IPI is
 * sent with smp_call_function_single_async() and the caller sleeps until
 * it is answered or HGCLOCK_XCALL_TIMEOUT_MS have passed (-ETIMEDOUT,
 * naming the first CPU that had not answered).  An IPI, not a work item
 * as EXIT_PAIR's (pair.c): a real-time task on the target CPU does not
 * keep an interrupt from it.
 *
 * Lifetime.  The handler may run after its caller gave up, so it must
 * touch nothing of the caller's, and it runs in hard interrupt context,
 * where nothing may be freed on PREEMPT_RT.  So each target CPU has one
 * slot in module memory (the csd, the result, a completion), and a state
 * word hands the slot between the caller and the handler:
 *
 *   IDLE --caller--> SENT --handler--> DONE --caller, result read--> IDLE
 *                     |
 *                     +--caller, deadline--> ABANDONED --handler--> IDLE
 *
 * A slot found not IDLE belongs to a CPU that has not answered an earlier
 * call: a new call fails on it at once.  hg_xcall_mutex serialises the
 * callers (the slots' caller side and @sent); a caller holds it at most
 * until its deadline.  At unload hgclock_xcall_exit() waits until every
 * slot is IDLE, then for a grace period: a handler runs with interrupts
 * off, which RCU counts as a read-side critical section, so after it no
 * handler is still executing the module's code.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/cpumask.h>
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/rcupdate.h>
#include <linux/smp.h>
#include <linux/string.h>

#include "hgclock_internal.h"

enum {
	HG_XCALL_IDLE,
	HG_XCALL_SENT,
	HG_XCALL_DONE,
	HG_XCALL_ABANDONED,
};

struct hgclock_xcall {
	call_single_data_t csd;
	atomic_t state;
	struct completion done;
	u64 arg;			/* the caller's, for the handler */
	bool sent;			/* under hg_xcall_mutex: sent by this call */
	u8 result[HGCLOCK_XCALL_RESULT_MAX];
};

/* Indexed by the target CPU. */
static DEFINE_PER_CPU(struct hgclock_xcall, hg_xcall);
static DEFINE_MUTEX(hg_xcall_mutex);

void *hgclock_xcall_result(struct hgclock_xcall *xc)
{
	return xc->result;
}

u64 hgclock_xcall_arg(const struct hgclock_xcall *xc)
{
	return xc->arg;
}

/*
 * The handler's last touch of its slot, after it wrote the result.  The
 * release orders the result before DONE (the caller's acquire, or the
 * completion's lock, pairs with it); after it, the slot is the caller's.
 */
void hgclock_xcall_answer(struct hgclock_xcall *xc)
{
	if (atomic_cmpxchg_release(&xc->state, HG_XCALL_SENT, HG_XCALL_DONE) ==
	    HG_XCALL_SENT)
		complete(&xc->done);
	else	/* ABANDONED: nobody waits; the slot is free again. */
		atomic_set_release(&xc->state, HG_XCALL_IDLE);
}

/*
 * Runs @func(slot) on each CPU of @cpus (online, cpus_read_lock() held),
 * in interrupt context; @func writes at most @result_size bytes at
 * hgclock_xcall_result(slot), may read hgclock_xcall_arg(slot), and ends
 * with hgclock_xcall_answer(slot).  @results gets one entry per CPU of
 * @cpus in CPU order, zeroed for the CPUs that did not answer.  Returns
 * 0, or -ETIMEDOUT with *@late_cpu the first CPU that had not answered by
 * the deadline, or -EINTR (killed while waiting for another caller).
 */
int hgclock_xcall(const struct cpumask *cpus, smp_call_func_t func, u64 arg,
		  void *results, size_t result_size, u32 *late_cpu)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(HGCLOCK_XCALL_TIMEOUT_MS);
	struct hgclock_xcall *xc;
	unsigned int cpu, i = 0;
	int ret = 0;

	if (WARN_ON_ONCE(result_size > HGCLOCK_XCALL_RESULT_MAX))
		return -EINVAL;
	memset(results, 0, cpumask_weight(cpus) * result_size);
	if (mutex_lock_killable(&hg_xcall_mutex))
		return -EINTR;

	/* All sent first: the CPUs answer in parallel. */
	for_each_cpu(cpu, cpus) {
		xc = per_cpu_ptr(&hg_xcall, cpu);
		xc->sent = false;
		/* IDLE: the handler of any earlier call is done with the slot. */
		if (atomic_read_acquire(&xc->state) != HG_XCALL_IDLE)
			continue;
		xc->csd.func = func;
		xc->csd.info = xc;
		xc->arg = arg;
		reinit_completion(&xc->done);
		atomic_set(&xc->state, HG_XCALL_SENT);
		/* Queueing the csd is a full barrier: the slot before the IPI. */
		if (smp_call_function_single_async(cpu, &xc->csd)) {
			atomic_set(&xc->state, HG_XCALL_IDLE);
			continue;
		}
		xc->sent = true;
	}

	for_each_cpu(cpu, cpus) {
		long left = (long)(deadline - jiffies);
		void *result = results + i++ * result_size;

		bool answered = false;

		xc = per_cpu_ptr(&hg_xcall, cpu);
		if (!xc->sent) {
			/* Still busy with an earlier call: not answering. */
		} else if (left > 0 && wait_for_completion_timeout(&xc->done, left)) {
			answered = true;
		} else if (atomic_cmpxchg(&xc->state, HG_XCALL_SENT, HG_XCALL_ABANDONED) !=
			   HG_XCALL_SENT) {
			/*
			 * It answered as we gave up: its complete() is on its
			 * way (interrupts off, a few instructions), and must be
			 * over before the slot is reused.
			 */
			wait_for_completion(&xc->done);
			answered = true;
		}
		if (!answered) {
			/* ABANDONED (or never sent): the slot is the handler's. */
			if (!ret) {
				ret = -ETIMEDOUT;
				*late_cpu = cpu;
			}
			continue;
		}
		memcpy(result, xc->result, result_size);
		atomic_set_release(&xc->state, HG_XCALL_IDLE);
	}
	mutex_unlock(&hg_xcall_mutex);
	return ret;
}

void hgclock_xcall_init(void)
{
	unsigned int cpu;

	for_each_possible_cpu(cpu) {
		struct hgclock_xcall *xc = per_cpu_ptr(&hg_xcall, cpu);

		atomic_set(&xc->state, HG_XCALL_IDLE);
		init_completion(&xc->done);
	}
}

/*
 * No file is open: no new call.  A CPU that has not answered yet does
 * when it next runs (or as it goes offline, which flushes its queue).
 */
void hgclock_xcall_exit(void)
{
	unsigned int cpu;

	for_each_possible_cpu(cpu)
		while (atomic_read_acquire(&per_cpu_ptr(&hg_xcall, cpu)->state) !=
		       HG_XCALL_IDLE)
			msleep(20);
	synchronize_rcu();
}
