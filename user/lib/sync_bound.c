// SPDX-License-Identifier: LGPL-2.1
/*
 * Guest-to-host clock mapping: a guest value by a fitted method (probes,
 * exit pairings, marker pairings: hgs_to_host_probe()) and its bound
 * from the samples on either side of it (Documentation/sync.rst, "The
 * bound" and "Between samples: steps"), over the samples sync_fit.c
 * indexed (hgs_index()).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "bsearch.h"
#include "sync.h"
#include "sync_internal.h"

/* A sample group and a guest value in it, for hg_partition(). */
struct sample_key {
	uint32_t clock;
	int32_t vcpu;
	uint32_t method;
	uint64_t epoch;
	uint64_t x;
};

static bool sample_same_group(const struct hgsync_sample *a, const struct sample_key *k)
{
	return a->clock == k->clock && a->vcpu == k->vcpu && a->method == k->method &&
	       a->epoch == k->epoch;
}

/* Ordered (cmp_sample()) at or before the key. */
static bool sample_at_or_before(const void *elem, const void *key)
{
	const struct hgsync_sample *a = elem;
	const struct sample_key *k = key;

	if (a->clock != k->clock)
		return a->clock < k->clock;
	if (a->vcpu != k->vcpu)
		return a->vcpu < k->vcpu;
	if (a->method != k->method)
		return a->method < k->method;
	if (a->epoch != k->epoch)
		return a->epoch < k->epoch;
	return a->x <= k->x;
}

/*
 * How far the true rate of @g's @clock relation (host units per guest
 * unit) may be from 1 over @d guest units, rounded up: HGSYNC_RATE_TOL_PPM,
 * plus, for TSC counts, how far the host's TSC kHz is from the guest's
 * (scaling: the nominal rate is their ratio; the samples' brackets
 * assume 1).
 */
static s128 rate_slack(const struct hgsync *s, const struct hgsync_guest *g, uint32_t clock,
		       uint64_t d)
{
	u128 slack = ((u128)d * HGSYNC_RATE_TOL_PPM + 999999) / 1000000;
	uint64_t hk = s->host_info.tsc_khz, gk = g->info.tsc_khz;

	if (clock == HGCOR_CLOCK_TSC && hk && gk && hk != gk)
		slack += ((u128)d * (hk > gk ? hk - gk : gk - hk) + gk - 1) / gk;
	return (s128)slack;
}

#define NEAR_SAMPLES	4

/*
 * The largest jump between two neighbouring samples of group @k among
 * the NEAR_SAMPLES on either side of index @at, both of one piece: by how
 * much at least the relation must have moved between them (0 when a line
 * at a rate within rate_slack() of 1 passes through both brackets).  Two
 * samples the break test put in different pieces have one step between
 * them, which the hull of between_bound() covers already.
 */
static s128 local_jumps(const struct hgsync *s, const struct hgsync_guest *g,
			const struct sample_key *k, size_t at)
{
	size_t m = at > NEAR_SAMPLES ? at - NEAR_SAMPLES : 0;
	s128 top = 0;

	for (; m + 1 < g->nr_samples && m + 1 < at + NEAR_SAMPLES; m++) {
		const struct hgsync_sample *c = &g->samples[m], *n = &g->samples[m + 1];
		s128 dx, sl, up, down;

		/* Within one piece: a step the break test found is one, not wander. */
		if (!sample_same_group(c, k) || !sample_same_group(n, k) || c->seg != n->seg)
			continue;
		dx = (s128)(n->x - c->x);
		sl = rate_slack(s, g, k->clock, (uint64_t)dx);
		up = (s128)n->lo - ((s128)c->hi + dx + sl);	/* n above c's reach */
		down = ((s128)c->lo + dx - sl) - (s128)n->hi;	/* n below it */
		if (up > top)
			top = up;
		if (down > top)
			top = down;
	}
	return top;
}

/*
 * The value at guest value @x of segment @seg and its error bound, in
 * the clock's units: *@est comes in as the fit's value and is kept when
 * the samples of @seg's group on either side of @x allow it; the bound
 * comes from those samples, not from the fit (Documentation/sync.rst,
 * "Between samples: steps").  The assumptions:
 *
 * 1. at each sample the host value lay in its bracket [lo, hi] (a probe's
 *    round trip, a pairing's exit: causality only);
 * 2. the relation is linear between steps, at a rate within rate_slack()
 *    of 1: both clocks count the same oscillator (or two whose kHz the
 *    files give), and steps come only where something writes a clock
 *    (KVM a TSC offset or kvm-clock parameters, the guest its clock);
 * 3. between two neighbouring samples there is at most one step, or, if
 *    there are more, the relation strays between them no further beyond
 *    the two samples' reach than the largest jump seen between
 *    neighbouring samples of the piece nearby (local_jumps()).
 *
 * Then at @x the truth is on the relation of the sample before (a) or on
 * that of the one after (b): in [lo_a, hi_a] + d_a +- slack(d_a), or in
 * [lo_b, hi_b] - d_b +- slack(d_b), d the distances to @x.  Which one,
 * and whether there was a step at all, the samples cannot always tell (a
 * step smaller than the brackets is invisible), so the bound reaches the
 * far end of both ranges, widened by the nearby jumps: where a and b
 * agree and nothing jumped nearby, about a bracket plus the drift over
 * the distance; across a step (a gap between two pieces, where the break
 * test found one), the whole step plus both brackets.  A fit's value
 * outside those ranges (a line drawn through a staircase of steps too
 * small to break it) is replaced by the middle of their hull.  A sample
 * exactly at @x bounds it alone.  Before the group's first sample and
 * after its last there is one side only: a step there is unbounded, and
 * so is the value (HGSYNC_NO_BOUND).
 *
 * A fit's own bound (hgsync_fit()) assumes one line through all its
 * samples: it does not hold across a step it could not see, which is
 * why it is not used here.
 */
