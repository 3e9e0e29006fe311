// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock: tracking vCPU threads on the host.
 *
 * What a guest event's host time and host CPU depend on, recorded in the
 * per-CPU rings as it happens:
 *
 *  - which threads are KVM vCPUs: the first kvm_entry a thread makes
 *    reveals it (VCPU_SEEN, with the vCPU's TSC offset and scaling);
 *  - where each one runs: sched_switch in and out (VCPU_RUN/STOP, a stop
 *    and a run again on the same CPU soon after counted, not recorded:
 *    coalesce_stop_us) and sched_migrate_task (VCPU_MIGRATE);
 *  - KVM re-basing a guest's TSC: kvm_write_tsc_offset (TSC_OFFSET);
 *  - the thread's end: sched_process_exit (VCPU_EXIT);
 *  - a guest's exit pairings (pair.c): kvm_cpuid on hgclock's leaf
 *    (EXIT_HOST);
 *  - KVM rewriting a vCPU's kvm-clock parameters: kvm_pvclock_update
 *    (PVCLOCK).
 * The last two are optional: vCPU tracking works without them.
 *
 * The scheduler probes run for every task on every context switch, so an
 * untracked task must cost one test of a bit in a bitmap indexed by pid:
 * no lock, no allocation, no record.  Tracked threads live in a small
 * table scanned without locks; slots are claimed under hg_track_lock and
 * recycled only after an RCU grace period (probes run with preemption
 * disabled, an RCU read-side section), so a probe never sees a slot change
 * owner under it.  A slot's TSC fields are written by its own vCPU thread
 * (kvm_entry) or under hg_track_lock.
 *
 * KVM's tracepoints live in kvm.ko, which may load before or after us and
 * may go away: we attach and detach through the tracepoint module
 * notifier, under hg_attach_mutex.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/capability.h>
#include <linux/debugfs.h>
#include <linux/hash.h>
#include <linux/kvm_host.h>
#include <linux/log2.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/percpu.h>
#include <linux/pid.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/sched/clock.h>
#include <linux/sched/task.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/static_key.h>
#include <linux/threads.h>
#include <linux/timekeeping.h>
#include <linux/tracepoint.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>
#include <asm/processor.h>
#include <asm/pvclock-abi.h>

#include "hgclock_internal.h"

static_assert(sizeof(struct hgclock_rec_vcpu) == 40);
static_assert(sizeof(struct hgclock_rec_vcpu_seen) == 80);
static_assert(sizeof(struct hgclock_rec_vcpu_migrate) == 48);
static_assert(sizeof(struct hgclock_rec_tsc_offset) == 72);
static_assert(sizeof(struct hgclock_vcpu_info) == 64);
static_assert(sizeof(struct hgclock_list_vcpus) == HGCLOCK_LIST_VCPUS_SIZE_VER0);
static_assert(sizeof(struct hgclock_track) == HGCLOCK_TRACK_SIZE_VER0);
static_assert(sizeof(struct hgclock_rec_pvclock) == 64);

/*
 * The table: max_tracked slots allocated at load, found by thread id
 * through a hash of RCU lists, so that a tracked thread's VM entry costs
 * one bucket walk whatever the number of threads tracked.
 */
static unsigned int max_tracked = 4096;
module_param(max_tracked, uint, 0444);
MODULE_PARM_DESC(max_tracked,
		 "threads (vCPUs) tracked at most, 16..1048576 (default 4096)");
#define HG_TRACKED_MIN		16U
#define HG_TRACKED_MAX		(1U << 20)

/*
 * Exit pairing: at most this many EXIT_HOST records per vCPU per second
 * (the agent asks for 10 a second per vCPU); further exits on the leaf in
 * the same second are counted, not recorded.
 */
#define HG_PAIR_WINDOW_NS	NSEC_PER_SEC

/*
 * An idle vCPU halts and wakes hundreds of times a second, mostly on the
 * same host CPU, and each STOP/RUN pair said nothing a guest event's
 * mapping needs (it runs on the same CPU, with the same offsets).  Such
 * a stop, when the thread runs again on the same CPU within this many
 * microseconds with no migration in between, is counted in the next
 * record (hgclock_rec_vcpu.nr_coalesced), not recorded.  0 records every
 * switch.  Root may change it at any time; a stop already pending when
 * it becomes 0 is written at the thread's next run.
 *
 * Nor is a stop coalesced when another tracked thread ran on that CPU in
 * between (hg_switch_in_seq): timelines that draw the runs of each host
 * CPU (merge's Perfetto tracks, the host CPU of each guest event) need
 * runs that do not overlap.
 *
 * On by default at 100 ms: an idle vCPU's halts are then almost all
 * counted, and a halt longer than that still shows as a STOP and a RUN.
 * merge --analyze takes halts from the host's own sched_switch events,
 * not from these records.
 */
static unsigned int coalesce_stop_us = 100 * USEC_PER_MSEC;
module_param(coalesce_stop_us, uint, 0644);
MODULE_PARM_DESC(coalesce_stop_us,
		 "a tracked thread that stops and runs again on the same CPU within this many us is counted, not recorded; 0 records every switch (default 100000)");

enum hg_slot_state {
	HG_SLOT_FREE = 0,
	HG_SLOT_LIVE,
	HG_SLOT_DEAD,		/* untracked, off its list; may still be read */
	HG_SLOT_RECLAIMING,	/* DEAD when a grace period began */
};

/* hg_slot.pair: exit pairing enabled for the slot's VM (HG_PAIR_*) */
struct hg_slot {
	struct hlist_node node;	/* on hg_buckets[hash(tid)] while LIVE */
	int state;		/* hg_slot_state, READ_ONCE/smp_store_release */
	pid_t tid;
	pid_t vm_pid;
	s32 vcpu_id;
	u32 flags;
	char vm_name[16];
	u64 tsc_offset;
	u64 tsc_scaling_ratio;
	u32 tsc_frac_bits;
	bool pair;		/* under hg_track_lock, read locklessly */
	u64 nr_migrations;
	/*
	 * Exit pairing's rate limit: read and written only by the vCPU
	 * thread itself, in its kvm_cpuid probe (preemption off), and by
	 * the sched_switch probe when it switches that thread out.
	 */
	u64 pair_window_start_ns;
	u32 pair_in_window;
	u64 pair_suppressed;
	u64 pair_suppressed_reported;
	/*
	 * The thread's STOP, stamped when it switched out and written when
	 * it next runs (or never: coalesced).  Read and written only by the
	 * sched_switch probe switching the thread out and then in, which the
	 * scheduler orders: a task switches in only after its switch-out
	 * completed (finish_task()'s release of prev->on_cpu, the acquire of
	 * it before the task is woken or moved elsewhere; on the same CPU,
	 * program order), and by the removal of a stopped thread (its
	 * hg_emit_end()).  stop_pending is published with a release after
	 * the stamps and taken with xchg(): whoever takes it (the switch-in,
	 * or the removal) writes or counts that STOP, once.  nr_coalesced is
	 * also read, as a hint, by EXIT.
	 */
	struct hgclock_rec_header stop_hdr;
	u64 stop_migrations;	/* nr_migrations when it stopped */
	u64 stop_seq;		/* its CPU's hg_switch_in_seq when it stopped */
	u32 nr_coalesced;	/* stops not recorded since its last STOP */
	u32 stop_pending;	/* 1: stop_hdr is a STOP not yet written */
};

static struct hg_slot *hg_slots;	/* max_tracked entries */
static struct hlist_head *hg_buckets;
static unsigned int hg_bucket_bits;
static unsigned int hg_slots_used;	/* high-water mark, only grows */
static unsigned long *hg_tid_bitmap;	/* PID_MAX_LIMIT bits: tracked */
static unsigned long *hg_refused_bitmap; /* PID_MAX_LIMIT bits: table was full */
static DEFINE_RAW_SPINLOCK(hg_track_lock);
static DEFINE_MUTEX(hg_attach_mutex);	/* probe (un)registration */
static DEFINE_MUTEX(hg_reclaim_mutex);	/* one reclaim at a time */
static bool hg_kvm_attached;
static unsigned int hg_nr_live;		/* LIVE slots; under hg_track_lock */
static bool hg_sched_attached;
static atomic64_t hg_nr_refused;	/* threads not tracked: table full */
static atomic64_t hg_nr_pair_suppressed; /* exits over the rate, all vCPUs */

/*
 * VMs whose vCPUs may write EXIT_HOST records, each enabled by an open
 * file (HGCLOCK_TRACK_PAIR_ON) until that file turns it off or is
 * released.  Under hg_track_lock.
 */
#define HG_MAX_PAIR_VMS	64
struct hg_pair_vm {
	pid_t vm_pid;		/* 0: unused */
	const struct file *owner;
};
static struct hg_pair_vm hg_pair_vms[HG_MAX_PAIR_VMS];

static inline bool hg_tid_tracked(pid_t tid)
{
	return (unsigned int)tid < PID_MAX_LIMIT && test_bit(tid, hg_tid_bitmap);
}

/* Nothing tracked at all: the scheduler probes stop at one load. */
static inline bool hg_none_tracked(void)
{
	return !READ_ONCE(hg_nr_live);
}

static struct hlist_head *hg_bucket(pid_t tid)
{
	return &hg_buckets[hash_32((u32)tid, hg_bucket_bits)];
}

/*
 * Lockless: callers run with preemption disabled or under rcu_read_lock()
 * (RCU readers), or hold hg_track_lock.  A slot found here stays
 * readable until the reader leaves its read-side section, even if it is
 * removed meanwhile (hgclock_track_reclaim() waits a grace period).
 */
static struct hg_slot *hg_find(pid_t tid)
{
	struct hg_slot *slot;

	hlist_for_each_entry_rcu(slot, hg_bucket(tid), node,
				 lockdep_is_held(&hg_track_lock)) {
		if (READ_ONCE(slot->tid) != tid)
			continue;
		/* Acquire: pairs with hg_insert()'s release of the state. */
		if (smp_load_acquire(&slot->state) == HG_SLOT_LIVE)
			return slot;
	}
	return NULL;
}

/* Is exit pairing enabled for @vm_pid?  hg_track_lock held. */
static bool hg_pair_enabled_locked(pid_t vm_pid)
{
	unsigned int i;

	for (i = 0; i < HG_MAX_PAIR_VMS; i++)
		if (hg_pair_vms[i].vm_pid == vm_pid)
			return true;
	return false;
}

/*
 * Claim a slot for @init->tid, fill it and publish it.  Any context.
 * -EEXIST when the thread is tracked already, -ENOSPC when the table is
 * full.  Free slots are found by a scan from a hint: inserts are rare
 * (a thread's first VM entry, TRACK), lookups are not.
 */
static int hg_insert(const struct hg_slot *init, struct hg_slot **out)
{
	static unsigned int hint;
	struct hg_slot *slot = NULL;
	unsigned long irqflags;
	unsigned int i, n;
	int ret = 0;

	raw_spin_lock_irqsave(&hg_track_lock, irqflags);
	if (hg_find(init->tid)) {
		ret = -EEXIST;
		goto out;
	}
	for (n = 0; n < max_tracked; n++) {
		i = (hint + n) % max_tracked;
		if (hg_slots[i].state == HG_SLOT_FREE) {
			slot = &hg_slots[i];
			hint = i + 1;
			break;
		}
	}
	if (!slot) {
		ret = -ENOSPC;
		goto out;
	}
	/*
	 * A FREE slot is on no list and no reader holds it (reclaim waited
	 * a grace period): it may be rewritten whole.
	 */
	*slot = *init;
	INIT_HLIST_NODE(&slot->node);
	slot->state = HG_SLOT_FREE;
	slot->pair = hg_pair_enabled_locked(init->vm_pid);
	/* Fields before the state: lockless readers check the state last. */
	smp_store_release(&slot->state, HG_SLOT_LIVE);
	hlist_add_head_rcu(&slot->node, hg_bucket(init->tid));
	if (i >= hg_slots_used) {
		/* The slot's fields before the mark that lets list walks see it. */
		smp_store_release(&hg_slots_used, i + 1);
	}
	set_bit(init->tid, hg_tid_bitmap);
	WRITE_ONCE(hg_nr_live, hg_nr_live + 1);
	*out = slot;
out:
	raw_spin_unlock_irqrestore(&hg_track_lock, irqflags);
	return ret;
}

/*
 * The slot of the thread a KVM tracepoint fires in (KVM's probes run in
 * the vCPU thread), or NULL when it is not tracked: a bitmap test first,
 * so untracked threads never look at the table.
 */
static struct hg_slot *hg_current_slot(void)
{
	return hg_tid_tracked(current->pid) ? hg_find(current->pid) : NULL;
}

/*
 * Any context.  Off its list and DEAD: hg_find() no longer returns it,
 * readers that already have it keep reading valid fields until
 * hgclock_track_reclaim() has waited for them.  False if it was not LIVE
 * (someone else removed it first).
 */
static bool hg_remove(struct hg_slot *slot)
{
	unsigned long irqflags;
	bool removed = false;

	raw_spin_lock_irqsave(&hg_track_lock, irqflags);
	if (slot->state == HG_SLOT_LIVE) {
		hlist_del_rcu(&slot->node);
		clear_bit(slot->tid, hg_tid_bitmap);
		/* Pairs with the acquire in hg_find() and the list walks. */
		smp_store_release(&slot->state, HG_SLOT_DEAD);
		WRITE_ONCE(hg_nr_live, hg_nr_live - 1);
		removed = true;
	}
	raw_spin_unlock_irqrestore(&hg_track_lock, irqflags);
	return removed;
}

/*
 * Process context (the maintenance work, ioctls, exit).  Two phases: the
 * slots DEAD *now* become RECLAIMING, a grace period passes (every probe
 * or ioctl that could still hold one of them has returned), then exactly
 * those become FREE.  A slot that dies during the grace period stays DEAD
 * for the next round: a reader that found it just before its removal may
 * still be using it.
 */
void hgclock_track_reclaim(void)
{
	unsigned int i, used, n = 0;

	mutex_lock(&hg_reclaim_mutex);
	/* Pairs with hg_insert()'s release of the high-water mark. */
	used = smp_load_acquire(&hg_slots_used);
	raw_spin_lock_irq(&hg_track_lock);
	for (i = 0; i < used; i++) {
		if (hg_slots[i].state == HG_SLOT_DEAD) {
			hg_slots[i].state = HG_SLOT_RECLAIMING;
			n++;
		}
	}
	raw_spin_unlock_irq(&hg_track_lock);
	if (n) {
		synchronize_rcu();
		raw_spin_lock_irq(&hg_track_lock);
		for (i = 0; i < used; i++)
			if (hg_slots[i].state == HG_SLOT_RECLAIMING)
				hg_slots[i].state = HG_SLOT_FREE;
		raw_spin_unlock_irq(&hg_track_lock);
		/*
		 * Room again: threads refused while the table was full may
		 * try again at their next VM entry (and are reported again
		 * if it is still full).  Racing set_bit()s only cost a
		 * repeated UNTRACKED record.
		 */
		if (atomic64_read(&hg_nr_refused))
			bitmap_zero(hg_refused_bitmap, PID_MAX_LIMIT);
	}
	mutex_unlock(&hg_reclaim_mutex);
}

/* Slots of untracked threads are recycled once a second from here. */
static void hg_reclaim_fn(struct work_struct *work);
static DECLARE_DELAYED_WORK(hg_reclaim_work, hg_reclaim_fn);

static void hg_reclaim_fn(struct work_struct *work)
{
	hgclock_track_reclaim();
	schedule_delayed_work(&hg_reclaim_work, HZ);
}

/* ---- records ---------------------------------------------------------- */

static void hg_vcpu_rec_init(struct hgclock_rec_vcpu *rec, const struct hg_slot *slot)
{
	memset(rec, 0, sizeof(*rec));
	rec->tid = slot->tid;
	rec->vm_pid = slot->vm_pid;
	rec->vcpu_id = slot->vcpu_id;
}

/* RUN, UNTRACKED; EXIT with the stops its last run did not record. */
static void hg_emit_vcpu(const struct hg_slot *slot, u16 type)
{
	struct hgclock_rec_vcpu rec;

	hg_vcpu_rec_init(&rec, slot);
	if (type == HGCLOCK_REC_VCPU_EXIT)
		rec.nr_coalesced = READ_ONCE(slot->nr_coalesced);
	hgclock_rec_emit(&rec.hdr, type, sizeof(rec));
}

/*
 * The thread's STOP, stamped in @hdr (now, or when it stopped), with the
 * stops since its last STOP that were not recorded.  The sched_switch
 * probe, switching the thread out or in (see hg_slot.stop_hdr).
 */
static void hg_emit_stop(struct hg_slot *slot, const struct hgclock_rec_header *hdr)
{
	struct hgclock_rec_vcpu rec;

	hg_vcpu_rec_init(&rec, slot);
	rec.hdr = *hdr;
	rec.nr_coalesced = slot->nr_coalesced;
	WRITE_ONCE(slot->nr_coalesced, 0);
	hgclock_rec_emit_stamped(&rec.hdr);
}

/*
 * Per CPU: how many times a tracked thread switched in there.  Written
 * only by that CPU's sched_switch probe (interrupts off), and read there:
 * a stop whose count changed before the thread ran again on the same CPU
 * had another tracked thread's run inside it, and is written, not
 * coalesced.  Wraps after 2^64 switches; equality is all that is asked.
 */
static DEFINE_PER_CPU(u64, hg_switch_in_seq);

/*
 * The slot's thread switches out on this CPU.  With coalescing on, only
 * stamp its STOP: hg_switch_in() decides whether it is written.
 */
static void hg_switch_out(struct hg_slot *slot)
{
	struct hgclock_rec_header hdr;

	hgclock_rec_init(&hdr, HGCLOCK_REC_VCPU_STOP, sizeof(struct hgclock_rec_vcpu));
	if (!READ_ONCE(coalesce_stop_us)) {
		hg_emit_stop(slot, &hdr);
		return;
	}
	slot->stop_hdr = hdr;
	slot->stop_migrations = READ_ONCE(slot->nr_migrations);
	slot->stop_seq = __this_cpu_read(hg_switch_in_seq);
	/* The stamps before the flag: hg_emit_end() may take it. */
	smp_store_release(&slot->stop_pending, 1);
}

/*
 * The slot's thread switches in on this CPU.  A pending STOP is dropped
 * (counted) when nothing a guest event's mapping depends on changed since:
 * the same CPU (so the same conversion of its TSC), no migration away and
 * back, no other tracked thread's run there in between, not longer ago
 * than coalesce_stop_us (a long halt stays visible).  Otherwise it is
 * written with its own stamps, then the RUN.
 */
static void hg_switch_in(struct hg_slot *slot)
{
	u64 seq = __this_cpu_inc_return(hg_switch_in_seq) - 1;

	if (READ_ONCE(slot->stop_pending) && xchg(&slot->stop_pending, 0)) {
		u64 limit_ns = (u64)READ_ONCE(coalesce_stop_us) * NSEC_PER_USEC;
		u64 now_ns = trace_clock_local();

		/*
		 * Same CPU: both stamps come from this CPU's clock; a clock
		 * that went backwards gives a huge difference, not coalesced.
		 */
		if (slot->stop_hdr.cpu == smp_processor_id() &&
		    slot->stop_seq == seq &&
		    slot->stop_migrations == READ_ONCE(slot->nr_migrations) &&
		    now_ns - slot->stop_hdr.sched_clock_ns < limit_ns) {
			if (slot->nr_coalesced != U32_MAX)
				WRITE_ONCE(slot->nr_coalesced, slot->nr_coalesced + 1);
			return;
		}
		hg_emit_stop(slot, &slot->stop_hdr);
	}
	hg_emit_vcpu(slot, HGCLOCK_REC_VCPU_RUN);
}

/*
 * The slot's thread leaves the table (hg_remove() returned true): its
 * STOP, if one is pending (it stopped and was removed before it ran
 * again: TRACK_REMOVE by another thread), with the stamps of when it
 * stopped, then EXIT.  Without that STOP its last run would seem to go
 * on until the EXIT, over whatever ran on that CPU since.  A probe that
 * found the slot before its removal may still be stamping a stop: that
 * one is not written (the thread was running at the removal; EXIT ends
 * the run).
 */
static void hg_emit_end(struct hg_slot *slot)
{
	/* xchg() orders the stamps' reads after the switch-out's release. */
	if (READ_ONCE(slot->stop_pending) && xchg(&slot->stop_pending, 0))
		hg_emit_stop(slot, &slot->stop_hdr);
	hg_emit_vcpu(slot, HGCLOCK_REC_VCPU_EXIT);
}

/* The thread's exits over the pairing rate, when more than last said. */
static void hg_emit_suppressed(struct hg_slot *slot)
{
	struct hgclock_rec_exit_suppressed rec;
	u64 total = READ_ONCE(slot->pair_suppressed);

	if (likely(total == READ_ONCE(slot->pair_suppressed_reported)))
		return;
	WRITE_ONCE(slot->pair_suppressed_reported, total);
	memset(&rec, 0, sizeof(rec));
	rec.tid = slot->tid;
	rec.vm_pid = slot->vm_pid;
	rec.vcpu_id = slot->vcpu_id;
	rec.nr_suppressed = total;
	hgclock_rec_emit(&rec.hdr, HGCLOCK_REC_EXIT_SUPPRESSED, sizeof(rec));
}

static void hg_emit_seen(const struct hg_slot *slot, int host_cpu)
{
	struct hgclock_rec_vcpu_seen rec;

	memset(&rec, 0, sizeof(rec));
	rec.tid = slot->tid;
	rec.vm_pid = slot->vm_pid;
	rec.vcpu_id = slot->vcpu_id;
	rec.flags = slot->flags;
	memcpy(rec.vm_name, slot->vm_name, sizeof(rec.vm_name));
	rec.tsc_offset = slot->tsc_offset;
	rec.tsc_scaling_ratio = slot->tsc_scaling_ratio;
	rec.tsc_frac_bits = slot->tsc_frac_bits;
	rec.host_cpu = host_cpu;
	hgclock_rec_emit(&rec.hdr, HGCLOCK_REC_VCPU_SEEN, sizeof(rec));
}

/* ---- probe cost, for benchmarks (probe_stats) ------------------------ */

/*
 * Bench only: with probe_stats=1 the sched_switch and kvm_entry probes
 * add, on their CPU, the local_clock() time between their entry and
 * their exit and one call, read through debugfs hgclock/probe_stats.
 * Off (the default) the probes pay one patched-out jump
 * (hg_probe_stats_key).  The measured time includes one local_clock()
 * read, which is the probe's cost only when it is measured.
 *
 * Each CPU's counters are written only by that CPU, inside a probe,
 * with interrupts off (sched_switch and kvm_entry both run so), so no
 * two writers ever meet and no lock or atomic is needed.  A reset bumps
 * hg_probe_stats_gen; each CPU zeroes its own counters at its next
 * probe when its generation is older, and a reader counts a CPU of an
 * older generation as zero.  Readers see each u64 whole (x86-64); the
 * calls and time of one CPU may be one probe apart, which a benchmark
 * reading thousands of calls does not notice.
 */
enum hg_probe_stat {
	HG_PROBE_STAT_SWITCH,
	HG_PROBE_STAT_KVM_ENTRY,
	HG_PROBE_STAT_NR
};

static const char *const hg_probe_stat_names[HG_PROBE_STAT_NR] = {
	[HG_PROBE_STAT_SWITCH] = "sched_switch",
	[HG_PROBE_STAT_KVM_ENTRY] = "kvm_entry",
};

struct hg_probe_stat_cpu {
	u64 gen;			/* of hg_probe_stats_gen; release store */
	u64 calls[HG_PROBE_STAT_NR];
	u64 ns[HG_PROBE_STAT_NR];	/* local_clock() ns inside the probe */
};

static DEFINE_PER_CPU(struct hg_probe_stat_cpu, hg_probe_stat_pcpu);
static u64 hg_probe_stats_gen = 1;	/* bumped by each reset and enable */
static DEFINE_STATIC_KEY_FALSE(hg_probe_stats_key);
static DEFINE_MUTEX(hg_probe_stats_mutex);	/* the key and the parameter */
static bool hg_probe_stats_ready;	/* init done; under hg_probe_stats_mutex */
static bool probe_stats;
static struct dentry *hg_debugfs_dir;

/* Under hg_probe_stats_mutex. */
static void hg_probe_stats_apply(void)
{
	if (probe_stats) {
		/* Counts start from zero at each enable. */
		WRITE_ONCE(hg_probe_stats_gen, READ_ONCE(hg_probe_stats_gen) + 1);
		static_branch_enable(&hg_probe_stats_key);
	} else {
		static_branch_disable(&hg_probe_stats_key);
	}
}

static int hg_probe_stats_set(const char *val, const struct kernel_param *kp)
{
	bool on;
	int ret;

	ret = kstrtobool(val, &on);
	if (ret)
		return ret;
	mutex_lock(&hg_probe_stats_mutex);
	if (on != probe_stats) {
		probe_stats = on;
		/* Before init (insmod's own arguments), init applies it. */
		if (hg_probe_stats_ready)
			hg_probe_stats_apply();
	}
	mutex_unlock(&hg_probe_stats_mutex);
	return 0;
}

static const struct kernel_param_ops hg_probe_stats_ops = {
	.set = hg_probe_stats_set,
	.get = param_get_bool,
};
module_param_cb(probe_stats, &hg_probe_stats_ops, &probe_stats, 0644);
MODULE_PARM_DESC(probe_stats,
		 "bench only: time the sched_switch and kvm_entry probes, per CPU (debugfs hgclock/probe_stats; default 0)");

/* At a probe's end, @t0_ns its local_clock() at entry.  Interrupts off. */
static void hg_probe_stat_add(enum hg_probe_stat which, u64 t0_ns)
{
	struct hg_probe_stat_cpu *st = this_cpu_ptr(&hg_probe_stat_pcpu);
	u64 gen = READ_ONCE(hg_probe_stats_gen);
	u64 delta_ns = local_clock() - t0_ns;

	if (unlikely(st->gen != gen)) {
		memset(st->calls, 0, sizeof(st->calls));
		memset(st->ns, 0, sizeof(st->ns));
		/* Pairs with the reader's acquire: zeroes before the gen. */
		smp_store_release(&st->gen, gen);
	}
	WRITE_ONCE(st->calls[which], st->calls[which] + 1);
	WRITE_ONCE(st->ns[which], st->ns[which] + delta_ns);
}

/*
 * "cpu<N> <probe> <calls> <ns>" per CPU that counted something, then
 * "<probe> <calls> <ns>" summed over the possible CPUs.
 */
static int hg_probe_stats_show(struct seq_file *m, void *unused)
{
	u64 gen = READ_ONCE(hg_probe_stats_gen);
	u64 calls[HG_PROBE_STAT_NR] = {}, ns[HG_PROBE_STAT_NR] = {};
	unsigned int cpu, i;

	seq_printf(m, "# enabled %d\n", static_key_enabled(&hg_probe_stats_key));
	for_each_possible_cpu(cpu) {
		struct hg_probe_stat_cpu *st = per_cpu_ptr(&hg_probe_stat_pcpu, cpu);

		/* Pairs with hg_probe_stat_add()'s release: zeroes seen. */
		if (smp_load_acquire(&st->gen) != gen)
			continue;	/* nothing since the last reset */
		for (i = 0; i < HG_PROBE_STAT_NR; i++) {
			u64 c = READ_ONCE(st->calls[i]), t = READ_ONCE(st->ns[i]);

			if (!c)
				continue;
			seq_printf(m, "cpu%u %s %llu %llu\n", cpu,
				   hg_probe_stat_names[i], c, t);
			calls[i] += c;
			ns[i] += t;
		}
	}
	for (i = 0; i < HG_PROBE_STAT_NR; i++)
		seq_printf(m, "%s %llu %llu\n", hg_probe_stat_names[i], calls[i], ns[i]);
	return 0;
}

static int hg_probe_stats_open(struct inode *inode, struct file *file)
{
	return single_open(file, hg_probe_stats_show, NULL);
}

/* Any write resets every CPU's counters (lazily: hg_probe_stat_add()). */
static ssize_t hg_probe_stats_write(struct file *file, const char __user *buf,
				    size_t len, loff_t *ppos)
{
	mutex_lock(&hg_probe_stats_mutex);
	WRITE_ONCE(hg_probe_stats_gen, READ_ONCE(hg_probe_stats_gen) + 1);
	mutex_unlock(&hg_probe_stats_mutex);
	return len;
}

static const struct file_operations hg_probe_stats_fops = {
	.owner = THIS_MODULE,
	.open = hg_probe_stats_open,
	.read = seq_read,
	.llseek = seq_lseek,
	.release = single_release,
	.write = hg_probe_stats_write,
};

/* The file is there whether or not probe_stats is set; root only. */
static void hg_probe_stats_init(void)
{
	hg_debugfs_dir = debugfs_create_dir(KBUILD_MODNAME, NULL);
	debugfs_create_file("probe_stats", 0600, hg_debugfs_dir, NULL,
			    &hg_probe_stats_fops);
	mutex_lock(&hg_probe_stats_mutex);
	hg_probe_stats_ready = true;
	hg_probe_stats_apply();
	mutex_unlock(&hg_probe_stats_mutex);
}

/*
 * Before the probes are detached: the file goes first (debugfs_remove
 * waits for its readers), the key may stay as it is (the probes that
 * test it are gone when the module's text is).
 */
static void hg_probe_stats_exit(void)
{
	debugfs_remove(hg_debugfs_dir);
	mutex_lock(&hg_probe_stats_mutex);
	hg_probe_stats_ready = false;
	mutex_unlock(&hg_probe_stats_mutex);
}

/* ---- probes ----------------------------------------------------------- */

static __always_inline void hg_sched_switch(struct task_struct *prev,
					    struct task_struct *next)
{
	struct hg_slot *slot;

	if (likely(hg_none_tracked()))
		return;
	if (unlikely(hg_tid_tracked(prev->pid))) {
		slot = hg_find(prev->pid);
		if (slot) {
			hg_switch_out(slot);
			/* prev is the slot's vCPU thread: its counters. */
			hg_emit_suppressed(slot);
		}
	}
	if (unlikely(hg_tid_tracked(next->pid))) {
		slot = hg_find(next->pid);
		if (slot)
			hg_switch_in(slot);
	}
}

/* Every context switch, interrupts off. */
static void hg_probe_sched_switch(void *data, bool preempt,
				  struct task_struct *prev,
				  struct task_struct *next,
				  unsigned int prev_state)
{
	u64 t0_ns;

	if (static_branch_unlikely(&hg_probe_stats_key)) {
		t0_ns = local_clock();
		hg_sched_switch(prev, next);
		hg_probe_stat_add(HG_PROBE_STAT_SWITCH, t0_ns);
		return;
	}
	hg_sched_switch(prev, next);
}

static void hg_probe_sched_migrate_task(void *data, struct task_struct *p,
					int dest_cpu)
{
	struct hgclock_rec_vcpu_migrate rec;
	struct hg_slot *slot;

	if (likely(hg_none_tracked() || !hg_tid_tracked(p->pid)))
		return;
	slot = hg_find(p->pid);
	if (!slot)
		return;
	/* Counted without a lock: the list ioctl shows it as a hint only. */
	WRITE_ONCE(slot->nr_migrations, READ_ONCE(slot->nr_migrations) + 1);
	memset(&rec, 0, sizeof(rec));
	rec.tid = slot->tid;
	rec.vm_pid = slot->vm_pid;
	rec.vcpu_id = slot->vcpu_id;
	rec.from_cpu = task_cpu(p);
	rec.to_cpu = dest_cpu;
	hgclock_rec_emit(&rec.hdr, HGCLOCK_REC_VCPU_MIGRATE, sizeof(rec));
}

/*
 * Untrack @tid if tracked: out of the table first, then the record, so
 * that a reader that has seen the EXIT record finds the thread gone from
 * LIST_VCPUS too.  Any context.  The read-side section spans the lookup,
 * the removal and the record: a slot found here cannot be reclaimed and
 * given to another thread before we are done with it (probes are in one
 * already; the TRACK ioctl is not).  True if this call removed it.
 */
static bool hg_untrack_tid(pid_t tid)
{
	struct hg_slot *slot;
	bool removed = false;

	if (!hg_tid_tracked(tid))
		return false;
	rcu_read_lock();
	slot = hg_find(tid);
	if (slot && hg_remove(slot)) {
		hg_emit_end(slot);
		removed = true;
	}
	rcu_read_unlock();
	return removed;
}

/*
 * @tid ends (exit, or exec giving it up): a thread that reuses the id is
 * another thread, tried again at its first VM entry and reported again if
 * the table is still full.  Any context; hg_nr_refused keeps the common
 * case (nothing ever refused) to one load.
 */
static void hg_forget_refused(pid_t tid)
{
	if (unlikely(atomic64_read(&hg_nr_refused)) &&
	    (unsigned int)tid < PID_MAX_LIMIT && test_bit(tid, hg_refused_bitmap))
		clear_bit(tid, hg_refused_bitmap);
}

static void hg_probe_sched_process_exit(void *data, struct task_struct *p)
{
	hg_forget_refused(p->pid);
	if (likely(hg_none_tracked()))
		return;
	hg_untrack_tid(p->pid);
}

/*
 * exec: the thread is another program from now on (not a vCPU), and when
 * a non-leader thread execs, de_thread() has given it the leader's id
 * (@old_pid was its own): neither id names the tracked thread any more.
 */
static void hg_probe_sched_process_exec(void *data, struct task_struct *p,
					pid_t old_pid,
					struct linux_binprm *bprm)
{
	/*
	 * Orders de_thread()'s new task->pid before our look at the table:
	 * pairs with the smp_mb() in hg_track_add() (exec is rare, a full
	 * barrier costs nothing there).
	 */
	smp_mb();
	hg_forget_refused(old_pid);
	if (likely(hg_none_tracked()))
		return;
	hg_untrack_tid(old_pid);
	if (p->pid != old_pid)
		hg_untrack_tid(p->pid);
}

/*
 * Fraction bits of KVM's TSC scaling ratio: a property of the hardware's
 * ratio format (AMD 8.32, Intel 16.48), which kvm_caps keeps in a struct
 * private to KVM.
 */
static u32 hg_tsc_frac_bits(void)
{
	if (boot_cpu_data.x86_vendor == X86_VENDOR_AMD ||
	    boot_cpu_data.x86_vendor == X86_VENDOR_HYGON)
		return 32;
	return 48;
}

/* "<pid>-<fd>": the name KVM gave the VM's debugfs directory. */
static void hg_vm_name(struct kvm *kvm, char *buf, size_t len)
{
	struct dentry *dentry = READ_ONCE(kvm->debugfs_dentry);

	buf[0] = '\0';
	if (!IS_ERR_OR_NULL(dentry))
		strscpy(buf, dentry->d_name.name, len);
}

/*
 * A thread could not be tracked (table full): one UNTRACKED record per
 * thread until reclaim frees slots or the thread ends (its id, reused, is
 * another thread: hg_forget_refused()), and the count in GET_INFO.
 */
static void hg_refuse(const struct hg_slot *init)
{
	struct hgclock_rec_vcpu rec;

	if (test_and_set_bit(init->tid, hg_refused_bitmap))
		return;
	atomic64_inc(&hg_nr_refused);
	memset(&rec, 0, sizeof(rec));
	rec.tid = init->tid;
	rec.vm_pid = init->vm_pid;
	rec.vcpu_id = init->vcpu_id;
	hgclock_rec_emit(&rec.hdr, HGCLOCK_REC_UNTRACKED, sizeof(rec));
}

/*
 * A thread TRACK_ADD followed before its first VM entry knows no vCPU
 * (vcpu_id -1): its first entry fills in what the entry reveals, so that
 * exit pairing, PVCLOCK and TSC_OFFSET records are attributed to it as to
 * a thread kvm_entry found itself.  In the vCPU thread, interrupts off.
 * False if the slot left the table meanwhile (TRACK_REMOVE).
 *
 * Under hg_track_lock: the pairing bit follows the VM, and
 * hg_pair_mark_locked() writes it under the lock.  The vCPU id is written
 * last: this thread's own probes (kvm_cpuid, kvm_pvclock_update,
 * kvm_write_tsc_offset, the next kvm_entry) test it before reading the
 * rest, in program order.  Readers on other CPUs (the sched probes,
 * LIST_VCPUS) take each field as it is, without a lock: a record they
 * write during the fill may still carry -1, the next one carries the id.
 */
static bool hg_fill_vcpu(struct hg_slot *slot, struct kvm_vcpu *vcpu,
			 u64 l1_offset, u64 l1_ratio)
{
	char vm_name[sizeof(slot->vm_name)];
	pid_t vm_pid = vcpu->kvm->userspace_pid ?: current->tgid;
	unsigned long irqflags;
	bool filled = false;

	hg_vm_name(vcpu->kvm, vm_name, sizeof(vm_name));
	raw_spin_lock_irqsave(&hg_track_lock, irqflags);
	if (slot->state == HG_SLOT_LIVE && slot->vcpu_id < 0) {
		WRITE_ONCE(slot->vm_pid, vm_pid);
		memcpy(slot->vm_name, vm_name, sizeof(vm_name));
		WRITE_ONCE(slot->flags, slot->flags | HGCLOCK_VCPU_KVM |
					HGCLOCK_VCPU_TSC_KNOWN);
		WRITE_ONCE(slot->tsc_frac_bits, hg_tsc_frac_bits());
		WRITE_ONCE(slot->tsc_scaling_ratio, l1_ratio);
		WRITE_ONCE(slot->tsc_offset, l1_offset);
		WRITE_ONCE(slot->pair, hg_pair_enabled_locked(vm_pid));
		WRITE_ONCE(slot->vcpu_id, vcpu->vcpu_id);
		filled = true;
	}
	raw_spin_unlock_irqrestore(&hg_track_lock, irqflags);
	return filled;
}

/*
 * Every VM entry, in the vCPU thread with interrupts off.  A tracked
 * thread costs the bitmap test, one hash bucket walk and three compares;
 * an untracked one that was refused, two bitmap tests.
 *
 * The TSC offset and ratio are L1's (the guest's own TSC relative to
 * the host's): while the vCPU runs a nested guest, vcpu->arch.tsc_offset
 * and tsc_scaling_ratio hold the combined L2 values, which say nothing
 * about the guest's traces.  kvm_write_tsc_offset reports L1 values too.
 */
static __always_inline void hg_kvm_entry(struct kvm_vcpu *vcpu)
{
	pid_t tid = current->pid;
	struct hg_slot init, *slot;
	u64 l1_offset = vcpu->arch.l1_tsc_offset;
	u64 l1_ratio = vcpu->arch.l1_tsc_scaling_ratio;
	int ret;

	if (likely(hg_tid_tracked(tid))) {
		slot = hg_find(tid);
		if (!slot)
			return;
		/* Added by TRACK_ADD before its first entry. */
		if (unlikely(slot->vcpu_id < 0)) {
			if (hg_fill_vcpu(slot, vcpu, l1_offset, l1_ratio))
				hg_emit_seen(slot, smp_processor_id());
			return;
		}
		/* Scaling set after the first entry (KVM_SET_TSC_KHZ). */
		if (unlikely(slot->tsc_scaling_ratio != l1_ratio ||
			     slot->tsc_offset != l1_offset)) {
			WRITE_ONCE(slot->tsc_scaling_ratio, l1_ratio);
			WRITE_ONCE(slot->tsc_offset, l1_offset);
			hg_emit_seen(slot, smp_processor_id());
		}
		return;
	}
	/*
	 * Refused while the table was full: not retried until reclaim
	 * frees slots or the thread ends (hg_forget_refused()).
	 */
	if (unlikely((unsigned int)tid < PID_MAX_LIMIT &&
		     test_bit(tid, hg_refused_bitmap)))
		return;

	memset(&init, 0, sizeof(init));
	init.tid = tid;
	init.vm_pid = vcpu->kvm->userspace_pid ?: current->tgid;
	init.vcpu_id = vcpu->vcpu_id;
	init.flags = HGCLOCK_VCPU_KVM | HGCLOCK_VCPU_TSC_KNOWN;
	hg_vm_name(vcpu->kvm, init.vm_name, sizeof(init.vm_name));
	init.tsc_offset = l1_offset;
	init.tsc_scaling_ratio = l1_ratio;
	init.tsc_frac_bits = hg_tsc_frac_bits();
	ret = hg_insert(&init, &slot);
	if (!ret)
		hg_emit_seen(slot, smp_processor_id());
	else if (ret == -ENOSPC && (unsigned int)tid < PID_MAX_LIMIT)
		hg_refuse(&init);
	/*
	 * -EEXIST: a TRACK_ADD of this thread won the race since the
	 * bitmap test.  The table is not full and the thread is tracked:
	 * its next entry fills in the vCPU (hg_fill_vcpu()).
	 */
}

static void hg_probe_kvm_entry(void *data, struct kvm_vcpu *vcpu,
			       bool force_immediate_exit)
{
	u64 t0_ns;

	if (static_branch_unlikely(&hg_probe_stats_key)) {
		t0_ns = local_clock();
		hg_kvm_entry(vcpu);
		hg_probe_stat_add(HG_PROBE_STAT_KVM_ENTRY, t0_ns);
		return;
	}
	hg_kvm_entry(vcpu);
}

static void hg_probe_kvm_write_tsc_offset(void *data, unsigned int vcpu_id,
					  __u64 previous_tsc_offset,
					  __u64 next_tsc_offset)
{
	struct hgclock_rec_tsc_offset rec;
	struct hg_slot *slot = hg_current_slot();

	memset(&rec, 0, sizeof(rec));
	rec.tid = current->pid;
	rec.vcpu_id = vcpu_id;
	rec.previous_offset = previous_tsc_offset;
	rec.next_offset = next_tsc_offset;
	rec.tsc_frac_bits = hg_tsc_frac_bits();
	if (slot && slot->vcpu_id == (s32)vcpu_id) {
		rec.vm_pid = slot->vm_pid;
		rec.flags = slot->flags;
		rec.tsc_scaling_ratio = READ_ONCE(slot->tsc_scaling_ratio);
		/* The vCPU thread itself: its slot's offset is ours to set. */
		WRITE_ONCE(slot->tsc_offset, next_tsc_offset);
	} else {
		rec.vm_pid = current->tgid;
		rec.flags &= ~HGCLOCK_VCPU_TSC_KNOWN;
	}
	hgclock_rec_emit(&rec.hdr, HGCLOCK_REC_TSC_OFFSET, sizeof(rec));
}

/*
 * Exit pairing's rate limit for @slot at @now_ns: true if this exit may
 * be recorded.  Only the vCPU thread itself calls it (kvm_cpuid probe,
 * preemption off), so the window fields need no lock.
 *
 * @now_ns must come from one clock for every CPU that never steps back
 * (ktime_get_mono_fast_ns()): the thread moves between host CPUs, and
 * with an unstable sched_clock local_clock() is per CPU and may read a
 * little earlier on the next CPU than the window's start on the last.
 * The unsigned difference would then read as a whole window passed and
 * admit another HGCLOCK_PAIR_MAX_PER_SEC at each such move.
 */
static bool hg_pair_admit(struct hg_slot *slot, u64 now_ns)
{
	if (now_ns - slot->pair_window_start_ns >= HG_PAIR_WINDOW_NS) {
		slot->pair_window_start_ns = now_ns;
		slot->pair_in_window = 0;
	}
	if (slot->pair_in_window < HGCLOCK_PAIR_MAX_PER_SEC) {
		slot->pair_in_window++;
		return true;
	}
	WRITE_ONCE(slot->pair_suppressed, slot->pair_suppressed + 1);
	atomic64_inc(&hg_nr_pair_suppressed);
	return false;
}

/*
 * Every CPUID a guest executes, in the vCPU thread between the exit and
 * the next entry, preemption off.  Only hgclock's leaf, from a tracked
 * vCPU thread of a VM a recorder enabled pairing for, within the rate
 * limit, writes a record: CPUID is unprivileged in the guest, so any
 * guest process could otherwise fill the host CPU's ring, which every VM
 * running there shares.  Anything else costs a compare.  The header's
 * TSC and sched_clock, read here, are the host's side of the pairing:
 * after the guest's first readings, before its second ones.
 */
static void hg_probe_kvm_cpuid(void *data, unsigned int function, unsigned int index,
			       unsigned long rax, unsigned long rbx, unsigned long rcx,
			       unsigned long rdx, bool found, bool used_max_basic)
{
	struct hgclock_rec_exit_host rec;
	struct hg_slot *slot;

	if (likely((function & HGCLOCK_PAIR_LEAF_MASK) != HGCLOCK_PAIR_LEAF_BASE))
		return;
	slot = hg_current_slot();
	if (!slot || slot->vcpu_id < 0 || !READ_ONCE(slot->pair))
		return;
	if (!hg_pair_admit(slot, ktime_get_mono_fast_ns()))
		return;
	memset(&rec, 0, sizeof(rec));
	rec.tid = current->pid;
	rec.vm_pid = READ_ONCE(slot->vm_pid);
	rec.vcpu_id = READ_ONCE(slot->vcpu_id);
	rec.seq = index;
	rec.key = function & ~HGCLOCK_PAIR_LEAF_MASK;
	hgclock_rec_emit(&rec.hdr, HGCLOCK_REC_EXIT_HOST, sizeof(rec));
}

/*
 * KVM wrote a vCPU's kvm-clock page, in the vCPU thread before it enters
 * the guest again.  Without a stable TSC this happens at every vCPU load;
 * each record tells the guest's sched_clock from then on.
 */
static void hg_probe_kvm_pvclock_update(void *data, unsigned int vcpu_id,
					struct pvclock_vcpu_time_info *pvclock)
{
	struct hgclock_rec_pvclock rec;
	struct hg_slot *slot;

	slot = hg_current_slot();
	if (!slot || slot->vcpu_id != (s32)vcpu_id)
		return;
	memset(&rec, 0, sizeof(rec));
	rec.tid = current->pid;
	rec.vm_pid = READ_ONCE(slot->vm_pid);
	rec.vcpu_id = vcpu_id;
	rec.version = pvclock->version;
	rec.tsc_timestamp = pvclock->tsc_timestamp;
	rec.system_time = pvclock->system_time;
	rec.tsc_to_system_mul = pvclock->tsc_to_system_mul;
	rec.tsc_shift = pvclock->tsc_shift;
	rec.flags = pvclock->flags;
	hgclock_rec_emit(&rec.hdr, HGCLOCK_REC_PVCLOCK, sizeof(rec));
}

/* ---- attaching -------------------------------------------------------- */

struct hg_tp {
	const char *name;
	void *probe;
	struct tracepoint *tp;	/* NULL while not attached */
};

static struct hg_tp hg_sched_tps[] = {
	{ "sched_switch", hg_probe_sched_switch },
	{ "sched_migrate_task", hg_probe_sched_migrate_task },
	{ "sched_process_exit", hg_probe_sched_process_exit },
	{ "sched_process_exec", hg_probe_sched_process_exec },
};

static struct hg_tp hg_kvm_tps[] = {
	{ "kvm_entry", hg_probe_kvm_entry },
	{ "kvm_write_tsc_offset", hg_probe_kvm_write_tsc_offset },
};

/* Optional, each on its own: without them vCPU tracking still works. */
static struct hg_tp hg_kvm_opt_tps[] = {
	{ "kvm_cpuid", hg_probe_kvm_cpuid },
	{ "kvm_pvclock_update", hg_probe_kvm_pvclock_update },
};
static bool hg_kvm_opt_attached[ARRAY_SIZE(hg_kvm_opt_tps)];

static void hg_find_core_tp(struct tracepoint *tp, void *priv)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(hg_sched_tps); i++)
		if (!strcmp(tp->name, hg_sched_tps[i].name))
			hg_sched_tps[i].tp = tp;
}

