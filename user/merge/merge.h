/* SPDX-License-Identifier: GPL-2.0 */
/*
 * hgclock merge: host and guest trace.dat files (libtracecmd) merged
 * into one timeline in host time, each guest event converted through its
 * vCPU's mapping (user/lib/sync.h) and annotated with the host CPU and
 * thread that ran the vCPU then.  Documentation/merge.rst.
 *
 * Streaming: every CPU of every input is one stream, read record by
 * record; a heap keyed by host time picks the next event.  Memory is one
 * record (and libtracecmd's page) per stream, whatever the trace length.
 */
#ifndef HGCLOCK_MERGE_H
#define HGCLOCK_MERGE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "json.h"
#include "sync.h"

struct tracecmd_input;
struct tep_handle;
struct tep_record;
struct tep_event;
struct trace_seq;

struct hgev_rec;

/* Application event files (appev.h) a merge takes, over all machines. */
#define HGM_MAX_APPS	64
#define HGM_MAX_INPUTS	(1 + HGSYNC_MAX_GUESTS + HGM_MAX_APPS)

/* What failed, returned with the message in err: the user's or ours. */
#define HGM_E_INPUT	(-1)	/* an input: unreadable, damaged, mismatched */
#define HGM_E_SYSTEM	(-2)	/* memory, threads, writing the output */

/* hgm_event.flags */
#define HGM_EV_UNMAPPED		(1u << 0) /* no mapping covers its time: raw_ts only */
#define HGM_EV_NO_HOST_CPU	(1u << 1) /* no tracking record says where its vCPU was */
#define HGM_EV_NOT_RUNNING	(1u << 2) /* the records say its vCPU thread was stopped */
#define HGM_EV_CPU_UNSURE	(1u << 3) /* a migration lies within the mapping's bound */

/*
 * One input file: a trace.dat (handle, tep) or an application's event
 * file (app: read by its streams, each with its own FILE; what the check
 * of the whole file found is kept here).
 */
/* sched_switch, sched_wakeup, sched_wakeup_new: the events whose text teaches names */
#define HGM_TEACH_EVENTS	3

struct hgm_input {
	const char *path;
	struct tracecmd_input *handle;
	struct tep_handle *tep;
	int guest;		/* -1: the host; else the guest's id in the correlation */
	uint32_t clock;		/* HGSYNC_CLOCK_* of its timestamps */
	const char *clock_name;	/* as trace-cmd recorded it */
	int nr_cpus;		/* app: its highest CPU + 1 */
	uint64_t nr_events, nr_unmapped, nr_no_cpu, nr_dropped;
	/*
	 * A trace.dat's buffers are inputs of their own: 0, its top buffer
	 * (path: the file); b + 1, its buffer instance b (trace-cmd record
	 * -B, extract -B), read through a handle of libtracecmd's that holds
	 * the top one's, with buffer_name its name and path "FILE (buffer
	 * NAME)" (label; both owned; open_path: the file).
	 */
	int buffer;
	char *buffer_name;
	char *label;
	/* application event files only: */
	bool app;
	bool perf;			/* perf samples (perf_in.c): name is the comm */
	const char *open_path;		/* the file read (path: the one named to the user) */
	char app_comm[17];		/* the process's name, from the header */
	char app_nodename[73];		/* the machine's, from the header */
	uint32_t app_pid;
	uint64_t app_records;		/* complete records in the file */
	uint64_t app_tail_bytes;	/* a last record cut short: not read */
	uint64_t *app_last_ts;		/* per CPU: its last record's time (nr_cpus) */
	uint32_t *app_tids;		/* the threads seen, at most HGM_APP_TIDS */
	int nr_app_tids;
	uint8_t *name_keep;		/* --events: per event id, 0 unknown, 1 keep, 2 drop */
	int nr_name_keep;
	/* sched events whose names hgm_teach_quietly() teaches (sched_names.c) */
	struct tep_event *teach_ev[HGM_TEACH_EVENTS];
	bool teach_known;		/* teach_ev[] found */
};

/* Threads of one application file named in the JSON (others still appear). */
#define HGM_APP_TIDS	1024

