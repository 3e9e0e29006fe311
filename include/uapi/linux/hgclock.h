/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * hgclock: exact host/guest trace clock correlation.
 *
 * This is the one header shared by the kernel module, the user-space tool
 * and the selftests.  Every structure is made of fixed-size types, is
 * naturally aligned, has a size that is a multiple of 8 and carries
 * reserved fields the kernel requires to be zero, so that it can grow
 * without breaking old binaries.  See Documentation/uapi.rst.
 *
 * Clock domains used in field names:
 *   tsc             the x86 time stamp counter of the CPU that read it
 *   sched_clock_ns  sched_clock(), what ftrace's "local" clock stamps
 *                   (trace_clock_local())
 *   local_clock_ns  local_clock(), what ftrace's "perf" clock and perf's
 *                   sample timestamps use (trace_clock())
 *   mono_ns, mono_raw_ns, boot_ns
 *                   CLOCK_MONOTONIC, CLOCK_MONOTONIC_RAW, CLOCK_BOOTTIME
 */
#ifndef _UAPI_LINUX_HGCLOCK_H
#define _UAPI_LINUX_HGCLOCK_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define HGCLOCK_DEVICE_NAME	"hgclock"
/*
 * The clock alone, for every user (mode 0444): mmap(fd, 0, len, PROT_READ,
 * MAP_SHARED) with 0 < len <= meta_size maps a meta area laid out as a
 * ring mapping's (struct hgclock_meta, then one struct hgclock_meta_cpu
 * per CPU: online flag and conversion), with ring_size and consumer_size 0
 * and every head and lost 0.  No data areas, no ioctl, nothing per open.
 * Since ABI 1.3 (HGCLOCK_FEAT_PUBLIC_CLOCK).  Documentation/uapi.rst.
 */
#define HGCLOCK_CLOCK_DEVICE_NAME	"hgclock-clock"

#define HGCLOCK_ABI_MAJOR	1
/*
 * 1.1: exit pairing; 1.2: pairing opt-in, UNTRACKED and EXIT_SUPPRESSED;
 * 1.3: /dev/hgclock-clock; 1.4: coalesced stops (hgclock_rec_vcpu)
 */
#define HGCLOCK_ABI_MINOR	4

/* Feature bits reported in hgclock_info.features. */
#define HGCLOCK_FEAT_READ_CLOCK		(1ULL << 0)	/* HGCLOCK_IOC_READ_CLOCK */
#define HGCLOCK_FEAT_READ_ALL_CPUS	(1ULL << 1)	/* HGCLOCK_READ_ALL_CPUS */
#define HGCLOCK_FEAT_RING		(1ULL << 2)	/* mmap ring and records */
#define HGCLOCK_FEAT_USER_CLOCK		(1ULL << 3)	/* per-CPU conversion in meta page */
#define HGCLOCK_FEAT_TRACK		(1ULL << 4)	/* thread tracking, TRACK/LIST_VCPUS */
#define HGCLOCK_FEAT_KVM_TRACK		(1ULL << 5)	/* attached to KVM's tracepoints now */
#define HGCLOCK_FEAT_EXIT_PAIR		(1ULL << 6)	/* guest: HGCLOCK_IOC_EXIT_PAIR works */
#define HGCLOCK_FEAT_EXIT_TRACK		(1ULL << 7)	/* host: EXIT_HOST records (kvm_cpuid) */
#define HGCLOCK_FEAT_PVCLOCK_TRACK	(1ULL << 8)	/* host: PVCLOCK records */
/* host: EXIT_HOST only for VMs enabled by HGCLOCK_TRACK_PAIR_ON (1.2) */
#define HGCLOCK_FEAT_PAIR_OPT_IN	(1ULL << 9)
/* /dev/hgclock-clock: the per-CPU conversions, mappable by anyone (1.3) */
#define HGCLOCK_FEAT_PUBLIC_CLOCK	(1ULL << 10)
/* host: stops coalesced now (coalesce_stop_us > 0; hgclock_rec_vcpu) (1.4) */
#define HGCLOCK_FEAT_COALESCE		(1ULL << 11)

/* Bits of hgclock_info.clock_flags. */
#define HGCLOCK_CLK_TSC_UNSTABLE	(1U << 0) /* kernel marked the TSC unstable */
#define HGCLOCK_CLK_SCHED_CLOCK_STABLE	(1U << 1) /* sched_clock() agrees across CPUs */
#define HGCLOCK_CLK_CONSTANT_TSC	(1U << 2) /* X86_FEATURE_CONSTANT_TSC */
#define HGCLOCK_CLK_NONSTOP_TSC		(1U << 3) /* X86_FEATURE_NONSTOP_TSC */
#define HGCLOCK_CLK_NATIVE_SCHED_CLOCK	(1U << 4) /* sched_clock() is TSC based (cyc2ns) */
#define HGCLOCK_CLK_PVCLOCK_SCHED_CLOCK	(1U << 5) /* sched_clock() is kvm-clock (pvclock) */

/* hgclock_info.role: what this kernel looks like to hgclock. */
#define HGCLOCK_ROLE_BARE	0	/* no hypervisor seen, no KVM loaded */
#define HGCLOCK_ROLE_GUEST	1	/* running under a hypervisor */
#define HGCLOCK_ROLE_HOST	2	/* KVM is loaded here: may run guests */
#define HGCLOCK_ROLE_NESTED	3	/* both: a guest that is a KVM host */

