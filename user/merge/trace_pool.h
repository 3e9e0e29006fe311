/* SPDX-License-Identifier: GPL-2.0 */
/*
 * trace.dat files opened once per command (user/trace_pool.c).
 *
 * Opening a trace.dat parses its whole header: event formats and the
 * kernel's symbol table (kallsyms, some 170k lines), which was most of
 * the cost of opening it.  hgclock merge reads the same files several
 * times: its checks of what the inputs claim, the marker pairing of each
 * guest trace, the merge, and the passes of --dat, --perfetto and
 * --report.  Each takes a handle from this pool when one for the same
 * path is there, and gives it back when done, so a file's header is
 * parsed once per command (and once per extra worker thread), and its
 * kallsyms once per command: each handle of the file shares one table
 * (ksyms.c), found by the file's identity below.
 *
 * Every handle is in one state: headers read, trace-cmd's time shift off
 * (HG_TRACECMD_FL_RAW_TS, set before the data is initialised), the data
 * initialised.  Its readers start each CPU with tracecmd_read_cpu_first(),
 * which rewinds, so where the last reader stopped does not matter.
 */
#ifndef HGCLOCK_TRACE_POOL_H
#define HGCLOCK_TRACE_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

struct tracecmd_input;

/*
 * A file as the pool knows it: the same file, unchanged, while its
 * device, inode, size and modification time are (the pool's handles and
 * ksyms.c's tables are kept by it).
 */
struct hg_file_id {
	unsigned long long dev, ino;
	long long size, mtime_sec, mtime_nsec;
};

static inline struct hg_file_id hg_file_id_of(const struct stat *st)
{
	return (struct hg_file_id){
		.dev = st->st_dev, .ino = st->st_ino, .size = st->st_size,
		.mtime_sec = st->st_mtim.tv_sec, .mtime_nsec = st->st_mtim.tv_nsec,
	};
}

static inline bool hg_file_id_same(const struct hg_file_id *a, const struct hg_file_id *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime_sec == b->mtime_sec && a->mtime_nsec == b->mtime_nsec;
}

/*
 * A handle for @path: one given back for that path, or a new one.  NULL
 * with a message in @err when the file cannot be read as a trace.dat.
 * Thread-safe.
 */
struct tracecmd_input *hg_trace_open(const char *path, char *err, size_t err_len);

/*
 * Gives @h, from hg_trace_open(), back for the next reader (a handle the
 * pool could not track is closed).  Only a handle that printed no event:
 * printing teaches its tep the tasks' names, which would change what a
 * later reader prints.
 */
void hg_trace_keep(struct tracecmd_input *h);

/* Closes @h, from hg_trace_open(), for good (a handle that printed events). */
void hg_trace_close(struct tracecmd_input *h);

/*
 * hg_trace_open() of each non-NULL @paths[i] into @out[i] (NULL for the
 * others and for files that cannot be read: their readers say why), one
 * file at a time: an open's transient memory is the command's largest.
 */
void hg_trace_open_all(const char *const *paths, int n, struct tracecmd_input **out);

/*
 * Before a command's first open, while it has one thread: makes every
 * large allocation of its own pages, returned at free (see
 * trace_pool.c).
 */
void hg_trace_pool_init(void);

/* The most threads that were ever reading a file's headers at once (1: tests). */
int hg_trace_pool_max_opening(void);

/* Closes every handle in the pool (before exit: the files are done with). */
void hg_trace_pool_close(void);

#endif /* HGCLOCK_TRACE_POOL_H */
