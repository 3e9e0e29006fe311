// SPDX-License-Identifier: LGPL-2.1
/*
 * Guest-to-host clock mapping: reading a correlation file
 * (Documentation/file-format.rst) into the model of
 * Documentation/sync.rst: hgsync_load() and hgsync_free().  The host's
 * records (conversions, vCPU runs and stops, TSC offsets, kvm-clock
 * parameters, exit pairings' host halves), each guest's information,
 * records, probes and CPU maps, the VMs and the stored segments; then
 * the exit pairings joined ("Exit pairing") and the model indexed.
 *
 * The model is built from a correlation file in one pass.  Host records
 * come per CPU in ring order, so the per-vCPU arrays (TSC offsets, host
 * CPUs) are sorted by host TSC afterwards; conversions stay per CPU in
 * the order the CPU took them.  The host's TSC is assumed synchronized
 * across its CPUs (KVM itself assumes it for a stable guest TSC).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bsearch.h"
#include "corr_check.h"
#include "libhgclock.h"
#include "sync.h"
#include "sync_internal.h"

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
		v = hgs_vcpu_for(s, r.seen.vm_pid, r.seen.vcpu_id);
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

		v = hgs_vcpu_for(s, r.tsc_offset.vm_pid, r.tsc_offset.vcpu_id);
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

		v = hgs_vcpu_for(s, r.pv.vm_pid, r.pv.vcpu_id);
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
		v = hgs_vcpu_for(s, r.vcpu.vm_pid, r.vcpu.vcpu_id);
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

/*
 * Joins each of @g's exit pairings with the host's half: the same key and
 * sequence number, from the guest CPU's vCPU (hgs_cpu_vcpu_id()), in @g's VM
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
		int32_t want = hgs_cpu_vcpu_id(g, (int)gp->hdr.cpu);
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
 * A DISRUPTION section: kept for dump and merge, and, unless the guest
 * never came back or came back as another boot, it links the two
 * incarnations (hgsync_guest.prev_id/next_id).  Its ids index s->guests:
 * checked here whatever corr_check.c said, and a link only from an
 * earlier id to a later one, once each way, so that chains never loop.
 */
static int disruption_add(struct hgsync *s, const struct hgcor_disruption *d)
{
	struct hgsync_guest *old, *new;
	int ret;

	if (d->kind < HGCOR_DISRUPT_RECONNECT || d->kind > HGCOR_DISRUPT_KIND_MAX ||
	    d->guest_id >= HGSYNC_MAX_GUESTS ||
	    (d->next_guest_id != HGCOR_NO_GUEST &&
	     (d->next_guest_id <= d->guest_id || d->next_guest_id >= HGSYNC_MAX_GUESTS)))
		return HGCOR_E_CONTENT;
	if (PUSH(s->disr, s->nr_disr, s->cap_disr, *d))
		return -ENOMEM;
	if (d->kind == HGCOR_DISRUPT_GONE || d->kind == HGCOR_DISRUPT_REBOOT ||
	    d->next_guest_id == HGCOR_NO_GUEST)
		return 0;
	ret = guest_for(s, d->next_guest_id, &new);
	if (!ret)
		ret = guest_for(s, d->guest_id, &old);	/* new may have moved: taken again */
	if (ret)
		return ret;
	new = &s->guests[d->next_guest_id];
	if (old->has_next || new->has_prev)
		return 0;	/* a second claim on either: the first stands */
	old->has_next = new->has_prev = 1;
	old->next_id = d->next_guest_id;
	new->prev_id = d->guest_id;
	return 0;
}

/* The DISRUPTION that ended incarnation @id and began the next, or NULL. */
static const struct hgcor_disruption *disruption_after(const struct hgsync *s, uint32_t id)
{
	const struct hgsync_guest *g = &s->guests[id];

	for (size_t i = 0; g->has_next && i < s->nr_disr; i++)
		if (s->disr[i].guest_id == id && s->disr[i].next_guest_id == g->next_id)
			return &s->disr[i];
	return NULL;
}

/*
 * When vCPU thread @v last stopped running: the record after its last
 * RUN or SEEN (they follow the thread's scheduling, in the guest or not).
 * false when it was still running at its last record, or never seen.
 */
static bool vcpu_last_exit(const struct hgsync_vcpu *v, uint64_t *host_tsc)
{
	for (size_t w = v->nr_where; w-- > 0;)
		if (v->where[w].running) {
			if (w + 1 >= v->nr_where)
				return false;
			*host_tsc = v->where[w + 1].host_tsc;
			return true;
		}
	return false;
}

/* The offset record of @v in force at @host_tsc (the last at or before it), or NULL. */
static const struct hgsync_offset *vcpu_offset_at(const struct hgsync_vcpu *v, uint64_t host_tsc)
{
	const struct hgsync_offset *o = NULL;

	for (size_t i = 0; i < v->nr_off && v->off[i].host_tsc <= host_tsc; i++)
		o = &v->off[i];
	return o;
}

/*
 * Each incarnation's host TSC span (hgsync_guest.span_start_tsc): from
 * its VM's first vCPU record, the first VM entry of a VM that a
 * migration or restore started, to its vCPUs' last exit from the guest.  A VM that is not known
 * (no records of it) falls back on the recorder's times: from when the
 * previous session was found over, to when the next one began.  Two
 * incarnations in one VM process (a reconnection) meet at the
 * disruption's times, where either maps a value the same.
 */
