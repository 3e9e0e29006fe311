// SPDX-License-Identifier: GPL-2.0
/*
 * Where a guest's time went (analyze.h, Documentation/analyze.rst).
 *
 * State, all bounded by vCPUs, host CPUs and threads seen:
 *   per vCPU: its host thread and host CPU, whether that thread runs
 *     (host sched_switch, or any kvm_* event it traced), its mode (guest,
 *     exit by reason, halted), a disruption, the time charged so far,
 *     its open slice's split and its whole split;
 *   per host CPU: the task running there (the offender of a preempted
 *     vCPU whose thread last ran there), and the hard IRQ and softirq
 *     running there, if any (the offender of a vCPU whose thread it
 *     interrupts in an exit, or of one preempted there);
 *   per guest thread: the totals of its certain slices.
 *
 * Ordering: every event first charges the time since the affected
 * vCPUs' last charge to the component their state said, and only then
 * changes that state.  A host sched_switch on CPU c changes the offender
 * of every preempted vCPU that last ran on c, so those are charged
 * before the CPU's current task changes; an IRQ or softirq entry or exit
 * on c likewise charges every vCPU whose thread runs or waits on c.  A
 * context switch or a VM entry on c ends any interrupt still marked
 * there (its exit lost, or a softirq preempted on PREEMPT_RT), so a lost
 * event costs one interval, not the rest of the trace.  Each vCPU is charged over
 * contiguous [last, t) pieces, so its slices' components add up to
 * their wall time exactly.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"
#include "json.h"

enum { RUN_UNKNOWN, RUN_ON, RUN_OFF_RUNNABLE, RUN_OFF_BLOCKED };
enum { MODE_UNKNOWN, MODE_GUEST, MODE_EXIT, MODE_HALT };

#define NO_TID_KEY	UINT64_MAX	/* an offender not known (its CPU never switched) */
/*
 * Keys past HGA_MAX_KEYS distinct ones in one split (hostile exit
 * reasons, a long trace's many short-lived host tasks) are added up
 * under OTHER_KEY: their time is kept, the search stays bounded.
 */
#define HGA_MAX_KEYS	4096
#define OTHER_KEY	(UINT64_MAX - 1)

struct hga_vcpu_state {
	int32_t guest, vcpu;
	int32_t host_tid;		/* -1: not known (yet, or since a restore) */
	int32_t host_cpu;		/* where it runs or last ran, -1 */
	uint8_t run, mode;
	bool disrupted;
	bool started;			/* last_ns is valid */
	uint64_t exit_key;		/* MODE_EXIT: isa << 32 | reason */
	uint64_t last_ns;		/* charged up to here */
	struct hga_split tot;		/* all its time in the window */
	/* the open slice */
	bool in_slice;
	int32_t tid;
	char comm[HGA_COMM_LEN];
	uint64_t start_ns, start_bound_ns;
	struct hga_split split;
	uint64_t max_bound_ns;		/* over its guest events: the mapping's */
	uint64_t by_method[HGA_NR_METHODS];	/* its guest switches, by how mapped */
	/*
	 * Chains of vCPU indices + 1 (0 ends), each in index order: the
	 * vCPUs on one host CPU (host_cpu), and those of one host thread
	 * (host_tid; a tid reused by another VM's thread may be two
	 * vCPUs').  Kept by set_host_cpu() and set_host_tid(), so that an
	 * event visits only the vCPUs it concerns, in the order a walk of
	 * every vCPU would (the callbacks see the same sequence).
	 */
	uint32_t next_on_cpu, next_with_tid;
};

struct hga_cpu_state {
	int32_t curr_tid;
	bool known;
	uint64_t irq_key;		/* HGA_KEY_IRQ | irq: a handler runs there; 0 */
	uint64_t softirq_key;		/* HGA_KEY_SOFTIRQ | vector: 0 none */
	uint32_t vcpus;			/* chain of the vCPUs whose host_cpu it is */
};

/*
 * Lookups that stay O(1) on a large host (hundreds of vCPUs, thousands of
 * host tasks and guest threads): open-addressing maps from a 64-bit key
 * to a value, never shrunk, freed with the engine.
 */
struct hga_map_slot {
	uint64_t key;
	uint32_t val;
	uint32_t used;
};

struct hga_map {
	struct hga_map_slot *s;
	uint32_t cap, n;		/* cap: 0 or a power of two, n < cap / 2 */
};

struct hga_maps {
	struct hga_map vcpu;		/* guest << 32 | vcpu -> index + 1 in vcpus */
	struct hga_map name;		/* tid -> index + 1 in names */
	struct hga_map total;		/* total_key() -> index + 1 in threads */
	struct hga_map tid;		/* host tid -> its chain of vCPUs (0: none) */
};

static uint32_t map_hash(uint64_t key, uint32_t cap)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdull;
	key ^= key >> 33;
	return (uint32_t)key & (cap - 1);
}

static struct hga_map_slot *map_find(const struct hga_map *m, uint64_t key)
{
	uint32_t i;

	if (!m->cap)
		return NULL;
	for (i = map_hash(key, m->cap); m->s[i].used; i = (i + 1) & (m->cap - 1))
		if (m->s[i].key == key)
			return &m->s[i];
	return NULL;
}

/* @key's slot, made (val 0) when new; good until the map's next map_get(). */
static struct hga_map_slot *map_get(struct hga_map *m, uint64_t key)
{
	struct hga_map_slot *sl = map_find(m, key);
	uint32_t i;

	if (sl)
		return sl;
	if ((uint64_t)(m->n + 1) * 2 > m->cap) {
		uint32_t cap = m->cap ? m->cap * 2 : 64, j;
		struct hga_map_slot *ns;

		if (!cap)
			return NULL;
		ns = calloc(cap, sizeof(*ns));
		if (!ns)
			return NULL;
		for (i = 0; i < m->cap; i++) {
			if (!m->s[i].used)
				continue;
			for (j = map_hash(m->s[i].key, cap); ns[j].used; j = (j + 1) & (cap - 1))
				;
			ns[j] = m->s[i];
		}
		free(m->s);
		m->s = ns;
		m->cap = cap;
	}
	for (i = map_hash(key, m->cap); m->s[i].used; i = (i + 1) & (m->cap - 1))
		;
	m->s[i] = (struct hga_map_slot){ .key = key, .used = 1 };
	m->n++;
	return &m->s[i];
}

static void map_free(struct hga_map *m)
{
	free(m->s);
	memset(m, 0, sizeof(*m));
}

/* The engine's maps, made at the first use; NULL out of memory. */
static struct hga_maps *maps_of(struct hga *a)
{
	if (!a->maps)
		a->maps = calloc(1, sizeof(*a->maps));
	return a->maps;
}

/* ---- buckets and splits ---- */

/* Up to this many keys a split's buckets are searched in order, not indexed. */
#define BUCKETS_LINEAR	32

static uint32_t bucket_hash(uint64_t key, uint32_t cap)
{
	return map_hash(key, cap);
}

/*
 * b->idx from v[0, n), sized for twice as many keys (an index kept
 * from a larger split is not cleared whole: one of the right size is
 * made); -1 out of memory (the index is then dropped and the search
 * linear).
 */
