/* SPDX-License-Identifier: LGPL-2.1 */
/*
 * Exit pairing without the guest module (Documentation/sync.rst, "Guests
 * without the module"): `hgclock pairmark` in the guest writes two
 * trace_marker lines around a CPUID on hgclock's pairing leaf; the host
 * module records the exit (EXIT_HOST, with the host's TSC).  The guest's
 * trace.dat holds the markers, stamped in its own trace clock, on the
 * CPU that wrote them; this joins them with the host's exit records:
 *
 *	guest_ts_begin <= (the exit, in the guest's trace clock) <= guest_ts_end
 *
 * A bounded pairing, bound = guest_ts_end - guest_ts_begin.
 *
 * Marker line (the ftrace print event's buf), exactly:
 *	"hgclock_pair begin key=K seq=S" or "hgclock_pair end key=K seq=S",
 * K decimal 0..65535, S decimal 1..4294967295, no sign or leading zero,
 * optionally one trailing newline (the kernel adds one).
 *
 * Naming: guest_ts_* are in the guest trace's clock (ns for local/perf,
 * TSC counts for x86-tsc); host_tsc is the host's TSC.
 */
#ifndef HGCLOCK_MARKPAIR_H
#define HGCLOCK_MARKPAIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/hgclock.h>

#define HG_MARKPAIR_PREFIX	"hgclock_pair"
/* The longest marker line with its newline and NUL. */
#define HG_MARKPAIR_LINE_MAX	64
/* Guest CPUs and vCPU ids beyond this are refused as out of range. */
#define HG_MARKPAIR_MAX_CPU	65536
/* Default sanity limit of a pair's gap (end - begin) in ns: larger ones are dropped. */
#define HG_MARKPAIR_MAX_GAP_NS	1000000ull

/*
 * Writes a marker line (with its newline) into @buf; its length, or -1
 * when it does not fit or @key/@seq are out of range.
 */
int hg_marker_format(char *buf, size_t size, bool is_end, uint32_t key, uint32_t seq);

/*
 * Parses a print event's text (@len bytes at most; it may lack a NUL).
 * 1: one of ours, @key/@seq/@is_end set; 0: not ours (no prefix);
 * -1: starts with the prefix but is not a valid marker.
 */
int hg_marker_parse(const char *text, size_t len, uint32_t *key, uint32_t *seq, bool *is_end);

/* One marker as read from the guest trace. */
struct hg_marker {
	uint64_t guest_ts;	/* the print event's timestamp, guest trace clock */
	int32_t guest_cpu;	/* the CPU buffer it was in */
	uint32_t key;
	uint32_t seq;
	uint32_t is_end;
};

/* A pairing: the exit lay between the two markers in the guest's clock. */
struct hg_markpair {
	int32_t guest_cpu;
	uint32_t guest_clock;		/* HGSYNC_CLOCK_* of the guest trace */
	uint64_t guest_ts_begin;
	uint64_t guest_ts_end;
	uint64_t host_tsc;		/* the host's TSC at the exit (EXIT_HOST hdr.tsc) */
	uint64_t host_ns;		/* the host's sched_clock there (hdr.sched_clock_ns) */
	int32_t host_cpu;		/* the host CPU of the exit */
	int32_t vm_pid;
	int32_t vcpu_id;		/* KVM's */
	uint32_t key;
	uint32_t seq;
	uint32_t flags;			/* HG_MARKPAIR_* */
};

/* hg_markpair.flags */
#define HG_MARKPAIR_VCPU_ASSUMED	(1u << 0) /* no CPU map: guest CPU n taken as vcpu_id n */

