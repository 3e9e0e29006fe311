/* SPDX-License-Identifier: LGPL-2.1 */
/*
 * Guest-to-host clock mapping: reads a correlation file into a model
 * (the host's and the guests' conversions over time, each vCPU's KVM TSC
 * offset segments and host CPUs, the clock probes), chooses the best
 * method per guest and vCPU, and converts guest clock values to the
 * host's.  Documentation/sync.rst explains the methods and their bounds.
 *
 * Naming: guest_* values are in a guest's clock domain, host_* in the
 * host's; *_tsc are TSC counts, *_ns nanoseconds of the named clock.
 */
#ifndef HGCLOCK_SYNC_H
#define HGCLOCK_SYNC_H

#include <stddef.h>
#include <stdint.h>

#include <linux/hgclock.h>

#include "corr.h"

#define HGSYNC_MAX_GUESTS	64
#define HGSYNC_NO_BOUND		UINT64_MAX

/* Clocks hgsync_to_host() converts (HGCOR_CLOCK_* plus local_clock). */
#define HGSYNC_CLOCK_TSC	HGCOR_CLOCK_TSC		/* x86-tsc */
#define HGSYNC_CLOCK_SCHED	HGCOR_CLOCK_SCHED	/* ftrace "local" */
#define HGSYNC_CLOCK_LOCAL	3			/* ftrace "perf" */

/* One CPU's conversions over time, in the order they were taken. */
struct hgsync_convs {
	struct hgclock_rec_cyc2ns *v;
	size_t n, cap;
};

/* A KVM TSC offset in force from host TSC @host_tsc on. */
struct hgsync_offset {
	uint64_t host_tsc;
	uint64_t tsc_offset;
	uint64_t tsc_ratio;
	uint32_t tsc_frac_bits;
	uint16_t known;		/* ratio/frac known (else 1.0) */
	uint16_t is_change;	/* from TSC_OFFSET: @prev_offset held before */
	uint64_t prev_offset;
};

/*
 * Where a vCPU thread is from @host_tsc on: running on @host_cpu (a RUN
 * or SEEN record), or stopped, last on @host_cpu (STOP, EXIT).
 */
struct hgsync_where {
	uint64_t host_tsc;
	int32_t host_cpu;
	int32_t running;
};

/*
 * kvm-clock parameters KVM wrote for a vCPU at host TSC @host_tsc (a
 * PVCLOCK record), in force for the guest from then until the next.
 */
struct hgsync_pvclock {
	uint64_t host_tsc;
	uint64_t tsc_timestamp;
	uint64_t system_time;
	uint32_t mul;
	int32_t shift;
	uint64_t start_ns;	/* guest sched_clock at @host_tsc (pv_setup()) */
	uint64_t end_ns;	/* ... where it got to by the next record */
	uint64_t reach_prev;	/* the largest end_ns of the records before */
	uint64_t clamp_ns;	/* bound of pvclock's clamp while in force */
};

/* A host vCPU thread, from the host's tracking records. */
struct hgsync_vcpu {
	int32_t vm_pid;
	int32_t vcpu_id;
	int32_t tid;
	struct hgsync_offset *off;
	size_t nr_off, cap_off;
	struct hgsync_where *where;
	size_t nr_where, cap_where;
	uint64_t migrations;
	struct hgsync_pvclock *pv;	/* by host TSC */
	size_t nr_pv, cap_pv;
};

/*
 * One exit pairing with both halves joined (guest_build()): the guest's
 * readings before and after its CPUID, the host's in between.
 */
struct hgsync_xpair {
	uint32_t guest_cpu;
	uint32_t seq;
	uint64_t guest_tsc_before, guest_tsc_after;
	uint64_t guest_ns_before, guest_ns_after;	/* guest sched_clock */
	uint64_t host_tsc;
	uint64_t host_ns;				/* host sched_clock */
	int32_t host_cpu;
	uint32_t reserved;
};