static int buckets_reindex(struct hga_buckets *b)
{
	uint32_t cap = 64, i, j;

	/* at most half full now; rebuilt (doubled) when half full again */
	while (cap < 2 * b->n + 2)
		cap *= 2;
	if (cap != b->idx_cap) {
		uint32_t *idx = calloc(cap, sizeof(*idx));

		if (!idx) {
			free(b->idx);
			b->idx = NULL;
			b->idx_cap = b->idx_used = b->idx_n = 0;
			return -1;
		}
		free(b->idx);
		b->idx = idx;
		b->idx_cap = cap;
	} else {
		memset(b->idx, 0, cap * sizeof(*b->idx));
	}
	for (i = 0; i < b->n; i++) {
		for (j = bucket_hash(b->v[i].key, cap); b->idx[j]; j = (j + 1) & (cap - 1))
			;
		b->idx[j] = i + 1;
	}
	b->idx_used = b->n;
	b->idx_n = b->n;
	return 0;
}

/*
 * @key's position in v, or -1.  An index slot names a position whose key
 * is checked: one left from before a reset points at another key or past
 * n and is passed over, and every key added since has its own slot on its
 * probe path (slots are never taken away), so a key in v is found.
 */
static int64_t buckets_find(const struct hga_buckets *b, uint64_t key)
{
	uint32_t i, p;

	if (!b->idx || b->idx_n != b->n) {
		for (i = 0; i < b->n; i++)
			if (b->v[i].key == key)
				return i;
		return -1;
	}
	for (i = bucket_hash(key, b->idx_cap); b->idx[i]; i = (i + 1) & (b->idx_cap - 1)) {
		p = b->idx[i] - 1;
		if (p < b->n && b->v[p].key == key)
			return p;
	}
	return -1;
}

/*
 * The index no longer covers v (UINT32_MAX is no n): searched in order
 * until v grows past BUCKETS_LINEAR again, then rebuilt without the old
 * slots.  So the slots of earlier splits never pile up.
 */
void hga_buckets_reset(struct hga_buckets *b)
{
	b->n = 0;
	b->idx_n = UINT32_MAX;
}

void hga_buckets_free(struct hga_buckets *b)
{
	free(b->v);
	free(b->idx);
	memset(b, 0, sizeof(*b));
}

int hga_bucket_add(struct hga_buckets *b, uint64_t key, uint64_t ns, uint64_t count)
{
	int64_t p;
	uint32_t i;

	/* Past the linear size, an index that covers all of v. */
	if (b->n > BUCKETS_LINEAR && (!b->idx || b->idx_n != b->n ||
				      2 * (b->idx_used + 1) > b->idx_cap))
		buckets_reindex(b);	/* out of memory: searched linearly */
again:
	p = buckets_find(b, key);
	if (p >= 0) {
		b->v[p].ns += ns;
		b->v[p].count += count;
		return 0;
	}
	if (b->n >= HGA_MAX_KEYS && key != OTHER_KEY) {
		key = OTHER_KEY;
		goto again;
	}
	if (b->n == b->cap) {
		uint32_t cap = b->cap ? b->cap * 2 : 8;
		struct hga_bucket *v = realloc(b->v, cap * sizeof(*v));

		if (!v)
			return -1;
		b->v = v;
		b->cap = cap;
	}
	b->v[b->n] = (struct hga_bucket){ .key = key, .ns = ns, .count = count };
	if (b->idx && b->idx_n == b->n) {
		for (i = bucket_hash(key, b->idx_cap); b->idx[i]; i = (i + 1) & (b->idx_cap - 1))
			;
		b->idx[i] = b->n + 1;
		b->idx_used++;
		b->idx_n++;
	}
	b->n++;
	return 0;
}

static int split_add(struct hga_split *dst, const struct hga_split *src)
{
	uint32_t i;
	int c;

	for (c = 0; c < HGA_NR_COMP; c++)
		dst->ns[c] += src->ns[c];
	for (i = 0; i < src->exits.n; i++)
		if (hga_bucket_add(&dst->exits, src->exits.v[i].key, src->exits.v[i].ns,
			       src->exits.v[i].count))
			return -1;
	for (i = 0; i < src->offenders.n; i++)
		if (hga_bucket_add(&dst->offenders, src->offenders.v[i].key, src->offenders.v[i].ns,
			       src->offenders.v[i].count))
			return -1;
	return 0;
}

/* Emptied, its arrays kept for the next slice. */
static void split_reset(struct hga_split *s)
{
	memset(s->ns, 0, sizeof(s->ns));
	hga_buckets_reset(&s->exits);
	hga_buckets_reset(&s->offenders);
}

static void split_free(struct hga_split *s)
{
	hga_buckets_free(&s->exits);
	hga_buckets_free(&s->offenders);
	memset(s, 0, sizeof(*s));
}

static uint64_t split_sum(const struct hga_split *s)
{
	uint64_t sum = 0;
	int c;

	for (c = 0; c < HGA_NR_COMP; c++)
		sum += s->ns[c];
	return sum;
}

/* ---- state ---- */

static void refuse(struct hga *a, uint64_t *counter, const char *fmt, const char *what,
		   uint64_t host_ns)
{
	(*counter)++;
	if (!a->first_err[0])
		snprintf(a->first_err, sizeof(a->first_err), fmt, what, host_ns);
}

int hga_init(struct hga *a, const struct hga_options *opt)
{
	memset(a, 0, sizeof(*a));
	if (opt)
		a->opt = *opt;
	if (!a->opt.to_ns)
		a->opt.to_ns = UINT64_MAX;
	if (a->opt.to_ns <= a->opt.from_ns)
		return -1;
	return 0;
}

static uint64_t clip(const struct hga *a, uint64_t t)
{
	if (t < a->opt.from_ns)
		return a->opt.from_ns;
	if (t > a->opt.to_ns)
		return a->opt.to_ns;
	return t;
}

static uint64_t vcpu_key(int32_t guest, int32_t vcpu)
{
	return (uint64_t)(uint32_t)guest << 32 | (uint32_t)vcpu;
}

static struct hga_vcpu_state *find_vcpu(const struct hga *a, int32_t guest, int32_t vcpu)
{
	const struct hga_map_slot *sl = a->maps ? map_find(&a->maps->vcpu, vcpu_key(guest, vcpu)) :
					    NULL;

	return sl && sl->val ? &a->vcpus[sl->val - 1] : NULL;
}

static struct hga_vcpu_state *get_vcpu(struct hga *a, int32_t guest, int32_t vcpu)
{
	struct hga_vcpu_state *v = find_vcpu(a, guest, vcpu);
	struct hga_map_slot *sl;

	if (v)
		return v;
	if (!maps_of(a))
		return NULL;
	sl = map_get(&a->maps->vcpu, vcpu_key(guest, vcpu));
	if (!sl)
		return NULL;
	if (a->nr_vcpus == a->cap_vcpus) {
		uint32_t cap = a->cap_vcpus ? a->cap_vcpus * 2 : 8;

		v = realloc(a->vcpus, cap * sizeof(*v));
		if (!v)
			return NULL;
		a->vcpus = v;
		a->cap_vcpus = cap;
	}
	v = &a->vcpus[a->nr_vcpus++];
	memset(v, 0, sizeof(*v));
	v->guest = guest;
	v->vcpu = vcpu;
	v->host_tid = -1;
	v->host_cpu = -1;
	sl->val = a->nr_vcpus;
	return v;
}

/* The chain of vCPUs (index + 1) a link field heads or continues. */
enum chain { CHAIN_CPU, CHAIN_TID };

static uint32_t *chain_link(struct hga *a, uint32_t idx, enum chain which)
{
	struct hga_vcpu_state *v = &a->vcpus[idx];

	return which == CHAIN_CPU ? &v->next_on_cpu : &v->next_with_tid;
}

