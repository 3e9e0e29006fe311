// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock kselftests: the zero-syscall clock by each method the CPU allows
 * (user/lib/uclock.c: rdtscp, rseq, rdpid), against the kernel's own
 * reading.  make check boots one VM with -cpu max,-rdtscp,-rdpid, where
 * rseq is the method; the others keep RDTSCP.
 *
 * - the method chosen is the one /proc/cpuinfo and glibc's rseq allow;
 * - pinned to each CPU, each available method's reading lies between two
 *   READ_CLOCKs on that CPU (TSC, sched_clock, local_clock), and says that
 *   CPU: exact, as the RDTSCP path has always been checked (ring_test);
 * - the same through the public clock and the application API
 *   (hgclock_clock_open(NULL, HGCLOCK_OPEN_NO_SYSCALL)).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if __has_include(<sys/rseq.h>)
#include <sys/rseq.h>
#define HAVE_SYS_RSEQ 1
#endif

#include <hgclock/hgclock.h>

#include "kselftest_harness.h"
#include "../user/lib/libhgclock.h"
#include "test_util.h"

#define ITERATIONS 1000

static const int all_methods[] = {
	HGCLOCK_UCLOCK_RDTSCP, HGCLOCK_UCLOCK_RSEQ, HGCLOCK_UCLOCK_RDPID,
};

FIXTURE(uclock) {
	int fd;
	struct hgclock_map map;
};

FIXTURE_SETUP(uclock)
{
	int clock_fd, ret;

	memset(&self->map, 0, sizeof(self->map));
	self->fd = open(HGCLOCK_DEV_PATH, O_RDONLY | O_CLOEXEC);
	/* This harness runs the test after a setup's SKIP: each test checks fd. */
	if (self->fd < 0 && errno == ENOENT)
		SKIP(return, "%s: module not loaded", HGCLOCK_DEV_PATH);
	ASSERT_LE(0, self->fd) TH_LOG("%s: %s", HGCLOCK_DEV_PATH, strerror(errno));
	/* The conversions as applications map them: the public clock. */
	clock_fd = open("/dev/" HGCLOCK_CLOCK_DEVICE_NAME, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, clock_fd) TH_LOG("/dev/%s: %s", HGCLOCK_CLOCK_DEVICE_NAME, strerror(errno));
	ret = hgclock_map_clock(clock_fd, &self->map);
	close(clock_fd);
	ASSERT_EQ(0, ret) TH_LOG("map: %s", strerror(-ret));
}

FIXTURE_TEARDOWN(uclock)
{
	if (self->fd >= 0) {
		hgclock_map_close(&self->map);
		close(self->fd);
	}
}

TEST_F(uclock, method_matches_cpu)
{
	bool rdtscp = cpuinfo_has("rdtscp"), rdpid = cpuinfo_has("rdpid"), rseq = false;
	int want;
	if (self->fd < 0)
		SKIP(return, "module not loaded");

#ifdef HAVE_SYS_RSEQ
	rseq = __rseq_size >= 16;
#endif
	want = rdtscp ? HGCLOCK_UCLOCK_RDTSCP : rseq ? HGCLOCK_UCLOCK_RSEQ :
	       rdpid ? HGCLOCK_UCLOCK_RDPID : HGCLOCK_UCLOCK_NONE;
	/* The VM log says which path this run exercised. */
	fprintf(stderr, "# uclock: cpu rdtscp %d rdpid %d, rseq registered %d: method %s\n",
		rdtscp, rdpid, rseq, hgclock_uclock_method_name(hgclock_uclock_method()));
	EXPECT_EQ(want, hgclock_uclock_method());
	/* glibc 2.36 registers rseq: there is always a method here. */
	EXPECT_NE(HGCLOCK_UCLOCK_NONE, hgclock_uclock_method());
}

/*
 * @method's reading between two READ_CLOCKs on each online CPU, pinned.
 * 1 when checked, 0 when no CPU had an exact conversion.
 */