/* One event, as the merge hands it to an output. */
struct hgm_event {
	const struct hgm_input *in;
	struct tep_record *rec;		/* a trace event, or NULL and: */
	const struct hgev_rec *app;	/* an application's event */
	struct tep_event *event;	/* NULL when its format is unknown */
	int cpu;			/* the CPU it was traced on (guest: its vCPU) */
	uint64_t raw_ts;		/* its own clock */
	uint64_t host_ts;		/* host clock (= raw_ts on the host) */
	uint32_t flags;			/* HGM_EV_* */
	/* guest events only: */
	uint32_t method;		/* HGCOR_METHOD_* */
	uint64_t bound_ns;
	int32_t host_cpu;		/* -1 unknown */
	int32_t host_tid;		/* the vCPU's host thread, -1 unknown */
	/*
	 * A trace event's task and text, worked out once by hgm_run() before
	 * the emit (merge.c name_event()); NULL with hgm_options.no_text.
	 * info lives until the next event.
	 */
	int pid;
	const char *comm;
	const char *info;
};

static inline const char *hgm_ev_comm(const struct hgm_event *ev)
{
	return ev->comm ? ev->comm : "<...>";
}

static inline const char *hgm_ev_info(const struct hgm_event *ev)
{
	return ev->info ? ev->info : "";
}

/* ---- what to show (merge_filter.c) ---- */

#define HGM_FILTER_MAX_VCPUS	16384	/* guest CPUs: as KVM's vcpu_id limit */
#define HGM_FILTER_MAX_EVENTS	64
#define HGM_FILTER_EVENT_LEN	128	/* a pattern's bytes, with its NUL */

/* A time as the user typed it; its unit depends on the timeline's clock. */
struct hgm_filter_time {
	bool set, has_frac;
	uint64_t whole;			/* seconds, or TSC counts on x86-tsc */
	uint32_t frac_ns;
};

/*
 * Zeroed: everything.  guests_set: only the machines in guest_bits (and
 * the host if @host); vcpus_set: of the guests, only those CPUs; events:
 * trace-cmd -e patterns (hgm_filter_name()); from/to: the host-time
 * window, both ends included.
 */
struct hgm_filter {
	struct hgm_filter_time from, to;
	bool guests_set, host, vcpus_set;
	uint64_t guest_bits[HGSYNC_MAX_GUESTS / 64];
	uint64_t vcpu_bits[HGM_FILTER_MAX_VCPUS / 64];
	char events[HGM_FILTER_MAX_EVENTS][HGM_FILTER_EVENT_LEN];
	int nr_events;
};

/* Each 0, or -1 with a message in @err. */
int hgm_filter_parse_time(const char *s, struct hgm_filter_time *t, char *err, size_t err_len);
int hgm_filter_resolve_time(const struct hgm_filter_time *t, uint32_t clock, uint64_t *out,
			    const char *opt, char *err, size_t err_len);
/* "0,2-3,host" */
int hgm_filter_parse_guests(struct hgm_filter *f, const char *list, char *err, size_t err_len);
/* "0-3,7": the guests' CPUs, as merge's lines number them (vV) */
int hgm_filter_parse_vcpus(struct hgm_filter *f, const char *list, char *err, size_t err_len);
/* "sched,kvm:kvm_exit,irq_*" (repeatable: the lists add up) */
int hgm_filter_parse_events(struct hgm_filter *f, const char *list, char *err, size_t err_len);
/* Does the filter keep this machine (-1: the host), this guest CPU, this event? */
bool hgm_filter_machine(const struct hgm_filter *f, int guest);
bool hgm_filter_vcpu(const struct hgm_filter *f, int vcpu);
bool hgm_filter_name(const struct hgm_filter *f, const char *system, const char *name);

/*
 * Registers the task names that printing @rec (an event @e of @in) would
 * register, without printing it; false when only printing it does the
 * same (sched_names.c says when).  @seq: scratch, not written.
 */
bool hgm_teach_quietly(struct hgm_input *in, struct trace_seq *seq, struct tep_event *e,
		       struct tep_record *rec);

