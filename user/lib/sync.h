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

#define HGSYNC_MAX_GUESTS	1024
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
	uint64_t start_ns;	/* guest sched_clock at @host_tsc (hgs_pv_setup()) */
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
 * One exit pairing with both halves joined (join_pairs(), sync_load.c): the guest's
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

/*
 * One probe or exit pairing on one clock, as the fitted methods see it:
 * the host value at guest value @x lay in [@lo, @hi] (clock units: TSC
 * counts or ns).  Grouped by (clock, vCPU, method, epoch: the host TSC
 * where its segment's epoch starts), sorted by @x within a group, so that
 * a conversion finds the samples on either side of its value
 * (Documentation/sync.rst, "Between samples: steps").
 */
struct hgsync_sample {
	uint32_t clock;
	int32_t vcpu;
	uint32_t method;
	uint32_t seg;		/* the index of its segment in segs */
	uint64_t epoch;		/* host_tsc_start of the sample's segment */
	uint64_t x, lo, hi;
};

/*
 * Between two samples the true rate (host units per guest unit) stays
 * within this many ppm of nominal (1 for ns; the host's TSC kHz over the
 * guest's for counts): the drift a bound adds per unit of distance.
 */
#define HGSYNC_RATE_TOL_PPM	100

/*
 * Marker pairing (Documentation/sync.rst, "Guests without the module"):
 * fitted like exit pairings from `hgclock pairmark`'s trace_marker pairs
 * in a guest trace.dat joined with the host's EXIT_HOST records
 * (markpair.h).  Never in a file's SEGMENTS: added by merge and convert
 * (hgsync_add_markpairs()), after the file is loaded.
 */
#define HGSYNC_METHOD_MARKER	4

/*
 * One marker pairing on the guest trace's own clock (hgsync_guest.
 * marker_clock): the host's value of that clock at the exit, @host_value,
 * was read while the guest's clock went from @guest_begin to @guest_end.
 */
struct hgsync_mpair {
	int32_t guest_cpu;
	uint32_t reserved;
	uint64_t guest_begin, guest_end;
	uint64_t host_value;		/* host TSC, sched_clock or local_clock */
	uint64_t host_tsc;		/* the host's TSC at the exit */
};

struct hgsync_guest {
	uint32_t id;
	int present;			/* a GUEST_INFO section was seen */
	/*
	 * No GUEST_INFO but a GUEST_VM naming a VM (record --guest vm=PID
	 * without an agent): only the host's records map it (kvm-exact on
	 * x86-tsc), and marker pairings added later (hgsync_add_markpairs()).
	 */
	int agentless;
	struct hgclock_info info;
	struct hgcor_guest_vm vm;	/* vm.vm_pid -1: unknown */
	struct hgsync_convs *convs;	/* per guest CPU */
	unsigned int nr_cpus;
	struct hgcor_probe *probes;
	size_t nr_probes, cap_probes;
	struct hgclock_rec_exit_pair *gpairs;	/* the guest's halves, as read */
	size_t nr_gpairs, cap_gpairs;
	struct hgsync_xpair *xpairs;	/* joined with the host's (join_pairs()) */
	size_t nr_xpairs, cap_xpairs;
	struct hgcor_segment *segs;	/* chosen mapping, sorted */
	size_t nr_segs, cap_segs;
	uint64_t *seg_maxend;		/* hgs_find_seg() index, see hgs_index_segs() */
	struct hgsync_sample *samples;	/* PROBE/EXIT samples by group, x (hgs_index()) */
	size_t nr_samples;
	int indexed;
	uint64_t kvm_checked, kvm_agree; /* probes and pairings checked against KVM exact */
	/*
	 * kvm-clock from the host's PVCLOCK records (hgs_pv_setup()): the guest's
	 * kvm_sched_clock_offset, found from its own snapshots' parameters
	 * (pv_checked of them, pv_agree matching a record), and the bound
	 * of pvclock's clamp to the largest value read so far.
	 */
	int pv_known;
	uint64_t pv_sched_offset;
	uint64_t pv_checked, pv_agree;
	uint64_t pv_clamp_ns;
	/*
	 * vCPU identity (sync.rst): guest CPU n is KVM's vcpu_id
	 * cpu_vcpu[n], its APIC ID from the agent's CPU_MAP (-1: a CPU the
	 * map does not name); vcpu_cpu[] is the reverse, indexed by vcpu_id
	 * (nr_vcpu_cpu entries).  Without a map (nr_cpu_vcpu 0) guest
	 * CPU n is taken to be vcpu_id n and id_flags says so.  Every
	 * "vcpu" of this API, and a segment's vcpu_id, is the guest CPU.
	 */
	int32_t *cpu_vcpu;
	unsigned int nr_cpu_vcpu;
	int32_t *vcpu_cpu;
	unsigned int nr_vcpu_cpu;	/* the map's largest vcpu_id + 1 */
	uint32_t id_flags;		/* HGSYNC_ID_* */
	uint32_t id_nr_vcpus;		/* the VM's tracked vCPUs (vcpu_id >= 0) */
	int32_t id_max_vcpu;		/* their largest vcpu_id, -1 none */
	uint64_t id_pairs_checked;	/* exit pairings whose host half was found */
	uint64_t id_pairs_other;	/* ... on another vcpu_id than the identity's */
	struct hgsync_mpair *mpairs;	/* marker pairings (hgsync_add_markpairs()) */
	size_t nr_mpairs;
	uint32_t marker_clock;		/* their clock, HGSYNC_CLOCK_*; 0 none */
	/*
	 * Incarnations (DISRUPTION sections; sync.rst, "Migration and
	 * restore"): the same machine before (prev_id) and after (next_id)
	 * a migration, restore or reconnection, each with its own VM and
	 * session.  A later incarnation has a larger id.  The host TSC span
	 * in which this one's VM ran the guest: from the first record of
	 * its vCPUs (0 for the first incarnation) to their last exit
	 * from the guest (UINT64_MAX for the last); a value converted
	 * through this incarnation must land inside it
	 * (hgsync_to_host_by()).
	 */
	int has_prev, has_next;
	uint32_t prev_id, next_id;
	uint64_t span_start_tsc, span_end_tsc;
};

