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
#include <pthread.h>
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
	int nr_stale = 0;
	bool have_st = !stat(path, &st), same;
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

	/* Its kallsyms parsed once per file and command, not per handle (ksyms.c). */
	hg_ksyms_capture_begin(&ksyms, have_st ? &id : NULL, false);
	h = tracecmd_open_head(path, 0);
	same = false;
	if (have_st && !stat(path, &st)) {
		id_after = hg_file_id_of(&st);
		same = hg_file_id_same(&id, &id_after);
	}
	if (!hg_ksyms_capture_end(&ksyms, h ? tracecmd_get_tep(h) : NULL, same)) {
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

/* ---- several files at once ---- */

struct open_all {
	const char *const *paths;
	struct tracecmd_input **out;
	int n;
	int next;			/* the next index to open, under lock */
	pthread_mutex_t lock;
};

static void *open_worker(void *arg)
{
	struct open_all *oa = arg;
	char err[16];

	for (;;) {
		int i;

		pthread_mutex_lock(&oa->lock);
		i = oa->next++;
		pthread_mutex_unlock(&oa->lock);
		if (i >= oa->n)
			return NULL;
		if (oa->paths[i])
			oa->out[i] = hg_trace_open(oa->paths[i], err, sizeof(err));
	}
}

void hg_trace_open_all(const char *const *paths, int n, struct tracecmd_input **out)
{
	struct open_all oa = { .paths = paths, .out = out, .n = n };
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	pthread_t tid[HG_TRACE_OPEN_THREADS];
	int nr = 0, want = 0;

	for (int i = 0; i < n; i++) {
		out[i] = NULL;
		want += paths[i] != NULL;
	}
	if (cpus > HG_TRACE_OPEN_THREADS)
		cpus = HG_TRACE_OPEN_THREADS;
	if (want > cpus)
		want = (int)cpus;
	pthread_mutex_init(&oa.lock, NULL);
	/* The calling thread opens too: one file needs no thread. */
	for (; nr < want - 1; nr++)
		if (pthread_create(&tid[nr], NULL, open_worker, &oa))
			break;
	open_worker(&oa);
	for (int i = 0; i < nr; i++)
		pthread_join(tid[i], NULL);
	pthread_mutex_destroy(&oa.lock);
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
