// SPDX-License-Identifier: GPL-2.0
/*
 * Per request (analyze_req.h): requests' time split into the engine's
 * components while the guest has their thread on a vCPU, and into the
 * guest's run queue or blocked while it has not.
 *
 * A thread's state, from the guest's sched_switch (and sched_wakeup):
 *   ON vCPU v     its time is the engine's charges of v's slice (charge_cb)
 *   RUNQ          switched out runnable (prev_state R), or woken: on
 *                 the run queue of one vCPU (the one it left, or the
 *                 wakeup's target), whose thread "ran instead"
 *   BLOCKED       switched out asleep, until its wakeup
 *   UNSPLIT       never seen by the guest's scheduler, or its switch out
 *                 lost (the vCPU's next switch named another prev)
 * Every cut (a request's ends, a state change) first charges the guest's
 * vCPUs up to that time (hga_charge_guest()), so no charge straddles it.
 * A vCPU keeps the threads waiting on its run queue (keys, as the table
 * moves its entries); its guest switch charges them up to the switch
 * with the thread leaving as "who ran instead", before the next one is
 * on, so a wait's pieces each have one such thread.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analyze_req.h"
#include "json.h"

enum { ST_UNSPLIT, ST_ON, ST_RUNQ, ST_BLOCKED };

#define KEY_VCPU	(1ull << 62)
#define NO_KEY		HGR_NO_KEY

/* A guest thread (key: guest << 32 | tid, + 1) or a vCPU (| KEY_VCPU). */
struct hgr_thread {
	uint64_t key;			/* 0: a free slot */
	uint8_t st;			/* threads: ST_* */
	bool open, cur_known;
	bool rq_new;			/* threads: the next RUNQ piece begins a count */
	int32_t vcpu;			/* threads: ST_ON's vCPU */
	int32_t rq_vcpu;		/* threads: ST_RUNQ's run queue (-1: not known) */
	int32_t cur_tid;		/* vCPUs: the thread the guest has on it */
	char comm[HGA_COMM_LEN];	/* threads: the last name the guest gave it */
	uint64_t *waiters;		/* vCPUs: thread keys, maybe on its run queue */
	uint32_t nr_waiters, cap_waiters;
	uint64_t last_ns;		/* threads: charged up to here */
	uint32_t depth;			/* open request: 1 + nested begins */
	uint64_t begin_ns, begin_bound;
	char name[HGR_NAME_LEN];
	struct hgr_split split;
};

struct hgr_kept {
	uint64_t wall;
	uint64_t ns[HGR_NR_COMP];
	uint64_t top_key[3];		/* largest offender, exit reason, run-queue offender */
};

static const char *const comp_names[HGR_NR_COMP] = {
	[HGR_C_RUNNING] = "running",
	[HGR_C_RUNQ] = "runqueue",
	[HGR_C_PREEMPTED] = "preempted",
	[HGR_C_EXIT] = "exits",
	[HGR_C_HALTED] = "halted",
	[HGR_C_BLOCKED] = "blocked",
	[HGR_C_HOST_BLOCKED] = "host_blocked",
	[HGR_C_DISRUPTED] = "disrupted",
	[HGR_C_UNKNOWN] = "unknown",
	[HGR_C_UNSPLIT] = "unsplit",
};

const char *hgr_comp_name(enum hgr_comp c)
{
	return (unsigned int)c < HGR_NR_COMP ? comp_names[c] : "wall";
}

static const enum hgr_comp from_engine[HGA_NR_COMP] = {
	[HGA_C_GUEST] = HGR_C_RUNNING,
	[HGA_C_EXIT] = HGR_C_EXIT,
	[HGA_C_PREEMPTED] = HGR_C_PREEMPTED,
	[HGA_C_HOST_BLOCKED] = HGR_C_HOST_BLOCKED,
	[HGA_C_HALTED] = HGR_C_HALTED,
	[HGA_C_DISRUPTED] = HGR_C_DISRUPTED,
	[HGA_C_UNKNOWN] = HGR_C_UNKNOWN,
};

static uint64_t tkey(int32_t guest, int32_t tid)
{
	return ((uint64_t)(uint32_t)guest << 32 | (uint32_t)tid) + 1;
}

static uint64_t vkey(int32_t guest, int32_t vcpu)
{
	return tkey(guest, vcpu) | KEY_VCPU;
}

/* ---- the table: open addressing, linear probing, grown at half full ---- */

static uint32_t slot_of(uint64_t key, uint32_t cap)
{
	key ^= key >> 29;
	key *= 0xbf58476d1ce4e5b9ull;
	key ^= key >> 32;
	return (uint32_t)key & (cap - 1);
}

