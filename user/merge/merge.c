// SPDX-License-Identifier: GPL-2.0
/*
 * The merge engine (merge.h): trace.dat inputs through libtracecmd,
 * one stream per input CPU, a binary heap on host time.  The inputs are
 * checked and added by merge_in.c, below this file.
 *
 * Ordering: each stream's records come in its own clock's order (ftrace
 * writes a CPU's buffer in time order); a guest stream's mapping is
 * monotonic within a segment, so converting each record keeps the stream
 * in host order, and the heap interleaves the streams.  Ties go to the
 * lower input (host first), then the lower CPU: the output is the same
 * on every run.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event-parse.h>
#include <trace-cmd.h>

#include "appev.h"
#include "libhgclock.h"
#include "merge.h"
#include "trace_pool.h"
#include "tracecmd_priv.h"
#include "merge_in.h"

struct hgm_stream {
	struct hgm_input *in;
	int idx;			/* input index, for ties */
	int cpu;
	/*
	 * Another shard's stream of a trace split between shards
	 * (shard_streams()), read only for the task names its sched events
	 * teach (name_event()): this worker then names a task at each event
	 * as one thread reading every stream would.
	 */
	bool learn_only;
	struct hgm_event ev;		/* the stream's next event (ev.rec or ev.app set) */
	uint64_t last_host_ts;		/* where its unmapped events go */
	/*
	 * An event file's CPU: its records come from the file's one reader
	 * (struct hgm_app_reader), through @app_queue when the reader met
	 * them while looking for another CPU's.  @app_rec is the event's.
	 */
	struct hgm_app_reader *app;
	struct hgm_app_qrec *app_queue, *app_queue_tail;
	struct hgev_rec *app_rec;
};

/*
 * An application's or perf's event file holds the records of all its
 * CPUs in one sequence.  Each CPU is a stream of the merge, and each
 * stream used to read the whole file for its own records: with N CPUs,
 * N passes (a perf.data of a 64-CPU host took 10 times as long to merge
 * as the same samples on 2 CPUs).  Now one reader per file and merge
 * reads it once, front to back: a record of the CPU whose stream asks
 * is that stream's next; one of another CPU read on the way is copied
 * into that CPU's queue, to be taken when its stream asks (records of
 * CPUs no stream of this merge reads, another shard's, are passed over).
 *
 * What waits in the queues is what the file holds ahead of the merge's
 * order: a few records per CPU for files in time order (perf script's;
 * libhgclock's, whose threads' buffers are written as they fill), all
 * of one CPU's records for a file that holds them before another CPU's.
 * Owned by the merge's one thread, like its streams.
 */
struct hgm_app_qrec {
	struct hgm_app_qrec *next;
	/* struct hgev_rec's fields before its name, as they are there */
	unsigned char head[offsetof(struct hgev_rec, name)];
	char str[];			/* name, NUL, text, NUL */
};

struct hgm_app_reader {
	FILE *f;			/* NULL: not an event file, or not read */
	bool ended;			/* its end, or a record that fails now */
	uint64_t nr_read;		/* records read: at most in->app_records */
	int nr_cpus;
	struct hgm_stream **by_cpu;	/* nr_cpus: each CPU's stream, or NULL */
	struct hgev_rec *rec;		/* the record being read */
};

/* ---- the heap ---- */

static bool before(const struct hgm_stream *a, const struct hgm_stream *b)
{
	if (a->ev.host_ts != b->ev.host_ts)
		return a->ev.host_ts < b->ev.host_ts;
	if (a->idx != b->idx)
		return a->idx < b->idx;
	return a->cpu < b->cpu;
}

static void sift_down(struct hgm *m, int i)
{
	for (;;) {
		int l = 2 * i + 1, r = l + 1, min = i;
		struct hgm_stream *t;

		if (l < m->heap_len && before(m->heap[l], m->heap[min]))
			min = l;
		if (r < m->heap_len && before(m->heap[r], m->heap[min]))
			min = r;
		if (min == i)
			return;
		t = m->heap[i];
		m->heap[i] = m->heap[min];
		m->heap[min] = t;
		i = min;
	}
}

/* ---- mapping one guest event ---- */

static uint64_t bound_to_tsc(const struct hgsync *s, uint64_t ns)
{
	uint64_t khz = s->host_info.tsc_khz ? s->host_info.tsc_khz : 1000000;

	if (ns > UINT64_MAX / khz)
		return UINT64_MAX;
	return ns * khz / 1000000 + 1;
}

/*
 * Host value @v of clock @from in the timeline's clock @to.  On a host
 * CPU both are functions of one TSC value through that CPU's conversion
 * (perf = local + the CPU's local_clock offset): the TSC is found and
 * converted again, exactly where both conversions are known.  0, or -1.
 */
