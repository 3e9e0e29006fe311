// SPDX-License-Identifier: LGPL-2.1
/*
 * Guest-to-host clock mapping (see sync.h and Documentation/sync.rst).
 *
 * The model is built from a correlation file in one pass.  Host records
 * come per CPU in ring order, so the per-vCPU arrays (TSC offsets, host
 * CPUs) are sorted by host TSC afterwards; conversions stay per CPU in
 * the order the CPU took them.  The host's TSC is assumed synchronized
 * across its CPUs (KVM itself assumes it for a stable guest TSC).
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "bsearch.h"
#include "corr_check.h"
#include "libhgclock.h"
#include "markpair.h"
#include "sync.h"

typedef unsigned __int128 u128;
typedef __int128 s128;

/* ---- growing arrays ---- */

static int grow(void **v, size_t *cap, size_t n, size_t size)
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

#define PUSH(arr, n, cap, val) ({					\
	int __r = grow((void **)&(arr), &(cap), (n), sizeof(*(arr)));	\
	if (!__r)							\
		(arr)[(n)++] = (val);					\
	__r;								\
})

/* ---- pure helpers ---- */

uint64_t hgsync_kvm_guest_tsc(uint64_t host_tsc, uint64_t offset, uint64_t ratio,
			      uint32_t frac_bits)
{
	if (!ratio || frac_bits > 63)
		return host_tsc + offset;
	return (uint64_t)(((u128)host_tsc * ratio) >> frac_bits) + offset;
}

uint64_t hgsync_kvm_host_tsc(uint64_t guest_tsc, uint64_t offset, uint64_t ratio,
			     uint32_t frac_bits)
{
	uint64_t scaled = guest_tsc - offset;	/* (host_tsc * ratio) >> frac */

	if (!ratio || frac_bits > 63 || ratio == 1ull << frac_bits)
		return scaled;
	/* Smallest h with (h * ratio) >> frac >= scaled: ceil(scaled << frac / ratio). */
	return (uint64_t)((((u128)scaled << frac_bits) + ratio - 1) / ratio);
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

/* ---- loading ---- */

static struct hgsync_convs *convs_for(struct hgsync_convs **arr, unsigned int *nr,
				      unsigned int cpu)
{
	if (cpu >= HGCOR_MAX_CPUS)	/* corr_check.c refused it already */
		return NULL;
	if (cpu >= *nr) {
		struct hgsync_convs *p = realloc(*arr, (cpu + 1) * sizeof(*p));

		if (!p)
			return NULL;
		memset(p + *nr, 0, (cpu + 1 - *nr) * sizeof(*p));
		*arr = p;
		*nr = cpu + 1;
	}
	return &(*arr)[cpu];
}

/*
 * The vCPUs are found by a hash of (vm_pid, vcpu_id): open addressing,
 * linear probing, at most half full, each slot the index + 1 of a vCPU
 * in s->vcpus (0: empty).  The hash is seeded per load, so that a file
 * cannot choose keys that collide: a lookup costs O(1) expected, per
 * record while loading and per event while merging.
 */
static uint64_t vcpu_hash(const struct hgsync *s, int32_t vm_pid, int32_t vcpu_id)
{
	uint64_t x = ((uint64_t)(uint32_t)vm_pid << 32 | (uint32_t)vcpu_id) ^ s->vcpu_seed;

	/* splitmix64's finalizer: every key bit moves every hash bit. */
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* The slot holding (vm_pid, vcpu_id), or the empty slot where it goes. */
static size_t vcpu_slot(const struct hgsync *s, int32_t vm_pid, int32_t vcpu_id)
{
	size_t mask = s->nr_vcpu_slots - 1, i = vcpu_hash(s, vm_pid, vcpu_id) & mask;

	for (;; i = (i + 1) & mask) {
		uint32_t k = s->vcpu_slots[i];

		if (!k || (s->vcpus[k - 1].vm_pid == vm_pid && s->vcpus[k - 1].vcpu_id == vcpu_id))
			return i;
	}
}

/* Doubles the table (or makes the first one) and re-inserts every vCPU. */
static int vcpu_rehash(struct hgsync *s)
{
	size_t n = s->nr_vcpu_slots ? s->nr_vcpu_slots * 2 : 64;
	uint32_t *slots = calloc(n, sizeof(*slots));

	if (!slots || s->nr_vcpus >= UINT32_MAX) {
		free(slots);
		return -ENOMEM;
	}
	if (!s->vcpu_slots) {
		uint64_t seed = 0;

		if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed))
			seed = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)s;
		s->vcpu_seed = seed;
	}
	free(s->vcpu_slots);
	s->vcpu_slots = slots;
	s->nr_vcpu_slots = n;
	for (size_t i = 0; i < s->nr_vcpus; i++)
		slots[vcpu_slot(s, s->vcpus[i].vm_pid, s->vcpus[i].vcpu_id)] = (uint32_t)i + 1;
	return 0;
}

static struct hgsync_vcpu *vcpu_for(struct hgsync *s, int32_t vm_pid, int32_t vcpu_id)
{
	struct hgsync_vcpu v = { .vm_pid = vm_pid, .vcpu_id = vcpu_id, .tid = -1 };
	size_t i;

	if ((s->nr_vcpus + 1) * 2 > s->nr_vcpu_slots && vcpu_rehash(s))
		return NULL;
	i = vcpu_slot(s, vm_pid, vcpu_id);
	if (s->vcpu_slots[i])
		return &s->vcpus[s->vcpu_slots[i] - 1];
	if (PUSH(s->vcpus, s->nr_vcpus, s->cap_vcpus, v))
		return NULL;
	s->vcpu_slots[i] = (uint32_t)s->nr_vcpus;
	return &s->vcpus[s->nr_vcpus - 1];
}

/*
 * One host record, copied whole into @r first (records in the ring are
 * only 8-byte aligned and may be longer than this reader knows): a record
 * shorter than its type's structure is skipped, as is any type the
 * mapping does not use.
 */
static int host_rec(const void *rec, size_t size, void *ctx)
{
	struct hgsync *s = ctx;
	union {
		struct hgclock_rec_header h;
		struct hgclock_rec_cyc2ns cyc2ns;
		struct hgclock_rec_vcpu vcpu;
		struct hgclock_rec_vcpu_seen seen;
		struct hgclock_rec_tsc_offset tsc_offset;
		struct hgclock_rec_pvclock pv;
		struct hgclock_rec_exit_host exit_host;
	} r;
	size_t need;
	struct hgsync_vcpu *v;

	memcpy(&r.h, rec, sizeof(r.h));
	need = hgclock_rec_min_size(r.h.type);
	if (size < need || need > sizeof(r))
		return 0;
	memcpy(&r, rec, need);
	switch (r.h.type) {
	case HGCLOCK_REC_CYC2NS: {
		struct hgsync_convs *cv = convs_for(&s->host_convs, &s->nr_host_cpus, r.h.cpu);

		if (!cv || PUSH(cv->v, cv->n, cv->cap, r.cyc2ns))
			return -ENOMEM;
		return 0;
	}
	case HGCLOCK_REC_VCPU_SEEN: {
		struct hgsync_offset o;
		struct hgsync_where w;

		if (!(r.seen.flags & HGCLOCK_VCPU_KVM))
			return 0;
		v = vcpu_for(s, r.seen.vm_pid, r.seen.vcpu_id);
		if (!v)
			return -ENOMEM;
		v->tid = r.seen.tid;
		w = (struct hgsync_where){ r.h.tsc, r.seen.host_cpu, 1 };
		if (PUSH(v->where, v->nr_where, v->cap_where, w))
			return -ENOMEM;
		if (!(r.seen.flags & HGCLOCK_VCPU_TSC_KNOWN))
			return 0;
		o = (struct hgsync_offset){ r.h.tsc, r.seen.tsc_offset, r.seen.tsc_scaling_ratio,
					    r.seen.tsc_frac_bits, 1, 0, 0 };
		return PUSH(v->off, v->nr_off, v->cap_off, o);
	}
	case HGCLOCK_REC_TSC_OFFSET: {
		struct hgsync_offset o = {
			r.h.tsc, r.tsc_offset.next_offset, r.tsc_offset.tsc_scaling_ratio,
			r.tsc_offset.tsc_frac_bits,
			!!(r.tsc_offset.flags & HGCLOCK_VCPU_TSC_KNOWN), 1,
			r.tsc_offset.previous_offset
		};

		v = vcpu_for(s, r.tsc_offset.vm_pid, r.tsc_offset.vcpu_id);
		if (!v)
			return -ENOMEM;
		return PUSH(v->off, v->nr_off, v->cap_off, o);
	}
	case HGCLOCK_REC_PVCLOCK: {
		struct hgsync_pvclock pv = {
			.host_tsc = r.h.tsc, .tsc_timestamp = r.pv.tsc_timestamp,
			.system_time = r.pv.system_time, .mul = r.pv.tsc_to_system_mul,
			.shift = r.pv.tsc_shift,
		};

		v = vcpu_for(s, r.pv.vm_pid, r.pv.vcpu_id);
		if (!v)
			return -ENOMEM;
		return PUSH(v->pv, v->nr_pv, v->cap_pv, pv);
	}
	case HGCLOCK_REC_EXIT_HOST:
		return PUSH(s->hpairs, s->nr_hpairs, s->cap_hpairs, r.exit_host);
	case HGCLOCK_REC_VCPU_RUN:
	case HGCLOCK_REC_VCPU_STOP:
	case HGCLOCK_REC_VCPU_EXIT:
	case HGCLOCK_REC_VCPU_MIGRATE: {
		/* A migration record starts as the others do. */
		struct hgsync_where w;

		if (r.vcpu.vcpu_id < 0)
			return 0;
		v = vcpu_for(s, r.vcpu.vm_pid, r.vcpu.vcpu_id);
		if (!v)
			return -ENOMEM;
		if (r.h.type == HGCLOCK_REC_VCPU_MIGRATE) {
			v->migrations++;
			return 0;
		}
		w = (struct hgsync_where){ r.h.tsc, (int32_t)r.h.cpu,
					   r.h.type == HGCLOCK_REC_VCPU_RUN };
		return PUSH(v->where, v->nr_where, v->cap_where, w);
	}
	default:
		return 0;
	}
}

