// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock: per-CPU record rings, shared with user space by mmap, one set
 * per open file (a session).
 *
 * Sessions.  Every open file of /dev/hgclock is a session with its own
 * rings, consumer positions, watermark and ring size, so that two
 * recorders (two users tracing two guests) run side by side and neither
 * can blind, drain or slow the other.  Producers write each record into
 * every session's ring of their CPU; tracking records (types 16 to 31:
 * which threads are vCPUs, where they run, their guests' TSC offsets)
 * only into sessions whose opener had CAP_PERFMON or CAP_SYS_ADMIN when
 * it opened the device (hgclock_file_privileged(): file credentials).
 * PRODUCE's test records go to the caller's session only.
 *
 * A session's rings are made when the file first maps them.  The ring
 * mapping is the meta area (struct hgclock_meta, then one struct
 * hgclock_meta_cpu per possible CPU) followed by one data area of
 * ring_size bytes per possible CPU, as user space sees it.  The meta area
 * alone (the per-CPU conversions of the zero-syscall clock) costs a page
 * or two; data areas exist only once the file maps its consumer area (it
 * reads records), and only for the CPUs brought up since load: each is
 * its own allocation, made then and by a CPU hotplug PREPARE callback for
 * a CPU coming up later.  Pages enter a mapping when user space first
 * touches them (hg_vm_fault()).  The total over all sessions is capped
 * (ring_max_mb).  User space maps the rings read-only; the consumer
 * positions (one __u64 per CPU) are the only thing it writes.
 *
 * Producer: only ever the CPU that owns the ring, with interrupts
 * disabled, so writers on one ring never nest or race.  Positions are
 * free-running byte counts; a record never wraps: when it does not fit
 * before the end, a PAD record fills the end and the record starts the
 * next lap.
 *
 * Ordering (Documentation/ring.rst draws the same picture):
 *
 *   kernel (producer, CPU n)              user (consumer)
 *   tail = load_acquire(&consumer[n])     head = load_acquire(&meta.cpu[n].head)
 *   write records in [head, tail + size)  read records in [tail, head)
 *   store_release(&meta.cpu[n].head, h)   store_release(&consumer[n], t)
 *
 * The producer's acquire of the tail pairs with the consumer's release of
 * it, so the consumer has finished reading bytes before they are
 * overwritten; the consumer's acquire of the head pairs with the
 * producer's release, so the bytes of a record are visible before the head
 * that covers them.
 *
 * The tail is untrusted: one more than ring_size behind the head, or ahead
 * of it, makes the ring count as full (records are lost and counted); the
 * kernel never reads the data area back, so a bad tail cannot hurt it.
 *
 * Lifetime: sessions are on an RCU list and each publishes its rings
 * through an RCU pointer.  Producers run with interrupts off, an RCU
 * read-side section.  A session leaves the list at release (no mapping is
 * left then: each holds a reference on the file) and is freed after a
 * grace period, by a work item (queue_rcu_work(): vfree() may sleep, an
 * RCU callback may not); replacing a session's rings (RING_CONFIG) is refused
 * while they are mapped, swaps the pointer under hg_ring_mutex and waits
 * for a grace period before freeing the old ones with only the session's
 * config_mutex held.  hg_ring_mutex serialises the list, ring creation and
 * replacement, data areas, mapping counts; it is never taken by
 * producers.  The CPU hotplug lock, where both are taken, is outside it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/capability.h>
#include <linux/cpu.h>
#include <linux/cpuhotplug.h>
#include <linux/cpumask.h>
#include <linux/cred.h>
#include <linux/irq_work.h>
#include <linux/log2.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/pfn_t.h>
#include <linux/rculist.h>
#include <linux/rcupdate.h>
#include <linux/slab.h>
#include <linux/trace_clock.h>
#include <linux/uaccess.h>
#include <linux/version.h>
#include <linux/vmalloc.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <asm/msr.h>
#include <asm/tsc.h>

#include "hgclock_internal.h"

static_assert(sizeof(struct hgclock_meta) == 128);
static_assert(sizeof(struct hgclock_meta_cpu) == 72);
static_assert(sizeof(struct hgclock_conversion) == 48);
static_assert(sizeof(struct hgclock_rec_header) == 24);
static_assert(sizeof(struct hgclock_ring_config) == HGCLOCK_RING_CONFIG_SIZE_VER0);

#define HG_RING_MIN	(8ULL << 10)
#define HG_RING_MAX	(64ULL << 20)

/* Records of these types say which threads are vCPUs: privileged only. */
#define HG_REC_TRACKING_FIRST	16

static unsigned int ring_size_kb = 256;
module_param(ring_size_kb, uint, 0444);
MODULE_PARM_DESC(ring_size_kb, "bytes per CPU ring of a new session, in KiB (power of two, 8..65536)");

static unsigned int ring_max_mb;
module_param(ring_max_mb, uint, 0444);
MODULE_PARM_DESC(ring_max_mb,
		 "ring memory at most, in MiB, all sessions and CPUs (0: a 32nd of RAM, at least 64)");
static u64 hg_ring_max_bytes;		/* from ring_max_mb, set at load */
static u64 hg_ring_total_bytes;		/* all sessions; under hg_ring_mutex */

/*
 * Ring memory of openers without CAP_SYS_ADMIN (the sessions counted per
 * user), so that no user of the device can take the recorder's memory:
 * each real uid at most ring_user_max_mb, and all of them together at
 * most ring_max_mb less one session's rings at ring_size_kb on every
 * online CPU at load (hg_ring_priv_reserve_bytes), which only
 * CAP_SYS_ADMIN openers may use.
 */
static unsigned int ring_user_max_mb;
module_param(ring_user_max_mb, uint, 0444);
MODULE_PARM_DESC(ring_user_max_mb,
		 "ring memory per user without CAP_SYS_ADMIN, in MiB, at most ring_max_mb (0: a quarter of ring_max_mb)");
static u64 hg_ring_user_max_bytes;	/* from ring_user_max_mb, set at load */
static u64 hg_ring_priv_reserve_bytes;	/* set at load */
static u64 hg_ring_unpriv_bytes;	/* all counted users; under hg_ring_mutex */

/*
 * Every producer walks the whole session list with interrupts off, so its
 * length is bounded: max_sessions open files in all, max_sessions_per_user
 * per real uid of the opener unless the opener had CAP_SYS_ADMIN.
 */