/**
 * struct hgclock_info - HGCLOCK_IOC_GET_INFO result
 * @size: in: size of the caller's buffer (at least
 *	HGCLOCK_INFO_SIZE_VER0, at most 4096); out: bytes the kernel wrote.
 *	A newer kernel writes no more than the caller asked for; an older one
 *	writes only what it knows, so the caller checks @size before reading
 *	fields added later.
 * @flags: in: must be zero.
 * @abi_major: incompatible changes bump this.
 * @abi_minor: compatible additions bump this.
 * @nr_cpu_ids: highest possible CPU number plus one.
 * @nr_online_cpus: CPUs online at the time of the call.
 * @features: HGCLOCK_FEAT_* bits.
 * @tsc_khz: the kernel's calibrated TSC frequency.
 * @clock_flags: HGCLOCK_CLK_* bits.
 * @role: HGCLOCK_ROLE_*.
 * @clocksource: current clocksource name, NUL terminated.
 * @hypervisor: hypervisor vendor signature from CPUID 0x40000000
 *	("KVMKVMKVM", "TCGTCGTCGTCG", ...), empty on bare metal.
 * @ring_size: bytes per CPU ring (see mmap layout), 0 without a ring.
 * @snapshot_period_ns: period of the CYC2NS snapshots, 0 when off.
 * @map_size: length of the ring mapping (meta and data areas), 0 without
 *	a ring.
 * @consumer_size: length of the consumer mapping.
 * @max_tracked: (1.2) size of the tracking table (module parameter
 *	max_tracked): threads tracked at most at once.
 * @reserved32: zero.
 * @nr_untracked: (1.2) threads that could not be tracked because the
 *	table was full, since load (each also an UNTRACKED record).
 * @nr_exits_suppressed: (1.2) exit pairings over the per-vCPU rate
 *	(HGCLOCK_PAIR_MAX_PER_SEC) not recorded, all vCPUs, since load.
 * @ring_bytes: (1.2) memory the rings take now: the meta and consumer
 *	areas and a data area per CPU brought up since load.
 * @ring_max_bytes: (1.2) the cap on it (module parameter ring_max_mb).
 * @reserved: zero.
 *
 * Fields marked (1.2) read as zero from an older module.
 */
struct hgclock_info {
	__u32 size;
	__u32 flags;
	__u16 abi_major;
	__u16 abi_minor;
	__u32 nr_cpu_ids;
	__u32 nr_online_cpus;
	__u32 tsc_khz;
	__u64 features;
	__u32 clock_flags;
	__u32 role;
	char clocksource[32];
	char hypervisor[16];
	__u64 ring_size;
	__u64 snapshot_period_ns;
	__u64 map_size;
	__u64 consumer_size;
	__u32 max_tracked;
	__u32 reserved32;
	__u64 nr_untracked;
	__u64 nr_exits_suppressed;
	__u64 ring_bytes;
	__u64 ring_max_bytes;
	__u64 reserved[1];
};

#define HGCLOCK_INFO_SIZE_VER0	168	/* sizeof first published struct */

/* hgclock_clock_sample.flags */
#define HGCLOCK_SAMPLE_VALID	(1U << 0) /* this slot was filled */

/**
 * struct hgclock_clock_sample - clocks read together on one CPU
 * @tsc_before: TSC read (ordered) before the two kernel clocks.
 * @sched_clock_ns: trace_clock_local(): ftrace's "local" clock.
 * @local_clock_ns: trace_clock(): ftrace's "perf" clock, local_clock().
 * @tsc_after: TSC read (ordered) after the two kernel clocks.
 * @mono_ns: CLOCK_MONOTONIC, read after @tsc_after.
 * @mono_raw_ns: CLOCK_MONOTONIC_RAW, read after @mono_ns.
 * @boot_ns: CLOCK_BOOTTIME, read after @mono_raw_ns.
 * @cpu: the CPU all of the above were read on.
 * @flags: HGCLOCK_SAMPLE_*.
 *
 * All fields are read on @cpu with interrupts disabled, in the order
 * listed, so that @tsc_before <= TSC used by sched_clock() <= @tsc_after.
 */
struct hgclock_clock_sample {
	__u64 tsc_before;
	__u64 sched_clock_ns;
	__u64 local_clock_ns;
	__u64 tsc_after;
	__u64 mono_ns;
	__u64 mono_raw_ns;
	__u64 boot_ns;
	__u32 cpu;
	__u32 flags;
};

/* hgclock_read_clock.flags: at most one of the two */
#define HGCLOCK_READ_CPU	(1U << 0) /* read on @cpu, not the caller's CPU */
#define HGCLOCK_READ_ALL_CPUS	(1U << 1) /* read on every online CPU */
#define HGCLOCK_READ_FLAGS_ALL	(HGCLOCK_READ_CPU | HGCLOCK_READ_ALL_CPUS)

/**
 * struct hgclock_read_clock - HGCLOCK_IOC_READ_CLOCK argument
 * @size: sizeof(struct hgclock_read_clock); other sizes fail with EINVAL.
 * @flags: 0 (calling CPU), HGCLOCK_READ_CPU or HGCLOCK_READ_ALL_CPUS.
 * @cpu: with HGCLOCK_READ_CPU: the CPU to read on (must be online),
 *	otherwise zero.
 * @nr_samples: with HGCLOCK_READ_ALL_CPUS: in, capacity of @samples_ptr
 *	in entries; out, number of entries written (one per online CPU, in
 *	CPU order).  If the capacity is too small the call fails with ENOSPC
 *	and @nr_samples says how many are needed.  Otherwise output only:
 *	ignored in, 1 out (so the struct can be passed again unchanged).
 * @samples_ptr: with HGCLOCK_READ_ALL_CPUS: user pointer to an array of
 *	struct hgclock_clock_sample, otherwise zero.
 * @sample: out, the reading when not HGCLOCK_READ_ALL_CPUS.
 * @reserved: zero.
 */
struct hgclock_read_clock {
	__u32 size;
	__u32 flags;
	__u32 cpu;
	__u32 nr_samples;
	__u64 samples_ptr;
	struct hgclock_clock_sample sample;
	__u64 reserved[4];
};

