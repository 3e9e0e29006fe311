// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock merge on several threads.  Decoding and formatting events is
 * nearly all of a merge's work, and it splits by stream: worker w opens
 * the inputs itself (libtracecmd handles are not shared between threads)
 * and takes the streams merge.c's shard_streams() gives shard w (a trace
 * with sched events whole, for its task names, unless it is larger than
 * a fair share); it merges them in host time on its own heap and formats each event (text line, JSON object)
 * into chunks.  The calling thread merges the workers' chunk queues on a
 * heap of W heads with the same order as one thread would (host time,
 * then input, then CPU) and writes the formatted bytes out.
 *
 * Deadlock freedom: each worker has one queue, in its own time order, so
 * the merger only ever waits for a worker whose queue is empty, and a
 * worker only waits while its queue is full, which then has a head the
 * merger can take.  Memory: at most HGM_QUEUE_DEPTH chunks per worker.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <event-parse.h>
#include <trace-seq.h>

#include "merge.h"

#define HGM_CHUNK_EVENTS	2048
#define HGM_QUEUE_DEPTH		4

struct chunk_ev {
	uint64_t key;		/* host_ts */
	uint32_t tie;		/* input << 16 | cpu: the single-thread order */
	uint32_t unmapped;
	size_t text_end, json_end;
};

struct chunk {
	struct chunk *next;
	size_t n;
	struct chunk_ev ev[HGM_CHUNK_EVENTS];
	char *text;		/* formatted lines, malloc()ed, owned */
	size_t text_len, text_cap;
	char *json;		/* an open_memstream() buffer, owned */
	size_t json_len;
};

struct worker {
	struct hgm m;
	const struct hgm_par *par;
	int shard;
	pthread_t thread;
	char err[512];
	int failed;		/* 0, or the HGM_E_* of w->err */

	/* formatting, worker side */
	struct hgm_text text;
	struct chunk *cur;
	FILE *jmem;
	char *jbuf;
	size_t jsize;

	/* the queue: lock protects head/tail/depth/done */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct chunk *head, *tail;
	int depth;
	int done;		/* no more chunks will come */
	int stop;		/* the merger gave up: drop everything */
	int ready;		/* inputs opened (or failed) */

	/* merger side */
	struct chunk *rd;
	size_t rd_i;
	size_t text_off, json_off;
};

static int chunk_open(struct worker *w)
{
	w->cur = calloc(1, sizeof(*w->cur));
	if (!w->cur)
		return -1;
	w->jbuf = NULL;
	w->jmem = w->par->json ? open_memstream(&w->jbuf, &w->jsize) : NULL;
	if (w->par->json && !w->jmem)
		return -1;
	return 0;
}

/* Hands the current chunk to the merger; waits while the queue is full. */
static int chunk_push(struct worker *w)
{
	struct chunk *c = w->cur;
	int stop;

	if (w->jmem && fclose(w->jmem))
		return -1;
	w->jmem = NULL;
	c->json = w->jbuf;
	c->json_len = w->jsize;
	w->cur = NULL;
	pthread_mutex_lock(&w->lock);
	while (w->depth >= HGM_QUEUE_DEPTH && !w->stop)
		pthread_cond_wait(&w->cond, &w->lock);
	stop = w->stop;
	if (!stop) {
		if (w->tail)
			w->tail->next = c;
		else
			w->head = c;
		w->tail = c;
		w->depth++;
		pthread_cond_broadcast(&w->cond);
	}
	pthread_mutex_unlock(&w->lock);
	if (stop) {
		free(c->text);
		free(c->json);
		free(c);
		return -1;
	}
	return 0;
}

