// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock merge's outputs: text lines in trace-cmd report's style with
 * guest lines tagged, and a Chrome/Perfetto JSON trace.  Both write as
 * the events come: nothing is kept per event.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event-parse.h>
#include <trace-seq.h>

#include "appev.h"
#include "merge.h"

/*
 * A perf sample (perf_in.c) is a record whose name is the sample's comm
 * and whose text is "EVENT IP SYM (DSO)": the event, and where.
 */
const char *hgm_perf_where(const struct hgev_rec *r)
{
	const char *sp = strchr(r->text, ' ');

	return sp ? sp + 1 : "";
}

void hgm_perf_event_name(const struct hgev_rec *r, char *buf, size_t len)
{
	size_t n = strcspn(r->text, " ");

	snprintf(buf, len, "%.*s", (int)(n < len ? n : len - 1), r->text);
}

const char *hgm_event_name(const struct hgm_event *ev, char *buf, size_t len)
{
	if (ev->app && ev->in->perf) {
		char name[64];

		hgm_perf_event_name(ev->app, name, sizeof(name));
		snprintf(buf, len, "perf:%s", name);
		return buf;
	}
	if (ev->app) {
		snprintf(buf, len, "app:%s", ev->app->name);
		return buf;
	}
	return ev->event ? ev->event->name : "unknown";
}

/* ---- text lines, built in a buffer: most of a merge's output and time ---- */

static int buf_room(struct hgm_text *t, size_t more)
{
	char *b;
	size_t cap;

	if (t->len + more <= t->cap)
		return 0;
	cap = t->cap ? t->cap : 4096;
	while (cap < t->len + more)
		cap *= 2;
	b = realloc(t->buf, cap);
	if (!b)
		return -1;
	t->buf = b;
	t->cap = cap;
	return 0;
}

static int put(struct hgm_text *t, const char *s, size_t n, size_t width, bool left)
{
	size_t pad = n < width ? width - n : 0;

	if (buf_room(t, n + pad))
		return -1;
	if (!left) {
		memset(t->buf + t->len, ' ', pad);
		t->len += pad;
	}
	memcpy(t->buf + t->len, s, n);
	t->len += n;
	if (left) {
		memset(t->buf + t->len, ' ', pad);
		t->len += pad;
	}
	return 0;
}

static int put_str(struct hgm_text *t, const char *s, size_t width, bool left)
{
	return put(t, s, strlen(s), width, left);
}