/*
 * Ring buffer and records.  See Documentation/ring.rst.
 *
 * mmap(fd, offset HGCLOCK_MMAP_RING_OFFSET, length meta_size + nr_cpus *
 * ring_size, PROT_READ, MAP_SHARED) maps the meta area followed by one data
 * area per possible CPU.  It is read-only: PROT_WRITE, PROT_EXEC and
 * MAP_PRIVATE are refused.  The consumer positions live in a separate,
 * writable mapping at HGCLOCK_MMAP_CONSUMER_OFFSET (consumer_size bytes)
 * of the same file: each open file is a session with rings and consumer
 * positions of its own.
 */
#define HGCLOCK_MMAP_RING_OFFSET	0ULL
#define HGCLOCK_MMAP_CONSUMER_OFFSET	(1ULL << 40)

#define HGCLOCK_META_MAGIC	0x48474331U	/* "HGC1" */

/* hgclock_conversion.flags */
/*
 * VALID alone (neither EXACT nor DERIVED): the kernel's own parameters
 * with no bound hgclock can state (kvm-clock without the stable bit).
 */
#define HGCLOCK_CONV_VALID		(1U << 0) /* the fields below mean something */
#define HGCLOCK_CONV_EXACT		(1U << 1) /* reproduces sched_clock to the ns */
#define HGCLOCK_CONV_DERIVED		(1U << 2) /* fitted: error within bound_ns */
#define HGCLOCK_CONV_PVCLOCK		(1U << 3) /* sched_clock is kvm-clock */
#define HGCLOCK_CONV_LOCAL_OFFSET	(1U << 4) /* local_offset_ns is valid */
#define HGCLOCK_CONV_SCHED_CLOCK_STABLE	(1U << 5) /* sched_clock_stable() held */

/**
 * struct hgclock_conversion - TSC to sched_clock on one CPU
 * @tsc_base: TSC value the delta is taken from.
 * @offset_ns: sched_clock at @tsc_base, minus nothing: see formula.
 * @mult: multiplier.
 * @shift: right shift applied to the 96-bit product.
 * @pre_shift: shift applied to the TSC delta before multiplying: left if
 *	positive, right if negative (kvm-clock's tsc_shift), else 0.
 * @flags: HGCLOCK_CONV_*.
 * @local_offset_ns: with HGCLOCK_CONV_LOCAL_OFFSET, local_clock() minus
 *	sched_clock() (constant while sched_clock is stable).
 * @bound_ns: with HGCLOCK_CONV_DERIVED, the largest error of the formula
 *	against sched_clock(); 0 when exact.
 *
 * For a TSC value tsc read on this CPU:
 *
 *	delta = tsc - tsc_base                       (mod 2^64)
 *	delta = pre_shift >= 0 ? delta << pre_shift : delta >> -pre_shift
 *	sched_clock_ns = offset_ns + (u64)(((u128)delta * mult) >> shift)
 *	local_clock_ns = sched_clock_ns + local_offset_ns
 *
 * Native TSC sched_clock (cyc2ns): tsc_base 0, pre_shift 0.  kvm-clock:
 * tsc_base is pvclock's tsc_timestamp, pre_shift its tsc_shift, shift 32.
 */
struct hgclock_conversion {
	__u64 tsc_base;
	__u64 offset_ns;
	__u32 mult;
	__u32 shift;
	__s32 pre_shift;
	__u32 flags;
	__u64 local_offset_ns;
	__u64 bound_ns;
};

/**
 * struct hgclock_meta_cpu - one CPU's slot in the meta area (72 bytes)
 * @head: producer position in bytes, free running.  The kernel publishes
 *	it with a release store after the records before it are written;
 *	read it with an acquire load.
 * @lost: records this CPU's ring could not take, since the ring was set
 *	up.  Each loss is also reported in the stream by a LOST record.
 * @conv_seq: sequence count of @conv: odd while the kernel rewrites it.
 *	Read it (acquire), copy @conv, read it again: retry if it changed or
 *	was odd.
 * @online: 1 while the CPU is online.
 * @conv: the CPU's current conversion.
 */
struct hgclock_meta_cpu {
	__u64 head;
	__u64 lost;
	__u32 conv_seq;
	__u32 online;
	struct hgclock_conversion conv;
};

/**
 * struct hgclock_meta - start of the mapping, written by the kernel only
 * @magic: HGCLOCK_META_MAGIC.
 * @abi_major: HGCLOCK_ABI_MAJOR.
 * @abi_minor: HGCLOCK_ABI_MINOR.
 * @meta_size: bytes of the meta area, a multiple of the page size; the
 *	first CPU's data area starts here.
 * @header_size: sizeof(struct hgclock_meta): the CPU slots start here.
 * @cpu_slot_size: sizeof(struct hgclock_meta_cpu).
 * @nr_cpus: number of CPU slots and data areas (nr_cpu_ids).
 * @ring_size: bytes of each CPU's data area, a power of two.
 * @consumer_size: length of the consumer mapping.
 * @tsc_khz: the kernel's TSC frequency.
 * @reserved0: zero.
 * @reserved: zero.
 *
 * CPU n's data area is at meta_size + n * ring_size in the mapping.
 */
struct hgclock_meta {
	__u32 magic;
	__u16 abi_major;
	__u16 abi_minor;
	__u32 meta_size;
	__u32 header_size;
	__u32 cpu_slot_size;
	__u32 nr_cpus;
	__u64 ring_size;
	__u64 consumer_size;
	__u32 tsc_khz;
	__u32 reserved0;
	__u64 reserved[10];
};

/**
 * struct hgclock_consumer - the writable consumer mapping
 * @tail: per CPU, the consumer's position: every byte before it has been
 *	read and may be overwritten.  Written by user space only, with a
 *	release store after it is done reading.  The kernel treats it as
 *	untrusted: a value behind head by more than ring_size, or ahead of
 *	head, makes the ring count as full.
 */
