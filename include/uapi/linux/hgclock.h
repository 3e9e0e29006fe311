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

#define HGCLOCK_ABI_MAJOR	1
#define HGCLOCK_ABI_MINOR	0

/* Feature bits reported in hgclock_info.features. */
#define HGCLOCK_FEAT_READ_CLOCK		(1ULL << 0)	/* HGCLOCK_IOC_READ_CLOCK */
#define HGCLOCK_FEAT_READ_ALL_CPUS	(1ULL << 1)	/* HGCLOCK_READ_ALL_CPUS */
#define HGCLOCK_FEAT_RING		(1ULL << 2)	/* mmap ring and records */
#define HGCLOCK_FEAT_USER_CLOCK		(1ULL << 3)	/* per-CPU conversion in meta page */

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
 * @reserved: zero.
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
	__u64 reserved[8];
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
 *	and @nr_samples says how many are needed.  Otherwise zero in, 1 out.
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
 * ioctl magic 0xC7: not listed in
 * Documentation/userspace-api/ioctl/ioctl-number.rst.
 */
#define HGCLOCK_IOC_MAGIC	0xC7

#define HGCLOCK_IOC_GET_INFO	_IOWR(HGCLOCK_IOC_MAGIC, 0x00, struct hgclock_info)
#define HGCLOCK_IOC_READ_CLOCK	_IOWR(HGCLOCK_IOC_MAGIC, 0x01, struct hgclock_read_clock)
/* Does nothing and returns 0: the baseline for benchmarks. */
#define HGCLOCK_IOC_NOP		_IO(HGCLOCK_IOC_MAGIC, 0x02)

#endif /* _UAPI_LINUX_HGCLOCK_H */