/* vCPU @idx into the chain at *@head, in index order. */
static void chain_add(struct hga *a, uint32_t *head, uint32_t idx, enum chain which)
{
	uint32_t *pp = head;

	while (*pp && *pp - 1 < idx)
		pp = chain_link(a, *pp - 1, which);
	*chain_link(a, idx, which) = *pp;
	*pp = idx + 1;
}

static void chain_del(struct hga *a, uint32_t *head, uint32_t idx, enum chain which)
{
	uint32_t *pp = head;

	while (*pp && *pp - 1 != idx)
		pp = chain_link(a, *pp - 1, which);
	if (*pp) {
		*pp = *chain_link(a, idx, which);
		*chain_link(a, idx, which) = 0;
	}
}

static struct hga_cpu_state *get_cpu(struct hga *a, int32_t cpu);

/* v's host CPU, and its place in that CPU's chain; 0 or -1 (memory). */
static int set_host_cpu(struct hga *a, struct hga_vcpu_state *v, int32_t cpu)
{
	uint32_t idx = (uint32_t)(v - a->vcpus);
	struct hga_cpu_state *c;

	if (v->host_cpu == cpu)
		return 0;
	if (v->host_cpu >= 0 && (uint32_t)v->host_cpu < a->nr_cpus)
		chain_del(a, &a->cpus[v->host_cpu].vcpus, idx, CHAIN_CPU);
	v->host_cpu = -1;
	if (cpu < 0)
		return 0;
	c = get_cpu(a, cpu);
	if (!c)
		return -1;
	chain_add(a, &c->vcpus, idx, CHAIN_CPU);
	v->host_cpu = cpu;
	return 0;
}

/* The chain of host thread @tid's vCPUs (its head), or NULL: none. */
static uint32_t *tid_chain(const struct hga *a, int32_t tid)
{
	struct hga_map_slot *sl = a->maps ? map_find(&a->maps->tid, (uint32_t)tid) : NULL;

	return sl ? &sl->val : NULL;
}

/* v's host thread, and its place in that thread's chain; 0 or -1 (memory). */
static int set_host_tid(struct hga *a, struct hga_vcpu_state *v, int32_t tid)
{
	uint32_t idx = (uint32_t)(v - a->vcpus), *head;
	struct hga_map_slot *sl;

	if (v->host_tid == tid)
		return 0;
	if (v->host_tid >= 0 && (head = tid_chain(a, v->host_tid)))
		chain_del(a, head, idx, CHAIN_TID);
	v->host_tid = -1;
	if (tid < 0)
		return 0;
	if (!maps_of(a) || !(sl = map_get(&a->maps->tid, (uint32_t)tid)))
		return -1;
	chain_add(a, &sl->val, idx, CHAIN_TID);
	v->host_tid = tid;
	return 0;
}

/*
 * The vCPU (index + 1) after the one at index + 1 @prev (0: the first)
 * whose thread is on host CPU @cpu; 0 when no more.  From the CPU's
 * chain, or, with opt.walk_all (tests), by looking at every vCPU as the
 * engine once did: the two must give the same answers.
 */
static uint32_t next_on(const struct hga *a, int32_t cpu, uint32_t prev)
{
	uint32_t i;

	if (a->opt.walk_all) {
		for (i = prev; i < a->nr_vcpus; i++)
			if (a->vcpus[i].host_cpu == cpu)
				return i + 1;
		return 0;
	}
	if (prev)
		return a->vcpus[prev - 1].next_on_cpu;
	return cpu >= 0 && (uint32_t)cpu < a->nr_cpus ? a->cpus[cpu].vcpus : 0;
}

/* The same for the vCPUs of host thread @tid (>= 0). */
static uint32_t next_of(const struct hga *a, int32_t tid, uint32_t prev)
{
	const uint32_t *head;
	uint32_t i;

	if (a->opt.walk_all) {
		for (i = prev; i < a->nr_vcpus; i++)
			if (a->vcpus[i].host_tid == tid)
				return i + 1;
		return 0;
	}
	if (prev)
		return a->vcpus[prev - 1].next_with_tid;
	head = tid < 0 ? NULL : tid_chain(a, tid);
	return head ? *head : 0;
}

static struct hga_cpu_state *get_cpu(struct hga *a, int32_t cpu)
{
	if ((uint32_t)cpu >= a->nr_cpus) {
		uint32_t n = (uint32_t)cpu + 1;
		struct hga_cpu_state *c = realloc(a->cpus, n * sizeof(*c));

		if (!c)
			return NULL;
		memset(c + a->nr_cpus, 0, (n - a->nr_cpus) * sizeof(*c));
		a->cpus = c;
		a->nr_cpus = n;
	}
	return &a->cpus[cpu];
}

/* @comm: terminated within @size bytes or cut there */
static int set_name(struct hga *a, int32_t tid, const char *comm, size_t size)
{
	size_t len = strnlen(comm, size < HGA_NAME_LEN ? size : HGA_NAME_LEN - 1);
	struct hga_map_slot *sl;
	uint32_t i;

	if (!comm[0])
		return 0;
	if (!maps_of(a) || !(sl = map_get(&a->maps->name, (uint32_t)tid)))
		return -1;
	if (!sl->val) {
		if (a->nr_names == a->cap_names) {
			uint32_t cap = a->cap_names ? a->cap_names * 2 : 32;
			void *p = realloc(a->names, cap * sizeof(*a->names));

			if (!p)
				return -1;
			a->names = p;
			a->cap_names = cap;
		}
		memset(&a->names[a->nr_names], 0, sizeof(a->names[a->nr_names]));
		a->names[a->nr_names].tid = tid;
		sl->val = ++a->nr_names;
	}
	i = sl->val - 1;
	/* the same name again (most switches): nothing to write */
	if (!memcmp(a->names[i].comm, comm, len) && !a->names[i].comm[len])
		return 0;
	memcpy(a->names[i].comm, comm, len);
	a->names[i].comm[len] = '\0';
	return 0;
}

/* A tid's name in a->names, or NULL; IRQs' names sit at tid -1 - irq. */
static const char *name_of(const struct hga *a, int32_t tid)
{
	const struct hga_map_slot *sl = a->maps ? map_find(&a->maps->name, (uint32_t)tid) : NULL;

	return sl && sl->val ? a->names[sl->val - 1].comm : NULL;
}

static const char *const softirq_names[HGA_NR_SOFTIRQS] = {
	"HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER",
	"RCU",
};

bool hga_key_is_task(uint64_t key)
{
	return key < HGA_KEY_IRQ;
}

const char *hga_host_name(const struct hga *a, uint64_t key)
{
	const char *name;

	if (key == NO_TID_KEY)
		return "(unknown)";
	if (key == OTHER_KEY)
		return "(others)";
	if (hga_key_is_irq(key))
		return (name = name_of(a, -1 - (int32_t)(uint32_t)key)) ? name : "irq";
	if (hga_key_is_softirq(key))
		return (uint32_t)key < HGA_NR_SOFTIRQS ? softirq_names[(uint32_t)key] : "softirq";
	if (!hga_key_is_task(key))
		return "?";
	return (name = name_of(a, (int32_t)key)) ? name : "?";
}