static uint64_t between_bound(const struct hgsync *s, const struct hgsync_guest *g,
			      const struct hgcor_segment *seg, uint64_t x, uint64_t *est)
{
	const struct sample_key k = { seg->clock, seg->vcpu_id, seg->method,
				      seg->host_tsc_start, x };
	const struct hgsync_sample *a, *b;
	s128 lo = 0, hi = -1, e = (s128)*est, bound, pad;
	const size_t at = hg_partition(g->samples, g->nr_samples, sizeof(*g->samples),
				       sample_at_or_before, &k);
	size_t i = at;

	if (!i || !sample_same_group(&g->samples[i - 1], &k))
		return HGSYNC_NO_BOUND;			/* before the first sample */
	a = &g->samples[i - 1];
	if (a->x == x) {
		/* At samples: the tightest of their own brackets. */
		for (; i > 0 && sample_same_group(&g->samples[i - 1], &k) &&
		       g->samples[i - 1].x == x; i--) {
			const struct hgsync_sample *c = &g->samples[i - 1];

			if (hi < lo || (s128)c->hi - (s128)c->lo < hi - lo) {
				lo = (s128)c->lo;
				hi = (s128)c->hi;
			}
		}
	} else {
		s128 da, db, sa, sb;

		if (i >= g->nr_samples || !sample_same_group(&g->samples[i], &k))
			return HGSYNC_NO_BOUND;		/* after the last sample */
		b = &g->samples[i];
		da = (s128)(x - a->x);
		db = (s128)(b->x - x);
		sa = rate_slack(s, g, seg->clock, (uint64_t)da);
		sb = rate_slack(s, g, seg->clock, (uint64_t)db);
		lo = (s128)a->lo + da - sa;
		hi = (s128)a->hi + da + sa;
		if ((s128)b->lo - db - sb < lo)
			lo = (s128)b->lo - db - sb;
		if ((s128)b->hi - db + sb > hi)
			hi = (s128)b->hi - db + sb;
		pad = local_jumps(s, g, &k, at);
		lo -= pad;
		hi += pad;
	}
	if (e < lo || e > hi) {
		e = lo + (hi - lo) / 2;
		*est = (uint64_t)e;
	}
	/* One more for the fit's floor (hgsync_probe_apply()). */
	bound = (e - lo > hi - e ? e - lo : hi - e) + 1;
	if (bound < 0 || bound >= (s128)HGSYNC_NO_BOUND)
		return HGSYNC_NO_BOUND;
	return (uint64_t)bound;
}

/* A PROBE or EXIT segment (@method): both are fitted lines. */
int hgs_to_host_probe(const struct hgsync *s, const struct hgsync_guest *g, int vcpu,
		      uint32_t clock, uint64_t guest_value, uint32_t method,
		      struct hgsync_result *r)
{
	const struct hgcor_segment *seg;
	uint64_t local_off_guest = 0, local_off_host = 0;

	/* Marker pairings are on the guest trace's own clock: no conversion around them. */
	if (method == HGSYNC_METHOD_MARKER && clock != g->marker_clock)
		return -ENOENT;
	if (clock == HGSYNC_CLOCK_LOCAL && method != HGSYNC_METHOD_MARKER) {
		/* local_clock = sched_clock + a constant, on both sides. */
		const struct hgclock_rec_cyc2ns *gc = NULL, *hc = NULL;

		if (vcpu >= 0 && (unsigned int)vcpu < g->nr_cpus)
			gc = hgs_conv_at(&g->convs[vcpu], guest_value, true);
		for (unsigned int c = 0; !hc && c < s->nr_host_cpus; c++)
			hc = hgs_conv_at(&s->host_convs[c], 0, false);
		if (!gc || !hc || !(gc->conv.flags & hc->conv.flags & HGCLOCK_CONV_LOCAL_OFFSET))
			return -ENODATA;
		local_off_guest = gc->conv.local_offset_ns;
		local_off_host = hc->conv.local_offset_ns;
		guest_value -= local_off_guest;
		clock = HGSYNC_CLOCK_SCHED;
	}
	seg = hgs_find_seg(g, method, clock, vcpu, guest_value);
	if (!seg)
		return -ENOENT;
	r->method = method;
	r->seg = seg;
	{
		uint64_t est = hgsync_probe_apply(seg, guest_value);
		uint64_t b = between_bound(s, g, seg, guest_value, &est);
		uint32_t khz = s->host_info.tsc_khz;

		r->host_value = est + local_off_host;
		/* A bound in TSC counts is turned into ns, rounded up. */
		if (b != HGSYNC_NO_BOUND && clock == HGSYNC_CLOCK_TSC && khz)
			b = b > (UINT64_MAX - khz) / 1000000 ? HGSYNC_NO_BOUND :
			    (b * 1000000 + khz - 1) / khz;
		r->bound_ns = b;
	}
	r->host_cpu = -1;
	if (clock == HGSYNC_CLOCK_TSC)
		r->host_tsc = r->host_value;
	else if (hgsync_host_to_tsc(s, -1, method == HGSYNC_METHOD_MARKER ? clock :
				    HGSYNC_CLOCK_SCHED, r->host_value - local_off_host,
				    &r->host_tsc))
		r->host_tsc = 0;
	return 0;
}
