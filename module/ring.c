// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock: per-CPU record rings, shared with user space by mmap.
 *
 * One vmalloc area holds the meta area (struct hgclock_meta, then one
 * struct hgclock_meta_cpu per possible CPU) followed by one data area of
 * ring_size bytes per possible CPU.  User space maps it read-only.  A
 * second, separate area holds the consumer positions (one __u64 per CPU);
 * it is the only thing user space writes, and one open file at a time may
 * map it.
 *
 * Producer: only ever the CPU that owns the ring, with interrupts disabled,
 * so writers on one ring never nest or race.  Positions are free-running
 * byte counts; a record never wraps: when it does not fit before the end,
 * a PAD record fills the end and the record starts the next lap.
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
 * Lifetime: the ring is published through an RCU pointer.  Producers run
 * with interrupts off, an RCU read-side section; replacing the ring
 * (RING_CONFIG) waits for them with synchronize_rcu() and is refused while
 * any mapping exists (each mapping counted through vm_ops open/close).
 * A mapping pins the file, the file pins the module, so the module cannot
 * be unloaded under a mapping.  hg_ring_mutex serialises replacement,
 * mapping and consumer ownership; it is never taken by producers.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cpu.h>
#include <linux/cpumask.h>
#include <linux/irq_work.h>
#include <linux/log2.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/rcupdate.h>
#include <linux/slab.h>
#include <linux/trace_clock.h>
#include <linux/uaccess.h>
#include <linux/version.h>
#include <linux/vmalloc.h>
#include <linux/wait.h>
#include <asm/msr.h>
#include <asm/tsc.h>

#include "hgclock_internal.h"

static_assert(sizeof(struct hgclock_meta) == 128);
static_assert(sizeof(struct hgclock_meta_cpu) == 72);
static_assert(sizeof(struct hgclock_conversion) == 48);
static_assert(sizeof(struct hgclock_rec_header) == 24);
static_assert(sizeof(struct hgclock_ring_config) == 64);

#define HG_RING_MIN	(8ULL << 10)
#define HG_RING_MAX	(64ULL << 20)

static unsigned int ring_size_kb = 256;
module_param(ring_size_kb, uint, 0444);
MODULE_PARM_DESC(ring_size_kb, "bytes per CPU ring at load, in KiB (power of two, 8..65536)");

/* Kernel-private per-CPU producer state; only its CPU touches it. */
struct hg_kcpu {
	u64 head;
	u64 lost_pending;	/* lost since the last LOST record written */
	u64 lost_total;
	u64 snap_seq;
};

struct hg_ring {
	void *area;			/* meta + data, vmalloc_user() */
	size_t area_size;
	size_t meta_size;
	u64 ring_size;			/* power of two */
	struct hgclock_meta *meta;
	__u64 *consumer;		/* vmalloc_user(), user-writable */
	size_t consumer_size;
	struct hg_kcpu *kcpu;		/* nr_cpu_ids entries */
	/* Under hg_ring_mutex: */
	unsigned int nr_ring_maps;
	unsigned int nr_writer_maps;		/* writable consumer mappings */
	unsigned int nr_consumer_ro_maps;	/* read-only consumer mappings */
	struct file *consumer_owner;		/* the file holding the writers */
};

static struct hg_ring __rcu *hg_ring;
static DEFINE_MUTEX(hg_ring_mutex);
static u64 hg_watermark;		/* bytes; READ_ONCE from producers */

/*
 * Producers may run where waking a task is not allowed (inside the
 * scheduler's tracepoints, later): they raise an irq_work, which wakes the
 * poll()ers from interrupt context.
 */
static DECLARE_WAIT_QUEUE_HEAD(hg_wq);

static void hg_wake_fn(struct irq_work *work)
{
	wake_up_all(&hg_wq);
}

static struct irq_work hg_wake_work;

static struct hgclock_meta_cpu *hg_meta_cpu_slot(struct hgclock_meta *meta,
						 unsigned int cpu)
{
	return (void *)meta + sizeof(*meta) + cpu * sizeof(struct hgclock_meta_cpu);
}

static struct hg_ring *hg_ring_alloc(u64 ring_size)
{
	struct hg_ring *ring;
	unsigned int cpu;