struct hgclock_consumer {
	__u64 tail[1];	/* nr_cpus entries */
};

/* Record types */
#define HGCLOCK_REC_PAD		0	/* skip to the start of the ring */
#define HGCLOCK_REC_LOST	1	/* struct hgclock_rec_lost */
#define HGCLOCK_REC_CYC2NS	2	/* struct hgclock_rec_cyc2ns */
#define HGCLOCK_REC_TEST	3	/* struct hgclock_rec_test */
#define HGCLOCK_REC_EXIT_PAIR	4	/* struct hgclock_rec_exit_pair (guest) */
/* 16..31: thread and vCPU tracking records (host side, tracking.rst) */
#define HGCLOCK_REC_VCPU_SEEN	16	/* struct hgclock_rec_vcpu_seen */
#define HGCLOCK_REC_VCPU_RUN	17	/* struct hgclock_rec_vcpu: starts running here */
#define HGCLOCK_REC_VCPU_STOP	18	/* struct hgclock_rec_vcpu: stops running here */
#define HGCLOCK_REC_VCPU_MIGRATE 19	/* struct hgclock_rec_vcpu_migrate */
#define HGCLOCK_REC_VCPU_EXIT	20	/* struct hgclock_rec_vcpu: thread exited/untracked */
#define HGCLOCK_REC_TSC_OFFSET	21	/* struct hgclock_rec_tsc_offset */
#define HGCLOCK_REC_EXIT_HOST	22	/* struct hgclock_rec_exit_host */
#define HGCLOCK_REC_PVCLOCK	23	/* struct hgclock_rec_pvclock */
#define HGCLOCK_REC_UNTRACKED	24	/* struct hgclock_rec_vcpu: table full, not tracked */
#define HGCLOCK_REC_EXIT_SUPPRESSED 25	/* struct hgclock_rec_exit_suppressed */
#define HGCLOCK_REC_MAX		31

/**
 * struct hgclock_rec_header - common to every record (24 bytes)
 * @type: HGCLOCK_REC_*.
 * @size: bytes of the whole record, header included, a multiple of 8.
 *	A PAD record has only @type valid: the rest of the ring up to its
 *	end is padding, the next record is at the start of the ring.
 * @cpu: the CPU the record was written on (a VCPU_STOP written late: the
 *	CPU, and below the clocks, of when its thread stopped; see
 *	struct hgclock_rec_vcpu).
 * @tsc: TSC when the record was written.
 * @sched_clock_ns: sched_clock() right after @tsc.
 */
struct hgclock_rec_header {
	__u16 type;
	__u16 size;
	__u32 cpu;
	__u64 tsc;
	__u64 sched_clock_ns;
};

/**
 * struct hgclock_rec_lost - records were dropped because the ring was full
 * @hdr: common header.
 * @nr_lost: records lost on this CPU since the previous LOST record;
 *	they belong where this record stands in the stream.
 * @total_lost: this CPU's lost count so far (hgclock_meta_cpu.lost).
 */
struct hgclock_rec_lost {
	struct hgclock_rec_header hdr;
	__u64 nr_lost;
	__u64 total_lost;
};

/* hgclock_rec_cyc2ns.reason */
#define HGCLOCK_SNAP_PERIODIC	1
#define HGCLOCK_SNAP_IOCTL	2
#define HGCLOCK_SNAP_HOTPLUG	3	/* the CPU came online */
#define HGCLOCK_SNAP_CHANGED	4	/* the conversion changed */
#define HGCLOCK_SNAP_START	5	/* module loaded or ring set up */
#define HGCLOCK_SNAP_RESUME	6	/* the system resumed from sleep (1.2) */

/**
 * struct hgclock_rec_cyc2ns - a CPU's clocks and conversion, read together
 * @hdr: common header; hdr.tsc is read before, @tsc_after after the
 *	clocks, hdr.sched_clock_ns is trace_clock_local().
 * @local_clock_ns: trace_clock() (local_clock()), read after
 *	hdr.sched_clock_ns.
 * @tsc_after: TSC after both clocks.
 * @conv: the CPU's conversion at that moment.
 * @tsc_khz: the kernel's TSC frequency.
 * @reason: HGCLOCK_SNAP_*.
 * @seq: count of snapshots taken on this CPU, from 1.
 * @kernel_ns_at_tsc: 0 since ABI 1.2.  Until 1.1 the kernel's
 *	native_sched_clock_from_tsc(hdr.tsc), which a module cannot call
 *	safely under IBT (Documentation/clock.rst); the record's bracket
 *	(hdr.tsc, hdr.sched_clock_ns, @tsc_after) checks @conv instead.
 */
struct hgclock_rec_cyc2ns {
	struct hgclock_rec_header hdr;
	__u64 local_clock_ns;
	__u64 tsc_after;
	struct hgclock_conversion conv;
	__u32 tsc_khz;
	__u32 reason;
	__u64 seq;
	__u64 kernel_ns_at_tsc;
};

/**
 * struct hgclock_rec_test - written by HGCLOCK_IOC_PRODUCE
 * @hdr: common header.
 * @seq: 0, 1, 2, ... within one PRODUCE call.
 * @check: ~seq, to catch torn records.
 */
struct hgclock_rec_test {
	struct hgclock_rec_header hdr;
	__u64 seq;
	__u64 check;
};

/* hgclock_ring_config.flags: which fields to change */
#define HGCLOCK_CFG_SET_RING_SIZE	(1U << 0)
#define HGCLOCK_CFG_SET_WATERMARK	(1U << 1)
#define HGCLOCK_CFG_SET_PERIOD		(1U << 2)
#define HGCLOCK_CFG_FLAGS_ALL		0x7U