static unsigned int max_sessions = 64;
module_param(max_sessions, uint, 0444);
MODULE_PARM_DESC(max_sessions, "open files of /dev/hgclock at most, 1..1024 (default 64)");
static unsigned int max_sessions_per_user = 16;
module_param(max_sessions_per_user, uint, 0444);
MODULE_PARM_DESC(max_sessions_per_user,
		 "open files of /dev/hgclock per user without CAP_SYS_ADMIN, 1..max_sessions (default 16)");
#define HG_SESSIONS_MAX		1024U
static unsigned int hg_nr_sessions;	/* on hg_sessions; under hg_ring_mutex */
/* Sessions freed a grace period after release (queue_rcu_work()). */
static struct workqueue_struct *hg_free_wq;

/* CPUs brought up since load: they have (or should have) data areas. */
static struct cpumask hg_ring_cpus;	/* under hg_ring_mutex */
static enum cpuhp_state hg_ring_cpuhp_state;

/*
 * Ring memory: charged to the caller's memory cgroup, no warning and no
 * OOM kill when it cannot be had: the caller gets an error instead.
 */
#define HG_RING_GFP	(GFP_KERNEL_ACCOUNT | __GFP_ZERO | __GFP_NOWARN | __GFP_RETRY_MAYFAIL)

/* Kernel-private per-CPU producer state; only its CPU touches it. */
struct hg_kcpu {
	u64 head;
	u64 lost_pending;	/* lost since the last LOST record written */
	u64 lost_total;
};

struct hg_ring {
	size_t area_size;		/* the ring mapping: meta + every CPU's data */
	size_t meta_size;
	u64 ring_size;			/* power of two */
	struct hgclock_meta *meta;	/* vmalloc_user() */
	__u64 *consumer;		/* vmalloc_user(), user-writable */
	size_t consumer_size;
	struct hg_kcpu *kcpu;		/* nr_cpu_ids entries */
	/*
	 * nr_cpu_ids data areas, NULL: none.  Set (release) under
	 * hg_ring_mutex, read by producers and the fault handler.
	 */
	void **data;
	bool consuming;			/* data areas wanted: release/acquire */
	/* Under hg_ring_mutex: */
	u64 bytes;			/* what this ring takes, in hg_ring_total_bytes */
	/*
	 * The session's hg_user (NULL: not counted per user), whose
	 * ring_bytes include @bytes.  Only used under hg_ring_mutex while
	 * the ring is its session's (the session holds the hg_user): the
	 * charge is dropped (hg_ring_uncharge()) before the ring leaves it.
	 */
	struct hg_user *user;
	unsigned int nr_ring_maps;
	unsigned int nr_consumer_maps;
};

/*
 * One real uid's sessions whose opener lacked CAP_SYS_ADMIN: shared by
 * them, made by the first one's open, freed by the last one's release.
 * Under hg_ring_mutex.
 */
struct hg_user {
	kuid_t uid;
	unsigned int nr_sessions;
	u64 ring_bytes;			/* their rings, in hg_ring_unpriv_bytes */
};

struct hg_session {
	struct list_head node;		/* on hg_sessions, under hg_ring_mutex */
	struct hg_ring __rcu *ring;	/* NULL until the file maps it */
	bool tracking;			/* receives tracking records */
	bool wake;			/* a producer asked for a wake-up */
	u64 ring_size;			/* of the next rings; under hg_ring_mutex */
	u64 watermark;			/* bytes; READ_ONCE from producers */
	wait_queue_head_t wq;
	/*
	 * The opener's real uid's sessions and ring memory; NULL when the
	 * opener had CAP_SYS_ADMIN (counted only in the totals).  Set at
	 * open, put at release.
	 */
	struct hg_user *user;
	/*
	 * Serialises this session's RING_CONFIG across the grace period
	 * after a replacement (taken outside the CPU hotplug lock and
	 * hg_ring_mutex, held alone while waiting), so that each session
	 * has at most one old ring waiting to be freed.
	 */
	struct mutex config_mutex;
	struct rcu_work free_work;	/* after release, a grace period */
};

static LIST_HEAD(hg_sessions);
static DEFINE_MUTEX(hg_ring_mutex);

/*
 * The conversion last published on each CPU, with its own sequence count
 * (written by that CPU with interrupts off): what CHANGED is judged
 * against, and what a new session's meta area starts with.
 */
struct hg_last_conv {
	u32 seq;
	struct hgclock_conversion conv;
};
static DEFINE_PER_CPU(struct hg_last_conv, hg_last_conv);

/*
 * The public clock (/dev/hgclock-clock): one meta area for everyone,
 * laid out as a session's (ring_size 0: no data areas), holding only the
 * per-CPU conversions and online flags.  Each CPU writes its own slot's
 * conversion (hgclock_ring_publish_conv(), interrupts off, sequence
 * count), the hotplug callbacks its online flag.  Allocated by
 * hgclock_ring_init() before any producer starts, freed by
 * hgclock_ring_exit() after they stopped and the device is gone (a
 * mapping holds the file, the file the module).
 */
static struct hgclock_meta *hg_clock_meta;

/*
 * Producers may run where waking a task is not allowed (inside the
 * scheduler's tracepoints, later): they mark the session and raise an
 * irq_work, which wakes the marked sessions' poll()ers from interrupt
 * context.
 */
static void hg_wake_fn(struct irq_work *work)
{
	struct hg_session *sess;

	rcu_read_lock();
	list_for_each_entry_rcu(sess, &hg_sessions, node) {
		if (READ_ONCE(sess->wake)) {
			WRITE_ONCE(sess->wake, false);
			/* With a key: epoll's callback filters on it. */
			wake_up_interruptible_poll(&sess->wq, EPOLLIN | EPOLLRDNORM);
		}
	}
	rcu_read_unlock();
}

static struct irq_work hg_wake_work;

static struct hgclock_meta_cpu *hg_meta_cpu_slot(struct hgclock_meta *meta,
						 unsigned int cpu)
{
	return (void *)meta + sizeof(*meta) + cpu * sizeof(struct hgclock_meta_cpu);
}

static size_t hg_meta_size(void)
{
	return PAGE_ALIGN(sizeof(struct hgclock_meta) +
			  nr_cpu_ids * sizeof(struct hgclock_meta_cpu));
}

/* A meta area's header: a session's, or the public clock's (sizes 0). */
static void hg_meta_init(struct hgclock_meta *meta, u64 ring_size, u64 consumer_size)
{
	meta->magic = HGCLOCK_META_MAGIC;
	meta->abi_major = HGCLOCK_ABI_MAJOR;
	meta->abi_minor = HGCLOCK_ABI_MINOR;
	meta->meta_size = hg_meta_size();
	meta->header_size = sizeof(struct hgclock_meta);
	meta->cpu_slot_size = sizeof(struct hgclock_meta_cpu);
	meta->nr_cpus = nr_cpu_ids;
	meta->ring_size = ring_size;
	meta->consumer_size = consumer_size;
	meta->tsc_khz = tsc_khz;
}