struct hgm_options {
	uint32_t method;		/* 0 best, else HGCOR_METHOD_* only */
	const struct hgm_filter *filter; /* NULL: all (not owned; outlives the merge) */
	bool progress;			/* a progress line on stderr */
	bool span;			/* find first_ts/last_ts (progress does) */
	int shard, nr_shards;		/* only streams i with i % nr_shards == shard (0: all) */
	bool no_text;			/* no output shows task names or text (--dat's pass) */
};

struct hgm_stream;
struct hgm_app_reader;
struct hgm_checked;

/*
 * Zeroed before the first hgm_add_input(); hgm_close() frees what it
 * holds (a struct hgm whose inputs all failed to open holds nothing).
 */
struct hgm {
	const struct hgsync *sync;
	struct hgm_options opt;
	struct hgm_input *in;		/* grown by hgm_add_input(), at most HGM_MAX_INPUTS */
	int nr_in, cap_in;
	/*
	 * The trace files already checked, shared by the hgm's of one merge
	 * (merge_par.c's workers; set before the first hgm_add_input(), not
	 * owned), or NULL: each input is then checked when it is added.
	 */
	struct hgm_checked *checked;
	struct hgm_stream *streams;
	int nr_streams;
	struct hgm_app_reader *app_readers;	/* nr_in: an event file's one reader */
	uint64_t nr_app_reads;		/* event-file records its readers read */
	/*
	 * Why an event file's reader stopped before the file's end (the
	 * file changed under the merge, or no memory for a queued record),
	 * "" if none did: hgm_read_error() says it.
	 */
	char app_error[320];
	int app_error_code;		/* its HGM_E_*, 0 if none */
	struct hgm_stream **heap;
	int heap_len;
	uint64_t first_ts, last_ts;	/* host-clock span, for progress */
	uint64_t nr_events;
	uint64_t max_bound_ns;		/* over mapped guest events */
	uint64_t by_method[5];	/* by HGCOR_METHOD_*, HGSYNC_METHOD_MARKER */
	uint32_t host_clock;		/* the clock of the host input, or of the guests */
	bool has_host;
	uint64_t from_ts, to_ts;	/* the filter's window in the timeline's clock */
	uint64_t nr_filtered;		/* events read and left out by the filter */
	struct trace_seq *info_seq;	/* the current event's text (merge.c name_event()) */
};

/*
 * A record of the trace files that passed the check of their data
 * (merge.c), for hgm.checked: several hgm's opening the same files read
 * each through once; the others wait for that check and take its
 * result.  NULL when out of memory.  Free it after every hgm using it
 * has added its inputs.
 */
struct hgm_checked *hgm_checked_new(void);
void hgm_checked_free(struct hgm_checked *c);

/*
 * Opens @path as the host's trace (@guest -1) or guest @guest's.  The
 * timestamps are read raw (a TimeShift that trace-cmd record -A stored
 * is ignored: the correlation replaces it).  0, or HGM_E_INPUT with a
 * message in @err (@err_len bytes), HGM_E_SYSTEM when out of memory.
 */
int hgm_add_input(struct hgm *m, const char *path, int guest, char *err, size_t err_len);

/*
 * Opens @path, an application's event file (hgclock_events_open(3)), as
 * the host's (@guest -1) or guest @guest's, and checks all of it: its
 * records' fields and each CPU's time order.  A last record cut short
 * (a writer that did not finish) is left out and counted in
 * app_tail_bytes.  0, or HGM_E_INPUT / HGM_E_SYSTEM with @err.
 */
int hgm_add_app_input(struct hgm *m, const char *path, int guest, char *err, size_t err_len);

/*
 * Checks the inputs against the correlation @sync (clocks it can map,
 * guests it knows) and prepares the streams.  0, or an HGM_E_* with @err.
 */
int hgm_start(struct hgm *m, const struct hgsync *sync, const struct hgm_options *opt,
	      char *err, size_t err_len);

/*
 * Hands every event, in host time order, to @emit (which returns 0 to go
 * on, else stops the merge with that value).  Returns 0 or @emit's value.
 */
int hgm_run(struct hgm *m, int (*emit)(void *ctx, const struct hgm_event *ev), void *ctx);

