// SPDX-License-Identifier: LGPL-2.1
/*
 * The guest-to-host mapping's core (sync_internal.h): what every method
 * builds on.  Growing arrays, method and clock names, the segment index
 * (hgs_index_segs(), hgs_find_seg()), the host's own conversions
 * (hgsync_host_from_tsc(), hgsync_host_to_tsc(), hgsync_conv_invert())
 * and the reasons a value has no mapping.  The leaf of the mapping's
 * layers (sync.c lists them): it calls no other file of the mapping.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bsearch.h"
#include "corr_check.h"
#include "libhgclock.h"
#include "sync.h"
#include "sync_internal.h"

/* ---- growing arrays ---- */

int hgs_grow(void **v, size_t *cap, size_t n, size_t size)
{
	void *p;
	size_t ncap;

	if (n < *cap)
		return 0;
	if (*cap > SIZE_MAX / 2 / size)
		return -ENOMEM;
	ncap = *cap ? *cap * 2 : 16;
	p = realloc(*v, ncap * size);
	if (!p)
		return -ENOMEM;
	*v = p;
	*cap = ncap;
	return 0;
}

/* ---- names ---- */

const char *hgsync_method_name(uint32_t method)
{
	switch (method) {
	case HGCOR_METHOD_KVM_EXACT:
		return "kvm-exact";
	case HGCOR_METHOD_PROBE:
		return "probe";
	case HGCOR_METHOD_EXIT:
		return "exit";
	case HGSYNC_METHOD_MARKER:
		return "marker";
	default:
		return "none";
	}
}

const char *hgsync_disruption_name(uint32_t kind)
{
	static const char *const names[] = {
		[HGCOR_DISRUPT_RECONNECT] = "reconnect", [HGCOR_DISRUPT_MIGRATION] = "migration",
		[HGCOR_DISRUPT_RESTORE] = "restore", [HGCOR_DISRUPT_NEW_VM] = "new-vm",
		[HGCOR_DISRUPT_GONE] = "gone", [HGCOR_DISRUPT_REBOOT] = "reboot",
	};

	return kind && kind <= HGCOR_DISRUPT_KIND_MAX ? names[kind] : "unknown";
}

int hgsync_method_parse(const char *name)
{
	if (!strcmp(name, "auto"))
		return 0;
	if (!strcmp(name, "kvm-exact") || !strcmp(name, "kvm"))
		return HGCOR_METHOD_KVM_EXACT;
	if (!strcmp(name, "probe"))
		return HGCOR_METHOD_PROBE;
	if (!strcmp(name, "exit"))
		return HGCOR_METHOD_EXIT;
	if (!strcmp(name, "marker"))
		return HGSYNC_METHOD_MARKER;
	return -1;
}

const char *hgsync_clock_name(uint32_t clock)
{
	switch (clock) {
	case HGSYNC_CLOCK_TSC:
		return "x86-tsc";
	case HGSYNC_CLOCK_SCHED:
		return "local";
	case HGSYNC_CLOCK_LOCAL:
		return "perf";
	default:
		return "?";
	}
}

/* ---- the segment index ---- */

static int cmp_seg(const void *a, const void *b)
{
	const struct hgcor_segment *x = a, *y = b;

	if (x->clock != y->clock)
		return x->clock < y->clock ? -1 : 1;
	if (x->vcpu_id != y->vcpu_id)
		return x->vcpu_id < y->vcpu_id ? -1 : 1;
	if (x->method != y->method)
		return x->method < y->method ? -1 : 1;
	return x->guest_start < y->guest_start ? -1 : x->guest_start > y->guest_start;
}

/*
 * Sorts @g's segments (by clock, vCPU, method, then guest start) and
 * indexes them for hgs_find_seg(): seg_maxend[i] is the largest guest_end of
 * the segments of i's group up to i, so that a lookup walks back from
 * the last segment starting at or before a value only while an earlier
 * one can still cover it.  Segments change only through guest_build()
 * and hgsync_load(), which both end here.  Then the samples, by segment.
 */
int hgs_index_segs(struct hgsync_guest *g)
{
	uint64_t *maxend;

	if (g->nr_segs)	/* qsort()'s base must not be NULL, even for 0 elements */
		qsort(g->segs, g->nr_segs, sizeof(*g->segs), cmp_seg);
	maxend = realloc(g->seg_maxend, (g->nr_segs ? g->nr_segs : 1) * sizeof(*maxend));
	if (!maxend)
		return -ENOMEM;
	g->seg_maxend = maxend;
	for (size_t i = 0; i < g->nr_segs; i++) {
		const struct hgcor_segment *a = &g->segs[i], *p = i ? &g->segs[i - 1] : NULL;
		bool same = p && p->clock == a->clock && p->vcpu_id == a->vcpu_id &&
			    p->method == a->method;

		maxend[i] = same && maxend[i - 1] > a->guest_end ? maxend[i - 1] : a->guest_end;
	}
	g->indexed = 1;
	return 0;
}

