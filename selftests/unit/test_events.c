// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of user/lib/events.c, the application events
 * (hgclock_events_open(3)), natively and without the module: the public
 * clock over a meta area laid out as the module publishes it
 * (fake_clock.h), this machine's TSC conversion on every CPU, the events
 * written to a real file and read back with appev.c's reader (the one
 * hgclock merge uses).
 *
 * - many threads writing at once, unpinned and some moved between CPUs
 *   on purpose, while another thread flushes: every event is in the file
 *   exactly once, each CPU's records are in time order (what merge
 *   checks), each thread's events on one CPU are in its order, and a
 *   thread's events are in its order in time across CPUs;
 * - threads that exit with events still buffered: the events are in the
 *   file after hgclock_events_flush(), and those written after it after
 *   hgclock_events_close();
 * - a write that fails (a pipe whose reader is gone): the call that hit
 *   it returns the write's error (EPIPE), every later call EIO, close -1.
 *
 * Run also under ASan/UBSan (make asan) and TSan (Documentation/testing
 * has no target for it: build this file alone with -fsanitize=thread).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <hgclock/hgclock.h>

#include "kselftest_harness.h"
#include "libhgclock.h"
#include "appev.h"
#include "fake_clock.h"

#define NR_WRITERS	8
#define PER_WRITER	6000	/* a few buffers' worth per CPU */

struct ev_env {
	struct fake_clock fc;
	struct hgclock_clock *clk;
	char dir[64];
	char path[96];
};

static int env_open(struct ev_env *e)
{
	struct hgclock_conversion conv;
	unsigned int cpu;
	int ret;

	memset(e, 0, sizeof(*e));
	ret = fake_clock_create(&e->fc, (unsigned int)sysconf(_SC_NPROCESSORS_CONF));
	if (ret)
		return ret;
	fake_clock_native(&conv, 20, &e->fc.meta->tsc_khz);
	for (cpu = 0; cpu < e->fc.meta->nr_cpus; cpu++)
		fake_clock_set(&e->fc, cpu, &conv);
	e->clk = hgclock_clock_open(e->fc.path, HGCLOCK_OPEN_NO_SYSCALL);
	if (!e->clk)
		return -errno;
	strcpy(e->dir, "/tmp/hgclock-test-events-XXXXXX");
	if (!mkdtemp(e->dir))
		return -errno;
	snprintf(e->path, sizeof(e->path), "%s/app.hgev", e->dir);
	return 0;
}

static void env_close(struct ev_env *e)
{
	unlink(e->path);
	rmdir(e->dir);
	if (e->clk)
		hgclock_clock_close(e->clk);
	fake_clock_destroy(&e->fc);
}

struct writer {
	pthread_t thread;
	struct hgclock_events *evs;
	int index, first, count, hop;	/* events first..first+count-1 */
	uint32_t tid;
	int err;		/* errno of the first failed event */
	int nr_failed, nr_epipe, nr_eio;
};

static void hop_cpu(int i)
{
	int n = (int)sysconf(_SC_NPROCESSORS_ONLN);
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(i % (n > 0 ? n : 1), &set);
	sched_setaffinity(0, sizeof(set), &set);	/* best effort */
}

/*
 * Writes @count events, "w<index> <seq>" in the text, instants and
 * slices' halves in turn; a hopping writer changes CPU every 50 events.
 */
static void *writer_run(void *arg)
{
	struct writer *w = arg;
	static const unsigned int kinds[] = {
		HGCLOCK_EVENT_INSTANT, HGCLOCK_EVENT_BEGIN, HGCLOCK_EVENT_END,
	};
	char text[64];

	w->tid = (uint32_t)syscall(SYS_gettid);
	for (int i = w->first; i < w->first + w->count; i++) {
		if (w->hop && !(i % 50))
			hop_cpu(i / 50 + w->index);
		snprintf(text, sizeof(text), "w%d %d", w->index, i);
		if (hgclock_event(w->evs, kinds[i % 3], "work", text)) {
			if (!w->nr_failed++)
				w->err = errno;
			w->nr_epipe += errno == EPIPE;
			w->nr_eio += errno == EIO;
		}
	}
	return NULL;
}

