// SPDX-License-Identifier: LGPL-2.1
/*
 * Guest-to-host clock mapping: building the segments (hgsync_build(),
 * hgsync_add_markpairs()).  KVM's segments checked against the probes
 * and pairings (Documentation/sync.rst, "Which VM is the guest's"), then
 * the fitted methods' lines: probes ("Probing", "Epochs: known changes of
 * the offset", "Pieces: breaks in the offset", "The fit"), exit pairings
 * ("Exit pairing") and marker pairings ("local and perf: marker
 * pairing"), each pairing as a bracket.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "corr_check.h"
#include "markpair.h"
#include "sync.h"
#include "sync_internal.h"

uint64_t hgsync_probe_apply(const struct hgcor_segment *seg, uint64_t guest_value)
{
	int64_t d = (int64_t)(guest_value - seg->ref_guest);

	return seg->ref_host + (uint64_t)d + (uint64_t)(int64_t)(((s128)d * seg->rate_q48) >> 48);
}

static int cmp_obs_x(const void *a, const void *b)
{
	const struct hgsync_obs *x = a, *y = b;

	return x->x < y->x ? -1 : x->x > y->x;
}

#define FIT_BUCKETS 32

/* The distance from @y to the far end of @o's bracket. */
static uint64_t far_end(uint64_t y, const struct hgsync_obs *o)
{
	uint64_t e1 = y > o->lo ? y - o->lo : o->lo - y;
	uint64_t e2 = y > o->hi ? y - o->hi : o->hi - y;

	return e1 > e2 ? e1 : e2;
}