	ring = kzalloc(sizeof(*ring), GFP_KERNEL);
	if (!ring)
		return NULL;
	ring->ring_size = ring_size;
	ring->meta_size = PAGE_ALIGN(sizeof(struct hgclock_meta) +
				     nr_cpu_ids * sizeof(struct hgclock_meta_cpu));
	ring->area_size = ring->meta_size + nr_cpu_ids * ring_size;
	ring->consumer_size = PAGE_ALIGN(nr_cpu_ids * sizeof(__u64));

	ring->kcpu = kcalloc(nr_cpu_ids, sizeof(*ring->kcpu), GFP_KERNEL);
	if (!ring->kcpu)
		goto err_free_ring;
	/* Both areas come zeroed: all heads and tails start at 0. */
	ring->area = vmalloc_user(ring->area_size);
	if (!ring->area)
		goto err_free_kcpu;
	ring->consumer = vmalloc_user(ring->consumer_size);
	if (!ring->consumer)
		goto err_free_area;

	ring->meta = ring->area;
	ring->meta->magic = HGCLOCK_META_MAGIC;
	ring->meta->abi_major = HGCLOCK_ABI_MAJOR;
	ring->meta->abi_minor = HGCLOCK_ABI_MINOR;
	ring->meta->meta_size = ring->meta_size;
	ring->meta->header_size = sizeof(struct hgclock_meta);
	ring->meta->cpu_slot_size = sizeof(struct hgclock_meta_cpu);
	ring->meta->nr_cpus = nr_cpu_ids;
	ring->meta->ring_size = ring_size;
	ring->meta->consumer_size = ring->consumer_size;
	ring->meta->tsc_khz = tsc_khz;
	for_each_online_cpu(cpu)
		hg_meta_cpu_slot(ring->meta, cpu)->online = 1;
	return ring;

err_free_area:
	vfree(ring->area);
err_free_kcpu:
	kfree(ring->kcpu);
err_free_ring:
	kfree(ring);
	return NULL;
}

static void hg_ring_free(struct hg_ring *ring)
{
	if (!ring)
		return;
	vfree(ring->consumer);
	vfree(ring->area);
	kfree(ring->kcpu);
	kfree(ring);
}

static void *hg_data(struct hg_ring *ring, unsigned int cpu)
{
	return ring->area + ring->meta_size + (size_t)cpu * ring->ring_size;
}

/*
 * Put @len bytes at *@head if they fit in *@space, padding to the end of
 * the lap first when they would wrap.  Producer context.
 */