static void hg_detach(struct hg_tp *tps, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		if (tps[i].tp)
			tracepoint_probe_unregister(tps[i].tp, tps[i].probe, NULL);
		tps[i].tp = NULL;
	}
}

/* All or nothing: @tps[].tp are found, register each, unwind on failure. */
static int hg_attach(struct hg_tp *tps, unsigned int n)
{
	unsigned int i;
	int ret;

	for (i = 0; i < n; i++)
		if (!tps[i].tp)
			return -ENOENT;
	for (i = 0; i < n; i++) {
		ret = tracepoint_probe_register(tps[i].tp, tps[i].probe, NULL);
		if (ret)
			goto unwind;
	}
	return 0;
unwind:
	while (i--)
		tracepoint_probe_unregister(tps[i].tp, tps[i].probe, NULL);
	for (i = 0; i < n; i++)
		tps[i].tp = NULL;
	return ret;
}

static void hg_kvm_coming(struct module *mod)
{
	tracepoint_ptr_t *ptrs = mod->tracepoints_ptrs;
	unsigned int i, j;
	int ret;

	if (strcmp(mod->name, "kvm") || hg_kvm_attached)
		return;
	for (i = 0; i < mod->num_tracepoints; i++) {
		struct tracepoint *tp = tracepoint_ptr_deref(&ptrs[i]);

		for (j = 0; j < ARRAY_SIZE(hg_kvm_tps); j++)
			if (!strcmp(tp->name, hg_kvm_tps[j].name))
				hg_kvm_tps[j].tp = tp;
		for (j = 0; j < ARRAY_SIZE(hg_kvm_opt_tps); j++)
			if (!strcmp(tp->name, hg_kvm_opt_tps[j].name))
				hg_kvm_opt_tps[j].tp = tp;
	}
	ret = hg_attach(hg_kvm_tps, ARRAY_SIZE(hg_kvm_tps));
	if (ret) {
		pr_warn("cannot attach to kvm's tracepoints: %d\n", ret);
		return;
	}
	hg_kvm_attached = true;
	for (j = 0; j < ARRAY_SIZE(hg_kvm_opt_tps); j++) {
		ret = hg_attach(&hg_kvm_opt_tps[j], 1);
		WRITE_ONCE(hg_kvm_opt_attached[j], !ret);
		if (ret)
			pr_info("no %s records: %d\n", hg_kvm_opt_tps[j].name, ret);
	}
	pr_info("tracking KVM vCPUs\n");
}