static size_t hg_consumer_size(void)
{
	return PAGE_ALIGN(nr_cpu_ids * sizeof(__u64));
}

/*
 * Whether @bytes more ring memory for a session of @user (NULL: a
 * CAP_SYS_ADMIN opener's) stays under the caps: 0 or -ENOSPC.
 * hg_ring_mutex held, up to the hg_ring_charge() that takes it.
 */
static int hg_ring_may_charge(const struct hg_user *user, u64 bytes)
{
	lockdep_assert_held(&hg_ring_mutex);
	if (hg_ring_total_bytes + bytes > hg_ring_max_bytes)
		return -ENOSPC;
	if (user && (user->ring_bytes + bytes > hg_ring_user_max_bytes ||
		     hg_ring_unpriv_bytes + bytes >
		     hg_ring_max_bytes - hg_ring_priv_reserve_bytes))
		return -ENOSPC;
	return 0;
}

/* @bytes of @ring's memory into every count it belongs to. */
static void hg_ring_charge(struct hg_ring *ring, u64 bytes)
{
	lockdep_assert_held(&hg_ring_mutex);
	ring->bytes += bytes;
	hg_ring_total_bytes += bytes;
	if (ring->user) {
		ring->user->ring_bytes += bytes;
		hg_ring_unpriv_bytes += bytes;
	}
}

/* All of @ring's memory out of the counts (it is freed, or soon). */
static void hg_ring_uncharge(struct hg_ring *ring)
{
	lockdep_assert_held(&hg_ring_mutex);
	hg_ring_total_bytes -= ring->bytes;
	if (ring->user) {
		ring->user->ring_bytes -= ring->bytes;
		hg_ring_unpriv_bytes -= ring->bytes;
	}
	ring->bytes = 0;
}

/*
 * @cpu's data area in @ring, hg_ring_mutex held.  -ENOSPC past the cap,
 * -ENOMEM when the memory cannot be had; that CPU's records are then
 * counted as lost in this session.  Published with a release store:
 * producers and the fault handler read it without the mutex.
 */
static int hg_ring_add_cpu(struct hg_ring *ring, unsigned int cpu)
{
	void *data;
	int ret;

	lockdep_assert_held(&hg_ring_mutex);
	if (ring->data[cpu])
		return 0;
	ret = hg_ring_may_charge(ring->user, ring->ring_size);
	if (ret)
		return ret;
	data = __vmalloc(ring->ring_size, HG_RING_GFP);
	if (!data)
		return -ENOMEM;
	hg_ring_charge(ring, ring->ring_size);
	/* The zeroed area before its pointer: pairs with the acquires. */
	smp_store_release(&ring->data[cpu], data);
	return 0;
}

/* Data areas for every CPU brought up, and producers may fill them. */
static int hg_ring_start_consuming(struct hg_ring *ring)
{
	unsigned int cpu;
	int ret;

	lockdep_assert_held(&hg_ring_mutex);
	if (ring->consuming)
		return 0;
	for_each_cpu(cpu, &hg_ring_cpus) {
		ret = hg_ring_add_cpu(ring, cpu);
		if (ret)
			return ret;
	}
	/* Pairs with the producers' acquire: the areas are there. */
	smp_store_release(&ring->consuming, true);
	return 0;
}

static void hg_ring_free(struct hg_ring *ring)
{
	unsigned int cpu;

	if (!ring)
		return;
	if (ring->data)
		for (cpu = 0; cpu < nr_cpu_ids; cpu++)
			vfree(ring->data[cpu]);
	kfree(ring->data);
	vfree(ring->consumer);
	vfree(ring->meta);
	kfree(ring->kcpu);
	kfree(ring);
}

/* hg_ring_mutex held: the ring's memory leaves the counts, then the ring. */
static void hg_ring_drop(struct hg_ring *ring)
{
	lockdep_assert_held(&hg_ring_mutex);
	if (ring)
		hg_ring_uncharge(ring);
	hg_ring_free(ring);
}

/* CPU @cpu's published conversion, copied under its sequence count. */
static void hg_copy_last_conv(unsigned int cpu, struct hgclock_conversion *conv)
{
	struct hg_last_conv *last = per_cpu_ptr(&hg_last_conv, cpu);
	u32 seq;

	do {
		seq = READ_ONCE(last->seq);
		/* The count before the fields (the writer's smp_wmb). */
		smp_rmb();
		*conv = last->conv;
		/* The fields before the count we compare with. */
		smp_rmb();
	} while ((seq & 1) || seq != READ_ONCE(last->seq));
}

/*
 * New rings of @ring_size bytes per CPU for a session of @user, meta
 * area only (data areas come with hg_ring_start_consuming()), starting
 * with every CPU's published conversion.  hg_ring_mutex and the CPU
 * hotplug lock held, so that the online flags hold still.
 * ERR_PTR(-ENOSPC) past a cap, ERR_PTR(-ENOMEM) without memory.
 */
static struct hg_ring *hg_ring_alloc(u64 ring_size, struct hg_user *user)
{
	struct hg_ring *ring;
	unsigned int cpu;
	int ret;

	lockdep_assert_held(&hg_ring_mutex);
	ret = hg_ring_may_charge(user, hg_meta_size() + hg_consumer_size());
	if (ret)
		return ERR_PTR(ret);
	ring = kzalloc(sizeof(*ring), GFP_KERNEL_ACCOUNT);
	if (!ring)
		return ERR_PTR(-ENOMEM);
	ring->user = user;
	ring->ring_size = ring_size;
	ring->meta_size = hg_meta_size();
	ring->area_size = ring->meta_size + nr_cpu_ids * ring_size;
	ring->consumer_size = hg_consumer_size();

	ring->kcpu = kcalloc(nr_cpu_ids, sizeof(*ring->kcpu), GFP_KERNEL_ACCOUNT);
	ring->data = kcalloc(nr_cpu_ids, sizeof(*ring->data), GFP_KERNEL_ACCOUNT);
	/* All areas come zeroed: all heads and tails start at 0. */
	ring->meta = vmalloc_user(ring->meta_size);
	ring->consumer = vmalloc_user(ring->consumer_size);
	if (!ring->kcpu || !ring->data || !ring->meta || !ring->consumer) {
		hg_ring_free(ring);
		return ERR_PTR(-ENOMEM);
	}
	hg_ring_charge(ring, ring->meta_size + ring->consumer_size);

