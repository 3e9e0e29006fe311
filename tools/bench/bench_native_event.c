// SPDX-License-Identifier: GPL-2.0
/*
 * Native benchmark, no VM and no module: the cost of an application event,
 * hgclock_event() (an instant, and a slice's two halves: a BEGIN and its
 * END), against the two tracers an application could use instead on this
 * machine: a line written to tracefs's trace_marker (a system call and a
 * copy into the kernel's ring buffer, in an instance of our own) and an
 * LTTng-UST tracepoint recorded by a session (bench_tp.h; the session is
 * made by tools/bench/native_event.sh, which says so with --lttng).  Each
 * with 1, 2 and 8 threads writing at once.
 *
 * hgclock_event() stamps with the public clock: its meta area is laid out
 * exactly as the module publishes it and holds a conversion for this
 * machine's TSC (selftests/unit/fake_clock.h, as bench_native_clock), and
 * its events go to a real file (one per process, as library.rst asks),
 * opened before and closed after each timed loop; the 64 KiB buffer
 * writes that fall inside the loop are counted.  The library has no ring
 * of the module's on this path: nothing of the module is emulated but the
 * meta area (Documentation/bench.rst).
 *
 * Per thread count, "ns per event" is the loop's wall time times the CPUs
 * the threads can use (at most the thread count) over the events written:
 * the CPU time an event takes with every usable CPU busy.  Threads that
 * never wait for each other keep the 1-thread figure; threads serialised
 * on one lock multiply it.  "scaling" is the throughput against one
 * thread's (ideal: min(threads, CPUs)).  "cpu" is the threads' own CPU
 * time per event (CLOCK_THREAD_CPUTIME_ID): the cost without the time
 * other processes took the CPUs, nor the time a thread slept on a lock.  Rounds interleave every loop and
 * thread count; medians of the rounds and of the per-round ratios.
 * Prints "BENCH native.<name> <value> <unit>" lines.
 *
 *	bench_native_event [--lttng] [MS_PER_LOOP]
 *
 * Without --lttng, HGCLOCK_BENCH_LTTNG_WHY is the reason LTTng is skipped.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <hgclock/hgclock.h>

#include "libhgclock.h"
#include "../../selftests/unit/fake_clock.h"
#include "bench_stats.h"

#ifdef HGCLOCK_BENCH_LTTNG
#define LTTNG_UST_TRACEPOINT_DEFINE
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#include "bench_tp.h"
#endif

#define ROUNDS		11
#define NR_COUNTS	3
#define EVENT_NAME	"request"
#define MARKER_LINE	"I request\n"

static const int thread_counts[NR_COUNTS] = { 1, 2, 8 };

enum bench_loop {
	LOOP_EVENT_INSTANT,	/* hgclock_event(INSTANT) */
	LOOP_EVENT_SLICE,	/* hgclock_event(BEGIN), hgclock_event(END): two events */
	LOOP_TRACE_MARKER,	/* write() to trace_marker */
	LOOP_LTTNG_UST,		/* lttng_ust_tracepoint(), a session recording */
	NR_LOOPS,
};

static const char *const loop_names[NR_LOOPS] = {
	"event_instant", "event_slice", "trace_marker", "lttng_ust",
};

/* Events one iteration of a loop writes. */
static const int loop_events[NR_LOOPS] = { 1, 2, 1, 1 };

struct bench {
	struct hgclock_clock *clk;
	char events_path[128];
	char marker_path[160];
	long iters[NR_LOOPS];		/* per thread */
};

struct worker {
	pthread_t thread;
	const struct bench *b;
	struct hgclock_events *evs;
	pthread_barrier_t *start;
	int loop;
	int marker_fd;
	int failed;
	uint64_t start_ns, end_ns;
	uint64_t cpu_ns;	/* the thread's CPU time in its loop */
};

static void *worker_run(void *arg)
{
	struct worker *w = arg;
	long i, iters = w->b->iters[w->loop];

	pthread_barrier_wait(w->start);
	w->cpu_ns = fake_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	w->start_ns = fake_clock_ns(CLOCK_MONOTONIC);
	switch (w->loop) {
	case LOOP_EVENT_INSTANT:
		for (i = 0; i < iters; i++)
			if (hgclock_event(w->evs, HGCLOCK_EVENT_INSTANT, EVENT_NAME, NULL))
				w->failed = errno;
		break;
	case LOOP_EVENT_SLICE:
		for (i = 0; i < iters; i++) {
			if (hgclock_event(w->evs, HGCLOCK_EVENT_BEGIN, EVENT_NAME, NULL))
				w->failed = errno;
			if (hgclock_event(w->evs, HGCLOCK_EVENT_END, EVENT_NAME, NULL))
				w->failed = errno;
		}
		break;
	case LOOP_TRACE_MARKER:
		for (i = 0; i < iters; i++)
			if (write(w->marker_fd, MARKER_LINE, sizeof(MARKER_LINE) - 1) < 0)
				w->failed = errno;
		break;
	case LOOP_LTTNG_UST:
#ifdef HGCLOCK_BENCH_LTTNG
		for (i = 0; i < iters; i++)
			lttng_ust_tracepoint(hgclock_bench, event, HGCLOCK_EVENT_INSTANT, EVENT_NAME);
#endif
		break;
	}
	w->end_ns = fake_clock_ns(CLOCK_MONOTONIC);
	w->cpu_ns = fake_clock_ns(CLOCK_THREAD_CPUTIME_ID) - w->cpu_ns;
	return NULL;
}