struct seen {
	int count;		/* records of this event in the file */
	uint64_t ts;
	uint32_t cpu, tid;
};

/*
 * Reads @path back and checks it: each CPU's records in time order, every
 * event "w<i> <seq>" of @nr writers at most once (counts in @seen,
 * [writer][seq]), each writer's records on one CPU in its order.
 * Returns the number of records, or -1 (with a message) on damage.
 */
static long read_back(struct __test_metadata *_metadata, const char *path,
		      struct seen (*seen)[PER_WRITER], int nr)
{
	static uint64_t last_ts[HGEV_MAX_CPUS];
	static int last_seq[NR_WRITERS][HGEV_MAX_CPUS];
	struct hgev_header h;
	struct hgev_rec r;
	char err[256];
	long n = 0;
	FILE *f;
	int ret;

	memset(last_ts, 0, sizeof(last_ts));
	memset(last_seq, 0xff, sizeof(last_seq));
	f = fopen(path, "rb");
	EXPECT_NE(NULL, f) TH_LOG("%s: %s", path, strerror(errno));
	if (!f)
		return -1;
	EXPECT_EQ(0, hgev_read_header(f, &h, err, sizeof(err))) TH_LOG("%s", err);
	EXPECT_EQ((uint32_t)getpid(), h.pid);
	while ((ret = hgev_read_record(f, &r, err, sizeof(err))) == 1) {
		int wi, seq;

		n++;
		EXPECT_LE(last_ts[r.cpu], r.ts) TH_LOG("CPU %u goes back: %llu after %llu",
							r.cpu, (unsigned long long)r.ts,
							(unsigned long long)last_ts[r.cpu]);
		last_ts[r.cpu] = r.ts;
		EXPECT_TRUE(r.flags & HGEV_REC_EXACT);
		EXPECT_STREQ("work", r.name);
		if (sscanf(r.text, "w%d %d", &wi, &seq) != 2 || wi < 0 || wi >= nr || seq < 0 ||
		    seq >= PER_WRITER) {
			EXPECT_TRUE(0) TH_LOG("a record not written: \"%s\"", r.text);
			continue;
		}
		EXPECT_LT(last_seq[wi][r.cpu], seq) TH_LOG("writer %d on CPU %u: %d after %d",
							   wi, r.cpu, seq, last_seq[wi][r.cpu]);
		last_seq[wi][r.cpu] = seq;
		seen[wi][seq].count++;
		seen[wi][seq].ts = r.ts;
		seen[wi][seq].cpu = r.cpu;
		seen[wi][seq].tid = r.tid;
	}
	EXPECT_EQ(0, ret) TH_LOG("%s", err);
	fclose(f);
	return n;
}

/*
 * Every event of the writers' first @upto[i] once, none after; each
 * writer's in its order in time, with its thread id.
 */
static void check_seen(struct __test_metadata *_metadata, struct seen (*seen)[PER_WRITER],
		       const struct writer *w, int nr, const int *upto)
{
	for (int i = 0; i < nr; i++) {
		int missing = 0, twice = 0, extra = 0, back = 0, bad_tid = 0;

		for (int s = 0; s < PER_WRITER; s++) {
			const struct seen *e = &seen[i][s];

			if (s >= upto[i]) {
				extra += e->count != 0;
				continue;
			}
			missing += !e->count;
			twice += e->count > 1;
			bad_tid += e->count && e->tid != w[i].tid;
			/*
			 * One conversion on every CPU and the TSC in step across
			 * them: a thread's stamps never go back, whichever CPU.
			 */
			if (s && e->count && seen[i][s - 1].count && e->ts < seen[i][s - 1].ts)
				back++;
		}
		EXPECT_EQ(0, missing) TH_LOG("writer %d: %d events missing", i, missing);
		EXPECT_EQ(0, twice) TH_LOG("writer %d: %d events twice", i, twice);
		EXPECT_EQ(0, extra) TH_LOG("writer %d: %d events never written", i, extra);
		EXPECT_EQ(0, bad_tid) TH_LOG("writer %d: %d with another thread id", i, bad_tid);
		EXPECT_EQ(0, back) TH_LOG("writer %d: %d events before their predecessor", i, back);
	}
}