struct guest_ctx {
	struct hgsync *s;
	struct hgsync_guest *g;
};

static int guest_rec(const void *rec, size_t size, void *ctx)
{
	struct guest_ctx *gc = ctx;
	struct hgclock_rec_cyc2ns c;
	struct hgsync_convs *cv;
	uint16_t type = ((const struct hgclock_rec_header *)rec)->type;

	if (type == HGCLOCK_REC_EXIT_PAIR && size >= sizeof(struct hgclock_rec_exit_pair)) {
		struct hgclock_rec_exit_pair xp;

		memcpy(&xp, rec, sizeof(xp));
		return PUSH(gc->g->gpairs, gc->g->nr_gpairs, gc->g->cap_gpairs, xp);
	}
	if (size < sizeof(c) || type != HGCLOCK_REC_CYC2NS)
		return 0;
	memcpy(&c, rec, sizeof(c));
	cv = convs_for(&gc->g->convs, &gc->g->nr_cpus, c.hdr.cpu);
	if (!cv || PUSH(cv->v, cv->n, cv->cap, c))
		return -ENOMEM;
	return 0;
}

/*
 * Guest @id of @s, made (with every id below it) when the file first names
 * it: s->guests grows by doubling, to at most HGSYNC_MAX_GUESTS entries.
 * It moves when it grows, so a pointer into it holds only until the next
 * call.  0 with *@gp, HGCOR_E_CONTENT (an id beyond the limit) or -ENOMEM.
 */
static int guest_for(struct hgsync *s, uint32_t id, struct hgsync_guest **gp)
{
	*gp = NULL;
	if (id >= HGSYNC_MAX_GUESTS)
		return HGCOR_E_CONTENT;
	if (id >= s->cap_guests) {
		size_t cap = s->cap_guests ? s->cap_guests : 4;
		struct hgsync_guest *p;

		while (cap <= id)
			cap *= 2;
		if (cap > HGSYNC_MAX_GUESTS)
			cap = HGSYNC_MAX_GUESTS;
		if (cap > SIZE_MAX / sizeof(*p))
			return -ENOMEM;
		p = realloc(s->guests, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		memset(p + s->cap_guests, 0, (cap - s->cap_guests) * sizeof(*p));
		s->guests = p;
		s->cap_guests = (unsigned int)cap;
	}
	if (id >= s->nr_guests) {
		for (uint32_t i = s->nr_guests; i <= id; i++) {
			s->guests[i].id = i;
			s->guests[i].vm.vm_pid = -1;
		}
		s->nr_guests = id + 1;
	}
	*gp = &s->guests[id];
	return 0;
}

static int cmp_offset(const void *a, const void *b)
{
	const struct hgsync_offset *x = a, *y = b;

	return x->host_tsc < y->host_tsc ? -1 : x->host_tsc > y->host_tsc;
}

static int cmp_where(const void *a, const void *b)
{
	const struct hgsync_where *x = a, *y = b;

	return x->host_tsc < y->host_tsc ? -1 : x->host_tsc > y->host_tsc;
}

static int cmp_pv(const void *a, const void *b)
{
	const struct hgsync_pvclock *x = a, *y = b;

	return x->host_tsc < y->host_tsc ? -1 : x->host_tsc > y->host_tsc;
}

/* Host halves of exit pairings by (key, seq): guest_build() looks them up. */
static int cmp_hpair(const void *a, const void *b)
{
	const struct hgclock_rec_exit_host *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static bool hpair_below(const void *elem, const void *key)
{
	return cmp_hpair(elem, key) < 0;
}

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

static const struct hgcor_segment *find_seg_at(const struct hgsync_guest *g, uint32_t method,
					       uint32_t clock, int vcpu, uint64_t guest_value,
					       uint64_t host_tsc);
static struct hgsync_obs xpair_obs(const struct hgsync *s, const struct hgsync_guest *g,
				   const struct hgsync_xpair *x, uint32_t clock);
static struct hgsync_obs mpair_obs(const struct hgsync *s, const struct hgsync_guest *g,
				   const struct hgsync_mpair *m);

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
	const struct hgcor_segment *seg = find_seg_at(g, method, clock, cpu, o->x, host_tsc);

	if (!seg)
		return;
	g->samples[g->nr_samples++] = (struct hgsync_sample){
		.clock = clock, .vcpu = cpu, .method = method, .seg = (uint32_t)(seg - g->segs),
		.epoch = seg->host_tsc_start, .x = o->x, .lo = o->lo, .hi = o->hi,
	};
}

/*
 * Every probe and exit pairing as a sample of its segment's group, on
 * both clocks, sorted (cmp_sample()): to_host_probe() bounds a value by
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
		const struct hgsync_obs tsc = xpair_obs(s, g, x, HGCOR_CLOCK_TSC);
		const struct hgsync_obs ns = xpair_obs(s, g, x, HGCOR_CLOCK_SCHED);

		sample_add(g, HGCOR_METHOD_EXIT, HGCOR_CLOCK_TSC, (int)x->guest_cpu, &tsc,
			   x->host_tsc);
		sample_add(g, HGCOR_METHOD_EXIT, HGCOR_CLOCK_SCHED, (int)x->guest_cpu, &ns,
			   x->host_tsc);
	}
	for (size_t i = 0; i < g->nr_mpairs; i++) {
		const struct hgsync_mpair *m = &g->mpairs[i];
		const struct hgsync_obs o = mpair_obs(s, g, m);

		sample_add(g, HGSYNC_METHOD_MARKER, g->marker_clock, m->guest_cpu, &o, m->host_tsc);
	}
	if (g->nr_samples)
		qsort(g->samples, g->nr_samples, sizeof(*g->samples), cmp_sample);
	return 0;
}

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

/*
 * Sorts @g's segments (by clock, vCPU, method, then guest start) and
 * indexes them for find_seg(): seg_maxend[i] is the largest guest_end of
 * the segments of i's group up to i, so that a lookup walks back from
 * the last segment starting at or before a value only while an earlier
 * one can still cover it.  Segments change only through guest_build()
 * and hgsync_load(), which both end here.  Then the samples, by segment.
 */
static int index_segs(const struct hgsync *s, struct hgsync_guest *g)
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
	return index_samples(s, g);
}

/* ---- kvm-clock from the host's PVCLOCK records ---- */

static const struct hgsync_vcpu *vcpu_find(const struct hgsync *s, int32_t vm_pid, int vcpu)
{
	uint32_t k;

	if (!s->nr_vcpu_slots)
		return NULL;
	k = s->vcpu_slots[vcpu_slot(s, vm_pid, vcpu)];
	return k ? &s->vcpus[k - 1] : NULL;
}

/* ---- vCPU identity: guest CPU numbers and KVM's vcpu_ids ---- */