static void hg_kvm_going(struct module *mod)
{
	if (strcmp(mod->name, "kvm") || !hg_kvm_attached)
		return;
	hg_detach(hg_kvm_tps, ARRAY_SIZE(hg_kvm_tps));
	hg_detach(hg_kvm_opt_tps, ARRAY_SIZE(hg_kvm_opt_tps));
	hg_kvm_attached = false;
	memset(hg_kvm_opt_attached, 0, sizeof(hg_kvm_opt_attached));
	/* The tracepoints go with kvm.ko: our probes must be out of them. */
	tracepoint_synchronize_unregister();
	pr_info("kvm unloaded: vCPU discovery stopped\n");
}

static int hg_tp_module_notify(struct notifier_block *nb, unsigned long state,
			       void *data)
{
	struct tp_module *tp_mod = data;

	mutex_lock(&hg_attach_mutex);
	if (state == MODULE_STATE_COMING)
		hg_kvm_coming(tp_mod->mod);
	else if (state == MODULE_STATE_GOING)
		hg_kvm_going(tp_mod->mod);
	mutex_unlock(&hg_attach_mutex);
	return NOTIFY_OK;
}

static struct notifier_block hg_tp_module_nb = {
	.notifier_call = hg_tp_module_notify,
};

bool hgclock_track_kvm_attached(void)
{
	return READ_ONCE(hg_kvm_attached);
}