/* Longest snapshot period RING_CONFIG accepts (0 turns them off). */
#define HGCLOCK_SNAPSHOT_PERIOD_MAX_NS	(3600ULL * 1000000000ULL)

/**
 * struct hgclock_ring_config - HGCLOCK_IOC_RING_CONFIG argument
 * @size: sizeof(struct hgclock_ring_config).
 * @flags: HGCLOCK_CFG_SET_* for the fields to change; 0 only reads.
 * @ring_size: bytes per CPU, a power of two from 8 KiB to 64 MiB.
 *	Changing it empties the rings; EBUSY while the ring is mapped.
 * @watermark: poll() reports POLLIN once a CPU has this many unread
 *	bytes (1 .. ring_size); a LOST record also wakes.
 * @snapshot_period_ns: CYC2NS snapshot period; 0 stops periodic
 *	snapshots, else at least 1 ms and at most
 *	HGCLOCK_SNAPSHOT_PERIOD_MAX_NS (one hour).
 * @reserved: zero.
 *
 * On return every field holds the current value.
 */
struct hgclock_ring_config {
	__u32 size;
	__u32 flags;
	__u64 ring_size;
	__u64 watermark;
	__u64 snapshot_period_ns;
	__u64 reserved[4];
};

/*
 * Exit pairing (Documentation/sync.rst, "exit pairing").  A guest reads
 * its clocks, executes CPUID with EAX = HGCLOCK_PAIR_LEAF(key) and
 * ECX = seq, and reads its clocks again; the instruction always exits to
 * KVM, whose kvm_cpuid tracepoint the host module probes, recording its
 * own clocks there.  The host reading lies between the guest's two.
 */
#define HGCLOCK_PAIR_LEAF_BASE		0x48470000U	/* "HG" in the top half */
#define HGCLOCK_PAIR_LEAF_MASK		0xffff0000U
#define HGCLOCK_PAIR_LEAF(key)		(HGCLOCK_PAIR_LEAF_BASE | ((key) & 0xffffU))

/*
 * The host records at most this many exit pairings per vCPU per second;
 * more exits on the leaf in the same second are counted
 * (EXIT_SUPPRESSED records, hgclock_info.nr_exits_suppressed), not
 * recorded.  Only VMs a recorder enabled (HGCLOCK_TRACK_PAIR_ON) record
 * any.
 */
#define HGCLOCK_PAIR_MAX_PER_SEC	100

/**
 * struct hgclock_rec_exit_pair - a guest's side of one exit pairing
 * @hdr: common header, written after the pairing (hdr.cpu: where it ran).
 * @seq: ECX of the CPUID: this boot's count of pairings, from 1.
 * @key: the low half of its EAX, random per module load.
 * @tsc_before: TSC (ordered), first.
 * @sched_clock_before_ns: trace_clock_local() after @tsc_before.
 * @sched_clock_after_ns: trace_clock_local() after the CPUID.
 * @tsc_after: TSC (ordered) last.
 *
 * Interrupts are off throughout: nothing but the exit lies between the
 * readings.
 */
struct hgclock_rec_exit_pair {
	struct hgclock_rec_header hdr;
	__u32 seq;
	__u32 key;
	__u64 tsc_before;
	__u64 sched_clock_before_ns;
	__u64 sched_clock_after_ns;
	__u64 tsc_after;
};

/**
 * struct hgclock_rec_exit_host - the host's side of one exit pairing
 * @hdr: common header, written in the kvm_cpuid tracepoint, in the vCPU
 *	thread between the exit and the next entry: hdr.tsc and
 *	hdr.sched_clock_ns are the host's readings, hdr.cpu its CPU.
 * @tid: the vCPU thread.
 * @vm_pid: see struct hgclock_rec_vcpu.
 * @vcpu_id: KVM vcpu_id.
 * @seq: ECX of the CPUID.
 * @key: the low half of its EAX.
 * @reserved: zero.
 */
struct hgclock_rec_exit_host {
	struct hgclock_rec_header hdr;
	__s32 tid;
	__s32 vm_pid;
	__s32 vcpu_id;
	__u32 seq;
	__u32 key;
	__u32 reserved;
};

/**
 * struct hgclock_rec_exit_suppressed - exit pairings not recorded
 * @hdr: common header.
 * @tid: the vCPU thread.
 * @vm_pid: see struct hgclock_rec_vcpu.
 * @vcpu_id: KVM vcpu_id.
 * @reserved: zero.
 * @nr_suppressed: exits on hgclock's leaf by this vCPU not recorded
 *	because they came faster than HGCLOCK_PAIR_MAX_PER_SEC, since it
 *	was tracked (a running total: the last record of a vCPU has it).
 *
 * Written when the vCPU thread is switched out after a suppression, so
 * at most once per context switch.
 */
struct hgclock_rec_exit_suppressed {
	struct hgclock_rec_header hdr;
	__s32 tid;
	__s32 vm_pid;
	__s32 vcpu_id;
	__u32 reserved;
	__u64 nr_suppressed;
};

/**
 * struct hgclock_rec_pvclock - KVM wrote a vCPU's kvm-clock parameters
 * @hdr: common header, written in the kvm_pvclock_update tracepoint in
 *	the vCPU thread, after the guest's page was written and before the
 *	vCPU enters again: from then on the guest reads these parameters.
 * @tid: the vCPU thread.
 * @vm_pid: see struct hgclock_rec_vcpu.
 * @vcpu_id: KVM vcpu_id.
 * @version: the page's version (even).
 * @tsc_timestamp: guest TSC the parameters start from.
 * @system_time: kvm-clock ns at @tsc_timestamp.
 * @tsc_to_system_mul: 32.32 multiplier of the (shifted) TSC delta.
 * @tsc_shift: shift of the TSC delta before multiplying (left if > 0).
 * @flags: PVCLOCK_* (bit 0: TSC_STABLE).
 * @reserved: zero.
 *
 * The guest's kvm-clock: system_time + ((tsc - tsc_timestamp) << tsc_shift)
 * * tsc_to_system_mul >> 32; its sched_clock that minus a constant of the
 * guest (kvm_sched_clock_offset).
 */
