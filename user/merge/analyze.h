/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Where a guest's time went (issue 32): each interval in which a guest
 * believed a thread was running (its sched_switch) split, in host ns,
 * into guest mode, VM exits by reason, preemption on the host (by which
 * host task), the vCPU thread asleep on the host, halts, disruptions
 * (migration/restore) and what the traces cannot say.
 * Documentation/analyze.rst.
 *
 * The engine is pure: it takes decoded events (struct hga_event) in host
 * time order, as hgm_run() hands them out, and keeps one state per vCPU,
 * per host CPU and per thread seen, never the trace itself.  merge's
 * events are decoded into hga_event by analyze_in.c (merge --analyze).
 *
 * Exactness: every host ns between two events of a vCPU goes to exactly
 * one component of that vCPU's open slice (integer adds, no rounding),
 * so a slice's components add up to its wall time.
 */
#ifndef HGCLOCK_ANALYZE_H
#define HGCLOCK_ANALYZE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Range checks of hostile input (an event outside them is refused). */
#define HGA_MAX_GUESTS		1024	/* as HGSYNC_MAX_GUESTS */
#define HGA_MAX_VCPUS		16384	/* a guest's CPU numbers, as KVM's vcpu_id limit */
#define HGA_MAX_HOST_CPUS	8192	/* host CPU numbers */
#define HGA_COMM_LEN		16	/* TASK_COMM_LEN */
#define HGA_NAME_LEN		32	/* an IRQ handler's name ("virtio0-requests"), cut beyond */

/* kvm_exit's isa field */
#define HGA_ISA_VMX	1
#define HGA_ISA_SVM	2

enum hga_kind {
	HGA_EV_KVM_ENTRY = 1,	/* host: vCPU (guest, vcpu) thread host_tid enters guest mode on host_cpu */
	HGA_EV_KVM_EXIT,	/* host: ... leaves it, for exit_isa/exit_reason */
	HGA_EV_HOST_SWITCH,	/* host sched_switch on host_cpu: prev_tid (prev_runnable) -> next_tid */
	HGA_EV_GUEST_SWITCH,	/* guest sched_switch on its vcpu: prev_tid -> next_tid, guest tids */
	HGA_EV_DISRUPT_BEGIN,	/* guest stopped running (migration/restore): its old VM's last exit */
	HGA_EV_DISRUPT_END,	/* guest runs again (the new VM's first entry) */
	HGA_EV_IRQ_ENTRY,	/* host irq_handler_entry on host_cpu: irq, irq_name */
	HGA_EV_IRQ_EXIT,	/* host irq_handler_exit on host_cpu */
	HGA_EV_SOFTIRQ_ENTRY,	/* host softirq_entry on host_cpu: irq is the vector */
	HGA_EV_SOFTIRQ_EXIT,	/* host softirq_exit on host_cpu */
	HGA_EV_NR_KINDS
};

struct hga_event {
	uint32_t kind;			/* enum hga_kind */
	uint64_t host_ns;		/* host clock, ns (guest events: mapped) */
	int32_t guest;			/* KVM and guest events, disruptions */
	int32_t vcpu;			/* KVM and guest events: the guest's CPU number */
	int32_t host_cpu;		/* KVM events, host sched_switch */
	int32_t host_tid;		/* KVM events: the vCPU thread */
	uint32_t exit_isa;		/* kvm_exit: HGA_ISA_* */
	uint32_t exit_reason;		/* kvm_exit: VMX basic exit reason or SVM exit code */
	int32_t prev_tid, next_tid;	/* sched_switch (host tids, or the guest's) */
	bool prev_runnable;		/* host sched_switch: prev_state was R (preempted) */
	char prev_comm[HGA_COMM_LEN], next_comm[HGA_COMM_LEN];
	uint64_t bound_ns;		/* guest events: the mapping's bound on host_ns */
	uint32_t method;		/* guest events: how they were mapped, HGA_METHOD_* */
	int32_t irq;			/* IRQ events: the irq number; softirq: vector */
	char irq_name[HGA_NAME_LEN];	/* irq_handler_entry: the handler's name */
};