/*
 * KVM's vcpu_id of guest CPU @cpu: its APIC ID from the agent's CPU map,
 * or, without a map, @cpu itself (assumed, id_flags).  -1 when unknown.
 */
static int32_t cpu_vcpu_id(const struct hgsync_guest *g, int cpu)
{
	if (cpu < 0)
		return -1;
	if (!g->nr_cpu_vcpu)
		return cpu;
	return (unsigned int)cpu < g->nr_cpu_vcpu ? g->cpu_vcpu[cpu] : -1;
}

/* The reverse: the guest CPU that is @vcpu_id, -1 when none. */
static int vcpu_guest_cpu(const struct hgsync_guest *g, int32_t vcpu_id)
{
	if (vcpu_id < 0 || vcpu_id >= HGCOR_MAX_VCPU_ID)
		return -1;
	if (!g->nr_cpu_vcpu)
		return vcpu_id;
	return g->vcpu_cpu && (unsigned int)vcpu_id < g->nr_vcpu_cpu ? g->vcpu_cpu[vcpu_id] : -1;
}

/* The host vCPU thread of guest CPU @cpu of @g, NULL when unknown. */
static const struct hgsync_vcpu *guest_vcpu(const struct hgsync *s, const struct hgsync_guest *g,
					    int cpu)
{
	int32_t id = cpu_vcpu_id(g, cpu);

	return id < 0 ? NULL : vcpu_find(s, g->vm.vm_pid, id);
}

/* One CPU_MAP section's entries (already range-checked by corr_check.c). */
static int cpu_map_add(struct hgsync_guest *g, const uint8_t *p, uint64_t len)
{
	for (uint64_t off = 0; off + sizeof(struct hgcor_cpu_apic) <= len;
	     off += sizeof(struct hgcor_cpu_apic)) {
		struct hgcor_cpu_apic e;

		memcpy(&e, p + off, sizeof(e));
		if (e.guest_cpu >= g->nr_cpu_vcpu) {
			int32_t *m = realloc(g->cpu_vcpu, (e.guest_cpu + 1) * sizeof(*m));

			if (!m)
				return -ENOMEM;
			for (unsigned int c = g->nr_cpu_vcpu; c <= e.guest_cpu; c++)
				m[c] = -1;
			g->cpu_vcpu = m;
			g->nr_cpu_vcpu = e.guest_cpu + 1;
		}
		/* A later map (CPUs brought online since) wins; say it changed. */
		if (g->cpu_vcpu[e.guest_cpu] >= 0 &&
		    g->cpu_vcpu[e.guest_cpu] != (int32_t)e.apic_id)
			g->id_flags |= HGSYNC_ID_CHANGED;
		g->cpu_vcpu[e.guest_cpu] = (int32_t)e.apic_id;
	}
	return 0;
}

/*
 * After loading: the reverse map, and what the host saw of the VM's
 * vcpu_ids (gaps make the assumption "guest CPU n = vcpu_id n" wrong).
 */
static int identity_setup(const struct hgsync *s, struct hgsync_guest *g)
{
	g->id_flags &= HGSYNC_ID_CHANGED;
	g->id_flags |= g->nr_cpu_vcpu ? HGSYNC_ID_MAP : HGSYNC_ID_ASSUMED;
	g->id_nr_vcpus = 0;
	g->id_max_vcpu = -1;
	if (g->nr_cpu_vcpu) {
		int32_t top = 0;

		/* APIC IDs are below HGCOR_MAX_VCPU_ID (corr_check.c). */
		for (unsigned int c = 0; c < g->nr_cpu_vcpu; c++)
			if (g->cpu_vcpu[c] > top)
				top = g->cpu_vcpu[c];
		free(g->vcpu_cpu);
		g->nr_vcpu_cpu = (unsigned int)top + 1;
		g->vcpu_cpu = malloc(g->nr_vcpu_cpu * sizeof(*g->vcpu_cpu));
		if (!g->vcpu_cpu)
			return -ENOMEM;
		for (unsigned int i = 0; i < g->nr_vcpu_cpu; i++)
			g->vcpu_cpu[i] = -1;
		for (unsigned int c = 0; c < g->nr_cpu_vcpu; c++) {
			int32_t id = g->cpu_vcpu[c];

			if (id < 0 || (unsigned int)id >= g->nr_vcpu_cpu)
				continue;
			/* Two CPUs with one APIC ID: the maps disagree. */
			if (g->vcpu_cpu[id] >= 0)
				g->id_flags |= HGSYNC_ID_CHANGED;
			g->vcpu_cpu[id] = (int32_t)c;
		}
	}
	if (g->vm.vm_pid <= 0)
		return 0;
	for (size_t i = 0; i < s->nr_vcpus; i++) {
		const struct hgsync_vcpu *v = &s->vcpus[i];

		if (v->vm_pid != g->vm.vm_pid || v->vcpu_id < 0)
			continue;
		g->id_nr_vcpus++;
		if (v->vcpu_id > g->id_max_vcpu)
			g->id_max_vcpu = v->vcpu_id;
	}
	if (g->id_nr_vcpus && (uint32_t)g->id_max_vcpu + 1 != g->id_nr_vcpus)
		g->id_flags |= HGSYNC_ID_GAPS;
	return 0;
}

int hgsync_guest_vcpu_id(const struct hgsync *s, uint32_t guest_id, int cpu)
{
	return guest_id < s->nr_guests ? cpu_vcpu_id(&s->guests[guest_id], cpu) : -1;
}

int hgsync_vcpu_guest_cpu(const struct hgsync *s, uint32_t guest_id, int vcpu_id)
{
	return guest_id < s->nr_guests ? vcpu_guest_cpu(&s->guests[guest_id], vcpu_id) : -1;
}

int hgsync_identity_note(const struct hgsync *s, uint32_t guest_id, char *buf, size_t len)
{
	const struct hgsync_guest *g;
	size_t n = 0;

	if (len)
		buf[0] = '\0';
	if (guest_id >= s->nr_guests || !len)
		return 0;
	g = &s->guests[guest_id];
#define NOTE(...)							\
	do {								\
		int w = snprintf(buf + n, len - n, __VA_ARGS__);	\
		n = w < 0 ? n : n + (size_t)w < len ? n + (size_t)w : len - 1; \
	} while (0)
	if (g->id_flags & HGSYNC_ID_ASSUMED)
		NOTE("vCPU identity assumed: guest cpu n = vcpu_id n (the agent sent no CPU map)");
	else if (g->id_flags & HGSYNC_ID_CHANGED)
		NOTE("the CPU map changed while recording (CPU hotplug): the last one is used");
	if ((g->id_flags & HGSYNC_ID_ASSUMED) && (g->id_flags & HGSYNC_ID_GAPS))
		NOTE("%sthe host saw %u vCPUs with vcpu_ids up to %d (gaps): host CPUs and KVM "
		     "offsets of some guest CPUs are likely wrong; record with an agent of "
		     "protocol 1.2 or later", n ? "; " : "", g->id_nr_vcpus, g->id_max_vcpu);
	if (g->id_flags & HGSYNC_ID_PAIRS_DISAGREE)
		NOTE("%s%llu of %llu exit pairings ran on another vcpu_id than this identity says",
		     n ? "; " : "", (unsigned long long)g->id_pairs_other,
		     (unsigned long long)g->id_pairs_checked);
#undef NOTE
	if (g->id_flags & (HGSYNC_ID_CHANGED | HGSYNC_ID_PAIRS_DISAGREE) ||
	    (g->id_flags & (HGSYNC_ID_ASSUMED | HGSYNC_ID_GAPS)) ==
	    (HGSYNC_ID_ASSUMED | HGSYNC_ID_GAPS))
		return 2;
	return n > 0;
}

/* hg_partition() predicates: an entry at or before the key (a uint64_t). */
static bool off_at_or_before(const void *elem, const void *key)
{
	return ((const struct hgsync_offset *)elem)->host_tsc <= *(const uint64_t *)key;
}

static bool pv_at_or_before(const void *elem, const void *key)
{
	return ((const struct hgsync_pvclock *)elem)->host_tsc <= *(const uint64_t *)key;
}

static bool pv_stamp_below(const void *elem, const void *key)
{
	return ((const struct hgsync_pvclock *)elem)->tsc_timestamp < *(const uint64_t *)key;
}

static bool pv_start_at_or_before(const void *elem, const void *key)
{
	return ((const struct hgsync_pvclock *)elem)->start_ns <= *(const uint64_t *)key;
}