bool hgclock_track_exit_attached(void)
{
	return READ_ONCE(hg_kvm_opt_attached[0]);
}

bool hgclock_track_pvclock_attached(void)
{
	return READ_ONCE(hg_kvm_opt_attached[1]);
}

/* ---- ioctls ----------------------------------------------------------- */

/*
 * The task with thread id @tid, referenced: in the caller's pid namespace
 * (@caller_ns) or in the initial one, where the table keeps its ids.
 * @init_tid, if not NULL, gets the id in the initial namespace of the pid
 * found, which stays the task's own only as long as it does not exec
 * from a non-leader thread (de_thread() exchanges ids).
 */
static struct task_struct *hg_get_task(pid_t tid, bool caller_ns, pid_t *init_tid)
{
	struct task_struct *task;
	struct pid *pid;

	rcu_read_lock();
	pid = find_pid_ns(tid, caller_ns ? task_active_pid_ns(current) : &init_pid_ns);
	task = pid ? get_pid_task(pid, PIDTYPE_PID) : NULL;
	if (init_tid)
		*init_tid = pid ? pid_nr(pid) : 0;
	rcu_read_unlock();
	return task;
}

/*
 * Following threads and listing them exposes which threads of the machine
 * are vCPUs, where they run and their guests' TSC offsets: the same
 * knowledge perf gives.  Opening the device is not enough (a udev rule may
 * hand it to a group): the file's opener must have been privileged
 * (hgclock_file_privileged()).  Checked before the argument is read.
 */