int hgsync_fit(struct hgsync_obs *obs, size_t n, struct hgcor_segment *seg)
{
	size_t kept[FIT_BUCKETS], nk = 0, b, i, per;
	long double sx = 0, sy = 0, sxx = 0, sxy = 0, a, slope, den;
	uint64_t ref_guest, ref_host0, bound = 0;

	if (n < 2)
		return -EINVAL;
	qsort(obs, n, sizeof(*obs), cmp_obs_x);
	/*
	 * The tightest round trip of each stretch of the span: queueing only
	 * ever widens a bracket, so the narrowest ones carry the information,
	 * and taking one per stretch keeps the whole span for the rate.
	 */
	per = (n + FIT_BUCKETS - 1) / FIT_BUCKETS;
	for (b = 0; b * per < n; b++) {
		size_t best = b * per;

		for (i = b * per; i < n && i < (b + 1) * per; i++)
			if (obs[i].hi - obs[i].lo < obs[best].hi - obs[best].lo)
				best = i;
		kept[nk++] = best;
	}
	/*
	 * Of those, the ones within twice the tightest round trip: a wide
	 * bracket says the exchange was delayed, and delays are one-sided.
	 */
	{
		uint64_t wmin = UINT64_MAX;
		size_t m = 0;

		for (i = 0; i < nk; i++)
			if (obs[kept[i]].hi - obs[kept[i]].lo < wmin)
				wmin = obs[kept[i]].hi - obs[kept[i]].lo;
		for (i = 0; i < nk; i++)
			if (obs[kept[i]].hi - obs[kept[i]].lo <= 2 * wmin + 1000 || nk - i + m <= 2)
				kept[m++] = kept[i];
		nk = m;
	}
	ref_guest = obs[kept[nk / 2]].x;
	ref_host0 = obs[kept[nk / 2]].lo;
	for (i = 0; i < nk; i++) {
		const struct hgsync_obs *o = &obs[kept[i]];
		long double x = (long double)(int64_t)(o->x - ref_guest);
		long double y = (long double)(int64_t)(o->lo - ref_host0) +
				(long double)(o->hi - o->lo) / 2;

		sx += x;
		sy += y;
		sxx += x * x;
		sxy += x * y;
	}
	den = nk * sxx - sx * sx;
	if (nk < 2 || den == 0) {
		slope = 1;
		a = sy / nk;
	} else {
		slope = (nk * sxy - sx * sy) / den;
		a = (sy - slope * sx) / nk;
	}
	/*
	 * A rate the brackets cannot tell from one (the widest kept bracket
	 * over the span), or more than 0.1% off it (not a clock), is taken
	 * as one: then only the offset is fitted.
	 */
	{
		long double span = (long double)(obs[kept[nk - 1]].x - obs[kept[0]].x);
		uint64_t wmax = 0;

		for (i = 0; i < nk; i++)
			if (obs[kept[i]].hi - obs[kept[i]].lo > wmax)
				wmax = obs[kept[i]].hi - obs[kept[i]].lo;
		if (!(fabsl(slope - 1) < 1e-3) || span <= 0 ||
		    fabsl(slope - 1) * span < (long double)wmax) {
			slope = 1;
			a = (sy - sx) / nk;
		}
	}
	seg->method = HGCOR_METHOD_PROBE;
	seg->ref_guest = ref_guest;
	seg->ref_host = ref_host0 + (uint64_t)(int64_t)llroundl(a);
	seg->rate_q48 = (int64_t)llroundl((slope - 1) * 281474976710656.0L);
	seg->nr_samples = (uint32_t)nk;
	/*
	 * At a kept probe the true host value lies in [lo, hi]: the error
	 * there is at most the distance from the fit to the far end.  Both
	 * the fit and the true mapping are linear, so between probes the
	 * error stays below the larger of its neighbours' bounds.
	 */
	for (i = 0; i < nk; i++) {
		uint64_t e = far_end(hgsync_probe_apply(seg, obs[kept[i]].x), &obs[kept[i]]);

		if (e > bound)
			bound = e;
	}
	/*
	 * That holds while the true mapping is a line.  Where it is not (a
	 * guest clock that steps: kvm-clock while KVM moves the offsets),
	 * some brackets miss the fit altogether.  The truth at each of those
	 * is still inside its bracket, so the bound reaches the far end of
	 * every bracket the line misses too.
	 */
	for (i = 0; i < n; i++) {
		uint64_t y = hgsync_probe_apply(seg, obs[i].x);

		if ((y < obs[i].lo || y > obs[i].hi) && far_end(y, &obs[i]) > bound)
			bound = far_end(y, &obs[i]);
	}
	seg->bound_ns = bound + 1;

	/*
	 * Tighter, from every observation: with the rate fixed, each one
	 * says the true intercept lies in [lo - f(x), hi - f(x)], f the fit
	 * without its intercept.  All of them hold at once, so the intercept
	 * lies in their intersection: from below by the probe whose request
	 * went fastest, from above by the one whose reply did, whichever
	 * probes those were.  Its middle is the estimate, half its width the
	 * bound.  An empty intersection means the line does not fit every
	 * bracket (a rate off, a clock stepped): the estimate above stands.
	 */
	{
		int64_t low = INT64_MIN, high = INT64_MAX;

		for (i = 0; i < n; i++) {
			uint64_t y = hgsync_probe_apply(seg, obs[i].x);
			int64_t l = (int64_t)(obs[i].lo - y), h = (int64_t)(obs[i].hi - y);

			if (l > low)
				low = l;
			if (h < high)
				high = h;
		}
		if (low <= high) {
			/* The width in unsigned arithmetic: it can pass INT64_MAX. */
			uint64_t width = (uint64_t)high - (uint64_t)low;

			seg->ref_host += (uint64_t)low + width / 2;
			seg->bound_ns = width / 2 + 2;
			seg->nr_samples = (uint32_t)n;
		}
	}
	return 0;
}

/*
 * A pairing as brackets for the fit.  The host read its clock between the
 * guest's two readings b and a: the true host value at b lies in
 * [H - rate * (a - b), H], rate being host units per guest unit (at most
 * 0.1% off the nominal, which the fit assumes as well).
 */