/* hgsync_guest.id_flags */
#define HGSYNC_ID_MAP		(1u << 0) /* from the agent's CPU map (APIC IDs) */
#define HGSYNC_ID_ASSUMED	(1u << 1) /* no map: guest CPU n = vcpu_id n, assumed */
#define HGSYNC_ID_GAPS		(1u << 2) /* the VM's vcpu_ids are not 0..n-1 */
#define HGSYNC_ID_CHANGED	(1u << 3) /* maps disagree (hotplug): the last is used */
#define HGSYNC_ID_PAIRS_DISAGREE (1u << 4) /* exit pairings ran on other vcpu_ids */

struct hgsync {
	struct hgclock_info host_info;
	struct hgsync_convs *host_convs;	/* per host CPU */
	unsigned int nr_host_cpus;
	struct hgsync_vcpu *vcpus;
	size_t nr_vcpus, cap_vcpus;
	uint32_t *vcpu_slots;			/* hash of vcpus by (vm_pid, vcpu_id) */
	size_t nr_vcpu_slots;			/* a power of two, or 0 */
	uint64_t vcpu_seed;			/* the hash's, per load */
	struct hgclock_rec_exit_host *hpairs;	/* the host's halves, sorted (key, seq) */
	size_t nr_hpairs, cap_hpairs;
	/*
	 * Indexed by guest id, allocated as the file names guests (at most
	 * HGSYNC_MAX_GUESTS): usually a few, so that a struct hgsync is small
	 * enough for any thread's stack.  An id below nr_guests that the
	 * file never named holds only its id and vm.vm_pid -1.  Never grows
	 * after hgsync_load(): pointers to a guest last until hgsync_free().
	 */
	struct hgsync_guest *guests;
	unsigned int nr_guests;		/* highest id + 1 */
	unsigned int cap_guests;	/* entries allocated */
	int has_file_segments;		/* the file carried a SEGMENTS section */
	int complete;			/* the file had its END */
	/* Every DISRUPTION section, in file order (checked: sync_load.c). */
	struct hgcor_disruption *disr;
	size_t nr_disr, cap_disr;
};

/* hgsync_load() flags */
#define HGSYNC_ALLOW_OPEN	(1 << 0) /* accept a file without END (yet) */
#define HGSYNC_IGNORE_SEGMENTS	(1 << 1) /* recompute even if the file has them */

/*
 * Reads the correlation file in @buf/@len into @s (whatever @s held is
 * overwritten, not freed).  0, or a negative hgcor_err (hgcor_strerror()),
 * or -ENOMEM; on an error @s holds nothing to free.  A guest id of
 * HGSYNC_MAX_GUESTS or more is HGCOR_E_CONTENT.  @err_pos gets the byte
 * offset where reading stopped.  Segments come from the file's SEGMENTS
 * section when it has one, otherwise call hgsync_build().
 */
int hgsync_load(struct hgsync *s, const void *buf, size_t len, int flags, size_t *err_pos);
/* Frees what @s holds and zeroes it; a zeroed @s is left as it is. */
void hgsync_free(struct hgsync *s);

/*
 * KVM's vcpu_id of guest CPU @cpu of guest @guest_id (the CPU map's APIC
 * ID; @cpu itself without a map), -1 when unknown.  hgsync_vcpu_guest_cpu()
 * is the reverse.
 */
int hgsync_guest_vcpu_id(const struct hgsync *s, uint32_t guest_id, int cpu);
int hgsync_vcpu_guest_cpu(const struct hgsync *s, uint32_t guest_id, int vcpu_id);
/*
 * One line for the user on how guest @guest_id's CPUs were matched with
 * KVM's vCPUs, into @buf: when it was assumed (no CPU map), and why it is
 * likely wrong (vcpu_ids with gaps, exit pairings on other vCPUs) or the
 * map changed.  Returns 2 when it is doubtful (likely wrong: warn), 1
 * when it is only assumed (show it), 0 when it came from a map that
 * agrees with everything (@buf empty).
 */
