// SPDX-License-Identifier: GPL-2.0
/*
 * The task names a sched event teaches, without printing it.
 *
 * Printing sched_switch, sched_wakeup or sched_wakeup_new through
 * libtraceevent's sched_switch plugin registers the task names the event
 * carries (tep_register_comm()), and the names later events show depend
 * on those registrations and their order (merge.c, "Task names").  So a
 * merge prints every such event, also one it does not show: one a filter
 * hides, or, on several threads, one of another worker's streams of a
 * trace split between workers, which each worker reads only for its names
 * (merge.c, shard_streams()).  On a host trace a third of the events are
 * sched_switch, so each extra worker formatted a third of the host's
 * events again.
 *
 * The plugin's handlers, in every libtraceevent from 1.7.1 to 1.8.4,
 * make these calls that touch the names, in this order, and none other:
 *
 *   sched_switch: tep_get_field_val("prev_pid"), and when it fails stop;
 *     when tep_find_any_field("prev_comm") finds the field,
 *     tep_register_comm(the field printed as "%.*s" with its size,
 *     (int)prev_pid); then the same with "next_pid" and "next_comm".
 *   sched_wakeup(_new): the same with "pid" and "comm".
 *
 * hgm_teach_quietly() makes the same calls with the same values, and
 * skips only the text.  It does so only where the printing would have
 * run that handler: the event's handler is a function of the file
 * plugin_sched_switch.so (dladdr()), and neither of the flags that make
 * libtraceevent skip a handler (TEP_EVENT_FL_NOHANDLE, _PRINTRAW) is set.
 * A field the record does not hold whole (the plugin would read past
 * it) also means "print it": the caller then prints the event, as
 * before.  test_merge.sched_names_taught_quietly compares the names
 * taught with those printing teaches (the recordings' own command lines
 * name every task, so the thread-count comparison alone would not see a
 * difference).
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include <event-parse.h>

#include "merge.h"

static const char *const taught_names[HGM_TEACH_EVENTS] = {
	"sched_switch", "sched_wakeup", "sched_wakeup_new",
};

/* Each event's (pid field, comm field) pairs, in the handler's order. */
static const char *const taught_fields[HGM_TEACH_EVENTS][5] = {
	{ "prev_pid", "prev_comm", "next_pid", "next_comm", NULL },
	{ "pid", "comm", NULL },
	{ "pid", "comm", NULL },
};

static bool handler_is_plugin(tep_event_handler_func handler)
{
	Dl_info info;
	const char *base;

	if (!handler || !dladdr((void *)handler, &info) || !info.dli_fname)
		return false;
	base = strrchr(info.dli_fname, '/');
	base = base ? base + 1 : info.dli_fname;
	return !strcmp(base, "plugin_sched_switch.so");
}

/* The events of @in this file may teach for, found once. */
static void teach_setup(struct hgm_input *in)
{
	in->teach_known = true;
	for (int i = 0; i < HGM_TEACH_EVENTS; i++) {
		struct tep_event *e = tep_find_event_by_name(in->tep, "sched", taught_names[i]);

		if (e && handler_is_plugin(e->handler) &&
		    !(e->flags & (TEP_EVENT_FL_NOHANDLE | TEP_EVENT_FL_PRINTRAW)))
			in->teach_ev[i] = e;
	}
}

static bool field_whole(const struct tep_format_field *f, const struct tep_record *rec)
{
	return !f || (f->offset >= 0 && f->size >= 0 && f->size <= 4096 &&
		      (long long)f->offset + f->size <= rec->size);
}

/* write_and_save_comm(): the name as "%.*s" of the field, for (int)@pid. */
static void register_comm(struct tep_handle *tep, const struct tep_format_field *f,
			  const struct tep_record *rec, unsigned long long pid)
{
	const char *raw = (const char *)rec->data + f->offset;
	size_t len = strnlen(raw, (size_t)f->size);
	char stack[64], *comm = len < sizeof(stack) ? stack : malloc(len + 1);

	if (!comm)
		return;
	memcpy(comm, raw, len);
	comm[len] = '\0';
	tep_register_comm(tep, comm, (int)pid);
	if (comm != stack)
		free(comm);
}

/* One "pid, comm" pair of the handler; false: the handler stops here. */
static bool teach_pair(struct tep_handle *tep, struct trace_seq *seq, struct tep_event *e,
		       struct tep_record *rec, const char *pid_name, const char *comm_name)
{
	struct tep_format_field *f;
	unsigned long long pid;

	if (tep_get_field_val(seq, e, pid_name, rec, &pid, 0))
		return false;
	f = tep_find_any_field(e, comm_name);
	if (f)
		register_comm(tep, f, rec, pid);
	return true;
}

bool hgm_teach_quietly(struct hgm_input *in, struct trace_seq *seq, struct tep_event *e,
		       struct tep_record *rec)
{
	const char *const *f;
	int k;

	if (!in->teach_known)
		teach_setup(in);
	for (k = 0; k < HGM_TEACH_EVENTS && in->teach_ev[k] != e; k++)
		;
	if (k == HGM_TEACH_EVENTS || !rec->data || rec->size < 0)
		return false;
	/* every field the handler reads held whole, or the event is printed */
	for (f = taught_fields[k]; *f; f += 2)
		if (!field_whole(tep_find_field(e, f[0]), rec) ||
		    !field_whole(tep_find_any_field(e, f[1]), rec))
			return false;
	/* the pairs in order, until a pid the handler cannot read */
	for (f = taught_fields[k]; *f && teach_pair(in->tep, seq, e, rec, f[0], f[1]); f += 2)
		;
	return true;
}
