// SPDX-License-Identifier: GPL-2.0
/*
 * Exit pairing without the guest module, from a guest trace.dat
 * (user/lib/markpair.h): reads the ftrace print events (trace_marker writes)
 * with libtracecmd, parses `hgclock pairmark`'s markers and joins them
 * with the host's EXIT_HOST records of a loaded correlation file
 * (hg_markpair_match()).
 *
 * The print event's buf field is a char array running to the end of the
 * record (format "char buf[]"): it is read within the record's size only,
 * never trusting a NUL to be there.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event-parse.h>
#include <trace-cmd.h>

#include "libhgclock.h"
#include "markpair.h"
#include "sync.h"
#include "trace_pool.h"
#include "tracecmd_priv.h"

/* More markers than this in one trace is not a pairing run: refused. */
#define HG_MARKPAIR_MAX_MARKERS		(16u << 20)

struct tracecmd_input *hg_markpair_open(const char *path, char *err, size_t err_len)
{
	/* trace-cmd's own guest TimeShift must not apply: the pool's handles have it off. */
	return hg_trace_open(path, err, err_len);
}

struct marker_vec {
	struct hg_marker *v;
	size_t n, cap;
};

static int marker_push(struct marker_vec *mv, const struct hg_marker *m)
{
	if (mv->n == mv->cap) {
		size_t cap = mv->cap ? mv->cap * 2 : 256;
		struct hg_marker *v;

		if (cap > HG_MARKPAIR_MAX_MARKERS)
			cap = HG_MARKPAIR_MAX_MARKERS;
		if (mv->n >= cap)
			return -E2BIG;
		v = realloc(mv->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		mv->v = v;
		mv->cap = cap;
	}
	mv->v[mv->n++] = *m;
	return 0;
}

/*
 * The markers of one record, if it is a print event: its buf from the
 * field's offset to the record's end.
 */
static int scan_record(struct tep_handle *tep, int print_id, const struct tep_format_field *buf,
		       struct tep_record *rec, int cpu, struct marker_vec *mv,
		       struct hg_markpair_stats *st)
{
	struct hg_marker m;
	uint32_t key, seq;
	bool is_end;
	int ret;

	if (!rec->data || rec->size <= 0 || tep_data_type(tep, rec) != print_id)
		return 0;
	if (buf->offset < 0 || buf->offset >= rec->size)
		return 0;
	ret = hg_marker_parse((const char *)rec->data + buf->offset,
			      (size_t)(rec->size - buf->offset), &key, &seq, &is_end);
	if (ret < 0)
		st->malformed++;
	if (ret <= 0)
		return 0;
	memset(&m, 0, sizeof(m));
	m.guest_ts = rec->ts;
	m.guest_cpu = cpu;
	m.key = key;
	m.seq = seq;
	m.is_end = is_end;
	return marker_push(mv, &m);
}

int hg_markpair_collect(struct tracecmd_input *guest, const struct hgsync *s,
			const struct hg_markpair_opts *opts, struct hg_markpair **out,
			size_t *nr_out, struct hg_markpair_stats *st)
{
	struct tep_handle *tep = tracecmd_get_tep(guest);
	struct hg_markpair_opts o = *opts;
	struct marker_vec mv = { 0 };
	struct tep_format_field *buf;
	struct tep_event *print;
	const char *clock;
	int nr_cpus, ret = 0;

	*out = NULL;
	*nr_out = 0;
	memset(st, 0, sizeof(*st));
	clock = tracecmd_get_trace_clock(guest);
	snprintf(st->clock_name, sizeof(st->clock_name), "%s", clock ? clock : "local");
	if (hgclock_clock_parse(st->clock_name, &o.guest_clock))
		return -EINVAL;
	st->guest_clock = o.guest_clock;
	if (!o.max_gap) {
		o.max_gap = HG_MARKPAIR_MAX_GAP_NS;
		/* In TSC counts: ratio-scaled guests stay near the host's rate. */
		if (o.guest_clock == HGSYNC_CLOCK_TSC && s->host_info.tsc_khz)
			o.max_gap = HG_MARKPAIR_MAX_GAP_NS * s->host_info.tsc_khz / 1000000;
	}

	print = tep ? tep_find_event_by_name(tep, "ftrace", "print") : NULL;
	buf = print ? tep_find_field(print, "buf") : NULL;
	nr_cpus = tracecmd_cpus(guest);
	if (print && buf && nr_cpus > 0) {
		for (int cpu = 0; cpu < nr_cpus && cpu < HG_MARKPAIR_MAX_CPU && !ret; cpu++) {
			struct tep_record *rec;

			for (rec = tracecmd_read_cpu_first(guest, cpu); rec && !ret;
			     rec = tracecmd_read_data(guest, cpu)) {
				ret = scan_record(tep, print->id, buf, rec, cpu, &mv, st);
				tracecmd_free_record(rec);
				rec = NULL;
			}
			if (rec)
				tracecmd_free_record(rec);
		}
	}
	if (!ret)
		ret = hg_markpair_match(mv.v, mv.n, s->hpairs, s->nr_hpairs, &o, out, nr_out, st);
	free(mv.v);
	return ret;
}