void hga_offender_label(const struct hga *a, uint64_t key, char *buf, size_t len)
{
	const char *name = hga_host_name(a, key);
	uint32_t n = (uint32_t)key;

	if (key == NO_TID_KEY)
		snprintf(buf, len, "(unknown task)");
	else if (key == OTHER_KEY)
		snprintf(buf, len, "(other tasks)");
	else if (hga_key_is_irq(key))
		snprintf(buf, len, strcmp(name, "irq") ? "irq %" PRIu32 " (%s)" : "irq %" PRIu32,
			 n, name);
	else if (hga_key_is_softirq(key))
		snprintf(buf, len, n < HGA_NR_SOFTIRQS ? "softirq %s" : "softirq %.0s%" PRIu32,
			 name, n);
	else
		snprintf(buf, len, "%s-%" PRIu64, name, key);
}

/* The interrupt running on host CPU @cpu (its offender key), or 0. */
static uint64_t cpu_irq_key(const struct hga *a, int32_t cpu)
{
	const struct hga_cpu_state *c;

	if (cpu < 0 || (uint32_t)cpu >= a->nr_cpus)
		return 0;
	c = &a->cpus[cpu];
	return c->irq_key ? c->irq_key : c->softirq_key;
}

/*
 * The component the vCPU's state says now (and its key for the buckets).
 * An interrupt on the vCPU thread's CPU takes the time of an exit being
 * handled there, or of a preemption: the offender is the interrupt.  A
 * halted vCPU loses nothing to it (the guest was idle), nor does a vCPU
 * thread asleep on the host.
 */
static enum hga_comp classify(const struct hga *a, const struct hga_vcpu_state *v, uint64_t *key)
{
	*key = 0;
	if (v->disrupted)
		return HGA_C_DISRUPTED;
	if (v->mode == MODE_HALT)
		return HGA_C_HALTED;
	if (v->run == RUN_OFF_RUNNABLE) {
		*key = cpu_irq_key(a, v->host_cpu);
		if (*key)
			return HGA_C_PREEMPTED;
		*key = NO_TID_KEY;
		if (v->host_cpu >= 0 && (uint32_t)v->host_cpu < a->nr_cpus &&
		    a->cpus[v->host_cpu].known)
			*key = (uint32_t)a->cpus[v->host_cpu].curr_tid;
		return HGA_C_PREEMPTED;
	}
	if (v->run == RUN_OFF_BLOCKED)
		return HGA_C_HOST_BLOCKED;
	if (v->mode == MODE_GUEST)
		return HGA_C_GUEST;
	if (v->mode == MODE_EXIT) {
		*key = v->run == RUN_ON ? cpu_irq_key(a, v->host_cpu) : 0;
		if (*key)
			return HGA_C_PREEMPTED;
		*key = v->exit_key;
		return HGA_C_EXIT;
	}
	return HGA_C_UNKNOWN;
}

static int split_charge(struct hga_split *s, enum hga_comp c, uint64_t key, uint64_t ns)
{
	s->ns[c] += ns;
	if (c == HGA_C_EXIT)
		return hga_bucket_add(&s->exits, key, ns, 0);
	if (c == HGA_C_PREEMPTED)
		return hga_bucket_add(&s->offenders, key, ns, 0);
	return 0;
}

/* The open slice's charge, told to the options' charge_cb (analyze_req.c). */
static int charge_hook(struct hga *a, const struct hga_vcpu_state *v, uint64_t t0, uint64_t t1,
		       enum hga_comp c, uint64_t key, uint64_t count)
{
	struct hga_charge ch = {
		.guest = v->guest, .vcpu = v->vcpu, .tid = v->tid, .comm = v->comm,
		.slice_ns = clip(a, v->start_ns), .t0 = t0, .t1 = t1, .comp = c, .key = key,
		.count = count,
	};

	return a->opt.charge_cb ? a->opt.charge_cb(a->opt.ctx, &ch) : 0;
}

/* [v->last_ns, t) to the component of v's state, within the window. */
static int charge(struct hga *a, struct hga_vcpu_state *v, uint64_t t)
{
	uint64_t t0, t1, key;
	enum hga_comp c;

	if (!v->started) {
		v->started = true;
		v->last_ns = t;
		return 0;
	}
	if (t <= v->last_ns)
		return 0;
	t0 = clip(a, v->last_ns);
	t1 = clip(a, t);
	v->last_ns = t;
	if (t1 == t0)
		return 0;
	c = classify(a, v, &key);
	if (split_charge(&v->tot, c, key, t1 - t0))
		return -1;
	if (v->in_slice && split_charge(&v->split, c, key, t1 - t0))
		return -1;
	return v->in_slice ? charge_hook(a, v, t0, t1, c, key, 0) : 0;
}

/* A count (an exit or preemption begun at @t) in the vCPU's splits. */
static int count_at(struct hga *a, struct hga_vcpu_state *v, enum hga_comp c, uint64_t key,
		    uint64_t t)
{
	struct hga_buckets *tb = c == HGA_C_EXIT ? &v->tot.exits : &v->tot.offenders;
	struct hga_buckets *sb = c == HGA_C_EXIT ? &v->split.exits : &v->split.offenders;

	if (t < a->opt.from_ns || t >= a->opt.to_ns)
		return 0;
	if (hga_bucket_add(tb, key, 0, 1))
		return -1;
	if (v->in_slice && hga_bucket_add(sb, key, 0, 1))
		return -1;
	return v->in_slice ? charge_hook(a, v, t, t, c, key, 1) : 0;
}

/* The host CPU's running task becomes @tid at @t: its preempted vCPUs charged first. */
static int set_cpu_curr(struct hga *a, int32_t cpu, int32_t tid, uint64_t t)
{
	struct hga_cpu_state *c = get_cpu(a, cpu);
	uint32_t i;

	if (!c)
		return -1;
	if (c->known && c->curr_tid == tid)
		return 0;
	for (i = next_on(a, cpu, 0); i; i = next_on(a, cpu, i)) {
		struct hga_vcpu_state *v = &a->vcpus[i - 1];

		if (v->run == RUN_OFF_RUNNABLE && charge(a, v, t))
			return -1;
	}
	c->known = true;
	c->curr_tid = tid;
	return 0;
}

/*
 * A thread total's key: guest (< HGA_MAX_GUESTS, 10 bits), vcpu + 1 (-1
 * or < HGA_MAX_VCPUS, 15 bits), tid (32 bits), each in its own bits.
 */
static uint64_t total_key(int32_t guest, int32_t vcpu, int32_t tid)
{
	return (uint64_t)(uint32_t)guest << 47 | (uint64_t)(uint32_t)(vcpu + 1) << 32 |
	       (uint32_t)tid;
}

static struct hga_total *get_total(struct hga *a, int32_t guest, int32_t vcpu, int32_t tid)
{
	struct hga_map_slot *sl;
	struct hga_total *t;

	if (!maps_of(a) || !(sl = map_get(&a->maps->total, total_key(guest, vcpu, tid))))
		return NULL;
	if (sl->val)
		return &a->threads[sl->val - 1];
	if (a->nr_threads == a->cap_threads) {
		uint32_t ncap = a->cap_threads ? a->cap_threads * 2 : 16;

		t = realloc(a->threads, ncap * sizeof(*t));
		if (!t)
			return NULL;
		a->threads = t;
		a->cap_threads = ncap;
	}
	t = &a->threads[a->nr_threads++];
	memset(t, 0, sizeof(*t));
	t->guest = guest;
	t->vcpu = vcpu;
	t->tid = tid;
	sl->val = a->nr_threads;
	return t;
}

