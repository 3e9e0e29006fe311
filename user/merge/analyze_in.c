// SPDX-License-Identifier: GPL-2.0
/*
 * merge --analyze: the merged events decoded into the attribution
 * engine's (analyze.h), one pass on one thread over the trace inputs.
 *
 *   host kvm:kvm_entry / kvm:kvm_exit   the event's pid is the vCPU thread;
 *       the correlation's tracking records name its VM and vcpu_id, the
 *       guest whose VM that is, and the guest CPU (the vCPU identity)
 *   host sched:sched_switch             on the host CPU it was traced on
 *   host irq:irq_handler_entry/exit,    the interrupt running on the host
 *        irq:softirq_entry/exit         CPU it was traced on
 *   guest sched:sched_switch            at its mapped host time, its vCPU,
 *                                       the mapping's bound
 *   guest sched:sched_wakeup(_new)      the woken thread runnable, on
 *                                       target_cpu's run queue (requests)
 *   guest application events            hgclock_event() begin/end: a request
 *                                       of the event's thread (analyze_req.h)
 *   guest trace events BEGIN,END        --analyze-slice: the same, the
 *                                       event's pid the thread
 *
 * Disruptions (migration, restore) are not fed yet: each incarnation is
 * a guest of its own in the correlation (Documentation/analyze.rst).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <event-parse.h>

#include "analyze_req.h"
#include "appev.h"
#include "merge.h"

#define SLICE_EVENT_LEN	128

struct feed {
	struct hgr *r;
	const struct hgm *m;
	const struct hgsync *sync;
	uint64_t last_ns;
	uint64_t nr_unplaced;		/* host kvm_* of a thread no guest's */
	uint64_t nr_host_app;		/* host applications' begin/end: no guest thread */
	uint64_t nr_unmapped_app;	/* guest ones without host time */
	/* --analyze-slice: "system:name" or "name" */
	char begin[SLICE_EVENT_LEN], end[SLICE_EVENT_LEN];
	/* the last thread looked up: the next kvm_* is most often its */
	int32_t tid, guest, cpu;
	/*
	 * The correlation's vCPU threads by tid (the last record of each
	 * tid, as place_thread() wants), sorted, made at the first lookup:
	 * a host of many vCPUs, whose kvm_* events alternate between their
	 * threads, is not searched through at each.  NULL: not made, or no
	 * memory (then searched in order).
	 */
	struct tid_rec { int32_t tid; uint32_t i; } *by_tid;
	size_t nr_by_tid;
	bool by_tid_tried;
};

