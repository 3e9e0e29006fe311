// SPDX-License-Identifier: LGPL-2.1
/*
 * Guest-to-host clock mapping: the KVM-exact method (Documentation/sync.rst,
 * "KVM's relation and its inverse", "KVM-exact segments", "Chaining the
 * conversions: local and perf" and "kvm-clock without the stable bit:
 * KVM's own parameters").  KVM's TSC relation both ways, the inverse of
 * a conversion, one segment per relation in force, kvm-clock from the
 * host's PVCLOCK records with its clamp bound, and a guest value
 * converted by them (hgs_to_host_kvm()).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "bsearch.h"
#include "corr_check.h"
#include "libhgclock.h"
#include "sync.h"
#include "sync_internal.h"

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

/*
 * KVM exact segments of one vCPU: one per distinct offset/scaling in
 * force, from the host's SEEN and TSC_OFFSET records.  KVM writes the
 * offset while the vCPU is out of the guest, so every guest TSC reading
 * falls wholly before or after a change.
 */
int hgs_kvm_segments(struct hgsync_guest *g, const struct hgsync_vcpu *v, int guest_cpu)
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

/* ---- kvm-clock from the host's PVCLOCK records ---- */

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
		const struct hgsync_vcpu *w = hgs_guest_vcpu(s, g, (int)u);
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
void hgs_pv_setup(const struct hgsync *s, struct hgsync_guest *g)
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
		const struct hgsync_vcpu *v = hgs_guest_vcpu(s, g, (int)c);

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
		struct hgsync_vcpu *v = (struct hgsync_vcpu *)hgs_guest_vcpu(s, g, (int)c);
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
		struct hgsync_vcpu *v = (struct hgsync_vcpu *)hgs_guest_vcpu(s, g, (int)c);

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
				const struct hgsync_vcpu *w = hgs_guest_vcpu(s, g, (int)u);
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

	if (!g->pv_known || !(v = hgs_guest_vcpu(s, g, vcpu)) || !v->nr_pv)
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

/* ---- converting ---- */

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

int hgs_to_host_kvm(const struct hgsync *s, const struct hgsync_guest *g, int vcpu,
		    uint32_t clock, uint64_t guest_value, struct hgsync_result *r)
{
	const struct hgclock_rec_cyc2ns *gc = NULL, *hc;
	const struct hgclock_conversion *gconv = NULL;
	struct hgclock_conversion pvc;
	const struct hgcor_segment *seg;
	uint64_t guest_tsc = guest_value, host_tsc = 0, gb = 0, hb, spread = 0;
	int32_t hcpu;

	if (clock != HGSYNC_CLOCK_TSC) {
		gc = hgs_conv_at(vcpu >= 0 && (unsigned int)vcpu < g->nr_cpus ?
				 &g->convs[vcpu] : NULL, guest_value, true);
		if (!gc || !(gc->conv.flags & HGCLOCK_CONV_VALID))
			return -ENODATA;
		if (clock == HGSYNC_CLOCK_LOCAL) {
			if (!(gc->conv.flags & HGCLOCK_CONV_LOCAL_OFFSET))
				return -ENODATA;
			guest_value -= gc->conv.local_offset_ns;
			/* Snapshots are keyed by sched_clock: look again with it. */
			gc = hgs_conv_at(&g->convs[vcpu], guest_value, true);
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
	seg = hgs_find_seg(g, HGCOR_METHOD_KVM_EXACT, HGCOR_CLOCK_TSC, vcpu, guest_tsc);
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
		hc = hgs_conv_at(&s->host_convs[hcpu], host_tsc, false);
	for (unsigned int c = 0; !hc && c < s->nr_host_cpus; c++)
		hc = hgs_conv_at(&s->host_convs[c], host_tsc, false);
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
	/*
	 * With both conversions exact, [ns_first, ns_last] holds exactly
	 * the values the host's clock read while the guest's read
	 * guest_value: the guest's flooring is the span of TSC counts, the
	 * host's is the same formula applied here.  The middle is then
	 * within spread of the truth, nothing more.  A derived conversion
	 * floors a formula that is not the kernel's: one ns more.
	 */
	{
		u128 b = (u128)gb + hb + spread + (gb || hb ? 1 : 0);

		r->bound_ns = b >= HGSYNC_NO_BOUND ? HGSYNC_NO_BOUND : (uint64_t)b;
	}
	return 0;
}