static bool where_at_or_before(const void *elem, const void *key)
{
	return ((const struct hgsync_where *)elem)->host_tsc <= *(const uint64_t *)key;
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

/* The index of the last entry of @v's @off at or before @host_tsc, else -1. */
static ssize_t offset_index(const struct hgsync_vcpu *v, uint64_t host_tsc)
{
	return (ssize_t)hg_partition(v->off, v->nr_off, sizeof(*v->off), off_at_or_before,
				     &host_tsc) - 1;
}

/* KVM's TSC relation of @v in force at @host_tsc: 0, or -ENOENT. */
static int offset_at(const struct hgsync_vcpu *v, uint64_t host_tsc, struct hgsync_offset *o)
{
	ssize_t k = offset_index(v, host_tsc);

	if (k >= 0) {
		*o = v->off[k];
	} else if (v->nr_off && v->off[0].is_change) {
		*o = v->off[0];
		o->tsc_offset = o->prev_offset;
	} else {
		return -ENOENT;
	}
	if (!o->known) {
		o->tsc_ratio = 0;
		o->tsc_frac_bits = 0;
	}
	return 0;
}

/* A PVCLOCK record as the guest's sched_clock conversion. */
static struct hgclock_conversion pv_conv(const struct hgsync_guest *g,
					 const struct hgsync_pvclock *p)
{
	return (struct hgclock_conversion){
		.tsc_base = p->tsc_timestamp, .offset_ns = p->system_time - g->pv_sched_offset,
		.mult = p->mul, .shift = 32, .pre_shift = p->shift,
		.flags = HGCLOCK_CONV_VALID | HGCLOCK_CONV_PVCLOCK,
	};
}

/*
 * The guest's kvm-clock ns on @v at host TSC @host_tsc under record @p,
 * with the TSC offset in force at @offset_tsc.
 */
static int pv_value_at(const struct hgsync_guest *g, const struct hgsync_vcpu *v,
		       const struct hgsync_pvclock *p, uint64_t host_tsc, uint64_t offset_tsc,
		       uint64_t *ns)
{
	struct hgclock_conversion c = pv_conv(g, p);
	struct hgsync_offset o;

	if (offset_at(v, offset_tsc, &o))
		return -ENOENT;
	*ns = hgclock_conv_apply(&c, hgsync_kvm_guest_tsc(host_tsc, o.tsc_offset, o.tsc_ratio,
							  o.tsc_frac_bits));
	return 0;
}

/*
 * How far @w's kvm-clock under record @p can have got by host TSC @t: its
 * formula with the offset KVM computed @p against.  An offset changed
 * since then (KVM re-basing at a vCPU load) is no reading: the vCPU
 * enters again only after the next record.  But a change long before
 * @t (over 1 ms: a guest's TSC write, which KVM follows with new
 * parameters only later) the guest did run with, and read its clock
 * moved by it: that counts too.
 */
static int pv_reached(const struct hgsync *s, const struct hgsync_guest *g,
		      const struct hgsync_vcpu *w, const struct hgsync_pvclock *p, uint64_t t,
		      uint64_t *ns)
{
	/* 1 ms of host TSC (kHz: counts per ms). */
	uint64_t moved, long_ago = s->host_info.tsc_khz ? s->host_info.tsc_khz : 1000000;
	ssize_t k = offset_index(w, t);

	if (pv_value_at(g, w, p, t, p->host_tsc, ns))
		return -ENOENT;
	if (k >= 0 && w->off[k].host_tsc > p->host_tsc && t - w->off[k].host_tsc > long_ago &&
	    !pv_value_at(g, w, p, t, t, &moved) && moved > *ns)
		*ns = moved;
	return 0;
}

/* The record of @v in force at @host_tsc, or NULL before the first. */
static const struct hgsync_pvclock *pv_at(const struct hgsync_vcpu *v, uint64_t host_tsc)
{
	size_t k = hg_partition(v->pv, v->nr_pv, sizeof(*v->pv), pv_at_or_before, &host_tsc);

	return k ? &v->pv[k - 1] : NULL;
}

/*
 * The record of @v whose parameters a guest snapshot's conversion @cv
 * shows.  Records are searched by tsc_timestamp, which grows while the
 * guest's TSC does; a guest TSC set back breaks that order, and then a
 * plain scan (a few at most: *@scans counts them) looks further.
 */
static const struct hgsync_pvclock *pv_find(const struct hgsync_vcpu *v,
					    const struct hgclock_conversion *cv,
					    unsigned int *scans)
{
	size_t lo = hg_partition(v->pv, v->nr_pv, sizeof(*v->pv), pv_stamp_below, &cv->tsc_base);

#define PV_MATCH(p) ((p)->tsc_timestamp == cv->tsc_base && (p)->mul == cv->mult && \
		     (p)->shift == cv->pre_shift)
	for (size_t i = lo; i < v->nr_pv && v->pv[i].tsc_timestamp == cv->tsc_base; i++)
		if (PV_MATCH(&v->pv[i]))
			return &v->pv[i];
	if (++*scans > 16)
		return NULL;
	for (size_t i = v->nr_pv; i-- > 0;)
		if (PV_MATCH(&v->pv[i]))
			return &v->pv[i];
	return NULL;
#undef PV_MATCH
}

/*
 * vCPU @cpu's kvm-clock at host TSC @t before its first record: under the
 * parameters its first snapshot read.  0, or -ENOENT.
 */
static int pv_value_pre(const struct hgsync_guest *g, const struct hgsync_vcpu *w,
			unsigned int cpu, uint64_t t, uint64_t *ns)
{
	const struct hgclock_conversion *c;
	struct hgsync_offset o;

	if (cpu >= g->nr_cpus || !g->convs[cpu].n)
		return -ENOENT;
	c = &g->convs[cpu].v[0].conv;
	if (!(c->flags & HGCLOCK_CONV_PVCLOCK))
		return -ENOENT;
	/*
	 * The offset those parameters were computed with: the one whose span
	 * holds the host TSC of their tsc_timestamp (KVM wrote them then).
	 */
	for (ssize_t k = -1; ; k++) {
		uint64_t lo = k < 0 ? 0 : w->off[k].host_tsc, h;
		uint64_t hi = k + 1 < (ssize_t)w->nr_off ? w->off[k + 1].host_tsc : UINT64_MAX;

		if (k >= (ssize_t)w->nr_off || lo > t)
			return -ENOENT;
		if (offset_at(w, k < 0 ? 0 : lo, &o))
			continue;
		h = hgsync_kvm_host_tsc(c->tsc_base, o.tsc_offset, o.tsc_ratio, o.tsc_frac_bits);
		if (h >= lo && h < hi)
			break;
	}
	*ns = hgclock_conv_apply(c, hgsync_kvm_guest_tsc(t, o.tsc_offset, o.tsc_ratio,
							 o.tsc_frac_bits));
	return 0;
}

/*
 * The largest kvm-clock value any vCPU of @g reached by host TSC @t
 * (records and offsets in force then, and the ends of earlier records),
 * minus @raw, vCPU @cpu's own value then under its record @q: how far
 * pvclock's clamp can lift @cpu's readings at @t.  0 when none leads.
 */
static uint64_t pv_lead(const struct hgsync *s, const struct hgsync_guest *g, unsigned int cpu,
			const struct hgsync_pvclock *q, uint64_t t, uint64_t raw)
{
	uint64_t top = q->reach_prev;

	for (unsigned int u = 0; u < g->nr_cpus; u++) {
		const struct hgsync_vcpu *w = guest_vcpu(s, g, (int)u);
		const struct hgsync_pvclock *r;
		uint64_t val;

		if (u == cpu || !w)
			continue;
		r = pv_at(w, t);
		if (!r) {
			if (!pv_value_pre(g, w, u, t, &val) && val > top)
				top = val;
			continue;
		}
		if (r->reach_prev > top)
			top = r->reach_prev;
		if (!pv_reached(s, g, w, r, t, &val) && val > top)
			top = val;
	}
	return top > raw ? top - raw : 0;
}

/*
 * With the host's PVCLOCK records a guest's kvm-clock is known at every
 * instant, stable TSC or not: the guest computes system_time + scaled
 * (tsc - tsc_timestamp) from the parameters KVM last wrote, minus its
 * kvm_sched_clock_offset.  That constant we find from the guest's own
 * snapshots: each read the parameters KVM wrote (a record with the same
 * tsc_timestamp, multiplier and shift), and its offset_ns is system_time
 * minus the constant.  Every matching snapshot must agree.
 *
 * Without PVCLOCK_TSC_STABLE_BIT pvclock_clocksource_read() returns no
 * less than the largest value any vCPU read before (a global clamp): a
 * reading can lie above the formula by as much as another vCPU's clock
 * (or this one's before a step back) led it.  pv_clamp_ns bounds that
 * lead: the spread of the vCPUs' clocks, and each vCPU's step back, at
 * every update.
 */