static struct hgr_thread *find(const struct hgr *r, uint64_t key)
{
	uint32_t i;

	if (!r->tab_cap)
		return NULL;
	for (i = slot_of(key, r->tab_cap); r->tab[i].key; i = (i + 1) & (r->tab_cap - 1))
		if (r->tab[i].key == key)
			return &r->tab[i];
	return NULL;
}

/* The entry of @key, made when new; NULL when out of memory.  Moves the others. */
static struct hgr_thread *get(struct hgr *r, uint64_t key)
{
	struct hgr_thread *t = find(r, key);
	uint32_t i;

	if (t)
		return t;
	if ((r->tab_n + 1) * 2 > r->tab_cap) {
		uint32_t cap = r->tab_cap ? r->tab_cap * 2 : 64, j;
		struct hgr_thread *old = r->tab, *tab;

		if (cap > (1u << 30))
			return NULL;
		tab = calloc(cap, sizeof(*tab));
		if (!tab)
			return NULL;
		for (j = 0; j < r->tab_cap; j++) {
			if (!old[j].key)
				continue;
			for (i = slot_of(old[j].key, cap); tab[i].key; i = (i + 1) & (cap - 1))
				;
			tab[i] = old[j];
		}
		free(old);
		r->tab = tab;
		r->tab_cap = cap;
	}
	for (i = slot_of(key, r->tab_cap); r->tab[i].key; i = (i + 1) & (r->tab_cap - 1))
		;
	t = &r->tab[i];
	memset(t, 0, sizeof(*t));
	t->key = key;
	t->st = ST_UNSPLIT;
	t->vcpu = -1;
	t->rq_vcpu = -1;
	r->tab_n++;
	return t;
}

/* ---- splits ---- */

static void split_free(struct hgr_split *s)
{
	hga_buckets_free(&s->exits);
	hga_buckets_free(&s->offenders);
	hga_buckets_free(&s->runq_by);
	memset(s, 0, sizeof(*s));
}

static void split_reset(struct hgr_split *s)
{
	memset(s->ns, 0, sizeof(s->ns));
	hga_buckets_reset(&s->exits);
	hga_buckets_reset(&s->offenders);
	hga_buckets_reset(&s->runq_by);
}

static int buckets_add(struct hga_buckets *dst, const struct hga_buckets *src)
{
	uint32_t i;

	for (i = 0; i < src->n; i++)
		if (hga_bucket_add(dst, src->v[i].key, src->v[i].ns, src->v[i].count))
			return -1;
	return 0;
}

static uint64_t split_sum(const struct hgr_split *s)
{
	uint64_t sum = 0;
	int c;

	for (c = 0; c < HGR_NR_COMP; c++)
		sum += s->ns[c];
	return sum;
}

static int split_add(struct hgr_split *dst, const struct hgr_split *src)
{
	int c;

	for (c = 0; c < HGR_NR_COMP; c++)
		dst->ns[c] += src->ns[c];
	if (buckets_add(&dst->exits, &src->exits) || buckets_add(&dst->offenders, &src->offenders) ||
	    buckets_add(&dst->runq_by, &src->runq_by))
		return -1;
	return 0;
}

static uint64_t top_of(const struct hga_buckets *b)
{
	uint64_t key = NO_KEY, ns = 0;
	uint32_t i;

	for (i = 0; i < b->n; i++) {
		if (b->v[i].ns > ns || (key == NO_KEY && b->v[i].count)) {
			ns = b->v[i].ns;
			key = b->v[i].key;
		}
	}
	return key;
}

static uint64_t clip(const struct hgr *r, uint64_t t)
{
	if (t < r->a.opt.from_ns)
		return r->a.opt.from_ns;
	return t > r->a.opt.to_ns ? r->a.opt.to_ns : t;
}

/* The engine's charge of an open slice: the thread's, when the guest has it there. */
static int on_charge(void *ctx, const struct hga_charge *ch)
{
	struct hgr *r = ctx;
	struct hgr_thread *t;
	enum hgr_comp c;
	int ret;

	if (r->opt.charge_cb) {
		ret = r->opt.charge_cb(r->opt.ctx, &r->a, ch);
		if (ret)
			return ret;
	}
	if (ch->tid <= 0 || (unsigned int)ch->comp >= HGA_NR_COMP)
		return 0;
	t = find(r, tkey(ch->guest, ch->tid));
	if (!t || !t->open || t->st != ST_ON || t->vcpu != ch->vcpu)
		return 0;
	c = from_engine[ch->comp];
	t->split.ns[c] += ch->t1 - ch->t0;
	if (c == HGR_C_EXIT)
		return hga_bucket_add(&t->split.exits, ch->key, ch->t1 - ch->t0, ch->count);
	if (c == HGR_C_PREEMPTED)
		return hga_bucket_add(&t->split.offenders, ch->key, ch->t1 - ch->t0, ch->count);
	return 0;
}

