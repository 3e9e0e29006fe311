// SPDX-License-Identifier: GPL-2.0
/*
 * merge --dat: the merged timeline as trace-cmd trace.dat files, one per
 * machine, every guest event stamped with its own host time (the exact
 * per-event mapping), so that trace-cmd report and KernelShark show host
 * and guests on one time base with no time shift of their own.
 *
 * What libtracecmd writes (its output API, tracecmd_priv.h): each file's
 * headers, event formats, kallsyms, printk formats and saved command
 * lines, copied from the machine's input (tracecmd_copy(), as trace-cmd
 * split does); the options (trace clock, and the GUEST and TRACEID
 * options that tie a guest file to its vCPU threads); the CPU count and
 * the flyrecord section around the CPU data.  What it cannot write is
 * the CPU data itself with new timestamps: the ring-buffer pages are
 * built here (dat_put()), in the page and event header layouts that the
 * copied header_page/header_event describe, one temporary file per CPU,
 * which tracecmd_append_cpu_data() then appends.  The input's options
 * are not copied: a guest's TimeShift would shift it a second time.
 *
 * Streaming: one page per output CPU in memory; the events go to the
 * per-CPU files as the merge produces them.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event-parse.h>

#include "merge.h"
#include "tracecmd_priv.h"

/* The ring buffer's event header (include/linux/ring_buffer.h). */
#define RB_TYPE_LEN_MAX		28	/* type_len 1..28: data of type_len * 4 bytes */
#define RB_TYPE_TIME_EXTEND	30
#define RB_DELTA_BITS		27
#define RB_MISSED_EVENTS	(1ULL << 31)	/* in the page's commit field */

struct dat_cpu {
	int fd;
	char *path;			/* its temporary file, removed at the end */
	uint8_t *page;			/* page_size bytes, or NULL before the first event */
	size_t used;			/* bytes of the page used, its header included */
	uint64_t last_ts;		/* the time the next delta counts from */
	bool missed;			/* events were lost before this page */
};

struct dat_machine {
	int guest;			/* -1: the host */
	struct hgm_input *in;		/* its trace (in the hgm) */
	char *path, *tmp_path;		/* the output, and its temporary name */
	int nr_cpus;
	struct dat_cpu *cpus;
	uint64_t nr_events;
};

/*
 * Disruption marks (hgm_marks_build()) go into the host's file as
 * ftrace "print" events (what a write to trace_marker records), on host
 * CPU 0 at the mark's time, with the text line's words: trace-cmd report
 * and KernelShark show them among the events.  The event's layout comes
 * from the host trace's own format of ftrace/print; without it (or
 * without the host's file) there are no marks.
 */
struct dat_print {
	int id;				/* its common_type; -1: no print event */
	int type_off, type_size;	/* common_type */
	int buf_off;			/* buf[], to the end of the record */
};

struct dat {
	const struct hgm *m;
	struct dat_machine *mach;
	int nr_mach;
	int page_size, long_size, hdr_size;
	uint64_t nr_unmapped, nr_app;
	int failed_errno;
	struct hgm_marks marks;
	struct dat_machine *host;	/* the host's file, or NULL (filtered out) */
	struct dat_print print;
	uint64_t nr_marks;
};

void hgm_dat_path(const char *path, int guest, char *out, size_t len)
{
	size_t n = strlen(path);

	if (guest < 0) {
		snprintf(out, len, "%s", path);
		return;
	}
	if (n > 4 && !strcmp(path + n - 4, ".dat"))
		n -= 4;
	snprintf(out, len, "%.*s-g%d.dat", (int)n, path, guest);
}

static void put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static int put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
	return 4;
}

static void put_le64(uint8_t *p, uint64_t v)
{
	put_le32(p, (uint32_t)v);
	put_le32(p + 4, (uint32_t)(v >> 32));
}