struct hgclock_rec_pvclock {
	struct hgclock_rec_header hdr;
	__s32 tid;
	__s32 vm_pid;
	__s32 vcpu_id;
	__u32 version;
	__u64 tsc_timestamp;
	__u64 system_time;
	__u32 tsc_to_system_mul;
	__s8 tsc_shift;
	__u8 flags;
	__u16 reserved;
};

/**
 * struct hgclock_exit_pair - HGCLOCK_IOC_EXIT_PAIR argument (guest)
 * @size: sizeof(struct hgclock_exit_pair).
 * @flags: 0 (calling CPU), HGCLOCK_READ_CPU or HGCLOCK_READ_ALL_CPUS.
 * @cpu: with HGCLOCK_READ_CPU, the CPU (online); else zero.  Out,
 *	with ETIMEDOUT: the CPU that did not answer in time.
 * @nr_written: out: EXIT_PAIR records the rings took.
 * @reserved: zero.
 *
 * Runs an exit pairing on the CPU(s) and writes an EXIT_PAIR record for
 * each into that CPU's ring.  ENODEV without a hypervisor.  Another CPU's
 * pairing runs in a work item there while the caller sleeps (a vCPU the
 * host does not run cannot answer); past HGCLOCK_EXIT_PAIR_TIMEOUT_MS the
 * call fails with ETIMEDOUT (the structure still written back).  EAGAIN:
 * see HGCLOCK_UNPRIV_CROSS_CPU_PER_SEC.
 */
struct hgclock_exit_pair {
	__u32 size;
	__u32 flags;
	__u32 cpu;
	__u32 nr_written;
	__u64 reserved[2];
};

/* How long EXIT_PAIR waits for other CPUs, in all. */
#define HGCLOCK_EXIT_PAIR_TIMEOUT_MS	1000

/*
 * Calls that interrupt other CPUs (READ_CLOCK with HGCLOCK_READ_CPU or
 * HGCLOCK_READ_ALL_CPUS, SNAPSHOT, EXIT_PAIR on other CPUs) each cost a
 * CPU running a guest a VM exit.  Files whose opener had neither
 * CAP_PERFMON nor CAP_SYS_ADMIN share a budget of this many interrupted
 * CPUs per second, machine-wide; past it such calls fail with EAGAIN.
 */
#define HGCLOCK_UNPRIV_CROSS_CPU_PER_SEC	1000

/* hgclock_snapshot.flags */
#define HGCLOCK_SNAPSHOT_ALL_CPUS	(1U << 0)

/**
 * struct hgclock_snapshot - HGCLOCK_IOC_SNAPSHOT argument
 * @size: sizeof(struct hgclock_snapshot).
 * @flags: HGCLOCK_SNAPSHOT_ALL_CPUS, or 0 for @cpu only.
 * @cpu: the CPU, without HGCLOCK_SNAPSHOT_ALL_CPUS (must be online).
 * @nr_written: out: snapshots the rings took (a full ring drops its
 *	snapshot and counts it lost).
 * @reserved: zero.
 */
struct hgclock_snapshot {
	__u32 size;
	__u32 flags;
	__u32 cpu;
	__u32 nr_written;
	__u64 reserved[2];
};

/**
 * struct hgclock_produce - HGCLOCK_IOC_PRODUCE argument (CAP_SYS_ADMIN)
 * @size: sizeof(struct hgclock_produce).
 * @cpu: the CPU to produce on (must be online).
 * @count: TEST records to write, at most 1 << 24.
 * @nr_written: out: records the ring took.
 * @nr_lost: out: records the ring could not take.
 * @produce_ns: out: sched_clock time spent producing, in ns.
 * @local_clock_ns: out: time for @count bare local_clock() calls on the
 *	same CPU, measured right after: the benchmark's baseline.
 * @reserved: zero.
 *
 * A test and benchmark aid: writes @count records back to back with
 * interrupts off, as fast as the producer path allows.
 */
struct hgclock_produce {
	__u32 size;
	__u32 cpu;
	__u64 count;
	__u64 nr_written;
	__u64 nr_lost;
	__u64 produce_ns;
	__u64 local_clock_ns;
	__u64 reserved[2];
};

/* hgclock_rec_vcpu_seen.flags and hgclock_vcpu_info.flags */
#define HGCLOCK_VCPU_KVM	(1U << 0) /* a KVM vCPU thread (found by kvm_entry) */
#define HGCLOCK_VCPU_MANUAL	(1U << 1) /* tracked by HGCLOCK_IOC_TRACK */
#define HGCLOCK_VCPU_TSC_KNOWN	(1U << 2) /* tsc_offset/ratio/frac_bits are valid */
#define HGCLOCK_VCPU_EXIT_PAIR	(1U << 3) /* LIST_VCPUS: exit pairing enabled for its VM */