/*
 * One timed loop: @nr_threads threads, started together, each writing
 * b->iters[@loop] iterations.  The wall time in ns from the first thread's
 * start to the last one's end (each thread times itself: the main thread
 * may run late on a busy machine), or -1 (errno set); the threads' CPU
 * time added up into *@cpu_ns.
 */
static double run_loop(const struct bench *b, int loop, int nr_threads, double *cpu_ns)
{
	struct worker w[8];
	struct hgclock_events *evs = NULL;
	pthread_barrier_t start;
	uint64_t t0, t1;
	int i, failed = 0;

	if (loop == LOOP_EVENT_INSTANT || loop == LOOP_EVENT_SLICE) {
		evs = hgclock_events_open(b->clk, b->events_path, HGCLOCK_EVENTS_OVERWRITE);
		if (!evs)
			return -1;
	}
	pthread_barrier_init(&start, NULL, (unsigned int)nr_threads + 1);
	for (i = 0; i < nr_threads; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].b = b;
		w[i].evs = evs;
		w[i].start = &start;
		w[i].loop = loop;
		w[i].marker_fd = -1;
		/* An fd per thread: a shared one would serialise on its f_pos lock. */
		if (loop == LOOP_TRACE_MARKER) {
			w[i].marker_fd = open(b->marker_path, O_WRONLY | O_CLOEXEC);
			if (w[i].marker_fd < 0)
				failed = errno;
		}
		errno = pthread_create(&w[i].thread, NULL, worker_run, &w[i]);
		if (errno) {
			perror("bench_native_event: pthread_create");
			exit(1);
		}
	}
	pthread_barrier_wait(&start);
	for (i = 0; i < nr_threads; i++)
		pthread_join(w[i].thread, NULL);
	pthread_barrier_destroy(&start);
	t0 = UINT64_MAX;
	t1 = 0;
	*cpu_ns = 0;
	for (i = 0; i < nr_threads; i++) {
		if (w[i].start_ns < t0)
			t0 = w[i].start_ns;
		if (w[i].end_ns > t1)
			t1 = w[i].end_ns;
		*cpu_ns += (double)w[i].cpu_ns;
		if (w[i].failed)
			failed = w[i].failed;
		if (w[i].marker_fd >= 0)
			close(w[i].marker_fd);
	}
	if (evs && hgclock_events_close(evs) && !failed)
		failed = errno;
	if (failed) {
		errno = failed;
		return -1;
	}
	return (double)(t1 - t0);
}

/* /proc/loadavg's three averages: other work shares the CPUs the threads use. */
static void load_average(char *buf, size_t len)
{
	FILE *f = fopen("/proc/loadavg", "r");
	double a[3];

	snprintf(buf, len, "unknown");
	if (f && fscanf(f, "%lf %lf %lf", &a[0], &a[1], &a[2]) == 3)
		snprintf(buf, len, "%.2f %.2f %.2f", a[0], a[1], a[2]);
	if (f)
		fclose(f);
}

/*
 * A tracefs instance of our own, so that the main buffer is untouched:
 * its trace_marker into @b, its directory into @dir.  0, or -errno with
 * the reason in @why.
 */
static int marker_setup(struct bench *b, char *dir, size_t dir_len, char *why, size_t why_len)
{
	static const char *const roots[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };
	unsigned int r;
	int fd;

	snprintf(why, why_len, "no tracefs (/sys/kernel/tracing not mounted?)");
	for (r = 0; r < sizeof(roots) / sizeof(roots[0]); r++) {
		char path[64];

		snprintf(path, sizeof(path), "%s/instances", roots[r]);
		if (access(path, F_OK)) {
			if (errno != ENOENT)
				snprintf(why, why_len, "%s: %s", path, strerror(errno));
			continue;
		}
		snprintf(dir, dir_len, "%s/hgclock-bench-%d", path, (int)getpid());
		if (mkdir(dir, 0755)) {
			snprintf(why, why_len, "mkdir %s: %s", dir, strerror(errno));
			dir[0] = '\0';
			return -EACCES;
		}
		snprintf(b->marker_path, sizeof(b->marker_path), "%s/trace_marker", dir);
		fd = open(b->marker_path, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, MARKER_LINE, sizeof(MARKER_LINE) - 1) < 0) {
			snprintf(why, why_len, "%s: %s", b->marker_path, strerror(errno));
			if (fd >= 0)
				close(fd);
			return -EACCES;
		}
		close(fd);
		return 0;
	}
	dir[0] = '\0';
	return -ENOENT;
}