static bool hg_put(struct hg_ring *ring, unsigned int cpu, u64 *head,
		   u64 *space, const void *rec, u32 len)
{
	u64 off = *head & (ring->ring_size - 1);
	void *data = hg_data(ring, cpu);

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
 * to this CPU's ring, interrupts off from the stamp to the write: nothing
 * else is written to this ring in between, so each ring holds its records
 * in the order of their stamps.  Any context; the caller has filled the
 * body.  False when the record did not fit (counted as lost).
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
 * Write one record to this CPU's ring.  Interrupts disabled.  A record
 * that does not fit is counted as lost; the next record that does fit is
 * preceded by a LOST record, so the stream says where the gap is.  While
 * a LOST record is pending and does not fit, nothing else is written.
 */
bool hgclock_ring_write(struct hgclock_rec_header *rec)
{
	struct hgclock_meta_cpu *slot;
	unsigned int cpu = smp_processor_id();
	struct hg_ring *ring;
	struct hg_kcpu *kc;
	u64 head, tail, used, space;
	bool written = false;

	lockdep_assert_irqs_disabled();
	ring = rcu_dereference_sched(hg_ring);
	if (!ring)
		return false;
	kc = &ring->kcpu[cpu];
	slot = hg_meta_cpu_slot(ring->meta, cpu);

	/* Pairs with the consumer's release store of its tail. */
	tail = smp_load_acquire(&ring->consumer[cpu]);
	head = kc->head;
	used = head - tail;
	space = used <= ring->ring_size ? ring->ring_size - used : 0;

	if (kc->lost_pending) {
		struct hgclock_rec_lost lost;

		memset(&lost, 0, sizeof(lost));
		hgclock_rec_init(&lost.hdr, HGCLOCK_REC_LOST, sizeof(lost));
		lost.nr_lost = kc->lost_pending;
		lost.total_lost = kc->lost_total;
		if (hg_put(ring, cpu, &head, &space, &lost, sizeof(lost)))
			kc->lost_pending = 0;
	}
	if (!kc->lost_pending)
		written = hg_put(ring, cpu, &head, &space, rec, rec->size);
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
	if ((head - tail >= READ_ONCE(hg_watermark) || !written) &&
	    wq_has_sleeper(&hg_wq))
		irq_work_queue(&hg_wake_work);
	return written;
}

static u64 hg_abs_diff(u64 a, u64 b)
{
	return a > b ? a - b : b - a;
}

/* Interrupts disabled, on the CPU the snapshot is for. */
u64 hgclock_ring_next_snap_seq(void)
{
	struct hg_ring *ring = rcu_dereference_sched(hg_ring);

	if (!ring)
		return 0;
	return ++ring->kcpu[smp_processor_id()].snap_seq;
}

/*
 * Publish this CPU's conversion for the zero-syscall clock.  Single writer
 * (the CPU itself, interrupts disabled), so a plain sequence count:
 * readers see an odd count while the update is in progress.
 */
void hgclock_ring_publish_conv(const struct hgclock_conversion *conv,
			       bool *changed)
{
	struct hg_ring *ring = rcu_dereference_sched(hg_ring);
	struct hgclock_meta_cpu *slot;
	u32 seq;

	*changed = false;
	if (!ring)
		return;
	slot = hg_meta_cpu_slot(ring->meta, smp_processor_id());
	/*
	 * A derived conversion is refitted on every snapshot; only a change
	 * of mult/shift/base, flags or more than its bound counts as change.
	 */
	if (slot->conv.flags == conv->flags && slot->conv.mult == conv->mult &&
	    slot->conv.shift == conv->shift &&
	    slot->conv.pre_shift == conv->pre_shift &&
	    slot->conv.tsc_base == conv->tsc_base &&
	    slot->conv.local_offset_ns == conv->local_offset_ns &&
	    (slot->conv.offset_ns == conv->offset_ns ||
	     ((conv->flags & HGCLOCK_CONV_DERIVED) &&
	      hg_abs_diff(slot->conv.offset_ns, conv->offset_ns) <= conv->bound_ns)))
		return;

	*changed = slot->conv.flags != 0;
	seq = slot->conv_seq;
	WRITE_ONCE(slot->conv_seq, seq + 1);
	smp_wmb();	/* odd count before the new fields */
	slot->conv = *conv;
	smp_wmb();	/* new fields before the even count */
	WRITE_ONCE(slot->conv_seq, seq + 2);
}

void hgclock_ring_set_online(unsigned int cpu, bool online)
{
	struct hg_ring *ring;

	rcu_read_lock();
	ring = rcu_dereference(hg_ring);
	if (ring)
		WRITE_ONCE(hg_meta_cpu_slot(ring->meta, cpu)->online, online);
	rcu_read_unlock();
}

/* ---- mapping ---------------------------------------------------------- */

/*
 * Which counter a mapping belongs to.  A read-only consumer mapping has
 * VM_MAYWRITE cleared at mmap time, and mprotect() never sets it again,
 * so the answer is the same at open and close.
 */
static unsigned int *hg_vma_counter(struct hg_ring *ring,
				    struct vm_area_struct *vma)
{
	if (vma->vm_pgoff != (HGCLOCK_MMAP_CONSUMER_OFFSET >> PAGE_SHIFT))
		return &ring->nr_ring_maps;
	if (vma->vm_flags & VM_MAYWRITE)
		return &ring->nr_writer_maps;
	return &ring->nr_consumer_ro_maps;
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
	unsigned int *count;

	mutex_lock(&hg_ring_mutex);
	count = hg_vma_counter(ring, vma);
	(*count)--;
	if (count == &ring->nr_writer_maps && !*count)
		ring->consumer_owner = NULL;
	mutex_unlock(&hg_ring_mutex);
}

/* Splitting (partial munmap/mprotect) would break the counting: refuse. */
static int hg_vm_may_split(struct vm_area_struct *vma, unsigned long addr)
{
	return -EINVAL;
}

static const struct vm_operations_struct hg_vm_ops = {
	.open = hg_vm_open,
	.close = hg_vm_close,
	.may_split = hg_vm_may_split,
};

static void hg_vma_flags(struct vm_area_struct *vma, unsigned long set,
			 unsigned long clear)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
	vm_flags_mod(vma, set, clear);
#else
	vma->vm_flags = (vma->vm_flags | set) & ~clear;
#endif
}