/* Set or clear every LIVE slot's pairing bit of @vm_pid.  Lock held. */
static void hg_pair_mark_locked(pid_t vm_pid, bool on)
{
	unsigned int i, used = hg_slots_used;

	for (i = 0; i < used; i++)
		if (hg_slots[i].state == HG_SLOT_LIVE && hg_slots[i].vm_pid == vm_pid)
			WRITE_ONCE(hg_slots[i].pair, on);
}

/*
 * Exit pairing on or off for the VM of process @vm_pid, on behalf of
 * @file.  Several files may enable the same VM; it stays enabled until
 * the last of them turns it off or is released.
 */
static int hg_pair_vm_set(const struct file *file, pid_t vm_pid, bool on)
{
	unsigned long irqflags;
	unsigned int i;
	int ret = on ? -ENOSPC : -ENOENT;

	raw_spin_lock_irqsave(&hg_track_lock, irqflags);
	for (i = 0; i < HG_MAX_PAIR_VMS; i++) {
		struct hg_pair_vm *pv = &hg_pair_vms[i];

		if (on && !pv->vm_pid) {
			pv->vm_pid = vm_pid;
			pv->owner = file;
			ret = 0;
			break;
		}
		if (!on && pv->vm_pid == vm_pid && pv->owner == file) {
			pv->vm_pid = 0;
			pv->owner = NULL;
			ret = 0;
			break;
		}
	}
	if (!ret)
		hg_pair_mark_locked(vm_pid, hg_pair_enabled_locked(vm_pid));
	raw_spin_unlock_irqrestore(&hg_track_lock, irqflags);
	return ret;
}