	hg_meta_init(ring->meta, ring_size, ring->consumer_size);
	for_each_online_cpu(cpu) {
		struct hgclock_meta_cpu *slot = hg_meta_cpu_slot(ring->meta, cpu);

		slot->online = 1;
		/*
		 * Nobody maps these rings yet, so no sequence count is
		 * needed; a snapshot racing us republishes (even count).
		 */
		hg_copy_last_conv(cpu, &slot->conv);
	}
	return ring;
}

/*
 * Put @len bytes at *@head if they fit in *@space, padding to the end of
 * the lap first when they would wrap.  Producer context.
 */
static bool hg_put(struct hg_ring *ring, void *data, u64 *head, u64 *space,
		   const void *rec, u32 len)
{
	u64 off = *head & (ring->ring_size - 1);

	if (off + len > ring->ring_size) {
		u64 pad = ring->ring_size - off;
		struct hgclock_rec_header *hdr = data + off;

		if (*space < pad + len)
			return false;
		/* Only type and size are defined in a PAD record. */
		hdr->type = HGCLOCK_REC_PAD;
		hdr->size = 0;
		*head += pad;
		*space -= pad;
		off = 0;
	} else if (*space < len) {
		return false;
	}
	memcpy(data + off, rec, len);
	*head += len;
	*space -= len;
	return true;
}

void hgclock_rec_init(struct hgclock_rec_header *rec, u16 type, u16 size)
{
	rec->type = type;
	rec->size = size;
	rec->cpu = smp_processor_id();
	rec->tsc = rdtsc_ordered();
	rec->sched_clock_ns = trace_clock_local();
}

/*
 * Stamps @rec's header (this CPU, its TSC and sched_clock) and writes it
 * to this CPU's rings, interrupts off from the stamp to the write: nothing
 * else is written to these rings in between, so each ring holds its
 * records in the order of their stamps (but for the STOP records of
 * hgclock_rec_emit_stamped(): see struct hgclock_rec_vcpu).  Any context; the caller has
 * filled the body.  False when a session reading records lost it.
 */
bool hgclock_rec_emit(struct hgclock_rec_header *rec, u16 type, u16 size)
{
	unsigned long irqflags;
	bool written;

	local_irq_save(irqflags);
	hgclock_rec_init(rec, type, size);
	written = hgclock_ring_write(rec);
	local_irq_restore(irqflags);
	return written;
}

/*
 * Writes @rec, stamped by its caller (a STOP kept until the thread runs
 * again, track.c), to this CPU's rings.  Any context.
 */
bool hgclock_rec_emit_stamped(struct hgclock_rec_header *rec)
{
	unsigned long irqflags;
	bool written;

	local_irq_save(irqflags);
	written = hgclock_ring_write(rec);
	local_irq_restore(irqflags);
	return written;
}

/*
 * Write one record to this CPU's ring of @sess.  Interrupts disabled.  A
 * record that does not fit is counted as lost; the next record that does
 * fit is preceded by a LOST record, so the stream says where the gap is.
 * While a LOST record is pending and does not fit, nothing else is
 * written.  A session that does not read records (no consumer mapping
 * yet) gets nothing and loses nothing (true).
 */
static bool hg_session_write(struct hg_session *sess, struct hgclock_rec_header *rec)
{
	unsigned int cpu = smp_processor_id();
	struct hgclock_meta_cpu *slot;
	struct hg_ring *ring;
	struct hg_kcpu *kc;
	u64 head, tail, used, space;
	bool written = false;
	void *data;

	ring = rcu_dereference_sched(sess->ring);
	/* Pairs with hg_ring_start_consuming()'s release. */
	if (!ring || !smp_load_acquire(&ring->consuming))
		return true;
	kc = &ring->kcpu[cpu];
	slot = hg_meta_cpu_slot(ring->meta, cpu);
	/* Pairs with hg_ring_add_cpu()'s release: the area is zeroed. */
	data = smp_load_acquire(&ring->data[cpu]);

	/* Pairs with the consumer's release store of its tail. */
	tail = smp_load_acquire(&ring->consumer[cpu]);
	head = kc->head;
	used = head - tail;
	/* No memory for this CPU (cap or allocation failure): no space. */
	space = data && used <= ring->ring_size ? ring->ring_size - used : 0;

	if (kc->lost_pending && data) {
		struct hgclock_rec_lost lost;

		memset(&lost, 0, sizeof(lost));
		hgclock_rec_init(&lost.hdr, HGCLOCK_REC_LOST, sizeof(lost));
		lost.nr_lost = kc->lost_pending;
		lost.total_lost = kc->lost_total;
		if (hg_put(ring, data, &head, &space, &lost, sizeof(lost)))
			kc->lost_pending = 0;
	}
	if (!kc->lost_pending && data)
		written = hg_put(ring, data, &head, &space, rec, rec->size);
	if (!written) {
		kc->lost_pending++;
		kc->lost_total++;
		WRITE_ONCE(slot->lost, kc->lost_total);
	}
	if (head != kc->head) {
		kc->head = head;
		/* Pairs with the consumer's acquire load of the head. */
		smp_store_release(&slot->head, head);
	}
	/* wq_has_sleeper() orders the head store before the waiter check. */
	if ((head - tail >= READ_ONCE(sess->watermark) || !written) &&
	    wq_has_sleeper(&sess->wq)) {
		WRITE_ONCE(sess->wake, true);
		irq_work_queue(&hg_wake_work);
	}
	return written;
}

/*
 * Write one record to this CPU's ring of every session that takes it
 * (tracking records: privileged sessions only).  Interrupts disabled.
 * False if a session that reads records lost it (the counts the ioctls
 * report: with no reader at all, nothing was lost).
 */
bool hgclock_ring_write(struct hgclock_rec_header *rec)
{
	bool tracking = rec->type >= HG_REC_TRACKING_FIRST;
	struct hg_session *sess;
	bool written = true;

	lockdep_assert_irqs_disabled();
	list_for_each_entry_rcu(sess, &hg_sessions, node) {
		if (tracking && !sess->tracking)
			continue;
		if (!hg_session_write(sess, rec))
			written = false;
	}
	return written;
}

/* The same, into @file's session only (PRODUCE's test records). */
bool hgclock_ring_write_file(struct file *file, struct hgclock_rec_header *rec)
{
	lockdep_assert_irqs_disabled();
	return hg_session_write(file->private_data, rec);
}

static u64 hg_abs_diff(u64 a, u64 b)
{
	return a > b ? a - b : b - a;
}

