// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of user/lib/uclock.c, the zero-syscall clock, natively and
 * without the module: over a meta area laid out as the module publishes
 * the public clock (fake_clock.h), with a different conversion on each
 * CPU so that a reading converted with another CPU's conversion shows.
 *
 * - the method chosen is the one this CPU and glibc allow (from
 *   /proc/cpuinfo and __rseq_size, not from the library's own CPUID);
 * - every available method, pinned to each CPU, reads that CPU
 *   (sched_getcpu()) and converts the TSC it read with that CPU's
 *   conversion, to the nanosecond the formula of hgclock.h computed here,
 *   the TSC lying between two read around it; the same through the
 *   application API (hgclock_clock_open() on the area's file);
 * - rseq while the thread is moved between CPUs and signalled: every
 *   reading still consistent, retries counted;
 * - a thread without an rseq registration, and a process with glibc's
 *   rseq turned off (GLIBC_TUNABLES=glibc.pthread.rseq=0), get -ENODATA,
 *   counted, and the application's ENODATA;
 * - the errors: a CPU beyond the area (-ERANGE), a conversion that is not
 *   exact (-ENODATA), one being rewritten forever (-EAGAIN), a method the
 *   CPU does not have (-EOPNOTSUPP).
 *
 * The RDTSCP and RDPID paths run where the CPU has them; the machine
 * this project is built on has neither (the reason rseq exists here).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#if __has_include(<sys/rseq.h>)
#include <sys/rseq.h>
#define HAVE_SYS_RSEQ 1
#endif

#include <hgclock/hgclock.h>

#include "kselftest_harness.h"
#include "libhgclock.h"
#include "fake_clock.h"
#include "../test_util.h"

#define CHILD_ENV "HGCLOCK_TEST_UCLOCK_CHILD"

static bool rseq_registered(void)
{
#ifdef HAVE_SYS_RSEQ
	return __rseq_size >= 16;
#else
	return false;
#endif
}

static int nr_possible(void)
{
	return (int)sysconf(_SC_NPROCESSORS_CONF);
}

static int pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

static void unpin(void)
{
	cpu_set_t set;
	int cpu;

	CPU_ZERO(&set);
	for (cpu = 0; cpu < nr_possible(); cpu++)
		CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

/* hgclock.h's formula, written out again here: not the library's code. */
static uint64_t expect_sched_ns(const struct hgclock_conversion *c, uint64_t tsc)
{
	uint64_t delta = tsc - c->tsc_base;

	delta = c->pre_shift >= 0 ? delta << c->pre_shift : delta >> -c->pre_shift;
	return c->offset_ns + (uint64_t)(((unsigned __int128)delta * c->mult) >> c->shift);
}

/*
 * CPU n's conversion: this machine's TSC (cyc2ns-like) with n seconds
 * added, and on odd CPUs a kvm-clock-like one (tsc_base, pre_shift -1,
 * shift 32), so that each CPU's values differ from every other's.
 */
static void per_cpu_conversions(struct fake_clock *fc, struct hgclock_conversion *convs)
{
	struct hgclock_conversion native;
	unsigned int cpu;

	fake_clock_native(&native, 20, &fc->meta->tsc_khz);
	for (cpu = 0; cpu < fc->meta->nr_cpus; cpu++) {
		struct hgclock_conversion *c = &convs[cpu];

		*c = native;
		c->offset_ns += (uint64_t)cpu * 1000000000ull;
		c->local_offset_ns = 1000 + cpu;
		if (cpu & 1) {
			c->tsc_base = fake_clock_rdtsc();
			c->pre_shift = -1;
			c->mult = (uint32_t)((2000000ull << 32) / fc->meta->tsc_khz);
			c->shift = 32;
			c->flags |= HGCLOCK_CONV_PVCLOCK;
		}
		fake_clock_set(fc, cpu, c);
	}
}

static const int all_methods[] = {
	HGCLOCK_UCLOCK_RDTSCP, HGCLOCK_UCLOCK_RSEQ, HGCLOCK_UCLOCK_RDPID,
};

TEST(method_selection)
{
	bool rdtscp = cpuinfo_has("rdtscp"), rdpid = cpuinfo_has("rdpid");
	int want = rdtscp ? HGCLOCK_UCLOCK_RDTSCP : rseq_registered() ? HGCLOCK_UCLOCK_RSEQ :
		   rdpid ? HGCLOCK_UCLOCK_RDPID : HGCLOCK_UCLOCK_NONE;

	TH_LOG("cpu: rdtscp %d rdpid %d; rseq registered %d: method %s", rdtscp, rdpid,
	       rseq_registered(), hgclock_uclock_method_name(hgclock_uclock_method()));
	EXPECT_EQ(want, hgclock_uclock_method());
	EXPECT_EQ(rdtscp, hgclock_uclock_available(HGCLOCK_UCLOCK_RDTSCP));
	EXPECT_EQ(rdpid, hgclock_uclock_available(HGCLOCK_UCLOCK_RDPID));
	EXPECT_EQ(rseq_registered(), hgclock_uclock_available(HGCLOCK_UCLOCK_RSEQ));
	EXPECT_EQ(1, hgclock_uclock_available(HGCLOCK_UCLOCK_NONE));
	EXPECT_EQ(0, hgclock_uclock_available(HGCLOCK_UCLOCK_IOCTL));
	EXPECT_EQ(0, hgclock_uclock_available(-1));
	EXPECT_STREQ("rdtscp", hgclock_uclock_method_name(HGCLOCK_UCLOCK_RDTSCP));
	EXPECT_STREQ("rseq", hgclock_uclock_method_name(HGCLOCK_UCLOCK_RSEQ));
	EXPECT_STREQ("rdpid", hgclock_uclock_method_name(HGCLOCK_UCLOCK_RDPID));
	EXPECT_STREQ("none", hgclock_uclock_method_name(HGCLOCK_UCLOCK_NONE));
	EXPECT_STREQ("ioctl", hgclock_uclock_method_name(HGCLOCK_UCLOCK_IOCTL));
	/* glibc >= 2.35 registers rseq unless told not to: expected here. */
	if (!getenv("GLIBC_TUNABLES"))
		EXPECT_TRUE(rseq_registered());
}

/* Pinned to each CPU, each method: the CPU, the conversion, the bracket. */
TEST(pinned_reads_exact)
{
	struct hgclock_conversion *convs;
	struct fake_clock fc;
	unsigned int m;
	int cpu, i, tested = 0;

	ASSERT_EQ(0, fake_clock_create(&fc, (unsigned int)nr_possible()));
	convs = calloc(fc.meta->nr_cpus, sizeof(*convs));
	ASSERT_NE(NULL, convs);
	per_cpu_conversions(&fc, convs);
	for (m = 0; m < sizeof(all_methods) / sizeof(all_methods[0]); m++) {
		int method = all_methods[m];

		if (!hgclock_uclock_available(method)) {
			TH_LOG("%s: not on this machine", hgclock_uclock_method_name(method));
			continue;
		}
		for (cpu = 0; cpu < nr_possible(); cpu++) {
			if (pin(cpu))
				continue;	/* offline */
			for (i = 0; i < 2000; i++) {
				struct hgclock_now now;
				uint64_t before, after;

				memset(&now, 0xcc, sizeof(now));
				before = fake_clock_rdtsc();
				ASSERT_EQ(0, hgclock_now_user_method(&fc.map, &now, method));
				after = fake_clock_rdtsc();
				ASSERT_EQ(cpu, (int)now.cpu);
				ASSERT_EQ(cpu, sched_getcpu());
				ASSERT_EQ(method, now.method);
				ASSERT_LE(before, now.tsc);
				ASSERT_GE(after, now.tsc);
				ASSERT_EQ(now.tsc, now.tsc_after);
				ASSERT_EQ(convs[cpu].flags, now.conv_flags);
				ASSERT_EQ(expect_sched_ns(&convs[cpu], now.tsc), now.sched_clock_ns);
				ASSERT_EQ(hgclock_conv_apply(&convs[cpu], now.tsc), now.sched_clock_ns);
				ASSERT_EQ(1, now.has_local);
				ASSERT_EQ(now.sched_clock_ns + convs[cpu].local_offset_ns,
					  now.local_clock_ns);
			}
			tested++;
		}
	}
	unpin();
	/* The automatic choice is one of those, or none with the reason. */
	if (hgclock_uclock_method() != HGCLOCK_UCLOCK_NONE) {
		struct hgclock_now now;

		ASSERT_EQ(0, hgclock_now_user(&fc.map, &now));
		EXPECT_EQ(hgclock_uclock_method(), now.method);
	}
	free(convs);
	fake_clock_destroy(&fc);
	if (!tested)
		SKIP(return, "no method on this machine (no rdtscp, rdpid, rseq)");
}

/* The application API on the same area: hgclock_clock_open() maps it. */
TEST(library_api_exact)
{
	struct hgclock_conversion *convs;
	struct hgclock_clock *clk;
	struct fake_clock fc;
	int cpu, i;

	if (hgclock_uclock_method() == HGCLOCK_UCLOCK_NONE)
		SKIP(return, "no method on this machine (no rdtscp, rdpid, rseq)");
	ASSERT_EQ(0, fake_clock_create(&fc, (unsigned int)nr_possible()));
	convs = calloc(fc.meta->nr_cpus, sizeof(*convs));
	ASSERT_NE(NULL, convs);
	per_cpu_conversions(&fc, convs);
	clk = hgclock_clock_open(fc.path, HGCLOCK_OPEN_NO_SYSCALL);
	ASSERT_NE(NULL, clk) TH_LOG("hgclock_clock_open(%s): %s", fc.path, strerror(errno));
	for (cpu = 0; cpu < nr_possible(); cpu++) {
		if (pin(cpu))
			continue;
		for (i = 0; i < 1000; i++) {
			struct hgclock_reading r;
			uint64_t perf_ns, before, after;

			memset(&r, 0xcc, sizeof(r));
			ASSERT_EQ(0, hgclock_clock_read(clk, &r));
			EXPECT_EQ(cpu, (int)r.cpu);
			EXPECT_EQ(HGCLOCK_READING_EXACT | HGCLOCK_READING_PERF, r.flags);
			EXPECT_EQ(expect_sched_ns(&convs[cpu], r.tsc), r.local_ns);
			EXPECT_EQ(r.local_ns + convs[cpu].local_offset_ns, r.perf_ns);
			before = expect_sched_ns(&convs[cpu], fake_clock_rdtsc()) +
				 convs[cpu].local_offset_ns;
			ASSERT_EQ(0, hgclock_clock_perf_ns(clk, &perf_ns));
			after = expect_sched_ns(&convs[cpu], fake_clock_rdtsc()) +
				convs[cpu].local_offset_ns;
			ASSERT_LE(before, perf_ns);
			ASSERT_GE(after, perf_ns);
		}
	}
	unpin();
	hgclock_clock_close(clk);
	free(convs);
	fake_clock_destroy(&fc);
}

/* ---- rseq while moved and signalled ---- */

struct mover {
	struct fake_clock *fc;
	struct hgclock_conversion *convs;
	volatile pid_t tid;
	volatile int stop;
	volatile long reads, bad;
	char why[160];
};

static void on_alarm(int sig)
{
	(void)sig;
}

static void *reader(void *arg)
{
	struct mover *mv = arg;

	mv->tid = (pid_t)syscall(SYS_gettid);
	while (!mv->stop) {
		struct hgclock_now now;
		int ret = hgclock_now_user_method(&mv->fc->map, &now, HGCLOCK_UCLOCK_RSEQ);

		/* 100 aborts in a row under a 50 us timer: possible, rare. */
		if (ret == -EAGAIN)
			continue;
		if (!mv->bad && (ret || now.cpu >= mv->fc->meta->nr_cpus ||
				 now.sched_clock_ns != expect_sched_ns(&mv->convs[now.cpu], now.tsc))) {
			snprintf(mv->why, sizeof(mv->why), "ret %d cpu %u tsc %llu ns %llu", ret,
				 now.cpu, (unsigned long long)now.tsc,
				 (unsigned long long)now.sched_clock_ns);
			mv->bad++;
		}
		mv->reads++;
	}
	return NULL;
}

TEST(rseq_moved_and_signalled)
{
	struct itimerval every = { { 0, 50 }, { 0, 50 } }, off = { { 0, 0 }, { 0, 0 } };
	struct hgclock_uclock_stats st0, st1;
	struct hgclock_conversion *convs;
	struct sigaction sa;
	struct fake_clock fc;
	struct mover mv;
	pthread_t th;
	sigset_t block;
	int i;

	if (!hgclock_uclock_available(HGCLOCK_UCLOCK_RSEQ))
		SKIP(return, "glibc registered no rseq area");
	if (nr_possible() < 2)
		SKIP(return, "one CPU: nothing to move between");
	ASSERT_EQ(0, fake_clock_create(&fc, (unsigned int)nr_possible()));
	convs = calloc(fc.meta->nr_cpus, sizeof(*convs));
	ASSERT_NE(NULL, convs);
	per_cpu_conversions(&fc, convs);
	memset(&mv, 0, sizeof(mv));
	mv.fc = &fc;
	mv.convs = convs;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	ASSERT_EQ(0, sigaction(SIGALRM, &sa, NULL));
	hgclock_uclock_stats(&st0);
	ASSERT_EQ(0, pthread_create(&th, NULL, reader, &mv));
	/* The timer's signals go to the reader: this thread blocks them. */
	sigemptyset(&block);
	sigaddset(&block, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &block, NULL);
	while (!mv.tid)
		sched_yield();
	ASSERT_EQ(0, setitimer(ITIMER_REAL, &every, NULL));
	for (i = 0; i < 4000; i++) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(i % nr_possible(), &set);
		sched_setaffinity(mv.tid, sizeof(set), &set);
		usleep(100);
	}
	setitimer(ITIMER_REAL, &off, NULL);
	mv.stop = 1;
	pthread_join(th, NULL);
	pthread_sigmask(SIG_UNBLOCK, &block, NULL);
	hgclock_uclock_stats(&st1);
	TH_LOG("%ld readings, %llu retried (aborts)", mv.reads,
	       (unsigned long long)(st1.retries - st0.retries));
	EXPECT_EQ(0, mv.bad) TH_LOG("%s", mv.why);
	EXPECT_LT(0, mv.reads);
	free(convs);
	fake_clock_destroy(&fc);
}

/* ---- no registration: in one thread, and in the whole process ---- */

struct unreg {
	struct fake_clock *fc;
	int unreg_ret, unreg_errno, read_ret;
};

static void *unregistered_reader(void *arg)
{
	struct unreg *u = arg;
	struct hgclock_now now;

	u->unreg_ret = -1;
	u->unreg_errno = ENOSYS;
#ifdef HAVE_SYS_RSEQ
	{
		struct rseq *rs = (struct rseq *)((char *)__builtin_thread_pointer() +
						  __rseq_offset);
		unsigned int lens[2] = { 32, __rseq_size }, i;

		/* The length glibc registered: 32 (its struct), or __rseq_size. */
		for (i = 0; i < 2 && u->unreg_ret; i++) {
			u->unreg_ret = (int)syscall(SYS_rseq, rs, lens[i], RSEQ_FLAG_UNREGISTER,
						    RSEQ_SIG);
			u->unreg_errno = errno;
		}
	}
#endif
	u->read_ret = hgclock_now_user_method(&u->fc->map, &now, HGCLOCK_UCLOCK_RSEQ);
	return NULL;
}

TEST(rseq_unregistered_thread)
{
	struct hgclock_uclock_stats st0, st1;
	struct fake_clock fc;
	struct hgclock_conversion conv;
	struct unreg u;
	pthread_t th;
	unsigned int cpu;

	if (!hgclock_uclock_available(HGCLOCK_UCLOCK_RSEQ))
		SKIP(return, "glibc registered no rseq area");
	ASSERT_EQ(0, fake_clock_create(&fc, (unsigned int)nr_possible()));
	fake_clock_native(&conv, 5, NULL);
	for (cpu = 0; cpu < fc.meta->nr_cpus; cpu++)
		fake_clock_set(&fc, cpu, &conv);
	memset(&u, 0, sizeof(u));
	u.fc = &fc;
	hgclock_uclock_stats(&st0);
	ASSERT_EQ(0, pthread_create(&th, NULL, unregistered_reader, &u));
	pthread_join(th, NULL);
	hgclock_uclock_stats(&st1);
	ASSERT_EQ(0, u.unreg_ret) TH_LOG("rseq unregister: %s", strerror(u.unreg_errno));
	EXPECT_EQ(-ENODATA, u.read_ret);
	EXPECT_EQ(st0.no_method + 1, st1.no_method);
	fake_clock_destroy(&fc);
}

/*
 * The child mode (CHILD_ENV set): one reading by the automatic method and
 * one through the application API with HGCLOCK_OPEN_NO_SYSCALL, on an area
 * of its own; prints "method M ret R lib_errno E no_method N" and exits.
 */
static void __attribute__((constructor)) child_mode(void)
{
	struct hgclock_uclock_stats st;
	struct hgclock_conversion conv;
	struct hgclock_reading r;
	struct hgclock_clock *clk;
	struct hgclock_now now;
	struct fake_clock fc;
	int ret, lib_errno = 0;
	unsigned int cpu;

	if (!getenv(CHILD_ENV))
		return;
	if (fake_clock_create(&fc, (unsigned int)nr_possible()))
		_exit(3);
	fake_clock_native(&conv, 5, NULL);
	for (cpu = 0; cpu < fc.meta->nr_cpus; cpu++)
		fake_clock_set(&fc, cpu, &conv);
	ret = hgclock_now_user(&fc.map, &now);
	clk = hgclock_clock_open(fc.path, HGCLOCK_OPEN_NO_SYSCALL);
	if (!clk)
		_exit(3);
	if (hgclock_clock_read(clk, &r))
		lib_errno = errno;
	hgclock_uclock_stats(&st);
	printf("method %s ret %d lib_errno %d no_method %llu\n",
	       hgclock_uclock_method_name(hgclock_uclock_method()), ret, lib_errno,
	       (unsigned long long)st.no_method);
	fflush(stdout);
	_exit(0);
}

/* Runs this program in child mode with @tunables; its line in @out. */
static int run_child(const char *tunables, char *out, size_t len)
{
	int pipefd[2], status;
	ssize_t n;
	pid_t pid;

	if (pipe(pipefd))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (!pid) {
		dup2(pipefd[1], 1);
		setenv(CHILD_ENV, "1", 1);
		setenv("GLIBC_TUNABLES", tunables, 1);
		execl("/proc/self/exe", "test_uclock", (char *)NULL);
		_exit(127);
	}
	close(pipefd[1]);
	n = read(pipefd[0], out, len - 1);
	out[n > 0 ? n : 0] = '\0';
	close(pipefd[0]);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

TEST(rseq_off_in_glibc)
{
	bool rdtscp = cpuinfo_has("rdtscp"), rdpid = cpuinfo_has("rdpid");
	char out[256], want[256];

	ASSERT_EQ(0, run_child("glibc.pthread.rseq=0", out, sizeof(out)));
	if (rdtscp || rdpid) {
		snprintf(want, sizeof(want), "method %s ret 0 lib_errno 0 no_method 0\n",
			 rdtscp ? "rdtscp" : "rdpid");
	} else {
		/* Neither instruction, no rseq: counted, and ENODATA. */
		snprintf(want, sizeof(want), "method none ret %d lib_errno %d no_method 2\n",
			 -ENODATA, ENODATA);
	}
	EXPECT_STREQ(want, out);
	/* The same child with rseq: glibc's default. */
	ASSERT_EQ(0, run_child("glibc.pthread.rseq=1", out, sizeof(out)));
	snprintf(want, sizeof(want), "method %s ret 0 lib_errno 0 no_method 0\n",
		 rdtscp ? "rdtscp" : "rseq");
	EXPECT_STREQ(want, out);
}

/* ---- the errors ---- */

TEST(errors)
{
	struct hgclock_conversion conv;
	struct hgclock_meta_cpu *slot;
	struct hgclock_now now;
	struct fake_clock fc;
	unsigned int m;
	int method = hgclock_uclock_method();

	if (method == HGCLOCK_UCLOCK_NONE)
		SKIP(return, "no method on this machine (no rdtscp, rdpid, rseq)");
	for (m = 0; m < sizeof(all_methods) / sizeof(all_methods[0]); m++)
		if (!hgclock_uclock_available(all_methods[m]))
			EXPECT_EQ(-EOPNOTSUPP,
				  hgclock_now_user_method(NULL, &now, all_methods[m]));
	EXPECT_EQ(-EOPNOTSUPP, hgclock_now_user_method(NULL, &now, HGCLOCK_UCLOCK_IOCTL));
	EXPECT_EQ(-EOPNOTSUPP, hgclock_now_user_method(NULL, &now, 99));

	ASSERT_EQ(0, pin(0));
	ASSERT_EQ(0, fake_clock_create(&fc, 1));
	fake_clock_native(&conv, 5, NULL);
	/* Not exact (derived): the library never uses it. */
	conv.flags = HGCLOCK_CONV_VALID | HGCLOCK_CONV_DERIVED;
	fake_clock_set(&fc, 0, &conv);
	EXPECT_EQ(-ENODATA, hgclock_now_user(&fc.map, &now));
	/* Being rewritten forever: -EAGAIN after the bounded attempts. */
	conv.flags = HGCLOCK_CONV_VALID | HGCLOCK_CONV_EXACT;
	fake_clock_set(&fc, 0, &conv);
	EXPECT_EQ(0, hgclock_now_user(&fc.map, &now));
	slot = fake_clock_slot(&fc, 0);
	__atomic_store_n(&slot->conv_seq, slot->conv_seq + 1, __ATOMIC_RELEASE);
	EXPECT_EQ(-EAGAIN, hgclock_now_user(&fc.map, &now));
	/* A CPU beyond the area's nr_cpus. */
	if (nr_possible() > 1 && !pin(1))
		EXPECT_EQ(-ERANGE, hgclock_now_user(&fc.map, &now));
	unpin();
	fake_clock_destroy(&fc);
}

TEST_HARNESS_MAIN
