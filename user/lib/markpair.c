// SPDX-License-Identifier: LGPL-2.1
/*
 * Exit pairing without the guest module, the pure part (user/lib/markpair.h):
 * the marker line's format and parser, and the join of a guest trace's
 * markers with the host's EXIT_HOST records.  No libtracecmd here: the
 * guest binary formats its markers with this file; markpair_trace.c reads
 * trace.dat files.
 *
 * Everything in a marker came from a guest, everything in an exit record
 * from a ring a guest can fill: each value is range-checked before use,
 * each (key, seq) must name exactly one begin, one end and one exit.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "markpair.h"

#define MARKER_KEY_MAX	0xffffu
#define MARKER_TS_MAX	((uint64_t)INT64_MAX)	/* a trace clock never gets there */

int hg_marker_format(char *buf, size_t size, bool is_end, uint32_t key, uint32_t seq)
{
	int n;

	if (key > MARKER_KEY_MAX || !seq)
		return -1;
	n = snprintf(buf, size, HG_MARKPAIR_PREFIX " %s key=%u seq=%u\n",
		     is_end ? "end" : "begin", key, seq);
	return n < 0 || (size_t)n >= size ? -1 : n;
}

/*
 * A decimal number at *@p (no sign, no leading zero but "0" itself) up
 * to @max, advancing *@p past it; false on anything else.
 */