static int32_t guest_of(const struct hgr_thread *t)
{
	return (int32_t)(uint32_t)((t->key - 1) >> 32);
}

/* Who runs now on the vCPU whose run queue holds @t (ST_RUNQ). */
static uint64_t runq_key(const struct hgr *r, const struct hgr_thread *t)
{
	const struct hgr_thread *v;
	int32_t guest = guest_of(t);

	if (t->rq_vcpu < 0)
		return HGR_RQ_UNKNOWN;
	v = find(r, vkey(guest, t->rq_vcpu));
	/* not known, or the thread itself (its switch in was lost) */
	if (!v || !v->cur_known || tkey(guest, v->cur_tid) == t->key)
		return HGR_RQ_UNKNOWN;
	return HGR_RQ_KEY(guest, v->cur_tid < 0 ? 0 : v->cur_tid);
}

/*
 * A thread off the vCPUs: [last, @at) to its guest state's component
 * (the run queue's by who runs on its vCPU now: callers charge a wait
 * before that vCPU's thread changes).  0, or -1 (no memory).
 */
static int charge_off(struct hgr *r, struct hgr_thread *t, uint64_t at)
{
	static const enum hgr_comp of_state[] = {
		[ST_UNSPLIT] = HGR_C_UNSPLIT, [ST_RUNQ] = HGR_C_RUNQ, [ST_BLOCKED] = HGR_C_BLOCKED,
	};
	bool piece_new;
	uint64_t ns;

	if (at <= t->last_ns)
		return 0;
	ns = clip(r, at) - clip(r, t->last_ns);
	t->last_ns = at;
	if (!t->open || t->st == ST_ON)
		return 0;
	t->split.ns[of_state[t->st]] += ns;
	if (t->st != ST_RUNQ || !ns)
		return 0;
	piece_new = t->rq_new;
	t->rq_new = false;
	return hga_bucket_add(&t->split.runq_by, runq_key(r, t), ns, piece_new);
}

/*
 * @tid of @guest goes on @vcpu's run queue at @at (it was charged up to
 * @at).  Looks both up again: get() may move the table.  0 or -1.
 */
static int wait_on(struct hgr *r, int32_t guest, int32_t vcpu, int32_t tid)
{
	struct hgr_thread *v, *t;
	uint64_t key = tkey(guest, tid);
	uint32_t i;

	v = vcpu >= 0 ? get(r, vkey(guest, vcpu)) : NULL;
	if (vcpu >= 0 && !v)
		return -1;
	t = find(r, key);
	if (!t)
		return -1;
	t->st = ST_RUNQ;
	t->rq_vcpu = vcpu;
	t->rq_new = true;
	if (!v)
		return 0;
	for (i = 0; i < v->nr_waiters; i++)
		if (v->waiters[i] == key)
			return 0;
	if (v->nr_waiters == v->cap_waiters) {
		uint32_t cap = v->cap_waiters ? v->cap_waiters * 2 : 8;
		uint64_t *w = realloc(v->waiters, cap * sizeof(*w));

		if (!w)
			return -1;
		v->waiters = w;
		v->cap_waiters = cap;
	}
	v->waiters[v->nr_waiters++] = key;
	return 0;
}

/*
 * @v's thread is about to change at @at: the threads waiting on its run
 * queue charged up to @at (what ran there so far ran instead of them),
 * those no longer waiting there dropped from its list.  0 or -1.
 */
static int charge_waiters(struct hgr *r, struct hgr_thread *v, int32_t vcpu, uint64_t at)
{
	uint32_t i, n = 0;

	for (i = 0; i < v->nr_waiters; i++) {
		struct hgr_thread *t = find(r, v->waiters[i]);

		if (!t || t->st != ST_RUNQ || t->rq_vcpu != vcpu)
			continue;
		if (charge_off(r, t, at))
			return -1;
		t->rq_new = true;	/* the next piece: another thread's */
		v->waiters[n++] = v->waiters[i];
	}
	v->nr_waiters = n;
	return 0;
}

static int json_section(void *ctx, struct json_writer *w);

/* A closed slice, to the options' slice_cb (after its last charge). */
static int on_slice(void *ctx, const struct hga_slice *s)
{
	struct hgr *r = ctx;

	return r->opt.slice_cb(r->opt.ctx, &r->a, s);
}