static int host_clock_convert(const struct hgsync *s, int cpu, uint32_t from, uint32_t to,
			      uint64_t v, uint64_t *out)
{
	uint64_t tsc;

	if (from == to) {
		*out = v;
		return 0;
	}
	if (hgsync_host_to_tsc(s, cpu, from, v, &tsc))
		return -1;
	return hgsync_host_from_tsc(s, cpu, to, tsc, out) ? -1 : 0;
}

static void annotate_guest(struct hgm *m, struct hgm_stream *st)
{
	struct hgm_event *ev = &st->ev;
	struct hgsync_result r;
	struct hgsync_place p;
	int ret;

	ret = hgsync_to_host_by(m->sync, (uint32_t)st->in->guest, st->cpu, st->in->clock,
				ev->raw_ts, m->opt.method, &r);
	/*
	 * An application's clock may differ from the traces': its host
	 * value comes from the same host TSC in the timeline's clock.
	 */
	if (!ret && st->in->clock != m->host_clock &&
	    (!r.host_tsc ||
	     hgsync_host_from_tsc(m->sync, r.host_cpu >= 0 ? r.host_cpu : 0, m->host_clock,
				  r.host_tsc, &r.host_value)))
		ret = -ENODATA;
	ev->host_cpu = -1;
	ev->host_tid = -1;
	if (ret) {
		ev->flags |= HGM_EV_UNMAPPED | HGM_EV_NO_HOST_CPU;
		ev->host_ts = st->last_host_ts;
		ev->method = 0;
		ev->bound_ns = HGSYNC_NO_BOUND;
		if (!hgsync_vcpu_place(m->sync, (uint32_t)st->in->guest, st->cpu, 0, &p))
			ev->host_tid = p.tid;
		return;
	}
	/*
	 * A guest stream's values rise, and so does their mapping within a
	 * segment.  Across a segment change the mapped value could fall
	 * below the stream's last one: each event keeps its own exact time,
	 * and the output then steps back by that much.
	 */
	ev->host_ts = r.host_value;
	ev->method = r.method;
	ev->bound_ns = r.bound_ns;
	st->last_host_ts = r.host_value;
	/* Placed in the VM that ran it: after a migration, another VM's threads. */
	if (!r.host_tsc ||
	    hgsync_vcpu_place(m->sync, r.guest_id, st->cpu, r.host_tsc, &p)) {
		ev->flags |= HGM_EV_NO_HOST_CPU;
		return;
	}
	ev->host_tid = p.tid;
	ev->host_cpu = p.host_cpu;
	if (p.host_cpu < 0) {
		ev->flags |= HGM_EV_NO_HOST_CPU;
		return;
	}
	if (!p.running)
		ev->flags |= HGM_EV_NOT_RUNNING;
	if (r.bound_ns) {
		uint64_t b = bound_to_tsc(m->sync, r.bound_ns);

		if (r.host_tsc - p.since_tsc < b ||
		    (p.until_tsc != UINT64_MAX && p.until_tsc - r.host_tsc <= b))
			ev->flags |= HGM_EV_CPU_UNSURE;
	}
}

/* A copy of @r at the end of @st's queue; false without memory. */
static bool app_enqueue(struct hgm_stream *st, const struct hgev_rec *r)
{
	struct hgm_app_qrec *q = malloc(sizeof(*q) + r->name_len + r->text_len + 2u);

	if (!q)
		return false;
	q->next = NULL;
	memcpy(q->head, r, sizeof(q->head));
	memcpy(q->str, r->name, r->name_len + 1u);
	memcpy(q->str + r->name_len + 1, r->text, r->text_len + 1u);
	if (st->app_queue_tail)
		st->app_queue_tail->next = q;
	else
		st->app_queue = q;
	st->app_queue_tail = q;
	return true;
}

/* The first record of @st's queue into st->app_rec, taken off the queue. */
static void app_dequeue(struct hgm_stream *st)
{
	struct hgm_app_qrec *q = st->app_queue;
	struct hgev_rec *r = st->app_rec;

	st->app_queue = q->next;
	if (!st->app_queue)
		st->app_queue_tail = NULL;
	memcpy(r, q->head, sizeof(q->head));
	memcpy(r->name, q->str, r->name_len + 1u);
	memcpy(r->text, q->str + r->name_len + 1, r->text_len + 1u);
	free(q);
}

/* The first reason an event file's reading stopped early, kept for hgm_read_error(). */
static void app_read_failed(struct hgm *m, const struct hgm_input *in, int code, const char *why)
{
	if (m->app_error_code)
		return;
	m->app_error_code = code;
	set_err(m->app_error, sizeof(m->app_error),
		"%s: reading stopped before its end (%s): its later events are missing",
		in->path, why);
}

int hgm_read_error(const struct hgm *m, char *err, size_t err_len)
{
	if (m->app_error_code)
		set_err(err, err_len, "%s", m->app_error);
	return m->app_error_code;
}

