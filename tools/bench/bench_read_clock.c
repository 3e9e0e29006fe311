// SPDX-License-Identifier: GPL-2.0
/*
 * Benchmark: cost of HGCLOCK_IOC_READ_CLOCK against a null ioctl on the
 * same device (HGCLOCK_IOC_NOP) and against clock_gettime(CLOCK_MONOTONIC)
 * (vDSO); and of the zero-syscall clock (libhgclock's hgclock_now_user())
 * against the same two; and of the applications' read
 * (hgclock_clock_read() on the public clock, <hgclock/hgclock.h>, which
 * also reads CLOCK_MONOTONIC for its mono_ns) and of its fast path,
 * hgclock_clock_perf_ns(), against clock_gettime(); and of recording an
 * application event (hgclock_event(): the stamp, the lock, the append to
 * the buffer and its share of the file's writes) against clock_gettime()
 * and against what an application writes to ftrace instead, a line to
 * trace_marker (a system call and a copy into the ring buffer).
 * Rounds interleave them so that drift in the machine's speed
 * hits all alike; the median round is reported.  Under TCG absolute times
 * mean little: the ratios are the result.
 *
 * Prints "BENCH <name> <value> <unit>" lines.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "libhgclock.h"
#include <hgclock/hgclock.h>

#include "bench_stats.h"

#define ROUNDS 15

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int fail(const char *what)
{
	fprintf(stderr, "bench_read_clock: %s failed: %s\n", what, strerror(errno));
	return 1;
}

int main(int argc, char **argv)
{
	double nop[ROUNDS], rd[ROUNDS], cg[ROUNDS], uc[ROUNDS], lc[ROUNDS], lp[ROUNDS];
	double ev[ROUNDS], tm[ROUNDS];
	int marker_fd = open("/sys/kernel/tracing/trace_marker", O_WRONLY | O_CLOEXEC);
	struct hgclock_events *evs = NULL;
	char ev_path[] = "/tmp/hgclock-bench-events-XXXXXX";
	uint64_t perf_ns;
	struct hgclock_clock *clk;
	struct hgclock_reading reading;
	int have_lib;
	struct hgclock_map map;
	struct hgclock_now unow;
	int have_uclock;
	struct hgclock_read_clock req;
	long iters = argc > 1 ? atol(argv[1]) : 20000;
	struct timespec ts;
	cpu_set_t set;
	uint64_t t0;
	int fd, r;
	long i;

	CPU_ZERO(&set);
	CPU_SET(0, &set);
	sched_setaffinity(0, sizeof(set), &set);

	fd = hgclock_open(NULL);
	if (fd < 0) {
		fprintf(stderr, "bench_read_clock: %s\n", hgclock_open_hint(fd));
		return HGCLOCK_EXIT_NO_DEVICE;
	}
	memset(&req, 0, sizeof(req));
	req.size = sizeof(req);
	have_uclock = !hgclock_map_open(fd, 0, &map) && !hgclock_now_user(&map, &unow);
	if (!have_uclock)
		fprintf(stderr, "bench_read_clock: no exact conversion here: "
			"zero-syscall clock not measured\n");

	/* The applications' way: the public clock, no fallback. */
	clk = hgclock_clock_open(NULL, HGCLOCK_OPEN_NO_SYSCALL);
	have_lib = clk && !hgclock_clock_read(clk, &reading);
	if (!have_lib)
		fprintf(stderr, "bench_read_clock: hgclock_clock_read: %s: not measured\n",
			hgclock_clock_strerror(errno));

	/* The events go to a scratch file, replaced (OVERWRITE), then removed. */
	if (have_lib) {
		int tfd = mkstemp(ev_path);

		if (tfd >= 0) {
			close(tfd);
			evs = hgclock_events_open(clk, ev_path, HGCLOCK_EVENTS_OVERWRITE);
		}
		if (!evs)
			fprintf(stderr, "bench_read_clock: hgclock_events_open: %s: not measured\n",
				strerror(errno));
	}

	for (r = 0; r < ROUNDS; r++) {
		t0 = now_ns();
		for (i = 0; i < iters; i++)
			if (ioctl(fd, HGCLOCK_IOC_NOP))
				return fail("NOP ioctl");
		nop[r] = (double)(now_ns() - t0) / (double)iters;

		t0 = now_ns();
		for (i = 0; i < iters; i++)
			if (ioctl(fd, HGCLOCK_IOC_READ_CLOCK, &req))
				return fail("READ_CLOCK ioctl");
		rd[r] = (double)(now_ns() - t0) / (double)iters;

		t0 = now_ns();
		for (i = 0; i < iters; i++)
			clock_gettime(CLOCK_MONOTONIC, &ts);
		cg[r] = (double)(now_ns() - t0) / (double)iters;

		uc[r] = 0;
		if (have_uclock) {
			t0 = now_ns();
			for (i = 0; i < iters; i++)
				if (hgclock_now_user(&map, &unow))
					return fail("zero-syscall read");
			uc[r] = (double)(now_ns() - t0) / (double)iters;
		}

		lc[r] = 0;
		if (have_lib) {
			t0 = now_ns();
			for (i = 0; i < iters; i++)
				if (hgclock_clock_read(clk, &reading))
					return fail("hgclock_clock_read");
			lc[r] = (double)(now_ns() - t0) / (double)iters;
			t0 = now_ns();
			for (i = 0; i < iters; i++)
				if (hgclock_clock_perf_ns(clk, &perf_ns))
					return fail("hgclock_clock_perf_ns");
			lp[r] = (double)(now_ns() - t0) / (double)iters;
		}

		tm[r] = 0;
		if (marker_fd >= 0) {
			t0 = now_ns();
			for (i = 0; i < iters; i++)
				if (write(marker_fd, "bench\n", 6) != 6)
					return fail("trace_marker write");
			tm[r] = (double)(now_ns() - t0) / (double)iters;
		}

		ev[r] = 0;
		if (evs) {
			t0 = now_ns();
			for (i = 0; i < iters; i++)
				if (hgclock_event(evs, HGCLOCK_EVENT_INSTANT, "bench", NULL))
					return fail("hgclock_event");
			ev[r] = (double)(now_ns() - t0) / (double)iters;
		}
	}
	/* Ratios per round first, so each compares costs measured together. */
	{
		double ratio_nop[ROUNDS], ratio_cg[ROUNDS];
		double uc_cg[ROUNDS], uc_rd[ROUNDS], lc_cg[ROUNDS], lp_cg[ROUNDS], ev_cg[ROUNDS];
		double tm_ev[ROUNDS];

		for (r = 0; r < ROUNDS; r++) {
			ev_cg[r] = ev[r] / cg[r];
			tm_ev[r] = ev[r] > 0 ? tm[r] / ev[r] : 0;
			lc_cg[r] = lc[r] / cg[r];
			lp_cg[r] = lp[r] / cg[r];
			ratio_nop[r] = rd[r] / nop[r];
			ratio_cg[r] = rd[r] / cg[r];
			uc_cg[r] = uc[r] / cg[r];
			uc_rd[r] = uc[r] / rd[r];
		}
		if (have_uclock) {
			printf("BENCH user_clock_read %.1f ns\n", median(uc, ROUNDS));
			printf("BENCH user_clock_vs_clock_gettime %.3f ratio\n",
			       median(uc_cg, ROUNDS));
			printf("BENCH user_clock_vs_read_clock_ioctl %.3f ratio\n",
			       median(uc_rd, ROUNDS));
		}
		if (have_lib) {
			printf("BENCH lib_clock_read %.1f ns\n", median(lc, ROUNDS));
			printf("BENCH lib_clock_read_vs_clock_gettime %.3f ratio\n",
			       median(lc_cg, ROUNDS));
			printf("BENCH lib_perf_ns %.1f ns\n", median(lp, ROUNDS));
			printf("BENCH lib_perf_ns_vs_clock_gettime %.3f ratio\n",
			       median(lp_cg, ROUNDS));
		}
		if (evs) {
			printf("BENCH lib_event %.1f ns\n", median(ev, ROUNDS));
			printf("BENCH lib_event_vs_clock_gettime %.3f ratio\n",
			       median(ev_cg, ROUNDS));
		}
		if (marker_fd >= 0) {
			printf("BENCH trace_marker_write %.1f ns\n", median(tm, ROUNDS));
			/* How many times cheaper an event is than a marker line (goal >= 20). */
			if (evs)
				printf("BENCH trace_marker_vs_lib_event %.3f ratio\n",
				       median(tm_ev, ROUNDS));
		} else {
			fprintf(stderr, "bench_read_clock: no /sys/kernel/tracing/trace_marker: "
				"the marker write not measured\n");
		}
		printf("BENCH read_clock_ioctl %.1f ns\n", median(rd, ROUNDS));
		printf("BENCH nop_ioctl %.1f ns\n", median(nop, ROUNDS));
		printf("BENCH clock_gettime_mono %.1f ns\n", median(cg, ROUNDS));
		printf("BENCH read_clock_vs_nop_ioctl %.3f ratio\n", median(ratio_nop, ROUNDS));
		printf("BENCH read_clock_vs_clock_gettime %.3f ratio\n", median(ratio_cg, ROUNDS));
	}
	if (marker_fd >= 0)
		close(marker_fd);
	if (evs && hgclock_events_close(evs))
		return fail("hgclock_events_close");
	if (evs)
		unlink(ev_path);
	hgclock_clock_close(clk);
	close(fd);
	return 0;
}