struct hgsync_obs hgs_xpair_obs(const struct hgsync *s, const struct hgsync_guest *g,
				const struct hgsync_xpair *x, uint32_t clock)
{
	uint64_t w;

	if (clock == HGCOR_CLOCK_TSC) {
		uint64_t host_khz = s->host_info.tsc_khz, guest_khz = g->info.tsc_khz;

		w = x->guest_tsc_after - x->guest_tsc_before;
		if (host_khz && guest_khz)
			w = (uint64_t)((u128)w * host_khz / guest_khz);
		w += w / 1000 + 1;
		return (struct hgsync_obs){ x->guest_tsc_before,
					    x->host_tsc > w ? x->host_tsc - w : 0, x->host_tsc };
	}
	w = x->guest_ns_after - x->guest_ns_before;
	w += w / 1000 + 1;
	return (struct hgsync_obs){ x->guest_ns_before, x->host_ns > w ? x->host_ns - w : 0,
				    x->host_ns };
}

/*
 * A marker pairing as a bracket, as hgs_xpair_obs() does an exit pairing's:
 * the exit lay between the guest's markers b and e (in its trace clock),
 * so the host value at b lies in [H - rate * (e - b), H].  In TSC counts
 * without the guest's TSC kHz (no agent) the rates are taken as equal:
 * KVM's scaling is then the kvm-exact method's business.
 */
struct hgsync_obs hgs_mpair_obs(const struct hgsync *s, const struct hgsync_guest *g,
				const struct hgsync_mpair *m)
{
	uint64_t w = m->guest_end - m->guest_begin;

	if (g->marker_clock == HGCOR_CLOCK_TSC && s->host_info.tsc_khz && g->info.tsc_khz)
		w = (uint64_t)((u128)w * s->host_info.tsc_khz / g->info.tsc_khz);
	w += w / 1000 + 1;
	return (struct hgsync_obs){ m->guest_begin, m->host_value > w ? m->host_value - w : 0,
				    m->host_value };
}

/*
 * Offsets (host - guest) of consecutive probes differing by more than
 * both brackets and 100 ppm of the distance cannot be one linear
 * mapping: the guest's clock was set, or KVM moved its TSC.
 */
static bool is_break(const struct hgsync_obs *a, const struct hgsync_obs *b)
{
	int64_t off_a = (int64_t)(a->lo + (a->hi - a->lo) / 2 - a->x);
	int64_t off_b = (int64_t)(b->lo + (b->hi - b->lo) / 2 - b->x);
	/* In unsigned arithmetic: the difference of two offsets can pass INT64_MAX. */
	uint64_t diff = off_a > off_b ? (uint64_t)off_a - (uint64_t)off_b :
					(uint64_t)off_b - (uint64_t)off_a;
	u128 slack = (u128)(a->hi - a->lo) + (b->hi - b->lo) + (b->x - a->x) / 10000 + 2000;

	return diff > slack;
}

/*
 * Probe (or exit pairing: @method) segments for one clock of one vCPU from @obs, all taken in the
 * host TSC span [host_start, host_end) (an epoch: between two changes of
 * the vCPU's TSC offset, when they are known).  The first piece of the
 * first epoch reaches back to 0, the last piece of every epoch forward to
 * UINT64_MAX: where spans overlap, the latest epoch wins (hgs_find_seg()).
 */
static int probe_segments(struct hgsync_guest *g, uint32_t method, uint32_t clock, int vcpu,
			  struct hgsync_obs *obs, size_t n, uint32_t tsc_khz,
			  uint64_t host_start, uint64_t host_end, bool first_epoch)
{
	size_t start = 0, i;

	if (n < 2)
		return 0;
	qsort(obs, n, sizeof(*obs), cmp_obs_x);
	for (i = 1; i <= n; i++) {
		struct hgcor_segment seg = {
			.guest_id = g->id, .vcpu_id = vcpu, .clock = clock,
			.host_tsc_start = host_start, .host_tsc_end = host_end,
		};

		if (i < n && !is_break(&obs[i - 1], &obs[i]))
			continue;
		/* obs[start, i) is one piece. */
		seg.guest_start = start || !first_epoch ? obs[start].x : 0;
		seg.guest_end = i < n ? obs[i].x : UINT64_MAX;
		/*
		 * A lone sample between two breaks (a step on either side of
		 * it: several steps in a row) still maps its neighbourhood:
		 * the nominal rate through its bracket's middle.  Its values
		 * get the bound of the samples around them as any piece's do.
		 */
		if (i - start == 1) {
			const struct hgsync_obs *o = &obs[start];

			seg.method = HGCOR_METHOD_PROBE;
			seg.ref_guest = o->x;
			seg.ref_host = o->lo + (o->hi - o->lo) / 2;
			seg.rate_q48 = 0;
			seg.bound_ns = (o->hi - o->lo) / 2 + 2;
			seg.nr_samples = 1;
		}
		if (i - start == 1 || !hgsync_fit(obs + start, i - start, &seg)) {
			seg.method = method;
			/* A bound in TSC counts is turned into ns. */
			if (clock == HGCOR_CLOCK_TSC && tsc_khz)
				seg.bound_ns = (uint64_t)((u128)seg.bound_ns * 1000000 / tsc_khz) + 1;
			if (PUSH(g->segs, g->nr_segs, g->cap_segs, seg))
				return -ENOMEM;
		}
		start = i;
	}
	return 0;
}