/*
 * Reads on until a record of @st's CPU, which becomes st->app_rec; false
 * at the end of the records hgm_add_app_input() checked (a file still
 * being written may have more: unchecked, left out as its unfinished
 * tail is).  A checked record that cannot be read now (the file changed
 * under the merge) or a copy without memory also ends the reading, and
 * is kept for hgm_read_error(): the remaining events are missing.
 */
static bool app_read_for(struct hgm *m, struct hgm_stream *st)
{
	struct hgm_app_reader *rd = st->app;
	char why[256];
	int rc;

	while (!rd->ended && rd->nr_read < st->in->app_records) {
		struct hgev_rec *r = rd->rec;
		struct hgm_stream *to;

		rc = hgev_read_record(rd->f, r, why, sizeof(why));
		if (rc != 1) {
			if (rc == 0)
				snprintf(why, sizeof(why), "the file ends after %" PRIu64
					 " of the %" PRIu64 " records it had", rd->nr_read,
					 st->in->app_records);
			app_read_failed(m, st->in, HGM_E_INPUT, why);
			break;
		}
		rd->nr_read++;
		m->nr_app_reads++;
		if (r->cpu == (uint32_t)st->cpu) {
			/* Swapped, not copied: the stream's last event is spent. */
			rd->rec = st->app_rec;
			st->app_rec = r;
			return true;
		}
		to = r->cpu < (uint32_t)rd->nr_cpus ? rd->by_cpu[r->cpu] : NULL;
		if (to && !app_enqueue(to, r)) {
			app_read_failed(m, st->in, HGM_E_SYSTEM,
					"out of memory for a record waiting for its CPU's turn");
			break;
		}
	}
	rd->ended = true;
	return false;
}

/* An application file's stream: its next record on this CPU. */
static bool app_stream_next(struct hgm *m, struct hgm_stream *st)
{
	struct hgm_event *ev = &st->ev;

	if (st->app_queue)
		app_dequeue(st);
	else if (!app_read_for(m, st))
		return false;
	memset(ev, 0, sizeof(*ev));
	ev->in = st->in;
	ev->app = st->app_rec;
	ev->cpu = st->cpu;
	ev->raw_ts = st->app_rec->ts;
	if (st->in->guest < 0) {
		ev->host_cpu = st->cpu;
		ev->host_tid = -1;
		if (host_clock_convert(m->sync, st->cpu, st->in->clock, m->host_clock, ev->raw_ts,
				       &ev->host_ts)) {
			/* As a guest event without mapping: kept, in its stream's place. */
			ev->flags |= HGM_EV_UNMAPPED;
			ev->host_ts = st->last_host_ts;
		} else {
			st->last_host_ts = ev->host_ts;
		}
	} else {
		annotate_guest(m, st);
	}
	return true;
}

/* Reads the stream's next record; false at its end. */
static bool stream_next(struct hgm *m, struct hgm_stream *st, bool first)
{
	struct tep_record *rec;
	struct hgm_event *ev = &st->ev;

	if (st->in->app)
		return app_stream_next(m, st);
	rec = first ? tracecmd_read_cpu_first(st->in->handle, st->cpu)
		    : tracecmd_read_data(st->in->handle, st->cpu);
	if (!rec)
		return false;
	memset(ev, 0, sizeof(*ev));
	ev->in = st->in;
	ev->rec = rec;
	ev->cpu = st->cpu;
	ev->raw_ts = rec->ts;
	ev->event = tep_find_event_by_record(st->in->tep, rec);
	if (rec->missed_events)
		st->in->nr_dropped += rec->missed_events > 0 ? (uint64_t)rec->missed_events : 1;
	if (st->in->guest < 0) {
		ev->host_ts = rec->ts;
		ev->host_cpu = st->cpu;
		ev->host_tid = -1;
	} else {
		annotate_guest(m, st);
	}
	return true;
}

/* The host-clock time of a stream's last record, for the progress line. */
static uint64_t stream_last_ts(struct hgm *m, struct hgm_stream *st)
{
	struct tep_record *rec;
	struct hgsync_result r;
	uint64_t ts;

	if (st->in->app) {
		ts = st->in->app_last_ts[st->cpu];
		if (!ts)
			return 0;
	} else {
		rec = tracecmd_read_cpu_last(st->in->handle, st->cpu);
		if (!rec)
			return 0;
		ts = rec->ts;
		tracecmd_free_record(rec);
	}
	if (st->in->guest < 0)
		return ts;
	if (hgsync_to_host_by(m->sync, (uint32_t)st->in->guest, st->cpu, st->in->clock, ts,
			      m->opt.method, &r))
		return 0;
	return r.host_value;
}

/*
 * The filter's window in the timeline's clock, and its guests checked
 * against the correlation.  0, or -1 with @err.
 */