/* @file is going away: the VMs it enabled pairing for lose it. */
void hgclock_track_release(const struct file *file)
{
	unsigned long irqflags;
	unsigned int i;

	raw_spin_lock_irqsave(&hg_track_lock, irqflags);
	for (i = 0; i < HG_MAX_PAIR_VMS; i++) {
		struct hg_pair_vm *pv = &hg_pair_vms[i];
		pid_t vm_pid = pv->vm_pid;

		if (!vm_pid || pv->owner != file)
			continue;
		pv->vm_pid = 0;
		pv->owner = NULL;
		hg_pair_mark_locked(vm_pid, hg_pair_enabled_locked(vm_pid));
	}
	raw_spin_unlock_irqrestore(&hg_track_lock, irqflags);
}

/*
 * Is @task still the thread @tid, alive?  PF_EXITING is set before
 * sched_process_exit fires; de_thread() rewrites task->pid (exchange_tids())
 * before sched_process_exec fires.
 */
static bool hg_task_is(struct task_struct *task, pid_t tid)
{
	return !(READ_ONCE(task->flags) & PF_EXITING) && READ_ONCE(task->pid) == tid;
}

/*
 * TRACK_ADD of @task, thread @tid in the initial pid namespace; the
 * caller holds a reference.
 *
 * The thread may pass sched_process_exit, or exec from a non-leader
 * thread (de_thread() gives it the leader's id and frees @tid), between
 * our lookup and the insert: then nothing would ever remove the slot, and
 * a later thread reusing @tid would inherit it.  Store buffering, drawn:
 *
 *   TRACK_ADD                           exiting / exec'ing thread
 *   hg_insert(): tid bit set            PF_EXITING set / task->pid rewritten
 *   smp_mb()                            full barrier (exit: do_exit()'s
 *                                         atomic_dec_and_test(&signal->live);
 *                                         exec: hg_probe_sched_process_exec())
 *   hg_task_is(): flag and pid          probe: bitmap test, hg_find()
 *
 * Either we see the change and remove the slot, or the probe, which runs
 * after the change, sees the slot and removes it.  The read-side section
 * spans the insert and any removal of ours: the slot cannot be reclaimed
 * and given to another thread before we are done with it.
 */