/**
 * struct hgclock_rec_vcpu - RUN, STOP and EXIT records of a tracked thread
 * @hdr: common header; hdr.cpu is the host CPU it happened on.
 * @tid: host thread id.
 * @vm_pid: the process owning the VM (its KVM debugfs directory is
 *	"<vm_pid>-<fd>"), or the thread's process for a manual track.
 * @vcpu_id: KVM vcpu_id, -1 for a thread tracked by HGCLOCK_IOC_TRACK.
 * @nr_coalesced: STOP and EXIT: how many times the run that ends here
 *	stopped and ran again on hdr.cpu without a record (saturates at
 *	U32_MAX); RUN: zero.  Zero before ABI 1.4.
 *
 * RUN: sched_switch switched to the thread on hdr.cpu; STOP: away from it.
 * EXIT: the thread exited, or was untracked; nothing follows for it.
 *
 * Coalescing (ABI 1.4, HGCLOCK_FEAT_COALESCE; module parameter
 * coalesce_stop_us, 0 turns it off): a STOP is written only when the
 * thread next runs, and not at all when it runs again on the same CPU,
 * with no migration and no other tracked thread's run on that CPU in
 * between, within coalesce_stop_us of stopping (nr_coalesced counts
 * those).  So between a RUN on CPU c and the thread's next STOP or EXIT
 * it ran on c only, not necessarily all the time, and no other tracked
 * thread ran on c.  A STOP that is written keeps the stamps of the moment
 * the thread stopped (hdr.cpu, hdr.tsc, hdr.sched_clock_ns), but it is
 * written into the ring of the CPU where the thread runs next, right
 * before that RUN, or into the remover's ring right before the EXIT of a
 * thread removed while stopped: it is the one record that may follow
 * records stamped after it.  A thread's last STOP before recording ends
 * (the thread still tracked) is never written.
 */
struct hgclock_rec_vcpu {
	struct hgclock_rec_header hdr;
	__s32 tid;
	__s32 vm_pid;
	__s32 vcpu_id;
	__u32 nr_coalesced;
};

/**
 * struct hgclock_rec_vcpu_seen - a thread starts being tracked
 * @hdr: common header; hdr.cpu is where it was seen.
 * @tid: host thread id.
 * @vm_pid: see struct hgclock_rec_vcpu.
 * @vcpu_id: KVM vcpu_id, -1 for a manual track.
 * @flags: HGCLOCK_VCPU_*.
 * @vm_name: KVM's debugfs directory name for the VM ("<pid>-<fd>"),
 *	NUL terminated, empty when unknown.
 * @tsc_offset: KVM's current TSC offset of the vCPU (tsc-offset in
 *	debugfs), with HGCLOCK_VCPU_TSC_KNOWN.
 * @tsc_scaling_ratio: KVM's current TSC scaling ratio.
 * @tsc_frac_bits: fraction bits of @tsc_scaling_ratio (32 on AMD, 48 on
 *	Intel).
 * @host_cpu: the CPU the thread runs on (== hdr.cpu for KVM vCPUs).
 *
 * guest_tsc = ((host_tsc * @tsc_scaling_ratio) >> @tsc_frac_bits) + @tsc_offset
 */
struct hgclock_rec_vcpu_seen {
	struct hgclock_rec_header hdr;
	__s32 tid;
	__s32 vm_pid;
	__s32 vcpu_id;
	__u32 flags;
	char vm_name[16];
	__u64 tsc_offset;
	__u64 tsc_scaling_ratio;
	__u32 tsc_frac_bits;
	__s32 host_cpu;
};

/**
 * struct hgclock_rec_vcpu_migrate - the scheduler moved a tracked thread
 * @hdr: common header (hdr.cpu: where the move was decided).
 * @tid: host thread id.
 * @vm_pid: see struct hgclock_rec_vcpu.
 * @vcpu_id: KVM vcpu_id or -1.
 * @from_cpu: the CPU it was assigned to.
 * @to_cpu: the CPU it is assigned to from now on.
 * @reserved: zero.
 */
struct hgclock_rec_vcpu_migrate {
	struct hgclock_rec_header hdr;
	__s32 tid;
	__s32 vm_pid;
	__s32 vcpu_id;
	__s32 from_cpu;
	__s32 to_cpu;
	__u32 reserved;
};

/**
 * struct hgclock_rec_tsc_offset - KVM wrote a vCPU's TSC offset
 * @hdr: common header; hdr.tsc is the host TSC right after the change.
 * @tid: the thread that made the change (the vCPU thread as a rule).
 * @vm_pid: the VM's process when @tid is a tracked vCPU thread, else
 *	the changing thread's process.
 * @vcpu_id: from the kvm_write_tsc_offset tracepoint.
 * @flags: HGCLOCK_VCPU_* of the thread when tracked, with
 *	HGCLOCK_VCPU_TSC_KNOWN when @tsc_scaling_ratio is known.
 * @previous_offset: L1 TSC offset before.
 * @next_offset: L1 TSC offset from now on.
 * @tsc_scaling_ratio: scaling ratio in force (last seen for the vCPU).
 * @tsc_frac_bits: its fraction bits.
 * @reserved: zero.
 */
struct hgclock_rec_tsc_offset {
	struct hgclock_rec_header hdr;
	__s32 tid;
	__s32 vm_pid;
	__s32 vcpu_id;
	__u32 flags;
	__u64 previous_offset;
	__u64 next_offset;
	__u64 tsc_scaling_ratio;
	__u32 tsc_frac_bits;
	__u32 reserved;
};

/* hgclock_track.flags */
#define HGCLOCK_TRACK_ADD	(1U << 0)
#define HGCLOCK_TRACK_REMOVE	(1U << 1)
#define HGCLOCK_TRACK_PAIR_ON	(1U << 2) /* @tid is a VM process: record its exit pairings */
#define HGCLOCK_TRACK_PAIR_OFF	(1U << 3) /* undo this file's PAIR_ON */
#define HGCLOCK_TRACK_FLAGS_ALL	0xfU