/* Host TSCs of the changes of @vcpu's TSC offset (sorted), or none. */
static size_t offset_changes(const struct hgsync *s, const struct hgsync_guest *g, int vcpu,
			     const struct hgsync_offset **first)
{
	const struct hgsync_vcpu *v = g->vm.vm_pid > 0 ? hgs_guest_vcpu(s, g, vcpu) : NULL;

	*first = v ? v->off : NULL;
	return v ? v->nr_off : 0;
}

/*
 * One clock of one vCPU, fitted per epoch: a change of the vCPU's TSC
 * offset moves its TSC, and may step its kvm-clock (a guest TSC write:
 * KVM rewrites the vCPU's kvm-clock page only later), so no line is
 * fitted across one.  For sched_clock only when changes are rare next to
 * the probes: KVM re-basing an unstable host's TSC changes offsets at
 * every vCPU load, and keeps kvm-clock continuous across them.
 */
struct probe_at {
	uint64_t host_tsc;		/* of the send, or of the host's reading */
	struct hgsync_obs o;		/* the sample on the clock being fitted */
};

static int cmp_probe_at(const void *a, const void *b)
{
	const struct probe_at *x = a, *y = b;

	return x->host_tsc < y->host_tsc ? -1 : x->host_tsc > y->host_tsc;
}

/*
 * @idx/@nidx: the indices of the vCPU's samples (probes, or pairings for
 * EXIT), from by_cpu().
 */
static int probe_epochs(const struct hgsync *s, struct hgsync_guest *g, uint32_t method,
			uint32_t clock, unsigned int cpu, const uint32_t *idx, size_t nidx,
			struct hgsync_obs *obs)
{
	const struct hgsync_offset *off;
	size_t nc = offset_changes(s, g, (int)cpu, &off), np = 0, e, j = 0, n;
	uint32_t khz = clock == HGCOR_CLOCK_TSC ? s->host_info.tsc_khz : 0;
	uint64_t lo = 0, hi;
	struct probe_at *at;
	int ret = 0;

	/* This vCPU's samples in host time: each epoch is then one stretch. */
	at = malloc((nidx ? nidx : 1) * sizeof(*at));
	if (!at)
		return -ENOMEM;
	for (size_t k = 0; k < nidx; k++) {
		if (method == HGCOR_METHOD_EXIT) {
			const struct hgsync_xpair *x = &g->xpairs[idx[k]];

			at[np++] = (struct probe_at){ x->host_tsc, hgs_xpair_obs(s, g, x, clock) };
		} else if (method == HGSYNC_METHOD_MARKER) {
			const struct hgsync_mpair *m = &g->mpairs[idx[k]];

			at[np++] = (struct probe_at){ m->host_tsc, hgs_mpair_obs(s, g, m) };
		} else {
			const struct hgcor_probe *p = &g->probes[idx[k]];

			at[np++] = clock == HGCOR_CLOCK_TSC ?
				(struct probe_at){ p->host_tsc_send,
					{ p->guest_tsc, p->host_tsc_send, p->host_tsc_recv } } :
				(struct probe_at){ p->host_tsc_send,
					{ p->guest_sched_ns, p->host_ns_send, p->host_ns_recv } };
		}
	}
	if (np)
		qsort(at, np, sizeof(*at), cmp_probe_at);
	/* Epoch boundaries: the changes (entries from TSC_OFFSET records). */
	if (clock != HGCOR_CLOCK_TSC && nc * 4 > np)
		nc = 0;
	for (e = 0; e <= nc && !ret; e++) {
		/* Entries that are not changes (discovery) are no boundary. */
		if (e < nc && !off[e].is_change)
			continue;
		hi = e < nc ? off[e].host_tsc : UINT64_MAX;
		for (n = 0; j < np && (at[j].host_tsc < hi || e == nc); j++)
			obs[n++] = at[j].o;
		ret = probe_segments(g, method, clock, (int)cpu, obs, n, khz, lo, hi, lo == 0);
		lo = hi;
	}
	free(at);
	return ret;
}