/* The page's header: its first event's time, then the committed bytes. */
static int dat_flush(struct dat *d, struct dat_cpu *c)
{
	uint64_t commit = c->used - (size_t)d->hdr_size;
	size_t off = 0;

	if (!c->page)
		return 0;
	if (c->missed)
		commit |= RB_MISSED_EVENTS;
	if (d->long_size == 8)
		put_le64(c->page + 8, commit);
	else
		put_le32(c->page + 8, (uint32_t)commit);
	memset(c->page + c->used, 0, (size_t)d->page_size - c->used);
	while (off < (size_t)d->page_size) {
		ssize_t n = write(c->fd, c->page + off, (size_t)d->page_size - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		off += (size_t)n;
	}
	c->used = 0;
	c->missed = false;
	return 0;
}

static int dat_new_page(struct dat *d, struct dat_cpu *c, uint64_t ts)
{
	if (c->used && dat_flush(d, c))
		return -1;
	if (!c->page) {
		c->page = malloc((size_t)d->page_size);
		if (!c->page)
			return -1;
	}
	put_le64(c->page, ts);
	c->used = (size_t)d->hdr_size;
	c->last_ts = ts;
	return 0;
}

/*
 * One event into its CPU's page: a time extend first when the delta does
 * not fit in 27 bits; a new page when it does not fit, when the time
 * steps back (a guest stream across a mapping segment's change: a page's
 * time is absolute), and after lost events (the page's flag says so).
 */
static int dat_put(struct dat *d, struct dat_cpu *c, uint64_t ts, const void *data,
		   uint32_t size, bool missed)
{
	uint32_t padded = (size + 3) & ~3U;
	bool small = size && size <= RB_TYPE_LEN_MAX * 4 && !(size & 3);
	size_t need = 4 + (small ? 0 : 4) + padded;
	uint64_t delta;

	if (need + 8 > (size_t)d->page_size - (size_t)d->hdr_size)
		return 1;		/* larger than a page: cannot be (the input held it) */
	if (!c->used || ts < c->last_ts || missed) {
		if (dat_new_page(d, c, ts))
			return -1;
		c->missed = missed;
	}
	delta = ts - c->last_ts;
	if (c->used + need + (delta >> RB_DELTA_BITS ? 8 : 0) > (size_t)d->page_size) {
		if (dat_new_page(d, c, ts))
			return -1;
		delta = 0;
	}
	if (delta >> RB_DELTA_BITS) {
		uint8_t *p = c->page + c->used;

		if ((delta >> RB_DELTA_BITS) > UINT32_MAX) {
			if (dat_new_page(d, c, ts))
				return -1;
		} else {
			put_le32(p, (uint32_t)(delta & ((1U << RB_DELTA_BITS) - 1)) << 5 |
				    RB_TYPE_TIME_EXTEND);
			put_le32(p + 4, (uint32_t)(delta >> RB_DELTA_BITS));
			c->used += 8;
		}
		delta = 0;
	}
	{
		uint8_t *p = c->page + c->used;
		uint32_t type_len = small ? size / 4 : 0;

		p += put_le32(p, (uint32_t)delta << 5 | type_len);
		if (!small)
			p += put_le32(p, size + 4);
		memcpy(p, data, size);
		memset(p + size, 0, padded - size);
		c->used += need;
	}
	c->last_ts = ts;
	return 0;
}

/*
 * The file of @in's machine.  A buffer instance's events go into its
 * machine's file with the top buffer's (one buffer: they share its event
 * formats, and KernelShark shows one stream per machine).
 */
static struct dat_machine *machine_of(struct dat *d, const struct hgm_input *in)
{
	for (int i = 0; i < d->nr_mach; i++)
		if (d->mach[i].in == in || (in->buffer && d->mach[i].guest == in->guest))
			return &d->mach[i];
	return NULL;
}

/* ftrace/print's layout in the host's trace, into d->print. */
static void find_print(struct dat *d)
{
	struct tep_event *e;
	struct tep_format_field *type, *buf;

	d->print.id = -1;
	if (!d->host || !d->host->in->tep)
		return;
	e = tep_find_event_by_name(d->host->in->tep, "ftrace", "print");
	if (!e)
		return;
	type = tep_find_common_field(e, "common_type");
	buf = tep_find_field(e, "buf");
	if (!type || !buf || (type->size != 2 && type->size != 4) || type->offset < 0 ||
	    buf->offset < type->offset + type->size || buf->offset > 256 || e->id < 0 ||
	    e->id > 0xffff)
		return;
	d->print = (struct dat_print){ .id = e->id, .type_off = type->offset,
				       .type_size = type->size, .buf_off = buf->offset };
}

/* The marks at or before @ts, as print events on the host's CPU 0. */
static int dat_marks_until(struct dat *d, uint64_t ts)
{
	struct hgm_marks *mk = &d->marks;

	if (d->print.id < 0 || !d->host->nr_cpus) {
		mk->next = mk->n;
		return 0;
	}
	for (; mk->next < mk->n && mk->v[mk->next].ts <= ts; mk->next++) {
		const struct hgm_mark *k = &mk->v[mk->next];
		uint8_t rec[16 + 256 + sizeof(k->text)] = { 0 };
		const char *words = strstr(k->text, "DISRUPTION");
		int len, ret;

		len = snprintf((char *)rec + d->print.buf_off, sizeof(rec) - (size_t)d->print.buf_off,
			       "hgclock: %s", words ? words : k->text);
		if (len < 0) {
			d->failed_errno = EINVAL;
			return -1;
		}
		if ((size_t)len >= sizeof(rec) - (size_t)d->print.buf_off)
			len = (int)(sizeof(rec) - (size_t)d->print.buf_off) - 1;
		/* The text's line end: none in the record. */
		while (len && rec[d->print.buf_off + len - 1] == '\n')
			rec[d->print.buf_off + --len] = 0;
		/* find_print() allowed 2 or 4 bytes and an id below 65536. */
		if (d->print.type_size == 2)
			put_le16(rec + d->print.type_off, (uint16_t)d->print.id);
		else
			put_le32(rec + d->print.type_off, (uint32_t)d->print.id);
		ret = dat_put(d, &d->host->cpus[0], k->ts, rec,
			      (uint32_t)(d->print.buf_off + len + 1), false);
		if (ret < 0) {
			d->failed_errno = errno ? errno : ENOMEM;
			return -1;
		}
		if (ret)
			continue;	/* larger than a page: not written, counted as left */
		d->host->nr_events++;
		d->nr_marks++;
	}
	return 0;
}

static int dat_emit(void *ctx, const struct hgm_event *ev)
{
	struct dat *d = ctx;
	struct dat_machine *mc;
	int ret;

	if (dat_marks_until(d, ev->host_ts))
		return -1;	/* d->failed_errno says why */

	if (ev->app) {
		d->nr_app++;		/* no event format to write them with */
		return 0;
	}
	if (ev->flags & HGM_EV_UNMAPPED) {
		d->nr_unmapped++;	/* no host time to stamp it with */
		return 0;
	}
	mc = machine_of(d, ev->in);
	if (!mc || ev->cpu < 0 || ev->cpu >= mc->nr_cpus)
		return 0;
	ret = dat_put(d, &mc->cpus[ev->cpu], ev->host_ts, ev->rec->data, (uint32_t)ev->rec->size,
		      ev->rec->missed_events != 0);
	if (ret < 0) {
		d->failed_errno = errno ? errno : ENOMEM;
		return -1;
	}
	mc->nr_events += !ret;
	return 0;
}

/* A name for a guest in the GUEST option: the host trace's, else its spec. */
static void guest_name(const struct hgm *m, const struct hgm_input *gin, char *buf, size_t len)
{
	const struct hgsync_guest *g = &m->sync->guests[gin->guest];
	unsigned long long id = tracecmd_get_traceid(gin->handle);

	for (int i = 0; i < m->nr_in; i++) {
		const char *name;
		const int *pids;
		int n;

		if (m->in[i].guest < 0 && !m->in[i].app && id &&
		    !tracecmd_get_guest_cpumap(m->in[i].handle, id, &name, &n, &pids) && name &&
		    *name) {
			snprintf(buf, len, "%s", name);
			return;
		}
	}
	if (g->vm.spec[0])
		snprintf(buf, len, "%.*s", (int)sizeof(g->vm.spec), g->vm.spec);
	else
		snprintf(buf, len, "guest%d", gin->guest);
}

/* The trace id that ties guest @gin's file to the host's GUEST option. */
static unsigned long long guest_trace_id(const struct hgm_input *gin)
{
	unsigned long long id = tracecmd_get_traceid(gin->handle);

	/* "hgcl" and the guest number when its trace has none. */
	return id ? id : 0x6867636cULL << 32 | (unsigned int)gin->guest;
}

/*
 * The host file's GUEST option for guest @gin: name, trace id, CPU
 * count, and per guest CPU the host thread of its vCPU (the first one
 * the tracking records name; -1 when none: KernelShark then shows that
 * CPU without its thread).
 */
static int add_guest_option(struct dat *d, struct tracecmd_output *out,
			    const struct hgm_input *gin)
{
	const struct hgsync *s = d->m->sync;
	const struct hgsync_guest *g = &s->guests[gin->guest];
	char name[256];
	size_t nlen, size;
	uint8_t *buf, *p;
	int ret = -1;

	guest_name(d->m, gin, name, sizeof(name));
	nlen = strlen(name) + 1;
	size = nlen + 8 + 4 + (size_t)gin->nr_cpus * 8;
	buf = calloc(1, size);
	if (!buf)
		return -1;
	memcpy(buf, name, nlen);
	p = buf + nlen;
	put_le64(p, guest_trace_id(gin));
	p += 8;
	p += put_le32(p, (uint32_t)gin->nr_cpus);
	for (int cpu = 0; cpu < gin->nr_cpus; cpu++) {
		int vcpu_id = hgsync_guest_vcpu_id(s, (uint32_t)gin->guest, cpu);
		int32_t tid = -1;

		for (size_t k = 0; k < s->nr_vcpus && g->vm.vm_pid > 0; k++)
			if (s->vcpus[k].vm_pid == g->vm.vm_pid && s->vcpus[k].vcpu_id == vcpu_id &&
			    vcpu_id >= 0) {
				tid = s->vcpus[k].tid;
				break;
			}
		p += put_le32(p, (uint32_t)cpu);
		p += put_le32(p, (uint32_t)tid);
	}
	if (tracecmd_add_option(out, HG_TRACECMD_OPTION_GUEST, (int)size, buf))
		ret = 0;
	free(buf);
	return ret;
}

static void dat_free(struct dat *d, bool keep)
{
	for (int i = 0; i < d->nr_mach; i++) {
		struct dat_machine *mc = &d->mach[i];

		for (int c = 0; c < mc->nr_cpus && mc->cpus; c++) {
			if (mc->cpus[c].fd >= 0)
				close(mc->cpus[c].fd);
			if (mc->cpus[c].path)
				unlink(mc->cpus[c].path);
			free(mc->cpus[c].path);
			free(mc->cpus[c].page);
		}
		if (mc->tmp_path && !keep)
			unlink(mc->tmp_path);
		free(mc->cpus);
		free(mc->path);
		free(mc->tmp_path);
	}
	free(d->mach);
}

/* A temporary file beside @path (same file system: renamed into place). */
static char *temp_beside(const char *path, const char *what, int *fd)
{
	size_t n = strlen(path) + strlen(what) + 16;
	char *t = malloc(n);

	if (!t)
		return NULL;
	snprintf(t, n, "%s.tmp%s-XXXXXX", path, what);
	*fd = mkstemp(t);
	if (*fd < 0) {
		free(t);
		return NULL;
	}
	return t;
}

static int open_machines(struct dat *d, struct hgm *m, const char *path, char *err,
			 size_t err_len)
{
	d->mach = calloc((size_t)m->nr_in, sizeof(*d->mach));
	if (!d->mach) {
		snprintf(err, err_len, "out of memory");
		return HGM_E_SYSTEM;
	}
	for (int i = 0; i < m->nr_in; i++) {
		struct hgm_input *in = &m->in[i];
		struct dat_machine *mc;
		char name[PATH_MAX];

		if (in->app || in->buffer || !hgm_filter_machine(m->opt.filter, in->guest))
			continue;
		mc = &d->mach[d->nr_mach++];
		mc->guest = in->guest;
		mc->in = in;
		mc->nr_cpus = in->nr_cpus;
		/* Its buffers' CPUs too (an instance may trace CPUs the top did not). */
		for (int j = i + 1; j < m->nr_in; j++)
			if (m->in[j].buffer && m->in[j].guest == in->guest &&
			    m->in[j].nr_cpus > mc->nr_cpus)
				mc->nr_cpus = m->in[j].nr_cpus;
		hgm_dat_path(path, in->guest, name, sizeof(name));
		mc->path = strdup(name);
		mc->cpus = calloc((size_t)mc->nr_cpus, sizeof(*mc->cpus));
		if (!mc->path || !mc->cpus) {
			snprintf(err, err_len, "out of memory");
			return HGM_E_SYSTEM;
		}
		for (int c = 0; c < mc->nr_cpus; c++)
			mc->cpus[c].fd = -1;
		for (int c = 0; c < mc->nr_cpus; c++) {
			char what[32];

			snprintf(what, sizeof(what), ".cpu%d", c);
			mc->cpus[c].path = temp_beside(mc->path, what, &mc->cpus[c].fd);
			if (!mc->cpus[c].path) {
				mc->cpus[c].fd = -1;
				snprintf(err, err_len, "%s: cannot create a temporary file beside it: %s",
					 mc->path, strerror(errno));
				return HGM_E_SYSTEM;
			}
		}
	}
	return 0;
}

/*
 * One machine's file: headers copied from its input, then the options,
 * then the CPU data from the temporary files, under a temporary name
 * renamed into place by the caller.
 */
static int write_machine(struct dat *d, struct dat_machine *mc, char *err, size_t err_len)
{
	struct tracecmd_output *out;
	char **files;
	int fd, ret = -1;

	for (int c = 0; c < mc->nr_cpus; c++)
		if (dat_flush(d, &mc->cpus[c])) {
			snprintf(err, err_len, "%s: writing its CPU %d data: %s", mc->path, c,
				 strerror(errno));
			return HGM_E_SYSTEM;
		}
	mc->tmp_path = temp_beside(mc->path, "", &fd);
	if (!mc->tmp_path) {
		snprintf(err, err_len, "%s: %s", mc->path, strerror(errno));
		return HGM_E_SYSTEM;
	}
	/* The mode a new file gets (mkstemp's is 0600), as the other outputs. */
	{
		mode_t mask = umask(0);

		umask(mask);
		if (fchmod(fd, 0666 & ~mask)) {
			close(fd);
			snprintf(err, err_len, "%s: %s", mc->tmp_path, strerror(errno));
			return HGM_E_SYSTEM;
		}
	}
	close(fd);
	out = tracecmd_copy(mc->in->handle, mc->tmp_path, HG_TRACECMD_FILE_CMD_LINES, 0, NULL);
	if (!out) {
		snprintf(err, err_len, "%s: libtracecmd cannot copy the headers of %s", mc->path,
			 mc->in->path);
		return HGM_E_SYSTEM;
	}
	/* Not its "CPU0 data recorded at offset..." lines on our standard error. */
	tracecmd_set_quiet(out, true);
	tracecmd_set_out_clock(out, mc->in->clock_name);
	if (mc->guest >= 0) {
		unsigned long long id = guest_trace_id(mc->in);
		uint8_t le[8];

		put_le64(le, id);
		if (!tracecmd_add_option(out, HG_TRACECMD_OPTION_TRACEID, 8, le))
			goto fail;
	} else {
		for (int i = 0; i < d->nr_mach; i++)
			if (d->mach[i].guest >= 0 && add_guest_option(d, out, d->mach[i].in))
				goto fail;
	}
	files = calloc((size_t)mc->nr_cpus, sizeof(*files));
	if (!files)
		goto fail;
	for (int c = 0; c < mc->nr_cpus; c++)
		files[c] = mc->cpus[c].path;
	/*
	 * For a version 6 file libtracecmd warns "Cannot find description
	 * for buffer" (the top buffer has no BUFFER option there; trace-cmd
	 * split gets the same) and goes on: not said on our standard error.
	 * Its failures are still ours to report, below.
	 */
	tracecmd_set_loglevel(TEP_LOG_ERROR);
	ret = tracecmd_append_cpu_data(out, mc->nr_cpus, files);
	tracecmd_set_loglevel(TEP_LOG_WARNING);	/* libtracecmd's default */
	free(files);
	if (ret < 0)
		goto fail;
	tracecmd_output_close(out);
	return 0;
fail:
	tracecmd_output_close(out);
	snprintf(err, err_len, "%s: libtracecmd failed writing it: %s", mc->path,
		 strerror(errno ? errno : EIO));
	return HGM_E_SYSTEM;
}

int hgm_dat_run(const struct hgm_par *par, const char *path, struct hgm_dat_result *res,
		struct hgm_par_result *counts, char *err, size_t err_len)
{
	struct hgm m = { 0 };
	struct dat d = { .m = &m };
	int ret;

	memset(res, 0, sizeof(*res));
	ret = hgm_start_pass(&m, par, true, err, err_len);
	for (int i = 0; !ret && i < m.nr_in; i++)
		if (!m.in[i].app) {
			d.page_size = tracecmd_page_size(m.in[i].handle);
			d.long_size = tracecmd_long_size(m.in[i].handle);
			if (tep_is_file_bigendian(m.in[i].tep) || d.page_size < 64 ||
			    d.page_size > (1 << 20) || (d.long_size != 4 && d.long_size != 8)) {
				snprintf(err, err_len, "%s: --dat writes little-endian files with "
					 "pages of 64 B to 1 MiB (this one: %s, page %d, long %d)",
					 m.in[i].path, tep_is_file_bigendian(m.in[i].tep) ?
					 "big-endian" : "little-endian", d.page_size, d.long_size);
				ret = HGM_E_INPUT;
			}
			/* Every machine's file gets the same page size, the first's. */
			for (int j = i + 1; !ret && j < m.nr_in; j++)
				if (!m.in[j].app && tracecmd_page_size(m.in[j].handle) != d.page_size) {
					snprintf(err, err_len, "%s and %s: different page sizes",
						 m.in[i].path, m.in[j].path);
					ret = HGM_E_INPUT;
				}
			break;
		}
	d.hdr_size = 8 + d.long_size;
	if (!ret)
		ret = open_machines(&d, &m, path, err, err_len);
	if (!ret) {
		for (int i = 0; i < d.nr_mach; i++)
			if (d.mach[i].guest < 0)
				d.host = &d.mach[i];
		find_print(&d);
		if (hgm_marks_build(&d.marks, &m)) {
			snprintf(err, err_len, "out of memory");
			ret = HGM_E_SYSTEM;
		}
	}
	if (!ret && (hgm_run(&m, dat_emit, &d) || dat_marks_until(&d, UINT64_MAX))) {
		snprintf(err, err_len, "%s: writing its CPU data: %s", path,
			 strerror(d.failed_errno));
		ret = HGM_E_SYSTEM;
	}
	if (!ret)
		ret = hgm_read_error(&m, err, err_len);
	for (int i = 0; !ret && i < d.nr_mach; i++)
		ret = write_machine(&d, &d.mach[i], err, err_len);
	/* All written: each renamed into place; a failure keeps the old files. */
	for (int i = 0; !ret && i < d.nr_mach; i++)
		if (rename(d.mach[i].tmp_path, d.mach[i].path)) {
			snprintf(err, err_len, "%s: %s", d.mach[i].path, strerror(errno));
			ret = HGM_E_SYSTEM;
		} else {
			free(d.mach[i].tmp_path);
			d.mach[i].tmp_path = NULL;
		}
	if (!ret && counts)
		hgm_result(&m, counts);
	if (!ret) {
		res->nr_unmapped = d.nr_unmapped;
		res->nr_app = d.nr_app;
		res->nr_marks = d.nr_marks;
		res->nr_marks_left = d.marks.n - d.nr_marks;
		for (int i = 0; i < d.nr_mach && i < HGM_MAX_INPUTS; i++) {
			res->files[i].guest = d.mach[i].guest;
			res->files[i].nr_events = d.mach[i].nr_events;
			res->nr_files++;
		}
	}
	hgm_marks_free(&d.marks);
	dat_free(&d, false);
	hgm_close(&m);
	return ret;
}
