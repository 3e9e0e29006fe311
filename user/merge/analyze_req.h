/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Per request (issue 32, item 2): an application's slices (hgclock_event()
 * begin/end) or a pair of guest events, each split in host ns into the
 * guest thread running in guest mode, runnable on the guest's run queue,
 * preempted on the host (by whom), in VM exits (by reason), halted,
 * blocked in the guest, and what the traces cannot say.  The slowest,
 * and percentiles per component.  Documentation/analyze.rst.
 *
 * A layer over the engine (analyze.h): it owns a struct hga, passes it
 * the engine's events, and takes the time of a thread's open request from
 * the engine's charges while the guest has the thread on a vCPU, and from
 * the guest's scheduler (sched_switch's prev_state, sched_wakeup) while
 * it has not.  At any instant a thread is on one vCPU or on none, so a
 * request's components add up to its wall time exactly.
 *
 * Memory: one state per guest thread and vCPU seen, the slowest @top
 * requests, and each request's components (for the percentiles) up to
 * HGR_MAX_KEPT requests (past that: counted, the percentiles say so).
 */
#ifndef HGCLOCK_ANALYZE_REQ_H
#define HGCLOCK_ANALYZE_REQ_H

#include "analyze.h"

#define HGR_NAME_LEN	64
#define HGR_MAX_KEPT	(1u << 18)
#define HGR_MAX_TOP	100
#define HGR_NO_KEY	(UINT64_MAX - 2)	/* no offender (the engine's keys are not it) */
#define HGR_MAX_DEPTH	(1u << 20)	/* nested begins of one thread: more is damage */

enum hgr_comp {
	HGR_C_RUNNING,		/* on a vCPU, in guest mode */
	HGR_C_RUNQ,		/* runnable in the guest, not on a vCPU */
	HGR_C_PREEMPTED,	/* on a vCPU whose thread the host preempted, by host task */
	HGR_C_EXIT,		/* on a vCPU in a VM exit, by reason */
	HGR_C_HALTED,		/* on a vCPU halted */
	HGR_C_BLOCKED,		/* asleep in the guest (until its wakeup, or its switch-in
				 * when the guest's sched_wakeup is not traced) */
	HGR_C_HOST_BLOCKED,	/* on a vCPU whose host thread slept outside HLT */
	HGR_C_DISRUPTED,	/* the guest ran nowhere (migration/restore) */
	HGR_C_UNKNOWN,		/* on a vCPU the host's events say nothing of */
	HGR_C_UNSPLIT,		/* the guest's scheduler said nothing of the thread yet */
	HGR_NR_COMP
};

const char *hgr_comp_name(enum hgr_comp c);

enum hgr_kind {
	HGR_EV_BEGIN = 1,	/* a request of guest thread (guest, tid) begins */
	HGR_EV_END,		/* ... ends */
	HGR_EV_WAKEUP,		/* guest sched_wakeup of tid: runnable from now */
	HGR_EV_NR_KINDS
};

struct hgr_event {
	uint32_t kind;		/* enum hgr_kind */
	uint64_t host_ns;	/* mapped to host time */
	int32_t guest, tid;	/* the guest's tid */
	uint64_t bound_ns;	/* the mapping's bound on host_ns */
	/*
	 * WAKEUP: the guest CPU whose run queue the thread was woken onto
	 * (sched_wakeup's target_cpu); -1: not known.  Other kinds: unused.
	 */
	int32_t vcpu;
	char name[HGR_NAME_LEN];	/* BEGIN: the request's name */
};

struct hgr_split {
	uint64_t ns[HGR_NR_COMP];
	struct hga_buckets exits;	/* HGR_C_EXIT by reason (isa << 32 | reason) */
	struct hga_buckets offenders;	/* HGR_C_PREEMPTED by host tid */
	struct hga_buckets runq_by;	/* HGR_C_RUNQ by who ran instead (HGR_RQ_KEY) */
};

/*
 * Who ran instead while a thread waited on the guest's run queue: the
 * guest thread on the vCPU whose run queue held it (the one it was
 * switched out of runnable, or sched_wakeup's target_cpu), keyed
 * guest << 32 | tid (tid 0: that vCPU idle); HGR_RQ_UNKNOWN when that
 * vCPU, or what it ran, is not known; past the engine's key limit,
 * "(others)" (UINT64_MAX - 1).  count: the pieces begun (the wait's
 * start, or that thread switched in on the vCPU while it waited).
 */
#define HGR_RQ_KEY(guest, tid)	((uint64_t)(uint32_t)(guest) << 32 | (uint32_t)(tid))
#define HGR_RQ_UNKNOWN		UINT64_MAX

#define HGR_RQ_UNCERTAIN	(1u << 0)	/* wall within its ends' bounds: not split */
#define HGR_RQ_CLIPPED		(1u << 1)	/* cut by --from/--to */