static bool hg_conv_same(const struct hgclock_conversion *old,
			 const struct hgclock_conversion *conv)
{
	/*
	 * A derived conversion is refitted on every snapshot; only a change
	 * of mult/shift/base, flags or more than its bound counts as change.
	 */
	return old->flags == conv->flags && old->mult == conv->mult &&
	       old->shift == conv->shift && old->pre_shift == conv->pre_shift &&
	       old->tsc_base == conv->tsc_base &&
	       old->local_offset_ns == conv->local_offset_ns &&
	       (old->offset_ns == conv->offset_ns ||
		((conv->flags & HGCLOCK_CONV_DERIVED) &&
		 hg_abs_diff(old->offset_ns, conv->offset_ns) <= conv->bound_ns));
}

/* Single writer (this CPU, interrupts off): a plain sequence count. */
static void hg_conv_store(u32 *seqp, struct hgclock_conversion *dst,
			  const struct hgclock_conversion *conv)
{
	u32 seq = *seqp;

	WRITE_ONCE(*seqp, seq + 1);
	smp_wmb();	/* odd count before the new fields */
	*dst = *conv;
	smp_wmb();	/* new fields before the even count */
	WRITE_ONCE(*seqp, seq + 2);
}

/*
 * Publish this CPU's conversion for the zero-syscall clock, in every
 * session's meta area.  Interrupts disabled, on that CPU.  *@changed:
 * it differs from the one published before (not for the first).
 * Readers see an odd count while an update is in progress.
 */
void hgclock_ring_publish_conv(const struct hgclock_conversion *conv,
			       bool *changed)
{
	struct hg_last_conv *last = this_cpu_ptr(&hg_last_conv);
	unsigned int cpu = smp_processor_id();
	struct hg_session *sess;

	*changed = false;
	if (!hg_conv_same(&last->conv, conv)) {
		*changed = last->conv.flags != 0;
		hg_conv_store(&last->seq, &last->conv, conv);
	}
	list_for_each_entry_rcu(sess, &hg_sessions, node) {
		struct hg_ring *ring = rcu_dereference_sched(sess->ring);
		struct hgclock_meta_cpu *slot;

		if (!ring)
			continue;
		slot = hg_meta_cpu_slot(ring->meta, cpu);
		if (!hg_conv_same(&slot->conv, &last->conv))
			hg_conv_store(&slot->conv_seq, &slot->conv, &last->conv);
	}
	if (hg_clock_meta) {
		struct hgclock_meta_cpu *slot = hg_meta_cpu_slot(hg_clock_meta, cpu);

		if (!hg_conv_same(&slot->conv, &last->conv))
			hg_conv_store(&slot->conv_seq, &slot->conv, &last->conv);
	}
}

void hgclock_ring_set_online(unsigned int cpu, bool online)
{
	struct hg_session *sess;

	rcu_read_lock();
	list_for_each_entry_rcu(sess, &hg_sessions, node) {
		struct hg_ring *ring = rcu_dereference(sess->ring);

		if (ring)
			WRITE_ONCE(hg_meta_cpu_slot(ring->meta, cpu)->online, online);
	}
	rcu_read_unlock();
	if (hg_clock_meta)
		WRITE_ONCE(hg_meta_cpu_slot(hg_clock_meta, cpu)->online, online);
}

/* ---- sessions --------------------------------------------------------- */

/*
 * A new session for @file (open): no rings yet, the default ring size,
 * tracking records if the opener is privileged.  Process context.
 */
int hgclock_ring_open(struct file *file)
{
	struct hg_user *new_user = NULL;
	struct hg_session *sess, *other;
	kuid_t uid = file->f_cred->uid;
	int ret = 0;

	sess = kzalloc(sizeof(*sess), GFP_KERNEL_ACCOUNT);
	if (!sess)
		return -ENOMEM;
	init_waitqueue_head(&sess->wq);
	mutex_init(&sess->config_mutex);
	sess->tracking = hgclock_file_privileged(file);
	sess->ring_size = (u64)ring_size_kb << 10;
	sess->watermark = sess->ring_size / 2;
	/* Before the mutex: used only if the uid has no session yet. */
	if (!file_ns_capable(file, &init_user_ns, CAP_SYS_ADMIN)) {
		new_user = kzalloc(sizeof(*new_user), GFP_KERNEL_ACCOUNT);
		if (!new_user) {
			kfree(sess);
			return -ENOMEM;
		}
		new_user->uid = uid;
	}
	mutex_lock(&hg_ring_mutex);
	if (hg_nr_sessions >= max_sessions) {
		ret = -ENFILE;
		goto out;
	}
	/* At most max_sessions entries to look at, at open only. */
	if (new_user) {
		list_for_each_entry(other, &hg_sessions, node) {
			if (other->user && uid_eq(other->user->uid, uid)) {
				sess->user = other->user;
				break;
			}
		}
		if (sess->user && sess->user->nr_sessions >= max_sessions_per_user) {
			ret = -EUSERS;
			goto out;
		}
		if (!sess->user) {
			sess->user = new_user;
			new_user = NULL;
		}
		sess->user->nr_sessions++;
	}
	hg_nr_sessions++;
	list_add_tail_rcu(&sess->node, &hg_sessions);
	file->private_data = sess;
out:
	mutex_unlock(&hg_ring_mutex);
	kfree(new_user);
	if (ret)
		kfree(sess);
	return ret;
}

/*
 * A grace period after release: no producer still walks to the session
 * or writes to its rings.  Process context (hg_free_wq).
 */
static void hg_session_free_fn(struct work_struct *work)
{
	struct hg_session *sess = container_of(to_rcu_work(work),
					       struct hg_session, free_work);

	/* Nobody else reaches the session now: the RCU pointer is ours. */
	hg_ring_free(rcu_dereference_protected(sess->ring, 1));
	kfree(sess);
}

/*
 * The file is released: its mappings are gone (each held a reference on
 * it).  Off the list and out of the counts now; its memory is freed after
 * a grace period, when no producer still writes to its rings, without
 * making the closer wait for it.  The ring memory leaves the counts
 * (the total and the user's) at once: for a grace period the pages may
 * outlive the caps' account of them.
 */
