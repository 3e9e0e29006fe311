// SPDX-License-Identifier: GPL-2.0
/*
 * The merge engine's inputs (merge.h): each trace.dat opened through the
 * trace pool, checked (its CPU data readable, once per file however many
 * times it is given: struct hgm_checked) and described; each application
 * event file (hgclock's own, or a perf.data decoded by perf_in.c) checked
 * and added; the instances of a trace as inputs of their own.  merge.c
 * starts the merge over what was added here and calls nothing back in.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <event-parse.h>
#include <trace-cmd.h>

#include "appev.h"
#include "libhgclock.h"
#include "merge.h"
#include "merge_in.h"
#include "trace_pool.h"
#include "tracecmd_priv.h"

void set_err(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

/*
 * libtracecmd reads a damaged trace.dat without a word: a bad page or
 * compressed chunk ends that CPU's events there (a bit flip can drop
 * half of them), a bad event header makes time run backwards or gives a
 * nonsense size.  Each CPU is read through once before the merge, and
 * checked: its events must be in time order, of sizes that fit a page,
 * and reach the last event the file holds for that CPU (read directly
 * from its last page), which must exist when the file has data for it.
 * Events lost inside a page whose later events still parse cannot be
 * told from events that were never there.  0, or -1 with @err.
 */
static int check_trace_data(struct hgm_input *in, char *err, size_t err_len)
{
	int page = tracecmd_page_size(in->handle);

	for (int cpu = 0; cpu < in->nr_cpus; cpu++) {
		unsigned long long size = tracecmd_get_cpu_file_size(in->handle, cpu);
		struct tep_record *last = tracecmd_read_cpu_last(in->handle, cpu), *rec;
		unsigned long long last_off = 0, prev_off = 0, prev_ts = 0, n = 0;

		if (last) {
			last_off = last->offset;
			tracecmd_free_record(last);
		}
		for (rec = tracecmd_read_cpu_first(in->handle, cpu); rec;
		     rec = tracecmd_read_data(in->handle, cpu)) {
			bool backwards = n && rec->ts < prev_ts;
			bool bad_size = rec->record_size <= 0 || (page > 0 && rec->record_size > page);

			prev_ts = rec->ts;
			prev_off = rec->offset;
			n++;
			tracecmd_free_record(rec);
			if (backwards || bad_size) {
				set_err(err, err_len,
					"%s: damaged trace data: CPU %d's event %llu (data offset %llu) %s",
					in->path, cpu, n, prev_off,
					backwards ? "goes back in time" : "has an impossible size");
				return -1;
			}
		}
		if (size && !last) {
			set_err(err, err_len, "%s: damaged trace data: CPU %d has %llu bytes of "
				"data but its last page cannot be read", in->path, cpu, size);
			return -1;
		}
		if (last && (!n || prev_off != last_off)) {
			set_err(err, err_len, "%s: damaged trace data: CPU %d's events stop after "
				"%llu, at data offset %llu, before its last event at %llu "
				"(libtracecmd drops the rest)", in->path, cpu, n, prev_off, last_off);
			return -1;
		}
	}
	return 0;
}

/*
 * The merge's workers (merge_par.c) each open every input: through a
 * shared struct hgm_checked the check runs once per file (device, inode,
 * size and modification time) per merge, the others wait for it and take
 * its result.  Only passes are remembered: a damaged file fails every
 * time.  (A file rewritten in place with the same size within one tick of
 * the file system's clock would pass unread: not what a merge's inputs do
 * while it runs.)  The record lives as long as the merge, not the process.
 */
/*
 * What check_app_file() found in an application or perf event file, kept
 * so that the other workers take it instead of reading the file again.
 */
struct hgm_app_summary {
	int nr_cpus;
	uint64_t records, tail_bytes;
	uint64_t *last_ts;		/* nr_cpus entries */
	uint32_t *tids;			/* nr_tids entries, at most HGM_APP_TIDS */
	int nr_tids;
};

struct hgm_checked_file {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	struct hgm_app_summary *app;	/* an event file's results; NULL: a trace.dat */
	int buffer;			/* a trace.dat's buffer (hgm_input.buffer) */
};

