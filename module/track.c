// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock: tracking vCPU threads on the host.
 *
 * What a guest event's host time and host CPU depend on, recorded in the
 * per-CPU rings as it happens:
 *
 *  - which threads are KVM vCPUs: the first kvm_entry a thread makes
 *    reveals it (VCPU_SEEN, with the vCPU's TSC offset and scaling);
 *  - where each one runs: sched_switch in and out (VCPU_RUN/STOP) and
 *    sched_migrate_task (VCPU_MIGRATE);
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
#include <linux/kvm_host.h>
#include <linux/module.h>
#include <linux/pid.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/threads.h>
#include <linux/tracepoint.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <asm/processor.h>
#include <asm/pvclock-abi.h>

#include "hgclock_internal.h"

static_assert(sizeof(struct hgclock_rec_vcpu) == 40);
static_assert(sizeof(struct hgclock_rec_vcpu_seen) == 80);
static_assert(sizeof(struct hgclock_rec_vcpu_migrate) == 48);
static_assert(sizeof(struct hgclock_rec_tsc_offset) == 72);
static_assert(sizeof(struct hgclock_vcpu_info) == 64);
static_assert(sizeof(struct hgclock_list_vcpus) == 32);
static_assert(sizeof(struct hgclock_track) == 16);
static_assert(sizeof(struct hgclock_rec_pvclock) == 64);

#define HG_MAX_TRACKED	256

enum hg_slot_state {
	HG_SLOT_FREE = 0,
	HG_SLOT_LIVE,
	HG_SLOT_DEAD,	/* untracked; reusable after a grace period */
};

struct hg_slot {
	int state;		/* hg_slot_state, READ_ONCE/smp_store_release */
	pid_t tid;
	pid_t vm_pid;
	s32 vcpu_id;
	u32 flags;
	char vm_name[16];
	u64 tsc_offset;
	u64 tsc_scaling_ratio;
	u32 tsc_frac_bits;
	u64 nr_migrations;
};

static struct hg_slot hg_slots[HG_MAX_TRACKED];
static unsigned int hg_slots_used;	/* high-water mark, only grows */
static unsigned long *hg_tid_bitmap;	/* PID_MAX_LIMIT bits */
static DEFINE_RAW_SPINLOCK(hg_track_lock);
static DEFINE_MUTEX(hg_attach_mutex);	/* probe (un)registration */
static bool hg_kvm_attached;
static bool hg_table_full;		/* insert failed; cleared by reclaim */
static unsigned int hg_nr_live;		/* LIVE slots; under hg_track_lock */
static bool hg_sched_attached;

static inline bool hg_tid_tracked(pid_t tid)
{
	return (unsigned int)tid < PID_MAX_LIMIT && test_bit(tid, hg_tid_bitmap);
}

/* Nothing tracked at all: the scheduler probes stop at one load. */
static inline bool hg_none_tracked(void)
{
	return !READ_ONCE(hg_nr_live);
}

/* Lockless: callers run with preemption disabled (RCU read side). */
static struct hg_slot *hg_find(pid_t tid)
{
	unsigned int i, used = smp_load_acquire(&hg_slots_used);

	for (i = 0; i < used; i++) {
		struct hg_slot *slot = &hg_slots[i];

		if (smp_load_acquire(&slot->state) == HG_SLOT_LIVE &&
		    READ_ONCE(slot->tid) == tid)
			return slot;
	}
	return NULL;
}

/*
 * Claim a slot for @tid, fill it with @init and publish it.  Any context;
 * returns NULL when the table is full or @tid is already tracked.
 */
static struct hg_slot *hg_insert(const struct hg_slot *init)
{
	struct hg_slot *slot = NULL;
	unsigned long irqflags;
	unsigned int i;

	raw_spin_lock_irqsave(&hg_track_lock, irqflags);
	if (hg_find(init->tid))
		goto out;
	for (i = 0; i < HG_MAX_TRACKED; i++) {
		if (hg_slots[i].state == HG_SLOT_FREE) {
			slot = &hg_slots[i];
			break;
		}
	}
	if (!slot)
		goto out;
	*slot = *init;
	slot->state = HG_SLOT_FREE;
	/* Fields before the state: lockless readers check the state first. */
	smp_store_release(&slot->state, HG_SLOT_LIVE);
	if (i >= hg_slots_used)
		smp_store_release(&hg_slots_used, i + 1);
	set_bit(init->tid, hg_tid_bitmap);
	WRITE_ONCE(hg_nr_live, hg_nr_live + 1);
out:
	raw_spin_unlock_irqrestore(&hg_track_lock, irqflags);
	return slot;
}

/*
 * The slot of the thread a KVM tracepoint fires in (KVM's probes run in
 * the vCPU thread), or NULL when it is not tracked: a bitmap test first,
 * so untracked threads never search the table.
 */
static struct hg_slot *hg_current_slot(void)
{
	return hg_tid_tracked(current->pid) ? hg_find(current->pid) : NULL;
}

/* Any context.  The slot stays DEAD until hgclock_track_reclaim(). */
static void hg_remove(struct hg_slot *slot)
{
	unsigned long irqflags;

	raw_spin_lock_irqsave(&hg_track_lock, irqflags);
	if (slot->state == HG_SLOT_LIVE) {
		clear_bit(slot->tid, hg_tid_bitmap);
		smp_store_release(&slot->state, HG_SLOT_DEAD);
		WRITE_ONCE(hg_nr_live, hg_nr_live - 1);
	}
	raw_spin_unlock_irqrestore(&hg_track_lock, irqflags);
}

/* Process context (the periodic snapshot work, ioctls, exit). */
void hgclock_track_reclaim(void)
{
	bool any = false;
	unsigned int i;

	for (i = 0; i < HG_MAX_TRACKED; i++)
		if (READ_ONCE(hg_slots[i].state) == HG_SLOT_DEAD)
			any = true;
	if (!any) {
		WRITE_ONCE(hg_table_full, false);
		return;
	}
	/* Every probe that could still hold a DEAD slot has returned. */
	synchronize_rcu();
	raw_spin_lock_irq(&hg_track_lock);
	for (i = 0; i < HG_MAX_TRACKED; i++)
		if (hg_slots[i].state == HG_SLOT_DEAD)
			hg_slots[i].state = HG_SLOT_FREE;
	raw_spin_unlock_irq(&hg_track_lock);
	WRITE_ONCE(hg_table_full, false);
}

/* ---- records ---------------------------------------------------------- */

static void hg_emit_vcpu(const struct hg_slot *slot, u16 type)
{
	struct hgclock_rec_vcpu rec;

	memset(&rec, 0, sizeof(rec));
	rec.tid = slot->tid;
	rec.vm_pid = slot->vm_pid;
	rec.vcpu_id = slot->vcpu_id;
	hgclock_rec_emit(&rec.hdr, type, sizeof(rec));
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

/* ---- probes ----------------------------------------------------------- */

static void hg_probe_sched_switch(void *data, bool preempt,
				  struct task_struct *prev,
				  struct task_struct *next,
				  unsigned int prev_state)
{
	struct hg_slot *slot;

	if (likely(hg_none_tracked()))
		return;
	if (unlikely(hg_tid_tracked(prev->pid))) {
		slot = hg_find(prev->pid);
		if (slot)
			hg_emit_vcpu(slot, HGCLOCK_REC_VCPU_STOP);
	}
	if (unlikely(hg_tid_tracked(next->pid))) {
		slot = hg_find(next->pid);
		if (slot)
			hg_emit_vcpu(slot, HGCLOCK_REC_VCPU_RUN);
	}
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

static void hg_probe_sched_process_exit(void *data, struct task_struct *p)
{
	struct hg_slot *slot;

	if (likely(hg_none_tracked() || !hg_tid_tracked(p->pid)))
		return;
	slot = hg_find(p->pid);
	if (!slot)
		return;
	/*
	 * Out of the table first, then the record: a reader that has seen
	 * the EXIT record finds the thread gone from LIST_VCPUS too.  The
	 * DEAD slot keeps its fields until a grace period after this probe.
	 */
	hg_remove(slot);
	hg_emit_vcpu(slot, HGCLOCK_REC_VCPU_EXIT);
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
 * Every VM entry, in the vCPU thread with interrupts off.  A tracked
 * thread costs the bitmap test, a table scan and two compares.
 */
static void hg_probe_kvm_entry(void *data, struct kvm_vcpu *vcpu,
			       bool force_immediate_exit)
{
	pid_t tid = current->pid;
	struct hg_slot init, *slot;

	/* A full table is not retried on every entry: reclaim clears it. */
	if (unlikely(READ_ONCE(hg_table_full)) && !hg_tid_tracked(tid))
		return;
	if (likely(hg_tid_tracked(tid))) {
		slot = hg_find(tid);
		/* Scaling set after the first entry (KVM_SET_TSC_KHZ). */
		if (slot && unlikely(slot->tsc_scaling_ratio !=
				     vcpu->arch.tsc_scaling_ratio ||
				     slot->tsc_offset != vcpu->arch.tsc_offset)) {
			WRITE_ONCE(slot->tsc_scaling_ratio, vcpu->arch.tsc_scaling_ratio);
			WRITE_ONCE(slot->tsc_offset, vcpu->arch.tsc_offset);
			hg_emit_seen(slot, smp_processor_id());
		}
		return;
	}

	memset(&init, 0, sizeof(init));
	init.tid = tid;
	init.vm_pid = vcpu->kvm->userspace_pid ?: current->tgid;
	init.vcpu_id = vcpu->vcpu_id;
	init.flags = HGCLOCK_VCPU_KVM | HGCLOCK_VCPU_TSC_KNOWN;
	hg_vm_name(vcpu->kvm, init.vm_name, sizeof(init.vm_name));
	init.tsc_offset = vcpu->arch.tsc_offset;
	init.tsc_scaling_ratio = vcpu->arch.tsc_scaling_ratio;
	init.tsc_frac_bits = hg_tsc_frac_bits();
	slot = hg_insert(&init);
	if (slot)
		hg_emit_seen(slot, smp_processor_id());
	else
		WRITE_ONCE(hg_table_full, true);
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
 * Every CPUID a guest executes, in the vCPU thread between the exit and
 * the next entry, preemption off.  Only hgclock's leaf from a tracked
 * vCPU thread writes a record; anything else costs a compare.  The
 * header's TSC and sched_clock, read here, are the host's side of the
 * pairing: after the guest's first readings, before its second ones.
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
	if (!slot || slot->vcpu_id < 0)
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
 */
static struct task_struct *hg_get_task(pid_t tid, bool caller_ns)
{
	struct task_struct *task;
	struct pid *pid;

	rcu_read_lock();
	pid = find_pid_ns(tid, caller_ns ? task_active_pid_ns(current) : &init_pid_ns);
	task = pid ? get_pid_task(pid, PIDTYPE_PID) : NULL;
	rcu_read_unlock();
	return task;
}

/*
 * Following threads and listing them exposes which threads of the machine
 * are vCPUs, where they run and their guests' TSC offsets: the same
 * knowledge perf gives.  Opening the device is not enough (a udev rule may
 * hand it to a group), the caller also needs CAP_PERFMON, or CAP_SYS_ADMIN
 * on kernels and setups where perfmon_capable() falls back to it.
 * Checked before the argument is read.
 */
static bool hg_track_permitted(void)
{
	return perfmon_capable();
}

long hgclock_ioctl_track(void __user *uarg)
{
	struct hgclock_track req;
	struct task_struct *task;
	struct hg_slot init, *slot;
	long ret = 0;

	if (!hg_track_permitted())
		return -EPERM;
	if (copy_from_user(&req, uarg, sizeof(req)))
		return -EFAULT;
	if (req.size != sizeof(req) || req.reserved ||
	    (req.flags != HGCLOCK_TRACK_ADD && req.flags != HGCLOCK_TRACK_REMOVE))
		return -EINVAL;
	if (req.tid <= 0 || req.tid >= PID_MAX_LIMIT)
		return -EINVAL;

	hgclock_track_reclaim();
	task = hg_get_task(req.tid, true);
	if (!task)
		return -ENOENT;

	rcu_read_lock();
	if (req.flags == HGCLOCK_TRACK_REMOVE) {
		slot = hg_find(task->pid);
		if (!slot) {
			ret = -ENOENT;
		} else {
			/* As at exit: gone from the table before the record. */
			hg_remove(slot);
			hg_emit_vcpu(slot, HGCLOCK_REC_VCPU_EXIT);
		}
		goto out;
	}
	memset(&init, 0, sizeof(init));
	init.tid = task->pid;
	init.vm_pid = task->tgid;
	init.vcpu_id = -1;
	init.flags = HGCLOCK_VCPU_MANUAL;
	if (hg_find(init.tid)) {
		ret = -EEXIST;
	} else {
		slot = hg_insert(&init);
		if (!slot)
			ret = -ENOSPC;
		else
			hg_emit_seen(slot, task_cpu(task));
	}
out:
	rcu_read_unlock();
	put_task_struct(task);
	return ret;
}

long hgclock_ioctl_list_vcpus(void __user *uarg)
{
	struct hgclock_list_vcpus req;
	struct hgclock_vcpu_info *infos;
	unsigned int i, n = 0;
	long ret = 0;

	if (!hg_track_permitted())
		return -EPERM;
	if (copy_from_user(&req, uarg, sizeof(req)))
		return -EFAULT;
	if (req.size != sizeof(req) || req.reserved[0] || req.reserved[1])
		return -EINVAL;

	infos = kcalloc(HG_MAX_TRACKED, sizeof(*infos), GFP_KERNEL);
	if (!infos)
		return -ENOMEM;
	rcu_read_lock();
	for (i = 0; i < smp_load_acquire(&hg_slots_used); i++) {
		struct hg_slot *slot = &hg_slots[i];
		struct hgclock_vcpu_info *info = &infos[n];

		if (smp_load_acquire(&slot->state) != HG_SLOT_LIVE)
			continue;
		info->tid = slot->tid;
		info->vm_pid = slot->vm_pid;
		info->vcpu_id = slot->vcpu_id;
		info->flags = slot->flags;
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
		struct task_struct *task = hg_get_task(infos[i].tid, false);

		infos[i].host_cpu = task ? task_cpu(task) : -1;
		if (task)
			put_task_struct(task);
	}

	if (req.nr < n) {
		ret = -ENOSPC;
	} else if (n && copy_to_user(u64_to_user_ptr(req.vcpus_ptr), infos,
				     n * sizeof(*infos))) {
		ret = -EFAULT;
	}
	kfree(infos);
	req.nr = n;
	if (ret != -EFAULT && copy_to_user(uarg, &req, sizeof(req)))
		ret = -EFAULT;
	return ret;
}

/* ---- init / exit ------------------------------------------------------ */

int hgclock_track_init(void)
{
	int ret;

	hg_tid_bitmap = vzalloc(BITS_TO_LONGS(PID_MAX_LIMIT) * sizeof(long));
	if (!hg_tid_bitmap)
		return -ENOMEM;

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
	return 0;

err_sched:
	mutex_lock(&hg_attach_mutex);
	hg_detach(hg_sched_tps, ARRAY_SIZE(hg_sched_tps));
	mutex_unlock(&hg_attach_mutex);
	tracepoint_synchronize_unregister();
err_bitmap:
	vfree(hg_tid_bitmap);
	return ret;
}

void hgclock_track_exit(void)
{
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
	vfree(hg_tid_bitmap);
}