static int worker_emit(void *ctx, const struct hgm_event *ev)
{
	struct worker *w = ctx;
	struct chunk_ev *ce = &w->cur->ev[w->cur->n];

	ce->key = ev->host_ts;
	ce->tie = (uint32_t)(ev->in - w->m.in) << 16 | (uint32_t)ev->cpu;
	ce->unmapped = !!(ev->flags & HGM_EV_UNMAPPED);
	if (w->par->text) {
		struct chunk *c = w->cur;

		if (hgm_text_format(&w->text, ev))
			return -1;
		if (c->text_len + w->text.len > c->text_cap) {
			size_t cap = c->text_cap ? c->text_cap * 2 : 256 * 1024;
			char *b;

			while (cap < c->text_len + w->text.len)
				cap *= 2;
			b = realloc(c->text, cap);
			if (!b)
				return -1;
			c->text = b;
			c->text_cap = cap;
		}
		memcpy(c->text + c->text_len, w->text.buf, w->text.len);
		c->text_len += w->text.len;
		ce->text_end = c->text_len;
	}
	if (w->jmem) {
		struct json_writer jw;

		json_init(&jw, w->jmem, false);
		if (hgm_json_write_event(&jw, &w->m, ev))
			return -1;
		ce->json_end = (size_t)ftell(w->jmem);
	}
	if (++w->cur->n == HGM_CHUNK_EVENTS) {
		if (chunk_push(w) || chunk_open(w))
			return -1;
	}
	return 0;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	const struct hgm_par *par = w->par;
	struct hgm_options opt = par->opt;
	int ret = -1;

	opt.shard = w->shard;
	opt.nr_shards = par->nr_threads;
	opt.progress = false;
	opt.span = par->progress;
	for (int i = 0; i < par->nr_inputs && !w->failed; i++)
		w->failed = hgm_add_spec(&w->m, &par->inputs[i], w->err, sizeof(w->err));
	if (!w->failed)
		w->failed = hgm_start(&w->m, par->sync, &opt, w->err, sizeof(w->err));
	if (!w->failed && hgm_text_init(&w->text, NULL)) {
		snprintf(w->err, sizeof(w->err), "out of memory");
		w->failed = HGM_E_SYSTEM;
	}
	pthread_mutex_lock(&w->lock);
	w->ready = 1;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);

	if (!w->failed && !chunk_open(w) && !hgm_run(&w->m, worker_emit, w))
		ret = w->cur && w->cur->n ? chunk_push(w) : 0;
	if (w->cur) {
		if (w->jmem)
			fclose(w->jmem);
		free(w->jbuf);
		free(w->cur->text);
		free(w->cur);
		w->cur = NULL;
	}
	pthread_mutex_lock(&w->lock);
	if (ret && !w->stop && !w->failed) {
		w->failed = HGM_E_SYSTEM;
		snprintf(w->err, sizeof(w->err), "formatting events: %s", strerror(errno ? errno : ENOMEM));
	} else if (!ret && !w->failed) {
		w->failed = hgm_read_error(&w->m, w->err, sizeof(w->err));
	}
	w->done = 1;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	hgm_text_free(&w->text);
	return NULL;
}

/* The merger's next chunk of @w, waiting for it; false when @w has ended. */
static bool next_chunk(struct worker *w)
{
	struct chunk *c;

	pthread_mutex_lock(&w->lock);
	while (!w->head && !w->done)
		pthread_cond_wait(&w->cond, &w->lock);
	c = w->head;
	if (c) {
		w->head = c->next;
		if (!w->head)
			w->tail = NULL;
		w->depth--;
		pthread_cond_broadcast(&w->cond);
	}
	pthread_mutex_unlock(&w->lock);
	if (w->rd) {
		free(w->rd->text);
		free(w->rd->json);
		free(w->rd);
	}
	w->rd = c;
	w->rd_i = 0;
	w->text_off = w->json_off = 0;
	return c != NULL;
}

static bool head_before(const struct worker *a, const struct worker *b)
{
	const struct chunk_ev *x = &a->rd->ev[a->rd_i], *y = &b->rd->ev[b->rd_i];

	if (x->key != y->key)
		return x->key < y->key;
	return x->tie < y->tie;
}

static void heap_down(struct worker **h, int n, int i)
{
	for (;;) {
		int l = 2 * i + 1, r = l + 1, min = i;
		struct worker *t;

		if (l < n && head_before(h[l], h[min]))
			min = l;
		if (r < n && head_before(h[r], h[min]))
			min = r;
		if (min == i)
			return;
		t = h[i];
		h[i] = h[min];
		h[min] = t;
		i = min;
	}
}

static void stop_all(struct worker *ws, int n)
{
	for (int i = 0; i < n; i++) {
		pthread_mutex_lock(&ws[i].lock);
		ws[i].stop = 1;
		pthread_cond_broadcast(&ws[i].cond);
		pthread_mutex_unlock(&ws[i].lock);
	}
}