int hgr_init(struct hgr *r, uint64_t from_ns, uint64_t to_ns, const struct hgr_options *opt)
{
	struct hga_options aopt = {
		.from_ns = from_ns, .to_ns = to_ns, .charge_cb = on_charge,
		.json_cb = json_section, .ctx = r,
	};

	memset(r, 0, sizeof(*r));
	if (opt)
		r->opt = *opt;
	if (r->opt.slice_cb)
		aopt.slice_cb = on_slice;
	if (!r->opt.top)
		r->opt.top = 10;
	if (r->opt.top > HGR_MAX_TOP)
		r->opt.top = HGR_MAX_TOP;
	return hga_init(&r->a, &aopt);
}

static void refuse(struct hgr *r, uint64_t *counter, const char *what, const struct hgr_event *ev)
{
	(*counter)++;
	if (!r->first_err[0])
		snprintf(r->first_err, sizeof(r->first_err),
			 "a request's %s at %" PRIu64 " ns (guest %" PRId32 ", tid %" PRId32 ")",
			 what, ev->host_ns, ev->guest, ev->tid);
}

int hgr_engine_event(struct hgr *r, const struct hga_event *ev)
{
	struct hgr_thread *t;
	int32_t old_tid;
	bool old_known;
	uint64_t at;
	int ret;

	ret = hga_event(&r->a, ev);
	if (ret || ev->kind != HGA_EV_GUEST_SWITCH)
		return ret;
	at = ev->host_ns;
	/* the other vCPUs' time up to the switch: a thread may move between them */
	if (hga_charge_guest(&r->a, ev->guest, at))
		return -1;
	t = get(r, vkey(ev->guest, ev->vcpu));
	if (!t)
		return -1;
	/* the waits on this run queue up to now: before its thread changes */
	if (charge_waiters(r, t, ev->vcpu, at))
		return -1;
	old_known = t->cur_known;
	old_tid = t->cur_tid;
	t->cur_known = true;
	t->cur_tid = ev->next_tid;
	/* the thread leaving: as prev_state says, unless the switch lost it */
	if (old_known && old_tid > 0) {
		t = find(r, tkey(ev->guest, old_tid));
		if (t && t->st == ST_ON && t->vcpu == ev->vcpu) {
			t->last_ns = at;
			t->st = old_tid != ev->prev_tid ? ST_UNSPLIT : ST_BLOCKED;
			if (old_tid == ev->prev_tid && ev->prev_runnable &&
			    wait_on(r, ev->guest, ev->vcpu, old_tid))
				return -1;
		}
	}
	if (old_tid != ev->prev_tid && ev->prev_tid > 0) {
		/* the vCPU's first switch (or a lost one): prev was here until now */
		t = get(r, tkey(ev->guest, ev->prev_tid));
		if (!t)
			return -1;
		if (t->st == ST_UNSPLIT || !old_known) {
			if (charge_off(r, t, at))
				return -1;
			if (t->st != ST_ON || t->vcpu == ev->vcpu) {
				t->st = ST_BLOCKED;
				if (ev->prev_runnable && wait_on(r, ev->guest, ev->vcpu, ev->prev_tid))
					return -1;
			}
		}
	}
	if (ev->next_tid > 0) {
		t = get(r, tkey(ev->guest, ev->next_tid));
		if (!t)
			return -1;
		memcpy(t->comm, ev->next_comm, sizeof(t->comm));
		t->comm[HGA_COMM_LEN - 1] = '\0';
		if (t->st != ST_ON && charge_off(r, t, at))
			return -1;
		/* on another vCPU still (its switch out lost): that one's charges end now */
		t->st = ST_ON;
		t->vcpu = ev->vcpu;
		t->last_ns = at;
	}
	return 0;
}

/* Keeps @rq among the slowest (sorted, slowest first); 0 or -1. */
static int keep_slow(struct hgr *r, const struct hgr_request *rq)
{
	struct hgr_request *s;
	uint32_t i;

	if (!r->slow) {
		r->slow = calloc(r->opt.top, sizeof(*r->slow));
		if (!r->slow)
			return -1;
	}
	if (r->nr_slow == r->opt.top) {
		if (rq->wall_ns <= r->slow[r->nr_slow - 1].wall_ns)
			return 0;
		split_free(&r->slow[--r->nr_slow].split);
	}
	for (i = r->nr_slow; i > 0 && r->slow[i - 1].wall_ns < rq->wall_ns; i--)
		;
	memmove(&r->slow[i + 1], &r->slow[i], (r->nr_slow - i) * sizeof(*r->slow));
	r->nr_slow++;
	s = &r->slow[i];
	*s = *rq;
	memset(&s->split, 0, sizeof(s->split));
	return split_add(&s->split, &rq->split) ? -1 : 0;
}

