/* SPDX-License-Identifier: GPL-2.0 */
/*
 * One parse of a trace.dat's kallsyms for every handle of a command
 * (user/merge/ksyms.c; the reasons and the proof of sameness are there).
 *
 * Use: around tracecmd_open_head() on a thread,
 *
 *	struct hg_ksyms_capture cap;
 *
 *	hg_ksyms_capture_begin(&cap);
 *	h = tracecmd_open_head(path, 0);
 *	hg_ksyms_capture_end(&cap, h ? tracecmd_get_tep(h) : NULL);
 *
 * and the handle's tep names functions exactly as libtraceevent's own
 * parse of the same text would have, from a table built once per
 * distinct text and shared, read-only, by all threads.
 */
#ifndef HGCLOCK_KSYMS_H
#define HGCLOCK_KSYMS_H

#include <stdbool.h>
#include <stddef.h>

struct tep_handle;

struct ksym_table;

struct hg_ksyms_capture {
	struct tep_handle *tep;	/* the tep libtracecmd gave the text to */
	char *text;		/* a copy of the text, owned (a text no table has) */
	struct ksym_table *table;	/* or the table that has it: no copy */
};

/* The next tep_parse_kallsyms() on this thread is kept in @cap, not parsed. */
void hg_ksyms_capture_begin(struct hg_ksyms_capture *cap);

/*
 * Ends the capture of this thread.  With @tep (the opened handle's), the
 * text kept is given to it: a shared table's resolver, or libtraceevent's
 * own parse where only that is the same (see ksyms.c).  Without (the open
 * failed), the text is dropped.
 */
void hg_ksyms_capture_end(struct hg_ksyms_capture *cap, struct tep_handle *tep);

/*
 * Gives @tep the functions of @kallsyms (a /proc/kallsyms text) as
 * tep_parse_kallsyms() would.  Returns true when a shared table serves
 * it, false when libtraceevent's parse did (the text's form, the tep's
 * event formats, or memory asked for it).
 */
bool hg_ksyms_give(struct tep_handle *tep, const char *kallsyms);

/* The text the capture holds (its copy or its table's), or NULL. */
const char *hg_ksyms_capture_text(const struct hg_ksyms_capture *cap);

/* How many teps a shared table served, and how many libtraceevent's parse. */
void hg_ksyms_counts(unsigned long *shared, unsigned long *parsed);

#endif /* HGCLOCK_KSYMS_H */