int hgclock_mmap(struct file *file, struct vm_area_struct *vma)
{
	unsigned long len = vma->vm_end - vma->vm_start;
	u64 offset = (u64)vma->vm_pgoff << PAGE_SHIFT;
	bool consumer = offset == HGCLOCK_MMAP_CONSUMER_OFFSET;
	struct hg_ring *ring;
	bool writer;
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

	mutex_lock(&hg_ring_mutex);
	ring = rcu_dereference_protected(hg_ring, lockdep_is_held(&hg_ring_mutex));
	ret = -ENODEV;
	if (!ring)
		goto out;
	ret = -EINVAL;
	if (len != (consumer ? ring->consumer_size : ring->area_size))
		goto out;
	/* One consumer: only one open file may write the tails. */
	writer = consumer && (vma->vm_flags & VM_WRITE);
	ret = -EBUSY;
	if (writer && ring->consumer_owner && ring->consumer_owner != file)
		goto out;

	hg_vma_flags(vma, VM_DONTEXPAND | VM_DONTDUMP,
		     VM_MAYEXEC | (writer ? 0 : VM_MAYWRITE));
	ret = remap_vmalloc_range(vma, consumer ? (void *)ring->consumer : ring->area, 0);
	if (ret)
		goto out;
	vma->vm_private_data = ring;
	vma->vm_ops = &hg_vm_ops;
	if (writer)
		ring->consumer_owner = file;
	(*hg_vma_counter(ring, vma))++;
out:
	mutex_unlock(&hg_ring_mutex);
	return ret;
}

/*
 * Called when a file is released.  Its mappings are gone by then (each
 * holds a reference on the file), so only ownership remains to drop.
 */
void hgclock_ring_release(struct file *file)
{
	struct hg_ring *ring;

	mutex_lock(&hg_ring_mutex);
	ring = rcu_dereference_protected(hg_ring, lockdep_is_held(&hg_ring_mutex));
	if (ring && ring->consumer_owner == file)
		ring->consumer_owner = NULL;
	mutex_unlock(&hg_ring_mutex);
}