/*
 * How a guest event was mapped to host time: the correlation's methods
 * (HGCOR_METHOD_*, HGSYNC_METHOD_MARKER; analyze_in.c checks that the
 * numbers agree).  Any other number counts as none.
 */
#define HGA_METHOD_NONE		0
#define HGA_METHOD_KVM_EXACT	1
#define HGA_METHOD_PROBE	2
#define HGA_METHOD_EXIT		3
#define HGA_METHOD_MARKER	4
#define HGA_NR_METHODS		5
const char *hga_method_name(uint32_t method);

#define HGA_MAX_IRQ		(1 << 24)	/* irq numbers taken (above: refused) */
#define HGA_NR_SOFTIRQS		10		/* HI .. RCU, the kernel's vectors */

/*
 * An offender's key (hga_split.offenders): a host tid (below 2^32), or
 * an interrupt that ran on the vCPU's host CPU in its stead.
 */
#define HGA_KEY_IRQ		(1ull << 32)	/* | irq number: a hard IRQ's handler */
#define HGA_KEY_SOFTIRQ		(2ull << 32)	/* | vector: a softirq */

/* Which kind of interrupt an offender's key names (the number in its low half). */
static inline bool hga_key_is_irq(uint64_t key)
{
	return (key >> 32) == HGA_KEY_IRQ >> 32;
}

static inline bool hga_key_is_softirq(uint64_t key)
{
	return (key >> 32) == HGA_KEY_SOFTIRQ >> 32;
}

/* Where one host ns of a vCPU went. */
enum hga_comp {
	HGA_C_GUEST,		/* in guest mode: kvm_entry .. kvm_exit */
	HGA_C_EXIT,		/* handling a VM exit (not HLT) on the host, by reason */
	HGA_C_PREEMPTED,	/* vCPU thread runnable, another host task on its CPU, by task;
				 * or a host IRQ or softirq on its CPU during an exit or
				 * a preemption (with irq_handler_entry, softirq_entry) */
	HGA_C_HOST_BLOCKED,	/* vCPU thread asleep on the host outside HLT (its VMM's I/O...) */
	HGA_C_HALTED,		/* HLT exit .. next kvm_entry: the guest idle */
	HGA_C_DISRUPTED,	/* the guest ran nowhere: migration or restore */
	HGA_C_UNKNOWN,		/* no event yet said which (kvm_* missing, trace start) */
	HGA_NR_COMP
};

const char *hga_comp_name(enum hga_comp c);
/* "HLT", "EXTERNAL_INTERRUPT", ... or NULL when not named here. */
const char *hga_exit_name(uint32_t isa, uint32_t reason);
bool hga_exit_is_hlt(uint32_t isa, uint32_t reason);

/* A time split by key: exit reasons (isa << 32 | reason) or host tids. */
struct hga_bucket {
	uint64_t key;
	uint64_t ns;
	uint64_t count;		/* exits begun; preemptions begun */
};
struct hga_buckets {
	struct hga_bucket *v;
	uint32_t n, cap;
	/*
	 * Past a few keys, an index (open addressing) of positions + 1 in
	 * v, covering v[0, idx_n): hga_bucket_add() keeps it, or rebuilds
	 * it when it covers less than v (after a reset).  Read by nobody
	 * else; reset and free only through hga_buckets_reset/free().
	 */
	uint32_t *idx;
	uint32_t idx_cap, idx_used, idx_n;
};
/* Adds to @key's bucket (past HGA_MAX_KEYS keys: to "(others)"); 0 or -1. */
int hga_bucket_add(struct hga_buckets *b, uint64_t key, uint64_t ns, uint64_t count);
/* Emptied (the arrays kept), or freed. */
void hga_buckets_reset(struct hga_buckets *b);
void hga_buckets_free(struct hga_buckets *b);