struct hgsync_guest {
	uint32_t id;
	int present;			/* a GUEST_INFO section was seen */
	struct hgclock_info info;
	struct hgcor_guest_vm vm;	/* vm.vm_pid -1: unknown */
	struct hgsync_convs *convs;	/* per guest CPU */
	unsigned int nr_cpus;
	struct hgcor_probe *probes;
	size_t nr_probes, cap_probes;
	struct hgclock_rec_exit_pair *gpairs;	/* the guest's halves, as read */
	size_t nr_gpairs, cap_gpairs;
	struct hgsync_xpair *xpairs;	/* joined with the host's (guest_build()) */
	size_t nr_xpairs, cap_xpairs;
	struct hgcor_segment *segs;	/* chosen mapping, sorted */
	size_t nr_segs, cap_segs;
	uint64_t *seg_maxend;		/* find_seg() index, see index_segs() */
	uint64_t *seg_probe_lo;		/* PROBE/EXIT segments: the span of the */
	uint64_t *seg_probe_hi;		/* guest values of their samples (index_segs()) */
	int indexed;
	uint64_t kvm_checked, kvm_agree; /* probes and pairings checked against KVM exact */
	/*
	 * kvm-clock from the host's PVCLOCK records (pv_setup()): the guest's
	 * kvm_sched_clock_offset, found from its own snapshots' parameters
	 * (pv_checked of them, pv_agree matching a record), and the bound
	 * of pvclock's clamp to the largest value read so far.
	 */
	int pv_known;
	uint64_t pv_sched_offset;
	uint64_t pv_checked, pv_agree;
	uint64_t pv_clamp_ns;
};

struct hgsync {
	struct hgclock_info host_info;
	struct hgsync_convs *host_convs;	/* per host CPU */
	unsigned int nr_host_cpus;
	struct hgsync_vcpu *vcpus;
	size_t nr_vcpus, cap_vcpus;
	struct hgclock_rec_exit_host *hpairs;	/* the host's halves, sorted (key, seq) */
	size_t nr_hpairs, cap_hpairs;
	struct hgsync_guest guests[HGSYNC_MAX_GUESTS];
	unsigned int nr_guests;		/* highest id + 1 */
	int has_file_segments;		/* the file carried a SEGMENTS section */
	int complete;			/* the file had its END */
};

/* hgsync_load() flags */
#define HGSYNC_ALLOW_OPEN	(1 << 0) /* accept a file without END (yet) */
#define HGSYNC_IGNORE_SEGMENTS	(1 << 1) /* recompute even if the file has them */

/*
 * Reads the correlation file in @buf/@len into @s.  0, or a negative
 * hgcor_err (hgcor_strerror()), or -ENOMEM.  @err_pos gets the byte
 * offset where reading stopped.  Segments come from the file's SEGMENTS
 * section when it has one, otherwise call hgsync_build().
 */
int hgsync_load(struct hgsync *s, const void *buf, size_t len, int flags, size_t *err_pos);
void hgsync_free(struct hgsync *s);

/* Computes every guest's segments from the model; 0 or -ENOMEM. */
int hgsync_build(struct hgsync *s);

/* The result of one conversion. */
struct hgsync_result {
	uint64_t host_value;	/* host TSC or host ns of the same clock */
	uint64_t bound_ns;	/* |error| bound, HGSYNC_NO_BOUND if none */
	uint32_t method;	/* HGCOR_METHOD_* used */
	int32_t host_cpu;	/* where the vCPU ran then, -1 if unknown */
	uint64_t host_tsc;	/* the host TSC of host_value, 0 if unknown */
	const struct hgcor_segment *seg;
};

/*
 * Converts @guest_value of clock @clock (HGSYNC_CLOCK_*), read on vCPU
 * @vcpu of guest @guest_id, to the host's same clock.  0, -ENOENT when
 * no segment covers it, -ENODATA when a needed conversion is missing.
 */