static void pv_setup(const struct hgsync *s, struct hgsync_guest *g)
{
	const struct hgsync_pvclock *p;
	unsigned int scans = 0;
	bool have = false;

	g->pv_known = 0;
	g->pv_checked = g->pv_agree = 0;
	g->pv_clamp_ns = 0;
	if (g->vm.vm_pid <= 0)
		return;
	for (unsigned int c = 0; c < g->nr_cpus; c++) {
		const struct hgsync_vcpu *v = guest_vcpu(s, g, (int)c);

		for (size_t k = 0; v && k < g->convs[c].n; k++) {
			const struct hgclock_rec_cyc2ns *snap = &g->convs[c].v[k];
			const struct hgclock_conversion *cv = &snap->conv;

			if (!(cv->flags & HGCLOCK_CONV_PVCLOCK) || !v->nr_pv)
				continue;
			g->pv_checked++;
			p = pv_find(v, cv, &scans);
			if (!p)
				continue;
			if (!have) {
				g->pv_sched_offset = p->system_time - cv->offset_ns;
				have = true;
			}
			if (p->system_time - cv->offset_ns == g->pv_sched_offset)
				g->pv_agree++;
		}
	}
	/* Snapshots that disagree with the records: not this guest's clocks. */
	if (!have || g->pv_agree * 10 < g->pv_checked * 9)
		return;
	g->pv_known = 1;
	/* Each record's start, the end its clock reached, and the ends before. */
	for (unsigned int c = 0; c < g->nr_cpus; c++) {
		struct hgsync_vcpu *v = (struct hgsync_vcpu *)guest_vcpu(s, g, (int)c);
		uint64_t ends = 0;

		/* Where the snapshot's parameters had got to by the first record. */
		if (v && v->nr_pv && pv_value_pre(g, v, c, v->pv[0].host_tsc, &ends))
			ends = 0;
		for (size_t i = 0; v && i < v->nr_pv; i++) {
			struct hgsync_pvclock *q = &v->pv[i];

			/*
			 * Its own start: kvm-clock is system_time at tsc_timestamp,
			 * whatever offset KVM had in force then (a catch-up may
			 * move it while KVM computes the parameters).
			 */
			q->start_ns = q->system_time - g->pv_sched_offset;
			q->end_ns = q->start_ns;
			if (i + 1 < v->nr_pv && !pv_reached(s, g, v, q, v->pv[i + 1].host_tsc, &q->end_ns) &&
			    q->end_ns < q->start_ns)
				q->end_ns = q->start_ns;
			q->reach_prev = ends;
			if (q->end_ns > ends)
				ends = q->end_ns;
		}
	}
	/* Each record's clamp bound: the largest lead over it while in force. */
	for (unsigned int c = 0; c < g->nr_cpus; c++) {
		struct hgsync_vcpu *v = (struct hgsync_vcpu *)guest_vcpu(s, g, (int)c);

		for (size_t i = 0; v && i < v->nr_pv; i++) {
			struct hgsync_pvclock *q = &v->pv[i];
			uint64_t end = i + 1 < v->nr_pv ? v->pv[i + 1].host_tsc : q->host_tsc;

			q->clamp_ns = pv_lead(s, g, c, q, q->host_tsc, q->start_ns);
			if (end != q->host_tsc) {
				uint64_t l = pv_lead(s, g, c, q, end, q->end_ns);

				if (l > q->clamp_ns)
					q->clamp_ns = l;
			}
			/* The other vCPUs' updates while this record was in force. */
			for (unsigned int u = 0; u < g->nr_cpus && end != q->host_tsc; u++) {
				const struct hgsync_vcpu *w = guest_vcpu(s, g, (int)u);
				const struct hgsync_pvclock *r;

				if (!w || w == v || !(r = pv_at(w, q->host_tsc)))
					r = w && w != v && w->nr_pv ? &w->pv[0] : NULL;
				for (; r && r < w->pv + w->nr_pv && r->host_tsc < end; r++) {
					uint64_t raw, l;

					if (r->host_tsc <= q->host_tsc ||
					    pv_reached(s, g, v, q, r->host_tsc, &raw))
						continue;
					l = pv_lead(s, g, c, q, r->host_tsc, raw);
					if (l > q->clamp_ns)
						q->clamp_ns = l;
				}
			}
			if (q->clamp_ns > g->pv_clamp_ns)
				g->pv_clamp_ns = q->clamp_ns;
		}
	}
}

/*
 * The guest TSC and host TSC of kvm-clock reading @guest_ns on @vcpu:
 * the record in force is the last one whose start value is at or below
 * it (the clock only moves forward, but for the clamp), the guest TSC the
 * inverse of its formula, and the host TSC KVM's relation in force then
 * (offsets may change between records: the one whose span holds the
 * result).  0, -ENODATA without records, -ENOENT outside them.
 */
static int pv_to_host_tsc(const struct hgsync *s, const struct hgsync_guest *g, int vcpu,
			  uint64_t guest_ns, uint64_t *guest_tsc, uint64_t *host_tsc,
			  struct hgclock_conversion *conv, uint64_t *clamp_ns)
{
	const struct hgsync_vcpu *v;
	size_t lo, i;
	uint64_t span_lo, span_hi, first = 0;
	ssize_t k;
	bool have = false;

	if (!g->pv_known || !(v = guest_vcpu(s, g, vcpu)) || !v->nr_pv)
		return -ENODATA;
	lo = hg_partition(v->pv, v->nr_pv, sizeof(*v->pv), pv_start_at_or_before, &guest_ns);
	if (lo) {
		i = lo - 1;
		*conv = pv_conv(g, &v->pv[i]);
		*clamp_ns = v->pv[i].clamp_ns;
		span_lo = v->pv[i].host_tsc;
		span_hi = i + 1 < v->nr_pv ? v->pv[i + 1].host_tsc : UINT64_MAX;
	} else {
		/* Before the first record: what the guest's first snapshot read. */
		if ((unsigned int)vcpu >= g->nr_cpus || !g->convs[vcpu].n ||
		    !(g->convs[vcpu].v[0].conv.flags & HGCLOCK_CONV_PVCLOCK))
			return -ENOENT;
		*conv = g->convs[vcpu].v[0].conv;
		*clamp_ns = g->pv_clamp_ns;	/* no record of its own: the largest */
		span_lo = 0;
		span_hi = v->pv[0].host_tsc;
	}
	*guest_tsc = hgsync_conv_invert(conv, guest_ns);
	/* Each offset in force within the record's span, from the one at its start. */
	for (k = offset_index(v, span_lo); k < (ssize_t)v->nr_off; k++) {
		struct hgsync_offset o;
		uint64_t from = k >= 0 && v->off[k].host_tsc > span_lo ? v->off[k].host_tsc : span_lo;
		uint64_t to = k + 1 < (ssize_t)v->nr_off && v->off[k + 1].host_tsc < span_hi ?
			      v->off[k + 1].host_tsc : span_hi;
		uint64_t h;

		if (k >= 0 && v->off[k].host_tsc >= span_hi)
			break;
		if (offset_at(v, from, &o))
			continue;
		h = hgsync_kvm_host_tsc(*guest_tsc, o.tsc_offset, o.tsc_ratio, o.tsc_frac_bits);
		if (!have) {
			first = h;
			have = true;
		}
		if (h >= from && h < to) {
			*host_tsc = h;
			return 0;
		}
	}
	if (!have)
		return -ENOENT;
	*host_tsc = first;	/* a clamped reading: the bound covers it */
	return 0;
}

/*
 * Joins each of @g's exit pairings with the host's half: the same key and
 * sequence number, from the guest CPU's vCPU (cpu_vcpu_id()), in @g's VM
 * when it is known.  Without a known VM a match must be unique (another
 * guest's key could collide).  A guest half whose clocks went backwards
 * (a TSC write in between) is dropped.  In a known VM, a host half on
 * another vcpu_id says the vCPU identity is wrong (id_pairs_other).
 */
