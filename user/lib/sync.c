// SPDX-License-Identifier: LGPL-2.1
/*
 * Guest-to-host clock mapping (see sync.h and Documentation/sync.rst):
 * the queries, hgsync_to_host*(), and which method answers ("Choosing a
 * method"), through a migration's incarnations.
 *
 * The mapping's files, in layers (each calls only the ones below it;
 * tools/layer-check.py fails make check on a call back up):
 *
 *   sync.c        this dispatcher, on top
 *   sync_load.c   reading a correlation file into the model
 *   sync_bound.c  the fitted methods' values and their bounds between
 *                 samples
 *   sync_fit.c    building the segments: the fits of probes, exit
 *                 pairings and marker pairings
 *   sync_kvm.c    the KVM-exact method and kvm-clock from KVM's own
 *                 parameters
 *   sync_vcpu.c   the host's vCPU threads, their host CPUs, and which
 *                 guest CPU each is ("vCPU identity")
 *   sync_core.c   the leaf: growing arrays, names, the segment index,
 *                 the host's own conversions, why a value has no mapping
 *
 * sync_internal.h declares what the files share, by file; the model
 * (struct hgsync) is built by sync_load.c and read-only afterwards.
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