int hgsync_guest_known(const struct hgsync *s, uint32_t guest_id)
{
	return guest_id < s->nr_guests &&
	       (s->guests[guest_id].present || s->guests[guest_id].agentless);
}

const char *hgsync_no_map_reason(const struct hgsync *s, uint32_t guest_id, uint32_t clock,
				 char *buf, size_t len)
{
	const struct hgsync_guest *g;
	const char *name = hgsync_clock_name(clock);

	if (!len)
		return buf;
	buf[0] = 0;
	if (!hgsync_guest_known(s, guest_id)) {
		snprintf(buf, len, "the correlation file has no guest %u", guest_id);
		return buf;
	}
	g = &s->guests[guest_id];
	if (!g->agentless)
		return buf;
	if (clock == HGSYNC_CLOCK_TSC) {
		snprintf(buf, len, "guest %u (no agent, VM %d): no tracked vCPU of that VM "
			 "covers the value", guest_id, g->vm.vm_pid);
		return buf;
	}
	if (!g->nr_mpairs)
		snprintf(buf, len, "guest %u was recorded without an agent (VM %d): its '%s' "
			 "clock maps only through marker pairings ('hgclock pairmark' in the "
			 "guest while it traces), and there are none", guest_id, g->vm.vm_pid,
			 name);
	else if (g->marker_clock != clock)
		snprintf(buf, len, "guest %u was recorded without an agent (VM %d): its "
			 "marker pairings are on the '%s' clock, not '%s'", guest_id,
			 g->vm.vm_pid, hgsync_clock_name(g->marker_clock), name);
	else
		snprintf(buf, len, "guest %u was recorded without an agent (VM %d): no marker "
			 "pairing of that guest CPU around the value", guest_id, g->vm.vm_pid);
	return buf;
}

/* ---- converting ---- */

/*
 * The segment of @vcpu covering @guest_value.  KVM offsets that move
 * back repeat guest TSC values: then the latest segment wins.
 */
struct seg_key {
	uint32_t clock, method;
	int vcpu;
	uint64_t guest_value;
};

/* Ordered (cmp_seg()) at or before (clock, vcpu, method, a start at the value). */
static bool seg_at_or_before(const void *elem, const void *key)
{
	const struct hgcor_segment *m = elem;
	const struct seg_key *k = key;

	if (m->clock != k->clock)
		return m->clock < k->clock;
	if (m->vcpu_id != k->vcpu)
		return m->vcpu_id < k->vcpu;
	if (m->method != k->method)
		return m->method < k->method;
	return m->guest_start <= k->guest_value;
}

/*
 * Of the segments covering @guest_value, the one whose host TSC span
 * holds @host_tsc (the sample's own epoch, sync_fit.c's index_samples()); without
 * one (UINT64_MAX: no preference), the latest as hgs_find_seg().
 */
const struct hgcor_segment *hgs_find_seg_at(const struct hgsync_guest *g, uint32_t method,
					    uint32_t clock, int vcpu, uint64_t guest_value,
					    uint64_t host_tsc)
{
	const struct seg_key key = { clock, method, vcpu, guest_value };
	const struct hgcor_segment *best = NULL, *held = NULL;
	size_t lo = g->nr_segs;

	/* While guest_build() adds segments: a plain scan. */
	if (g->indexed)
		/* The last segment ordered at or before (clock, vcpu, method, value). */
		lo = hg_partition(g->segs, g->nr_segs, sizeof(*g->segs), seg_at_or_before, &key);
	/* Back through the group while an earlier segment can reach the value. */
	for (size_t i = lo; i-- > 0;) {
		const struct hgcor_segment *seg = &g->segs[i];

		if (seg->method != method || seg->clock != clock || seg->vcpu_id != vcpu) {
			if (g->indexed)
				break;
			continue;
		}
		if (g->indexed && g->seg_maxend[i] <= guest_value)
			break;
		if (guest_value < seg->guest_start || guest_value >= seg->guest_end)
			continue;
		if (!best || seg->host_tsc_start > best->host_tsc_start)
			best = seg;
		if (host_tsc >= seg->host_tsc_start && host_tsc < seg->host_tsc_end &&
		    (!held || seg->host_tsc_start > held->host_tsc_start))
			held = seg;
	}
	return held ? held : best;
}

const struct hgcor_segment *hgs_find_seg(const struct hgsync_guest *g, uint32_t method,
					 uint32_t clock, int vcpu, uint64_t guest_value)
{
	return hgs_find_seg_at(g, method, clock, vcpu, guest_value, UINT64_MAX);
}

static bool cyc2ns_tsc_at_or_before(const void *elem, const void *key)
{
	return ((const struct hgclock_rec_cyc2ns *)elem)->hdr.tsc <= *(const uint64_t *)key;
}

static bool cyc2ns_ns_at_or_before(const void *elem, const void *key)
{
	return ((const struct hgclock_rec_cyc2ns *)elem)->hdr.sched_clock_ns <=
	       *(const uint64_t *)key;
}