static int keep(struct hgr *r, const struct hgr_request *rq)
{
	struct hgr_kept *k;

	if (r->nr_kept == HGR_MAX_KEPT) {
		r->nr_not_kept++;
		return 0;
	}
	if (r->nr_kept == r->cap_kept) {
		uint32_t cap = r->cap_kept ? r->cap_kept * 2 : 256;

		k = realloc(r->kept, cap * sizeof(*k));
		if (!k)
			return -1;
		r->kept = k;
		r->cap_kept = cap;
	}
	k = &r->kept[r->nr_kept++];
	r->sorted_by = 0;
	k->wall = rq->wall_ns;
	memcpy(k->ns, rq->split.ns, sizeof(k->ns));
	memcpy(k->top_key, rq->top_key, sizeof(k->top_key));
	return 0;
}

static int close_request(struct hgr *r, struct hgr_thread *t, const struct hgr_event *ev)
{
	struct hgr_request rq = {
		.guest = ev->guest, .tid = ev->tid, .begin_ns = t->begin_ns, .end_ns = ev->host_ns,
		.bound_ns = t->begin_bound > ev->bound_ns ? t->begin_bound : ev->bound_ns,
	};
	uint64_t span = ev->host_ns - t->begin_ns;
	int ret = 0;

	t->open = false;
	memcpy(rq.name, t->name, sizeof(rq.name));
	rq.wall_ns = clip(r, ev->host_ns) - clip(r, t->begin_ns);
	if (!rq.wall_ns && span) {
		r->nr_outside++;
		goto out;
	}
	if (t->begin_ns < r->a.opt.from_ns || ev->host_ns > r->a.opt.to_ns)
		rq.flags |= HGR_RQ_CLIPPED;
	if (span <= t->begin_bound + ev->bound_ns || t->begin_bound + ev->bound_ns < t->begin_bound)
		rq.flags |= HGR_RQ_UNCERTAIN;
	rq.split = t->split;
	rq.top_key[0] = top_of(&t->split.offenders);
	rq.top_key[1] = top_of(&t->split.exits);
	rq.top_key[2] = top_of(&t->split.runq_by);
	if (split_sum(&t->split) != rq.wall_ns && !r->first_err[0])
		snprintf(r->first_err, sizeof(r->first_err),
			 "internal: a request's split (%" PRIu64 " ns) is not its wall time (%" PRIu64
			 " ns)", split_sum(&t->split), rq.wall_ns);
	if (rq.flags & HGR_RQ_UNCERTAIN) {
		r->nr_uncertain++;
		r->uncertain_ns += rq.wall_ns;
	} else {
		r->nr_requests++;
		r->wall_ns += rq.wall_ns;
		if (split_add(&r->tot, &t->split) || keep(r, &rq) || keep_slow(r, &rq)) {
			ret = -1;
			goto out;
		}
	}
	if (r->opt.req_cb)
		ret = r->opt.req_cb(r->opt.ctx, &rq);
out:
	split_reset(&t->split);
	return ret;
}

int hgr_event(struct hgr *r, const struct hgr_event *ev)
{
	struct hgr_thread *t;

	if (r->finished || !ev || !ev->kind || ev->kind >= HGR_EV_NR_KINDS ||
	    ev->guest < 0 || ev->guest >= HGA_MAX_GUESTS || ev->tid <= 0) {
		if (ev)
			refuse(r, &r->nr_bad, "event out of range", ev);
		else
			r->nr_bad++;
		return 1;
	}
	if (ev->host_ns < r->a.last_ns) {
		refuse(r, &r->nr_regressions, "event before the one already taken", ev);
		return 1;
	}
	if (hga_charge_guest(&r->a, ev->guest, ev->host_ns))
		return -1;
	t = get(r, tkey(ev->guest, ev->tid));
	if (!t)
		return -1;
	if (charge_off(r, t, ev->host_ns))
		return -1;
	switch (ev->kind) {
	case HGR_EV_WAKEUP:
		r->nr_wakeups++;
		if (t->st == ST_BLOCKED)
			return wait_on(r, ev->guest, ev->vcpu >= 0 && ev->vcpu < HGA_MAX_VCPUS ?
				       ev->vcpu : -1, ev->tid) ? -1 : 0;
		return 0;
	case HGR_EV_BEGIN:
		r->nr_begins++;
		if (t->open) {
			r->nr_nested++;
			if (t->depth < HGR_MAX_DEPTH)
				t->depth++;
			return 0;
		}
		t->open = true;
		t->depth = 1;
		t->begin_ns = ev->host_ns;
		t->begin_bound = ev->bound_ns;
		memcpy(t->name, ev->name, sizeof(t->name));
		t->name[HGR_NAME_LEN - 1] = '\0';
		split_reset(&t->split);
		return 0;
	default:
		if (!t->open) {
			refuse(r, &r->nr_end_alone, "end without a begin", ev);
			return 1;
		}
		if (--t->depth)
			return 0;
		return close_request(r, t, ev) < 0 ? -1 : 0;
	}
}