static uint64_t sat_add(uint64_t x, uint64_t y)
{
	return x + y < x ? UINT64_MAX : x + y;
}

/* Closes v's open slice at @t (charged up to @t already). */
static int close_slice(struct hga *a, struct hga_vcpu_state *v, uint64_t t, uint64_t end_bound_ns,
		       uint32_t flags)
{
	struct hga_slice s = {
		.guest = v->guest, .vcpu = v->vcpu, .tid = v->tid,
		.start_ns = v->start_ns, .end_ns = t,
		.bound_ns = v->start_bound_ns > end_bound_ns ? v->start_bound_ns : end_bound_ns,
		.flags = flags, .split = &v->split,
	};
	struct hga_total *tot;
	int ret = 0;

	memcpy(s.comm, v->comm, sizeof(s.comm));
	v->in_slice = false;
	s.wall_ns = clip(a, t) - clip(a, v->start_ns);
	if (!s.wall_ns)
		goto out;
	if (v->start_ns < a->opt.from_ns || t > a->opt.to_ns)
		s.flags |= HGA_SL_CLIPPED;
	/* the slice's length is not known to better than its ends' bounds */
	if (t - v->start_ns <= sat_add(v->start_bound_ns, end_bound_ns))
		s.flags |= HGA_SL_UNCERTAIN;
	if (split_sum(&v->split) != s.wall_ns && !a->first_err[0])
		snprintf(a->first_err, sizeof(a->first_err),
			 "internal: a slice's split (%" PRIu64 " ns) is not its wall time (%" PRIu64 " ns)",
			 split_sum(&v->split), s.wall_ns);
	/* thread 0 is each CPU's idle task: one per vCPU */
	tot = get_total(a, v->guest, v->tid ? -1 : v->vcpu, v->tid);
	if (!tot) {
		ret = -1;
		goto out;
	}
	if (s.comm[0])
		memcpy(tot->comm, s.comm, sizeof(tot->comm));
	if (s.flags & HGA_SL_UNCERTAIN) {
		tot->nr_uncertain++;
		tot->uncertain_ns += s.wall_ns;
	} else {
		tot->nr_slices++;
		tot->wall_ns += s.wall_ns;
		if (split_add(&tot->split, &v->split)) {
			ret = -1;
			goto out;
		}
	}
	if (a->opt.slice_cb)
		ret = a->opt.slice_cb(a->opt.ctx, &s);
out:
	split_reset(&v->split);
	return ret;
}

static bool guest_ok(int32_t guest)
{
	return guest >= 0 && guest < HGA_MAX_GUESTS;
}

static bool vcpu_ok(int32_t vcpu)
{
	return vcpu >= 0 && vcpu < HGA_MAX_VCPUS;
}

static bool cpu_ok(int32_t cpu)
{
	return cpu >= 0 && cpu < HGA_MAX_HOST_CPUS;
}

static const char *const kind_names[HGA_EV_NR_KINDS] = {
	[HGA_EV_KVM_ENTRY] = "kvm_entry",
	[HGA_EV_KVM_EXIT] = "kvm_exit",
	[HGA_EV_HOST_SWITCH] = "host sched_switch",
	[HGA_EV_GUEST_SWITCH] = "guest sched_switch",
	[HGA_EV_DISRUPT_BEGIN] = "disruption begin",
	[HGA_EV_DISRUPT_END] = "disruption end",
	[HGA_EV_IRQ_ENTRY] = "irq_handler_entry",
	[HGA_EV_IRQ_EXIT] = "irq_handler_exit",
	[HGA_EV_SOFTIRQ_ENTRY] = "softirq_entry",
	[HGA_EV_SOFTIRQ_EXIT] = "softirq_exit",
};

/* Every vCPU whose thread runs or waits on host CPU @cpu, charged up to @t. */
static int charge_cpu(struct hga *a, int32_t cpu, uint64_t t)
{
	uint32_t i;

	for (i = next_on(a, cpu, 0); i; i = next_on(a, cpu, i))
		if (charge(a, &a->vcpus[i - 1], t))
			return -1;
	return 0;
}

/*
 * No interrupt runs on @cpu at @t (a context switch or a VM entry there):
 * one whose exit was lost, or a softirq preempted on PREEMPT_RT, ends.
 */
static int end_cpu_irqs(struct hga *a, int32_t cpu, uint64_t t)
{
	struct hga_cpu_state *c;

	if (!cpu_irq_key(a, cpu))
		return 0;
	if (charge_cpu(a, cpu, t))
		return -1;
	c = &a->cpus[cpu];
	c->irq_key = c->softirq_key = 0;
	return 0;
}

static int on_irq(struct hga *a, const struct hga_event *ev)
{
	struct hga_cpu_state *c = get_cpu(a, ev->host_cpu);
	uint64_t t = ev->host_ns, key, now;
	bool begin = false;
	uint32_t i;

	if (!c || charge_cpu(a, ev->host_cpu, t))
		return -1;
	switch (ev->kind) {
	case HGA_EV_IRQ_ENTRY:
		if (set_name(a, -1 - ev->irq, ev->irq_name, sizeof(ev->irq_name)))
			return -1;
		c->irq_key = HGA_KEY_IRQ | (uint32_t)ev->irq;
		begin = true;
		break;
	case HGA_EV_IRQ_EXIT:
		c->irq_key = 0;
		break;
	case HGA_EV_SOFTIRQ_ENTRY:
		c->softirq_key = HGA_KEY_SOFTIRQ | (uint32_t)ev->irq;
		begin = !c->irq_key;
		break;
	default:
		c->softirq_key = 0;
	}
	if (!begin)
		return 0;
	/* an interrupt begun: one preemption of each vCPU it takes time from */
	now = cpu_irq_key(a, ev->host_cpu);
	for (i = next_on(a, ev->host_cpu, 0); i; i = next_on(a, ev->host_cpu, i)) {
		struct hga_vcpu_state *v = &a->vcpus[i - 1];

		if (classify(a, v, &key) == HGA_C_PREEMPTED && key == now &&
		    count_at(a, v, HGA_C_PREEMPTED, key, t))
			return -1;
	}
	return 0;
}

static int on_kvm(struct hga *a, const struct hga_event *ev)
{
	struct hga_vcpu_state *v = get_vcpu(a, ev->guest, ev->vcpu);
	uint64_t t = ev->host_ns;

	if (!v)
		return -1;
	/* IRQs are off at a VM entry: none runs on that CPU any more */
	if (ev->kind == HGA_EV_KVM_ENTRY && end_cpu_irqs(a, ev->host_cpu, t))
		return -1;
	/* the vCPU's thread runs on host_cpu now: that CPU's task is it */
	if (set_cpu_curr(a, ev->host_cpu, ev->host_tid, t) || charge(a, v, t) ||
	    set_host_tid(a, v, ev->host_tid) || set_host_cpu(a, v, ev->host_cpu))
		return -1;
	v->run = RUN_ON;
	if (ev->kind == HGA_EV_KVM_ENTRY) {
		v->mode = MODE_GUEST;
		return 0;
	}
	if (hga_exit_is_hlt(ev->exit_isa, ev->exit_reason)) {
		v->mode = MODE_HALT;
		return 0;
	}
	v->mode = MODE_EXIT;
	v->exit_key = (uint64_t)ev->exit_isa << 32 | ev->exit_reason;
	return count_at(a, v, HGA_C_EXIT, v->exit_key, t);
}

