// SPDX-License-Identifier: GPL-2.0
/*
 * Native benchmark, no VM and no module: the cost of libhgclock's
 * zero-syscall clock read on this machine's own CPU, by each method the CPU
 * allows (user/lib/uclock.c: rdtscp, rseq, rdpid) and through the
 * application API (hgclock_clock_perf_ns(), hgclock_clock_read()), against
 * clock_gettime(CLOCK_MONOTONIC) through the vDSO, the anchor.  Also the
 * floor both stand on, one LFENCE; RDTSC.
 *
 * The meta area is laid out exactly as the module publishes the public
 * clock and holds a conversion for this machine's TSC
 * (selftests/unit/fake_clock.h): the library reads and computes exactly
 * what it would with the module loaded, so the cost is the real one; the
 * values are not the kernel's (Documentation/bench.rst).
 *
 * Rounds interleave the loops so that drift in the machine's speed hits
 * all alike; the median round, and the median of the per-round ratios.
 * Prints "BENCH native.<name> <value> <unit>" lines; pinned to CPU 0.
 *
 *	bench_native_clock [ITERATIONS]
 */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hgclock/hgclock.h>

#include "libhgclock.h"
#include "../../selftests/unit/fake_clock.h"
#include "bench_stats.h"

#define ROUNDS 21

enum bench_loop {
	LOOP_CLOCK_GETTIME,	/* the anchor */
	LOOP_RDTSC,		/* LFENCE; RDTSC alone */
	LOOP_RDTSCP,		/* hgclock_now_user_method(), each method */
	LOOP_RSEQ,
	LOOP_RDPID,
	LOOP_LIB_PERF_NS,	/* hgclock_clock_perf_ns() */
	LOOP_LIB_READ,		/* hgclock_clock_read(): also reads CLOCK_MONOTONIC */
	NR_LOOPS,
};

static const char *const loop_names[NR_LOOPS] = {
	"clock_gettime_mono", "rdtsc_ordered", "clock_read_rdtscp", "clock_read_rseq",
	"clock_read_rdpid", "lib_perf_ns", "lib_clock_read",
};

static void clocksource(char *buf, size_t len)
{
	FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");

	snprintf(buf, len, "unknown");
	if (f && fgets(buf, (int)len, f))
		buf[strcspn(buf, "\n")] = '\0';
	if (f)
		fclose(f);
}

static volatile uint64_t sink;

/* One loop of @iters; ns per iteration.  0 when it cannot run here. */
static double run_loop(int loop, long iters, const struct hgclock_map *map,
		       struct hgclock_clock *clk)
{
	static const int methods[] = {
		[LOOP_RDTSCP] = HGCLOCK_UCLOCK_RDTSCP,
		[LOOP_RSEQ] = HGCLOCK_UCLOCK_RSEQ,
		[LOOP_RDPID] = HGCLOCK_UCLOCK_RDPID,
	};
	struct hgclock_reading reading;
	struct hgclock_now now;
	struct timespec ts;
	uint64_t t0, acc = 0, perf_ns;
	long i;

	t0 = fake_clock_ns(CLOCK_MONOTONIC);
	switch (loop) {
	case LOOP_CLOCK_GETTIME:
		for (i = 0; i < iters; i++) {
			clock_gettime(CLOCK_MONOTONIC, &ts);
			acc += (uint64_t)ts.tv_nsec;
		}
		break;
	case LOOP_RDTSC:
		for (i = 0; i < iters; i++)
			acc += fake_clock_rdtsc();
		break;
	case LOOP_RDTSCP:
	case LOOP_RSEQ:
	case LOOP_RDPID:
		for (i = 0; i < iters; i++) {
			if (hgclock_now_user_method(map, &now, methods[loop]))
				return -1;
			acc += now.sched_clock_ns;
		}
		break;
	case LOOP_LIB_PERF_NS:
		for (i = 0; i < iters; i++) {
			if (hgclock_clock_perf_ns(clk, &perf_ns))
				return -1;
			acc += perf_ns;
		}
		break;
	case LOOP_LIB_READ:
		for (i = 0; i < iters; i++) {
			if (hgclock_clock_read(clk, &reading))
				return -1;
			acc += reading.perf_ns;
		}
		break;
	}
	sink += acc;
	return (double)(fake_clock_ns(CLOCK_MONOTONIC) - t0) / (double)iters;
}