int hgm_par_run(const struct hgm_par *par, struct hgm_par_result *res, char *err, size_t err_len)
{
	int nt = par->nr_threads, n = 0, ret = HGM_E_SYSTEM, started = 0;
	struct worker *ws = calloc((size_t)nt, sizeof(*ws));
	struct worker **heap = calloc((size_t)nt, sizeof(*heap));
	/* Every worker opens every input: each file's data is checked once. */
	struct hgm_checked *checked = hgm_checked_new();
	struct hgm_json json;
	struct hgm_marks marks = { 0 };
	bool json_open = false;
	uint64_t nr = 0, first_ts = UINT64_MAX, last_ts = 0;

	memset(res, 0, sizeof(*res));
	if (!ws || !heap || !checked) {
		snprintf(err, err_len, "out of memory");
		goto out;
	}
	for (int i = 0; i < nt; i++) {
		ws[i].par = par;
		ws[i].shard = i;
		ws[i].m.checked = checked;
		pthread_mutex_init(&ws[i].lock, NULL);
		pthread_cond_init(&ws[i].cond, NULL);
		if (pthread_create(&ws[i].thread, NULL, worker_main, &ws[i])) {
			snprintf(err, err_len, "cannot start a thread: %s", strerror(errno));
			stop_all(ws, started);
			goto join;
		}
		started++;
	}
	/* Every worker's inputs open before the first byte is written. */
	for (int i = 0; i < nt; i++) {
		pthread_mutex_lock(&ws[i].lock);
		while (!ws[i].ready)
			pthread_cond_wait(&ws[i].cond, &ws[i].lock);
		pthread_mutex_unlock(&ws[i].lock);
		if (ws[i].failed) {
			snprintf(err, err_len, "%s", ws[i].err);
			ret = ws[i].failed;
			stop_all(ws, started);
			goto join;
		}
	}
	if (par->json) {
		if (hgm_json_begin(&json, par->json, &ws[0].m)) {
			snprintf(err, err_len, "out of memory");
			stop_all(ws, started);
			goto join;
		}
		json_open = true;
	}
	/* The whole span, for the progress line: over every worker's streams. */
	for (int i = 0; i < nt; i++) {
		if (ws[i].m.first_ts < first_ts)
			first_ts = ws[i].m.first_ts;
		if (ws[i].m.last_ts > last_ts)
			last_ts = ws[i].m.last_ts;
	}
	for (int i = 0; i < nt; i++)
		if (next_chunk(&ws[i]))
			heap[n++] = &ws[i];
	for (int i = n / 2; i-- > 0;)
		heap_down(heap, n, i);
	if (hgm_marks_build(&marks, &ws[0].m)) {
		snprintf(err, err_len, "out of memory");
		stop_all(ws, started);
		goto join;
	}
	while (n) {
		struct worker *w = heap[0];
		const struct chunk_ev *ce = &w->rd->ev[w->rd_i];

		/* A disruption at or before this event: its line comes first. */
		if (marks.next < marks.n)
			hgm_marks_until(&marks, ce->key, par->text, par->json);

		if (par->text) {
			fwrite(w->rd->text + w->text_off, 1, ce->text_end - w->text_off, par->text);
			w->text_off = ce->text_end;
		}
		if (par->json) {
			/* The track names came first: a comma before every event. */
			fputc(',', par->json);
			fwrite(w->rd->json + w->json_off, 1, ce->json_end - w->json_off, par->json);
			w->json_off = ce->json_end;
			if (!ce->unmapped)
				hgm_json_span(&json, &ws[0].m, ce->key);
		}
		nr++;
		if (par->progress && !(nr & 0xffff))
			fprintf(stderr, "\rmerge: %3u%% %" PRIu64 " events",
				hgm_percent(first_ts, last_ts, ce->key), nr);
		if (++w->rd_i == w->rd->n && !next_chunk(w))
			heap[0] = heap[--n];
		if (n)
			heap_down(heap, n, 0);
		if ((par->text && ferror(par->text)) || (par->json && ferror(par->json))) {
			snprintf(err, err_len, "writing the output: %s", strerror(errno));
			stop_all(ws, started);
			goto join;
		}
	}
	hgm_marks_until(&marks, UINT64_MAX, par->text, par->json);
	if ((par->text && ferror(par->text)) || (par->json && ferror(par->json))) {
		snprintf(err, err_len, "writing the output: %s", strerror(errno));
		stop_all(ws, started);
		goto join;
	}
	if (par->progress)
		fprintf(stderr, "\rmerge: 100%% %" PRIu64 " events\n", nr);
	ret = 0;
join:
	hgm_marks_free(&marks);
	for (int i = 0; i < started; i++)
		pthread_join(ws[i].thread, NULL);
	for (int i = 0; i < started && !ret; i++)
		if (ws[i].failed) {
			snprintf(err, err_len, "%s", ws[i].err);
			ret = ws[i].failed;
		}
	if (json_open) {
		/* The vCPU runs come from the correlation: any worker's view. */
		if (hgm_json_end(&json) && !ret) {
			snprintf(err, err_len, "writing the output: %s", strerror(errno));
			ret = HGM_E_SYSTEM;
		}
	}
	/* Totals: each worker counted its own streams. */
	for (int i = 0; i < started; i++)
		hgm_result_add(&ws[i].m, res);
	for (int i = 0; i < started; i++) {
		while (ws[i].rd || ws[i].head) {
			ws[i].done = 1;
			next_chunk(&ws[i]);
		}
		hgm_close(&ws[i].m);
		pthread_mutex_destroy(&ws[i].lock);
		pthread_cond_destroy(&ws[i].cond);
	}
out:
	free(ws);
	free(heap);
	hgm_checked_free(checked);
	return ret;
}