/*
 * The indices of @n samples grouped by CPU, in their order within a CPU
 * (a counting sort: CPU numbers are below HGCOR_MAX_CPUS, corr_check.c):
 * CPU c's are idx[start[c] .. start[c + 1]).  @cpu_of gives sample i's
 * CPU.  0 or -ENOMEM; the caller frees *@idx and *@start.
 */
static int by_cpu(size_t n, uint32_t (*cpu_of)(const struct hgsync_guest *g, size_t i),
		  const struct hgsync_guest *g, uint32_t **idx, size_t **start)
{
	size_t *st = calloc(HGCOR_MAX_CPUS + 1, sizeof(*st));
	uint32_t *ix = malloc((n ? n : 1) * sizeof(*ix));

	*idx = ix;
	*start = st;
	if (!st || !ix || n > UINT32_MAX)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		st[cpu_of(g, i) + 1]++;
	for (size_t c = 0; c < HGCOR_MAX_CPUS; c++)
		st[c + 1] += st[c];
	for (size_t i = 0; i < n; i++)
		ix[st[cpu_of(g, i)]++] = (uint32_t)i;
	/* Each start moved to the next CPU's: shift them back. */
	memmove(st + 1, st, HGCOR_MAX_CPUS * sizeof(*st));
	st[0] = 0;
	return 0;
}

static uint32_t probe_cpu(const struct hgsync_guest *g, size_t i)
{
	uint32_t c = g->probes[i].guest_cpu;

	return c < HGCOR_MAX_CPUS ? c : HGCOR_MAX_CPUS - 1;	/* corr_check.c: never */
}

static uint32_t xpair_cpu(const struct hgsync_guest *g, size_t i)
{
	uint32_t c = g->xpairs[i].guest_cpu;

	return c < HGCOR_MAX_CPUS ? c : HGCOR_MAX_CPUS - 1;
}

static uint32_t mpair_cpu(const struct hgsync_guest *g, size_t i)
{
	/* hgsync_add_markpairs() keeps only CPUs below HGCOR_MAX_CPUS */
	return (uint32_t)g->mpairs[i].guest_cpu;
}

/*
 * The marker segments of @g, from its marker pairings, per guest CPU and
 * epoch as the exit pairings' (probe_epochs()), appended to g->segs; the
 * caller indexes them.
 */
static int marker_segments(const struct hgsync *s, struct hgsync_guest *g)
{
	struct hgsync_obs *obs;
	uint32_t *idx = NULL;
	size_t *start = NULL;
	int ret;

	if (!g->nr_mpairs)
		return 0;
	obs = malloc(g->nr_mpairs * sizeof(*obs));
	ret = obs ? by_cpu(g->nr_mpairs, mpair_cpu, g, &idx, &start) : -ENOMEM;
	for (unsigned int cpu = 0; cpu < HGCOR_MAX_CPUS && !ret; cpu++)
		if (start[cpu + 1] > start[cpu])
			ret = probe_epochs(s, g, HGSYNC_METHOD_MARKER, g->marker_clock, cpu,
					   idx + start[cpu], start[cpu + 1] - start[cpu], obs);
	free(obs);
	free(idx);
	free(start);
	return ret;
}

