// SPDX-License-Identifier: GPL-2.0
/*
 * trace.dat handles kept between the readers of one command (trace_pool.h).
 *
 * Each handle the pool opened has an entry: its path, the file's identity
 * when it was opened (device, inode, size, modification time), and
 * whether a reader holds it.  A reader asking for a path gets a free
 * handle of that path whose file is still the same one; a handle whose
 * file changed since (written again under the same name) is closed and
 * the file opened again.  All under one lock; opening and closing happen
 * outside it.
 */
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <trace-cmd.h>

#include "ksyms.h"
#include "trace_pool.h"
#include "tracecmd_priv.h"

/* Handles tracked at once: a few per input, inputs being at most a few dozen. */
#define HG_TRACE_POOL_MAX	64

struct pool_entry {
	char *path;			/* NULL: a free entry */
	struct tracecmd_input *h;
	struct hg_file_id id;		/* the file when it was opened */
	bool held;			/* a reader has it */
};

static struct pool_entry pool[HG_TRACE_POOL_MAX];
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * Held around tracecmd_open_head(), which reads a file's headers: one
 * thread at a time, so that the process holds one file's kallsyms text
 * at a time.  libtracecmd decompresses the section whole, copies it, and
 * frees both once the table is built from them (ksyms.c): about 24 MB
 * for a kernel of 176 000 symbols, the largest allocations of a merge.
 * Two opens at once (the claims' opens on several threads, or the merge
 * workers opening the same inputs) raised a merge's peak from 45 to 62
 * MB, above trace-cmd report's 55 (Documentation/bench.rst).  Never
 * taken with pool_lock held, and never held while waiting for another
 * thread: the only wait inside, ksyms.c's table_for() for a table
 * another thread is building, cannot happen while the builder is the
 * gate's holder.
 */
static pthread_mutex_t open_gate = PTHREAD_MUTEX_INITIALIZER;
/* Threads between the gate's lock and unlock, and their most at once (tests). */
static atomic_int nr_opening, max_opening;

static void entry_clear(struct pool_entry *e)
{
	free(e->path);
	memset(e, 0, sizeof(*e));
}

struct tracecmd_input *hg_trace_open(const char *path, char *err, size_t err_len)
{
	struct tracecmd_input *h = NULL, *stale[HG_TRACE_POOL_MAX];
	struct hg_ksyms_capture ksyms;
	struct hg_file_id id, id_after;
	struct stat st;
	int nr_stale = 0, opening;
	bool have_st = !stat(path, &st), same, ksyms_ok;
	char *copy;

	if (have_st)
		id = hg_file_id_of(&st);

	pthread_mutex_lock(&pool_lock);
	for (int i = 0; i < HG_TRACE_POOL_MAX; i++) {
		struct pool_entry *e = &pool[i];

		if (!e->path || e->held || strcmp(e->path, path))
			continue;
		if (!have_st || !hg_file_id_same(&e->id, &id)) {
			stale[nr_stale++] = e->h;
			entry_clear(e);
		} else if (!h) {
			e->held = true;
			h = e->h;
		}
	}
	pthread_mutex_unlock(&pool_lock);
	for (int i = 0; i < nr_stale; i++)
		tracecmd_close(stale[i]);
	if (h)
		return h;