static int start_filter(struct hgm *m, const struct hgsync *sync, char *err, size_t err_len)
{
	const struct hgm_filter *f = m->opt.filter;

	m->from_ts = 0;
	m->to_ts = UINT64_MAX;
	if (!f)
		return 0;
	if ((f->from.set && hgm_filter_resolve_time(&f->from, m->host_clock, &m->from_ts,
						    "--from", err, err_len)) ||
	    (f->to.set && hgm_filter_resolve_time(&f->to, m->host_clock, &m->to_ts, "--to",
						  err, err_len)))
		return -1;
	if (m->from_ts > m->to_ts) {
		set_err(err, err_len, "--from is after --to: nothing to show");
		return -1;
	}
	for (int g = 0; f->guests_set && g < HGSYNC_MAX_GUESTS; g++)
		if (hgm_filter_machine(f, g) && !hgsync_guest_known(sync, (uint32_t)g)) {
			set_err(err, err_len, "--guests: the correlation file has no guest %d", g);
			return -1;
		}
	return 0;
}

/* Has trace input @in events whose printing registers task names (name_event())? */
static bool teaches_names(const struct hgm_input *in)
{
	static const char *const names[] = { "sched_switch", "sched_wakeup", "sched_wakeup_new" };

	if (in->app || !in->tep)
		return false;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (tep_find_event_by_name(in->tep, "sched", names[i]))
			return true;
	return false;
}

/*
 * @st, a stream of event file @i, joins the file's reader (opened at its
 * first stream: the header read again, the records after it).  0, or
 * HGM_E_* with @err.
 */
static int app_reader_join(struct hgm *m, int i, struct hgm_stream *st, char *err,
			   size_t err_len)
{
	struct hgm_app_reader *rd = &m->app_readers[i];
	const struct hgm_input *in = &m->in[i];

	if (!rd->f) {
		struct hgev_header h;
		char why[256];

		rd->nr_cpus = in->nr_cpus;
		rd->by_cpu = calloc((size_t)in->nr_cpus, sizeof(*rd->by_cpu));
		rd->rec = malloc(sizeof(*rd->rec));
		if (!rd->by_cpu || !rd->rec) {
			set_err(err, err_len, "out of memory");
			return HGM_E_SYSTEM;
		}
		rd->f = fopen(in->open_path, "rbe");
		if (!rd->f) {
			set_err(err, err_len, "%s: %s", in->path, strerror(errno));
			return HGM_E_INPUT;
		}
		/* Read once, front to back: fewer, larger reads. */
		setvbuf(rd->f, NULL, _IOFBF, 256u << 10);
		if (hgev_read_header(rd->f, &h, why, sizeof(why))) {
			set_err(err, err_len, "%s: %s (changed during the merge?)", in->path, why);
			return HGM_E_INPUT;
		}
	}
	st->app = rd;
	st->app_rec = malloc(sizeof(*st->app_rec));
	if (!st->app_rec) {
		set_err(err, err_len, "out of memory");
		return HGM_E_SYSTEM;
	}
	rd->by_cpu[st->cpu] = st;
	return 0;
}

/* The bytes stream @c of @in holds, a weight for shard_streams(). */
static uint64_t stream_weight(const struct hgm_input *in, int c)
{
	if (in->app)
		return in->app_records * 32 / (uint64_t)(in->nr_cpus > 0 ? in->nr_cpus : 1) + 1;
	return tracecmd_get_cpu_file_size(in->handle, c) + 1;
}

/* A stream of another shard, read for names only (learn_only). */
#define HGM_SHARD_LEARN		0x10000

/*
 * Which shard (merge_par.c's worker) reads each stream, in @owner (one
 * per stream, in input then CPU order).  The task names a trace shows
 * are its tep's, taught by its own sched events in their order
 * (name_event()).  So a trace that teaches goes whole to one shard, with
 * the buffer instances that share its tep: that shard names its tasks as
 * one thread reading every stream would, and no other shard reads them.
 * Only a trace with more than a shard's fair share of the bytes is split
 * stream by stream, and then every shard reads all its streams, the
 * others' for their names only (HGM_SHARD_LEARN | owner): reading is
 * cheaper than formatting, and the sched events of those streams teach
 * without being printed (hgm_teach_quietly()).  Every other stream is a
 * unit of its own.  Units go, in input order, to the shard with the
 * fewest bytes so far (ties: the lowest): a function of the inputs alone,
 * the same in every worker.
 */
static int least_loaded(const uint64_t *load, int nr_shards)
{
	int best = 0;

	for (int k = 1; k < nr_shards; k++)
		if (load[k] < load[best])
			best = k;
	return best;
}