static long hg_track_add(struct task_struct *task, pid_t tid)
{
	struct hg_slot init, *slot;
	long ret;

	if (!hg_task_is(task, tid))
		return -ENOENT;
	memset(&init, 0, sizeof(init));
	init.tid = tid;
	init.vm_pid = task->tgid;
	init.vcpu_id = -1;
	init.flags = HGCLOCK_VCPU_MANUAL;
	rcu_read_lock();
	ret = hg_insert(&init, &slot);
	if (ret == -ENOSPC)
		hg_refuse(&init);
	if (ret)
		goto out;
	/* Our published slot before the checks: the pairing drawn above. */
	smp_mb();
	if (!hg_task_is(task, tid)) {
		if (hg_remove(slot))
			hg_emit_end(slot);
		ret = -ENOENT;
		goto out;
	}
	if (hg_find(tid) == slot)
		hg_emit_seen(slot, task_cpu(task));
out:
	rcu_read_unlock();
	return ret;
}

long hgclock_ioctl_track(struct file *file, void __user *uarg)
{
	struct hgclock_track req;
	struct task_struct *task;
	long ret = 0;
	pid_t tid;

	if (!hgclock_file_privileged(file))
		return -EPERM;
	ret = hgclock_copy_args(&req, uarg);
	if (ret)
		return ret;
	if (req.reserved || hweight32(req.flags) != 1 ||
	    (req.flags & ~HGCLOCK_TRACK_FLAGS_ALL))
		return -EINVAL;
	if (req.tid <= 0 || req.tid >= PID_MAX_LIMIT)
		return -EINVAL;

	hgclock_track_reclaim();
	task = hg_get_task(req.tid, true, &tid);
	if (!task)
		return -ENOENT;

	switch (req.flags) {
	case HGCLOCK_TRACK_ADD:
		ret = hg_track_add(task, tid);
		break;
	case HGCLOCK_TRACK_REMOVE:
		ret = hg_untrack_tid(task->pid) ? 0 : -ENOENT;
		break;
	case HGCLOCK_TRACK_PAIR_ON:
	case HGCLOCK_TRACK_PAIR_OFF:
		/* A VM is named by its process: the thread group leader. */
		ret = -EINVAL;
		if (thread_group_leader(task))
			ret = hg_pair_vm_set(file, task->pid,
					     req.flags == HGCLOCK_TRACK_PAIR_ON);
		break;
	}
	put_task_struct(task);
	return ret;
}