/*
 * After hgm_run() returned 0: 0 if every input was read to its end, else
 * an HGM_E_* with the message in @err (an event file whose reader had to
 * stop early: its later events are missing from what was emitted, so the
 * output must not be taken as whole).
 */
int hgm_read_error(const struct hgm *m, char *err, size_t err_len);

/* Percent of the span [first_ts, last_ts] that @host_ts has reached. */
unsigned int hgm_percent(uint64_t first_ts, uint64_t last_ts, uint64_t host_ts);

void hgm_close(struct hgm *m);

/* The host-clock value as text: "sec.nanoseconds", or a count for x86-tsc. */
void hgm_format_ts(char *buf, size_t len, uint32_t clock, uint64_t ts);

/* ---- outputs (merge_out.c) ---- */

/* The event's name ("sched_switch", "app:NAME", "perf:EVENT") in @buf when built there. */
const char *hgm_event_name(const struct hgm_event *ev, char *buf, size_t len);
/* A trace event's fields as trace-cmd report prints them (in @seq's buffer). */
/* A perf sample's event ("cpu-clock") and where it hit ("IP SYM (DSO)"). */
void hgm_perf_event_name(const struct hgev_rec *r, char *buf, size_t len);
const char *hgm_perf_where(const struct hgev_rec *r);
/* A value of the timeline's clock in host ns (TSC counts converted by tsc_khz). */
uint64_t hgm_host_ns(const struct hgm *m, uint64_t host_ts);

/* One run of a vCPU thread on a host CPU, in host ns. */
struct hgm_run {
	int32_t host_cpu;
	int32_t guest;
	int32_t vcpu;		/* the guest's CPU number, -1 unknown (vcpu_id then) */
	int32_t vcpu_id;
	int32_t host_tid;
	uint64_t t0_ns, t1_ns;
};

struct hgm_runs {
	struct hgm_run *run;
	size_t nr, cap;
	uint64_t nr_clipped;	/* runs cut short: they overlapped another on their host CPU */
};

/*
 * The runs of the merged guests' vCPU threads (the correlation's tracking
 * records) within [@min_ns, @max_ns], sorted by host CPU and start, none
 * overlapping another on its host CPU.  0, or -1 when out of memory.
 * hgm_runs_free() frees @r.
 */
int hgm_vcpu_runs(const struct hgm *m, uint64_t min_ns, uint64_t max_ns, struct hgm_runs *r);
void hgm_runs_free(struct hgm_runs *r);

/* Text in trace-cmd report's style; guest lines tagged (Documentation/merge.rst). */
struct hgm_text {
	FILE *out;
	struct trace_seq *seq;
	char *buf;		/* the last formatted line(s) */
	size_t len, cap;
};
int hgm_text_init(struct hgm_text *t, FILE *out);
/* Formats @ev into t->buf/t->len (a line, after a drop notice if any). */
int hgm_text_format(struct hgm_text *t, const struct hgm_event *ev);
/* hgm_text_format(), then writes it to t->out. */
int hgm_text_event(void *ctx, const struct hgm_event *ev);
void hgm_text_free(struct hgm_text *t);

/*
 * Chrome/Perfetto JSON trace: a process per machine, a track per host
 * CPU and per guest vCPU, guest events on their vCPU's track, and the
 * vCPU threads' runs as slices on the host CPU tracks and on the guest
 * CPU tracks (the guest's events nest under the run that ran them), a
 * flow joining the two.
 */
struct hgm_json {
	struct json_writer w;
	const struct hgm *m;
	uint64_t min_ns, max_ns;	/* the span written, in host ns */
};
int hgm_json_begin(struct hgm_json *j, FILE *out, const struct hgm *m);
int hgm_json_event(void *ctx, const struct hgm_event *ev);
/* One event as a JSON object and a newline through @w, one write (no span bookkeeping). */
int hgm_json_write_event(struct json_writer *w, const struct hgm *m, const struct hgm_event *ev);
/* Widens the span the vCPU runs are clipped to by @host_ts. */
void hgm_json_span(struct hgm_json *j, const struct hgm *m, uint64_t host_ts);
/* Adds the vCPU runs within the span written, closes the JSON. */
int hgm_json_end(struct hgm_json *j);