static int shard_streams(struct hgm *m, int nr_streams, int *owner)
{
	int nr_shards = m->opt.nr_shards, n = 0;
	uint64_t *load = calloc((size_t)nr_shards, sizeof(*load));
	int *group = calloc((size_t)m->nr_in, sizeof(*group));
	uint64_t total = 0;

	if (!load || !group) {
		free(load);
		free(group);
		return -1;
	}
	for (int i = 0; i < m->nr_in; i++)
		for (int c = 0; c < m->in[i].nr_cpus; c++)
			total += stream_weight(&m->in[i], c);
	for (int i = 0; i < m->nr_in; i++) {
		const struct hgm_input *in = &m->in[i];
		bool teaches = !m->opt.no_text && teaches_names(in);
		int j;

		/* group[i]: its shard when whole, -1 when split or not teaching */
		group[i] = -1;
		for (j = 0; teaches && j < i && m->in[j].tep != in->tep; j++)
			;
		if (teaches && j < i) {
			group[i] = group[j];	/* its tep's first input decided */
		} else if (teaches) {
			uint64_t w = 0;

			for (j = i; j < m->nr_in; j++)
				if (m->in[j].tep == in->tep)
					for (int c = 0; c < m->in[j].nr_cpus; c++)
						w += stream_weight(&m->in[j], c);
			if (w * (uint64_t)nr_shards <= total) {
				group[i] = least_loaded(load, nr_shards);
				load[group[i]] += w;
			}
		}
		for (int c = 0; c < in->nr_cpus && n < nr_streams; c++, n++) {
			int best;

			if (group[i] >= 0) {
				owner[n] = group[i];
				continue;
			}
			best = least_loaded(load, nr_shards);
			load[best] += stream_weight(in, c);
			owner[n] = best | (teaches ? HGM_SHARD_LEARN : 0);
		}
	}
	free(load);
	free(group);
	return 0;
}

int hgm_start(struct hgm *m, const struct hgsync *sync, const struct hgm_options *opt,
	      char *err, size_t err_len)
{
	int *owner = NULL;
	int n = 0, ret = 0;

	m->sync = sync;
	m->opt = *opt;
	m->first_ts = UINT64_MAX;
	if (!m->nr_in) {
		set_err(err, err_len, "no trace.dat input");
		return -1;
	}
	/*
	 * One clock for all traces: the mapping converts a guest clock to the
	 * host's same clock.  The timeline's is theirs (the first trace's, or
	 * the first application's when there is no trace).
	 */
	m->host_clock = m->in[0].clock;
	for (int i = m->nr_in - 1; i >= 0; i--)
		if (!m->in[i].app)
			m->host_clock = m->in[i].clock;
	if (start_filter(m, sync, err, err_len))
		return HGM_E_INPUT;
	for (int i = 0; i < m->nr_in; i++) {
		struct hgm_input *in = &m->in[i];

		if (in->guest < 0) {
			m->has_host = true;
		} else {
			const struct hgsync_guest *g;

			if (in->guest < 0 || !hgsync_guest_known(sync, (uint32_t)in->guest)) {
				set_err(err, err_len, "%s: the correlation file has no guest %d",
					in->path, in->guest);
				return -1;
			}
			g = &sync->guests[in->guest];
			if (in->app && g->nr_cpus && (unsigned int)in->nr_cpus > g->nr_cpus) {
				set_err(err, err_len,
					"%s: an event on CPU %d, but guest %d of the correlation file "
					"has %u CPUs: not that guest's application?", in->path,
					in->nr_cpus - 1, in->guest, g->nr_cpus);
				return -1;
			}
			if (g->nr_cpus && (unsigned int)in->nr_cpus > g->nr_cpus) {
				set_err(err, err_len,
					"%s: %d CPUs, but guest %d of the correlation file has %u: "
					"not that guest's trace?", in->path, in->nr_cpus, in->guest,
					g->nr_cpus);
				return -1;
			}
		}
		/* Applications' clocks are converted (host_clock_convert()). */
		if (in->clock != m->host_clock && !in->app) {
			set_err(err, err_len,
				"%s uses the '%s' trace clock but %s uses '%s': record host and "
				"guests with the same clock (trace-cmd record -C)", in->path,
				in->clock_name, m->in[0].path, m->in[0].clock_name);
			return -1;
		}
		/*
		 * A machine has one trace (its buffers come with it), and as
		 * many applications as it likes.
		 */
		for (int j = 0; j < i && !in->app && !in->buffer; j++)
			if (in->guest == m->in[j].guest && !m->in[j].app) {
				if (in->guest < 0)
					set_err(err, err_len, "%s and %s: both are the host's trace",
						m->in[j].path, in->path);
				else
					set_err(err, err_len, "%s and %s: both are guest %d's trace",
						m->in[j].path, in->path, in->guest);
				return -1;
			}
		n += in->nr_cpus;
	}
	m->streams = calloc((size_t)n, sizeof(*m->streams));
	m->heap = calloc((size_t)n, sizeof(*m->heap));
	if (!m->opt.no_text) {
		m->info_seq = malloc(sizeof(*m->info_seq));
		if (m->info_seq)
			trace_seq_init(m->info_seq);
	}
	if (!m->streams || !m->heap || (!m->opt.no_text && !m->info_seq)) {
		set_err(err, err_len, "out of memory");
		return HGM_E_SYSTEM;
	}
	if (m->opt.nr_shards > 1) {
		owner = calloc((size_t)n, sizeof(*owner));
		if (!owner || shard_streams(m, n, owner)) {
			free(owner);
			set_err(err, err_len, "out of memory");
			return HGM_E_SYSTEM;
		}
	}
	m->app_readers = calloc((size_t)m->nr_in, sizeof(*m->app_readers));
	if (!m->app_readers) {
		set_err(err, err_len, "out of memory");
		ret = HGM_E_SYSTEM;
		goto out;
	}
	/* All the streams first: an event file's reader must know them all. */
	m->nr_streams = 0;
	n = 0;
	for (int i = 0; i < m->nr_in; i++)
		for (int c = 0; c < m->in[i].nr_cpus; c++, n++) {
			struct hgm_stream *st;

			bool other = owner && (owner[n] & ~HGM_SHARD_LEARN) != m->opt.shard;

			/* Another shard's stream (shard_streams()): for its names, or not read */
			if (other && !(owner[n] & HGM_SHARD_LEARN))
				continue;
			/* Machines the filter leaves out: not read. */
			if (!hgm_filter_machine(m->opt.filter, m->in[i].guest))
				continue;
			st = &m->streams[m->nr_streams++];

			st->in = &m->in[i];
			st->idx = i;
			st->cpu = c;
			st->learn_only = other;
			if (st->in->app) {
				ret = app_reader_join(m, i, st, err, err_len);
				if (ret)
					goto out;
			}
		}
	for (int k = 0; k < m->nr_streams; k++) {
		struct hgm_stream *st = &m->streams[k];

		if ((m->opt.progress || m->opt.span) && !st->learn_only) {
			uint64_t last = stream_last_ts(m, st);

			if (last > m->last_ts)
				m->last_ts = last;
		}
		if (!stream_next(m, st, true))
			continue;
		if (!(st->ev.flags & HGM_EV_UNMAPPED) && st->ev.host_ts < m->first_ts &&
		    !st->learn_only)
			m->first_ts = st->ev.host_ts;
		m->heap[m->heap_len++] = st;
	}
	for (int i = m->heap_len / 2; i-- > 0;)
		sift_down(m, i);
out:
	free(owner);
	return ret;
}