static int on_host_switch(struct hga *a, const struct hga_event *ev)
{
	uint64_t t = ev->host_ns;
	uint32_t ip, in;

	if (set_name(a, ev->prev_tid, ev->prev_comm, sizeof(ev->prev_comm)) ||
	    set_name(a, ev->next_tid, ev->next_comm, sizeof(ev->next_comm)) ||
	    end_cpu_irqs(a, ev->host_cpu, t))
		return -1;
	/* the vCPUs preempted on this CPU change offender: charged before */
	if (set_cpu_curr(a, ev->host_cpu, ev->next_tid, t))
		return -1;
	/*
	 * The vCPUs of the thread switched out and of the one switched in:
	 * both chains at once, in index order (as a walk of every vCPU).
	 */
	ip = next_of(a, ev->prev_tid, 0);
	in = ev->next_tid != ev->prev_tid ? next_of(a, ev->next_tid, 0) : 0;
	while (ip || in) {
		bool out = ip && (!in || ip < in);
		struct hga_vcpu_state *v = &a->vcpus[(out ? ip : in) - 1];

		/* the next of each before this one's host CPU changes */
		if (out)
			ip = next_of(a, ev->prev_tid, ip);
		else
			in = next_of(a, ev->next_tid, in);
		if (charge(a, v, t) || set_host_cpu(a, v, ev->host_cpu))
			return -1;
		if (out) {
			v->run = ev->prev_runnable ? RUN_OFF_RUNNABLE : RUN_OFF_BLOCKED;
			if (ev->prev_runnable && v->mode != MODE_HALT && !v->disrupted &&
			    count_at(a, v, HGA_C_PREEMPTED, (uint32_t)ev->next_tid, t))
				return -1;
		} else {
			/* on another CPU than it left: a migration */
			v->run = RUN_ON;
		}
	}
	return 0;
}

static int on_guest_switch(struct hga *a, const struct hga_event *ev)
{
	struct hga_vcpu_state *v = get_vcpu(a, ev->guest, ev->vcpu);
	uint64_t t = ev->host_ns;
	int ret = 0;

	if (!v || charge(a, v, t))
		return -1;
	if (v->in_slice) {
		uint32_t flags = 0;

		if (v->tid != ev->prev_tid) {
			flags |= HGA_SL_LOST_SWITCH;
			a->nr_lost_switch++;
		}
		ret = close_slice(a, v, t, ev->bound_ns, flags);
	}
	v->in_slice = true;
	v->tid = ev->next_tid;
	memcpy(v->comm, ev->next_comm, sizeof(v->comm));
	v->comm[HGA_COMM_LEN - 1] = '\0';
	v->start_ns = t;
	v->start_bound_ns = ev->bound_ns;
	if (ev->bound_ns > v->max_bound_ns)
		v->max_bound_ns = ev->bound_ns;
	v->by_method[ev->method < HGA_NR_METHODS ? ev->method : HGA_METHOD_NONE]++;
	return ret;
}

static int on_disrupt(struct hga *a, const struct hga_event *ev)
{
	uint32_t i;

	for (i = 0; i < a->nr_vcpus; i++) {
		struct hga_vcpu_state *v = &a->vcpus[i];

		if (v->guest != ev->guest)
			continue;
		if (charge(a, v, ev->host_ns))
			return -1;
		if (ev->kind == HGA_EV_DISRUPT_BEGIN) {
			v->disrupted = true;
			continue;
		}
		/* the new VM: new threads, nothing known until its kvm events */
		v->disrupted = false;
		v->run = RUN_UNKNOWN;
		v->mode = MODE_UNKNOWN;
		if (set_host_tid(a, v, -1) || set_host_cpu(a, v, -1))
			return -1;
	}
	return 0;
}

int hga_event(struct hga *a, const struct hga_event *ev)
{
	const char *what;
	int ret;

	if (a->finished || !ev || ev->kind == 0 || ev->kind >= HGA_EV_NR_KINDS) {
		refuse(a, &a->nr_bad, "an event of unknown kind%s at %" PRIu64 " ns", "",
		       ev ? ev->host_ns : 0);
		return 1;
	}
	what = kind_names[ev->kind];
	if (ev->host_ns < a->last_ns) {
		refuse(a, &a->nr_regressions, "%s at %" PRIu64 " ns: before the event already taken",
		       what, ev->host_ns);
		return 1;
	}
	switch (ev->kind) {
	case HGA_EV_KVM_ENTRY:
	case HGA_EV_KVM_EXIT:
		if (!guest_ok(ev->guest) || !vcpu_ok(ev->vcpu) || !cpu_ok(ev->host_cpu) ||
		    ev->host_tid <= 0)
			goto bad;
		break;
	case HGA_EV_HOST_SWITCH:
		if (!cpu_ok(ev->host_cpu) || ev->prev_tid < 0 || ev->next_tid < 0)
			goto bad;
		break;
	case HGA_EV_GUEST_SWITCH:
		if (!guest_ok(ev->guest) || !vcpu_ok(ev->vcpu) || ev->prev_tid < 0 ||
		    ev->next_tid < 0)
			goto bad;
		break;
	case HGA_EV_IRQ_ENTRY:
	case HGA_EV_IRQ_EXIT:
	case HGA_EV_SOFTIRQ_ENTRY:
	case HGA_EV_SOFTIRQ_EXIT:
		if (!cpu_ok(ev->host_cpu) || ev->irq < 0 ||
		    ev->irq >= (ev->kind <= HGA_EV_IRQ_EXIT ? HGA_MAX_IRQ : HGA_NR_SOFTIRQS))
			goto bad;
		break;
	default:
		if (!guest_ok(ev->guest))
			goto bad;
	}
	a->last_ns = ev->host_ns;
	a->seen[ev->kind]++;
	switch (ev->kind) {
	case HGA_EV_KVM_ENTRY:
	case HGA_EV_KVM_EXIT:
		ret = on_kvm(a, ev);
		break;
	case HGA_EV_HOST_SWITCH:
		ret = on_host_switch(a, ev);
		break;
	case HGA_EV_GUEST_SWITCH:
		ret = on_guest_switch(a, ev);
		break;
	case HGA_EV_IRQ_ENTRY:
	case HGA_EV_IRQ_EXIT:
	case HGA_EV_SOFTIRQ_ENTRY:
	case HGA_EV_SOFTIRQ_EXIT:
		ret = on_irq(a, ev);
		break;
	default:
		ret = on_disrupt(a, ev);
	}
	return ret;
bad:
	refuse(a, &a->nr_bad, "%s at %" PRIu64 " ns: a field out of range", what, ev->host_ns);
	return 1;
}

int hga_charge_guest(struct hga *a, int32_t guest, uint64_t t)
{
	uint32_t i;

	if (t > a->last_ns)
		a->last_ns = t;
	/* a vCPU not started yet starts at its own first event */
	for (i = 0; i < a->nr_vcpus; i++)
		if (a->vcpus[i].guest == guest && a->vcpus[i].started &&
		    charge(a, &a->vcpus[i], t))
			return -1;
	return 0;
}

int hga_finish(struct hga *a, uint64_t end_ns)
{
	uint32_t i;
	int ret;

	if (a->finished)
		return 0;
	a->finished = true;
	if (end_ns < a->last_ns)
		end_ns = a->last_ns;
	for (i = 0; i < a->nr_vcpus; i++) {
		struct hga_vcpu_state *v = &a->vcpus[i];

		if (charge(a, v, end_ns))
			return -1;
		if (v->in_slice) {
			a->nr_open_end++;
			ret = close_slice(a, v, end_ns, 0, HGA_SL_OPEN_END);
			if (ret)
				return ret;
		}
	}
	return 0;
}

