// SPDX-License-Identifier: LGPL-2.1
/*
 * Guest-to-host clock mapping (see sync.h and Documentation/sync.rst):
 * the core its other files build on, and the queries.
 *
 * The mapping is split by method (sync_internal.h holds what the files
 * share):
 *
 *   sync.c        growing arrays, method and clock names, the segment
 *                 index (hgs_index_segs(), hgs_find_seg()), the host's
 *                 own conversions (hgsync_host_from_tsc(),
 *                 hgsync_host_to_tsc()), the reasons a value has no
 *                 mapping, and hgsync_to_host*(): which method answers
 *                 ("Choosing a method")
 *   sync_load.c   reading a correlation file into the model
 *   sync_vcpu.c   the host's vCPU threads, their host CPUs, and which
 *                 guest CPU each is ("vCPU identity")
 *   sync_kvm.c    the KVM-exact method and kvm-clock from KVM's own
 *                 parameters
 *   sync_fit.c    building the segments: the fits of probes, exit
 *                 pairings and marker pairings
 *   sync_bound.c  the fitted methods' values and their bounds between
 *                 samples
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bsearch.h"
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
int hgs_index_segs(const struct hgsync *s, struct hgsync_guest *g)
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
	return hgs_index_samples(s, g);
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
 * holds @host_tsc (the sample's own epoch, hgs_index_samples()); without
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

int hgsync_to_host(const struct hgsync *s, uint32_t guest_id, int vcpu, uint32_t clock,
		   uint64_t guest_value, struct hgsync_result *r)
{
	return hgsync_to_host_by(s, guest_id, vcpu, clock, guest_value, 0, r);
}

uint32_t hgsync_guest_root(const struct hgsync *s, uint32_t guest_id)
{
	/* prev_id is always smaller (disruption_add()): this ends. */
	while (guest_id < s->nr_guests && s->guests[guest_id].has_prev)
		guest_id = s->guests[guest_id].prev_id;
	return guest_id;
}

static int to_host_one(const struct hgsync *s, const struct hgsync_guest *g, int vcpu,
		       uint32_t clock, uint64_t guest_value, uint32_t method,
		       struct hgsync_result *r);

/*
 * Through a migration or restore (sync.rst, "Migration and restore"):
 * one machine, several incarnations, each with its own VM, vCPU threads
 * and TSC offsets.  Which one a guest value belongs to is not written
 * on it, so each is tried, the newest first, and a mapping counts only
 * if it lands in that incarnation's span, while its VM ran the guest.
 * A value of an earlier incarnation, read through a later one's
 * offsets, lands before the later VM's first entry (its guest clock
 * resumed at or after the last value before); so the newest that
 * accepts is the right one.
 */
int hgsync_to_host_by(const struct hgsync *s, uint32_t guest_id, int vcpu, uint32_t clock,
		      uint64_t guest_value, uint32_t method, struct hgsync_result *r)
{
	uint32_t id;
	int ret, first_err = -ENOENT;

	memset(r, 0, sizeof(*r));
	r->bound_ns = HGSYNC_NO_BOUND;
	r->host_cpu = -1;
	r->guest_id = guest_id;
	if (guest_id >= s->nr_guests || clock < HGSYNC_CLOCK_TSC || clock > HGSYNC_CLOCK_LOCAL)
		return -EINVAL;
	if (!s->guests[guest_id].has_prev && !s->guests[guest_id].has_next)
		return to_host_one(s, &s->guests[guest_id], vcpu, clock, guest_value, method, r);
	/* The newest: next_id is always larger (disruption_add()), so this ends. */
	for (id = guest_id; s->guests[id].has_next;)
		id = s->guests[id].next_id;
	for (;;) {
		const struct hgsync_guest *g = &s->guests[id];
		struct hgsync_result t;

		ret = to_host_one(s, g, vcpu, clock, guest_value, method, &t);
		t.guest_id = id;
		if (!ret && t.host_tsc && t.host_tsc >= g->span_start_tsc &&
		    t.host_tsc <= g->span_end_tsc) {
			*r = t;
			return 0;
		}
		/* Not there, or not while that VM ran: an earlier one's value. */
		if (ret && ret != -ENOENT && first_err == -ENOENT)
			first_err = ret;
		if (!g->has_prev)
			break;
		id = g->prev_id;
	}
	return first_err;
}

static int to_host_one(const struct hgsync *s, const struct hgsync_guest *g, int vcpu,
		       uint32_t clock, uint64_t guest_value, uint32_t method,
		       struct hgsync_result *r)
{
	int ret;

	memset(r, 0, sizeof(*r));
	r->bound_ns = HGSYNC_NO_BOUND;
	r->host_cpu = -1;
	r->guest_id = g->id;
	if (method == HGCOR_METHOD_KVM_EXACT)
		return hgs_to_host_kvm(s, g, vcpu, clock, guest_value, r);
	if (method == HGCOR_METHOD_PROBE || method == HGCOR_METHOD_EXIT ||
	    method == HGSYNC_METHOD_MARKER)
		return hgs_to_host_probe(s, g, vcpu, clock, guest_value, method, r);
	/*
	 * The best method first: KVM's own numbers; else the fitted line
	 * with the tighter bound here, exit pairings or probes.
	 */
	ret = hgs_to_host_kvm(s, g, vcpu, clock, guest_value, r);
	if (ret) {
		struct hgsync_result rp = *r;
		int ret2 = hgs_to_host_probe(s, g, vcpu, clock, guest_value, HGCOR_METHOD_EXIT, r);
		int ret3 = hgs_to_host_probe(s, g, vcpu, clock, guest_value, HGCOR_METHOD_PROBE,
					     &rp);

		if (!ret3 && (ret2 || rp.bound_ns < r->bound_ns)) {
			*r = rp;
			ret2 = 0;
		} else if (ret2 && ret2 == -ENOENT) {
			ret2 = ret3;
		}
		if (!ret2 || ret == -ENOENT)
			ret = ret2;
	}
	if (ret && g->nr_mpairs) {
		/* Marker pairings: where nothing else maps, or tighter. */
		struct hgsync_result rm;
		int ret4 = hgs_to_host_probe(s, g, vcpu, clock, guest_value, HGSYNC_METHOD_MARKER,
					     &rm);

		if (!ret4 && (ret || rm.bound_ns < r->bound_ns)) {
			*r = rm;
			ret = 0;
		}
	}
	/* Without an agent, what the host's records and markers do not map has no mapping. */
	if (ret == -ENODATA && g->agentless)
		ret = -ENOENT;
	return ret;
}