/* Both outputs at once (either may be NULL). */
/*
 * Disruptions (sync.rst, "Migration and restore") as the outputs mark
 * them: a line in the text, an instant in the JSON, each where the guest
 * stopped running (the old VM's last exit from it; when the session was
 * found broken if that is unknown), in the timeline's clock, inside the
 * filter's window.  Sorted by time; @next is the first not yet written.
 */
struct hgm_mark {
	uint64_t ts;
	uint64_t end_ts;	/* the new VM's first entry; 0: unknown or gone */
	uint32_t guest, next_guest;
	uint32_t kind;		/* HGCOR_DISRUPT_* */
	int32_t old_vm_pid, new_vm_pid;
	int has_kvm_jump;
	int64_t kvm_jump_tsc;
	char text[512];		/* the text line, "\n" ended */
	char json[768];		/* the JSON object, no comma */
};
struct hgm_marks {
	struct hgm_mark *v;
	size_t n, next;
};
/* 0, or -1 (out of memory). */
int hgm_marks_build(struct hgm_marks *mk, const struct hgm *m);
/* Writes the marks at or before @ts (UINT64_MAX: all that are left); 0 or -1. */
int hgm_marks_until(struct hgm_marks *mk, uint64_t ts, FILE *text, FILE *json);
void hgm_marks_free(struct hgm_marks *mk);

struct hgm_outputs {
	struct hgm_text *text;
	struct hgm_json *json;
	struct hgm_marks *marks;	/* NULL: none */
};
int hgm_outputs_event(void *ctx, const struct hgm_event *ev);

/* ---- several threads (merge_par.c) ---- */

struct hgm_input_spec {
	const char *path;
	int guest;		/* -1: the host */
	bool app;		/* an application event file, not a trace.dat */
	bool perf;		/* ... converted from perf samples (perf_in.c) */
	const char *open_path;	/* app: the file to read, when not @path (NULL) */
};

/*
 * One "--guest [ID=]FILE" argument of merge (and of record --merge-guest)
 * into @in: ID, a decimal guest number below HGSYNC_MAX_GUESTS, else
 * *@next_id; @in->path points into @spec.  *@next_id becomes the id + 1.
 * A prefix that is not such a number is part of the file name.
 */
void hgm_guest_spec(const char *spec, int *next_id, struct hgm_input_spec *in);

struct hgm_par {
	const struct hgsync *sync;
	struct hgm_options opt;
	const struct hgm_input_spec *inputs;
	int nr_inputs;
	int nr_threads;		/* workers, >= 1 */
	FILE *text;		/* NULL: no text */
	FILE *json;		/* NULL: no JSON */
	bool progress;
};

struct hgm_par_result {
	uint64_t nr_events;
	uint64_t nr_filtered;	/* read, and left out by the time window or --events */
	bool filtered;		/* a filter was given */
	uint64_t by_method[5];	/* by HGCOR_METHOD_*, HGSYNC_METHOD_MARKER */
	uint64_t max_bound_ns;
	struct {
		int guest;
		bool app, perf;
		char buffer[32];	/* a buffer instance's name (cut short), or "" */
		const char *app_path;	/* an application input's path (its spec's), or NULL */
		uint64_t nr_events, nr_unmapped, nr_no_cpu, nr_dropped;
		uint64_t app_tail_bytes;
	} in[HGM_MAX_INPUTS];
	int nr_in;
};

/* The summary's counts of a finished hgm_run(). */
void hgm_result(const struct hgm *m, struct hgm_par_result *res);
/* @m's counts added to @res (a worker's share: merge_par.c), its inputs named. */
void hgm_result_add(const struct hgm *m, struct hgm_par_result *res);

/* hgm_add_input() or hgm_add_app_input(), as @in says. */
int hgm_add_spec(struct hgm *m, const struct hgm_input_spec *in, char *err, size_t err_len);

/*
 * A pass of its own over @par's inputs (--dat, --perfetto): every input
 * added to the zeroed @m and the merge started with @par's options, on
 * this thread alone and without a progress line; @no_text: no task names
 * or event text (hgm_event.comm, .info) are worked out.  0, or an HGM_E_*
 * with @err; hgm_close(@m) either way.
 */