struct hgm_checked {
	pthread_mutex_t lock;		/* held during a check: the others wait */
	struct hgm_checked_file *files;
	size_t nr, cap;			/* at most 2 * HGM_MAX_INPUTS remembered */
};

struct hgm_checked *hgm_checked_new(void)
{
	struct hgm_checked *c = calloc(1, sizeof(*c));

	if (c && pthread_mutex_init(&c->lock, NULL)) {
		free(c);
		return NULL;
	}
	return c;
}

void hgm_checked_free(struct hgm_checked *c)
{
	if (!c)
		return;
	pthread_mutex_destroy(&c->lock);
	for (size_t i = 0; i < c->nr; i++) {
		struct hgm_app_summary *a = c->files[i].app;

		if (a) {
			free(a->last_ts);
			free(a->tids);
			free(a);
		}
	}
	free(c->files);
	free(c);
}

/* The pass remembered for this file, checked as @app says, or NULL. */
static const struct hgm_checked_file *checked_find(const struct hgm_checked *c,
						   const struct stat *st, bool app, int buffer)
{
	for (size_t i = 0; i < c->nr; i++) {
		const struct hgm_checked_file *f = &c->files[i];

		if (f->dev == st->st_dev && f->ino == st->st_ino && f->size == st->st_size &&
		    f->mtime.tv_sec == st->st_mtim.tv_sec &&
		    f->mtime.tv_nsec == st->st_mtim.tv_nsec && !!f->app == app &&
		    f->buffer == buffer)
			return f;
	}
	return NULL;
}

/*
 * Remembers a pass, and for an event file what its check found (@app,
 * which the record then owns; freed here when it cannot be kept).  Out of
 * memory, or beyond the limit, nothing is remembered: the file is checked
 * again, which costs time, not results.
 */
static void checked_add(struct hgm_checked *c, const struct stat *st,
			struct hgm_app_summary *app, int buffer)
{
	if (c->nr == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 8;
		struct hgm_checked_file *p;

		if (cap > 2 * HGM_MAX_INPUTS)
			cap = 2 * HGM_MAX_INPUTS;
		if (cap <= c->nr || cap > SIZE_MAX / sizeof(*p))
			goto forget;
		p = realloc(c->files, cap * sizeof(*p));
		if (!p)
			goto forget;
		c->files = p;
		c->cap = cap;
	}
	c->files[c->nr++] = (struct hgm_checked_file){
		.dev = st->st_dev, .ino = st->st_ino, .size = st->st_size, .mtime = st->st_mtim,
		.app = app, .buffer = buffer,
	};
	return;
forget:
	if (app) {
		free(app->last_ts);
		free(app->tids);
		free(app);
	}
}