struct hga_split {
	uint64_t ns[HGA_NR_COMP];
	struct hga_buckets exits;	/* HGA_C_EXIT by reason: their ns add up to it */
	struct hga_buckets offenders;	/* HGA_C_PREEMPTED by host tid: add up to it */
};

/* One closed slice: a guest thread running on a vCPU, by the guest. */
#define HGA_SL_UNCERTAIN	(1u << 0) /* wall within the mapping's bounds at its ends */
#define HGA_SL_OPEN_END		(1u << 1) /* never switched out: cut at the trace's end */
#define HGA_SL_LOST_SWITCH	(1u << 2) /* the next switch's prev was another thread */
#define HGA_SL_CLIPPED		(1u << 3) /* cut by --from/--to */
struct hga_slice {
	int32_t guest, vcpu, tid;
	char comm[HGA_COMM_LEN];
	uint64_t start_ns, end_ns;	/* host ns, as mapped (not clipped) */
	uint64_t wall_ns;		/* within the window: = the split's sum */
	uint64_t bound_ns;		/* the larger bound of its two ends */
	uint32_t flags;			/* HGA_SL_* */
	const struct hga_split *split;	/* valid during the callback only */
};

/* A piece of an open slice's time charged to one component (or a count, t0 == t1). */
struct hga_charge {
	int32_t guest, vcpu, tid;	/* the slice's guest thread */
	const char *comm;		/* its name (HGA_COMM_LEN), valid during the call */
	uint64_t slice_ns;		/* the open slice's start, clipped to the window */
	uint64_t t0, t1;		/* host ns [t0, t1), clipped to the window */
	enum hga_comp comp;
	uint64_t key;			/* exit reason or host tid, as the buckets' */
	uint64_t count;			/* 1: an exit or preemption begun at t0 */
};

struct json_writer;

struct hga_options {
	uint64_t from_ns, to_ns;	/* host-ns window [from, to); to 0: no end */
	/* Each closed slice (NULL: none); returns 0 to go on. */
	int (*slice_cb)(void *ctx, const struct hga_slice *s);
	/* Each charge to an open slice, in time order per vCPU (NULL: none). */
	int (*charge_cb)(void *ctx, const struct hga_charge *ch);
	/* More members for the JSON report's object (NULL: none); 0 or -1. */
	int (*json_cb)(void *ctx, struct json_writer *w);
	void *ctx;
	/*
	 * Tests only: find the vCPUs an event concerns by looking at every
	 * vCPU, not through the per-CPU and per-thread chains: the answers
	 * must be the same (test_analyze's indexed_same_as_walk).
	 */
	bool walk_all;
};

/* Per guest thread: its certain slices' split and counts (vCPUs keep their own). */
struct hga_total {
	int32_t guest, vcpu, tid;	/* -1 where not the key */
	char comm[HGA_COMM_LEN];	/* a thread's last name */
	uint64_t nr_slices, wall_ns;
	uint64_t nr_uncertain, uncertain_ns;	/* slices not attributed (HGA_SL_UNCERTAIN) */
	struct hga_split split;
};

struct hga_vcpu_state;
struct hga_cpu_state;
struct hga_maps;

