// SPDX-License-Identifier: LGPL-2.1
/*
 * Guest-to-host clock mapping: the host's vCPU threads.  Their table
 * (a seeded hash of VM and vcpu_id), the guest CPU each one is
 * (Documentation/sync.rst, "vCPU identity": the agent's CPU map or the
 * assumption, and what contradicts it), and where a vCPU ran
 * (hgsync_vcpu_place()).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "bsearch.h"
#include "corr_check.h"
#include "sync.h"
#include "sync_internal.h"

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

struct hgsync_vcpu *hgs_vcpu_for(struct hgsync *s, int32_t vm_pid, int32_t vcpu_id)
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
int32_t hgs_cpu_vcpu_id(const struct hgsync_guest *g, int cpu)
{
	if (cpu < 0)
		return -1;
	if (!g->nr_cpu_vcpu)
		return cpu;
	return (unsigned int)cpu < g->nr_cpu_vcpu ? g->cpu_vcpu[cpu] : -1;
}

/* The reverse: the guest CPU that is @vcpu_id, -1 when none. */
int hgs_vcpu_guest_cpu(const struct hgsync_guest *g, int32_t vcpu_id)
{
	if (vcpu_id < 0 || vcpu_id >= HGCOR_MAX_VCPU_ID)
		return -1;
	if (!g->nr_cpu_vcpu)
		return vcpu_id;
	return g->vcpu_cpu && (unsigned int)vcpu_id < g->nr_vcpu_cpu ? g->vcpu_cpu[vcpu_id] : -1;
}

/* The host vCPU thread of guest CPU @cpu of @g, NULL when unknown. */
const struct hgsync_vcpu *hgs_guest_vcpu(const struct hgsync *s, const struct hgsync_guest *g,
					 int cpu)
{
	int32_t id = hgs_cpu_vcpu_id(g, cpu);

	return id < 0 ? NULL : vcpu_find(s, g->vm.vm_pid, id);
}

/* One CPU_MAP section's entries (already range-checked by corr_check.c). */
int hgs_cpu_map_add(struct hgsync_guest *g, const uint8_t *p, uint64_t len)
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
int hgs_identity_setup(const struct hgsync *s, struct hgsync_guest *g)
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
	return guest_id < s->nr_guests ? hgs_cpu_vcpu_id(&s->guests[guest_id], cpu) : -1;
}

int hgsync_vcpu_guest_cpu(const struct hgsync *s, uint32_t guest_id, int vcpu_id)
{
	return guest_id < s->nr_guests ? hgs_vcpu_guest_cpu(&s->guests[guest_id], vcpu_id) : -1;
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

static bool where_at_or_before(const void *elem, const void *key)
{
	return ((const struct hgsync_where *)elem)->host_tsc <= *(const uint64_t *)key;
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
	v = hgs_guest_vcpu(s, g, vcpu);
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