static int check_trace_data_once(struct hgm_checked *c, struct hgm_input *in, char *err,
				 size_t err_len)
{
	struct stat st;
	int ret;

	if (!c || stat(in->open_path ? in->open_path : in->path, &st))
		return check_trace_data(in, err, err_len);
	pthread_mutex_lock(&c->lock);
	if (checked_find(c, &st, false, in->buffer)) {
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	ret = check_trace_data(in, err, err_len);
	if (!ret)
		checked_add(c, &st, NULL, in->buffer);
	pthread_mutex_unlock(&c->lock);
	return ret;
}

/*
 * Room for one more input in m->in, which grows by doubling up to
 * HGM_MAX_INPUTS.  The streams point into it: it must not move once
 * hgm_start() made them, so no input is added after.  0, or an HGM_E_*
 * with @err.
 */
static int input_room(struct hgm *m, const char *path, char *err, size_t err_len)
{
	struct hgm_input *p;
	size_t cap;

	if (m->nr_in >= HGM_MAX_INPUTS) {
		set_err(err, err_len, "%s: too many inputs (at most %d)", path, HGM_MAX_INPUTS);
		return HGM_E_INPUT;
	}
	if (m->streams) {
		set_err(err, err_len, "%s: inputs are added before the merge starts", path);
		return HGM_E_INPUT;
	}
	if (m->nr_in < m->cap_in)
		return 0;
	cap = m->cap_in ? (size_t)m->cap_in * 2 : 4;
	if (cap > HGM_MAX_INPUTS)
		cap = HGM_MAX_INPUTS;
	p = cap <= SIZE_MAX / sizeof(*p) ? realloc(m->in, cap * sizeof(*p)) : NULL;
	if (!p) {
		set_err(err, err_len, "%s: out of memory", path);
		return HGM_E_SYSTEM;
	}
	m->in = p;
	m->cap_in = (int)cap;
	return 0;
}

/*
 * Input @in's clock, tep and CPUs, checked: 0, or -1 with @err (the
 * caller closes the handle).
 */
static int input_describe(struct hgm_input *in, char *err, size_t err_len)
{
	const char *clock = tracecmd_get_trace_clock(in->handle);

	in->tep = tracecmd_get_tep(in->handle);
	in->nr_cpus = tracecmd_cpus(in->handle);
	in->clock_name = clock ? clock : "local";
	if (hgclock_clock_parse(in->clock_name, &in->clock)) {
		set_err(err, err_len,
			"%s: recorded with the '%s' trace clock, which hgclock cannot map exactly "
			"(it maps local, perf and x86-tsc: trace-cmd record -C local)", in->path,
			in->clock_name);
		return -1;
	}
	if (!in->tep || in->nr_cpus <= 0) {
		set_err(err, err_len, "%s: no CPUs or no event formats in the file", in->path);
		return -1;
	}
	return 0;
}

/*
 * The buffer instances of trace input @t (trace-cmd record -B NAME,
 * extract -B NAME), each an input of the same machine, in the file's
 * order: trace-cmd report shows them all, and so does the merge.  Each
 * handle holds a reference on the top one's (libtracecmd), so closing
 * them in any order is safe.  0, or -1 with @err.
 */
static int add_instances(struct hgm *m, int t, char *err, size_t err_len)
{
	int nr = tracecmd_buffer_instances(m->in[t].handle);

	for (int b = 0; b < nr; b++) {
		struct hgm_input *top, *in;
		const char *name;
		int ret = input_room(m, m->in[t].path, err, err_len);

		if (ret)
			return ret;
		top = &m->in[t];	/* input_room() may have moved it */
		in = &m->in[m->nr_in];
		memset(in, 0, sizeof(*in));
		name = tracecmd_buffer_instance_name(top->handle, b);
		in->guest = top->guest;
		in->buffer = b + 1;
		in->open_path = top->path;
		in->buffer_name = strdup(name && *name ? name : "?");
		if (!in->buffer_name ||
		    asprintf(&in->label, "%s (buffer %s)", top->path, in->buffer_name) < 0) {
			free(in->buffer_name);
			set_err(err, err_len, "%s: out of memory", top->path);
			return HGM_E_SYSTEM;
		}
		in->path = in->label;
		in->handle = tracecmd_buffer_instance_handle(top->handle, b);
		if (!in->handle || input_describe(in, err, err_len) ||
		    check_trace_data_once(m->checked, in, err, err_len)) {
			if (!in->handle)
				set_err(err, err_len, "%s: cannot read this buffer (damaged?)",
					in->path);
			else
				tracecmd_close(in->handle);
			free(in->label);
			free(in->buffer_name);
			return -1;
		}
		m->nr_in++;
	}
	return 0;
}

static int add_input(struct hgm *m, const char *path, int guest, char *err, size_t err_len)
{
	struct hgm_input *in;
	int ret = input_room(m, path, err, err_len);

	if (ret)
		return ret;
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
	in->handle = hg_trace_open(path, err, err_len);
	if (!in->handle)
		return -1;
	if (input_describe(in, err, err_len)) {
		hg_trace_close(in->handle);
		return -1;
	}
	if (check_trace_data_once(m->checked, in, err, err_len)) {
		hg_trace_close(in->handle);
		return -1;
	}
	m->nr_in++;
	return add_instances(m, m->nr_in - 1, err, err_len);
}

/*
 * After a failed add: while no input is open there is nothing for
 * hgm_close() to do, as before the first add, so the array goes too.
 */
static int added(struct hgm *m, int ret)
{
	if (ret && !m->nr_in) {
		free(m->in);
		m->in = NULL;
		m->cap_in = 0;
	}
	return ret;
}

int hgm_add_input(struct hgm *m, const char *path, int guest, char *err, size_t err_len)
{
	return added(m, add_input(m, path, guest, err, err_len));
}

/* ---- application event files ---- */

/* Is @tid among the file's threads?  Adds it while there is room. */
static void app_note_tid(struct hgm_input *in, uint32_t tid)
{
	for (int i = in->nr_app_tids - 1; i >= 0; i--)
		if (in->app_tids[i] == tid)
			return;
	if (in->nr_app_tids < HGM_APP_TIDS)
		in->app_tids[in->nr_app_tids++] = tid;
}

/*
 * The whole file read once: every record's fields (hgev_read_record()),
 * each CPU's time order (the writer stamps under its lock: a step back
 * is damage, or not libhgclock's file), the CPUs, the threads.  0, or
 * HGM_E_* with @err.
 */
static int check_app_file(struct hgm_input *in, FILE *f, char *err, size_t err_len)
{
	struct hgev_rec *r = malloc(sizeof(*r));
	char why[256];
	size_t cap = 0;
	int ret;

	in->app_tids = calloc(HGM_APP_TIDS, sizeof(*in->app_tids));
	if (!r || !in->app_tids) {
		free(r);
		set_err(err, err_len, "%s: out of memory", in->path);
		return HGM_E_SYSTEM;
	}
	/* The offset counted, not asked (an lseek() per ftell()). */
	long off = ftell(f);

	while ((ret = hgev_read_record(f, r, why, sizeof(why))) == 1) {
		if (r->cpu >= cap) {
			size_t ncap = cap ? cap : 16;
			uint64_t *p;

			while (ncap <= r->cpu)
				ncap *= 2;
			p = realloc(in->app_last_ts, ncap * sizeof(*p));
			if (!p) {
				free(r);
				set_err(err, err_len, "%s: out of memory", in->path);
				return HGM_E_SYSTEM;
			}
			memset(p + cap, 0, (ncap - cap) * sizeof(*p));
			in->app_last_ts = p;
			cap = ncap;
		}
		if ((int)r->cpu >= in->nr_cpus)
			in->nr_cpus = (int)r->cpu + 1;
		if (r->ts < in->app_last_ts[r->cpu]) {
			set_err(err, err_len, "%s: damaged: record %" PRIu64 " (CPU %u) goes back in "
				"time, from %" PRIu64 " to %" PRIu64 " (not in the order libhgclock "
				"writes)", in->path, in->app_records + 1, r->cpu,
				in->app_last_ts[r->cpu], r->ts);
			free(r);
			return HGM_E_INPUT;
		}
		in->app_last_ts[r->cpu] = r->ts;
		app_note_tid(in, r->tid);
		in->app_records++;
		if (off >= 0)
			off += r->size;
	}
	free(r);
	if (ret == -1) {
		set_err(err, err_len, "%s: %s", in->path, why);
		return HGM_E_INPUT;
	}
	if (ret == -2) {
		struct stat st;

		/* What is left after the last whole record: said, never read. */
		in->app_tail_bytes = 1;
		if (!fstat(fileno(f), &st) && off >= 0 && st.st_size > off)
			in->app_tail_bytes = (uint64_t)(st.st_size - off);
	}
	return 0;
}

/* A copy of @n values of @size bytes, or NULL (also for none). */
static void *dup_array(const void *src, size_t n, size_t size)
{
	void *p;

	if (!n || n > SIZE_MAX / size)
		return NULL;
	p = malloc(n * size);
	if (p)
		memcpy(p, src, n * size);
	return p;
}

/*
 * check_app_file() once per file and merge, as check_trace_data_once():
 * the first worker reads the file, the others copy what it found.
 */
static int check_app_file_once(struct hgm_checked *c, struct hgm_input *in, FILE *f,
			       char *err, size_t err_len)
{
	const struct hgm_checked_file *hit;
	struct hgm_app_summary *a;
	struct stat st;
	int ret;

	if (!c || fstat(fileno(f), &st))
		return check_app_file(in, f, err, err_len);
	pthread_mutex_lock(&c->lock);
	hit = checked_find(c, &st, true, 0);
	if (hit) {
		const struct hgm_app_summary *h = hit->app;

		in->app_tids = calloc(HGM_APP_TIDS, sizeof(*in->app_tids));
		in->app_last_ts = dup_array(h->last_ts, (size_t)h->nr_cpus, sizeof(*h->last_ts));
		pthread_mutex_unlock(&c->lock);
		if (!in->app_tids || (h->nr_cpus && !in->app_last_ts)) {
			set_err(err, err_len, "%s: out of memory", in->path);
			return HGM_E_SYSTEM;
		}
		/* The record is not changed or freed before the merge ends. */
		if (h->nr_tids)
			memcpy(in->app_tids, h->tids, (size_t)h->nr_tids * sizeof(*h->tids));
		in->nr_app_tids = h->nr_tids;
		in->nr_cpus = h->nr_cpus;
		in->app_records = h->records;
		in->app_tail_bytes = h->tail_bytes;
		return 0;
	}
	ret = check_app_file(in, f, err, err_len);
	if (!ret && (a = calloc(1, sizeof(*a)))) {
		a->nr_cpus = in->nr_cpus;
		a->records = in->app_records;
		a->tail_bytes = in->app_tail_bytes;
		a->nr_tids = in->nr_app_tids;
		a->last_ts = dup_array(in->app_last_ts, (size_t)in->nr_cpus, sizeof(*a->last_ts));
		a->tids = dup_array(in->app_tids, (size_t)in->nr_app_tids, sizeof(*a->tids));
		if ((in->nr_cpus && !a->last_ts) || (in->nr_app_tids && !a->tids)) {
			free(a->last_ts);
			free(a->tids);
			free(a);
		} else {
			checked_add(c, &st, a, 0);
		}
	}
	pthread_mutex_unlock(&c->lock);
	return ret;
}

static int add_app_input(struct hgm *m, const char *path, const char *open_path, bool perf,
			 int guest, char *err, size_t err_len)
{
	struct hgm_input *in;
	struct hgev_header h;
	char why[256];
	FILE *f;
	int ret = input_room(m, path, err, err_len);

	if (ret)
		return ret;
	in = &m->in[m->nr_in];
	memset(in, 0, sizeof(*in));
	in->path = path;
	in->open_path = open_path;
	in->guest = guest;
	in->app = true;
	in->perf = perf;
	f = fopen(open_path, "rbe");
	if (!f) {
		set_err(err, err_len, "%s: %s", path, strerror(errno));
		return HGM_E_INPUT;
	}
	setvbuf(f, NULL, _IOFBF, 256u << 10);	/* read whole, once */
	if (hgev_read_header(f, &h, why, sizeof(why))) {
		set_err(err, err_len, "%s: %s", path, why);
		fclose(f);
		return HGM_E_INPUT;
	}
	in->clock_name = hgev_clock_name(h.clock);
	if (hgclock_clock_parse(in->clock_name, &in->clock)) {
		set_err(err, err_len, "%s: clock '%s' unknown", path, in->clock_name);
		fclose(f);
		return HGM_E_INPUT;
	}
	in->app_pid = h.pid;
	memcpy(in->app_comm, h.comm, sizeof(in->app_comm));
	memcpy(in->app_nodename, h.nodename, sizeof(in->app_nodename));
	ret = check_app_file_once(m->checked, in, f, err, err_len);
	fclose(f);
	if (ret) {
		free(in->app_last_ts);
		free(in->app_tids);
		return ret;
	}
	m->nr_in++;
	return 0;
}

int hgm_add_app_input(struct hgm *m, const char *path, int guest, char *err, size_t err_len)
{
	return added(m, add_app_input(m, path, path, false, guest, err, err_len));
}

int hgm_add_spec(struct hgm *m, const struct hgm_input_spec *in, char *err, size_t err_len)
{
	if (in->app)
		return added(m, add_app_input(m, in->path, in->open_path ? in->open_path : in->path,
					      in->perf, in->guest, err, err_len));
	return hgm_add_input(m, in->path, in->guest, err, err_len);
}