/* A decimal number, at least @width digits with @zero ('0'), else left-aligned in @width. */
static int put_int(struct hgm_text *t, long long v, size_t width, bool zero)
{
	char d[24];
	size_t n = 0;
	unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;

	do {
		d[sizeof(d) - 1 - n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	while (zero && n < width && n < sizeof(d) - 1)
		d[sizeof(d) - 1 - n++] = '0';
	if (v < 0)
		d[sizeof(d) - 1 - n++] = '-';
	return put(t, d + sizeof(d) - n, n, zero ? 0 : width, true);
}

int hgm_text_init(struct hgm_text *t, FILE *out)
{
	memset(t, 0, sizeof(*t));
	t->out = out;
	t->seq = malloc(sizeof(*t->seq));
	if (!t->seq)
		return -1;
	trace_seq_init(t->seq);
	return 0;
}

void hgm_text_free(struct hgm_text *t)
{
	if (t->seq) {
		trace_seq_destroy(t->seq);
		free(t->seq);
		t->seq = NULL;
	}
	free(t->buf);
	t->buf = NULL;
	t->len = t->cap = 0;
}

/*
 * host       <comm>-<pid> [CPU] TIME: EVENT  INFO
 * gG vV hHHH <comm>-<pid> [vCPU] TIME: EVENT  INFO  {tid T, +-B ns, METHOD}
 *
 * ("%-12s %16s-%-5d [%03d] %s: %-20s %s", by hand: printf was a tenth of
 * a merge's time.)  TIME is the host's clock.  A guest line's tag names
 * its guest, vCPU and the host CPU that ran the vCPU ("h---": unknown);
 * its braces carry the vCPU's host thread, the mapping's error bound and
 * its method, or what is wrong with it.  A drop notice line comes first
 * when ftrace lost events before this one.
 */
/*
 * An application's event: "app:NAME" as the event, its kind and text as
 * the info, the process's name and the thread's id where a trace event
 * has its task's.
 */
static const char *app_info(struct trace_seq *seq, const struct hgm_event *ev)
{
	static const char *const kind[] = { "", "", "[begin] ", "[end] " };
	const struct hgev_rec *r = ev->app;

	if (ev->in->perf)
		return hgm_perf_where(r);
	trace_seq_reset(seq);
	trace_seq_printf(seq, "%s%s", kind[r->kind <= HGEV_KIND_END ? r->kind : 0], r->text);
	trace_seq_terminate(seq);
	return seq->buffer;
}

int hgm_text_format(struct hgm_text *t, const struct hgm_event *ev)
{
	int pid = ev->app ? (int)ev->app->tid : ev->pid;
	const char *comm = ev->app ? (ev->in->perf ? ev->app->name : ev->in->app_comm)
				   : hgm_ev_comm(ev);
	const char *info = ev->app ? app_info(t->seq, ev) : hgm_ev_info(ev);
	char tag[48], ts[32], name[HGEV_NAME_MAX + 8];
	int err = 0;

	t->len = 0;
	if (ev->in->guest < 0)
		snprintf(tag, sizeof(tag), "host");
	else if (ev->host_cpu >= 0)
		snprintf(tag, sizeof(tag), "g%d v%d h%03d", ev->in->guest, ev->cpu, ev->host_cpu);
	else
		snprintf(tag, sizeof(tag), "g%d v%d h---", ev->in->guest, ev->cpu);
	if (ev->rec && ev->rec->missed_events) {
		err |= put_str(t, tag, 12, true) | put_str(t, " CPU:", 0, true) |
		       put_int(t, ev->cpu, 0, false) | put_str(t, " [", 0, true);
		if (ev->rec->missed_events > 0)
			err |= put_int(t, ev->rec->missed_events, 0, false) | put_str(t, " ", 0, true);
		err |= put_str(t, "EVENTS DROPPED]\n", 0, true);
	}
	hgm_format_ts(ts, sizeof(ts), ev->in->clock, ev->host_ts);
	err |= put_str(t, tag, 12, true) | put_str(t, " ", 0, true);
	/* A buffer instance's event: its name first, as trace-cmd report shows it. */
	if (ev->in->buffer_name)
		err |= put_str(t, ev->in->buffer_name, 0, true) | put_str(t, ": ", 0, true);
	err |= put_str(t, comm, 16, false) |
	       put_str(t, "-", 0, true) | put_int(t, pid, 5, false) | put_str(t, " [", 0, true) |
	       put_int(t, ev->cpu, 3, true) | put_str(t, "] ", 0, true) | put_str(t, ts, 0, true) |
	       put_str(t, ": ", 0, true) | put_str(t, hgm_event_name(ev, name, sizeof(name)), 20, true) |
	       put_str(t, " ", 0, true) | put_str(t, info, 0, true);
	if (ev->in->guest >= 0) {
		if (ev->flags & HGM_EV_UNMAPPED) {
			hgm_format_ts(ts, sizeof(ts), ev->in->clock, ev->raw_ts);
			err |= put_str(t, "  {UNMAPPED: guest time ", 0, true) | put_str(t, ts, 0, true) |
			       put_str(t, "}", 0, true);
		} else {
			err |= put_str(t, "  {tid ", 0, true) | put_int(t, ev->host_tid, 0, false);
			if (ev->bound_ns == HGSYNC_NO_BOUND)
				err |= put_str(t, ", unbounded, ", 0, true);
			else
				err |= put_str(t, ", +-", 0, true) |
				       put_int(t, (long long)(ev->bound_ns > INT64_MAX ? INT64_MAX :
							      ev->bound_ns), 0, false) |
				       put_str(t, " ns, ", 0, true);
			err |= put_str(t, hgsync_method_name(ev->method), 0, true);
			if (ev->flags & HGM_EV_NO_HOST_CPU)
				err |= put_str(t, ", NO-HOST-CPU", 0, true);
			if (ev->flags & HGM_EV_NOT_RUNNING)
				err |= put_str(t, ", NOT-RUNNING", 0, true);
			if (ev->flags & HGM_EV_CPU_UNSURE)
				err |= put_str(t, ", CPU-UNSURE", 0, true);
			err |= put_str(t, "}", 0, true);
		}
	}
	/* A host application's value its clock could not be converted from. */
	if (ev->in->guest < 0 && (ev->flags & HGM_EV_UNMAPPED)) {
		hgm_format_ts(ts, sizeof(ts), ev->in->clock, ev->raw_ts);
		err |= put_str(t, "  {UNMAPPED: ", 0, true) | put_str(t, ev->in->clock_name, 0, true) |
		       put_str(t, " ", 0, true) | put_str(t, ts, 0, true) | put_str(t, "}", 0, true);
	}
	err |= put_str(t, "\n", 0, true);
	return err ? -1 : 0;
}

int hgm_text_event(void *ctx, const struct hgm_event *ev)
{
	struct hgm_text *t = ctx;

	if (hgm_text_format(t, ev))
		return -1;
	return fwrite(t->buf, 1, t->len, t->out) == t->len ? 0 : -1;
}

/* ---- JSON ---- */

#define HGM_JSON_HOST_PID	1
#define HGM_JSON_GUEST_PID	100	/* + guest id */
/* An application thread's track in its machine's process: + its tid. */
#define HGM_JSON_APP_TID	10000000

static int json_pid(const struct hgm_input *in)
{
	return in->guest < 0 ? HGM_JSON_HOST_PID : HGM_JSON_GUEST_PID + in->guest;
}

/* Is input @i the first of its machine (its process is named, its vCPUs drawn once)? */
static bool first_of_machine(const struct hgm *m, int i)
{
	for (int k = 0; k < i; k++)
		if (m->in[k].guest == m->in[i].guest)
			return false;
	return true;
}

/* Host clock value -> host ns (the JSON's time base). */
uint64_t hgm_host_ns(const struct hgm *m, uint64_t host_ts)
{
	uint64_t khz = m->sync->host_info.tsc_khz;

	if (m->host_clock != HGSYNC_CLOCK_TSC)
		return host_ts;
	if (!khz)
		return host_ts;
	return (uint64_t)((unsigned __int128)host_ts * 1000000 / khz);
}

static void json_meta(struct json_writer *w, const char *what, int pid, int tid,
		      const char *name, int sort)
{
	char buf[128];

	json_begin_object(w, NULL);
	json_string(w, "ph", "M");
	json_string(w, "name", what);
	json_i64(w, "pid", pid);
	if (tid >= 0)
		json_i64(w, "tid", tid);
	json_begin_object(w, "args");
	if (name) {
		json_string(w, "name", name);
	} else {
		snprintf(buf, sizeof(buf), "%d", sort);
		json_i64(w, "sort_index", sort);
	}
	json_end_object(w);
	json_end_object(w);
}

int hgm_json_begin(struct hgm_json *j, FILE *out, const struct hgm *m)
{
	char name[512];

	memset(j, 0, sizeof(*j));
	j->m = m;
	j->min_ns = UINT64_MAX;
	json_init(&j->w, out, false);
	json_begin_object(&j->w, NULL);
	json_string(&j->w, "displayTimeUnit", "ns");
	json_begin_object(&j->w, "otherData");
	json_string(&j->w, "generator", "hgclock merge");
	json_string(&j->w, "clock", m->in[0].clock_name);
	json_end_object(&j->w);
	json_begin_array(&j->w, "traceEvents");
	for (int i = 0; i < m->nr_in; i++) {
		const struct hgm_input *in = &m->in[i];
		int pid = json_pid(in);

		if (in->app) {
			/* Each thread a track of the machine: a slice keeps its thread. */
			for (int k = 0; k < in->nr_app_tids && !in->perf; k++) {
				snprintf(name, sizeof(name), "%s %u (app)", in->app_comm,
					 in->app_tids[k]);
				json_meta(&j->w, "thread_name", pid,
					  HGM_JSON_APP_TID + (int)in->app_tids[k], name, 0);
			}
			if (!first_of_machine(m, i))
				continue;
			if (in->guest < 0)
				snprintf(name, sizeof(name), "host (application %s)", in->app_comm);
			else
				snprintf(name, sizeof(name), "guest %d (application %s)", in->guest,
					 in->app_comm);
			json_meta(&j->w, "process_name", pid, -1, name, 0);
			json_meta(&j->w, "process_sort_index", pid, -1, NULL, in->guest + 1);
			continue;
		}
		if (first_of_machine(m, i)) {
			if (in->guest < 0)
				snprintf(name, sizeof(name), "host (%s)", in->path);
			else
				snprintf(name, sizeof(name), "guest %d (%s)", in->guest, in->path);
			json_meta(&j->w, "process_name", pid, -1, name, 0);
			json_meta(&j->w, "process_sort_index", pid, -1, NULL, in->guest + 1);
		}
		for (int c = 0; c < in->nr_cpus; c++) {
			snprintf(name, sizeof(name), in->guest < 0 ? "CPU %d" : "vCPU %d", c);
			json_meta(&j->w, "thread_name", pid, c, name, 0);
		}
	}
	/* Host CPUs that ran vCPUs but have no host trace: name them too. */
	if (!m->has_host) {
		json_meta(&j->w, "process_name", HGM_JSON_HOST_PID, -1, "host CPUs (tracking only)", 0);
		for (unsigned int c = 0; c < m->sync->nr_host_cpus; c++) {
			snprintf(name, sizeof(name), "CPU %u", c);
			json_meta(&j->w, "thread_name", HGM_JSON_HOST_PID, (int)c, name, 0);
		}
	}
	return ferror(out) ? -1 : 0;
}

void hgm_json_span(struct hgm_json *j, const struct hgm *m, uint64_t host_ts)
{
	uint64_t ns = hgm_host_ns(m, host_ts);

	if (ns < j->min_ns)
		j->min_ns = ns;
	if (ns > j->max_ns)
		j->max_ns = ns;
}

int hgm_json_event(void *ctx, const struct hgm_event *ev)
{
	struct hgm_json *j = ctx;

	if (!(ev->flags & HGM_EV_UNMAPPED))
		hgm_json_span(j, j->m, ev->host_ts);
	return hgm_json_write_event(&j->w, j->m, ev);
}

/*
 * An application's event on its thread's track: an instant, or a
 * slice's begin or end ("B"/"E" pair on one track, in time order: a
 * thread's events are).  Its CPU goes into the args.
 */
static void json_app_head(struct json_writer *w, const struct hgm_event *ev, uint64_t ns)
{
	const struct hgev_rec *r = ev->app;

	json_begin_object(w, NULL);
	json_string(w, "ph", r->kind == HGEV_KIND_BEGIN ? "B" : r->kind == HGEV_KIND_END ? "E" : "i");
	if (r->kind == HGEV_KIND_INSTANT)
		json_string(w, "s", "t");
	json_string(w, "name", r->name);
	json_string(w, "cat", "app");
	json_i64(w, "pid", json_pid(ev->in));
	json_i64(w, "tid", HGM_JSON_APP_TID + (int64_t)r->tid);
	json_fixed3(w, "ts", ns);
	json_begin_object(w, "args");
	json_string(w, "comm", ev->in->app_comm);
	json_i64(w, "tid", r->tid);
	json_i64(w, ev->in->guest < 0 ? "cpu" : "vcpu", ev->cpu);
	if (r->text[0])
		json_string(w, "text", r->text);
}

int hgm_json_write_event(struct json_writer *w, const struct hgm *m, const struct hgm_event *ev)
{
	uint64_t ns = hgm_host_ns(m, ev->host_ts);
	char name[HGEV_NAME_MAX + 8];

	/* The event's bytes in one write (json.h). */
	json_hold(w);
	if (ev->app && ev->in->perf) {
		/* A perf sample: an instant on its CPU's track, as a trace event. */
		hgm_perf_event_name(ev->app, name, sizeof(name));
		json_begin_object(w, NULL);
		json_string(w, "ph", "i");
		json_string(w, "s", "t");
		json_string(w, "name", name);
		json_string(w, "cat", "perf");
		json_i64(w, "pid", json_pid(ev->in));
		json_i64(w, "tid", ev->cpu);
		json_fixed3(w, "ts", ns);
		json_begin_object(w, "args");
		json_string(w, "comm", ev->app->name);
		json_i64(w, "tid", ev->app->tid);
		json_string(w, "where", hgm_perf_where(ev->app));
	} else if (ev->app) {
		json_app_head(w, ev, ns);
	} else {
		json_begin_object(w, NULL);
		json_string(w, "ph", "i");
		json_string(w, "s", "t");
		json_string(w, "name", hgm_event_name(ev, name, sizeof(name)));
		json_string(w, "cat", ev->event && ev->event->system ? ev->event->system : "ftrace");
		json_i64(w, "pid", json_pid(ev->in));
		json_i64(w, "tid", ev->cpu);
		json_fixed3(w, "ts", ns);
		json_begin_object(w, "args");
		json_string(w, "comm", hgm_ev_comm(ev));
		json_i64(w, "pid", ev->pid);
		json_string(w, "info", hgm_ev_info(ev));
		if (ev->in->buffer_name)
			json_string(w, "buffer", ev->in->buffer_name);
	}
	if (ev->in->guest < 0 && (ev->flags & HGM_EV_UNMAPPED))
		json_string(w, "mapping", "none");
	if (ev->in->guest >= 0) {
		json_u64(w, "guest_ts", ev->raw_ts);
		json_i64(w, "host_cpu", ev->host_cpu);
		json_i64(w, "host_tid", ev->host_tid);
		if (ev->flags & HGM_EV_UNMAPPED) {
			json_string(w, "mapping", "none");
		} else {
			json_string(w, "mapping", hgsync_method_name(ev->method));
			if (ev->bound_ns == HGSYNC_NO_BOUND)
				json_null(w, "bound_ns");
			else
				json_u64(w, "bound_ns", ev->bound_ns);
		}
		if (ev->flags & (HGM_EV_NO_HOST_CPU | HGM_EV_NOT_RUNNING | HGM_EV_CPU_UNSURE)) {
			char f[64];

			snprintf(f, sizeof(f), "%s%s%s",
				 ev->flags & HGM_EV_NO_HOST_CPU ? "no-host-cpu " : "",
				 ev->flags & HGM_EV_NOT_RUNNING ? "not-running " : "",
				 ev->flags & HGM_EV_CPU_UNSURE ? "cpu-unsure " : "");
			f[strlen(f) - 1] = '\0';
			json_string(w, "flags", f);
		}
	}
	if (ev->rec && ev->rec->missed_events)
		json_i64(w, "dropped_before", ev->rec->missed_events);
	json_end_object(w);
	json_end_object(w);
	/* An event a line: greppable, and what the threaded merge writes. */
	json_raw(w, "\n");
	return json_release(w);
}

/* A vCPU's runs of one thread, clipped to [min_ns, max_ns], appended to @r. */
static int vcpu_runs(const struct hgm *m, const struct hgm_input *in, const struct hgsync_vcpu *v,
		     uint64_t min_ns, uint64_t max_ns, struct hgm_runs *r)
{
	/* Named by guest CPU, as the guest's events are (sync.rst, "vCPU identity"). */
	int cpu = hgsync_vcpu_guest_cpu(m->sync, (uint32_t)in->guest, v->vcpu_id);

	for (size_t i = 0; i < v->nr_where; i++) {
		const struct hgsync_where *a = &v->where[i];
		struct hgm_run *run;
		uint64_t t0, t1, end_tsc;

		if (!a->running || a->host_cpu < 0)
			continue;
		end_tsc = i + 1 < v->nr_where ? v->where[i + 1].host_tsc : UINT64_MAX;
		if (hgsync_host_from_tsc(m->sync, a->host_cpu, m->host_clock, a->host_tsc, &t0))
			continue;
		t0 = hgm_host_ns(m, t0);
		if (end_tsc == UINT64_MAX ||
		    hgsync_host_from_tsc(m->sync, a->host_cpu, m->host_clock, end_tsc, &t1))
			t1 = max_ns;
		else
			t1 = hgm_host_ns(m, t1);
		if (t0 < min_ns)
			t0 = min_ns;
		if (t1 > max_ns)
			t1 = max_ns;
		if (t1 <= t0)
			continue;
		if (r->nr == r->cap) {
			size_t cap = r->cap ? 2 * r->cap : 256;
			struct hgm_run *n = reallocarray(r->run, cap, sizeof(*n));

			if (!n)
				return -1;
			r->run = n;
			r->cap = cap;
		}
		run = &r->run[r->nr++];
		run->host_cpu = a->host_cpu;
		run->guest = in->guest;
		run->vcpu = cpu;
		run->vcpu_id = v->vcpu_id;
		run->host_tid = v->tid;
		run->t0_ns = t0;
		run->t1_ns = t1;
	}
	return 0;
}

static int run_cmp(const void *a, const void *b)
{
	const struct hgm_run *x = a, *y = b;

	if (x->host_cpu != y->host_cpu)
		return x->host_cpu < y->host_cpu ? -1 : 1;
	if (x->t0_ns != y->t0_ns)
		return x->t0_ns < y->t0_ns ? -1 : 1;
	return x->guest != y->guest ? (x->guest < y->guest ? -1 : 1) :
	       x->vcpu_id < y->vcpu_id ? -1 : x->vcpu_id > y->vcpu_id;
}

int hgm_vcpu_runs(const struct hgm *m, uint64_t min_ns, uint64_t max_ns, struct hgm_runs *r)
{
	const struct hgsync *s = m->sync;
	size_t out = 0;

	memset(r, 0, sizeof(*r));
	if (min_ns > max_ns)
		return 0;
	for (int i = 0; i < m->nr_in; i++) {
		const struct hgm_input *in = &m->in[i];

		/* hgm_start() refused guests the file lacks: checked again here. */
		if (in->guest < 0 || !first_of_machine(m, i) ||
		    (unsigned int)in->guest >= s->nr_guests ||
		    s->guests[in->guest].vm.vm_pid <= 0)
			continue;
		for (size_t k = 0; k < s->nr_vcpus; k++)
			if (s->vcpus[k].vm_pid == s->guests[in->guest].vm.vm_pid &&
			    s->vcpus[k].vcpu_id >= 0 &&
			    vcpu_runs(m, in, &s->vcpus[k], min_ns, max_ns, r)) {
				hgm_runs_free(r);
				return -1;
			}
	}
	/*
	 * A host CPU runs one thread at a time: runs that overlap on one (the
	 * records of two threads disagree by a few ns, or a damaged file)
	 * are cut where the earlier ends, so that viewers nest them.
	 */
	if (r->nr)
		qsort(r->run, r->nr, sizeof(*r->run), run_cmp);
	for (size_t i = 0; i < r->nr; i++) {
		struct hgm_run run = r->run[i];

		if (out && r->run[out - 1].host_cpu == run.host_cpu &&
		    run.t0_ns < r->run[out - 1].t1_ns) {
			run.t0_ns = r->run[out - 1].t1_ns;
			r->nr_clipped++;
			if (run.t1_ns <= run.t0_ns)
				continue;
		}
		r->run[out++] = run;
	}
	r->nr = out;
	return 0;
}

void hgm_runs_free(struct hgm_runs *r)
{
	free(r->run);
	memset(r, 0, sizeof(*r));
}

/* One run as a complete slice ("X") on the track @pid/@tid. */
static void json_run_slice(struct json_writer *w, const char *name, int pid, int tid,
			   const struct hgm_run *run)
{
	json_hold(w);
	json_begin_object(w, NULL);
	json_string(w, "ph", "X");
	json_string(w, "name", name);
	json_string(w, "cat", "vcpu");
	json_i64(w, "pid", pid);
	json_i64(w, "tid", tid);
	json_fixed3(w, "ts", run->t0_ns);
	json_fixed3(w, "dur", run->t1_ns - run->t0_ns);
	json_begin_object(w, "args");
	json_i64(w, "guest", run->guest);
	json_i64(w, "vcpu", run->vcpu);
	json_i64(w, "vcpu_id", run->vcpu_id);
	json_i64(w, "host_cpu", run->host_cpu);
	json_i64(w, "host_tid", run->host_tid);
	json_end_object(w);
	json_end_object(w);
	json_raw(w, "\n");
	json_release(w);
}

/* A flow event: "s" starts flow @id in the slice at @ns, "f" ends it in the one enclosing @ns. */
static void json_flow(struct json_writer *w, const char *ph, uint64_t id, int pid, int tid,
		      uint64_t ns)
{
	json_hold(w);
	json_begin_object(w, NULL);
	json_string(w, "ph", ph);
	json_string(w, "name", "runs");
	json_string(w, "cat", "vcpu");
	json_u64(w, "id", id);
	json_i64(w, "pid", pid);
	json_i64(w, "tid", tid);
	json_fixed3(w, "ts", ns);
	if (ph[0] == 'f')
		json_string(w, "bp", "e");
	json_end_object(w);
	json_raw(w, "\n");
	json_release(w);
}

/*
 * Each vCPU run twice: on its host CPU's track ("g0 vCPU 1"), and on the
 * guest CPU's track ("on host CPU 3"), where the guest's events of that
 * run nest under it; a flow arrow joins the two.
 */
static int json_runs(struct hgm_json *j)
{
	struct hgm_runs r;
	char name[64];

	if (hgm_vcpu_runs(j->m, j->min_ns, j->max_ns, &r))
		return -1;
	for (size_t i = 0; i < r.nr; i++) {
		const struct hgm_run *run = &r.run[i];
		int gpid = HGM_JSON_GUEST_PID + run->guest;

		if (run->vcpu < 0)
			snprintf(name, sizeof(name), "g%d vcpu_id %d", run->guest, run->vcpu_id);
		else
			snprintf(name, sizeof(name), "g%d vCPU %d", run->guest, run->vcpu);
		json_run_slice(&j->w, name, HGM_JSON_HOST_PID, run->host_cpu, run);
		if (run->vcpu < 0)
			continue;
		snprintf(name, sizeof(name), "on host CPU %d", run->host_cpu);
		json_run_slice(&j->w, name, gpid, run->vcpu, run);
		json_flow(&j->w, "s", i + 1, HGM_JSON_HOST_PID, run->host_cpu, run->t0_ns);
		json_flow(&j->w, "f", i + 1, gpid, run->vcpu, run->t0_ns);
	}
	hgm_runs_free(&r);
	return 0;
}

int hgm_json_end(struct hgm_json *j)
{
	int ret = json_runs(j);

	json_end_array(&j->w);
	json_end_object(&j->w);
	json_finish(&j->w);
	return ret || ferror(j->w.out) ? -1 : 0;
}

/* ---- disruption marks ---- */

static int cmp_mark(const void *a, const void *b)
{
	const struct hgm_mark *x = a, *y = b;

	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

int hgm_marks_build(struct hgm_marks *mk, const struct hgm *m)
{
	const struct hgsync *s = m->sync;
	uint32_t khz = s->host_info.tsc_khz;

	memset(mk, 0, sizeof(*mk));
	if (!s->nr_disr)
		return 0;
	mk->v = calloc(s->nr_disr, sizeof(*mk->v));
	if (!mk->v)
		return -1;
	for (size_t i = 0; i < s->nr_disr; i++) {
		const struct hgcor_disruption *d = &s->disr[i];
		struct hgm_mark *k = &mk->v[mk->n];
		struct hgsync_disr_facts f;
		uint64_t tsc, ts, end_ts = 0;
		char t0[32], t1[32] = "", jump[160] = "", gone[80] = "";
		bool have_end;

		if (hgsync_disruption_facts(s, i, &f))
			continue;
		tsc = f.has_old_run ? f.old_last_run_tsc : d->host_tsc_lost;
		if (hgsync_host_from_tsc(s, 0, m->host_clock, tsc, &ts))
			continue;	/* no host conversion then: nowhere to put it */
		if (ts < m->from_ts || ts > m->to_ts)
			continue;
		have_end = f.has_new_run &&
			   !hgsync_host_from_tsc(s, 0, m->host_clock, f.new_first_run_tsc, &end_ts);
		hgm_format_ts(t0, sizeof(t0), m->host_clock, ts);
		if (have_end)
			hgm_format_ts(t1, sizeof(t1), m->host_clock, end_ts);
		if (f.has_kvm_jump)
			snprintf(jump, sizeof(jump), "; its TSC jumped %+" PRId64 " counts (%.3f ms, "
				 "KVM's offsets, exact)", f.kvm_jump_tsc,
				 khz ? f.kvm_jump_tsc / (double)khz : 0.0);
		else if (d->flags & HGCOR_DISRUPT_JUMP_KNOWN)
			snprintf(jump, sizeof(jump), "; its clock jumped %+.3f ms (+-%.3f ms, probes)",
				 d->guest_local_jump_ns / 1e6, d->jump_bound_ns / 1e6);
		if (d->kind == HGCOR_DISRUPT_GONE)
			snprintf(gone, sizeof(gone), "; it never came back");
		k->ts = ts;
		k->end_ts = have_end && end_ts >= ts ? end_ts : 0;
		k->guest = hgsync_guest_root(s, d->guest_id);
		k->next_guest = d->next_guest_id;
		k->kind = d->kind;
		k->old_vm_pid = d->old_vm_pid;
		k->new_vm_pid = d->new_vm_pid;
		k->has_kvm_jump = f.has_kvm_jump;
		k->kvm_jump_tsc = f.kvm_jump_tsc;
		if (d->kind == HGCOR_DISRUPT_GONE)	/* no new VM to name */
			snprintf(k->text, sizeof(k->text),
				 "%-12s %s: DISRUPTION guest %u (incarnation %u): %s, VM %d (CID %u)"
				 "%s\n", "hgclock", t0, k->guest, d->guest_id,
				 hgsync_disruption_name(d->kind), d->old_vm_pid, d->old_cid, gone);
		else
			snprintf(k->text, sizeof(k->text),
				 "%-12s %s: DISRUPTION guest %u (incarnation %u -> %d): %s, VM %d (CID "
				 "%u) -> VM %d (CID %u)%s%s%s\n", "hgclock", t0, k->guest,
				 d->guest_id,
				 d->next_guest_id == HGCOR_NO_GUEST ? -1 : (int)d->next_guest_id,
				 hgsync_disruption_name(d->kind), d->old_vm_pid, d->old_cid,
				 d->new_vm_pid, d->new_cid,
				 have_end ? "; first run in the new VM at " : "", have_end ? t1 : "",
				 jump);
		snprintf(k->json, sizeof(k->json),
			 "{\"ph\": \"i\", \"s\": \"g\", \"name\": \"DISRUPTION guest %u: %s\", "
			 "\"cat\": \"hgclock\", \"pid\": %d, \"tid\": 0, \"ts\": %" PRIu64
			 ".%03u, \"args\": {\"guest\": %u, \"incarnation\": %u, \"next\": %d, "
			 "\"kind\": \"%s\", \"old_vm_pid\": %d, \"new_vm_pid\": %d, "
			 "\"blackout_end_ns\": %" PRIu64 "%s%" PRId64 "}}\n", k->guest,
			 hgsync_disruption_name(d->kind), HGM_JSON_HOST_PID, ts / 1000,
			 (unsigned int)(ts % 1000), k->guest, d->guest_id,
			 d->next_guest_id == HGCOR_NO_GUEST ? -1 : (int)d->next_guest_id,
			 hgsync_disruption_name(d->kind), d->old_vm_pid, d->new_vm_pid,
			 have_end ? end_ts : 0, ", \"kvm_tsc_jump\": ",
			 f.has_kvm_jump ? f.kvm_jump_tsc : 0);
		mk->n++;
	}
	if (mk->n)
		qsort(mk->v, mk->n, sizeof(*mk->v), cmp_mark);
	return 0;
}

int hgm_marks_until(struct hgm_marks *mk, uint64_t ts, FILE *text, FILE *json)
{
	for (; mk && mk->next < mk->n && mk->v[mk->next].ts <= ts; mk->next++) {
		const struct hgm_mark *k = &mk->v[mk->next];

		if (text && fputs(k->text, text) == EOF)
			return -1;
		/* The track names came first: a comma before every object. */
		if (json && (fputc(',', json) == EOF || fputs(k->json, json) == EOF))
			return -1;
	}
	return 0;
}

void hgm_marks_free(struct hgm_marks *mk)
{
	free(mk->v);
	memset(mk, 0, sizeof(*mk));
}

int hgm_outputs_event(void *ctx, const struct hgm_event *ev)
{
	struct hgm_outputs *o = ctx;
	int ret = 0;

	if (o->marks && o->marks->next < o->marks->n &&
	    hgm_marks_until(o->marks, ev->host_ts, o->text ? o->text->out : NULL,
			    o->json ? o->json->w.out : NULL))
		return -1;

	if (o->text)
		ret = hgm_text_event(o->text, ev);
	if (!ret && o->json)
		ret = hgm_json_event(o->json, ev);
	return ret;
}