/**
 * struct hgclock_track - HGCLOCK_IOC_TRACK argument (CAP_PERFMON or CAP_SYS_ADMIN)
 * @size: sizeof(struct hgclock_track).
 * @flags: exactly one of HGCLOCK_TRACK_ADD and HGCLOCK_TRACK_REMOVE.
 * @tid: the host thread to (un)track; must exist.
 * @reserved: zero.
 *
 * ADD tracks any thread as if it were a vCPU (vcpu_id -1): for hypervisors
 * other than KVM, and for tests.  REMOVE untracks; for a KVM vCPU thread
 * that lasts until its next VM entry, which discovers it again.  EEXIST if
 * tracked already, ENOENT if not tracked (remove), no such thread or the
 * thread is exiting, ENOSPC when the table is full.
 *
 * PAIR_ON (1.2): @tid names a VM's process (a thread group leader, e.g.
 * QEMU); its vCPUs' exit pairings are recorded (EXIT_HOST) from now on,
 * until this open file turns it off with PAIR_OFF or is closed.  Without
 * it a host records none, so that no guest can fill the rings.  ENOSPC
 * past 64 enabled VMs; EINVAL if @tid is not a process.
 */
struct hgclock_track {
	__u32 size;
	__u32 flags;
	__s32 tid;
	__u32 reserved;
};

/**
 * struct hgclock_vcpu_info - one tracked thread (HGCLOCK_IOC_LIST_VCPUS)
 * @tid: host thread id.
 * @vm_pid: see struct hgclock_rec_vcpu.
 * @vcpu_id: KVM vcpu_id or -1.
 * @flags: HGCLOCK_VCPU_*.
 * @host_cpu: the CPU the thread is assigned to now.
 * @tsc_frac_bits: see struct hgclock_rec_vcpu_seen.
 * @vm_name: see struct hgclock_rec_vcpu_seen.
 * @tsc_offset: last TSC offset seen.
 * @tsc_scaling_ratio: last scaling ratio seen.
 * @nr_migrations: migrations recorded since tracking started.
 */
struct hgclock_vcpu_info {
	__s32 tid;
	__s32 vm_pid;
	__s32 vcpu_id;
	__u32 flags;
	__s32 host_cpu;
	__u32 tsc_frac_bits;
	char vm_name[16];
	__u64 tsc_offset;
	__u64 tsc_scaling_ratio;
	__u64 nr_migrations;
};

/**
 * struct hgclock_list_vcpus - HGCLOCK_IOC_LIST_VCPUS argument (CAP_PERFMON or
 *	CAP_SYS_ADMIN)
 * @size: sizeof(struct hgclock_list_vcpus).
 * @nr: in: capacity of @vcpus_ptr in entries; out: entries written.
 *	ENOSPC, with @nr set to the count, when too small.
 * @vcpus_ptr: user pointer to struct hgclock_vcpu_info[@nr].
 * @reserved: zero.
 */
struct hgclock_list_vcpus {
	__u32 size;
	__u32 nr;
	__u64 vcpus_ptr;
	__u64 reserved[2];
};

/*
 * ioctl magic 0xC7: not listed in
 * Documentation/userspace-api/ioctl/ioctl-number.rst.
 */
#define HGCLOCK_IOC_MAGIC	0xC7

/*
 * Every struct argument begins with its __u32 size and may grow at its
 * end (Documentation/uapi.rst, "Extending the structures"): the kernel
 * reads what the caller's size covers, zero-fills the rest, and refuses a
 * larger struct whose unknown tail is not zero (E2BIG).  So that the
 * numbers never change when a struct grows, they carry the first
 * published size, not sizeof().
 */
#define HGCLOCK_READ_CLOCK_SIZE_VER0	120
#define HGCLOCK_RING_CONFIG_SIZE_VER0	64
#define HGCLOCK_SNAPSHOT_SIZE_VER0	32
#define HGCLOCK_PRODUCE_SIZE_VER0	64
#define HGCLOCK_TRACK_SIZE_VER0		16
#define HGCLOCK_LIST_VCPUS_SIZE_VER0	32
#define HGCLOCK_EXIT_PAIR_SIZE_VER0	32

#define HGCLOCK_IOWR_SIZED(nr, size) \
	_IOC(_IOC_READ | _IOC_WRITE, HGCLOCK_IOC_MAGIC, (nr), (size))

#define HGCLOCK_IOC_GET_INFO	HGCLOCK_IOWR_SIZED(0x00, HGCLOCK_INFO_SIZE_VER0)
#define HGCLOCK_IOC_READ_CLOCK	HGCLOCK_IOWR_SIZED(0x01, HGCLOCK_READ_CLOCK_SIZE_VER0)
#define HGCLOCK_IOC_RING_CONFIG	HGCLOCK_IOWR_SIZED(0x03, HGCLOCK_RING_CONFIG_SIZE_VER0)
#define HGCLOCK_IOC_SNAPSHOT	HGCLOCK_IOWR_SIZED(0x04, HGCLOCK_SNAPSHOT_SIZE_VER0)
#define HGCLOCK_IOC_TRACK	_IOC(_IOC_WRITE, HGCLOCK_IOC_MAGIC, 0x06, HGCLOCK_TRACK_SIZE_VER0)
#define HGCLOCK_IOC_LIST_VCPUS	HGCLOCK_IOWR_SIZED(0x07, HGCLOCK_LIST_VCPUS_SIZE_VER0)
#define HGCLOCK_IOC_EXIT_PAIR	HGCLOCK_IOWR_SIZED(0x08, HGCLOCK_EXIT_PAIR_SIZE_VER0)

/*
 * Test and benchmark aids, NOT part of the stable ABI: they may change or
 * go away in any version, and no tool should depend on them.
 *   NOP: does nothing and returns 0 (the baseline of the ioctl
 *   benchmarks).  PRODUCE: writes TEST records at full rate
 *   (CAP_SYS_ADMIN; ring tests and benchmarks).
 */
#define HGCLOCK_IOC_NOP		_IO(HGCLOCK_IOC_MAGIC, 0x02)
#define HGCLOCK_IOC_PRODUCE	HGCLOCK_IOWR_SIZED(0x05, HGCLOCK_PRODUCE_SIZE_VER0)

#endif /* _UAPI_LINUX_HGCLOCK_H */