static int bracket_all_cpus(struct __test_metadata *_metadata, int fd,
			    const struct hgclock_map *map, int method)
{
	struct hgclock_clock_sample before, after;
	struct hgclock_now now;
	int cpu, i, checked = 0;

	for (cpu = 0; cpu < (int)map->meta->nr_cpus; cpu++) {
		if (pin_self(cpu))
			continue;	/* offline */
		for (i = 0; i < ITERATIONS; i++) {
			int ret;

			ASSERT_EQ(0, hgclock_read_clock(fd, -1, &before));
			memset(&now, 0xcc, sizeof(now));
			ret = hgclock_now_user_method(map, &now, method);
			ASSERT_EQ(0, hgclock_read_clock(fd, -1, &after));
			if (ret == -ENODATA &&
			    !(hgclock_map_slot(map, cpu)->conv.flags & HGCLOCK_CONV_EXACT))
				break;	/* this CPU has no exact conversion */
			ASSERT_EQ(0, ret) TH_LOG("%s on CPU %d: %s",
						 hgclock_uclock_method_name(method), cpu,
						 strerror(-ret));
			ASSERT_EQ(cpu, (int)now.cpu);
			ASSERT_EQ(cpu, (int)before.cpu);
			ASSERT_EQ(cpu, (int)after.cpu);
			ASSERT_EQ(method, now.method);
			ASSERT_LE(before.tsc_after, now.tsc);
			ASSERT_GE(after.tsc_before, now.tsc);
			ASSERT_LE(before.sched_clock_ns, now.sched_clock_ns);
			ASSERT_GE(after.sched_clock_ns, now.sched_clock_ns);
			if (now.has_local) {
				ASSERT_LE(before.local_clock_ns, now.local_clock_ns);
				ASSERT_GE(after.local_clock_ns, now.local_clock_ns);
			}
		}
		if (i == ITERATIONS)
			checked = 1;
	}
	return checked;
}

TEST_F(uclock, each_method_between_read_clocks)
{
	unsigned int m;
	int checked = 0;
	if (self->fd < 0)
		SKIP(return, "module not loaded");

	for (m = 0; m < sizeof(all_methods) / sizeof(all_methods[0]); m++) {
		int method = all_methods[m];

		if (!hgclock_uclock_available(method)) {
			fprintf(stderr, "# uclock: %s: not on this CPU\n",
				hgclock_uclock_method_name(method));
			continue;
		}
		if (bracket_all_cpus(_metadata, self->fd, &self->map, method)) {
			fprintf(stderr, "# uclock: %s: exact on every CPU with an exact conversion\n",
				hgclock_uclock_method_name(method));
			checked = 1;
		}
	}
	if (!checked)
		SKIP(return, "no CPU with an exact conversion (or no method): nothing to check");
}

/* The public clock through the application API, no system call allowed. */
TEST_F(uclock, public_clock_between_read_clocks)
{
	struct hgclock_clock_sample before, after;
	struct hgclock_clock *clk;
	struct hgclock_reading r;
	int cpu, i, checked = 0;
	if (self->fd < 0)
		SKIP(return, "module not loaded");

	clk = hgclock_clock_open(NULL, HGCLOCK_OPEN_NO_SYSCALL);
	ASSERT_NE(NULL, clk) TH_LOG("hgclock_clock_open: %s", strerror(errno));
	for (cpu = 0; cpu < (int)self->map.meta->nr_cpus; cpu++) {
		if (pin_self(cpu))
			continue;
		if (!(hgclock_map_slot(&self->map, cpu)->conv.flags & HGCLOCK_CONV_EXACT))
			continue;
		for (i = 0; i < ITERATIONS; i++) {
			ASSERT_EQ(0, hgclock_read_clock(self->fd, -1, &before));
			memset(&r, 0xcc, sizeof(r));
			ASSERT_EQ(0, hgclock_clock_read(clk, &r))
				TH_LOG("CPU %d: %s", cpu, hgclock_clock_strerror(errno));
			ASSERT_EQ(0, hgclock_read_clock(self->fd, -1, &after));
			ASSERT_EQ(cpu, (int)r.cpu);
			ASSERT_TRUE(r.flags & HGCLOCK_READING_EXACT);
			ASSERT_LE(before.tsc_after, r.tsc);
			ASSERT_GE(after.tsc_before, r.tsc);
			ASSERT_LE(before.sched_clock_ns, r.local_ns);
			ASSERT_GE(after.sched_clock_ns, r.local_ns);
			if (r.flags & HGCLOCK_READING_PERF) {
				ASSERT_LE(before.local_clock_ns, r.perf_ns);
				ASSERT_GE(after.local_clock_ns, r.perf_ns);
			}
		}
		checked = 1;
	}
	hgclock_clock_close(clk);
	if (!checked)
		SKIP(return, "no CPU with an exact conversion: nothing to check");
}

TEST_HARNESS_MAIN