unsigned int hgm_percent(uint64_t first_ts, uint64_t last_ts, uint64_t host_ts)
{
	unsigned int pct;

	if (last_ts <= first_ts || host_ts <= first_ts)
		return 0;
	pct = (unsigned int)((double)(host_ts - first_ts) * 100.0 / (double)(last_ts - first_ts));
	return pct > 99 ? 99 : pct;
}

static void progress(struct hgm *m, bool done)
{
	unsigned int pct = 100;

	if (!done)
		pct = m->heap_len ? hgm_percent(m->first_ts, m->last_ts, m->heap[0]->ev.host_ts) : 99;
	fprintf(stderr, "\rmerge: %3u%% %" PRIu64 " events%s", pct, m->nr_events, done ? "\n" : "");
}

/* Does --events name @ev?  A trace event's answer is kept per event id. */
static bool name_kept(const struct hgm_filter *f, const struct hgm_event *ev)
{
	struct hgm_input *in = (struct hgm_input *)ev->in;
	char name[64];

	if (ev->app) {
		if (!ev->in->perf)
			return hgm_filter_name(f, "app", ev->app->name);
		snprintf(name, sizeof(name), "%.*s", (int)strcspn(ev->app->text, " "),
			 ev->app->text);
		return hgm_filter_name(f, "perf", name);
	}
	if (!ev->event)
		return hgm_filter_name(f, "", "unknown");
	if (ev->event->id < 0 || ev->event->id > 65535)
		return hgm_filter_name(f, ev->event->system, ev->event->name);
	if (ev->event->id >= in->nr_name_keep) {
		int n = ev->event->id + 1 > 256 ? ev->event->id + 1 : 256;
		uint8_t *p = realloc(in->name_keep, (size_t)n);

		if (!p)
			return hgm_filter_name(f, ev->event->system, ev->event->name);
		memset(p + in->nr_name_keep, 0, (size_t)(n - in->nr_name_keep));
		in->name_keep = p;
		in->nr_name_keep = n;
	}
	if (!in->name_keep[ev->event->id])
		in->name_keep[ev->event->id] =
			hgm_filter_name(f, ev->event->system, ev->event->name) ? 1 : 2;
	return in->name_keep[ev->event->id] == 1;
}

/*
 * How far past --to the merge reads before it stops: a guest stream's
 * mapped times may step back a little across a change of segment
 * (annotate_guest()), so an event just inside the window can follow one
 * just outside.  A second (or 2^32 TSC counts) is far more than any step.
 */
#define HGM_TO_SLACK	(1ULL << 32)