__poll_t hgclock_poll(struct file *file, struct poll_table_struct *wait)
{
	u64 watermark = READ_ONCE(hg_watermark);
	struct hg_ring *ring;
	__poll_t mask = 0;
	unsigned int cpu;

	poll_wait(file, &hg_wq, wait);
	rcu_read_lock();
	ring = rcu_dereference(hg_ring);
	for_each_possible_cpu(cpu) {
		struct hgclock_meta_cpu *slot;
		u64 head, tail;

		if (!ring)
			break;
		slot = hg_meta_cpu_slot(ring->meta, cpu);
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

/* hg_ring_mutex held.  The old ring is freed after every producer left it. */
static int hg_ring_replace(u64 ring_size)
{
	struct hg_ring *old, *ring;

	old = rcu_dereference_protected(hg_ring, lockdep_is_held(&hg_ring_mutex));
	if (old && (old->nr_ring_maps || old->nr_writer_maps ||
		    old->nr_consumer_ro_maps))
		return -EBUSY;
	/* The online flags are a snapshot of the online mask: hold it still. */
	cpus_read_lock();
	ring = hg_ring_alloc(ring_size);
	if (ring)
		rcu_assign_pointer(hg_ring, ring);
	cpus_read_unlock();
	if (!ring)
		return -ENOMEM;
	synchronize_rcu();
	hg_ring_free(old);
	return 0;
}

long hgclock_ioctl_ring_config(void __user *uarg)
{
	struct hgclock_ring_config cfg;
	struct hg_ring *ring;
	bool replaced = false;
	long ret = 0;
	int i;

	if (copy_from_user(&cfg, uarg, sizeof(cfg)))
		return -EFAULT;
	if (cfg.size != sizeof(cfg) || (cfg.flags & ~HGCLOCK_CFG_FLAGS_ALL))
		return -EINVAL;
	for (i = 0; i < ARRAY_SIZE(cfg.reserved); i++)
		if (cfg.reserved[i])
			return -EINVAL;
	if (cfg.flags && !capable(CAP_SYS_ADMIN))
		return -EPERM;
	if ((cfg.flags & HGCLOCK_CFG_SET_RING_SIZE) && !hg_ring_size_ok(cfg.ring_size))
		return -EINVAL;
	if ((cfg.flags & HGCLOCK_CFG_SET_PERIOD) && cfg.snapshot_period_ns &&
	    cfg.snapshot_period_ns < NSEC_PER_MSEC)
		return -EINVAL;

	mutex_lock(&hg_ring_mutex);
	ring = rcu_dereference_protected(hg_ring, lockdep_is_held(&hg_ring_mutex));
	if (cfg.flags & HGCLOCK_CFG_SET_WATERMARK) {
		u64 size = (cfg.flags & HGCLOCK_CFG_SET_RING_SIZE) ?
			   cfg.ring_size : ring->ring_size;

		if (!cfg.watermark || cfg.watermark > size) {
			ret = -EINVAL;
			goto out;
		}
	}
	if ((cfg.flags & HGCLOCK_CFG_SET_RING_SIZE) && cfg.ring_size != ring->ring_size) {
		ret = hg_ring_replace(cfg.ring_size);
		if (ret)
			goto out;
		replaced = true;
		ring = rcu_dereference_protected(hg_ring, lockdep_is_held(&hg_ring_mutex));
		if (!(cfg.flags & HGCLOCK_CFG_SET_WATERMARK))
			WRITE_ONCE(hg_watermark, min(hg_watermark, ring->ring_size));
	}
	if (cfg.flags & HGCLOCK_CFG_SET_WATERMARK)
		WRITE_ONCE(hg_watermark, cfg.watermark);
	if (cfg.flags & HGCLOCK_CFG_SET_PERIOD)
		hgclock_snapshot_set_period(cfg.snapshot_period_ns);

	memset(&cfg, 0, sizeof(cfg));
	cfg.size = sizeof(cfg);
	cfg.ring_size = ring->ring_size;
	cfg.watermark = hg_watermark;
	cfg.snapshot_period_ns = hgclock_snapshot_period();
out:
	mutex_unlock(&hg_ring_mutex);
	/* A fresh ring starts with every CPU's conversion in it. */
	if (!ret && replaced)
		hgclock_snapshot_all(HGCLOCK_SNAP_START);
	if (!ret && copy_to_user(uarg, &cfg, sizeof(cfg)))
		ret = -EFAULT;
	return ret;
}

void hgclock_ring_fill_info(struct hgclock_info *info)
{
	struct hg_ring *ring;

	rcu_read_lock();
	ring = rcu_dereference(hg_ring);
	if (ring) {
		info->ring_size = ring->ring_size;
		info->map_size = ring->area_size;
		info->consumer_size = ring->consumer_size;
	}
	rcu_read_unlock();
}

int hgclock_ring_init(void)
{
	u64 size = (u64)ring_size_kb << 10;
	struct hg_ring *ring;

	if (!hg_ring_size_ok(size)) {
		pr_err("ring_size_kb=%u: want a power of two from 8 to 65536\n",
		       ring_size_kb);
		return -EINVAL;
	}
	init_irq_work(&hg_wake_work, hg_wake_fn);
	ring = hg_ring_alloc(size);
	if (!ring)
		return -ENOMEM;
	hg_watermark = size / 2;
	rcu_assign_pointer(hg_ring, ring);
	return 0;
}

/* After the producers are stopped (snapshot and tracking exits). */
void hgclock_ring_exit(void)
{
	struct hg_ring *ring;

	mutex_lock(&hg_ring_mutex);
	ring = rcu_dereference_protected(hg_ring, lockdep_is_held(&hg_ring_mutex));
	RCU_INIT_POINTER(hg_ring, NULL);
	mutex_unlock(&hg_ring_mutex);
	synchronize_rcu();
	irq_work_sync(&hg_wake_work);
	hg_ring_free(ring);
}