void hgclock_ring_release(struct file *file)
{
	struct hg_session *sess = file->private_data;
	struct hg_ring *ring;

	mutex_lock(&hg_ring_mutex);
	list_del_rcu(&sess->node);
	hg_nr_sessions--;
	ring = rcu_dereference_protected(sess->ring, lockdep_is_held(&hg_ring_mutex));
	if (ring) {
		hg_ring_uncharge(ring);
		/* The hg_user may go below: the ring no longer points at it. */
		ring->user = NULL;
	}
	if (sess->user && !--sess->user->nr_sessions)
		kfree(sess->user);
	sess->user = NULL;
	mutex_unlock(&hg_ring_mutex);
	INIT_RCU_WORK(&sess->free_work, hg_session_free_fn);
	queue_rcu_work(hg_free_wq, &sess->free_work);
}

/* ---- mapping ---------------------------------------------------------- */

static unsigned int *hg_vma_counter(struct hg_ring *ring,
				    struct vm_area_struct *vma)
{
	if (vma->vm_pgoff != (HGCLOCK_MMAP_CONSUMER_OFFSET >> PAGE_SHIFT))
		return &ring->nr_ring_maps;
	return &ring->nr_consumer_maps;
}

static void hg_vm_open(struct vm_area_struct *vma)
{
	struct hg_ring *ring = vma->vm_private_data;

	mutex_lock(&hg_ring_mutex);
	(*hg_vma_counter(ring, vma))++;
	mutex_unlock(&hg_ring_mutex);
}

static void hg_vm_close(struct vm_area_struct *vma)
{
	struct hg_ring *ring = vma->vm_private_data;

	mutex_lock(&hg_ring_mutex);
	(*hg_vma_counter(ring, vma))--;
	mutex_unlock(&hg_ring_mutex);
}

/*
 * A page of the ring mapping, on first touch: the meta area, or the data
 * area of the CPU the offset falls in.  A CPU never brought up, or a
 * session not reading records, has no data area: SIGBUS (readers only
 * read the rings of CPUs with records).  The rings cannot be freed under
 * a mapping (replacement is refused while one exists, release comes
 * after the last), so the pages stay valid while mapped.
 */
static vm_fault_t hg_vm_fault(struct vm_fault *vmf)
{
	struct hg_ring *ring = vmf->vma->vm_private_data;
	u64 off = (u64)vmf->pgoff << PAGE_SHIFT;
	void *addr, *data;

	if (off < ring->meta_size) {
		addr = (void *)ring->meta + off;
	} else if (off < ring->area_size) {
		off -= ring->meta_size;
		/* Pairs with hg_ring_add_cpu()'s release. */
		data = smp_load_acquire(&ring->data[off / ring->ring_size]);
		if (!data)
			return VM_FAULT_SIGBUS;
		addr = data + (off & (ring->ring_size - 1));
	} else {
		return VM_FAULT_SIGBUS;
	}
	return vmf_insert_mixed(vmf->vma, vmf->address,
				pfn_to_pfn_t(vmalloc_to_pfn(addr)));
}

/* Splitting (partial munmap/mprotect) would break the counting: refuse. */
static int hg_vm_may_split(struct vm_area_struct *vma, unsigned long addr)
{
	return -EINVAL;
}

static const struct vm_operations_struct hg_vm_ops = {
	.fault = hg_vm_fault,
	.open = hg_vm_open,
	.close = hg_vm_close,
	.may_split = hg_vm_may_split,
};

/*
 * An out-of-tree module built for 6.1 and 6.12: vm_flags_mod() replaced
 * the direct write in 6.3 (checkpatch: LINUX_VERSION_CODE, CONSTANT_COMPARISON).
 */
static void hg_vma_flags(struct vm_area_struct *vma, unsigned long set,
			 unsigned long clear)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
	vm_flags_mod(vma, set, clear);
#else
	vma->vm_flags = (vma->vm_flags | set) & ~clear;
#endif
}

/* The session's rings, made now if they are not yet.  Mutex held. */
static struct hg_ring *hg_session_ring(struct hg_session *sess)
{
	struct hg_ring *ring;

	lockdep_assert_held(&hg_ring_mutex);
	ring = rcu_dereference_protected(sess->ring, lockdep_is_held(&hg_ring_mutex));
	if (ring)
		return ring;
	ring = hg_ring_alloc(sess->ring_size, sess->user);
	if (!IS_ERR(ring))
		rcu_assign_pointer(sess->ring, ring);
	return ring;
}

int hgclock_mmap(struct file *file, struct vm_area_struct *vma)
{
	unsigned long len = vma->vm_end - vma->vm_start;
	u64 offset = (u64)vma->vm_pgoff << PAGE_SHIFT;
	bool consumer = offset == HGCLOCK_MMAP_CONSUMER_OFFSET;
	struct hg_session *sess = file->private_data;
	struct hg_ring *ring;
	int ret;

	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	if (vma->vm_flags & VM_EXEC)
		return -EPERM;
	if (offset != HGCLOCK_MMAP_RING_OFFSET && !consumer)
		return -EINVAL;
	/* The ring and meta area are the kernel's: never writable. */
	if (!consumer && (vma->vm_flags & VM_WRITE))
		return -EPERM;

	/* The hotplug lock outside the mutex, as in the PREPARE callback. */
	cpus_read_lock();
	mutex_lock(&hg_ring_mutex);
	ring = hg_session_ring(sess);
	if (IS_ERR(ring)) {
		ret = PTR_ERR(ring);
		goto out;
	}
	ret = -EINVAL;
	if (len != (consumer ? ring->consumer_size : ring->area_size))
		goto out;
	if (consumer) {
		/* Reading records: the data areas, and producers fill them. */
		ret = hg_ring_start_consuming(ring);
		if (ret)
			goto out;
		hg_vma_flags(vma, VM_DONTEXPAND | VM_DONTDUMP,
			     VM_MAYEXEC | ((vma->vm_flags & VM_WRITE) ? 0 : VM_MAYWRITE));
		ret = remap_vmalloc_range(vma, ring->consumer, 0);
		if (ret)
			goto out;
	} else {
		/* Filled page by page by hg_vm_fault(). */
		hg_vma_flags(vma, VM_DONTEXPAND | VM_DONTDUMP | VM_MIXEDMAP,
			     VM_MAYEXEC | VM_MAYWRITE);
		ret = 0;
	}
	vma->vm_private_data = ring;
	vma->vm_ops = &hg_vm_ops;
	(*hg_vma_counter(ring, vma))++;
out:
	mutex_unlock(&hg_ring_mutex);
	cpus_read_unlock();
	return ret;
}

/*
 * /dev/hgclock-clock's mmap: the public meta area, read-only, shared,
 * from offset 0, at most its length (a reader may map one page first to
 * learn meta_size).  The file is opened read-only by most, but root may
 * open it read-write: refuse PROT_WRITE and PROT_EXEC here and take
 * VM_MAYWRITE and VM_MAYEXEC away so mprotect() cannot add them.
 */