static bool event_shown(struct hgm *m, const struct hgm_event *ev)
{
	const struct hgm_filter *f = m->opt.filter;

	if (!f)
		return true;
	if (ev->host_ts < m->from_ts || ev->host_ts > m->to_ts)
		return false;
	/* A guest's CPUs are all read (see name_event()), the ones asked for shown. */
	if (ev->in->guest >= 0 && !hgm_filter_vcpu(f, ev->cpu))
		return false;
	return !f->nr_events || name_kept(f, ev);
}

/* Does printing @ev register task names (libtraceevent's sched plugin)? */
static bool event_teaches(const struct hgm_event *ev)
{
	const char *name;

	if (!ev->event || !ev->event->system || strcmp(ev->event->system, "sched"))
		return false;
	name = ev->event->name;
	return !strcmp(name, "sched_switch") || !strcmp(name, "sched_wakeup") ||
	       !strcmp(name, "sched_wakeup_new");
}

/* The text of trace event @ev (TEP_PRINT_INFO), in @seq, without its final newlines. */
static const char *event_info(struct trace_seq *seq, const struct hgm_event *ev)
{
	trace_seq_reset(seq);
	if (ev->event)
		tep_print_event(ev->in->tep, seq, ev->rec, "%s", TEP_PRINT_INFO);
	else
		trace_seq_printf(seq, "[unknown event, %d bytes]", ev->rec->size);
	trace_seq_terminate(seq);
	if (!seq->buffer)
		return "";
	while (seq->len && seq->buffer[seq->len - 1] == '\n')
		seq->buffer[--seq->len] = '\0';
	return seq->buffer;
}

/*
 * The task name and text of trace event @ev, worked out once for all
 * outputs, in the steps trace-cmd report takes for each event it prints:
 * the task's name first (tep_data_comm_from_pid()), then the text.  The
 * text of sched_switch and sched_wakeup registers the names it prints
 * (libtraceevent's sched plugin), and the order and number of those
 * steps decide the names later events show: until the first lookup of a
 * pid other than 0, libtraceevent keeps registered names in a list with
 * no check for duplicates (a pid can have its saved command line and
 * the name a sched event taught), and after it finds one of them by
 * binary search.  So the text is printed once per event, not once per
 * output, and an event not shown (the filter's, another worker's
 * stream's) takes the same steps, its text only when it teaches (and
 * then only the registrations where hgm_teach_quietly() can): then
 * every output, every --threads and every filter names each task as
 * trace-cmd report of the same events does.  (So a guest's vCPUs are all
 * read even when --vcpus shows some: they share one list of names.)
 */
static void name_event(struct hgm *m, struct hgm_event *ev, bool shown)
{
	struct tep_handle *tep = ev->in->tep;

	ev->comm = ev->info = NULL;
	if (m->opt.no_text || !ev->rec)
		return;
	ev->pid = tep_data_pid(tep, ev->rec);
	ev->comm = tep_data_comm_from_pid(tep, ev->pid);
	if (shown)
		ev->info = event_info(m->info_seq, ev);
	else if (event_teaches(ev) &&
		 !hgm_teach_quietly((struct hgm_input *)ev->in, m->info_seq, ev->event, ev->rec))
		ev->info = event_info(m->info_seq, ev);
}

/* The summary's counts, of the events shown. */
static void count_event(struct hgm *m, const struct hgm_event *ev)
{
	struct hgm_input *in = (struct hgm_input *)ev->in;

	in->nr_events++;
	m->nr_events++;
	if (ev->flags & HGM_EV_UNMAPPED) {
		in->nr_unmapped++;
		return;
	}
	if (ev->flags & HGM_EV_NO_HOST_CPU)
		in->nr_no_cpu++;
	if (in->guest < 0)
		return;
	if (ev->method < sizeof(m->by_method) / sizeof(m->by_method[0]))
		m->by_method[ev->method]++;
	if (ev->bound_ns != HGSYNC_NO_BOUND && ev->bound_ns > m->max_bound_ns)
		m->max_bound_ns = ev->bound_ns;
}

int hgm_run(struct hgm *m, int (*emit)(void *ctx, const struct hgm_event *ev), void *ctx)
{
	int ret = 0;

	while (m->heap_len) {
		struct hgm_stream *st = m->heap[0];

		/* The heap's least time is past the window (and its slack): done. */
		if (st->ev.host_ts > m->to_ts && st->ev.host_ts - m->to_ts > HGM_TO_SLACK)
			break;
		if (st->learn_only) {
			name_event(m, &st->ev, false);
		} else if (event_shown(m, &st->ev)) {
			name_event(m, &st->ev, true);
			ret = emit(ctx, &st->ev);
			count_event(m, &st->ev);
		} else {
			name_event(m, &st->ev, false);
			m->nr_filtered++;
		}
		if (st->ev.rec)
			tracecmd_free_record(st->ev.rec);
		st->ev.rec = NULL;
		if (ret)
			break;
		if (!stream_next(m, st, false))
			m->heap[0] = m->heap[--m->heap_len];
		if (m->heap_len)
			sift_down(m, 0);
		if (m->opt.progress && !((m->nr_events + m->nr_filtered) & 0xffff))
			progress(m, false);
	}
	if (m->opt.progress)
		progress(m, true);
	return ret;
}

