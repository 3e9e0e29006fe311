/* SPDX-License-Identifier: GPL-2.0 */
/*
 * perf samples as merge input (user/perf_in.c): a perf.data decoded by
 * perf script, or perf script's text, turned into an application event
 * file (appev.h) the merge reads like an application's.
 */
#ifndef HGCLOCK_PERF_IN_H
#define HGCLOCK_PERF_IN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One sample line of perf script -F comm,tid,cpu,time,event,ip,sym,dso --ns. */
struct hg_perf_sample {
	char comm[16];
	uint32_t tid, cpu;
	uint64_t ts_ns;		/* perf's clock (local_clock), ns */
	char event[64];
	char where[512];	/* "IP SYM (DSO)" as perf wrote it */
};

/* 0, or -1 when @line is not such a sample. */
int hg_perf_parse_line(const char *line, struct hg_perf_sample *ps);

struct hg_perf_stats {
	uint64_t nr_samples;
	uint64_t nr_bad;	/* lines that are not samples (said) */
	uint64_t nr_unordered;	/* samples going back on their CPU (left out, said) */
	bool decoded;		/* a perf.data that perf script decoded here */
	char host[256];		/* its header's host name ("" for text) */
	char first_bad[128];
};

/*
 * Converts @input (a perf.data, or perf script's text) into a new
 * application event file in @tmpdir, whose path goes to @out_path (the
 * caller unlinks it).  0, or -1 with the reason in @err.
 */
int hg_perf_to_events(const char *input, const char *tmpdir, char *out_path, size_t out_len,
		      struct hg_perf_stats *st, char *err, size_t err_len);

#endif /* HGCLOCK_PERF_IN_H */