static int guest_build(struct hgsync *s, struct hgsync_guest *g)
{
	struct hgsync_obs *obs;
	uint32_t *pidx = NULL, *xidx = NULL;	/* probes and pairings by vCPU */
	size_t *pstart = NULL, *xstart = NULL;
	size_t i, n;
	int ret = 0;

	g->nr_segs = 0;
	g->indexed = 0;
	g->kvm_checked = g->kvm_agree = 0;
	/* Segments are keyed by guest CPU: the vCPU's, by the identity. */
	if (g->vm.vm_pid > 0)
		for (i = 0; i < s->nr_vcpus && !ret; i++) {
			int cpu = hgs_vcpu_guest_cpu(g, s->vcpus[i].vcpu_id);

			if (s->vcpus[i].vm_pid == g->vm.vm_pid && cpu >= 0)
				ret = hgs_kvm_segments(g, &s->vcpus[i], cpu);
		}
	if (!ret)
		ret = hgs_index(s, g);
	if (ret)
		return ret;
	/*
	 * Check KVM's mapping against the probes: each guest reading, in
	 * host TSC, must fall inside its probe's round trip.  A VM that is
	 * not this guest fails nearly every probe.
	 */
	for (i = 0; i < g->nr_probes; i++) {
		const struct hgcor_probe *p = &g->probes[i];
		const struct hgcor_segment *seg = hgs_find_seg(g, HGCOR_METHOD_KVM_EXACT,
							       HGCOR_CLOCK_TSC, p->guest_cpu,
							       p->guest_tsc);
		uint64_t h;

		if (!seg)
			continue;
		g->kvm_checked++;
		h = hgsync_kvm_host_tsc(p->guest_tsc, seg->tsc_offset, seg->tsc_ratio,
					seg->tsc_frac_bits);
		if (h + 1 >= p->host_tsc_send && h <= p->host_tsc_recv + 1)
			g->kvm_agree++;
	}
	/*
	 * And against the exit pairings, much tighter: the host's reading
	 * lies between the guest's two, to the TSC count.
	 */
	for (i = 0; i < g->nr_xpairs; i++) {
		const struct hgsync_xpair *x = &g->xpairs[i];
		const struct hgcor_segment *sb = hgs_find_seg(g, HGCOR_METHOD_KVM_EXACT,
							      HGCOR_CLOCK_TSC, (int)x->guest_cpu,
							      x->guest_tsc_before);
		const struct hgcor_segment *sa = hgs_find_seg(g, HGCOR_METHOD_KVM_EXACT,
							      HGCOR_CLOCK_TSC, (int)x->guest_cpu,
							      x->guest_tsc_after);
		uint64_t hb, ha;

		if (!sb || !sa)
			continue;
		g->kvm_checked++;
		hb = hgsync_kvm_host_tsc(x->guest_tsc_before, sb->tsc_offset, sb->tsc_ratio,
					 sb->tsc_frac_bits);
		ha = hgsync_kvm_host_tsc(x->guest_tsc_after, sa->tsc_offset, sa->tsc_ratio,
					 sa->tsc_frac_bits);
		if (hb <= x->host_tsc + 1 && ha + 1 >= x->host_tsc)
			g->kvm_agree++;
	}
	if (g->kvm_checked && g->kvm_agree * 10 < g->kvm_checked * 9) {
		/* Not this guest's VM, or not its offsets: keep the probes only. */
		g->nr_segs = 0;
	}
	for (i = 0; i < g->nr_segs; i++)
		g->segs[i].nr_samples = (uint32_t)g->kvm_agree;
	/* Probe segments join below: the index is stale until rebuilt. */
	g->indexed = 0;

	n = g->nr_probes > g->nr_xpairs ? g->nr_probes : g->nr_xpairs;
	obs = malloc((n ? n : 1) * sizeof(*obs));
	ret = obs ? by_cpu(g->nr_probes, probe_cpu, g, &pidx, &pstart) : -ENOMEM;
	if (!ret)
		ret = by_cpu(g->nr_xpairs, xpair_cpu, g, &xidx, &xstart);
	if (ret)
		goto out;
	/*
	 * Per vCPU, on both clocks: each vCPU has its own TSC offset, and
	 * so its own kvm-clock parameters; they need not agree (a guest TSC
	 * write moves one vCPU's sched_clock until KVM next updates its
	 * kvm-clock page).
	 */
	for (unsigned int cpu = 0; cpu < 1024 && !ret; cpu++) {
		size_t np = pstart[cpu + 1] - pstart[cpu], nx = xstart[cpu + 1] - xstart[cpu];

		if (!np && !nx && cpu >= g->nr_cpus)
			break;
		for (int k = 0; k < 4 && !ret; k++) {
			bool pairs = k >= 2;

			ret = probe_epochs(s, g, pairs ? HGCOR_METHOD_EXIT : HGCOR_METHOD_PROBE,
					   k % 2 ? HGCOR_CLOCK_TSC : HGCOR_CLOCK_SCHED, cpu,
					   pairs ? xidx + xstart[cpu] : pidx + pstart[cpu],
					   pairs ? nx : np, obs);
		}
	}
	if (!ret)
		ret = marker_segments(s, g);
out:
	free(obs);
	free(pidx);
	free(pstart);
	free(xidx);
	free(xstart);
	return ret ? ret : hgs_index(s, g);
}