static void total_free(struct hga_total *t)
{
	split_free(&t->split);
}

void hga_free(struct hga *a)
{
	uint32_t i;

	for (i = 0; i < a->nr_vcpus; i++) {
		split_free(&a->vcpus[i].tot);
		split_free(&a->vcpus[i].split);
	}
	for (i = 0; i < a->nr_threads; i++)
		total_free(&a->threads[i]);
	free(a->vcpus);
	free(a->cpus);
	free(a->threads);
	free(a->names);
	if (a->maps) {
		map_free(&a->maps->vcpu);
		map_free(&a->maps->name);
		map_free(&a->maps->total);
		map_free(&a->maps->tid);
		free(a->maps);
	}
	memset(a, 0, sizeof(*a));
}

/* ---- the report ---- */

const struct hga_split *hga_vcpu_split(const struct hga *a, int32_t guest, int32_t vcpu)
{
	const struct hga_vcpu_state *v = find_vcpu((struct hga *)a, guest, vcpu);

	return v ? &v->tot : NULL;
}

void hga_missing(const struct hga *a, char *buf, size_t len)
{
	size_t off = 0;

#define SAY(...) do { \
		int n_ = snprintf(buf + off, off < len ? len - off : 0, __VA_ARGS__); \
		if (n_ > 0) \
			off += (size_t)n_; \
	} while (0)

	if (len)
		buf[0] = '\0';
	if (!a->seen[HGA_EV_KVM_ENTRY] && !a->seen[HGA_EV_KVM_EXIT])
		SAY("no kvm_entry/kvm_exit on the host: guest mode, exits and halts cannot be split (in 'unknown')\n");
	else if (!a->seen[HGA_EV_KVM_EXIT])
		SAY("no kvm_exit on the host: exits and halts cannot be told from guest mode\n");
	if (!a->seen[HGA_EV_HOST_SWITCH])
		SAY("no sched_switch on the host: preemption cannot be split (counted where the vCPU's mode says)\n");
	if (!a->seen[HGA_EV_GUEST_SWITCH])
		SAY("no sched_switch in the guests: no thread's slices, vCPU totals only\n");
#undef SAY
}

/* The whole of a guest (@guest) or of all (-1): its vCPUs' splits added. */
static int guest_split(const struct hga *a, int32_t guest, struct hga_split *out)
{
	uint32_t i;

	memset(out, 0, sizeof(*out));
	for (i = 0; i < a->nr_vcpus; i++)
		if ((guest < 0 || a->vcpus[i].guest == guest) && split_add(out, &a->vcpus[i].tot))
			return -1;
	return 0;
}

static int cmp_bucket_ns(const void *x, const void *y)
{
	const struct hga_bucket *p = x, *q = y;

	if (p->ns != q->ns)
		return p->ns < q->ns ? 1 : -1;
	return p->key < q->key ? -1 : p->key > q->key;
}

void hga_exit_label(char *buf, size_t len, uint64_t key)
{
	const char *name = hga_exit_name(key >> 32, (uint32_t)key);

	if (key == OTHER_KEY)
		snprintf(buf, len, "(others)");
	else if (name)
		snprintf(buf, len, "%s", name);
	else
		snprintf(buf, len, "%s:%u", (key >> 32) == HGA_ISA_SVM ? "svm" : "vmx",
			 (uint32_t)key);
}

const char *hga_method_name(uint32_t method)
{
	static const char *const names[HGA_NR_METHODS] = {
		[HGA_METHOD_NONE] = "none", [HGA_METHOD_KVM_EXACT] = "kvm-exact",
		[HGA_METHOD_PROBE] = "probe", [HGA_METHOD_EXIT] = "exit",
		[HGA_METHOD_MARKER] = "marker",
	};

	return method < HGA_NR_METHODS ? names[method] : "none";
}

/*
 * How guest @g's switches (the slices' ends) were mapped: "  its switches
 * mapped by: kvm-exact 812", and a warning when any was a fallback's.
 */
static void print_methods(const struct hga *a, FILE *out, uint32_t g)
{
	uint64_t n[HGA_NR_METHODS] = { 0 };
	bool first = true;
	uint32_t i, m;

	for (i = 0; i < a->nr_vcpus; i++)
		for (m = 0; m < HGA_NR_METHODS && a->vcpus[i].guest == (int32_t)g; m++)
			n[m] += a->vcpus[i].by_method[m];
	for (m = 0; m < HGA_NR_METHODS; m++) {
		if (!n[m])
			continue;
		fprintf(out, "%s%s %" PRIu64, first ? "  its switches mapped by: " : ", ",
			hga_method_name(m), n[m]);
		first = false;
	}
	if (!first)
		fputc('\n', out);
	if (n[HGA_METHOD_PROBE] || n[HGA_METHOD_EXIT] || n[HGA_METHOD_MARKER])
		fprintf(out, "  # not all by KVM's exact relation: a slice's ends are known to "
			"the bound above, shorter slices are uncertain\n");
}

static void print_split(FILE *out, const char *indent, const struct hga_split *s)
{
	uint64_t wall = split_sum(s);
	int c;

	for (c = 0; c < HGA_NR_COMP; c++) {
		if (!s->ns[c] && c != HGA_C_GUEST)
			continue;
		fprintf(out, "%s%-13s %15" PRIu64 " ns %6.2f%%\n", indent, hga_comp_name(c), s->ns[c],
			wall ? 100.0 * (double)s->ns[c] / (double)wall : 0.0);
	}
}

static void print_top(const struct hga *a, FILE *out, struct hga_buckets *b, bool exits,
		      unsigned int top)
{
	char label[64];
	uint32_t i;

	qsort(b->v, b->n, sizeof(*b->v), cmp_bucket_ns);
	b->idx_n = UINT32_MAX;	/* the positions moved: the index is rebuilt if used */
	for (i = 0; i < b->n && i < top; i++) {
		if (exits)
			hga_exit_label(label, sizeof(label), b->v[i].key);
		else
			hga_offender_label(a, b->v[i].key, label, sizeof(label));
		fprintf(out, "    %-24s %15" PRIu64 " ns  %" PRIu64 " %s\n", label, b->v[i].ns,
			b->v[i].count, exits ? "exits" : "preemptions");
	}
}