int hgclock_clock_mmap(struct file *file, struct vm_area_struct *vma)
{
	unsigned long len = vma->vm_end - vma->vm_start;

	/* A read-only file's MAP_SHARED leaves VM_MAYSHARE, not VM_SHARED. */
	if (!(vma->vm_flags & VM_MAYSHARE))
		return -EINVAL;
	if (vma->vm_flags & (VM_WRITE | VM_EXEC))
		return -EPERM;
	if (vma->vm_pgoff || !len || len > hg_clock_meta->meta_size)
		return -EINVAL;
	hg_vma_flags(vma, VM_DONTEXPAND | VM_DONTDUMP, VM_MAYWRITE | VM_MAYEXEC);
	/* Maps every page now: no fault handler, no per-mapping state. */
	return remap_vmalloc_range(vma, hg_clock_meta, 0);
}

__poll_t hgclock_poll(struct file *file, struct poll_table_struct *wait)
{
	struct hg_session *sess = file->private_data;
	u64 watermark = READ_ONCE(sess->watermark);
	struct hg_ring *ring;
	__poll_t mask = 0;
	unsigned int cpu;

	poll_wait(file, &sess->wq, wait);
	/*
	 * Our entry on the wait queue before our loads of the heads: pairs
	 * with the full barrier in the producer's wq_has_sleeper(), which
	 * orders its head store before its look at the queue.  Either the
	 * producer sees us waiting and wakes us, or we see its head.
	 */
	smp_mb();
	rcu_read_lock();
	ring = rcu_dereference(sess->ring);
	for_each_possible_cpu(cpu) {
		struct hgclock_meta_cpu *slot;
		u64 head, tail;

		if (!ring)
			break;
		slot = hg_meta_cpu_slot(ring->meta, cpu);
		/* Pairs with the producer's release of the head. */
		head = smp_load_acquire(&slot->head);
		tail = READ_ONCE(ring->consumer[cpu]);
		/* A loss not yet reported in the stream: the reader must drain. */
		if (head - tail >= watermark || head - tail > ring->ring_size ||
		    READ_ONCE(ring->kcpu[cpu].lost_pending)) {
			mask |= EPOLLIN | EPOLLRDNORM;
			break;
		}
	}
	rcu_read_unlock();
	return mask;
}

/* ---- configuration ---------------------------------------------------- */

static bool hg_ring_size_ok(u64 size)
{
	return size >= HG_RING_MIN && size <= HG_RING_MAX && is_power_of_2(size);
}

/*
 * @file's session's rings at @ring_size: hg_ring_mutex and the CPU
 * hotplug lock held.  Without rings yet, only the size to make them
 * with.  Refused while the rings are mapped.  A replacement snapshots
 * every online CPU into the new rings (main.c), so it is charged to the
 * unprivileged budget of interrupted CPUs before anything changes.  On
 * success *@old is the replaced ring, out of every count already, for
 * the caller to free after a grace period, without our locks.
 */
static int hg_ring_replace(struct file *file, struct hg_session *sess, u64 ring_size,
			   struct hg_ring **old)
{
	struct hg_ring *cur, *ring;
	u64 old_bytes;
	int ret;

	*old = NULL;
	cur = rcu_dereference_protected(sess->ring, lockdep_is_held(&hg_ring_mutex));
	if (!cur) {
		sess->ring_size = ring_size;
		return 0;
	}
	if (cur->nr_ring_maps || cur->nr_consumer_maps)
		return -EBUSY;
	ret = hgclock_cross_cpu_budget(file, num_online_cpus());
	if (ret)
		return ret;
	/*
	 * The old ring's memory is not counted against the new one: it is
	 * freed a grace period from now, and config_mutex keeps this
	 * session from having more than one such ring at a time.
	 */
	old_bytes = cur->bytes;
	hg_ring_uncharge(cur);
	ring = hg_ring_alloc(ring_size, sess->user);
	if (!IS_ERR(ring) && cur->consuming) {
		ret = hg_ring_start_consuming(ring);
		if (ret) {
			hg_ring_drop(ring);
			ring = ERR_PTR(ret);
		}
	}
	if (IS_ERR(ring)) {
		hg_ring_charge(cur, old_bytes);
		return PTR_ERR(ring);
	}
	cur->user = NULL;
	sess->ring_size = ring_size;
	rcu_assign_pointer(sess->ring, ring);
	*old = cur;
	return 0;
}

/*
 * RING_CONFIG's ring part for @file's session (the file layer, main.c,
 * does the rest): with HGCLOCK_CFG_SET_RING_SIZE and/or _SET_WATERMARK
 * in @cfg->flags, checks and applies them; always fills @cfg's ring_size
 * and watermark with the values in force.  *@replaced: the rings are new
 * (and empty).
 */
int hgclock_ring_configure(struct file *file, struct hgclock_ring_config *cfg,
			   bool *replaced)
{
	struct hg_session *sess = file->private_data;
	struct hg_ring *old = NULL;
	int ret = 0;

	*replaced = false;
	if ((cfg->flags & HGCLOCK_CFG_SET_RING_SIZE) && !hg_ring_size_ok(cfg->ring_size))
		return -EINVAL;
	/*
	 * Lock order: config_mutex, the CPU hotplug lock, hg_ring_mutex.
	 * The hotplug lock outside the mutex, as in the PREPARE callback:
	 * new rings get a data area for each CPU brought up, and online
	 * flags that stay true while we build them.  The grace period
	 * before freeing replaced rings is waited for with config_mutex
	 * alone: other sessions' opens, mmaps and CPU hotplug go on.
	 */
	if (mutex_lock_killable(&sess->config_mutex))
		return -EINTR;
	cpus_read_lock();
	mutex_lock(&hg_ring_mutex);
	if (cfg->flags & HGCLOCK_CFG_SET_WATERMARK) {
		u64 size = (cfg->flags & HGCLOCK_CFG_SET_RING_SIZE) ?
			   cfg->ring_size : sess->ring_size;

		if (!cfg->watermark || cfg->watermark > size) {
			ret = -EINVAL;
			goto out;
		}
	}
	if ((cfg->flags & HGCLOCK_CFG_SET_RING_SIZE) && cfg->ring_size != sess->ring_size) {
		ret = hg_ring_replace(file, sess, cfg->ring_size, &old);
		if (ret)
			goto out;
		*replaced = !!old;
		if (!(cfg->flags & HGCLOCK_CFG_SET_WATERMARK))
			WRITE_ONCE(sess->watermark, min(sess->watermark, sess->ring_size));
	}
	if (cfg->flags & HGCLOCK_CFG_SET_WATERMARK)
		WRITE_ONCE(sess->watermark, cfg->watermark);
	cfg->ring_size = sess->ring_size;
	cfg->watermark = sess->watermark;
out:
	mutex_unlock(&hg_ring_mutex);
	cpus_read_unlock();
	if (old) {
		/* No producer, fault or poll() still reads the old rings. */
		synchronize_rcu();
		hg_ring_free(old);
	}
	mutex_unlock(&sess->config_mutex);
	return ret;
}