	/*
	 * Its kallsyms parsed once per file and command, not per handle
	 * (ksyms.c); one thread at a time in here (open_gate).
	 */
	pthread_mutex_lock(&open_gate);
	opening = atomic_fetch_add(&nr_opening, 1) + 1;
	for (int m = atomic_load(&max_opening); m < opening &&
	     !atomic_compare_exchange_weak(&max_opening, &m, opening);)
		;
	hg_ksyms_capture_begin(&ksyms, have_st ? &id : NULL, false);
	h = tracecmd_open_head(path, 0);
	same = false;
	if (have_st && !stat(path, &st)) {
		id_after = hg_file_id_of(&st);
		same = hg_file_id_same(&id, &id_after);
	}
	ksyms_ok = hg_ksyms_capture_end(&ksyms, h ? tracecmd_get_tep(h) : NULL, same);
	atomic_fetch_sub(&nr_opening, 1);
	pthread_mutex_unlock(&open_gate);
	if (!ksyms_ok) {
		snprintf(err, err_len, "%s: changed while it was being read", path);
		tracecmd_close(h);
		return NULL;
	}
	if (!h) {
		snprintf(err, err_len,
			 "%s: not a trace-cmd trace.dat file, or truncated or damaged", path);
		return NULL;
	}
	/* Before the data: the options (TimeShift) are applied when it is initialised. */
	tracecmd_set_flag(h, HG_TRACECMD_FL_RAW_TS);
	if (tracecmd_init_data(h) < 0) {
		snprintf(err, err_len, "%s: cannot read its trace data (truncated or damaged?)",
			 path);
		tracecmd_close(h);
		return NULL;
	}
	/* Tracked when there is room (and the file's identity): else closed when given back. */
	copy = have_st ? strdup(path) : NULL;
	pthread_mutex_lock(&pool_lock);
	for (int i = 0; i < HG_TRACE_POOL_MAX && copy; i++)
		if (!pool[i].path) {
			pool[i].path = copy;
			pool[i].h = h;
			pool[i].id = id;
			pool[i].held = true;
			copy = NULL;
		}
	pthread_mutex_unlock(&pool_lock);
	free(copy);
	return h;
}

/*
 * Opening a trace.dat makes the command's largest allocations, and
 * transient ones: libtracecmd decompresses a section whole (a Debian
 * kernel's kallsyms is 8 MB) and copies it once more before parsing it,
 * then frees both.  glibc serves such a block with mmap() and gives it
 * back at free(), but its first free raises the mmap threshold to the
 * block's size (up to 32 MB): the next file's blocks then come from the
 * heap of the thread that opens it, and their pages stay with the
 * process after they are freed (a two-thread merge peaked at 69 MB with
 * the gate above, 50 MB without that).  A threshold set by mallopt()
 * never moves.  At 4 MiB it catches the sections and little else: at
 * 128 KiB every chunk buffer libtracecmd allocates and frees while it
 * reads the events became an mmap(), munmap() and fresh page faults, a
 * fifth more CPU time for a merge (Documentation/bench.rst).
 */
#define HG_TRACE_MMAP_THRESHOLD_BYTES	(4 << 20)

void hg_trace_pool_init(void)
{
	mallopt(M_MMAP_THRESHOLD, HG_TRACE_MMAP_THRESHOLD_BYTES);
}

int hg_trace_pool_max_opening(void)
{
	return atomic_load(&max_opening);
}

void hg_trace_keep(struct tracecmd_input *h)
{
	bool tracked = false;

	pthread_mutex_lock(&pool_lock);
	for (int i = 0; i < HG_TRACE_POOL_MAX && !tracked; i++)
		if (pool[i].path && pool[i].h == h) {
			pool[i].held = false;
			tracked = true;
		}
	pthread_mutex_unlock(&pool_lock);
	if (!tracked)
		tracecmd_close(h);
}

void hg_trace_pool_close(void)
{
	pthread_mutex_lock(&pool_lock);
	for (int i = 0; i < HG_TRACE_POOL_MAX; i++)
		if (pool[i].path && !pool[i].held) {
			tracecmd_close(pool[i].h);
			entry_clear(&pool[i]);
		}
	pthread_mutex_unlock(&pool_lock);
}

/* ---- several files ---- */

/* One after the other: open_gate would make threads wait for each other. */
void hg_trace_open_all(const char *const *paths, int n, struct tracecmd_input **out)
{
	char err[16];

	for (int i = 0; i < n; i++)
		out[i] = paths[i] ? hg_trace_open(paths[i], err, sizeof(err)) : NULL;
}

void hg_trace_close(struct tracecmd_input *h)
{
	pthread_mutex_lock(&pool_lock);
	for (int i = 0; i < HG_TRACE_POOL_MAX; i++)
		if (pool[i].path && pool[i].h == h)
			entry_clear(&pool[i]);
	pthread_mutex_unlock(&pool_lock);
	tracecmd_close(h);
}