/* What the matching dropped, and why; each marker or pair counted once. */
struct hg_markpair_stats {
	uint64_t markers;		/* valid marker lines seen */
	uint64_t malformed;		/* with the prefix, not valid */
	uint64_t out_of_range;		/* guest CPU or timestamp out of range */
	uint64_t wrong_key;		/* not the key asked for */
	uint64_t duplicate;		/* (key, seq) with two begins or two ends */
	uint64_t no_begin;		/* an end alone */
	uint64_t no_end;		/* a begin alone */
	uint64_t cross_cpu;		/* begin and end on different guest CPUs */
	uint64_t reversed;		/* end stamped before begin */
	uint64_t too_wide;		/* end - begin over the limit */
	uint64_t no_exit;		/* no host exit with its (key, seq) */
	uint64_t ambiguous_exit;	/* several host exits with its (key, seq) */
	uint64_t bad_exit;		/* the exit's vm_pid/vcpu_id out of range */
	uint64_t vcpu_mismatch;		/* the exit came from another vCPU */
	uint64_t pairs;			/* produced */
	uint32_t vcpu_assumed;		/* 1: no CPU map, guest CPU n = vcpu_id n */
	uint32_t guest_clock;		/* HGSYNC_CLOCK_* (hg_markpair_collect()) */
	char clock_name[32];		/* the guest trace's clock (hg_markpair_collect()) */
};

struct hg_markpair_opts {
	int32_t vm_pid;			/* only this VM's exits; -1: any (not if ambiguous) */
	int64_t key;			/* only this key; -1: any */
	uint64_t max_gap;		/* largest end - begin, guest clock units; 0: none */
	uint32_t guest_clock;		/* HGSYNC_CLOCK_*, copied into each pair */
	/* guest CPU n is KVM vcpu_id cpu_vcpu[n] (-1: unknown); NULL: vcpu_id n */
	const int32_t *cpu_vcpu;
	size_t nr_cpu_vcpu;
};

/*
 * The pure part: joins @markers (any order) with the host's @exits (any
 * order; only those of opts->vm_pid unless it is -1) by (key, seq).
 * Every pair has both markers on one guest CPU, begin <= end, end - begin
 * <= opts->max_gap, exactly one exit with its (key, seq) from the vCPU of
 * that guest CPU.  *@out (sorted by guest CPU, then guest_ts_begin; free()
 * it) and *@nr_out; @st counts everything dropped.  0 or -ENOMEM.
 */
int hg_markpair_match(const struct hg_marker *markers, size_t nr_markers,
		      const struct hgclock_rec_exit_host *exits, size_t nr_exits,
		      const struct hg_markpair_opts *opts, struct hg_markpair **out,
		      size_t *nr_out, struct hg_markpair_stats *st);

/* ---- markpair_trace.c: from a trace.dat (hgclock, not hgclock-guest) ---- */

struct tracecmd_input;
struct hgsync;

/*
 * Opens a guest trace.dat with raw timestamps (as merge does: trace-cmd's
 * own TimeShift not applied); NULL with @err said.  Close it with
 * tracecmd_close().
 */
struct tracecmd_input *hg_markpair_open(const char *path, char *err, size_t err_len);

/*
 * Reads every ftrace print event of @guest (opened with raw timestamps:
 * hg_markpair_open() or merge's hgm_add_input()) and joins its markers
 * with @s's EXIT_HOST records (hgsync_load(); read only) of VM
 * @opts->vm_pid.  opts->guest_clock is taken from the trace; a max_gap of
 * 0 becomes HG_MARKPAIR_MAX_GAP_NS (in TSC counts at the host's tsc_khz
 * for an x86-tsc trace).  Reads @guest's CPUs from their first event: a
 * caller iterating them itself starts again after.  0, -EINVAL (a trace
 * clock hgclock cannot map: st->clock_name says which), -ENOMEM, -E2BIG
 * (over 16M markers).
 */
int hg_markpair_collect(struct tracecmd_input *guest, const struct hgsync *s,
			const struct hg_markpair_opts *opts, struct hg_markpair **out,
			size_t *nr_out, struct hg_markpair_stats *st);

#endif /* HGCLOCK_MARKPAIR_H */
