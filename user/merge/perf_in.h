/* SPDX-License-Identifier: GPL-2.0 */
/*
 * perf samples as merge input (user/merge/perf_in.c): a perf.data decoded
 * by perf script, or perf script's text, turned into an application
 * event file (appev.h) the merge reads like an application's.
 */
#ifndef HGCLOCK_PERF_IN_H
#define HGCLOCK_PERF_IN_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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
 * One perf input being converted: hg_perf_start() starts perf script (for
 * a perf.data) and a thread that reads its output, or the text file, into
 * an unnamed application event file while the caller goes on (loading the
 * correlation file); hg_perf_finish() waits for both; hg_perf_end()
 * releases everything, stopping what still runs.  Lifetime: init, start,
 * then finish at most once, then end exactly once (also after a failed
 * start or finish), after the merge has read @path.
 */
struct hg_perf {
	const char *input;
	pid_t pid;		/* perf script, until reaped; -1 when none */
	int in_fd;		/* what the reader reads; the reader closes it */
	int ev_fd;		/* the application event file (no name) */
	int stop_fd;		/* an eventfd: written, it tells the reader to give up */
	pthread_t reader;
	bool reading;		/* @reader runs or has not been joined */
	int rd_ret;		/* the reader's result (or start's), valid once joined */
	char rd_err[600];
	struct hg_perf_stats st;
	char path[32];		/* "/proc/self/fd/N": @ev_fd for the merge to open */
};

void hg_perf_init(struct hg_perf *p);

/*
 * Starts converting @input (a perf.data, or perf script's text).  The
 * events go into an unnamed file in @tmpdir (in memory when its file
 * system has none).  0, or -1 when it could not start: hg_perf_finish()
 * then says why, so that the caller may first report what it checks
 * before (the correlation file).
 */
int hg_perf_start(struct hg_perf *p, const char *input, const char *tmpdir);

/*
 * Waits for the conversion: 0 with @p->st and @p->path set, or -1 with
 * the reason in @err (perf missing or failing, a perf record -k clock,
 * not perf script's text, a read or write error).
 */
int hg_perf_finish(struct hg_perf *p, char *err, size_t err_len);

/*
 * Kills perf script's process group if it still runs, joins the reader,
 * reaps the child, closes the file.  Safe after init alone.
 */
void hg_perf_end(struct hg_perf *p);

#endif /* HGCLOCK_PERF_IN_H */
