/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Output files that never clobber an input and never leave half a file
 * (Documentation/tools.rst, "Outputs").
 *
 * A named output is written to a temporary file in its directory
 * (DEST.tmp-XXXXXX, made by mkstemp) and renamed over DEST only when
 * every write, the flush, fsync and close succeeded; on any failure the
 * temporary file is removed and DEST is left as it was.  "-" is standard
 * output, written as a stream; so is an existing file that is not a
 * regular file (/dev/null, a FIFO, a terminal), which cannot be replaced.
 */
#ifndef HGCLOCK_OUTPUT_H
#define HGCLOCK_OUTPUT_H

#include <stdio.h>

/* Inputs, and outputs, one command compares at most. */
#define HGCLOCK_MAX_IO	80

struct hg_output {
	const char *path;	/* as given; "-": standard output */
	FILE *f;
	char *tmp;		/* the temporary file, NULL when streamed */
	char *dest;		/* where tmp goes: path, through its symlinks */
};

/* How messages name @path: "standard output" for "-". */
const char *hg_output_name(const char *path);

/*
 * Before anything is opened for writing: refuses an output that is the
 * same file as an input (same device and inode, or the same path once
 * resolved; standard output when it is an input file), and two outputs
 * to one destination (two "-", or the same file; character devices such
 * as /dev/null excepted).  NULL entries are skipped.  Prints the reason;
 * HGCLOCK_EXIT_OK or HGCLOCK_EXIT_USAGE.
 */
int hg_check_outputs(const char *const *inputs, int nr_inputs,
		     const char *const *outputs, int nr_outputs);

/* Opens @path for writing as above; prints why not.  An exit status. */
int hg_output_open(struct hg_output *o, const char *path);

/*
 * A signal that ends the process (SIGINT, SIGTERM, SIGHUP, SIGPIPE, where
 * no handler is set) removes the open outputs' temporary files first.
 * For @o, keep it instead (record: what it holds is a recording).
 */
void hg_output_keep_on_signal(struct hg_output *o);

/*
 * The name to write to for a writer that opens files itself: the
 * temporary file, or @o->path when streamed.
 */
const char *hg_output_write_path(const struct hg_output *o);

/*
 * Flushes, fsyncs (a file), closes (not standard output, which the tool
 * checks at exit) and renames into place; any failure is printed with
 * the path and errno, and then the temporary file is removed.  An exit
 * status.  @o is closed either way.
 */
int hg_output_commit(struct hg_output *o);

/* Closes @o and removes its temporary file: the destination is untouched. */
void hg_output_abort(struct hg_output *o);

/*
 * For commands that print until interrupted: flushes standard output; a
 * failed write is printed (once) and gives HGCLOCK_EXIT_FAILURE, so that
 * the loop stops.
 */
int hg_stdout_check(void);

/*
 * At exit: flushes and closes standard output; a failure (a full disk,
 * a closed pipe) is printed and turns @ret 0 into HGCLOCK_EXIT_FAILURE.
 */
int hg_close_stdout(int ret);

#endif /* HGCLOCK_OUTPUT_H */