static void incarnation_spans(struct hgsync *s)
{
	for (unsigned int i = 0; i < s->nr_guests; i++) {
		struct hgsync_guest *g = &s->guests[i];
		const struct hgcor_disruption *before = NULL, *after;
		uint64_t first = UINT64_MAX, last = 0;

		g->span_start_tsc = 0;
		g->span_end_tsc = UINT64_MAX;
		if (g->has_prev)
			before = disruption_after(s, g->prev_id);
		after = disruption_after(s, i);
		/* Gone, or rebooted: this session ended too, with nothing linked after it. */
		for (size_t k = 0; !after && k < s->nr_disr; k++)
			if (s->disr[k].guest_id == i)
				after = &s->disr[k];
		for (size_t k = 0; g->vm.vm_pid > 0 && k < s->nr_vcpus; k++) {
			const struct hgsync_vcpu *v = &s->vcpus[k];
			uint64_t out;

			if (v->vm_pid != g->vm.vm_pid || !v->nr_where)
				continue;
			/* Its start: the first record of a thread is its first VM entry (SEEN). */
			if (v->where[0].host_tsc < first)
				first = v->where[0].host_tsc;
			/*
			 * Its end: its threads' last switch away (a loose end:
			 * QEMU's own work on a stopped vCPU, saving and tearing
			 * it down, still switches it in and out; the newest
			 * incarnation is tried first for that reason).
			 */
			if (!vcpu_last_exit(v, &out))
				out = UINT64_MAX;
			if (out > last)
				last = out;
		}
		if (before)
			g->span_start_tsc = first != UINT64_MAX &&
					    before->old_vm_pid != before->new_vm_pid ?
					    first : before->host_tsc_lost;
		if (after)
			g->span_end_tsc = last && after->old_vm_pid != after->new_vm_pid ?
					  last : after->host_tsc_back;
	}
}

int hgsync_disruption_facts(const struct hgsync *s, size_t i, struct hgsync_disr_facts *f)
{
	const struct hgcor_disruption *d;
	const struct hgsync_offset *old_off = NULL, *new_off = NULL;

	memset(f, 0, sizeof(*f));
	if (i >= s->nr_disr)
		return -EINVAL;
	d = &s->disr[i];
	f->new_first_run_tsc = UINT64_MAX;
	for (size_t k = 0; k < s->nr_vcpus; k++) {
		const struct hgsync_vcpu *v = &s->vcpus[k];

		if (!v->nr_where || v->vm_pid <= 0)
			continue;
		if (v->vm_pid == d->old_vm_pid && d->old_vm_pid != d->new_vm_pid) {
			/*
			 * The last sign that the old VM ran the guest: its
			 * first entry, a kvm-clock update (made right before an
			 * entry).  Its threads' scheduling records go on after
			 * it stopped (QEMU saves and tears the vCPUs down), so
			 * they prove nothing.  Exit pairings come below.
			 */
			uint64_t t = v->where[0].host_tsc;

			if (v->nr_pv && v->pv[v->nr_pv - 1].host_tsc > t)
				t = v->pv[v->nr_pv - 1].host_tsc;
			if (!f->has_old_run || t > f->old_last_run_tsc)
				f->old_last_run_tsc = t;
			f->has_old_run = 1;
		} else if (v->vm_pid == d->new_vm_pid && d->new_vm_pid != d->old_vm_pid) {
			if (v->where[0].host_tsc < f->new_first_run_tsc)
				f->new_first_run_tsc = v->where[0].host_tsc;
			f->has_new_run = 1;
			/* In force at its first entry: not the creation offset before the restore. */
			if (v->vcpu_id == 0)
				new_off = vcpu_offset_at(v, v->where[0].host_tsc);
		}
	}
	if (!f->has_new_run)
		f->new_first_run_tsc = 0;
	/* An exit pairing's host half: the guest ran a CPUID there. */
	for (size_t k = 0; k < s->nr_hpairs; k++)
		if (s->hpairs[k].vm_pid == d->old_vm_pid && d->old_vm_pid != d->new_vm_pid &&
		    d->old_vm_pid > 0 && (!f->has_old_run || s->hpairs[k].hdr.tsc > f->old_last_run_tsc)) {
			f->old_last_run_tsc = s->hpairs[k].hdr.tsc;
			f->has_old_run = 1;
		}
	/* vCPU 0's offset then: what the guest ran with last, not what came after. */
	for (size_t k = 0; f->has_old_run && k < s->nr_vcpus; k++)
		if (s->vcpus[k].vm_pid == d->old_vm_pid && s->vcpus[k].vcpu_id == 0)
			old_off = vcpu_offset_at(&s->vcpus[k], f->old_last_run_tsc);
	/* At one host TSC, the guest TSCs differ by the offsets' difference (same scaling). */
	if (old_off && new_off && old_off->known == new_off->known &&
	    (!old_off->known || (old_off->tsc_ratio == new_off->tsc_ratio &&
				 old_off->tsc_frac_bits == new_off->tsc_frac_bits))) {
		f->kvm_jump_tsc = (int64_t)(new_off->tsc_offset - old_off->tsc_offset);
		f->has_kvm_jump = 1;
	}
	return 0;
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
			ret = hgs_cpu_map_add(g, v.payload + 8, v.length - 8);
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
		case HGCOR_SEC_DISRUPTION: {
			struct hgcor_disruption d;

			memcpy(&d, v.payload, sizeof(d));
			ret = disruption_add(s, &d);
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
	incarnation_spans(s);
	for (unsigned int i = 0; i < s->nr_guests; i++) {
		ret = hgs_identity_setup(s, &s->guests[i]);
		if (!ret)
			ret = join_pairs(s, &s->guests[i]);
		if (!ret)
			hgs_pv_setup(s, &s->guests[i]);
		if (!ret)
			ret = hgs_index(s, &s->guests[i]);
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
	free(s->disr);
	memset(s, 0, sizeof(*s));
}