static bool parse_dec(const char **p, const char *end, uint64_t max, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;

	if (s >= end || *s < '0' || *s > '9')
		return false;
	if (*s == '0' && s + 1 < end && s[1] >= '0' && s[1] <= '9')
		return false;
	for (; s < end && *s >= '0' && *s <= '9'; s++) {
		if (v > (max - (uint64_t)(*s - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*p = s;
	*out = v;
	return true;
}

/* Consumes the literal @lit at *@p. */
static bool eat(const char **p, const char *end, const char *lit)
{
	size_t n = strlen(lit);

	if ((size_t)(end - *p) < n || memcmp(*p, lit, n))
		return false;
	*p += n;
	return true;
}

int hg_marker_parse(const char *text, size_t len, uint32_t *key, uint32_t *seq, bool *is_end)
{
	const char *p = text, *end;
	uint64_t k, s;
	bool e;

	if (!text)
		return 0;
	end = text + strnlen(text, len);
	if (end > text && end[-1] == '\n')
		end--;
	if (!eat(&p, end, HG_MARKPAIR_PREFIX " "))
		return 0;
	if (eat(&p, end, "begin "))
		e = false;
	else if (eat(&p, end, "end "))
		e = true;
	else
		return -1;
	if (!eat(&p, end, "key=") || !parse_dec(&p, end, MARKER_KEY_MAX, &k) ||
	    !eat(&p, end, " seq=") || !parse_dec(&p, end, UINT32_MAX, &s) || !s || p != end)
		return -1;
	*key = (uint32_t)k;
	*seq = (uint32_t)s;
	*is_end = e;
	return 1;
}

/* ---- the join ---- */

static int cmp_marker(const void *pa, const void *pb)
{
	const struct hg_marker *a = pa, *b = pb;

	if (a->key != b->key)
		return a->key < b->key ? -1 : 1;
	if (a->seq != b->seq)
		return a->seq < b->seq ? -1 : 1;
	if (a->is_end != b->is_end)
		return a->is_end < b->is_end ? -1 : 1;
	if (a->guest_ts != b->guest_ts)
		return a->guest_ts < b->guest_ts ? -1 : 1;
	return a->guest_cpu < b->guest_cpu ? -1 : a->guest_cpu > b->guest_cpu;
}

static int cmp_exit(const void *pa, const void *pb)
{
	const struct hgclock_rec_exit_host *a = pa, *b = pb;

	if (a->key != b->key)
		return a->key < b->key ? -1 : 1;
	if (a->seq != b->seq)
		return a->seq < b->seq ? -1 : 1;
	return 0;
}

static int cmp_pair(const void *pa, const void *pb)
{
	const struct hg_markpair *a = pa, *b = pb;

	if (a->guest_cpu != b->guest_cpu)
		return a->guest_cpu < b->guest_cpu ? -1 : 1;
	if (a->guest_ts_begin != b->guest_ts_begin)
		return a->guest_ts_begin < b->guest_ts_begin ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* The first exit in sorted @ex with (key, seq) >= (@key, @seq). */
static size_t exit_lower(const struct hgclock_rec_exit_host *ex, size_t n, uint32_t key,
			 uint32_t seq)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ex[mid].key < key || (ex[mid].key == key && ex[mid].seq < seq))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The vcpu_id guest CPU @cpu should have exited on, -1 when the map does not say. */
static int32_t expected_vcpu(const struct hg_markpair_opts *o, int32_t cpu, bool *assumed)
{
	*assumed = !o->cpu_vcpu;
	if (!o->cpu_vcpu)
		return cpu;
	if ((size_t)cpu >= o->nr_cpu_vcpu)
		return -1;
	return o->cpu_vcpu[cpu];
}

int hg_markpair_match(const struct hg_marker *markers, size_t nr_markers,
		      const struct hgclock_rec_exit_host *exits, size_t nr_exits,
		      const struct hg_markpair_opts *opts, struct hg_markpair **out,
		      size_t *nr_out, struct hg_markpair_stats *st)
{
	struct hgclock_rec_exit_host *ex = NULL;
	struct hg_markpair *pairs = NULL;
	struct hg_marker *mk = NULL;
	size_t nr_mk = 0, nr_ex = 0, nr_pairs = 0, i, j;

	*out = NULL;
	*nr_out = 0;
	if (nr_markers) {
		mk = calloc(nr_markers, sizeof(*mk));
		/* At most one pair per two markers. */
		pairs = calloc(nr_markers / 2 + 1, sizeof(*pairs));
	}
	if (nr_exits)
		ex = calloc(nr_exits, sizeof(*ex));
	if ((nr_markers && (!mk || !pairs)) || (nr_exits && !ex)) {
		free(mk);
		free(pairs);
		free(ex);
		return -ENOMEM;
	}
	st->vcpu_assumed = !opts->cpu_vcpu;

	for (i = 0; i < nr_markers; i++) {
		const struct hg_marker *m = &markers[i];

		st->markers++;
		if (m->key > MARKER_KEY_MAX || !m->seq || m->is_end > 1) {
			st->malformed++;
			continue;
		}
		if (m->guest_cpu < 0 || m->guest_cpu >= HG_MARKPAIR_MAX_CPU ||
		    m->guest_ts > MARKER_TS_MAX) {
			st->out_of_range++;
			continue;
		}
		if (opts->key >= 0 && m->key != (uint64_t)opts->key) {
			st->wrong_key++;
			continue;
		}
		mk[nr_mk++] = *m;
	}
	for (i = 0; i < nr_exits; i++) {
		const struct hgclock_rec_exit_host *x = &exits[i];

		if (opts->vm_pid >= 0 && x->vm_pid != opts->vm_pid)
			continue;
		if (x->vm_pid <= 0 || x->vcpu_id < 0 || x->vcpu_id >= HG_MARKPAIR_MAX_CPU ||
		    x->key > MARKER_KEY_MAX || x->hdr.cpu >= HG_MARKPAIR_MAX_CPU) {
			st->bad_exit++;
			continue;
		}
		ex[nr_ex++] = *x;
	}
	if (nr_mk)
		qsort(mk, nr_mk, sizeof(*mk), cmp_marker);
	if (nr_ex)
		qsort(ex, nr_ex, sizeof(*ex), cmp_exit);

	/* One group per (key, seq): its begins first, then its ends. */
	for (i = 0; i < nr_mk; i = j) {
		const struct hg_marker *begin = NULL, *end = NULL;
		size_t nb = 0, ne = 0, x;
		struct hg_markpair *p;
		int32_t want_vcpu;
		bool assumed;

		for (j = i; j < nr_mk && mk[j].key == mk[i].key && mk[j].seq == mk[i].seq; j++) {
			if (mk[j].is_end) {
				ne++;
				end = &mk[j];
			} else {
				nb++;
				begin = &mk[j];
			}
		}
		if (nb > 1 || ne > 1) {
			st->duplicate++;
			continue;
		}
		if (!nb) {
			st->no_begin++;
			continue;
		}
		if (!ne) {
			st->no_end++;
			continue;
		}
		if (begin->guest_cpu != end->guest_cpu) {
			st->cross_cpu++;
			continue;
		}
		if (end->guest_ts < begin->guest_ts) {
			st->reversed++;
			continue;
		}
		if (opts->max_gap && end->guest_ts - begin->guest_ts > opts->max_gap) {
			st->too_wide++;
			continue;
		}
		x = exit_lower(ex, nr_ex, begin->key, begin->seq);
		if (x >= nr_ex || ex[x].key != begin->key || ex[x].seq != begin->seq) {
			st->no_exit++;
			continue;
		}
		if (x + 1 < nr_ex && ex[x + 1].key == begin->key && ex[x + 1].seq == begin->seq) {
			st->ambiguous_exit++;
			continue;
		}
		want_vcpu = expected_vcpu(opts, begin->guest_cpu, &assumed);
		if (want_vcpu < 0 || ex[x].vcpu_id != want_vcpu) {
			st->vcpu_mismatch++;
			continue;
		}
		p = &pairs[nr_pairs++];
		p->guest_cpu = begin->guest_cpu;
		p->guest_clock = opts->guest_clock;
		p->guest_ts_begin = begin->guest_ts;
		p->guest_ts_end = end->guest_ts;
		p->host_tsc = ex[x].hdr.tsc;
		p->host_ns = ex[x].hdr.sched_clock_ns;
		p->host_cpu = (int32_t)ex[x].hdr.cpu;
		p->vm_pid = ex[x].vm_pid;
		p->vcpu_id = ex[x].vcpu_id;
		p->key = begin->key;
		p->seq = begin->seq;
		p->flags = assumed ? HG_MARKPAIR_VCPU_ASSUMED : 0;
	}
	free(mk);
	free(ex);
	if (nr_pairs)
		qsort(pairs, nr_pairs, sizeof(*pairs), cmp_pair);
	st->pairs += nr_pairs;
	if (!nr_pairs) {
		free(pairs);
		pairs = NULL;
	}
	*out = pairs;
	*nr_out = nr_pairs;
	return 0;
}