int hgsync_build(struct hgsync *s)
{
	for (unsigned int i = 0; i < s->nr_guests; i++) {
		int ret;

		if (!s->guests[i].present && !s->guests[i].agentless)
			continue;
		ret = guest_build(s, &s->guests[i]);
		if (ret)
			return ret;
	}
	return 0;
}

int hgsync_add_markpairs(struct hgsync *s, uint32_t guest_id, const struct hg_markpair *p,
			 size_t n)
{
	struct hgsync_guest *g;
	struct hgsync_mpair *v;
	size_t i, k = 0;
	uint32_t clock;

	if (!hgsync_guest_known(s, guest_id))
		return -EINVAL;
	g = &s->guests[guest_id];
	clock = n ? p[0].guest_clock : 0;
	if (n && (clock < HGSYNC_CLOCK_TSC || clock > HGSYNC_CLOCK_LOCAL))
		return -EINVAL;
	for (i = 0; i < n; i++)
		if (p[i].guest_clock != clock)
			return -EINVAL;
	v = malloc((n ? n : 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		uint64_t host_value;

		/* markpair.h's checks, again: these are array indices here. */
		if (p[i].guest_cpu < 0 || p[i].guest_cpu >= HGCOR_MAX_CPUS ||
		    p[i].guest_ts_end < p[i].guest_ts_begin)
			continue;
		if (clock == HGSYNC_CLOCK_TSC)
			host_value = p[i].host_tsc;
		else if (clock == HGSYNC_CLOCK_SCHED)
			host_value = p[i].host_ns;
		else if (hgsync_host_from_tsc(s, p[i].host_cpu, clock, p[i].host_tsc,
					      &host_value))
			continue;
		v[k++] = (struct hgsync_mpair){
			.guest_cpu = p[i].guest_cpu, .guest_begin = p[i].guest_ts_begin,
			.guest_end = p[i].guest_ts_end, .host_value = host_value,
			.host_tsc = p[i].host_tsc,
		};
	}
	free(g->mpairs);
	g->mpairs = v;
	g->nr_mpairs = k;
	g->marker_clock = k ? clock : 0;
	/* The other methods' segments stay (from the file or hgsync_build()). */
	for (i = k = 0; i < g->nr_segs; i++)
		if (g->segs[i].method != HGSYNC_METHOD_MARKER)
			g->segs[k++] = g->segs[i];
	g->nr_segs = k;
	g->indexed = 0;
	{
		int ret = marker_segments(s, g);

		return ret ? ret : hgs_index(s, g);
	}
}

/* Sample order: group (clock, vCPU, method, epoch), then guest value. */
static int cmp_sample(const void *a, const void *b)
{
	const struct hgsync_sample *x = a, *y = b;

	if (x->clock != y->clock)
		return x->clock < y->clock ? -1 : 1;
	if (x->vcpu != y->vcpu)
		return x->vcpu < y->vcpu ? -1 : 1;
	if (x->method != y->method)
		return x->method < y->method ? -1 : 1;
	if (x->epoch != y->epoch)
		return x->epoch < y->epoch ? -1 : 1;
	return x->x < y->x ? -1 : x->x > y->x;
}

/* Adds @o (taken at host TSC @host_tsc) to the group of its segment, if it has one. */
static void sample_add(struct hgsync_guest *g, uint32_t method, uint32_t clock, int cpu,
		       const struct hgsync_obs *o, uint64_t host_tsc)
{
	const struct hgcor_segment *seg = hgs_find_seg_at(g, method, clock, cpu, o->x, host_tsc);

	if (!seg)
		return;
	g->samples[g->nr_samples++] = (struct hgsync_sample){
		.clock = clock, .vcpu = cpu, .method = method, .seg = (uint32_t)(seg - g->segs),
		.epoch = seg->host_tsc_start, .x = o->x, .lo = o->lo, .hi = o->hi,
	};
}

/*
 * Every probe and exit pairing as a sample of its segment's group, on
 * both clocks, sorted (cmp_sample()): hgs_to_host_probe() bounds a value by
 * the samples on either side of it (between_bound()).  The observations
 * are the ones the fit used (probe_epochs()), and each joins the segment
 * of its own epoch: the one covering its guest value whose host TSC span
 * holds the sample's host TSC (a later epoch can repeat guest values).
 */
static int index_samples(const struct hgsync *s, struct hgsync_guest *g)
{
	size_t n = 2 * (g->nr_probes + g->nr_xpairs) + g->nr_mpairs;
	struct hgsync_sample *p = realloc(g->samples, (n ? n : 1) * sizeof(*p));

	if (!p)
		return -ENOMEM;
	g->samples = p;
	g->nr_samples = 0;
	if (g->nr_segs > UINT32_MAX)	/* sample.seg holds an index */
		return -ENOMEM;
	for (size_t i = 0; i < g->nr_probes; i++) {
		const struct hgcor_probe *pr = &g->probes[i];
		const struct hgsync_obs tsc = { pr->guest_tsc, pr->host_tsc_send,
						pr->host_tsc_recv };
		const struct hgsync_obs ns = { pr->guest_sched_ns, pr->host_ns_send,
					       pr->host_ns_recv };

		sample_add(g, HGCOR_METHOD_PROBE, HGCOR_CLOCK_TSC, pr->guest_cpu, &tsc,
			   pr->host_tsc_send);
		sample_add(g, HGCOR_METHOD_PROBE, HGCOR_CLOCK_SCHED, pr->guest_cpu, &ns,
			   pr->host_tsc_send);
	}
	for (size_t i = 0; i < g->nr_xpairs; i++) {
		const struct hgsync_xpair *x = &g->xpairs[i];
		const struct hgsync_obs tsc = hgs_xpair_obs(s, g, x, HGCOR_CLOCK_TSC);
		const struct hgsync_obs ns = hgs_xpair_obs(s, g, x, HGCOR_CLOCK_SCHED);

		sample_add(g, HGCOR_METHOD_EXIT, HGCOR_CLOCK_TSC, (int)x->guest_cpu, &tsc,
			   x->host_tsc);
		sample_add(g, HGCOR_METHOD_EXIT, HGCOR_CLOCK_SCHED, (int)x->guest_cpu, &ns,
			   x->host_tsc);
	}
	for (size_t i = 0; i < g->nr_mpairs; i++) {
		const struct hgsync_mpair *m = &g->mpairs[i];
		const struct hgsync_obs o = hgs_mpair_obs(s, g, m);

		sample_add(g, HGSYNC_METHOD_MARKER, g->marker_clock, m->guest_cpu, &o, m->host_tsc);
	}
	if (g->nr_samples)
		qsort(g->samples, g->nr_samples, sizeof(*g->samples), cmp_sample);
	return 0;
}

/*
 * The guest's segment index (hgs_index_segs()) and then its sample
 * index, which needs the segments: after every change to either.
 */
int hgs_index(const struct hgsync *s, struct hgsync_guest *g)
{
	int ret = hgs_index_segs(g);

	return ret ? ret : index_samples(s, g);
}