/* The last conversion taken at or before @key (TSC or ns), else the first. */
const struct hgclock_rec_cyc2ns *hgs_conv_at(const struct hgsync_convs *cv, uint64_t key,
					     bool by_ns)
{
	size_t k;

	if (!cv || !cv->n)
		return NULL;
	k = hg_partition(cv->v, cv->n, sizeof(*cv->v),
			 by_ns ? cyc2ns_ns_at_or_before : cyc2ns_tsc_at_or_before, &key);
	return &cv->v[k ? k - 1 : 0];
}

/* The conversion of @host_cpu (else any CPU's) in force at @key. */
static const struct hgclock_rec_cyc2ns *host_conv_at(const struct hgsync *s, int host_cpu,
						     uint64_t key, bool by_ns)
{
	const struct hgclock_rec_cyc2ns *c = NULL;

	if (host_cpu >= 0 && (unsigned int)host_cpu < s->nr_host_cpus)
		c = hgs_conv_at(&s->host_convs[host_cpu], key, by_ns);
	for (unsigned int i = 0; (!c || !(c->conv.flags & HGCLOCK_CONV_VALID)) &&
				 i < s->nr_host_cpus; i++)
		c = hgs_conv_at(&s->host_convs[i], key, by_ns);
	return c && (c->conv.flags & HGCLOCK_CONV_VALID) ? c : NULL;
}

int hgsync_host_from_tsc(const struct hgsync *s, int host_cpu, uint32_t clock, uint64_t host_tsc,
			 uint64_t *value)
{
	const struct hgclock_rec_cyc2ns *c;

	if (clock == HGSYNC_CLOCK_TSC) {
		*value = host_tsc;
		return 0;
	}
	c = host_conv_at(s, host_cpu, host_tsc, false);
	if (!c || (clock == HGSYNC_CLOCK_LOCAL && !(c->conv.flags & HGCLOCK_CONV_LOCAL_OFFSET)))
		return -ENODATA;
	*value = hgclock_conv_apply(&c->conv, host_tsc) +
		 (clock == HGSYNC_CLOCK_LOCAL ? c->conv.local_offset_ns : 0);
	return 0;
}

int hgsync_host_to_tsc(const struct hgsync *s, int host_cpu, uint32_t clock, uint64_t value,
		       uint64_t *host_tsc)
{
	const struct hgclock_rec_cyc2ns *c;

	if (clock == HGSYNC_CLOCK_TSC) {
		*host_tsc = value;
		return 0;
	}
	c = host_conv_at(s, host_cpu, value, true);
	if (!c)
		return -ENODATA;
	if (clock == HGSYNC_CLOCK_LOCAL) {
		if (!(c->conv.flags & HGCLOCK_CONV_LOCAL_OFFSET))
			return -ENODATA;
		value -= c->conv.local_offset_ns;
	}
	*host_tsc = hgsync_conv_invert(&c->conv, value);
	return 0;
}

/* Does the conversion of @tsc reach @ns? */
#define REACHES(conv, tsc, ns) ((int64_t)(hgclock_conv_apply(conv, tsc) - (ns)) >= 0)

uint64_t hgsync_conv_invert(const struct hgclock_conversion *conv, uint64_t ns)
{
	/* offset_ns is modulo 2^64 (often "negative"): so is the difference. */
	s128 y = (int64_t)(ns - conv->offset_ns);
	s128 d, t0;
	uint64_t lo, hi, w;

	/*
	 * corr_check.c refuses other shifts when a file is read; with these
	 * limits no product below overflows 128 bits.
	 */
	if (!conv->mult || conv->shift > HGCOR_MAX_CONV_SHIFT ||
	    conv->pre_shift < HGCOR_MIN_PRE_SHIFT || conv->pre_shift > HGCOR_MAX_PRE_SHIFT)
		return conv->tsc_base;
	/* The pre-shifted delta, then the TSC delta: close, not exact. */
	d = (y * ((s128)1 << conv->shift)) / conv->mult;
	if (conv->pre_shift > 0)
		d >>= conv->pre_shift;
	else if (conv->pre_shift < 0)
		d *= (s128)1 << -conv->pre_shift;
	t0 = (s128)conv->tsc_base + d;
	/*
	 * The formula truncates, so many TSC values give one ns: search a
	 * small window around the estimate for the first one that reaches
	 * @ns (the formula is monotonic there).
	 */
	w = 4096ull << (conv->pre_shift < 0 ? -conv->pre_shift : 0);
	if (y <= 0)
		return y ? (uint64_t)t0 : conv->tsc_base;	/* before the base: no formula */
	hi = (uint64_t)t0 + w;
	/* Not below the base: the delta would wrap (apply(tsc_base) < ns here). */
	lo = d < (s128)w ? conv->tsc_base : (uint64_t)t0 - w;
	/*
	 * The formula is modular (offset_ns is often "negative"): compare
	 * by signed difference, which holds within the window.
	 */
	if (REACHES(conv, lo, ns) || !REACHES(conv, hi, ns))
		return (uint64_t)t0;	/* outside the formula's range */
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (REACHES(conv, mid, ns))
			hi = mid;
		else
			lo = mid;
	}
	return hi;
}
