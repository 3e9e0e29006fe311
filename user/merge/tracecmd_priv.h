/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The part of libtracecmd's API that hgclock uses and that Debian's
 * libtracecmd-dev (3.1.6) exports but declares only in trace-cmd's own
 * private header (lib/trace-cmd/include/private/trace-cmd-private.h):
 * trace-cmd report, split and convert call them the same way.  The
 * prototypes below are written from that header's 3.1.6 version; their
 * ABI has been the same since trace-cmd 3.0.  One place, so that a
 * change of libtracecmd is checked against one list.
 */
#ifndef HGCLOCK_TRACECMD_PRIV_H
#define HGCLOCK_TRACECMD_PRIV_H

#include <stdbool.h>

#include <trace-cmd.h>

struct tep_record;
struct tracecmd_output;
struct tracecmd_option;

/* ---- input ---- */
void tracecmd_set_flag(struct tracecmd_input *handle, int flag);
const char *tracecmd_get_trace_clock(struct tracecmd_input *handle);
const char *tracecmd_get_uname(struct tracecmd_input *handle);
int tracecmd_cpus(struct tracecmd_input *handle);
struct tep_record *tracecmd_read_cpu_last(struct tracecmd_input *handle, int cpu);
unsigned long long tracecmd_get_cpu_file_size(struct tracecmd_input *handle, int cpu);
int tracecmd_page_size(struct tracecmd_input *handle);
int tracecmd_long_size(struct tracecmd_input *handle);

/* TRACECMD_FL_RAW_TS: timestamps as recorded, no TimeShift/offset applied. */
#define HG_TRACECMD_FL_RAW_TS	(1 << 3)

/* ---- output (merge_dat.c) ---- */

/* enum tracecmd_file_states: the file copied up to its saved command lines. */
#define HG_TRACECMD_FILE_CMD_LINES	7

/* enum tracecmd_option_id */
#define HG_TRACECMD_OPTION_TRACEID	11
#define HG_TRACECMD_OPTION_GUEST	13

struct tracecmd_output *tracecmd_copy(struct tracecmd_input *ihandle, const char *file,
				      int state, int file_version, const char *compression);
void tracecmd_set_out_clock(struct tracecmd_output *handle, const char *clock);
void tracecmd_set_quiet(struct tracecmd_output *handle, bool set_quiet);
struct tracecmd_option *tracecmd_add_option(struct tracecmd_output *handle,
					    unsigned short id, int size, const void *data);
int tracecmd_append_cpu_data(struct tracecmd_output *handle, int cpus,
			     char * const *cpu_data_files);
void tracecmd_output_close(struct tracecmd_output *handle);

#endif /* HGCLOCK_TRACECMD_PRIV_H */