struct hgr_request {
	int32_t guest, tid;
	char name[HGR_NAME_LEN];
	uint64_t begin_ns, end_ns;	/* host ns, as mapped */
	uint64_t wall_ns;		/* within the window: = the split's sum */
	uint64_t bound_ns;		/* the larger bound of its ends */
	uint32_t flags;			/* HGR_RQ_* */
	/* its largest host offender, exit reason, run-queue offender (HGR_NO_KEY: none) */
	uint64_t top_key[3];
	struct hgr_split split;
};

struct hgr_options {
	/* Each closed request (NULL: none), its split valid during the call; 0 to go on. */
	int (*req_cb)(void *ctx, const struct hgr_request *rq);
	/*
	 * The engine's own callbacks, passed through (NULL: none): each
	 * charge to an open slice, in time order per vCPU, and each closed
	 * slice after its last charge; @a is the engine (its names).  0 to go on.
	 */
	int (*charge_cb)(void *ctx, const struct hga *a, const struct hga_charge *ch);
	int (*slice_cb)(void *ctx, const struct hga *a, const struct hga_slice *s);
	void *ctx;			/* the three callbacks' */
	unsigned int top;		/* the slowest kept for the report (<= HGR_MAX_TOP) */
};

struct hgr_thread;
struct hgr_kept;

/* Zeroed, then hgr_init(); not moved while in use. */
struct hgr {
	struct hga a;
	struct hgr_options opt;
	struct hgr_thread *tab;		/* guest threads and vCPUs, open addressing */
	uint32_t tab_cap, tab_n;
	struct hgr_kept *kept;		/* each certain request's components */
	uint32_t nr_kept, cap_kept;
	unsigned int sorted_by;		/* the kept sorted by component - 1; 0: not sorted */
	struct hgr_request *slow;	/* the slowest, slowest first */
	uint32_t nr_slow;
	struct hgr_split tot;		/* all certain requests */
	uint64_t nr_requests, wall_ns;	/* certain requests */
	uint64_t nr_uncertain, uncertain_ns;
	uint64_t nr_not_kept;		/* past HGR_MAX_KEPT: not in the percentiles */
	uint64_t nr_nested;		/* begins inside an open request: in the outer one */
	uint64_t nr_end_alone;		/* ends without a begin */
	uint64_t nr_never_ended;	/* begun, never ended: not split */
	uint64_t nr_outside;		/* wholly outside --from/--to */
	uint64_t nr_regressions;	/* before the event already taken: refused */
	uint64_t nr_bad;		/* out of range: refused */
	uint64_t nr_wakeups;		/* guest sched_wakeups taken */
	uint64_t nr_begins;
	char first_err[160];
	bool finished;
};

/* The engine's window and callbacks are the request layer's. 0, or -1 (from >= to). */
int hgr_init(struct hgr *r, uint64_t from_ns, uint64_t to_ns, const struct hgr_options *opt);
/* An engine event (hga_event()'s values); a guest sched_switch's prev_runnable says R. */
int hgr_engine_event(struct hgr *r, const struct hga_event *ev);
/* A request's end or begin, or a wakeup: 0 taken, 1 refused (counted), -1 no memory. */
int hgr_event(struct hgr *r, const struct hgr_event *ev);
/* The engine's hga_finish(); requests still open are counted, not split. */
int hgr_finish(struct hgr *r, uint64_t end_ns);
void hgr_free(struct hgr *r);

/*
 * Component @c (HGR_NR_COMP: the wall time) of the certain requests at
 * percentile @pct (nearest rank, 1..100; sorts the kept), and that
 * request's largest offender, exit or run-queue key in @top_key
 * (HGR_NO_KEY: none).  0, or -1 when there is no request.
 */
int hgr_percentile(struct hgr *r, unsigned int c, unsigned int pct, uint64_t *ns,
		   uint64_t *top_key);

/* A run-queue offender's key as "guest:comm-tid", "guest:(idle)", "(unknown)". */
void hgr_runq_label(const struct hgr *r, uint64_t key, char *buf, size_t len);

/*
 * The report's requests section (text); the JSON's is added to
 * hga_report_json().  Both sort the kept components (the percentiles).
 */
int hgr_report_text(struct hgr *r, FILE *out);
/*
 * The picture (analyze_svg.c): hga_report_svg()'s bars per thread, then
 * a bar per slowest request (the @top slowest, 0: all kept), split by
 * component, to a scale of its own.  0, or -1 (memory, @out's error).
 */
int hgr_report_svg(const struct hgr *r, FILE *out, unsigned int top);

/*
 * merge --perfetto with --analyze (analyze_in.c): hga_merge_run() with
 * @opt's callbacks seeing the result as the engine makes it, in the same
 * pass that writes @rep's reports (@rep NULL: none).  0, or an HGM_E_*
 * with @err.
 */
int hga_merge_engine(const struct hgm_par *par, const struct hga_reports *rep,
		     const struct hgr_options *opt, char *err, size_t err_len);

#endif /* HGCLOCK_ANALYZE_REQ_H */