/* The instance is removed when the bench is interrupted too. */
static char marker_dir[128];

static void on_signal(int sig)
{
	if (marker_dir[0])
		rmdir(marker_dir);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Median of @loop's figure over the rounds, for thread count index @c. */
static double med(double v[][NR_COUNTS][ROUNDS], int loop, int c)
{
	double tmp[ROUNDS];

	memcpy(tmp, v[loop][c], sizeof(tmp));
	return median(tmp, ROUNDS);
}

static double ratio_median(double v[][NR_COUNTS][ROUNDS], int num, int den, int c)
{
	double tmp[ROUNDS];
	int r;

	for (r = 0; r < ROUNDS; r++)
		tmp[r] = v[num][c][r] / v[den][c][r];
	return median(tmp, ROUNDS);
}

/* Throughput at thread count index @c against one thread's (ideal: @usable). */
static double scaling_median(double v[][NR_COUNTS][ROUNDS], int loop, int c, int usable)
{
	double tmp[ROUNDS];
	int r;

	for (r = 0; r < ROUNDS; r++)
		tmp[r] = usable * v[loop][0][r] / v[loop][c][r];
	return median(tmp, ROUNDS);
}

int main(int argc, char **argv)
{
	/* ns per event, by loop, thread count and round */
	static double ns[NR_LOOPS][NR_COUNTS][ROUNDS];
	/* the threads' CPU time per event, likewise */
	static double cpu_ns_ev[NR_LOOPS][NR_COUNTS][ROUNDS];
	double written[NR_LOOPS] = { 0 };	/* events in the measured rounds */
	int lttng = argc > 1 && !strcmp(argv[1], "--lttng");
	long target_ms = argc > 1 + lttng ? atol(argv[1 + lttng]) : 10;
	char model[256], why[256], load[64], tmpdir[] = "/tmp/hgclock-bench-XXXXXX";
	int runs[NR_LOOPS] = { 0 };
	struct hgclock_conversion conv;
	struct bench b = { 0 };
	int loop, c, r, ret, nr_cpus;
	struct fake_clock fc;
	unsigned int cpu;
	uint32_t tsc_khz;

	setvbuf(stdout, NULL, _IOLBF, 0);
	nr_cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
	ret = fake_clock_create(&fc, (unsigned int)sysconf(_SC_NPROCESSORS_CONF));
	if (ret) {
		fprintf(stderr, "bench_native_event: meta area: %s\n", strerror(-ret));
		return 1;
	}
	fake_clock_native(&conv, 100, &tsc_khz);
	fc.meta->tsc_khz = tsc_khz;
	for (cpu = 0; cpu < fc.meta->nr_cpus; cpu++)
		fake_clock_set(&fc, cpu, &conv);
	b.clk = hgclock_clock_open(fc.path, HGCLOCK_OPEN_NO_SYSCALL);
	if (!b.clk) {
		fprintf(stderr, "bench_native_event: hgclock_clock_open(%s): %s\n", fc.path,
			hgclock_clock_strerror(errno));
		return 1;
	}
	if (!mkdtemp(tmpdir)) {
		perror("bench_native_event: mkdtemp");
		return 1;
	}
	snprintf(b.events_path, sizeof(b.events_path), "%s/bench.hgev", tmpdir);

	cpu_model(model, sizeof(model));
	load_average(load, sizeof(load));
	printf("# native events: CPU \"%s\", %d CPUs online, load average %s, clock method %s\n",
	       model, nr_cpus, load, hgclock_uclock_method_name(hgclock_uclock_method()));
	runs[LOOP_EVENT_INSTANT] = runs[LOOP_EVENT_SLICE] =
		hgclock_uclock_method() != HGCLOCK_UCLOCK_NONE;
	if (!runs[LOOP_EVENT_INSTANT])
		printf("# native events: hgclock_event: no zero-syscall clock here, not measured\n");
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (marker_setup(&b, marker_dir, sizeof(marker_dir), why, sizeof(why)))
		printf("# native events: trace_marker skipped: %s\n", why);
	else
		runs[LOOP_TRACE_MARKER] = 1;
#ifdef HGCLOCK_BENCH_LTTNG
	if (!lttng)
		printf("# native events: lttng_ust skipped: %s\n",
		       getenv("HGCLOCK_BENCH_LTTNG_WHY") ? getenv("HGCLOCK_BENCH_LTTNG_WHY") :
		       "no session recording it (tools/bench/native_event.sh makes one)");
	else if (!lttng_ust_tracepoint_enabled(hgclock_bench, event))
		printf("# native events: lttng_ust skipped: hgclock_bench:event not enabled by any session\n");
	else
		runs[LOOP_LTTNG_UST] = 1;
#else
	printf("# native events: lttng_ust skipped: built without liblttng-ust-dev\n");
#endif

	/*
	 * Warm-up rounds on one thread size each loop to about target_ms:
	 * the fastest of three, the others having been interrupted.
	 */
	for (loop = 0; loop < NR_LOOPS; loop++) {
		double wall, best = 0, cpu_ns;

		if (!runs[loop])
			continue;
		b.iters[loop] = 10000;
		for (r = 0; r < 3; r++) {
			wall = run_loop(&b, loop, 1, &cpu_ns);
			if (wall < 0)
				goto fail;
			if (!r || wall < best)
				best = wall;
		}
		b.iters[loop] = (long)((double)target_ms * 1e6 / (best / 10000.0));
		if (b.iters[loop] < 1000)
			b.iters[loop] = 1000;
		printf("# native events: %s: %ld iterations per thread and loop\n",
		       loop_names[loop], b.iters[loop]);
	}
	for (r = 0; r < ROUNDS; r++)
		for (c = 0; c < NR_COUNTS; c++)
			for (loop = 0; loop < NR_LOOPS; loop++) {
				int t = thread_counts[c], usable = t < nr_cpus ? t : nr_cpus;
				double wall, cpu_ns, events;

				if (!runs[loop])
					continue;
				wall = run_loop(&b, loop, t, &cpu_ns);
				if (wall < 0)
					goto fail;
				events = (double)t * b.iters[loop] * loop_events[loop];
				cpu_ns_ev[loop][c][r] = cpu_ns / events;
				written[loop] += events;
				ns[loop][c][r] = wall * usable / events;
			}

	for (c = 0; c < NR_COUNTS; c++) {
		int t = thread_counts[c];

		for (loop = 0; loop < NR_LOOPS; loop++) {
			if (!runs[loop])
				continue;
			printf("BENCH native.%s_%dt %.1f ns\n", loop_names[loop], t, med(ns, loop, c));
			printf("BENCH native.%s_cpu_%dt %.1f ns\n", loop_names[loop], t,
			       med(cpu_ns_ev, loop, c));
			if (c)
				printf("BENCH native.%s_scaling_%dt %.2f ratio\n", loop_names[loop], t,
				       scaling_median(ns, loop, c, t < nr_cpus ? t : nr_cpus));
		}
		if (runs[LOOP_LTTNG_UST] && runs[LOOP_EVENT_INSTANT]) {
			printf("BENCH native.event_instant_vs_lttng_ust_%dt %.3f ratio\n", t,
			       ratio_median(ns, LOOP_EVENT_INSTANT, LOOP_LTTNG_UST, c));
			printf("BENCH native.event_slice_vs_lttng_ust_%dt %.3f ratio\n", t,
			       ratio_median(ns, LOOP_EVENT_SLICE, LOOP_LTTNG_UST, c));
			printf("BENCH native.event_instant_vs_lttng_ust_cpu_%dt %.3f ratio\n", t,
			       ratio_median(cpu_ns_ev, LOOP_EVENT_INSTANT, LOOP_LTTNG_UST, c));
		}
		if (runs[LOOP_TRACE_MARKER] && runs[LOOP_EVENT_INSTANT]) {
			printf("BENCH native.trace_marker_vs_event_instant_%dt %.2f ratio\n", t,
			       ratio_median(ns, LOOP_TRACE_MARKER, LOOP_EVENT_INSTANT, c));
			printf("BENCH native.trace_marker_vs_event_slice_%dt %.2f ratio\n", t,
			       ratio_median(ns, LOOP_TRACE_MARKER, LOOP_EVENT_SLICE, c));
		}
	}
	if (runs[LOOP_LTTNG_UST])
		printf("BENCH native.lttng_ust_written %.0f events\n", written[LOOP_LTTNG_UST]);
	ret = 0;
	goto out;
fail:
	fprintf(stderr, "bench_native_event: %s: %s\n", loop_names[loop], strerror(errno));
	ret = 1;
out:
	if (marker_dir[0] && rmdir(marker_dir))
		fprintf(stderr, "bench_native_event: rmdir %s: %s\n", marker_dir, strerror(errno));
	unlink(b.events_path);
	rmdir(tmpdir);
	hgclock_clock_close(b.clk);
	fake_clock_destroy(&fc);
	return ret;
}