int hgsync_identity_note(const struct hgsync *s, uint32_t guest_id, char *buf, size_t len);

/*
 * Computes every guest's segments from the model (guests with agent data,
 * and agentless guests whose VM is known); 0 or -ENOMEM.
 */
int hgsync_build(struct hgsync *s);

/* Whether guest @guest_id is in the file: with agent data or an agentless VM. */
int hgsync_guest_known(const struct hgsync *s, uint32_t guest_id);

/*
 * The first incarnation of guest @guest_id's machine (itself when no
 * DISRUPTION leads to it): merge and convert name a guest by it, and
 * hgsync_to_host() follows the chain from there.
 */
uint32_t hgsync_guest_root(const struct hgsync *s, uint32_t guest_id);

/* A DISRUPTION's kind (HGCOR_DISRUPT_*) as dump and merge print it. */
const char *hgsync_disruption_name(uint32_t kind);

/* What the host's records say of one disruption (hgsync_disruption_facts()). */
struct hgsync_disr_facts {
	int has_old_run;		/* the old VM's vCPUs were seen */
	int has_new_run;		/* the new VM's vCPUs were seen */
	int has_kvm_jump;		/* both VMs' vCPU 0 offsets are known */
	uint64_t old_last_run_tsc;	/* host TSC: the old VM last seen running the guest */
	uint64_t new_first_run_tsc;	/* host TSC: the new VM first entered it */
	int64_t kvm_jump_tsc;		/* guest TSC counts: new offset - old offset */
};

/*
 * For s->disr[@i]: when the old VM was last seen running the guest (the
 * latest of its vCPUs' first entries, kvm-clock updates, made right
 * before an entry, and exit pairings' host halves: scheduling records
 * prove nothing, QEMU works on stopped vCPUs too) and when the new VM
 * first did (its vCPUs' first entry), and the exact TSC jump from KVM's
 * offsets of vCPU 0 (the old VM's then, the new VM's at its first
 * entry; the same TSC scaling on both).  new_first_run_tsc -
 * old_last_run_tsc bounds the host's blackout from above; the guest saw
 * at most that plus the jump pass.  0, or -EINVAL for a bad @i.
 */
int hgsync_disruption_facts(const struct hgsync *s, size_t i, struct hgsync_disr_facts *f);

struct hg_markpair;
/*
 * Adds @n marker pairings of guest @guest_id (hg_markpair_collect() on its
 * trace.dat: @p's guest_clock, HGSYNC_CLOCK_*, is the trace's clock, one
 * for all) and fits HGSYNC_METHOD_MARKER segments from them per guest CPU,
 * replacing the guest's previous marker pairings; the other segments stay.
 * A pair whose host value cannot be had on that clock (perf: no host
 * local_clock offset) is skipped.  0, -EINVAL (unknown guest, clocks
 * differ), -ENOMEM.
 */
int hgsync_add_markpairs(struct hgsync *s, uint32_t guest_id, const struct hg_markpair *p,
			 size_t n);

/*
 * Why guest @guest_id's clock @clock has no mapping when a conversion
 * said -ENOENT or -ENODATA: one line into @buf (empty when no reason is
 * known beyond "no segment covers it").  Returns @buf.
 */
const char *hgsync_no_map_reason(const struct hgsync *s, uint32_t guest_id, uint32_t clock,
				 char *buf, size_t len);

/* The result of one conversion. */
struct hgsync_result {
	uint64_t host_value;	/* host TSC or host ns of the same clock */
	uint64_t bound_ns;	/* |error| bound, HGSYNC_NO_BOUND if none */
	uint32_t method;	/* HGCOR_METHOD_* used */
	int32_t host_cpu;	/* where the vCPU ran then, -1 if unknown */
	uint64_t host_tsc;	/* the host TSC of host_value, 0 if unknown */
	const struct hgcor_segment *seg;
	uint32_t guest_id;	/* the incarnation that mapped it (has_prev/next) */
};

/*
 * Converts @guest_value of clock @clock (HGSYNC_CLOCK_*), read on guest
 * CPU @vcpu (the guest's CPU number, as its trace shows it; not KVM's
 * vcpu_id) of guest @guest_id, to the host's same clock.  0, -ENOENT when
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
 * Where guest CPU @vcpu of guest @guest_id (its vCPU thread: the vcpu_id
 * hgsync_guest_vcpu_id() gives) was at host TSC @host_tsc, from the
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
/*
 * "auto" (0), "kvm-exact" (or "kvm"), "probe", "exit": HGCOR_METHOD_*,
 * "marker": HGSYNC_METHOD_MARKER; -1 else.
 */
int hgsync_method_parse(const char *name);
const char *hgsync_clock_name(uint32_t clock);

#endif /* HGCLOCK_SYNC_H */