int main(int argc, char **argv)
{
	static double ns[NR_LOOPS][ROUNDS], ratio[NR_LOOPS][ROUNDS];
	long iters = argc > 1 ? atol(argv[1]) : 200000;
	struct hgclock_conversion conv;
	char model[256], source[64];
	struct hgclock_clock *clk;
	int runs[NR_LOOPS] = { 0 };
	struct fake_clock fc;
	unsigned int cpu;
	uint32_t tsc_khz;
	cpu_set_t set;
	int loop, r, ret;

	CPU_ZERO(&set);
	CPU_SET(0, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		fprintf(stderr, "bench_native_clock: not pinned to CPU 0: %s\n", strerror(errno));
	ret = fake_clock_create(&fc, (unsigned int)sysconf(_SC_NPROCESSORS_CONF));
	if (ret) {
		fprintf(stderr, "bench_native_clock: meta area: %s\n", strerror(-ret));
		return 1;
	}
	fake_clock_native(&conv, 100, &tsc_khz);
	fc.meta->tsc_khz = tsc_khz;
	for (cpu = 0; cpu < fc.meta->nr_cpus; cpu++)
		fake_clock_set(&fc, cpu, &conv);
	clk = hgclock_clock_open(fc.path, HGCLOCK_OPEN_NO_SYSCALL);
	if (!clk) {
		fprintf(stderr, "bench_native_clock: hgclock_clock_open(%s): %s\n", fc.path,
			hgclock_clock_strerror(errno));
		return 1;
	}

	cpu_model(model, sizeof(model));
	clocksource(source, sizeof(source));
	printf("# native: CPU \"%s\", rdtscp %s, rdpid %s, rseq %s; method %s; clocksource %s\n",
	       model, hgclock_uclock_available(HGCLOCK_UCLOCK_RDTSCP) ? "yes" : "no",
	       hgclock_uclock_available(HGCLOCK_UCLOCK_RDPID) ? "yes" : "no",
	       hgclock_uclock_available(HGCLOCK_UCLOCK_RSEQ) ? "yes" : "no",
	       hgclock_uclock_method_name(hgclock_uclock_method()), source);
	printf("BENCH native.tsc_mhz %.1f MHz\n", tsc_khz / 1000.0);

	runs[LOOP_CLOCK_GETTIME] = runs[LOOP_RDTSC] = 1;
	runs[LOOP_RDTSCP] = hgclock_uclock_available(HGCLOCK_UCLOCK_RDTSCP);
	runs[LOOP_RSEQ] = hgclock_uclock_available(HGCLOCK_UCLOCK_RSEQ);
	runs[LOOP_RDPID] = hgclock_uclock_available(HGCLOCK_UCLOCK_RDPID);
	runs[LOOP_LIB_PERF_NS] = runs[LOOP_LIB_READ] =
		hgclock_uclock_method() != HGCLOCK_UCLOCK_NONE;
	for (loop = 0; loop < NR_LOOPS; loop++)
		if (!runs[loop])
			printf("# native: %s: not on this CPU, not measured\n", loop_names[loop]);

	/* A warm-up round, then the measured ones. */
	for (r = -1; r < ROUNDS; r++)
		for (loop = 0; loop < NR_LOOPS; loop++) {
			double v;

			if (!runs[loop])
				continue;
			v = run_loop(loop, iters, &fc.map, clk);
			if (v < 0) {
				fprintf(stderr, "bench_native_clock: %s: a read failed\n",
					loop_names[loop]);
				return 1;
			}
			if (r >= 0)
				ns[loop][r] = v;
		}
	for (loop = 0; loop < NR_LOOPS; loop++)
		for (r = 0; r < ROUNDS; r++)
			ratio[loop][r] = ns[loop][r] / ns[LOOP_CLOCK_GETTIME][r];
	for (loop = 0; loop < NR_LOOPS; loop++) {
		if (!runs[loop])
			continue;
		printf("BENCH native.%s %.2f ns\n", loop_names[loop], median(ns[loop], ROUNDS));
		if (loop != LOOP_CLOCK_GETTIME)
			printf("BENCH native.%s_vs_clock_gettime %.3f ratio\n", loop_names[loop],
			       median(ratio[loop], ROUNDS));
	}
	hgclock_clock_close(clk);
	fake_clock_destroy(&fc);
	return 0;
}