/* Zeroed, then hga_init(). */
struct hga {
	struct hga_options opt;
	struct hga_vcpu_state *vcpus;
	uint32_t nr_vcpus, cap_vcpus;
	struct hga_cpu_state *cpus;	/* indexed by host CPU, grown on demand */
	uint32_t nr_cpus;
	struct hga_total *threads;		/* per guest thread (idle: per vCPU too) */
	uint32_t nr_threads, cap_threads;
	/* host tasks' names, for the offenders (tid -> last comm; IRQs' too) */
	struct { int32_t tid; char comm[HGA_NAME_LEN]; } *names;
	uint32_t nr_names, cap_names;
	/* lookups by key (vCPUs, names, totals, vCPU threads): analyze.c */
	struct hga_maps *maps;
	uint64_t last_ns;			/* the latest event's host ns */
	uint64_t seen[HGA_EV_NR_KINDS];		/* events taken, by kind */
	/* refused input, each counted; the first said in first_err */
	uint64_t nr_regressions;		/* host_ns before the last event's */
	uint64_t nr_bad;			/* out of range, unknown kind */
	uint64_t nr_lost_switch;		/* guest switch from a thread not running */
	uint64_t nr_open_end;			/* slices cut at the end */
	char first_err[160];
	bool finished;
};

int hga_init(struct hga *a, const struct hga_options *opt);
/*
 * One event, in host-time order.  0: taken; 1: refused (counted, said in
 * the report); -1: out of memory; else the slice callback's value.
 */
int hga_event(struct hga *a, const struct hga_event *ev);
/*
 * Charges every started vCPU of @guest up to @t (>= the last event's):
 * the splits stay as they would be, the charge_cb sees the cut at @t.
 * 0, or the callback's value.
 */
int hga_charge_guest(struct hga *a, int32_t guest, uint64_t t);
/* Closes the slices still open at @end_ns (the trace's end). */
int hga_finish(struct hga *a, uint64_t end_ns);
void hga_free(struct hga *a);

/* A vCPU's whole split (every ns since its first event, in the window), or NULL. */
const struct hga_split *hga_vcpu_split(const struct hga *a, int32_t guest, int32_t vcpu);

/* An offender's (host tid key's) last name; an exit key's label in @buf. */
const char *hga_host_name(const struct hga *a, uint64_t key);
/* Is an offender's key a host task's (not an interrupt, unknown or others)? */
bool hga_key_is_task(uint64_t key);
/* "comm-tid", "irq 24 (virtio0)", "softirq NET_RX", "(unknown task)"... */
void hga_offender_label(const struct hga *a, uint64_t key, char *buf, size_t len);
void hga_exit_label(char *buf, size_t len, uint64_t key);

/* What the input lacks, as report lines (one per missing kind) in @buf. */
void hga_missing(const struct hga *a, char *buf, size_t len);

/* The report: text (top @top offenders and reasons), or one JSON object. */
int hga_report_text(const struct hga *a, FILE *out, unsigned int top);
int hga_report_json(const struct hga *a, FILE *out);
/*
 * The threads' splits as an SVG picture (analyze_svg.c): a stacked bar per
 * guest thread, the @top longest (0: all), one scale.  0, or -1 (memory,
 * or @out's error flag set).
 */
int hga_report_svg(const struct hga *a, FILE *out, unsigned int top);

/*
 * What merge --analyze* writes: the report to @text and/or @json, the
 * picture to @svg (each NULL: not that one).  Requests (analyze_req.h):
 * the guests' application events' begin/end, and @slice ("BEGIN,END":
 * two guest trace events, [system:]name, or NULL) on the event's thread.
 * @counts (NULL: not wanted): the summary's counts of the pass, which
 * merges every trace and application input unfiltered, so they are the
 * summary's only when merge has no perf input and no filter.
 */
struct hgm_par_result;
struct hga_reports {
	FILE *text;
	FILE *json;
	FILE *svg;
	const char *slice;
	struct hgm_par_result *counts;
};

/*
 * merge --analyze (analyze_in.c): @par's trace inputs merged again on one
 * thread, decoded into the engine, its reports to @rep's files.  The
 * filter's --from/--to clip the split (the events before still set the
 * state), its --events is ignored.  0, or an HGM_E_* with @err.
 */
struct hgm_par;
int hga_merge_run(const struct hgm_par *par, const struct hga_reports *rep, char *err,
		  size_t err_len);

#endif /* HGCLOCK_ANALYZE_H */
