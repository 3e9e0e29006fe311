// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock merge --perfetto: the merged timeline as a native Perfetto
 * trace (protobuf), one Perfetto machine per VM.  Documentation/merge.rst,
 * "Perfetto trace".
 *
 * The file is Perfetto's Trace message: TracePackets one after another,
 * each encoded by protobuf-c from user/perfetto_trace.proto (a subset of
 * Perfetto's schema with Perfetto's field numbers) and framed as field 1
 * of Trace.  What it holds:
 *
 *   - a track per machine (the host, each guest: its packets carry
 *     machine_id = guest id + 1, the host's none), under it a track per
 *     CPU (host) or per guest CPU, and a thread track per application
 *     thread (hgclock_events_open(3));
 *   - every trace event an instant on its CPU's track at its host time,
 *     a guest's with its mapping as arguments (guest clock value, host
 *     CPU and thread, method, bound); application events instants or
 *     slices on their thread's track, perf samples instants;
 *   - each vCPU run (the correlation's tracking records) twice: a slice
 *     on its host CPU's track and one on the guest CPU's track, under
 *     which that run's guest events nest, joined by a flow;
 *   - with merge --analyze (the analysis, below): each guest thread's
 *     time as the host saw it, on a track of its own: a slice per time
 *     the guest ran it on a vCPU, and in it a slice per VM exit (by
 *     reason), host preemption (a flow to an instant on the track of the
 *     host task that ran instead), sleep of the vCPU thread on the host
 *     and disruption.
 *
 * Strings are interned, as Perfetto's own writers do: an event's name
 * and category and its arguments' names are numbers (iids) in each
 * sequence (one per machine), a string given once, in the packet that
 * first uses it (InternedData, with SEQ_NEEDS_INCREMENTAL_STATE on every
 * packet that names one; each sequence's first packet clears the state).
 * A trace event then costs its timestamp, track, type, iids and argument
 * values: about half the bytes of writing each string every time.
 *
 * Memory: one packet's buffer, the application threads already
 * described and the interned strings (at most PF_INTERN_MAX, then
 * written inline), whatever the number of events: the events are written as
 * the merge hands them over, in host time order.  The runs come last,
 * from the correlation (already in memory); Perfetto sorts a file's
 * packets by time before it reads the events.  The analysis is a pass of
 * its own after them, holding each vCPU's open slice's pieces (at most
 * PF_AN_MAX_PIECES) until the slice closes: only then is it known
 * whether the slice is longer than its ends' bounds (certain).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event-parse.h>
#include <trace-seq.h>

#include "analyze_req.h"
#include "appev.h"
#include "merge.h"
#include "perfetto_trace.pb-c.h"

typedef Perfetto__Protos__TracePacket pf_packet;
typedef Perfetto__Protos__TrackEvent pf_event;
typedef Perfetto__Protos__TrackDescriptor pf_track;
typedef Perfetto__Protos__ThreadDescriptor pf_thread;
typedef Perfetto__Protos__DebugAnnotation pf_arg;

/* TracePacket.sequence_flags: SEQ_INCREMENTAL_STATE_CLEARED, SEQ_NEEDS_INCREMENTAL_STATE */
#define PF_SEQ_CLEARED		1
#define PF_SEQ_NEEDS_STATE	2
/* Trace.packet: field 1, length-delimited */
#define PF_TRACE_PACKET_TAG	0x0a
#define PF_MAX_ARGS		16

/*
 * Track uuids, unique in the file: machine m (0 the host, guest g is
 * g + 1) in bits 40-51, the kind in 32-39, the CPU or thread id below.
 */
#define PF_KIND_MACHINE		0
#define PF_KIND_CPU		1
#define PF_KIND_THREAD		2
#define PF_KIND_MARKS		3	/* a machine's "hgclock disruptions" track */
#define PF_KIND_GTHREAD		4	/* a guest thread's time on the host (--analyze) */
#define PF_KIND_HOSTTASK	5	/* a host task that ran instead of a vCPU (--analyze) */
#define PF_KIND_HOSTIRQ		6	/* a host IRQ that did (--analyze): its number */
#define PF_KIND_HOSTSOFTIRQ	7	/* a host softirq that did (--analyze): its vector */

static uint64_t track_uuid(int guest, unsigned int kind, uint32_t id)
{
	return ((uint64_t)(guest + 2) << 40) | ((uint64_t)kind << 32) | id;
}

/*
 * Tracks described so far, each with a value of its user's (the
 * analysis's thread tracks: their last slice's end): open addressing on
 * the uuid.
 */
struct pf_seen_slot {
	uint64_t key;		/* a track uuid; 0: an empty slot (uuids are never 0) */
	uint64_t val;		/* 0 when added */
};

struct pf_seen {
	struct pf_seen_slot *slot;
	size_t nr, cap;		/* cap: a power of 2, 0 before the first */
};

/*
 * Interned strings: one table for every sequence and kind, keyed by
 * (sequence, kind, string).  Open addressing on the string's hash.
 */
enum pf_intern_kind { PF_IN_NAME, PF_IN_CATEGORY, PF_IN_ARG_NAME, PF_IN_KINDS };

/* Strings interned in all, past which new ones are written inline (a merge has a few hundred). */
#define PF_INTERN_MAX		(1u << 20)

struct pf_intern_slot {
	char *str;		/* NULL: an empty slot; else owned */
	uint64_t hash;
	uint64_t iid;
	uint32_t seq;		/* machine_index() */
	uint32_t kind;
};

struct pf_intern {
	struct pf_intern_slot *slot;
	size_t nr, cap;		/* cap: a power of 2, 0 before the first */
	uint64_t next_iid[HGSYNC_MAX_GUESTS + 1][PF_IN_KINDS];	/* last iid given, by sequence */
};

struct pf {
	const struct hgm *m;
	FILE *out;
	uint8_t *buf;
	size_t cap;
	struct pf_seen threads;
	struct pf_intern *intern;
	bool *seq_started;	/* by machine: its sequence's first packet written */
	uint64_t min_ns, max_ns;
	struct hgm_pf_result *res;
	int failed_errno;	/* a failed write or allocation: the run stops */
};

static uint32_t machine_index(int guest)
{
	return (uint32_t)(guest + 1);
}

/*
 * The most bytes a packet's frame takes: the field's tag and its length,
 * a varint of up to 10 bytes.
 */
#define PF_HEAD_MAX	(1 + 10)

/*
 * Frames and writes @p as a packet of machine @guest (-1: the host).
 * The packet is packed after room for its frame, which is then put
 * right before it: one fwrite() a packet (a packet per event).
 */
static int put_packet(struct pf *pf, pf_packet *p, int guest)
{
	uint32_t mi = machine_index(guest);
	uint8_t head[PF_HEAD_MAX], *start;
	size_t n, len, hlen = 0;

	p->has_trusted_packet_sequence_id = true;
	p->trusted_packet_sequence_id = mi + 1;
	if (!pf->seq_started[mi]) {
		p->has_sequence_flags = true;
		p->sequence_flags |= PF_SEQ_CLEARED;
		pf->seq_started[mi] = true;
	}
	if (guest >= 0) {
		p->has_machine_id = true;
		p->machine_id = (uint32_t)guest + 1;
	}
	len = perfetto__protos__trace_packet__get_packed_size(p);
	if (PF_HEAD_MAX + len > pf->cap) {
		size_t cap = PF_HEAD_MAX + len < 4096 ? 4096 : 2 * (PF_HEAD_MAX + len);
		uint8_t *b = realloc(pf->buf, cap);

		if (!b) {
			pf->failed_errno = ENOMEM;
			return -1;
		}
		pf->buf = b;
		pf->cap = cap;
	}
	n = perfetto__protos__trace_packet__pack(p, pf->buf + PF_HEAD_MAX);
	head[hlen++] = PF_TRACE_PACKET_TAG;
	for (uint64_t v = n; ; v >>= 7) {
		head[hlen++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
		if (v < 0x80)
			break;
	}
	start = pf->buf + PF_HEAD_MAX - hlen;
	memcpy(start, head, hlen);
	if (n != len || fwrite(start, 1, hlen + n, pf->out) != hlen + n) {
		pf->failed_errno = n != len ? EINVAL : errno ? errno : EIO;
		return -1;
	}
	pf->res->nr_packets++;
	pf->res->bytes += hlen + n;
	return 0;
}

static int put_track(struct pf *pf, int guest, uint64_t uuid, uint64_t parent, const char *name,
		     const pf_thread *thread)
{
	pf_packet p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	pf_track t = PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;

	t.has_uuid = true;
	t.uuid = uuid;
	t.name = (char *)name;
	if (parent) {
		t.has_parent_uuid = true;
		t.parent_uuid = parent;
	}
	t.thread = (pf_thread *)thread;
	p.track_descriptor = &t;
	return put_packet(pf, &p, guest);
}

/* ---- an event's arguments, built on the stack ---- */

struct pf_args {
	pf_arg arg[PF_MAX_ARGS];
	pf_arg *ptr[PF_MAX_ARGS];
	int nr;
};

static pf_arg *arg_new(struct pf_args *a, const char *name)
{
	pf_arg init = PERFETTO__PROTOS__DEBUG_ANNOTATION__INIT;
	pf_arg *x;

	if (a->nr == PF_MAX_ARGS)
		return NULL;
	x = &a->arg[a->nr];
	*x = init;
	x->name = (char *)name;
	a->ptr[a->nr++] = x;
	return x;
}

static void arg_str(struct pf_args *a, const char *name, const char *v)
{
	pf_arg *x = arg_new(a, name);

	if (x) {
		x->value_case = PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_STRING_VALUE;
		x->string_value = (char *)v;
	}
}

static void arg_int(struct pf_args *a, const char *name, int64_t v)
{
	pf_arg *x = arg_new(a, name);

	if (x) {
		x->value_case = PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_INT_VALUE;
		x->int_value = v;
	}
}

static void arg_uint(struct pf_args *a, const char *name, uint64_t v)
{
	pf_arg *x = arg_new(a, name);

	if (x) {
		x->value_case = PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_UINT_VALUE;
		x->uint_value = v;
	}
}

/* ---- interned strings ---- */

static uint64_t str_hash(const char *str, uint32_t seq, uint32_t kind)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ ((uint64_t)seq << 8 | kind);

	for (const unsigned char *c = (const unsigned char *)str; *c; c++)
		h = (h ^ *c) * 0x100000001b3ULL;
	return h;
}

static bool intern_grow(struct pf_intern *in)
{
	size_t cap = in->cap ? 2 * in->cap : 256;
	struct pf_intern_slot *slot = calloc(cap, sizeof(*slot));

	if (!slot)
		return false;
	for (size_t k = 0; k < in->cap; k++) {
		size_t i;

		if (!in->slot[k].str)
			continue;
		for (i = in->slot[k].hash & (cap - 1); slot[i].str; i = (i + 1) & (cap - 1))
			;
		slot[i] = in->slot[k];
	}
	free(in->slot);
	in->slot = slot;
	in->cap = cap;
	return true;
}

static void intern_free(struct pf_intern *in)
{
	if (!in)
		return;
	for (size_t k = 0; k < in->cap; k++)
		free(in->slot[k].str);
	free(in->slot);
	free(in);
}

/*
 * The strings a packet interns: at most one name, one category and an
 * argument name per argument.  Their InternedData entries point at the
 * table's copies, which live as long as the table.
 */
struct pf_new_strings {
	Perfetto__Protos__InternedData data;
	Perfetto__Protos__EventName name, *names[1];
	Perfetto__Protos__EventCategory cat, *cats[1];
	Perfetto__Protos__DebugAnnotationName arg[PF_MAX_ARGS], *args[PF_MAX_ARGS];
	bool any;
};

/*
 * @str's iid in sequence @seq for @kind, added to @ns (the packet's new
 * strings) the first time; 0 when it is to be written inline (the table
 * is full) or memory ran out (pf->failed_errno set).
 */
static uint64_t intern(struct pf *pf, uint32_t seq, enum pf_intern_kind kind, const char *str,
		       struct pf_new_strings *ns)
{
	struct pf_intern *in = pf->intern;
	uint64_t h = str_hash(str, seq, kind), iid;
	struct pf_intern_slot *sl;
	size_t i;

	if (in->cap)
		for (i = h & (in->cap - 1); in->slot[i].str; i = (i + 1) & (in->cap - 1)) {
			sl = &in->slot[i];
			if (sl->hash == h && sl->seq == seq && sl->kind == kind && !strcmp(sl->str, str))
				return sl->iid;
		}
	if (in->nr >= PF_INTERN_MAX)
		return 0;
	if (2 * (in->nr + 1) > in->cap && !intern_grow(in)) {
		pf->failed_errno = ENOMEM;
		return 0;
	}
	for (i = h & (in->cap - 1); in->slot[i].str; i = (i + 1) & (in->cap - 1))
		;
	sl = &in->slot[i];
	sl->str = strdup(str);
	if (!sl->str) {
		pf->failed_errno = ENOMEM;
		return 0;
	}
	iid = ++in->next_iid[seq][kind];
	sl->hash = h;
	sl->iid = iid;
	sl->seq = seq;
	sl->kind = kind;
	in->nr++;

	ns->any = true;
	switch (kind) {
	case PF_IN_NAME: {
		Perfetto__Protos__EventName init = PERFETTO__PROTOS__EVENT_NAME__INIT;

		ns->name = init;
		ns->name.has_iid = true;
		ns->name.iid = iid;
		ns->name.name = sl->str;
		ns->names[0] = &ns->name;
		ns->data.n_event_names = 1;
		ns->data.event_names = ns->names;
		break;
	}
	case PF_IN_CATEGORY: {
		Perfetto__Protos__EventCategory init = PERFETTO__PROTOS__EVENT_CATEGORY__INIT;

		ns->cat = init;
		ns->cat.has_iid = true;
		ns->cat.iid = iid;
		ns->cat.name = sl->str;
		ns->cats[0] = &ns->cat;
		ns->data.n_event_categories = 1;
		ns->data.event_categories = ns->cats;
		break;
	}
	default: {
		Perfetto__Protos__DebugAnnotationName init = PERFETTO__PROTOS__DEBUG_ANNOTATION_NAME__INIT;
		size_t k = ns->data.n_debug_annotation_names;

		ns->arg[k] = init;
		ns->arg[k].has_iid = true;
		ns->arg[k].iid = iid;
		ns->arg[k].name = sl->str;
		ns->args[k] = &ns->arg[k];
		ns->data.n_debug_annotation_names = k + 1;
		ns->data.debug_annotation_names = ns->args;
		break;
	}
	}
	return iid;
}

/* A track event at @ns on @track; @a's names become iids (or stay inline). */
static int put_event(struct pf *pf, int guest, uint64_t ns, uint64_t track,
		     Perfetto__Protos__TrackEvent__Type type, const char *cat, const char *name,
		     struct pf_args *a, uint64_t *flow, uint64_t *end_flow)
{
	pf_packet p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	pf_event e = PERFETTO__PROTOS__TRACK_EVENT__INIT;
	Perfetto__Protos__InternedData data_init = PERFETTO__PROTOS__INTERNED_DATA__INIT;
	struct pf_new_strings fresh = { .any = false };
	uint32_t seq = machine_index(guest);
	bool by_iid = false;
	char *cats[1] = { (char *)cat };
	uint64_t cat_iid[1], iid;
	pf_arg arg[PF_MAX_ARGS], *argp[PF_MAX_ARGS];

	fresh.data = data_init;
	p.has_timestamp = true;
	p.timestamp = ns;
	e.has_type = true;
	e.type = type;
	e.has_track_uuid = true;
	e.track_uuid = track;
	if (type != PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END) {
		iid = name ? intern(pf, seq, PF_IN_NAME, name, &fresh) : 0;
		if (iid) {
			e.has_name_iid = true;
			e.name_iid = iid;
			by_iid = true;
		} else {
			e.name = (char *)name;
		}
		iid = intern(pf, seq, PF_IN_CATEGORY, cat, &fresh);
		if (iid) {
			cat_iid[0] = iid;
			e.n_category_iids = 1;
			e.category_iids = cat_iid;
			by_iid = true;
		} else {
			e.n_categories = 1;
			e.categories = cats;
		}
	}
	/* A copy: the caller may give @a again for another machine's sequence. */
	for (int k = 0; a && k < a->nr; k++) {
		arg[k] = a->arg[k];
		argp[k] = &arg[k];
		iid = intern(pf, seq, PF_IN_ARG_NAME, a->arg[k].name, &fresh);
		if (iid) {
			arg[k].has_name_iid = true;
			arg[k].name_iid = iid;
			arg[k].name = NULL;
			by_iid = true;
		}
	}
	if (a) {
		e.n_debug_annotations = (size_t)a->nr;
		e.debug_annotations = argp;
	}
	if (pf->failed_errno)
		return -1;
	if (fresh.any)
		p.interned_data = &fresh.data;
	if (by_iid) {
		p.has_sequence_flags = true;
		p.sequence_flags = PF_SEQ_NEEDS_STATE;
	}
	if (flow) {
		e.n_flow_ids = 1;
		e.flow_ids = flow;
	}
	if (end_flow) {
		e.n_terminating_flow_ids = 1;
		e.terminating_flow_ids = end_flow;
	}
	p.track_event = &e;
	return put_packet(pf, &p, guest);
}

/* ---- application threads ---- */

static uint64_t seen_hash(uint64_t key)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdULL;
	return key ^ (key >> 33);
}

/*
 * @key's slot, added (*@added set, its val 0) when new; NULL when out of
 * memory.  The slot moves when a later call grows the table.
 */
static struct pf_seen_slot *seen_get(struct pf_seen *s, uint64_t key, bool *added)
{
	size_t i;

	*added = false;
	if (2 * (s->nr + 1) > s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
		struct pf_seen_slot *slot = calloc(cap, sizeof(*slot));

		if (!slot)
			return NULL;
		for (size_t k = 0; k < s->cap; k++) {
			if (!s->slot[k].key)
				continue;
			for (i = seen_hash(s->slot[k].key) & (cap - 1); slot[i].key;
			     i = (i + 1) & (cap - 1))
				;
			slot[i] = s->slot[k];
		}
		free(s->slot);
		s->slot = slot;
		s->cap = cap;
	}
	for (i = seen_hash(key) & (s->cap - 1); s->slot[i].key; i = (i + 1) & (s->cap - 1))
		if (s->slot[i].key == key)
			return &s->slot[i];
	s->slot[i].key = key;
	s->slot[i].val = 0;
	s->nr++;
	*added = true;
	return &s->slot[i];
}

/* 1 if @key is new (now added), 0 if seen, -1 when out of memory. */
static int seen_add(struct pf_seen *s, uint64_t key)
{
	bool added;

	return !seen_get(s, key, &added) ? -1 : added;
}

/* The track of an application event's thread, described at its first event. */
static int app_track(struct pf *pf, const struct hgm_event *ev, uint64_t *uuid)
{
	const struct hgm_input *in = ev->in;
	pf_thread t = PERFETTO__PROTOS__THREAD_DESCRIPTOR__INIT;
	uint32_t tid = ev->app->tid;
	char name[64];
	int ret;

	*uuid = track_uuid(in->guest, PF_KIND_THREAD, tid);
	ret = seen_add(&pf->threads, *uuid);
	if (ret <= 0) {
		if (ret < 0)
			pf->failed_errno = ENOMEM;
		return ret;
	}
	snprintf(name, sizeof(name), "%s %u (app)", in->app_comm, tid);
	t.has_pid = true;
	t.pid = (int32_t)in->app_pid;
	t.has_tid = true;
	t.tid = (int32_t)tid;
	t.thread_name = name;
	return put_track(pf, in->guest, *uuid, track_uuid(in->guest, PF_KIND_MACHINE, 0), name, &t);
}

/* ---- the tracks, the events, the runs ---- */

/* The CPUs of machine @guest: its inputs', and (host) those its vCPUs ran on. */
static int machine_cpus(const struct hgm *m, int guest)
{
	int n = 0;

	for (int i = 0; i < m->nr_in; i++)
		if (m->in[i].guest == guest && m->in[i].nr_cpus > n)
			n = m->in[i].nr_cpus;
	if (guest < 0 && m->sync->nr_host_cpus > (unsigned int)n)
		n = (int)m->sync->nr_host_cpus;
	if (guest >= 0)
		for (size_t k = 0; k < m->sync->nr_vcpus; k++) {
			const struct hgsync_vcpu *v = &m->sync->vcpus[k];
			int cpu;

			if ((unsigned int)guest >= m->sync->nr_guests ||
			    v->vm_pid != m->sync->guests[guest].vm.vm_pid || v->vcpu_id < 0)
				continue;
			cpu = hgsync_vcpu_guest_cpu(m->sync, (uint32_t)guest, v->vcpu_id);
			if (cpu >= n)
				n = cpu + 1;
		}
	return n;
}

static int put_machine(struct pf *pf, int guest, const char *name)
{
	uint64_t root = track_uuid(guest, PF_KIND_MACHINE, 0);
	int n = machine_cpus(pf->m, guest);
	char cpu[32];

	if (put_track(pf, guest, root, 0, name, NULL))
		return -1;
	for (int c = 0; c < n; c++) {
		snprintf(cpu, sizeof(cpu), guest < 0 ? "CPU %d" : "vCPU %d", c);
		if (put_track(pf, guest, track_uuid(guest, PF_KIND_CPU, (uint32_t)c), root, cpu, NULL))
			return -1;
	}
	return 0;
}

static int pf_begin(struct pf *pf)
{
	const struct hgm *m = pf->m;
	bool host_done = false;
	char name[512];

	for (int i = 0; i < m->nr_in; i++) {
		const struct hgm_input *in = &m->in[i];
		bool first = true;

		for (int k = 0; k < i; k++)
			first &= m->in[k].guest != in->guest;
		if (!first)
			continue;
		if (in->guest < 0) {
			snprintf(name, sizeof(name), "host (%s)", in->path);
			host_done = true;
		} else {
			snprintf(name, sizeof(name), "guest %d (%s)", in->guest, in->path);
		}
		if (put_machine(pf, in->guest, name))
			return -1;
	}
	/* The vCPU runs go on the host's CPU tracks, with or without its trace. */
	if (!host_done && put_machine(pf, -1, "host CPUs (tracking only)"))
		return -1;
	return 0;
}

static int pf_emit(void *ctx, const struct hgm_event *ev)
{
	struct pf *pf = ctx;
	const struct hgm_input *in = ev->in;
	Perfetto__Protos__TrackEvent__Type type = PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT;
	struct pf_args a = { .nr = 0 };
	char name[HGEV_NAME_MAX + 16], flags[64];
	const char *cat, *ev_name = name;
	uint64_t ns, track;

	/* No host time: nothing to place it at (the text output has it). */
	if (ev->flags & HGM_EV_UNMAPPED) {
		pf->res->nr_unmapped++;
		return 0;
	}
	ns = hgm_host_ns(pf->m, ev->host_ts);
	if (ns < pf->min_ns)
		pf->min_ns = ns;
	if (ns > pf->max_ns)
		pf->max_ns = ns;
	track = track_uuid(in->guest, PF_KIND_CPU, (uint32_t)ev->cpu);
	if (ev->app && in->perf) {
		hgm_perf_event_name(ev->app, name, sizeof(name));
		cat = "perf";
		arg_str(&a, "comm", ev->app->name);
		arg_int(&a, "tid", ev->app->tid);
		arg_str(&a, "where", hgm_perf_where(ev->app));
	} else if (ev->app) {
		if (app_track(pf, ev, &track) < 0)
			return -1;
		snprintf(name, sizeof(name), "%s", ev->app->name);
		cat = "app";
		if (ev->app->kind == HGEV_KIND_BEGIN)
			type = PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN;
		else if (ev->app->kind == HGEV_KIND_END)
			type = PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END;
		arg_int(&a, in->guest < 0 ? "cpu" : "vcpu", ev->cpu);
		if (ev->app->text[0])
			arg_str(&a, "text", ev->app->text);
	} else {
		ev_name = hgm_event_name(ev, name, sizeof(name));
		cat = ev->event && ev->event->system ? ev->event->system : "ftrace";
		arg_str(&a, "comm", hgm_ev_comm(ev));
		arg_int(&a, "pid", ev->pid);
		arg_str(&a, "info", hgm_ev_info(ev));
		if (ev->rec->missed_events)
			arg_int(&a, "dropped_before", ev->rec->missed_events);
	}
	if (in->guest >= 0) {
		arg_uint(&a, "guest_ts", ev->raw_ts);
		arg_int(&a, "host_cpu", ev->host_cpu);
		arg_int(&a, "host_tid", ev->host_tid);
		arg_str(&a, "mapping", hgsync_method_name(ev->method));
		if (ev->bound_ns == HGSYNC_NO_BOUND)
			arg_str(&a, "bound_ns", "none");
		else
			arg_uint(&a, "bound_ns", ev->bound_ns);
		if (ev->flags & (HGM_EV_NO_HOST_CPU | HGM_EV_NOT_RUNNING | HGM_EV_CPU_UNSURE)) {
			snprintf(flags, sizeof(flags), "%s%s%s",
				 ev->flags & HGM_EV_NO_HOST_CPU ? "no-host-cpu " : "",
				 ev->flags & HGM_EV_NOT_RUNNING ? "not-running " : "",
				 ev->flags & HGM_EV_CPU_UNSURE ? "cpu-unsure " : "");
			flags[strlen(flags) - 1] = '\0';
			arg_str(&a, "flags", flags);
		}
	}
	pf->res->nr_events++;
	return put_event(pf, in->guest, ns, track, type, cat, ev_name, &a, NULL, NULL);
}

/*
 * Each run a slice on its host CPU's track and, when the guest CPU is
 * known, one on that CPU's track, a flow from the first to the second.
 */
static int pf_runs(struct pf *pf)
{
	const Perfetto__Protos__TrackEvent__Type begin =
		PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN;
	const Perfetto__Protos__TrackEvent__Type end =
		PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END;
	struct hgm_runs r;
	char name[64];
	int ret = 0;

	if (hgm_vcpu_runs(pf->m, pf->min_ns, pf->max_ns, &r)) {
		pf->failed_errno = ENOMEM;
		return -1;
	}
	pf->res->nr_runs_clipped = r.nr_clipped;
	for (size_t i = 0; i < r.nr && !ret; i++) {
		const struct hgm_run *run = &r.run[i];
		uint64_t host_track = track_uuid(-1, PF_KIND_CPU, (uint32_t)run->host_cpu);
		uint64_t flow = i + 1;
		struct pf_args a = { .nr = 0 };

		if (run->vcpu < 0)
			snprintf(name, sizeof(name), "g%d vcpu_id %d", run->guest, run->vcpu_id);
		else
			snprintf(name, sizeof(name), "g%d vCPU %d", run->guest, run->vcpu);
		arg_int(&a, "guest", run->guest);
		arg_int(&a, "vcpu", run->vcpu);
		arg_int(&a, "vcpu_id", run->vcpu_id);
		arg_int(&a, "host_cpu", run->host_cpu);
		arg_int(&a, "host_tid", run->host_tid);
		ret = put_event(pf, -1, run->t0_ns, host_track, begin, "vcpu", name, &a,
				run->vcpu < 0 ? NULL : &flow, NULL) ||
		      put_event(pf, -1, run->t1_ns, host_track, end, "vcpu", NULL, NULL, NULL, NULL);
		pf->res->nr_runs++;
		if (ret || run->vcpu < 0)
			continue;
		snprintf(name, sizeof(name), "on host CPU %d", run->host_cpu);
		ret = put_event(pf, run->guest, run->t0_ns,
				track_uuid(run->guest, PF_KIND_CPU, (uint32_t)run->vcpu), begin,
				"vcpu", name, &a, NULL, &flow) ||
		      put_event(pf, run->guest, run->t1_ns,
				track_uuid(run->guest, PF_KIND_CPU, (uint32_t)run->vcpu), end,
				"vcpu", NULL, NULL, NULL, NULL);
	}
	hgm_runs_free(&r);
	return ret ? -1 : 0;
}

/*
 * Each disruption (sync.rst, "Migration and restore") as a slice on its
 * guest's "hgclock disruptions" track, from where the guest stopped to
 * where the new VM first ran it (an instant when that is unknown); on
 * the host's machine when the guest's trace is not in the merge.
 */
static int pf_marks(struct pf *pf)
{
	struct hgm_marks mk;
	int ret = 0;

	if (hgm_marks_build(&mk, pf->m)) {
		pf->failed_errno = ENOMEM;
		return -1;
	}
	for (size_t i = 0; i < mk.n && !ret; i++) {
		const struct hgm_mark *k = &mk.v[i];
		int machine = -1;
		uint64_t track;
		char name[96];
		struct pf_args a = { .nr = 0 };

		for (int n = 0; n < pf->m->nr_in; n++)
			if (pf->m->in[n].guest == (int)k->guest)
				machine = (int)k->guest;
		track = track_uuid(machine, PF_KIND_MARKS, k->guest);
		snprintf(name, sizeof(name), "hgclock disruptions of guest %u", k->guest);
		ret = put_track(pf, machine, track, track_uuid(machine, PF_KIND_MACHINE, 0), name,
				NULL);
		snprintf(name, sizeof(name), "DISRUPTION: %s", hgsync_disruption_name(k->kind));
		arg_int(&a, "guest", k->guest);
		arg_int(&a, "next_incarnation", k->next_guest == HGCOR_NO_GUEST ? -1 :
			(int64_t)k->next_guest);
		arg_int(&a, "old_vm_pid", k->old_vm_pid);
		arg_int(&a, "new_vm_pid", k->new_vm_pid);
		if (k->has_kvm_jump)
			arg_int(&a, "kvm_tsc_jump", k->kvm_jump_tsc);
		if (ret)
			break;
		if (k->end_ts)
			ret = put_event(pf, machine, k->ts, track,
					PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN,
					"hgclock", name, &a, NULL, NULL) ||
			      put_event(pf, machine, k->end_ts, track,
					PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END,
					"hgclock", NULL, NULL, NULL, NULL);
		else
			ret = put_event(pf, machine, k->ts, track,
					PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT, "hgclock",
					name, &a, NULL, NULL);
	}
	hgm_marks_free(&mk);
	return ret ? -1 : 0;
}

/* ---- the analysis: where each guest thread's time went (merge --analyze) ---- */

/*
 * A vCPU's open slice's pieces, coalesced: consecutive charges of one
 * component and key make one piece, unless an exit or preemption began
 * between them (a count charge).  They are held until the slice closes,
 * when its certainty is known, or until PF_AN_MAX_PIECES are held: a
 * guest thread that runs for seconds without a switch has that many
 * exits, and is then written as it goes (a slice that long is longer
 * than any bound but none: see an_slice()).
 */
#define PF_AN_MAX_PIECES	4096
/* Flow ids of the analysis, above the runs' (their index + 1). */
#define PF_AN_FLOW_BASE		(1ULL << 48)

struct pf_piece {
	uint64_t t0, t1, key;
	enum hga_comp comp;
};

struct pf_vbuf {
	int32_t guest, vcpu;
	struct pf_piece *p;
	uint32_t n, cap;
	bool cut;		/* the next charge begins a piece */
	bool begun;		/* its slice's begin is written (pieces flushed early) */
	bool skip;		/* it overlaps the thread's previous slice: not drawn */
	uint64_t start_ns;	/* the open slice's start (clipped), from its charges */
};

struct pf_an {
	struct pf *pf;
	const struct hga *a;
	struct pf_vbuf *v;	/* by vCPU, searched linearly (tens) */
	uint32_t nr_v, cap_v;
	/*
	 * The analysis's tracks described; a guest thread track's val is
	 * its last slice's end (UINT64_MAX while one is open), to keep its
	 * slices nested.
	 */
	struct pf_seen tracks;
	uint64_t next_flow;
};

/* The guest thread a slice is of. */
struct pf_who {
	int32_t guest, vcpu, tid;
	const char *comm;
};

static bool pf_drawn(enum hga_comp c)
{
	return c == HGA_C_EXIT || c == HGA_C_PREEMPTED || c == HGA_C_HOST_BLOCKED ||
	       c == HGA_C_DISRUPTED;
}

static struct pf_vbuf *an_vbuf(struct pf_an *an, int32_t guest, int32_t vcpu)
{
	struct pf_vbuf *v;

	for (uint32_t i = 0; i < an->nr_v; i++)
		if (an->v[i].guest == guest && an->v[i].vcpu == vcpu)
			return &an->v[i];
	if (an->nr_v == an->cap_v) {
		uint32_t cap = an->cap_v ? 2 * an->cap_v : 16;

		v = realloc(an->v, cap * sizeof(*v));
		if (!v)
			return NULL;
		an->v = v;
		an->cap_v = cap;
	}
	v = &an->v[an->nr_v++];
	memset(v, 0, sizeof(*v));
	v->guest = guest;
	v->vcpu = vcpu;
	return v;
}

/*
 * A track of the analysis, described the first time (@machine -1: the
 * host's): its slot in an->tracks, or NULL (out of memory, a failed write).
 */
static struct pf_seen_slot *an_track(struct pf_an *an, int machine, uint64_t uuid,
				     const char *name)
{
	bool added;
	struct pf_seen_slot *slot = seen_get(&an->tracks, uuid, &added);

	if (!slot) {
		an->pf->failed_errno = ENOMEM;
		return NULL;
	}
	if (added && put_track(an->pf, machine, uuid, track_uuid(machine, PF_KIND_MACHINE, 0),
			       name, NULL))
		return NULL;
	return slot;
}

static uint64_t an_thread_track(const struct pf_who *w)
{
	return track_uuid(w->guest, PF_KIND_GTHREAD, (uint32_t)w->tid);
}

/* A piece: a slice on the thread's track; a preemption's flow to the host task. */
static int an_piece(struct pf_an *an, const struct pf_who *w, const struct pf_piece *pc)
{
	const Perfetto__Protos__TrackEvent__Type begin =
		PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN;
	const Perfetto__Protos__TrackEvent__Type end =
		PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END;
	struct pf *pf = an->pf;
	struct pf_args arg = { .nr = 0 };
	char name[96], label[48], host[96];
	uint64_t flow = 0, host_track, track = an_thread_track(w);
	const char *comm;

	switch (pc->comp) {
	case HGA_C_EXIT:
		hga_exit_label(label, sizeof(label), pc->key);
		snprintf(name, sizeof(name), "exit %s", label);
		break;
	case HGA_C_PREEMPTED:
		comm = hga_host_name(an->a, pc->key);
		flow = an->next_flow++;
		if (!hga_key_is_irq(pc->key) && !hga_key_is_softirq(pc->key)) {
			/* a task (or none known: "(unknown) -1") */
			snprintf(name, sizeof(name), "preempted by %s %" PRId32, comm,
				 (int32_t)pc->key);
			host_track = track_uuid(-1, PF_KIND_HOSTTASK, (uint32_t)pc->key);
			snprintf(host, sizeof(host), "%s %" PRId32 ": ran instead of vCPUs", comm,
				 (int32_t)pc->key);
		} else {
			/* an IRQ or softirq: a track of its own, by number */
			hga_offender_label(an->a, pc->key, label, sizeof(label));
			snprintf(name, sizeof(name), "preempted by %s", label);
			host_track = track_uuid(-1, hga_key_is_irq(pc->key) ?
						PF_KIND_HOSTIRQ : PF_KIND_HOSTSOFTIRQ,
						(uint32_t)pc->key);
			snprintf(host, sizeof(host), "%s: ran instead of vCPUs", label);
		}
		if (!an_track(an, -1, host_track, host))
			return -1;
		snprintf(host, sizeof(host), "instead of g%" PRId32 " vCPU %" PRId32 " (%s %" PRId32 ")",
			 w->guest, w->vcpu, w->comm, w->tid);
		arg_uint(&arg, "ns", pc->t1 - pc->t0);
		if (put_event(pf, -1, pc->t0, host_track,
			      PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT, "hgclock.analyze",
			      host, &arg, NULL, &flow))
			return -1;
		break;
	case HGA_C_HOST_BLOCKED:
		snprintf(name, sizeof(name), "vCPU thread asleep on the host");
		break;
	default:
		snprintf(name, sizeof(name), "disrupted (migration or restore)");
		break;
	}
	pf->res->nr_an_pieces++;
	return put_event(pf, w->guest, pc->t0, track, begin, "hgclock.analyze", name, NULL,
			 flow ? &flow : NULL, NULL) ||
	       put_event(pf, w->guest, pc->t1, track, end, "hgclock.analyze", NULL, NULL, NULL,
			 NULL);
}

/*
 * The slice's begin on its thread's track (the track described first),
 * unless it would overlap the thread's previous slice (the guest had the
 * thread on two vCPUs at once: a lost switch): then v->skip.
 */
static int an_begin(struct pf_an *an, struct pf_vbuf *v, const struct pf_who *w,
		    uint64_t t0, const char *name, struct pf_args *arg)
{
	uint64_t track = an_thread_track(w);
	struct pf_seen_slot *slot;
	char tname[64];

	v->begun = true;
	snprintf(tname, sizeof(tname), "%s %" PRId32 ": on the host", w->comm, w->tid);
	slot = an_track(an, w->guest, track, tname);
	if (!slot)
		return -1;
	if (t0 < slot->val) {
		an->pf->res->nr_an_overlap++;
		v->skip = true;
		return 0;
	}
	slot->val = UINT64_MAX;	/* open: until its end */
	return put_event(an->pf, w->guest, t0, track,
			 PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN, "hgclock.analyze",
			 name, arg, NULL, NULL);
}

/* The held pieces written (the slice's begin first, if not yet). */
static int an_flush(struct pf_an *an, struct pf_vbuf *v, const struct pf_who *w)
{
	char name[64];
	int ret = 0;

	if (!v->begun) {
		snprintf(name, sizeof(name), "on vCPU %" PRId32, w->vcpu);
		ret = an_begin(an, v, w, v->start_ns, name, NULL);
	}
	for (uint32_t i = 0; i < v->n && !ret && !v->skip; i++)
		ret = an_piece(an, w, &v->p[i]);
	v->n = 0;
	return ret;
}

static int an_charge(void *ctx, const struct hga *a, const struct hga_charge *ch)
{
	struct pf_an *an = ctx;
	struct pf_vbuf *v = an_vbuf(an, ch->guest, ch->vcpu);
	struct pf_who w = { ch->guest, ch->vcpu, ch->tid, ch->comm };
	struct pf_piece *last;

	an->a = a;
	if (!v) {
		an->pf->failed_errno = ENOMEM;
		return -1;
	}
	v->start_ns = ch->slice_ns;
	if (ch->t1 == ch->t0) {
		/* a count: an exit or preemption begins here */
		v->cut = true;
		return 0;
	}
	/* thread 0 is each vCPU's idle task: not drawn (an_slice()) */
	if (!pf_drawn(ch->comp) || ch->tid <= 0) {
		v->cut = false;
		return 0;
	}
	last = v->n ? &v->p[v->n - 1] : NULL;
	if (last && !v->cut && last->comp == ch->comp && last->key == ch->key &&
	    last->t1 == ch->t0) {
		last->t1 = ch->t1;
		return 0;
	}
	v->cut = false;
	if (v->n == PF_AN_MAX_PIECES && an_flush(an, v, &w))
		return -1;
	if (v->n == v->cap) {
		uint32_t cap = v->cap ? 2 * v->cap : 64;
		struct pf_piece *p = realloc(v->p, cap * sizeof(*p));

		if (!p) {
			an->pf->failed_errno = ENOMEM;
			return -1;
		}
		v->p = p;
		v->cap = cap;
	}
	v->p[v->n++] = (struct pf_piece){ ch->t0, ch->t1, ch->key, ch->comp };
	return 0;
}

/*
 * A closed slice: the guest thread's slice on its track and, when the
 * slice is longer than its ends' bounds, its pieces inside it.  An
 * uncertain one is drawn, named so, without pieces: its split is not
 * attributed (analyze.rst, "Bounds").  One whose pieces were written as
 * it went (more than PF_AN_MAX_PIECES) and then turns out uncertain (its
 * ends unbounded) gets an instant that says so at its end, and is counted.
 */
static int an_slice(void *ctx, const struct hga *a, const struct hga_slice *s)
{
	struct pf_an *an = ctx;
	struct pf *pf = an->pf;
	struct pf_vbuf *v = an_vbuf(an, s->guest, s->vcpu);
	struct pf_who w = { s->guest, s->vcpu, s->tid, s->comm };
	bool uncertain = s->flags & HGA_SL_UNCERTAIN;
	struct pf_args arg = { .nr = 0 };
	uint64_t t0, t1, track = an_thread_track(&w);
	struct pf_seen_slot *slot;
	char name[96];
	int ret = 0;

	an->a = a;
	if (!v) {
		pf->failed_errno = ENOMEM;
		return -1;
	}
	/* thread 0 is each vCPU's idle task: its time is the vCPU's, in the report */
	if (s->tid <= 0 || !s->wall_ns)
		goto out;
	t0 = s->start_ns < a->opt.from_ns ? a->opt.from_ns : s->start_ns;
	t1 = t0 + s->wall_ns;
	if (!v->begun) {
		snprintf(name, sizeof(name), "on vCPU %" PRId32 "%s", s->vcpu,
			 uncertain ? " (uncertain: within the mapping's bounds)" : "");
		arg_int(&arg, "guest", s->guest);
		arg_int(&arg, "vcpu", s->vcpu);
		arg_int(&arg, "tid", s->tid);
		arg_uint(&arg, "wall_ns", s->wall_ns);
		arg_uint(&arg, "bound_ns", s->bound_ns);
		ret = an_begin(an, v, &w, t0, name, &arg);
		if (uncertain)
			v->n = 0;
	} else if (uncertain && !v->skip) {
		pf->res->nr_an_uncertain_drawn++;
		ret = put_event(pf, s->guest, t1, track,
				PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT, "hgclock.analyze",
				"uncertain: the slice is within its ends' bounds; its pieces are "
				"not attributed", NULL, NULL, NULL);
	}
	if (!ret)
		ret = an_flush(an, v, &w);
	if (!ret && v->skip) {
		/* said where it would have been, with the time it leaves out */
		arg.nr = 0;
		arg_int(&arg, "vcpu", s->vcpu);
		arg_uint(&arg, "wall_ns", s->wall_ns);
		ret = put_event(pf, s->guest, t0, track,
				PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT, "hgclock.analyze",
				"not drawn: overlaps the thread's previous slice (a lost switch)",
				&arg, NULL, NULL);
	}
	if (ret || v->skip)
		goto out;
	if (uncertain)
		pf->res->nr_an_uncertain++;
	else
		pf->res->nr_an_slices++;
	/* described at its begin: only found here */
	slot = an_track(an, s->guest, track, NULL);
	if (!slot) {
		ret = -1;
		goto out;
	}
	slot->val = t1;
	ret = put_event(pf, s->guest, t1, track, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END,
			"hgclock.analyze", NULL, NULL, NULL, NULL);
out:
	v->n = 0;
	v->cut = v->begun = v->skip = false;
	return ret ? -1 : 0;
}

static int pf_analysis(struct pf *pf, const struct hgm_par *par, const struct hga_reports *rep,
		       char *err, size_t err_len)
{
	struct pf_an an = { .pf = pf, .next_flow = PF_AN_FLOW_BASE };
	struct hgr_options opt = { .charge_cb = an_charge, .slice_cb = an_slice, .ctx = &an };
	int ret = hga_merge_engine(par, rep, &opt, err, err_len);

	for (uint32_t i = 0; i < an.nr_v; i++)
		free(an.v[i].p);
	free(an.v);
	free(an.tracks.slot);
	return ret;
}

int hgm_pf_run(const struct hgm_par *par, FILE *out, struct hgm_pf_result *res,
	       struct hgm_par_result *counts, const struct hga_reports *analysis, char *err,
	       size_t err_len)
{
	struct hgm m = { 0 };
	struct pf pf = { .m = &m, .out = out, .res = res, .min_ns = UINT64_MAX };
	int ret;

	memset(res, 0, sizeof(*res));
	ret = hgm_start_pass(&m, par, false, err, err_len);
	if (ret)
		goto out;
	pf.seq_started = calloc(HGSYNC_MAX_GUESTS + 1, sizeof(*pf.seq_started));
	pf.intern = calloc(1, sizeof(*pf.intern));
	if (!pf.seq_started || !pf.intern) {
		snprintf(err, err_len, "out of memory");
		ret = HGM_E_SYSTEM;
		goto out;
	}
	if (pf_begin(&pf) || hgm_run(&m, pf_emit, &pf) || pf_runs(&pf) || pf_marks(&pf) ||
	    fflush(out)) {
		snprintf(err, err_len, "writing the Perfetto trace: %s",
			 strerror(pf.failed_errno ? pf.failed_errno : errno ? errno : EIO));
		ret = HGM_E_SYSTEM;
		goto out;
	}
	ret = hgm_read_error(&m, err, err_len);
	if (ret)
		goto out;
	/*
	 * The analysis's pass needs its own merge of the inputs: hgm_run()
	 * has handed this one's events out.  It also writes the reports
	 * (merge does not run the engine a second time for them).  An
	 * error of the analysis's input (its window) or of writing its
	 * reports is said as such; one of writing this file as above.
	 */
	if (analysis) {
		ret = pf_analysis(&pf, par, analysis, err, err_len);
		if (ret && pf.failed_errno) {
			snprintf(err, err_len, "writing the Perfetto trace: %s",
				 strerror(pf.failed_errno));
			ret = HGM_E_SYSTEM;
		}
		if (!ret && fflush(out)) {
			snprintf(err, err_len, "writing the Perfetto trace: %s",
				 strerror(errno ? errno : EIO));
			ret = HGM_E_SYSTEM;
		}
		if (ret)
			goto out;
	}
	if (counts)
		hgm_result(&m, counts);
out:
	free(pf.seq_started);
	intern_free(pf.intern);
	free(pf.threads.slot);
	free(pf.buf);
	hgm_close(&m);
	return ret;
}