/* What @file's session maps, and the memory of all sessions. */
void hgclock_ring_fill_info(struct file *file, struct hgclock_info *info)
{
	struct hg_session *sess = file->private_data;

	mutex_lock(&hg_ring_mutex);
	info->ring_size = sess->ring_size;
	info->map_size = hg_meta_size() + nr_cpu_ids * sess->ring_size;
	info->consumer_size = hg_consumer_size();
	info->ring_bytes = hg_ring_total_bytes;
	info->ring_max_bytes = hg_ring_max_bytes;
	mutex_unlock(&hg_ring_mutex);
}

/*
 * CPU hotplug PREPARE, in the control CPU's hotplug thread before @cpu
 * runs (and at registration for every CPU up then): @cpu's data area in
 * every session that reads records.  Never fails the bring-up: without
 * memory or room under a cap, that CPU's records are lost (and counted)
 * in that session, and the kernel log says why.
 */
static int hg_ring_cpu_prepare(unsigned int cpu)
{
	struct hg_session *sess;
	unsigned int nr_failed = 0;
	int ret = 0;

	mutex_lock(&hg_ring_mutex);
	cpumask_set_cpu(cpu, &hg_ring_cpus);
	/*
	 * Every session tried: one user past its ring_user_max_mb must not
	 * cost the sessions after it on the list their data area.
	 */
	list_for_each_entry(sess, &hg_sessions, node) {
		struct hg_ring *ring = rcu_dereference_protected(sess->ring,
								 lockdep_is_held(&hg_ring_mutex));
		int err;

		if (!ring || !ring->consuming)
			continue;
		err = hg_ring_add_cpu(ring, cpu);
		if (err) {
			nr_failed++;
			ret = err;
		}
	}
	mutex_unlock(&hg_ring_mutex);
	if (nr_failed)
		pr_warn("no ring for CPU %u in %u sessions (%s): their records of it will be lost\n",
			cpu, nr_failed, ret == -ENOSPC ? "over a ring memory cap" : "out of memory");
	return 0;
}

/*
 * The public clock's meta area, before the snapshots publish anything:
 * no conversion yet (flags 0, as in a new session's), online flags as
 * they are now; the hotplug callbacks keep them from here on.
 */
static int hg_clock_meta_alloc(void)
{
	struct hgclock_meta *meta;
	unsigned int cpu;

	meta = vmalloc_user(hg_meta_size());
	if (!meta)
		return -ENOMEM;
	hg_meta_init(meta, 0, 0);
	cpus_read_lock();
	for_each_online_cpu(cpu)
		hg_meta_cpu_slot(meta, cpu)->online = 1;
	/* Before the hotplug callbacks may look at it. */
	smp_store_release(&hg_clock_meta, meta);
	cpus_read_unlock();
	return 0;
}

int hgclock_ring_init(void)
{
	u64 size = (u64)ring_size_kb << 10;
	int ret;

	if (!hg_ring_size_ok(size)) {
		pr_err("ring_size_kb=%u: want a power of two from 8 to 65536\n",
		       ring_size_kb);
		return -EINVAL;
	}
	if (!max_sessions || max_sessions > HG_SESSIONS_MAX ||
	    !max_sessions_per_user || max_sessions_per_user > max_sessions) {
		pr_err("max_sessions=%u max_sessions_per_user=%u: want 1..%u and 1..max_sessions\n",
		       max_sessions, max_sessions_per_user, HG_SESSIONS_MAX);
		return -EINVAL;
	}
	hg_ring_max_bytes = ring_max_mb ? (u64)ring_max_mb << 20 :
			    max_t(u64, 64ULL << 20, ((u64)totalram_pages() << PAGE_SHIFT) / 32);
	/* One session's rings must fit, or no reader could ever work. */
	hg_ring_priv_reserve_bytes = hg_meta_size() + hg_consumer_size() +
				     num_online_cpus() * size;
	if (hg_ring_priv_reserve_bytes > hg_ring_max_bytes) {
		pr_err("ring_size_kb=%u for %u CPUs: over ring_max_mb (%llu MiB)\n",
		       ring_size_kb, num_online_cpus(), hg_ring_max_bytes >> 20);
		return -EINVAL;
	}
	hg_ring_user_max_bytes = ring_user_max_mb ? (u64)ring_user_max_mb << 20 :
				 hg_ring_max_bytes / 4;
	if (hg_ring_user_max_bytes > hg_ring_max_bytes) {
		pr_err("ring_user_max_mb=%u: over ring_max_mb (%llu MiB)\n",
		       ring_user_max_mb, hg_ring_max_bytes >> 20);
		return -EINVAL;
	}
	init_irq_work(&hg_wake_work, hg_wake_fn);
	hg_free_wq = alloc_workqueue("hgclock_free", 0, 0);
	if (!hg_free_wq)
		return -ENOMEM;
	ret = hg_clock_meta_alloc();
	if (ret)
		goto err_wq;
	ret = cpuhp_setup_state(CPUHP_BP_PREPARE_DYN, "hgclock:ring",
				hg_ring_cpu_prepare, NULL);
	if (ret < 0)
		goto err_meta;
	hg_ring_cpuhp_state = ret;
	return 0;

err_meta:
	vfree(hg_clock_meta);
	hg_clock_meta = NULL;
err_wq:
	destroy_workqueue(hg_free_wq);
	return ret;
}

/* After the producers are stopped (snapshot and tracking exits). */
void hgclock_ring_exit(void)
{
	/*
	 * No file is open, but sessions released just before may wait for
	 * their grace period: rcu_barrier() until every one is queued on
	 * hg_free_wq, destroying it runs them.  No session is left after.
	 */
	rcu_barrier();
	destroy_workqueue(hg_free_wq);
	cpuhp_remove_state_nocalls(hg_ring_cpuhp_state);
	irq_work_sync(&hg_wake_work);
	/* /dev/hgclock-clock is gone and no producer runs: nobody reads it. */
	vfree(hg_clock_meta);
	hg_clock_meta = NULL;
}