static volatile int flusher_stop;

static void *flusher_run(void *arg)
{
	struct hgclock_events *evs = arg;
	long failed = 0;

	while (!__atomic_load_n(&flusher_stop, __ATOMIC_RELAXED)) {
		if (hgclock_events_flush(evs))
			failed++;
		usleep(200);
	}
	return (void *)failed;
}

TEST(many_threads_each_event_once)
{
	static struct seen seen[NR_WRITERS][PER_WRITER];
	struct writer w[NR_WRITERS];
	int upto[NR_WRITERS];
	struct hgclock_events *evs;
	struct ev_env e;
	pthread_t flusher;
	void *failed;
	long n;
	int ret;

	if (hgclock_uclock_method() == HGCLOCK_UCLOCK_NONE)
		SKIP(return, "no zero-syscall clock method on this machine");
	ret = env_open(&e);
	ASSERT_EQ(0, ret) TH_LOG("meta area: %s", strerror(-ret));
	evs = hgclock_events_open(e.clk, e.path, 0);
	ASSERT_NE(NULL, evs) TH_LOG("hgclock_events_open: %s", strerror(errno));
	memset(seen, 0, sizeof(seen));
	memset(w, 0, sizeof(w));
	flusher_stop = 0;
	ASSERT_EQ(0, pthread_create(&flusher, NULL, flusher_run, evs));
	for (int i = 0; i < NR_WRITERS; i++) {
		w[i].evs = evs;
		w[i].index = i;
		w[i].count = PER_WRITER;
		w[i].hop = i & 1;	/* half of them moved on purpose */
		upto[i] = PER_WRITER;
		ASSERT_EQ(0, pthread_create(&w[i].thread, NULL, writer_run, &w[i]));
	}
	for (int i = 0; i < NR_WRITERS; i++)
		pthread_join(w[i].thread, NULL);
	__atomic_store_n(&flusher_stop, 1, __ATOMIC_RELAXED);
	pthread_join(flusher, &failed);
	EXPECT_EQ(NULL, failed);
	for (int i = 0; i < NR_WRITERS; i++) {
		EXPECT_EQ(0, w[i].nr_failed) TH_LOG("writer %d: %s", i, strerror(w[i].err));
	}
	EXPECT_EQ(0, hgclock_events_close(evs)) TH_LOG("close: %s", strerror(errno));
	n = read_back(_metadata, e.path, seen, NR_WRITERS);
	EXPECT_EQ((long)NR_WRITERS * PER_WRITER, n);
	check_seen(_metadata, seen, w, NR_WRITERS, upto);
	env_close(&e);
}