long hgclock_ioctl_list_vcpus(struct file *file, void __user *uarg)
{
	struct hgclock_list_vcpus req;
	struct hgclock_vcpu_info *infos;
	unsigned int i, used, n = 0;
	long ret = 0;

	if (!hgclock_file_privileged(file))
		return -EPERM;
	ret = hgclock_copy_args(&req, uarg);
	if (ret)
		return ret;
	if (req.reserved[0] || req.reserved[1])
		return -EINVAL;

	/* Pairs with hg_insert()'s release of the high-water mark. */
	used = smp_load_acquire(&hg_slots_used);
	infos = kvcalloc(max(used, 1U), sizeof(*infos), GFP_KERNEL_ACCOUNT);
	if (!infos)
		return -ENOMEM;
	rcu_read_lock();
	for (i = 0; i < used; i++) {
		struct hg_slot *slot = &hg_slots[i];
		struct hgclock_vcpu_info *info = &infos[n];

		/* Pairs with hg_insert()'s release: the fields are set. */
		if (smp_load_acquire(&slot->state) != HG_SLOT_LIVE)
			continue;
		info->tid = slot->tid;
		info->vm_pid = slot->vm_pid;
		info->vcpu_id = slot->vcpu_id;
		info->flags = slot->flags;
		if (READ_ONCE(slot->pair))
			info->flags |= HGCLOCK_VCPU_EXIT_PAIR;
		memcpy(info->vm_name, slot->vm_name, sizeof(info->vm_name));
		info->tsc_offset = READ_ONCE(slot->tsc_offset);
		info->tsc_scaling_ratio = READ_ONCE(slot->tsc_scaling_ratio);
		info->tsc_frac_bits = slot->tsc_frac_bits;
		info->nr_migrations = READ_ONCE(slot->nr_migrations);
		n++;
	}
	rcu_read_unlock();

	/* Where each one is now: outside RCU, a task lookup may sleep. */
	for (i = 0; i < n; i++) {
		struct task_struct *task = hg_get_task(infos[i].tid, false, NULL);

		infos[i].host_cpu = task ? task_cpu(task) : -1;
		if (task)
			put_task_struct(task);
		cond_resched();
	}

	if (req.nr < n) {
		ret = -ENOSPC;
	} else if (n && copy_to_user(u64_to_user_ptr(req.vcpus_ptr), infos,
				     array_size(n, sizeof(*infos)))) {
		ret = -EFAULT;
	}
	kvfree(infos);
	req.nr = n;
	if (ret != -EFAULT && copy_to_user(uarg, &req, sizeof(req)))
		ret = -EFAULT;
	return ret;
}

void hgclock_track_fill_info(struct hgclock_info *info)
{
	info->max_tracked = max_tracked;
	info->nr_untracked = atomic64_read(&hg_nr_refused);
	info->nr_exits_suppressed = atomic64_read(&hg_nr_pair_suppressed);
	if (READ_ONCE(coalesce_stop_us))
		info->features |= HGCLOCK_FEAT_COALESCE;
}

/* ---- init / exit ------------------------------------------------------ */

int hgclock_track_init(void)
{
	int ret;

	if (max_tracked < HG_TRACKED_MIN || max_tracked > HG_TRACKED_MAX) {
		pr_err("max_tracked=%u: want %u..%u\n", max_tracked,
		       HG_TRACKED_MIN, HG_TRACKED_MAX);
		return -EINVAL;
	}
	hg_bucket_bits = ilog2(roundup_pow_of_two(max_tracked));
	ret = -ENOMEM;
	hg_slots = vzalloc(array_size(max_tracked, sizeof(*hg_slots)));
	hg_buckets = kvcalloc(1U << hg_bucket_bits, sizeof(*hg_buckets), GFP_KERNEL);
	hg_tid_bitmap = vzalloc(BITS_TO_LONGS(PID_MAX_LIMIT) * sizeof(long));
	hg_refused_bitmap = vzalloc(BITS_TO_LONGS(PID_MAX_LIMIT) * sizeof(long));
	if (!hg_slots || !hg_buckets || !hg_tid_bitmap || !hg_refused_bitmap)
		goto err_bitmap;

	mutex_lock(&hg_attach_mutex);
	for_each_kernel_tracepoint(hg_find_core_tp, NULL);
	ret = hg_attach(hg_sched_tps, ARRAY_SIZE(hg_sched_tps));
	hg_sched_attached = !ret;
	mutex_unlock(&hg_attach_mutex);
	if (ret) {
		pr_err("cannot attach to the scheduler's tracepoints: %d\n", ret);
		goto err_bitmap;
	}
	/* Calls us back for kvm.ko if it is already loaded. */
	ret = register_tracepoint_module_notifier(&hg_tp_module_nb);
	if (ret)
		goto err_sched;
	schedule_delayed_work(&hg_reclaim_work, HZ);
	hg_probe_stats_init();
	return 0;

err_sched:
	mutex_lock(&hg_attach_mutex);
	hg_detach(hg_sched_tps, ARRAY_SIZE(hg_sched_tps));
	mutex_unlock(&hg_attach_mutex);
	tracepoint_synchronize_unregister();
err_bitmap:
	vfree(hg_refused_bitmap);
	vfree(hg_tid_bitmap);
	kvfree(hg_buckets);
	vfree(hg_slots);
	return ret;
}

void hgclock_track_exit(void)
{
	hg_probe_stats_exit();
	cancel_delayed_work_sync(&hg_reclaim_work);
	/* Calls us back with GOING for kvm.ko: detaches its probes. */
	unregister_tracepoint_module_notifier(&hg_tp_module_nb);
	mutex_lock(&hg_attach_mutex);
	hg_detach(hg_sched_tps, ARRAY_SIZE(hg_sched_tps));
	if (hg_kvm_attached) {
		hg_detach(hg_kvm_tps, ARRAY_SIZE(hg_kvm_tps));
		hg_detach(hg_kvm_opt_tps, ARRAY_SIZE(hg_kvm_opt_tps));
		hg_kvm_attached = false;
		memset(hg_kvm_opt_attached, 0, sizeof(hg_kvm_opt_attached));
	}
	mutex_unlock(&hg_attach_mutex);
	/* No probe runs any more, none will: the table can go. */
	tracepoint_synchronize_unregister();
	vfree(hg_refused_bitmap);
	vfree(hg_tid_bitmap);
	kvfree(hg_buckets);
	vfree(hg_slots);
}
