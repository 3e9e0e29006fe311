/* SPDX-License-Identifier: GPL-2.0 */
/*
 * One parse of a trace.dat's kallsyms for every handle of a command
 * (user/merge/ksyms.c; the reasons and the proof of sameness are there).
 *
 * Use: around tracecmd_open_head() on a thread,
 *
 *	struct hg_ksyms_capture cap;
 *
 *	hg_ksyms_capture_begin(&cap, &file, false);
 *	h = tracecmd_open_head(path, 0);
 *	ok = hg_ksyms_capture_end(&cap, h ? tracecmd_get_tep(h) : NULL, same);
 *
 * and the handle's tep names functions exactly as libtraceevent's own
 * parse of the same text would have, from a table built once per file
 * and shared, read-only, by all threads.
 */
#ifndef HGCLOCK_KSYMS_H
#define HGCLOCK_KSYMS_H

#include <stdbool.h>
#include <stddef.h>

#include "trace_pool.h"

struct tep_handle;

struct ksym_table;

struct hg_ksyms_capture {
	bool keyed;			/* file: the file being opened */
	struct hg_file_id file;
	bool keep_text;			/* keep a copy in text too (tests) */
	char *text;			/* that copy, the caller's to free */
	struct tep_handle *tep;		/* the tep libtracecmd gave the text to */
	struct ksym_table *table;	/* its table */
	bool built;			/* built by this capture */
};

/*
 * The next tep_parse_kallsyms() on this thread gets the table of @file
 * (NULL: a table of its own), instead of libtraceevent's parse.
 */
void hg_ksyms_capture_begin(struct hg_ksyms_capture *cap, const struct hg_file_id *file,
			    bool keep_text);

/*
 * Ends the capture of this thread and gives the table to the tep the
 * text was for, when @tep (the opened handle's) says the open
 * succeeded.  @same: the file's identity was the same after the open as
 * before.  False when it was not and the table came from an earlier
 * open (its text may not be this handle's): the handle must not be used.
 */
bool hg_ksyms_capture_end(struct hg_ksyms_capture *cap, struct tep_handle *tep, bool same);

/*
 * Gives @tep the functions of @kallsyms (a /proc/kallsyms text) as
 * tep_parse_kallsyms() would, from a table of its own.  Returns true when
 * the table's resolver serves it, false when libtraceevent's list does
 * (the text's form, the tep's event formats, or memory asked for it).
 */
bool hg_ksyms_give(struct tep_handle *tep, const char *kallsyms);

/*
 * How many teps a table's resolver served, how many got libtraceevent's
 * list instead, and how many tables were built.
 */
void hg_ksyms_counts(unsigned long *shared, unsigned long *parsed, unsigned long *built);

#endif /* HGCLOCK_KSYMS_H */