int hgr_finish(struct hgr *r, uint64_t end_ns)
{
	uint32_t i;
	int ret;

	if (r->finished)
		return 0;
	ret = hga_finish(&r->a, end_ns);
	r->finished = true;
	for (i = 0; i < r->tab_cap; i++) {
		if (!r->tab[i].key || !r->tab[i].open)
			continue;
		r->nr_never_ended++;
		r->tab[i].open = false;
	}
	return ret;
}

void hgr_free(struct hgr *r)
{
	uint32_t i;

	for (i = 0; i < r->tab_cap; i++) {
		split_free(&r->tab[i].split);
		free(r->tab[i].waiters);
	}
	for (i = 0; i < r->nr_slow; i++)
		split_free(&r->slow[i].split);
	split_free(&r->tot);
	free(r->tab);
	free(r->kept);
	free(r->slow);
	hga_free(&r->a);
	memset(r, 0, sizeof(*r));
}

/* ---- percentiles and the report ---- */

static int cmp_kept(const void *x, const void *y, void *arg)
{
	const struct hgr_kept *a = x, *b = y;
	unsigned int c = *(const unsigned int *)arg;
	uint64_t va = c < HGR_NR_COMP ? a->ns[c] : a->wall;
	uint64_t vb = c < HGR_NR_COMP ? b->ns[c] : b->wall;

	return va < vb ? -1 : va > vb;
}

/* The kept requests in order of component @c (HGR_NR_COMP: wall), once per @c in a row. */
static void sort_by(struct hgr *r, unsigned int c)
{
	if (r->sorted_by == c + 1)
		return;
	qsort_r(r->kept, r->nr_kept, sizeof(*r->kept), cmp_kept, &c);
	r->sorted_by = c + 1;
}

int hgr_percentile(struct hgr *r, unsigned int c, unsigned int pct, uint64_t *ns,
		   uint64_t *top_key)
{
	const struct hgr_kept *k;
	uint64_t rank;

	if (!r->nr_kept || c > HGR_NR_COMP || !pct || pct > 100)
		return -1;
	sort_by(r, c);
	rank = ((uint64_t)r->nr_kept * pct + 99) / 100;
	k = &r->kept[rank - 1];
	*ns = c < HGR_NR_COMP ? k->ns[c] : k->wall;
	*top_key = c == HGR_C_PREEMPTED ? k->top_key[0] : c == HGR_C_EXIT ? k->top_key[1] :
		   c == HGR_C_RUNQ ? k->top_key[2] : NO_KEY;
	return 0;
}

void hgr_runq_label(const struct hgr *r, uint64_t key, char *buf, size_t len)
{
	const struct hgr_thread *t;
	int32_t guest = (int32_t)(uint32_t)(key >> 32), tid = (int32_t)(uint32_t)key;

	if (key == HGR_RQ_UNKNOWN) {
		snprintf(buf, len, "(unknown)");
	} else if (key == UINT64_MAX - 1) {
		snprintf(buf, len, "(others)");
	} else if (!tid) {
		snprintf(buf, len, "%" PRId32 ":(idle)", guest);
	} else {
		t = find(r, tkey(guest, tid));
		snprintf(buf, len, "%" PRId32 ":%s-%" PRId32, guest, t && t->comm[0] ? t->comm : "?",
			 tid);
	}
}

static void key_label(const struct hgr *r, unsigned int c, uint64_t key, char *buf, size_t len)
{
	if (key == NO_KEY)
		snprintf(buf, len, "-");
	else if (c == HGR_C_RUNQ)
		hgr_runq_label(r, key, buf, len);
	else if (c == HGR_C_EXIT)
		hga_exit_label(buf, len, key);
	else if (key >= UINT64_MAX - 1)		/* the engine's unknown and others */
		snprintf(buf, len, "%s", hga_host_name(&r->a, key));
	else
		hga_offender_label(&r->a, key, buf, len);
}

static const unsigned int pcts[] = { 50, 90, 99, 100 };
static const char *const pct_names[] = { "p50", "p90", "p99", "max" };