int hga_report_text(const struct hga *a, FILE *out, unsigned int top)
{
	struct hga_split s;
	char missing[512];
	uint64_t bound;
	uint32_t i, g;
	int ret = 0;

	fprintf(out, "# where the guests' time went (host ns)\n");
	if (a->opt.from_ns || a->opt.to_ns != UINT64_MAX)
		fprintf(out, "# window: [%" PRIu64 ", %" PRIu64 ") ns\n", a->opt.from_ns,
			a->opt.to_ns);
	hga_missing(a, missing, sizeof(missing));
	if (missing[0])
		fprintf(out, "# cannot split: %s", missing);
	if (a->nr_regressions || a->nr_bad)
		fprintf(out, "# refused: %" PRIu64 " out of host-time order, %" PRIu64
			" malformed (first: %s)\n", a->nr_regressions, a->nr_bad, a->first_err);
	else if (a->first_err[0])
		fprintf(out, "# error: %s\n", a->first_err);
	if (a->nr_lost_switch)
		fprintf(out, "# %" PRIu64 " guest sched_switch from a thread not running there (events lost)\n",
			a->nr_lost_switch);
	if (a->nr_open_end)
		fprintf(out, "# %" PRIu64 " slices never ended: cut at the trace's end\n",
			a->nr_open_end);

	for (g = 0; g < HGA_MAX_GUESTS; g++) {
		bool any = false;

		for (i = 0; i < a->nr_vcpus && !any; i++)
			any = a->vcpus[i].guest == (int32_t)g;
		if (!any)
			continue;
		if (guest_split(a, g, &s))
			return -1;
		fprintf(out, "\nguest %u: %" PRIu64 " ns", g, split_sum(&s));
		bound = 0;
		for (i = 0; i < a->nr_vcpus; i++)
			if (a->vcpus[i].guest == (int32_t)g && a->vcpus[i].max_bound_ns > bound)
				bound = a->vcpus[i].max_bound_ns;
		/* slices are cut at guest events: their ends are known to this */
		if (bound)
			fprintf(out, " (its events mapped within +-%" PRIu64 " ns)", bound);
		fputc('\n', out);
		print_methods(a, out, g);
		print_split(out, "  ", &s);
		if (s.exits.n) {
			fprintf(out, "  exits by reason:\n");
			print_top(a, out, &s.exits, true, top);
		}
		if (s.offenders.n) {
			fprintf(out, "  preempted by (host task):\n");
			print_top(a, out, &s.offenders, false, top);
		}
		split_free(&s);
		for (i = 0; i < a->nr_vcpus; i++) {
			const struct hga_vcpu_state *v = &a->vcpus[i];

			if (v->guest != (int32_t)g)
				continue;
			fprintf(out, " vCPU %d: %" PRIu64 " ns\n", v->vcpu, split_sum(&v->tot));
			print_split(out, "    ", &v->tot);
		}
		for (i = 0; i < a->nr_threads; i++) {
			const struct hga_total *t = &a->threads[i];
			int c;

			if (t->guest != (int32_t)g)
				continue;
			fprintf(out, " thread %d (%s)", t->tid, t->comm[0] ? t->comm : "?");
			if (t->vcpu >= 0)
				fprintf(out, " on vCPU %d", t->vcpu);
			fprintf(out, ": %" PRIu64 " slices, %" PRIu64 " ns", t->nr_slices, t->wall_ns);
			for (c = 0; c < HGA_NR_COMP; c++)
				if (t->split.ns[c])
					fprintf(out, ", %s %" PRIu64, hga_comp_name(c), t->split.ns[c]);
			if (t->nr_uncertain)
				fprintf(out, "; %" PRIu64 " uncertain slices (%" PRIu64
					" ns, within the mapping's bound: not split)",
					t->nr_uncertain, t->uncertain_ns);
			fputc('\n', out);
		}
	}
	if (ferror(out))
		ret = -1;
	return ret;
}

static void json_split(struct json_writer *w, const struct hga *a, const char *key,
		       const struct hga_split *s)
{
	char label[64];
	uint32_t i;
	int c;

	json_begin_object(w, key);
	for (c = 0; c < HGA_NR_COMP; c++)
		json_u64(w, hga_comp_name(c), s->ns[c]);
	json_begin_array(w, "exit_reasons");
	for (i = 0; i < s->exits.n; i++) {
		json_begin_object(w, NULL);
		hga_exit_label(label, sizeof(label), s->exits.v[i].key);
		json_string(w, "reason", label);
		json_u64(w, "isa", s->exits.v[i].key >> 32);
		json_u64(w, "code", (uint32_t)s->exits.v[i].key);
		json_u64(w, "ns", s->exits.v[i].ns);
		json_u64(w, "count", s->exits.v[i].count);
		json_end_object(w);
	}
	json_end_array(w);
	json_begin_array(w, "preempted_by");
	for (i = 0; i < s->offenders.n; i++) {
		uint64_t okey = s->offenders.v[i].key;

		json_begin_object(w, NULL);
		/* a task: its tid; an interrupt: tid null, "irq" or "softirq" */
		if (hga_key_is_task(okey))
			json_u64(w, "tid", okey);
		else
			json_null(w, "tid");
		if (hga_key_is_irq(okey))
			json_u64(w, "irq", (uint32_t)okey);
		else if (hga_key_is_softirq(okey))
			json_u64(w, "softirq", (uint32_t)okey);
		json_string(w, "comm", hga_host_name(a, okey));
		json_u64(w, "ns", s->offenders.v[i].ns);
		json_u64(w, "count", s->offenders.v[i].count);
		json_end_object(w);
	}
	json_end_array(w);
	json_end_object(w);
}

int hga_report_json(const struct hga *a, FILE *out)
{
	struct json_writer w;
	struct hga_split s;
	char missing[512], *line, *save;
	uint32_t i, m;

	json_init(&w, out, false);
	json_begin_object(&w, NULL);
	json_u64(&w, "from_ns", a->opt.from_ns);
	if (a->opt.to_ns != UINT64_MAX)
		json_u64(&w, "to_ns", a->opt.to_ns);
	json_begin_array(&w, "cannot_split");
	hga_missing(a, missing, sizeof(missing));
	for (line = strtok_r(missing, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		json_string(&w, NULL, line);
	json_end_array(&w);
	json_u64(&w, "refused_regressions", a->nr_regressions);
	json_u64(&w, "refused_malformed", a->nr_bad);
	json_string(&w, "first_refused", a->first_err);
	json_u64(&w, "lost_switches", a->nr_lost_switch);
	json_u64(&w, "open_slices", a->nr_open_end);
	if (guest_split(a, -1, &s))
		return -1;
	json_split(&w, a, "all", &s);
	split_free(&s);
	json_begin_array(&w, "vcpus");
	for (i = 0; i < a->nr_vcpus; i++) {
		json_begin_object(&w, NULL);
		json_u64(&w, "guest", a->vcpus[i].guest);
		json_u64(&w, "vcpu", a->vcpus[i].vcpu);
		json_u64(&w, "max_bound_ns", a->vcpus[i].max_bound_ns);
		json_begin_object(&w, "switches_by_method");
		for (m = 0; m < HGA_NR_METHODS; m++)
			if (a->vcpus[i].by_method[m])
				json_u64(&w, hga_method_name(m), a->vcpus[i].by_method[m]);
		json_end_object(&w);
		json_split(&w, a, "split", &a->vcpus[i].tot);
		json_end_object(&w);
	}
	json_end_array(&w);
	json_begin_array(&w, "threads");
	for (i = 0; i < a->nr_threads; i++) {
		const struct hga_total *t = &a->threads[i];

		json_begin_object(&w, NULL);
		json_u64(&w, "guest", t->guest);
		json_i64(&w, "tid", t->tid);
		if (t->vcpu >= 0)
			json_u64(&w, "vcpu", t->vcpu);
		json_string(&w, "comm", t->comm);
		json_u64(&w, "slices", t->nr_slices);
		json_u64(&w, "wall_ns", t->wall_ns);
		json_u64(&w, "uncertain_slices", t->nr_uncertain);
		json_u64(&w, "uncertain_ns", t->uncertain_ns);
		json_split(&w, a, "split", &t->split);
		json_end_object(&w);
	}
	json_end_array(&w);
	if (a->opt.json_cb && a->opt.json_cb(a->opt.ctx, &w))
		return -1;
	json_end_object(&w);
	json_finish(&w);
	return ferror(out) ? -1 : 0;
}
