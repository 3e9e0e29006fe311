// SPDX-License-Identifier: GPL-2.0
/*
 * The merge engine (user/merge.h): trace.dat inputs through libtracecmd,
 * one stream per input CPU, a binary heap on host time.
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
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event-parse.h>
#include <trace-cmd.h>

#include "merge.h"

/*
 * libtracecmd (3.x) exports these, but installs no header for them:
 * they are declared in trace-cmd's own private header, and trace-cmd
 * report uses them the same way for --raw-ts.  Their ABI has been the
 * same since trace-cmd 3.0.
 */
void tracecmd_set_flag(struct tracecmd_input *handle, int flag);
const char *tracecmd_get_trace_clock(struct tracecmd_input *handle);
int tracecmd_cpus(struct tracecmd_input *handle);
struct tep_record *tracecmd_read_cpu_last(struct tracecmd_input *handle, int cpu);
#define HGM_TRACECMD_FL_RAW_TS	(1 << 3)

struct hgm_stream {
	struct hgm_input *in;
	int idx;			/* input index, for ties */
	int cpu;
	struct hgm_event ev;		/* the stream's next event (ev.rec != NULL) */
	uint64_t last_host_ts;		/* where its unmapped events go */
};

static void set_err(char *err, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

int hgm_clock_of(const char *name, uint32_t *clock)
{
	if (!strcmp(name, "local"))
		*clock = HGSYNC_CLOCK_SCHED;
	else if (!strcmp(name, "perf"))
		*clock = HGSYNC_CLOCK_LOCAL;
	else if (!strcmp(name, "x86-tsc"))
		*clock = HGSYNC_CLOCK_TSC;
	else
		return -1;
	return 0;
}

int hgm_add_input(struct hgm *m, const char *path, int guest, char *err, size_t err_len)
{
	struct hgm_input *in;
	const char *clock;

	if (m->nr_in >= HGM_MAX_INPUTS) {
		set_err(err, err_len, "%s: too many inputs (at most %d)", path, HGM_MAX_INPUTS);
		return -1;
	}
	if (access(path, R_OK)) {
		set_err(err, err_len, "%s: %s", path, strerror(errno));
		return -1;
	}
	in = &m->in[m->nr_in];
	memset(in, 0, sizeof(*in));
	in->path = path;
	in->guest = guest;
	/*
	 * Headers first, then the raw-timestamp flag, then the data: the
	 * flag must be set before the options (TimeShift) are applied.
	 */
	in->handle = tracecmd_open_head(path, 0);
	if (!in->handle) {
		set_err(err, err_len, "%s: not a trace-cmd trace.dat file, or truncated or damaged", path);
		return -1;
	}
	tracecmd_set_flag(in->handle, HGM_TRACECMD_FL_RAW_TS);
	if (tracecmd_init_data(in->handle) < 0) {
		set_err(err, err_len, "%s: cannot read its trace data (truncated or damaged?)", path);
		tracecmd_close(in->handle);
		return -1;
	}
	in->tep = tracecmd_get_tep(in->handle);
	in->nr_cpus = tracecmd_cpus(in->handle);
	clock = tracecmd_get_trace_clock(in->handle);
	in->clock_name = clock ? clock : "local";
	if (hgm_clock_of(in->clock_name, &in->clock)) {
		set_err(err, err_len,
			"%s: recorded with the '%s' trace clock, which hgclock cannot map exactly "
			"(it maps local, perf and x86-tsc: trace-cmd record -C local)", path,
			in->clock_name);
		tracecmd_close(in->handle);
		return -1;
	}
	if (!in->tep || in->nr_cpus <= 0) {
		set_err(err, err_len, "%s: no CPUs or no event formats in the file", path);
		tracecmd_close(in->handle);
		return -1;
	}
	m->nr_in++;
	return 0;
}

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

static void annotate_guest(struct hgm *m, struct hgm_stream *st)
{
	struct hgm_event *ev = &st->ev;
	struct hgsync_result r;
	struct hgsync_place p;
	int ret;

	ret = hgsync_to_host_by(m->sync, (uint32_t)st->in->guest, st->cpu, st->in->clock,
				ev->raw_ts, m->opt.method, &r);
	ev->host_cpu = -1;
	ev->host_tid = -1;
	if (ret) {
		ev->flags |= HGM_EV_UNMAPPED | HGM_EV_NO_HOST_CPU;
		ev->host_ts = st->last_host_ts;
		ev->method = 0;
		ev->bound_ns = HGSYNC_NO_BOUND;
		if (!hgsync_vcpu_place(m->sync, (uint32_t)st->in->guest, st->cpu, 0, &p))
			ev->host_tid = p.tid;
		st->in->nr_unmapped++;
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
	if (r.method < sizeof(m->by_method) / sizeof(m->by_method[0]))
		m->by_method[r.method]++;
	if (r.bound_ns != HGSYNC_NO_BOUND && r.bound_ns > m->max_bound_ns)
		m->max_bound_ns = r.bound_ns;
	if (!r.host_tsc ||
	    hgsync_vcpu_place(m->sync, (uint32_t)st->in->guest, st->cpu, r.host_tsc, &p)) {
		ev->flags |= HGM_EV_NO_HOST_CPU;
		st->in->nr_no_cpu++;
		return;
	}
	ev->host_tid = p.tid;
	ev->host_cpu = p.host_cpu;
	if (p.host_cpu < 0) {
		ev->flags |= HGM_EV_NO_HOST_CPU;
		st->in->nr_no_cpu++;
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

/* Reads the stream's next record; false at its end. */
static bool stream_next(struct hgm *m, struct hgm_stream *st, bool first)
{
	struct tep_record *rec;
	struct hgm_event *ev = &st->ev;

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
	struct tep_record *rec = tracecmd_read_cpu_last(st->in->handle, st->cpu);
	struct hgsync_result r;
	uint64_t ts;

	if (!rec)
		return 0;
	ts = rec->ts;
	tracecmd_free_record(rec);
	if (st->in->guest < 0)
		return ts;
	if (hgsync_to_host_by(m->sync, (uint32_t)st->in->guest, st->cpu, st->in->clock, ts,
			      m->opt.method, &r))
		return 0;
	return r.host_value;
}

int hgm_start(struct hgm *m, const struct hgsync *sync, const struct hgm_options *opt,
	      char *err, size_t err_len)
{
	int n = 0;

	m->sync = sync;
	m->opt = *opt;
	m->first_ts = UINT64_MAX;
	if (!m->nr_in) {
		set_err(err, err_len, "no trace.dat input");
		return -1;
	}
	/* One clock for all: the mapping converts a guest clock to the host's same clock. */
	m->host_clock = m->in[0].clock;
	for (int i = 0; i < m->nr_in; i++) {
		struct hgm_input *in = &m->in[i];

		if (in->guest < 0) {
			m->has_host = true;
		} else {
			const struct hgsync_guest *g;

			if ((unsigned int)in->guest >= sync->nr_guests ||
			    !sync->guests[in->guest].present) {
				set_err(err, err_len, "%s: the correlation file has no guest %d",
					in->path, in->guest);
				return -1;
			}
			g = &sync->guests[in->guest];
			if (g->nr_cpus && (unsigned int)in->nr_cpus > g->nr_cpus) {
				set_err(err, err_len,
					"%s: %d CPUs, but guest %d of the correlation file has %u: "
					"not that guest's trace?", in->path, in->nr_cpus, in->guest,
					g->nr_cpus);
				return -1;
			}
		}
		if (in->clock != m->host_clock) {
			set_err(err, err_len,
				"%s uses the '%s' trace clock but %s uses '%s': record host and "
				"guests with the same clock (trace-cmd record -C)", in->path,
				in->clock_name, m->in[0].path, m->in[0].clock_name);
			return -1;
		}
		for (int j = 0; j < i; j++)
			if (in->guest == m->in[j].guest) {
				set_err(err, err_len, "%s and %s: both are %s%.0d", m->in[j].path,
					in->path, in->guest < 0 ? "the host" : "guest ",
					in->guest < 0 ? 0 : in->guest);
				return -1;
			}
		n += in->nr_cpus;
	}
	m->streams = calloc((size_t)n, sizeof(*m->streams));
	m->heap = calloc((size_t)n, sizeof(*m->heap));
	if (!m->streams || !m->heap) {
		set_err(err, err_len, "out of memory");
		return HGM_E_SYSTEM;
	}
	m->nr_streams = 0;
	n = 0;
	for (int i = 0; i < m->nr_in; i++)
		for (int c = 0; c < m->in[i].nr_cpus; c++, n++) {
			struct hgm_stream *st;

			if (m->opt.nr_shards > 1 && n % m->opt.nr_shards != m->opt.shard)
				continue;
			st = &m->streams[m->nr_streams++];

			st->in = &m->in[i];
			st->idx = i;
			st->cpu = c;
			if (m->opt.progress || m->opt.span) {
				uint64_t last = stream_last_ts(m, st);

				if (last > m->last_ts)
					m->last_ts = last;
			}
			if (!stream_next(m, st, true))
				continue;
			if (!(st->ev.flags & HGM_EV_UNMAPPED) && st->ev.host_ts < m->first_ts)
				m->first_ts = st->ev.host_ts;
			m->heap[m->heap_len++] = st;
		}
	for (int i = m->heap_len / 2; i-- > 0;)
		sift_down(m, i);
	return 0;
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

int hgm_run(struct hgm *m, int (*emit)(void *ctx, const struct hgm_event *ev), void *ctx)
{
	int ret = 0;

	while (m->heap_len) {
		struct hgm_stream *st = m->heap[0];

		ret = emit(ctx, &st->ev);
		st->in->nr_events++;
		m->nr_events++;
		tracecmd_free_record(st->ev.rec);
		st->ev.rec = NULL;
		if (ret)
			break;
		if (!stream_next(m, st, false))
			m->heap[0] = m->heap[--m->heap_len];
		if (m->heap_len)
			sift_down(m, 0);
		if (m->opt.progress && !(m->nr_events & 0xffff))
			progress(m, false);
	}
	if (m->opt.progress)
		progress(m, true);
	return ret;
}

void hgm_close(struct hgm *m)
{
	for (int i = 0; i < m->nr_streams; i++)
		if (m->streams[i].ev.rec)
			tracecmd_free_record(m->streams[i].ev.rec);
	for (int i = 0; i < m->nr_in; i++)
		tracecmd_close(m->in[i].handle);
	free(m->streams);
	free(m->heap);
	m->streams = NULL;
	m->heap = NULL;
	m->nr_in = m->nr_streams = m->heap_len = 0;
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