int hgsync_to_host(const struct hgsync *s, uint32_t guest_id, int vcpu, uint32_t clock,
		   uint64_t guest_value, struct hgsync_result *r);
/* The same with one method only (HGCOR_METHOD_*), 0 for the best. */
int hgsync_to_host_by(const struct hgsync *s, uint32_t guest_id, int vcpu, uint32_t clock,
		      uint64_t guest_value, uint32_t method, struct hgsync_result *r);

/* Where a vCPU was at a host instant (hgsync_vcpu_place()). */
struct hgsync_place {
	int32_t host_cpu;	/* -1: unknown (no tracking record before) */
	int32_t tid;		/* the vCPU's host thread, -1 unknown */
	int32_t running;	/* 1: on host_cpu; 0: stopped, last on it */
	uint64_t since_tsc;	/* host TSC of the record that put it there */
	uint64_t until_tsc;	/* host TSC of the next record, UINT64_MAX none */
};

/*
 * Where vCPU @vcpu of guest @guest_id was at host TSC @host_tsc, from the
 * host's tracking records.  0, or -ENOENT (no such vCPU thread known).
 */
int hgsync_vcpu_place(const struct hgsync *s, uint32_t guest_id, int vcpu, uint64_t host_tsc,
		      struct hgsync_place *p);

/*
 * Converts between the host's TSC and its clock @clock (HGSYNC_CLOCK_*)
 * with the conversion of host CPU @host_cpu in force then (any CPU's when
 * @host_cpu is -1 or has none).  0, or -ENODATA.
 */
int hgsync_host_from_tsc(const struct hgsync *s, int host_cpu, uint32_t clock, uint64_t host_tsc,
			 uint64_t *value);
int hgsync_host_to_tsc(const struct hgsync *s, int host_cpu, uint32_t clock, uint64_t value,
		       uint64_t *host_tsc);

/* ---- pure helpers (unit tested) ---- */

/* guest_tsc = ((host_tsc * ratio) >> frac) + offset, 128-bit. */
uint64_t hgsync_kvm_guest_tsc(uint64_t host_tsc, uint64_t offset, uint64_t ratio,
			      uint32_t frac_bits);
/* Its inverse: the smallest host_tsc whose guest_tsc is >= @guest_tsc. */
uint64_t hgsync_kvm_host_tsc(uint64_t guest_tsc, uint64_t offset, uint64_t ratio,
			     uint32_t frac_bits);
/* The smallest tsc with hgclock_conv_apply(conv, tsc) >= @ns (near tsc_base). */
uint64_t hgsync_conv_invert(const struct hgclock_conversion *conv, uint64_t ns);

/* One bracketed observation: the host value lies in [lo, hi] at guest x. */
struct hgsync_obs {
	uint64_t x;	/* guest value */
	uint64_t lo;	/* host value before */
	uint64_t hi;	/* host value after */
};

/*
 * Fits host = ref_host + d + (d * rate_q48 >> 48), d = x - ref_guest, to
 * the tightest observations of @obs (sorted by x on return), filling the
 * PROBE fields of @seg (ref_guest, ref_host, rate_q48, bound_ns,
 * nr_samples).  0, or -EINVAL with fewer than 2 observations.
 */
int hgsync_fit(struct hgsync_obs *obs, size_t n, struct hgcor_segment *seg);
/* Applies a PROBE segment. */
uint64_t hgsync_probe_apply(const struct hgcor_segment *seg, uint64_t guest_value);

const char *hgsync_method_name(uint32_t method);
/* "auto" (0), "kvm-exact" (or "kvm"), "probe", "exit": HGCOR_METHOD_*; -1 else. */
int hgsync_method_parse(const char *name);
const char *hgsync_clock_name(uint32_t clock);

#endif /* HGCLOCK_SYNC_H */