int hgm_start_pass(struct hgm *m, const struct hgm_par *par, bool no_text, char *err,
		   size_t err_len);

/*
 * The merge of @par's inputs on @par->nr_threads workers plus the calling
 * thread, writing the same bytes in the same order as hgm_run() with the
 * outputs above would.  0, or an HGM_E_* with a message in @err.
 */
int hgm_par_run(const struct hgm_par *par, struct hgm_par_result *res, char *err, size_t err_len);

/* ---- trace.dat output (merge_dat.c) ---- */

struct hgm_dat_result {
	uint64_t nr_unmapped;		/* guest events without host time: not written */
	uint64_t nr_app;		/* application events and perf samples: not written */
	uint64_t nr_marks;		/* disruption marks: print events in the host's file */
	uint64_t nr_marks_left;		/* marks not written: no host file or print event */
	struct {
		int guest;		/* -1: the host */
		uint64_t nr_events;
	} files[HGM_MAX_INPUTS];	/* hgm_dat_path() names each */
	int nr_files;
};

/*
 * The file of machine @guest (-1: the host) for "--dat @path": @path
 * itself for the host, "STEM-gG.dat" for guest G (STEM: @path without
 * its ".dat").
 */
void hgm_dat_path(const char *path, int guest, char *out, size_t len);

/*
 * @par's trace inputs merged again on one thread (its filter applies)
 * into trace.dat files, one per machine, guest events in host time, and
 * the summary's counts into @counts (when not NULL).  Each file is
 * written under a temporary name and renamed into place once all are
 * written.  0, or an HGM_E_* with @err.
 */
int hgm_dat_run(const struct hgm_par *par, const char *path, struct hgm_dat_result *res,
		struct hgm_par_result *counts, char *err, size_t err_len);

/* ---- perf samples by key (merge_report.c) ---- */

/*
 * "guest,pcpu,vcpu,comm,sym,dso" (any of them, in any order, each once)
 * into @keys (room for 6).  0, or -1 with @err.
 */
int hgm_report_parse_sort(const char *spec, int *keys, int *nr, char *err, size_t err_len);

/*
 * The perf inputs of @par (perf_in.c), merged again on one thread and
 * counted by @keys; the table to @out (perf report's style, the busiest
 * first key first).  0, or an HGM_E_* with @err.
 */
int hgm_report_run(const struct hgm_par *par, const int *keys, int nr_keys, FILE *out,
		   char *err, size_t err_len);

/* ---- Perfetto trace output (merge_pftrace.c) ---- */

struct hgm_pf_result {
	uint64_t nr_events;		/* events written */
	uint64_t nr_unmapped;		/* events without host time: not written */
	uint64_t nr_runs;		/* vCPU runs written */
	uint64_t nr_runs_clipped;	/* ... cut short: they overlapped on a host CPU */
	uint64_t nr_packets, bytes;	/* the file's packets and size */
	/* the analysis (analysis set): guest threads' slices on the host */
	uint64_t nr_an_slices;		/* certain slices, with their pieces */
	uint64_t nr_an_uncertain;	/* slices within their ends' bounds: no pieces */
	uint64_t nr_an_pieces;		/* exits, preemptions, host sleeps, disruptions */
	uint64_t nr_an_uncertain_drawn;	/* ... of them found so after their pieces were written */
	uint64_t nr_an_overlap;		/* slices of a thread on two vCPUs at once: not drawn */
};

/*
 * @par's inputs merged again on one thread (its filter applies) into a
 * Perfetto trace on @out (Documentation/merge.rst, "Perfetto trace"),
 * and the summary's counts into @counts (when not NULL); with @analysis
 * (merge --analyze*), each guest thread's time on the host too
 * (Documentation/analyze.rst, "In Perfetto"), and @analysis's reports
 * written by the same pass of the engine.  0, or an HGM_E_* with @err.
 */
struct hga_reports;
int hgm_pf_run(const struct hgm_par *par, FILE *out, struct hgm_pf_result *res,
	       struct hgm_par_result *counts, const struct hga_reports *analysis, char *err,
	       size_t err_len);

#endif /* HGCLOCK_MERGE_H */