static void say_problems(const struct hgr *r, FILE *out)
{
	if (r->nr_uncertain)
		fprintf(out, "# %" PRIu64 " requests (%" PRIu64 " ns) no longer than the mapping's "
			"bounds at their ends: uncertain, not split\n", r->nr_uncertain, r->uncertain_ns);
	if (r->nr_nested)
		fprintf(out, "# %" PRIu64 " nested begins (a begin inside an open request of its "
			"thread): counted in the outer request\n", r->nr_nested);
	if (r->nr_end_alone)
		fprintf(out, "# %" PRIu64 " ends without a begin: left out\n", r->nr_end_alone);
	if (r->nr_never_ended)
		fprintf(out, "# %" PRIu64 " requests never ended: not split\n", r->nr_never_ended);
	if (r->nr_regressions)
		fprintf(out, "# %" PRIu64 " request events before the events already taken (a "
			"clock going back): refused\n", r->nr_regressions);
	if (r->nr_bad)
		fprintf(out, "# %" PRIu64 " request events out of range: refused\n", r->nr_bad);
	if (r->first_err[0])
		fprintf(out, "# first: %s\n", r->first_err);
	if (r->nr_outside)
		fprintf(out, "# %" PRIu64 " requests outside --from/--to\n", r->nr_outside);
	if (r->nr_not_kept)
		fprintf(out, "# percentiles over the first %u requests (%" PRIu64 " more not kept)\n",
			HGR_MAX_KEPT, r->nr_not_kept);
	if (r->tot.ns[HGR_C_BLOCKED] && !r->nr_wakeups)
		fprintf(out, "# no guest sched_wakeup: \"blocked\" includes the wait on the guest's "
			"run queue after the wakeup\n");
	if (r->nr_begins && !r->a.seen[HGA_EV_GUEST_SWITCH])
		fprintf(out, "# no guest sched_switch: a request's time is \"unsplit\"\n");
}

int hgr_report_text(struct hgr *r, FILE *out)
{
	char label[64];
	uint64_t v, key;
	unsigned int c, p;
	uint32_t i;

	fprintf(out, "\n# requests (application slices, --analyze-slice pairs), host ns\n");
	fprintf(out, "# %" PRIu64 " requests split, %" PRIu64 " ns\n", r->nr_requests, r->wall_ns);
	say_problems(r, out);
	if (r->nr_slow) {
		fprintf(out, "\nslowest %u:\n  %-14s %-20s %-9s", r->nr_slow, "wall", "request",
			"guest:tid");
		for (c = 0; c < HGR_NR_COMP; c++)
			if (r->tot.ns[c])
				fprintf(out, " %12s", hgr_comp_name(c));
		fprintf(out, "  most by\n");
	}
	for (i = 0; i < r->nr_slow; i++) {
		const struct hgr_request *s = &r->slow[i];

		snprintf(label, sizeof(label), "%" PRId32 ":%" PRId32, s->guest, s->tid);
		fprintf(out, "  %-14" PRIu64 " %-20.20s %-9s", s->wall_ns,
			s->name[0] ? s->name : "-", label);
		for (c = 0; c < HGR_NR_COMP; c++)
			if (r->tot.ns[c])
				fprintf(out, " %12" PRIu64, s->split.ns[c]);
		key_label(r, HGR_C_PREEMPTED, s->top_key[0], label, sizeof(label));
		fprintf(out, "  %s", label);
		key_label(r, HGR_C_EXIT, s->top_key[1], label, sizeof(label));
		fprintf(out, ", %s", label);
		if (s->split.ns[HGR_C_RUNQ]) {
			key_label(r, HGR_C_RUNQ, s->top_key[2], label, sizeof(label));
			fprintf(out, ", queued behind %s", label);
		}
		fprintf(out, "\n");
	}
	if (!r->nr_kept)
		return ferror(out) ? -1 : 0;
	fprintf(out, "\npercentiles over %" PRIu32 " requests (nearest rank):\n  %-12s", r->nr_kept,
		"");
	for (p = 0; p < 4; p++)
		fprintf(out, " %14s", pct_names[p]);
	fprintf(out, "  at p99, most by\n");
	for (c = 0; c <= HGR_NR_COMP; c++) {
		if (c < HGR_NR_COMP && !r->tot.ns[c])
			continue;
		fprintf(out, "  %-12s", hgr_comp_name(c));
		for (p = 0; p < 4; p++) {
			hgr_percentile(r, c, pcts[p], &v, &key);
			fprintf(out, " %14" PRIu64, v);
		}
		hgr_percentile(r, c, 99, &v, &key);
		key_label(r, c, key, label, sizeof(label));
		fprintf(out, "  %s\n", label);
	}
	for (c = 0; c < HGR_NR_COMP; c++) {
		if ((c != HGR_C_PREEMPTED && c != HGR_C_EXIT && c != HGR_C_RUNQ) ||
		    !r->tot.ns[c] || hgr_percentile(r, c, 99, &v, &key) || !v)
			continue;
		key_label(r, c, key, label, sizeof(label));
		fprintf(out, "# p99 requests lost %" PRIu64 " ns to %s, most by %s\n", v,
			c == HGR_C_PREEMPTED ? "host preemption" : c == HGR_C_EXIT ? "VM exits" :
			"the guest's run queue", label);
	}
	return ferror(out) ? -1 : 0;
}