static int join_pairs(const struct hgsync *s, struct hgsync_guest *g)
{
	g->nr_xpairs = 0;
	g->id_pairs_checked = g->id_pairs_other = 0;
	for (size_t i = 0; i < g->nr_gpairs; i++) {
		const struct hgclock_rec_exit_pair *gp = &g->gpairs[i];
		struct hgclock_rec_exit_host key = { .key = gp->key, .seq = gp->seq };
		const struct hgclock_rec_exit_host *h, *match = NULL;
		int32_t want = cpu_vcpu_id(g, (int)gp->hdr.cpu);
		size_t lo, nmatch = 0, nother = 0;

		if (gp->tsc_after < gp->tsc_before ||
		    gp->sched_clock_after_ns < gp->sched_clock_before_ns)
			continue;
		lo = hg_partition(s->hpairs, s->nr_hpairs, sizeof(*s->hpairs), hpair_below, &key);
		for (h = s->hpairs + lo; h < s->hpairs + s->nr_hpairs && !cmp_hpair(h, &key); h++) {
			if (g->vm.vm_pid > 0 && h->vm_pid != g->vm.vm_pid)
				continue;
			if (h->vcpu_id != want || want < 0) {
				nother++;
				continue;
			}
			match = h;
			nmatch++;
		}
		if (g->vm.vm_pid > 0 && (nmatch || nother)) {
			g->id_pairs_checked++;
			if (!nmatch) {
				g->id_pairs_other++;
				g->id_flags |= HGSYNC_ID_PAIRS_DISAGREE;
			}
		}
		if (nmatch == 1) {
			struct hgsync_xpair x = {
				.guest_cpu = gp->hdr.cpu, .seq = gp->seq,
				.guest_tsc_before = gp->tsc_before, .guest_tsc_after = gp->tsc_after,
				.guest_ns_before = gp->sched_clock_before_ns,
				.guest_ns_after = gp->sched_clock_after_ns,
				.host_tsc = match->hdr.tsc, .host_ns = match->hdr.sched_clock_ns,
				.host_cpu = (int32_t)match->hdr.cpu,
			};

			if (PUSH(g->xpairs, g->nr_xpairs, g->cap_xpairs, x))
				return -ENOMEM;
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
static struct hgsync_obs xpair_obs(const struct hgsync *s, const struct hgsync_guest *g,
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
 * A marker pairing as a bracket, as xpair_obs() does an exit pairing's:
 * the exit lay between the guest's markers b and e (in its trace clock),
 * so the host value at b lies in [H - rate * (e - b), H].  In TSC counts
 * without the guest's TSC kHz (no agent) the rates are taken as equal:
 * KVM's scaling is then the kvm-exact method's business.
 */
static struct hgsync_obs mpair_obs(const struct hgsync *s, const struct hgsync_guest *g,
				   const struct hgsync_mpair *m)
{
	uint64_t w = m->guest_end - m->guest_begin;

	if (g->marker_clock == HGCOR_CLOCK_TSC && s->host_info.tsc_khz && g->info.tsc_khz)
		w = (uint64_t)((u128)w * s->host_info.tsc_khz / g->info.tsc_khz);
	w += w / 1000 + 1;
	return (struct hgsync_obs){ m->guest_begin, m->host_value > w ? m->host_value - w : 0,
				    m->host_value };
}

int hgsync_load(struct hgsync *s, const void *buf, size_t len, int flags, size_t *err_pos)
{
	struct hgcor_reader r;
	struct hgcor_view v;
	int ret;

	memset(s, 0, sizeof(*s));
	ret = hgcor_open(&r, buf, len);
	while (!ret && (ret = hgcor_next(&r, &v)) > 0) {
		struct hgsync_guest *g = NULL;
		uint32_t id = 0;

		ret = 0;
		if (v.type == HGCOR_SEC_GUEST_INFO || v.type == HGCOR_SEC_GUEST_RECORDS ||
		    v.type == HGCOR_SEC_PROBES || v.type == HGCOR_SEC_CPU_MAP) {
			memcpy(&id, v.payload, 4);
			ret = guest_for(s, id, &g);
			if (ret)
				break;
		}
		switch (v.type) {
		case HGCOR_SEC_HOST_INFO:
			memcpy(&s->host_info, v.payload,
			       v.length < sizeof(s->host_info) ? v.length : sizeof(s->host_info));
			break;
		case HGCOR_SEC_HOST_RECORDS:
			ret = hgcor_walk_records(v.payload, v.length, host_rec, s);
			break;
		case HGCOR_SEC_GUEST_INFO:
			g->present = 1;
			memcpy(&g->info, v.payload + 8, v.length - 8 < sizeof(g->info) ?
			       v.length - 8 : sizeof(g->info));
			break;
		case HGCOR_SEC_GUEST_RECORDS: {
			struct guest_ctx gc = { s, g };

			ret = hgcor_walk_records(v.payload + 8, v.length - 8, guest_rec, &gc);
			break;
		}
		case HGCOR_SEC_PROBES: {
			size_t n = (v.length - 8) / sizeof(struct hgcor_probe);

			for (size_t i = 0; i < n && !ret; i++) {
				struct hgcor_probe p;

				memcpy(&p, v.payload + 8 + i * sizeof(p), sizeof(p));
				ret = PUSH(g->probes, g->nr_probes, g->cap_probes, p);
			}
			break;
		}
		case HGCOR_SEC_CPU_MAP:
			ret = cpu_map_add(g, v.payload + 8, v.length - 8);
			break;
		case HGCOR_SEC_GUEST_VM: {
			struct hgcor_guest_vm vm;

			memcpy(&vm, v.payload, sizeof(vm));
			ret = guest_for(s, vm.guest_id, &g);
			if (ret)
				break;
			g->vm = vm;
			break;
		}
		case HGCOR_SEC_SEGMENTS: {
			size_t n = v.length / sizeof(struct hgcor_segment);

			if (flags & HGSYNC_IGNORE_SEGMENTS)
				break;
			s->has_file_segments = 1;
			for (size_t i = 0; i < n && !ret; i++) {
				struct hgcor_segment seg;

				memcpy(&seg, v.payload + i * sizeof(seg), sizeof(seg));
				ret = guest_for(s, seg.guest_id, &g);
				if (ret)
					break;
				ret = PUSH(g->segs, g->nr_segs, g->cap_segs, seg);
			}
			break;
		}
		default:
			break;
		}
	}
	/* The loop may stop on a section it refused: free a decompressed payload. */
	hgcor_release(&r);
	if (err_pos)
		*err_pos = r.pos;
	if (ret == 0)
		s->complete = 1;
	else if (ret == HGCOR_E_NO_END && (flags & HGSYNC_ALLOW_OPEN))
		ret = 0;
	if (ret < 0) {
		hgsync_free(s);
		return ret;
	}
	for (size_t i = 0; i < s->nr_vcpus; i++) {
		struct hgsync_vcpu *vc = &s->vcpus[i];

		/* qsort()'s base must not be NULL, even for 0 elements */
		if (vc->nr_off)
			qsort(vc->off, vc->nr_off, sizeof(*vc->off), cmp_offset);
		if (vc->nr_where)
			qsort(vc->where, vc->nr_where, sizeof(*vc->where), cmp_where);
		if (vc->nr_pv)
			qsort(vc->pv, vc->nr_pv, sizeof(*vc->pv), cmp_pv);
	}
	if (s->nr_hpairs)
		qsort(s->hpairs, s->nr_hpairs, sizeof(*s->hpairs), cmp_hpair);
	for (unsigned int i = 0; i < s->nr_guests; i++)
		s->guests[i].agentless = !s->guests[i].present && s->guests[i].vm.vm_pid > 0;
	for (unsigned int i = 0; i < s->nr_guests; i++) {
		ret = identity_setup(s, &s->guests[i]);
		if (!ret)
			ret = join_pairs(s, &s->guests[i]);
		if (!ret)
			pv_setup(s, &s->guests[i]);
		if (!ret)
			ret = index_segs(s, &s->guests[i]);
		if (ret) {
			hgsync_free(s);
			return ret;
		}
	}
	return 0;
}

void hgsync_free(struct hgsync *s)
{
	for (unsigned int i = 0; i < s->nr_host_cpus; i++)
		free(s->host_convs[i].v);
	free(s->host_convs);
	for (size_t i = 0; i < s->nr_vcpus; i++) {
		free(s->vcpus[i].off);
		free(s->vcpus[i].where);
		free(s->vcpus[i].pv);
	}
	free(s->vcpus);
	free(s->vcpu_slots);
	free(s->hpairs);
	for (unsigned int i = 0; i < s->nr_guests; i++) {
		struct hgsync_guest *g = &s->guests[i];

		for (unsigned int c = 0; c < g->nr_cpus; c++)
			free(g->convs[c].v);
		free(g->convs);
		free(g->probes);
		free(g->gpairs);
		free(g->xpairs);
		free(g->mpairs);
		free(g->segs);
		free(g->seg_maxend);
		free(g->samples);
		free(g->cpu_vcpu);
		free(g->vcpu_cpu);
	}
	free(s->guests);
	memset(s, 0, sizeof(*s));
}

/* ---- building the mapping ---- */

static const struct hgcor_segment *find_seg(const struct hgsync_guest *g, uint32_t method,
					    uint32_t clock, int vcpu, uint64_t guest_value);

/*
 * KVM exact segments of one vCPU: one per distinct offset/scaling in
 * force, from the host's SEEN and TSC_OFFSET records.  KVM writes the
 * offset while the vCPU is out of the guest, so every guest TSC reading
 * falls wholly before or after a change.
 */
static int kvm_segments(struct hgsync_guest *g, const struct hgsync_vcpu *v, int guest_cpu)
{
	size_t i = 0;

	/*
	 * A change first (the vCPU was tracked before the recording and
	 * its state arrived after): before it, its previous offset held.
	 */
	if (v->nr_off && v->off[0].is_change) {
		const struct hgsync_offset *o = &v->off[0];
		struct hgcor_segment seg = {
			.guest_id = g->id, .vcpu_id = guest_cpu,
			.method = HGCOR_METHOD_KVM_EXACT, .clock = HGCOR_CLOCK_TSC,
			.host_tsc_start = 0, .host_tsc_end = o->host_tsc,
			.tsc_offset = o->prev_offset,
			.tsc_ratio = o->known ? o->tsc_ratio : 0,
			.tsc_frac_bits = o->known ? o->tsc_frac_bits : 0,
		};

		seg.guest_start = 0;
		seg.guest_end = hgsync_kvm_guest_tsc(seg.host_tsc_end, seg.tsc_offset,
						     seg.tsc_ratio, seg.tsc_frac_bits);
		if (PUSH(g->segs, g->nr_segs, g->cap_segs, seg))
			return -ENOMEM;
	}

	while (i < v->nr_off) {
		const struct hgsync_offset *o = &v->off[i];
		struct hgcor_segment seg = {
			.guest_id = g->id, .vcpu_id = guest_cpu,
			.method = HGCOR_METHOD_KVM_EXACT, .clock = HGCOR_CLOCK_TSC,
			.tsc_offset = o->tsc_offset,
			.tsc_ratio = o->known ? o->tsc_ratio : 0,
			.tsc_frac_bits = o->known ? o->tsc_frac_bits : 0,
		};
		size_t j = i + 1;

		/* A rewrite of the same values is not a change. */
		while (j < v->nr_off && v->off[j].tsc_offset == o->tsc_offset &&
		       v->off[j].tsc_ratio == o->tsc_ratio)
			j++;
		seg.host_tsc_start = i || o->is_change ? o->host_tsc : 0;
		seg.host_tsc_end = j < v->nr_off ? v->off[j].host_tsc : UINT64_MAX;
		seg.guest_start = seg.host_tsc_start ?
			hgsync_kvm_guest_tsc(seg.host_tsc_start, seg.tsc_offset, seg.tsc_ratio,
					     seg.tsc_frac_bits) : 0;
		seg.guest_end = j < v->nr_off ?
			hgsync_kvm_guest_tsc(seg.host_tsc_end, seg.tsc_offset, seg.tsc_ratio,
					     seg.tsc_frac_bits) : UINT64_MAX;
		if (PUSH(g->segs, g->nr_segs, g->cap_segs, seg))
			return -ENOMEM;
		i = j;
	}
	return 0;
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
 * UINT64_MAX: where spans overlap, the latest epoch wins (find_seg()).
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
	const struct hgsync_vcpu *v = g->vm.vm_pid > 0 ? guest_vcpu(s, g, vcpu) : NULL;

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

			at[np++] = (struct probe_at){ x->host_tsc, xpair_obs(s, g, x, clock) };
		} else if (method == HGSYNC_METHOD_MARKER) {
			const struct hgsync_mpair *m = &g->mpairs[idx[k]];

			at[np++] = (struct probe_at){ m->host_tsc, mpair_obs(s, g, m) };
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
			int cpu = vcpu_guest_cpu(g, s->vcpus[i].vcpu_id);

			if (s->vcpus[i].vm_pid == g->vm.vm_pid && cpu >= 0)
				ret = kvm_segments(g, &s->vcpus[i], cpu);
		}
	if (!ret)
		ret = index_segs(s, g);
	if (ret)
		return ret;
	/*
	 * Check KVM's mapping against the probes: each guest reading, in
	 * host TSC, must fall inside its probe's round trip.  A VM that is
	 * not this guest fails nearly every probe.
	 */
	for (i = 0; i < g->nr_probes; i++) {
		const struct hgcor_probe *p = &g->probes[i];
		const struct hgcor_segment *seg = find_seg(g, HGCOR_METHOD_KVM_EXACT,
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
		const struct hgcor_segment *sb = find_seg(g, HGCOR_METHOD_KVM_EXACT, HGCOR_CLOCK_TSC,
							  (int)x->guest_cpu, x->guest_tsc_before);
		const struct hgcor_segment *sa = find_seg(g, HGCOR_METHOD_KVM_EXACT, HGCOR_CLOCK_TSC,
							  (int)x->guest_cpu, x->guest_tsc_after);
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
	return ret ? ret : index_segs(s, g);
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

int hgsync_guest_known(const struct hgsync *s, uint32_t guest_id)
{
	return guest_id < s->nr_guests &&
	       (s->guests[guest_id].present || s->guests[guest_id].agentless);
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

		return ret ? ret : index_segs(s, g);
	}
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
 * holds @host_tsc (the sample's own epoch, index_samples()); without
 * one (UINT64_MAX: no preference), the latest as find_seg().
 */
static const struct hgcor_segment *find_seg_at(const struct hgsync_guest *g, uint32_t method,
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

static const struct hgcor_segment *find_seg(const struct hgsync_guest *g, uint32_t method,
					    uint32_t clock, int vcpu, uint64_t guest_value)
{
	return find_seg_at(g, method, clock, vcpu, guest_value, UINT64_MAX);
}

/* The last conversion taken at or before @key (TSC or ns), else the first. */
static const struct hgclock_rec_cyc2ns *conv_at(const struct hgsync_convs *cv, uint64_t key,
						bool by_ns)
{
	size_t k;

	if (!cv || !cv->n)
		return NULL;
	k = hg_partition(cv->v, cv->n, sizeof(*cv->v),
			 by_ns ? cyc2ns_ns_at_or_before : cyc2ns_tsc_at_or_before, &key);
	return &cv->v[k ? k - 1 : 0];
}

static int32_t host_cpu_at(const struct hgsync *s, const struct hgsync_guest *g, int vcpu,
			   uint64_t host_tsc)
{
	struct hgsync_place p;

	hgsync_vcpu_place(s, g->id, vcpu, host_tsc, &p);
	return p.host_cpu;
}

/* Error bound of a conversion: 0 exact, its bound if derived, else none. */
static uint64_t conv_bound(const struct hgclock_conversion *c)
{
	if (c->flags & HGCLOCK_CONV_EXACT)
		return 0;
	if (c->flags & HGCLOCK_CONV_DERIVED)
		return c->bound_ns;
	return HGSYNC_NO_BOUND;
}

static int to_host_kvm(const struct hgsync *s, const struct hgsync_guest *g, int vcpu,
		       uint32_t clock, uint64_t guest_value, struct hgsync_result *r)
{
	const struct hgclock_rec_cyc2ns *gc = NULL, *hc;
	const struct hgclock_conversion *gconv = NULL;
	struct hgclock_conversion pvc;
	const struct hgcor_segment *seg;
	uint64_t guest_tsc = guest_value, host_tsc = 0, gb = 0, hb, spread = 0;
	int32_t hcpu;

	if (clock != HGSYNC_CLOCK_TSC) {
		gc = conv_at(vcpu >= 0 && (unsigned int)vcpu < g->nr_cpus ? &g->convs[vcpu] : NULL,
			     guest_value, true);
		if (!gc || !(gc->conv.flags & HGCLOCK_CONV_VALID))
			return -ENODATA;
		if (clock == HGSYNC_CLOCK_LOCAL) {
			if (!(gc->conv.flags & HGCLOCK_CONV_LOCAL_OFFSET))
				return -ENODATA;
			guest_value -= gc->conv.local_offset_ns;
			/* Snapshots are keyed by sched_clock: look again with it. */
			gc = conv_at(&g->convs[vcpu], guest_value, true);
			if (!(gc->conv.flags & HGCLOCK_CONV_VALID))
				return -ENODATA;
		}
		gb = conv_bound(&gc->conv);
		if (gb == HGSYNC_NO_BOUND && g->pv_known &&
		    !pv_to_host_tsc(s, g, vcpu, guest_value, &guest_tsc, &host_tsc, &pvc, &gb)) {
			/* kvm-clock without the stable bit: KVM's own parameters. */
			gconv = &pvc;
		} else if (gb == HGSYNC_NO_BOUND) {
			return -ENODATA;
		} else {
			gconv = &gc->conv;
			guest_tsc = hgsync_conv_invert(gconv, guest_value);
		}
	}
	seg = find_seg(g, HGCOR_METHOD_KVM_EXACT, HGCOR_CLOCK_TSC, vcpu, guest_tsc);
	if (gconv != &pvc) {
		if (!seg)
			return -ENOENT;
		host_tsc = hgsync_kvm_host_tsc(guest_tsc, seg->tsc_offset, seg->tsc_ratio,
					       seg->tsc_frac_bits);
	}
	hcpu = host_cpu_at(s, g, vcpu, host_tsc);
	r->host_tsc = host_tsc;
	r->method = HGCOR_METHOD_KVM_EXACT;
	r->seg = seg;
	r->host_cpu = hcpu;
	if (clock == HGSYNC_CLOCK_TSC) {
		r->host_value = host_tsc;
		r->bound_ns = 0;
		return 0;
	}
	/* The host's conversion where the vCPU ran, else any CPU's. */
	hc = NULL;
	if (hcpu >= 0 && (unsigned int)hcpu < s->nr_host_cpus)
		hc = conv_at(&s->host_convs[hcpu], host_tsc, false);
	for (unsigned int c = 0; !hc && c < s->nr_host_cpus; c++)
		hc = conv_at(&s->host_convs[c], host_tsc, false);
	if (!hc)
		return -ENODATA;
	hb = conv_bound(&hc->conv);
	if (hb == HGSYNC_NO_BOUND)
		return -ENODATA;
	{
		/*
		 * One guest ns spans several guest TSC counts (a few when the
		 * guest's TSC runs above 1 GHz): the reading happened at one
		 * of them, unknown.  Take the middle of their host times; half
		 * their spread joins the bound.
		 */
		uint64_t last_tsc = hgsync_conv_invert(gconv, guest_value + 1) - 1;
		uint64_t host_last, ns_first, ns_last;

		if ((int64_t)(last_tsc - guest_tsc) < 0 || last_tsc - guest_tsc > 1u << 20)
			last_tsc = guest_tsc;
		/* The same offset: the TSC counts of one ns are next to each other. */
		host_last = host_tsc + (last_tsc - guest_tsc);
		if (seg && gconv != &pvc)
			host_last = hgsync_kvm_host_tsc(last_tsc, seg->tsc_offset, seg->tsc_ratio,
							seg->tsc_frac_bits);
		ns_first = hgclock_conv_apply(&hc->conv, host_tsc);
		ns_last = hgclock_conv_apply(&hc->conv, host_last);
		if (ns_last < ns_first)
			ns_last = ns_first;
		r->host_value = ns_first + (ns_last - ns_first) / 2;
		spread = (ns_last - ns_first + 1) / 2;
	}
	if (clock == HGSYNC_CLOCK_LOCAL) {
		if (!(hc->conv.flags & HGCLOCK_CONV_LOCAL_OFFSET))
			return -ENODATA;
		r->host_value += hc->conv.local_offset_ns;
	}
	/* Truncation: each side's formula floors, so one ns either way. */
	{
		u128 b = (u128)gb + hb + spread + 1;

		r->bound_ns = b >= HGSYNC_NO_BOUND ? HGSYNC_NO_BOUND : (uint64_t)b;
	}
	return 0;
}

/* A PROBE or EXIT segment (@method): both are fitted lines. */
static int to_host_probe(const struct hgsync *s, const struct hgsync_guest *g, int vcpu,
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
			gc = conv_at(&g->convs[vcpu], guest_value, true);
		for (unsigned int c = 0; !hc && c < s->nr_host_cpus; c++)
			hc = conv_at(&s->host_convs[c], 0, false);
		if (!gc || !hc || !(gc->conv.flags & hc->conv.flags & HGCLOCK_CONV_LOCAL_OFFSET))
			return -ENODATA;
		local_off_guest = gc->conv.local_offset_ns;
		local_off_host = hc->conv.local_offset_ns;
		guest_value -= local_off_guest;
		clock = HGSYNC_CLOCK_SCHED;
	}
	seg = find_seg(g, method, clock, vcpu, guest_value);
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

int hgsync_vcpu_place(const struct hgsync *s, uint32_t guest_id, int vcpu, uint64_t host_tsc,
		      struct hgsync_place *p)
{
	const struct hgsync_guest *g;
	const struct hgsync_vcpu *v;
	size_t lo;

	*p = (struct hgsync_place){ -1, -1, 0, 0, UINT64_MAX };
	if (guest_id >= s->nr_guests)
		return -ENOENT;
	g = &s->guests[guest_id];
	v = guest_vcpu(s, g, vcpu);
	if (!v)
		return -ENOENT;
	p->tid = v->tid;
	if (!v->nr_where)
		return 0;
	lo = hg_partition(v->where, v->nr_where, sizeof(*v->where), where_at_or_before, &host_tsc);
	lo = lo ? lo - 1 : 0;
	if (v->where[lo].host_tsc > host_tsc) {
		p->until_tsc = v->where[lo].host_tsc;
		return 0;
	}
	p->host_cpu = v->where[lo].host_cpu;
	p->running = v->where[lo].running;
	p->since_tsc = v->where[lo].host_tsc;
	if (lo + 1 < v->nr_where)
		p->until_tsc = v->where[lo + 1].host_tsc;
	return 0;
}

/* The conversion of @host_cpu (else any CPU's) in force at @key. */
static const struct hgclock_rec_cyc2ns *host_conv_at(const struct hgsync *s, int host_cpu,
						     uint64_t key, bool by_ns)
{
	const struct hgclock_rec_cyc2ns *c = NULL;

	if (host_cpu >= 0 && (unsigned int)host_cpu < s->nr_host_cpus)
		c = conv_at(&s->host_convs[host_cpu], key, by_ns);
	for (unsigned int i = 0; (!c || !(c->conv.flags & HGCLOCK_CONV_VALID)) &&
				 i < s->nr_host_cpus; i++)
		c = conv_at(&s->host_convs[i], key, by_ns);
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

int hgsync_to_host_by(const struct hgsync *s, uint32_t guest_id, int vcpu, uint32_t clock,
		      uint64_t guest_value, uint32_t method, struct hgsync_result *r)
{
	const struct hgsync_guest *g;
	int ret;

	memset(r, 0, sizeof(*r));
	r->bound_ns = HGSYNC_NO_BOUND;
	r->host_cpu = -1;
	if (guest_id >= s->nr_guests || clock < HGSYNC_CLOCK_TSC || clock > HGSYNC_CLOCK_LOCAL)
		return -EINVAL;
	g = &s->guests[guest_id];
	if (method == HGCOR_METHOD_KVM_EXACT)
		return to_host_kvm(s, g, vcpu, clock, guest_value, r);
	if (method == HGCOR_METHOD_PROBE || method == HGCOR_METHOD_EXIT ||
	    method == HGSYNC_METHOD_MARKER)
		return to_host_probe(s, g, vcpu, clock, guest_value, method, r);
	/*
	 * The best method first: KVM's own numbers; else the fitted line
	 * with the tighter bound here, exit pairings or probes.
	 */
	ret = to_host_kvm(s, g, vcpu, clock, guest_value, r);
	if (ret) {
		struct hgsync_result rp = *r;
		int ret2 = to_host_probe(s, g, vcpu, clock, guest_value, HGCOR_METHOD_EXIT, r);
		int ret3 = to_host_probe(s, g, vcpu, clock, guest_value, HGCOR_METHOD_PROBE, &rp);

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
		int ret4 = to_host_probe(s, g, vcpu, clock, guest_value, HGSYNC_METHOD_MARKER,
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