static int by_tid_cmp(const void *a, const void *b)
{
	const struct tid_rec *x = a, *y = b;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* The last of s->vcpus with @tid, or NULL. */
static const struct hgsync_vcpu *vcpu_of_tid(struct feed *f, int32_t tid)
{
	const struct hgsync *s = f->sync;
	const struct hgsync_vcpu *v = NULL;
	size_t i, lo, hi;

	if (!f->by_tid_tried && s->nr_vcpus <= UINT32_MAX) {
		f->by_tid_tried = true;
		f->by_tid = malloc((s->nr_vcpus + 1) * sizeof(*f->by_tid));
		for (i = 0; f->by_tid && i < s->nr_vcpus; i++)
			f->by_tid[i] = (struct tid_rec){ s->vcpus[i].tid, (uint32_t)i };
		if (f->by_tid) {
			f->nr_by_tid = s->nr_vcpus;
			qsort(f->by_tid, f->nr_by_tid, sizeof(*f->by_tid), by_tid_cmp);
		}
	}
	if (!f->by_tid) {
		for (i = 0; i < s->nr_vcpus; i++)
			if (s->vcpus[i].tid == tid)
				v = &s->vcpus[i];
		return v;
	}
	/* the first entry past @tid's: the one before it is tid's last record */
	for (lo = 0, hi = f->nr_by_tid; lo < hi;) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->by_tid[mid].tid <= tid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && f->by_tid[lo - 1].tid == tid ? &s->vcpus[f->by_tid[lo - 1].i] : NULL;
}

static bool is(const struct hgm_event *ev, const char *system, const char *name)
{
	return ev->event && ev->event->system && ev->event->name &&
	       !strcmp(ev->event->system, system) && !strcmp(ev->event->name, name);
}

static int field(const struct hgm_event *ev, const char *name, unsigned long long *v)
{
	return tep_get_field_val(NULL, ev->event, name, ev->rec, v, 0);
}

/* A string field into @out (@size bytes, always terminated, cut beyond). */
static void comm_field(const struct hgm_event *ev, const char *name, char *out, size_t size)
{
	int len = 0;
	const char *p = tep_get_field_raw(NULL, ev->event, name, ev->rec, &len, 0);

	memset(out, 0, size);
	if (p && len > 0)
		memcpy(out, p, (size_t)len < size - 1 ? (size_t)len : size - 1);
}

/* The guest and guest CPU of host thread @tid, from the tracking records; -1 unknown. */
static int place_thread(struct feed *f, int32_t tid, int32_t *guest, int32_t *cpu)
{
	const struct hgsync *s = f->sync;
	const struct hgsync_vcpu *v;
	size_t i;

	if (tid == f->tid) {
		*guest = f->guest;
		*cpu = f->cpu;
		return *guest < 0 ? -1 : 0;
	}
	/* the last record of a reused tid is the newest VM's */
	v = vcpu_of_tid(f, tid);
	f->tid = tid;
	f->guest = f->cpu = -1;
	for (i = 0; v && i < s->nr_guests; i++) {
		if (s->guests[i].vm.vm_pid != v->vm_pid || v->vm_pid < 0)
			continue;
		f->guest = (int32_t)i;
		f->cpu = hgsync_vcpu_guest_cpu(s, (uint32_t)i, v->vcpu_id);
		if (f->cpu < 0)
			f->guest = -1;
	}
	*guest = f->guest;
	*cpu = f->cpu;
	return *guest < 0 ? -1 : 0;
}

/* The engine names the correlation's methods by their numbers. */
_Static_assert(HGA_METHOD_KVM_EXACT == HGCOR_METHOD_KVM_EXACT &&
	       HGA_METHOD_PROBE == HGCOR_METHOD_PROBE && HGA_METHOD_EXIT == HGCOR_METHOD_EXIT &&
	       HGA_METHOD_MARKER == HGSYNC_METHOD_MARKER, "hga's methods are the correlation's");

/* Does @ev match @spec, "system:name" or "name"? */
static bool matches(const struct hgm_event *ev, const char *spec)
{
	const char *colon = strchr(spec, ':');

	if (!spec[0] || !ev->event || !ev->event->name)
		return false;
	if (!colon)
		return !strcmp(ev->event->name, spec);
	return ev->event->system && strlen(ev->event->system) == (size_t)(colon - spec) &&
	       !strncmp(ev->event->system, spec, (size_t)(colon - spec)) &&
	       !strcmp(ev->event->name, colon + 1);
}

/*
 * A request's begin or end, or a wakeup, fed: 1 when @ev is no more than
 * that (an application's), 0 when the engine may want it too, -1 no memory.
 */
static int feed_request(struct feed *f, const struct hgm_event *ev)
{
	struct hgr_event e = { .vcpu = -1 };
	unsigned long long v;

	if (ev->app) {
		if (ev->in->perf || (ev->app->kind != HGEV_KIND_BEGIN &&
				     ev->app->kind != HGEV_KIND_END))
			return 0;
		if (ev->in->guest < 0) {
			f->nr_host_app++;
			return 1;
		}
		if (ev->flags & HGM_EV_UNMAPPED) {
			f->nr_unmapped_app++;
			return 1;
		}
		e.kind = ev->app->kind == HGEV_KIND_BEGIN ? HGR_EV_BEGIN : HGR_EV_END;
		/* a tid past INT32_MAX is damage: the layer refuses tids <= 0 */
		e.tid = ev->app->tid > INT32_MAX ? -1 : (int32_t)ev->app->tid;
		/* a longer name is cut: the report's column is narrower still */
		snprintf(e.name, sizeof(e.name), "%.*s", HGR_NAME_LEN - 1, ev->app->name);
	} else if (ev->rec && ev->event && ev->in->guest >= 0 &&
		   !(ev->flags & HGM_EV_UNMAPPED)) {
		/* a trace event: the engine may want it too (0), after the request's */
		e.host_ns = hgm_host_ns(f->m, ev->host_ts);
		e.guest = ev->in->guest;
		e.bound_ns = ev->bound_ns;
		if (matches(ev, f->begin) || matches(ev, f->end)) {
			e.kind = matches(ev, f->begin) ? HGR_EV_BEGIN : HGR_EV_END;
			e.tid = tep_data_pid(ev->in->tep, ev->rec);
			snprintf(e.name, sizeof(e.name), "%.*s", HGR_NAME_LEN - 1, ev->event->name);
			f->last_ns = e.host_ns;
			if (hgr_event(f->r, &e) < 0)
				return -1;
		}
		if ((is(ev, "sched", "sched_wakeup") || is(ev, "sched", "sched_wakeup_new")) &&
		    !field(ev, "pid", &v) && v <= INT32_MAX) {
			e.kind = HGR_EV_WAKEUP;
			e.tid = (int32_t)v;
			/* the run queue it was put on; absent or out of range: not known */
			e.vcpu = !field(ev, "target_cpu", &v) && v < HGA_MAX_VCPUS ? (int32_t)v : -1;
			f->last_ns = e.host_ns;
			if (hgr_event(f->r, &e) < 0)
				return -1;
		}
		return 0;
	} else {
		return 0;
	}
	e.host_ns = hgm_host_ns(f->m, ev->host_ts);
	f->last_ns = e.host_ns;
	e.guest = ev->in->guest;
	e.bound_ns = ev->bound_ns;
	return hgr_event(f->r, &e) < 0 ? -1 : 1;
}

static int feed_event(void *ctx, const struct hgm_event *ev)
{
	struct feed *f = ctx;
	struct hga_event e = { 0 };
	unsigned long long v;
	int ret;

	ret = feed_request(f, ev);
	if (ret)
		return ret < 0 ? -1 : 0;
	if (!ev->rec || !ev->event || (ev->flags & HGM_EV_UNMAPPED))
		return 0;
	e.host_ns = hgm_host_ns(f->m, ev->host_ts);
	f->last_ns = e.host_ns;
	if (ev->in->guest < 0 && (is(ev, "kvm", "kvm_entry") || is(ev, "kvm", "kvm_exit"))) {
		e.kind = is(ev, "kvm", "kvm_entry") ? HGA_EV_KVM_ENTRY : HGA_EV_KVM_EXIT;
		e.host_cpu = ev->cpu;
		e.host_tid = tep_data_pid(ev->in->tep, ev->rec);
		if (place_thread(f, e.host_tid, &e.guest, &e.vcpu)) {
			f->nr_unplaced++;
			return 0;
		}
		if (e.kind == HGA_EV_KVM_EXIT) {
			if (field(ev, "exit_reason", &v))
				return 0;
			e.exit_reason = (uint32_t)v;
			/* kernels before kvm_exit had isa: Intel's */
			e.exit_isa = field(ev, "isa", &v) ? HGA_ISA_VMX : (uint32_t)v;
		}
	} else if (is(ev, "sched", "sched_switch")) {
		if (field(ev, "prev_pid", &v))
			return 0;
		e.prev_tid = (int32_t)v;
		if (field(ev, "next_pid", &v))
			return 0;
		e.next_tid = (int32_t)v;
		comm_field(ev, "next_comm", e.next_comm, sizeof(e.next_comm));
		if (ev->in->guest < 0) {
			e.kind = HGA_EV_HOST_SWITCH;
			e.host_cpu = ev->cpu;
			comm_field(ev, "prev_comm", e.prev_comm, sizeof(e.prev_comm));
			/* R, or R+ (preempted: TASK_REPORT_MAX) */
			e.prev_runnable = !field(ev, "prev_state", &v) && !(v & 0xff);
		} else {
			e.kind = HGA_EV_GUEST_SWITCH;
			e.guest = ev->in->guest;
			e.vcpu = ev->cpu;
			e.bound_ns = ev->bound_ns;
			e.method = ev->method;
			/* for the requests: switched out runnable (the guest's run queue) */
			e.prev_runnable = !field(ev, "prev_state", &v) && !(v & 0xff);
		}
	} else if (ev->in->guest < 0 && ev->event->system &&
		   !strcmp(ev->event->system, "irq")) {
		/* the host's interrupts: who took an exit's or a preemption's time */
		if (is(ev, "irq", "irq_handler_entry"))
			e.kind = HGA_EV_IRQ_ENTRY;
		else if (is(ev, "irq", "irq_handler_exit"))
			e.kind = HGA_EV_IRQ_EXIT;
		else if (is(ev, "irq", "softirq_entry"))
			e.kind = HGA_EV_SOFTIRQ_ENTRY;
		else if (is(ev, "irq", "softirq_exit"))
			e.kind = HGA_EV_SOFTIRQ_EXIT;
		else
			return 0;
		if (field(ev, e.kind <= HGA_EV_IRQ_EXIT ? "irq" : "vec", &v))
			return 0;
		/* out of range: the engine refuses it (counted, reported) */
		e.irq = v > INT32_MAX ? -1 : (int32_t)v;
		e.host_cpu = ev->cpu;
		if (e.kind == HGA_EV_IRQ_ENTRY)
			comm_field(ev, "name", e.irq_name, sizeof(e.irq_name));
	} else {
		return 0;
	}
	ret = hgr_engine_event(f->r, &e);
	/* refused input is counted and reported; only memory stops the pass */
	return ret < 0 ? -1 : 0;
}

/* --analyze-slice BEGIN,END into @f; 0, or -1 with @err. */
static int parse_slice(struct feed *f, const char *spec, char *err, size_t err_len)
{
	const char *comma = spec ? strchr(spec, ',') : NULL;
	size_t n;

	if (!spec)
		return 0;
	n = comma ? (size_t)(comma - spec) : 0;
	if (!comma || !n || n >= SLICE_EVENT_LEN || !comma[1] || strchr(comma + 1, ',') ||
	    strlen(comma + 1) >= SLICE_EVENT_LEN) {
		snprintf(err, err_len, "--analyze-slice: not BEGIN,END (two event names, "
			 "[system:]name, each shorter than %d bytes): %.64s", SLICE_EVENT_LEN, spec);
		return -1;
	}
	memcpy(f->begin, spec, n);
	f->begin[n] = '\0';
	snprintf(f->end, sizeof(f->end), "%s", comma + 1);
	if (!strcmp(f->begin, f->end)) {
		snprintf(err, err_len, "--analyze-slice: BEGIN and END are the same event (%s)",
			 f->begin);
		return -1;
	}
	return 0;
}

static int merge_run(const struct hgm_par *par, const struct hga_reports *rep,
		     const struct hgr_options *ropt, char *err, size_t err_len)
{
	FILE *text = rep ? rep->text : NULL, *json = rep ? rep->json : NULL;
	FILE *svg = rep ? rep->svg : NULL;
	const char *slice = rep ? rep->slice : NULL;
	static struct hgm_filter filter;	/* large: not on the stack */
	static struct hgr r;			/* not moved while in use */
	struct hgm m = { 0 };
	struct hgm_options opt = par->opt;
	struct hga_options aopt = { 0 };
	struct hga *a = &r.a;
	struct feed f = { .r = &r, .m = &m, .sync = par->sync, .tid = -1, .guest = -1 };
	bool requests = slice != NULL;
	uint64_t v;
	int ret = 0;

	if (parse_slice(&f, slice, err, err_len))
		return HGM_E_INPUT;

	/* the progress line when this is merge's only pass (hga_reports) */
	opt.progress = rep && rep->counts && par->progress;
	opt.shard = opt.nr_shards = 0;
	opt.no_text = true;
	/*
	 * The window clips the split, not the events: the state at its
	 * start comes from the events before it.  --events would take away
	 * the events the split needs.
	 */
	if (par->opt.filter) {
		filter = *par->opt.filter;
		memset(&filter.from, 0, sizeof(filter.from));
		memset(&filter.to, 0, sizeof(filter.to));
		filter.nr_events = 0;
		opt.filter = &filter;
	}
	/* application events (not perf samples): the requests */
	for (int i = 0; i < par->nr_inputs && !ret; i++) {
		if (par->inputs[i].perf)
			continue;
		requests |= par->inputs[i].app;
		ret = hgm_add_spec(&m, &par->inputs[i], err, err_len);
	}
	if (!ret)
		ret = hgm_start(&m, par->sync, &opt, err, err_len);
	if (!ret && par->opt.filter && par->opt.filter->from.set) {
		ret = hgm_filter_resolve_time(&par->opt.filter->from, m.host_clock, &v, "--from",
					      err, err_len) ? HGM_E_INPUT : 0;
		aopt.from_ns = hgm_host_ns(&m, v);
	}
	if (!ret && par->opt.filter && par->opt.filter->to.set) {
		ret = hgm_filter_resolve_time(&par->opt.filter->to, m.host_clock, &v, "--to",
					      err, err_len) ? HGM_E_INPUT : 0;
		/* --to includes its end; the engine's window does not */
		aopt.to_ns = hgm_host_ns(&m, v) + 1;
	}
	if (!ret && hgr_init(&r, aopt.from_ns, aopt.to_ns, ropt)) {
		snprintf(err, err_len, "--analyze: --from is not before --to");
		ret = HGM_E_INPUT;
	}
	/* the JSON's "requests" only when there are requests to look for */
	if (!requests)
		a->opt.json_cb = NULL;
	if (!ret && (hgm_run(&m, feed_event, &f) || hgr_finish(&r, f.last_ns))) {
		snprintf(err, err_len, "--analyze: out of memory");
		ret = HGM_E_SYSTEM;
	}
	if (!ret)
		ret = hgm_read_error(&m, err, err_len);
	if (!ret && rep && rep->counts)
		hgm_result(&m, rep->counts);
	if (!ret && text && f.nr_unplaced)
		fprintf(text, "# %" PRIu64 " host kvm_entry/kvm_exit of threads that are no merged "
			"guest's vCPU (other VMs, or no tracking record): left out\n", f.nr_unplaced);
	if (!ret && ((text && hga_report_text(a, text, 10)) || (json && hga_report_json(a, json)) ||
		     (svg && hgr_report_svg(&r, svg, 20)))) {
		snprintf(err, err_len, "--analyze: writing the report failed");
		ret = HGM_E_SYSTEM;
	}
	if (!ret && text && requests) {
		if (f.nr_host_app)
			fprintf(text, "\n# %" PRIu64 " host applications' begin/end events: not a "
				"guest thread's, left out", f.nr_host_app);
		if (f.nr_unmapped_app)
			fprintf(text, "\n# %" PRIu64 " guest applications' begin/end events without "
				"host time: left out", f.nr_unmapped_app);
		if (hgr_report_text(&r, text)) {
			snprintf(err, err_len, "--analyze: writing the report failed");
			ret = HGM_E_SYSTEM;
		}
	}
	hgr_free(&r);
	hgm_close(&m);
	free(f.by_tid);
	return ret;
}

int hga_merge_run(const struct hgm_par *par, const struct hga_reports *rep, char *err,
		  size_t err_len)
{
	return merge_run(par, rep, NULL, err, err_len);
}

int hga_merge_engine(const struct hgm_par *par, const struct hga_reports *rep,
		     const struct hgr_options *opt, char *err, size_t err_len)
{
	return merge_run(par, rep, opt, err, err_len);
}