static void json_buckets(struct json_writer *w, const struct hgr *r, unsigned int c,
			 const struct hga_buckets *b)
{
	char label[64];
	uint32_t i;

	json_begin_array(w, c == HGR_C_EXIT ? "exit_reasons" : c == HGR_C_RUNQ ? "runqueue_by" :
			 "preempted_by");
	for (i = 0; i < b->n; i++) {
		json_begin_object(w, NULL);
		key_label(r, c, b->v[i].key, label, sizeof(label));
		json_string(w, c == HGR_C_EXIT ? "reason" : c == HGR_C_RUNQ ? "thread" : "task", label);
		if (c == HGR_C_RUNQ && b->v[i].key < UINT64_MAX - 1)
			json_u64(w, "tid", (uint32_t)b->v[i].key);
		json_u64(w, "ns", b->v[i].ns);
		json_u64(w, "count", b->v[i].count);
		json_end_object(w);
	}
	json_end_array(w);
}

static void json_split(struct json_writer *w, const struct hgr *r, const char *key,
		       const struct hgr_split *s)
{
	unsigned int c;

	json_begin_object(w, key);
	for (c = 0; c < HGR_NR_COMP; c++)
		json_u64(w, hgr_comp_name(c), s->ns[c]);
	json_buckets(w, r, HGR_C_EXIT, &s->exits);
	json_buckets(w, r, HGR_C_PREEMPTED, &s->offenders);
	json_buckets(w, r, HGR_C_RUNQ, &s->runq_by);
	json_end_object(w);
}

static int json_section(void *ctx, struct json_writer *w)
{
	struct hgr *r = ctx;
	char label[64];
	uint64_t v, key;
	unsigned int c, p;
	uint32_t i;

	json_begin_object(w, "requests");
	json_u64(w, "split", r->nr_requests);
	json_u64(w, "wall_ns", r->wall_ns);
	json_u64(w, "uncertain", r->nr_uncertain);
	json_u64(w, "uncertain_ns", r->uncertain_ns);
	json_u64(w, "nested_begins", r->nr_nested);
	json_u64(w, "ends_without_begin", r->nr_end_alone);
	json_u64(w, "never_ended", r->nr_never_ended);
	json_u64(w, "refused_regressions", r->nr_regressions);
	json_u64(w, "refused_malformed", r->nr_bad);
	json_string(w, "first_refused", r->first_err);
	json_u64(w, "outside_window", r->nr_outside);
	json_u64(w, "not_in_percentiles", r->nr_not_kept);
	json_bool(w, "wakeups_traced", r->nr_wakeups != 0);
	json_split(w, r, "all", &r->tot);
	json_begin_array(w, "slowest");
	for (i = 0; i < r->nr_slow; i++) {
		const struct hgr_request *s = &r->slow[i];

		json_begin_object(w, NULL);
		json_string(w, "name", s->name);
		json_u64(w, "guest", s->guest);
		json_u64(w, "tid", s->tid);
		json_u64(w, "begin_ns", s->begin_ns);
		json_u64(w, "end_ns", s->end_ns);
		json_u64(w, "wall_ns", s->wall_ns);
		json_u64(w, "bound_ns", s->bound_ns);
		json_bool(w, "clipped", s->flags & HGR_RQ_CLIPPED);
		json_split(w, r, "split", &s->split);
		json_end_object(w);
	}
	json_end_array(w);
	json_begin_array(w, "percentiles");
	for (c = 0; c <= HGR_NR_COMP && r->nr_kept; c++) {
		json_begin_object(w, NULL);
		json_string(w, "component", hgr_comp_name(c));
		for (p = 0; p < 4; p++) {
			hgr_percentile(r, c, pcts[p], &v, &key);
			json_u64(w, pct_names[p], v);
		}
		hgr_percentile(r, c, 99, &v, &key);
		if (key != NO_KEY) {
			key_label(r, c, key, label, sizeof(label));
			json_string(w, "p99_most_by", label);
		}
		json_end_object(w);
	}
	json_end_array(w);
	json_end_object(w);
	return 0;
}