void hgm_result_add(const struct hgm *m, struct hgm_par_result *res)
{
	res->nr_events += m->nr_events;
	res->nr_filtered += m->nr_filtered;
	for (size_t k = 0; k < sizeof(res->by_method) / sizeof(res->by_method[0]); k++)
		res->by_method[k] += m->by_method[k];
	if (m->max_bound_ns > res->max_bound_ns)
		res->max_bound_ns = m->max_bound_ns;
	res->nr_in = m->nr_in;
	for (int i = 0; i < m->nr_in && i < HGM_MAX_INPUTS; i++) {
		res->in[i].guest = m->in[i].guest;
		res->in[i].app = m->in[i].app;
		res->in[i].perf = m->in[i].perf;
		res->in[i].app_path = m->in[i].app ? m->in[i].path : NULL;
		if (m->in[i].buffer_name)
			snprintf(res->in[i].buffer, sizeof(res->in[i].buffer), "%s",
				 m->in[i].buffer_name);
		res->in[i].app_tail_bytes = m->in[i].app_tail_bytes;
		res->in[i].nr_events += m->in[i].nr_events;
		res->in[i].nr_unmapped += m->in[i].nr_unmapped;
		res->in[i].nr_no_cpu += m->in[i].nr_no_cpu;
		res->in[i].nr_dropped += m->in[i].nr_dropped;
	}
}

void hgm_result(const struct hgm *m, struct hgm_par_result *res)
{
	memset(res, 0, sizeof(*res));
	hgm_result_add(m, res);
}

void hgm_close(struct hgm *m)
{
	for (int i = 0; i < m->nr_streams; i++) {
		struct hgm_stream *st = &m->streams[i];

		if (st->ev.rec)
			tracecmd_free_record(st->ev.rec);
		while (st->app_queue) {
			struct hgm_app_qrec *q = st->app_queue;

			st->app_queue = q->next;
			free(q);
		}
		free(st->app_rec);
	}
	for (int i = 0; m->app_readers && i < m->nr_in; i++) {
		struct hgm_app_reader *rd = &m->app_readers[i];

		if (rd->f)
			fclose(rd->f);
		free(rd->by_cpu);
		free(rd->rec);
	}
	free(m->app_readers);
	m->app_readers = NULL;
	for (int i = 0; i < m->nr_in; i++) {
		/*
		 * Closed, not given back: printing events taught its tep the
		 * tasks' names (sched_switch's handler registers them), and a
		 * later pass would print them where a fresh handle prints <...>.
		 */
		if (m->in[i].handle)
			hg_trace_close(m->in[i].handle);
		free(m->in[i].app_last_ts);
		free(m->in[i].app_tids);
		free(m->in[i].name_keep);
		free(m->in[i].label);
		free(m->in[i].buffer_name);
	}
	if (m->info_seq) {
		trace_seq_destroy(m->info_seq);
		free(m->info_seq);
		m->info_seq = NULL;
	}
	free(m->streams);
	free(m->heap);
	free(m->in);
	m->streams = NULL;
	m->heap = NULL;
	m->in = NULL;
	m->nr_in = m->cap_in = m->nr_streams = m->heap_len = 0;
}

void hgm_format_ts(char *buf, size_t len, uint32_t clock, uint64_t ts)
{
	char d[32];
	size_t n = 0;
	uint64_t v = ts;

	/* Digits from the end: "sec.nnnnnnnnn", or a count; once per event. */
	if (clock != HGSYNC_CLOCK_TSC) {
		for (int i = 0; i < 9; i++, v /= 10)
			d[sizeof(d) - 1 - n++] = (char)('0' + v % 10);
		d[sizeof(d) - 1 - n++] = '.';
	}
	do {
		d[sizeof(d) - 1 - n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	if (n >= len) {
		snprintf(buf, len, "?");
		return;
	}
	memcpy(buf, d + sizeof(d) - n, n);
	buf[n] = '\0';
}

int hgm_start_pass(struct hgm *m, const struct hgm_par *par, bool no_text, char *err,
		   size_t err_len)
{
	struct hgm_options opt = par->opt;
	int ret = 0;

	opt.no_text = no_text;
	opt.progress = false;
	opt.shard = opt.nr_shards = 0;
	for (int i = 0; i < par->nr_inputs && !ret; i++)
		ret = hgm_add_spec(m, &par->inputs[i], err, err_len);
	if (!ret)
		ret = hgm_start(m, par->sync, &opt, err, err_len);
	return ret;
}