/* Threads gone with their events buffered: a flush writes them, close the rest. */
TEST(thread_exit_with_pending_events)
{
	static struct seen seen[NR_WRITERS][PER_WRITER];
	struct writer w[NR_WRITERS];
	int upto[NR_WRITERS];
	struct hgclock_events *evs;
	struct ev_env e;
	uint32_t first_tid;
	long n;
	int ret;

	if (hgclock_uclock_method() == HGCLOCK_UCLOCK_NONE)
		SKIP(return, "no zero-syscall clock method on this machine");
	ret = env_open(&e);
	ASSERT_EQ(0, ret) TH_LOG("meta area: %s", strerror(-ret));
	evs = hgclock_events_open(e.clk, e.path, 0);
	ASSERT_NE(NULL, evs) TH_LOG("hgclock_events_open: %s", strerror(errno));
	memset(w, 0, sizeof(w));
	/* A few events each: far from a full buffer, nothing written yet. */
	for (int i = 0; i < NR_WRITERS; i++) {
		w[i].evs = evs;
		w[i].index = i;
		w[i].count = 7;
		w[i].hop = i & 1;
		upto[i] = 7;
		ASSERT_EQ(0, pthread_create(&w[i].thread, NULL, writer_run, &w[i]));
	}
	for (int i = 0; i < NR_WRITERS; i++) {
		pthread_join(w[i].thread, NULL);
		EXPECT_EQ(0, w[i].nr_failed) TH_LOG("writer %d: %s", i, strerror(w[i].err));
	}
	{
		struct stat st;

		ASSERT_EQ(0, stat(e.path, &st));
		EXPECT_EQ(HGEV_HEADER_SIZE, st.st_size) TH_LOG("written before a flush");
	}
	EXPECT_EQ(0, hgclock_events_flush(evs)) TH_LOG("flush: %s", strerror(errno));
	memset(seen, 0, sizeof(seen));
	n = read_back(_metadata, e.path, seen, NR_WRITERS);
	EXPECT_EQ(NR_WRITERS * 7L, n);
	check_seen(_metadata, seen, w, NR_WRITERS, upto);

	/* Writer 0 goes on in a new thread; its events written by close. */
	w[0].first = 7;
	w[0].count = 13;
	first_tid = w[0].tid;
	ASSERT_EQ(0, pthread_create(&w[0].thread, NULL, writer_run, &w[0]));
	pthread_join(w[0].thread, NULL);
	EXPECT_EQ(0, w[0].nr_failed);
	EXPECT_NE(first_tid, w[0].tid);
	EXPECT_EQ(0, hgclock_events_close(evs)) TH_LOG("close: %s", strerror(errno));
	memset(seen, 0, sizeof(seen));
	n = read_back(_metadata, e.path, seen, NR_WRITERS);
	EXPECT_EQ(NR_WRITERS * 7L + 13, n);
	upto[0] = 20;
	/* Events 7 to 19 are the second thread's: its id, then as the first's for check_seen(). */
	for (int s = 7; s < 20; s++) {
		EXPECT_EQ(w[0].tid, seen[0][s].tid) TH_LOG("writer 0, event %d", s);
		seen[0][s].tid = first_tid;
	}
	w[0].tid = first_tid;
	check_seen(_metadata, seen, w, NR_WRITERS, upto);
	env_close(&e);
}

/* A write that fails: its error once, then EIO, and close says so. */
TEST(write_failure_is_sticky)
{
	struct writer w[4];
	struct hgclock_events *evs;
	char path[64];
	struct ev_env e;
	int p[2], ret, epipe = 0, other = 0;

	if (hgclock_uclock_method() == HGCLOCK_UCLOCK_NONE)
		SKIP(return, "no zero-syscall clock method on this machine");
	ret = env_open(&e);
	ASSERT_EQ(0, ret) TH_LOG("meta area: %s", strerror(-ret));
	signal(SIGPIPE, SIG_IGN);
	ASSERT_EQ(0, pipe(p));
	snprintf(path, sizeof(path), "/proc/self/fd/%d", p[1]);
	evs = hgclock_events_open(e.clk, path, HGCLOCK_EVENTS_OVERWRITE);
	ASSERT_NE(NULL, evs) TH_LOG("hgclock_events_open(%s): %s", path, strerror(errno));
	close(p[0]);		/* the reader is gone: every write fails, EPIPE */
	close(p[1]);
	memset(w, 0, sizeof(w));
	for (int i = 0; i < 4; i++) {
		w[i].evs = evs;
		w[i].index = i;
		w[i].count = PER_WRITER;
		w[i].hop = i & 1;
		ASSERT_EQ(0, pthread_create(&w[i].thread, NULL, writer_run, &w[i]));
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(w[i].thread, NULL);
		epipe += w[i].nr_epipe;
		other += w[i].nr_failed - w[i].nr_epipe - w[i].nr_eio;
	}
	/* The one write that failed; the others were not tried (the file lock orders them). */
	EXPECT_EQ(1, epipe);
	EXPECT_EQ(0, other);
	EXPECT_EQ(-1, hgclock_event(evs, HGCLOCK_EVENT_INSTANT, "late", NULL));
	EXPECT_EQ(EIO, errno);
	EXPECT_EQ(-1, hgclock_events_flush(evs));
	EXPECT_EQ(EIO, errno);
	EXPECT_EQ(-1, hgclock_events_close(evs));
	EXPECT_EQ(EIO, errno);
	env_close(&e);
}

TEST_HARNESS_MAIN
