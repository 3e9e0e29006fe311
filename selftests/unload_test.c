// SPDX-License-Identifier: GPL-2.0
/*
 * Nothing of hgclock runs after it is unloaded (issue 30 item 1).
 *
 * EXIT_PAIR on another CPU queues a work item there and waits for it
 * with a deadline; past it the ioctl returns ETIMEDOUT and leaves the
 * item queued.  Here a SCHED_FIFO spinner on CPU 1 (with RT throttling
 * off) keeps that CPU's workers from running, EXIT_PAIR aimed at CPU 1
 * times out, the file is closed and the module removed while the item
 * still waits; then the spinner stops and the item runs.  The module
 * must drain it at unload (rmmod may wait for the spinner), and the
 * kernel log must stay clean: an item left on a system workqueue runs
 * the freed module's code and oopses.
 *
 * Unloads the module: selftests/vm-tests.sh runs it on its own and loads
 * the module again.  Root, two CPUs and a hypervisor (EXIT_PAIR) or skip.
 *
 * First, under the same spinner (issue 30 item 6): READ_CLOCK and
 * SNAPSHOT, bounded now, reach the starved CPU all the same, because they
 * interrupt it rather than queue work behind the spinner.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/hgclock.h>

#include "kselftest_harness.h"
#include "test_util.h"

#define RT_RUNTIME "/proc/sys/kernel/sched_rt_runtime_us"
/* 6.12's replacement of RT throttling: 50 ms a second for fair tasks. */
#define FAIR_SERVER "/sys/kernel/debug/sched/fair_server/cpu1/runtime"
#define SPIN_CPU 1

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Reads a small file into @buf; 0 or -1. */
static int read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

/* The pid of the kernel thread named @comm, or -1. */
static pid_t find_kthread(const char *comm)
{
	char path[64], name[64];
	pid_t pid;

	/* Per-CPU kthreads are created at boot: low pids. */
	for (pid = 2; pid < 4096; pid++) {
		snprintf(path, sizeof(path), "/proc/%d/comm", pid);
		if (read_small(path, name, sizeof(name)))
			continue;
		name[strcspn(name, "\n")] = '\0';
		if (!strcmp(name, comm))
			return pid;
	}
	return -1;
}

/*
 * A FIFO spinner alone on @cpu; returns its pid once it spins, or -1.
 * @close_fd: the device, which the spinner must not keep open (an open
 * file pins the module).
 */
static pid_t start_spinner(int cpu, int close_fd)
{
	struct sched_param sp = { .sched_priority = 1 };
	int pfd[2];
	pid_t pid;
	char c;

	if (pipe(pfd))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		close(pfd[0]);
		close(close_fd);
		/*
		 * Priority 1: above every fair task (the workers), below the
		 * kernel's own RT threads (threaded interrupts on PREEMPT_RT).
		 */
		if (pin_self(cpu) || sched_setscheduler(0, SCHED_FIFO, &sp))
			_exit(1);
		if (write(pfd[1], "s", 1) != 1)
			_exit(1);
		for (;;)
			;
	}
	close(pfd[1]);
	if (read(pfd[0], &c, 1) != 1) {
		close(pfd[0]);
		waitpid(pid, NULL, 0);
		return -1;
	}
	close(pfd[0]);
	return pid;
}

/* Kernel log records since @fd was opened that report a fault; printed. */
static int kmsg_faults(int fd)
{
	static const char * const bad[] = {
		"BUG:", "Oops", "WARNING:", "general protection", "unable to handle",
		"Call Trace", "soft lockup", "KASAN",
	};
	char rec[8192];
	int faults = 0;

	for (;;) {
		ssize_t n = read(fd, rec, sizeof(rec) - 1);
		size_t i;

		if (n < 0 && errno == EPIPE)	/* overwritten: read on */
			continue;
		if (n <= 0)
			break;
		rec[n] = '\0';
		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			if (strstr(rec, bad[i])) {
				printf("# kernel: %s", strchr(rec, ';') ? strchr(rec, ';') + 1 : rec);
				fflush(stdout);
				faults++;
				break;
			}
		}
	}
	return faults;
}

/* RT throttling (6.1) and the fair server (6.12) off; restored by put. */
struct starve {
	char runtime[32], fair[32];
	bool fair_server;
};

static int starve_get(struct starve *st)
{
	if (read_small(RT_RUNTIME, st->runtime, sizeof(st->runtime)) ||
	    write_sysfs(RT_RUNTIME, "-1"))
		return -1;
	st->fair_server = !read_small(FAIR_SERVER, st->fair, sizeof(st->fair));
	if (st->fair_server && write_sysfs(FAIR_SERVER, "0"))
		return -1;
	return 0;
}

static void starve_put(struct starve *st)
{
	write_sysfs(RT_RUNTIME, st->runtime);
	if (st->fair_server)
		write_sysfs(FAIR_SERVER, st->fair);
}

TEST(bounded_reads_reach_a_starved_cpu)
{
	struct hgclock_clock_sample samples[256];
	struct hgclock_read_clock rc;
	struct hgclock_snapshot snap;
	struct starve st;
	int fd, ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	pid_t spinner;

	if (geteuid())
		SKIP(return, "not root");
	if (ncpu < 2 || ncpu > 256)
		SKIP(return, "%d CPUs", ncpu);
	ASSERT_EQ(0, pin_self(0));
	fd = open("/dev/hgclock", O_RDWR);
	if (fd < 0)
		SKIP(return, "/dev/hgclock: %s (module not loaded)", strerror(errno));
	ASSERT_EQ(0, starve_get(&st));
	spinner = start_spinner(SPIN_CPU, fd);
	ASSERT_LT(0, spinner);
	sleep_ms(200);

	memset(&rc, 0xcc, sizeof(rc));
	memset(&rc, 0, offsetof(struct hgclock_read_clock, sample));
	memset(rc.reserved, 0, sizeof(rc.reserved));
	rc.size = sizeof(rc);
	rc.flags = HGCLOCK_READ_CPU;
	rc.cpu = SPIN_CPU;
	EXPECT_EQ(0, ioctl(fd, HGCLOCK_IOC_READ_CLOCK, &rc)) TH_LOG("READ_CLOCK cpu 1: %s",
								    strerror(errno));
	EXPECT_EQ(SPIN_CPU, rc.sample.cpu);
	EXPECT_EQ(HGCLOCK_SAMPLE_VALID, rc.sample.flags);

	memset(samples, 0xcc, sizeof(samples));
	memset(&rc, 0, sizeof(rc));
	rc.size = sizeof(rc);
	rc.flags = HGCLOCK_READ_ALL_CPUS;
	rc.nr_samples = ncpu;
	rc.samples_ptr = (uintptr_t)samples;
	EXPECT_EQ(0, ioctl(fd, HGCLOCK_IOC_READ_CLOCK, &rc)) TH_LOG("READ_CLOCK all: %s",
								    strerror(errno));
	EXPECT_EQ(ncpu, rc.nr_samples);
	EXPECT_EQ(SPIN_CPU, samples[SPIN_CPU].cpu);
	EXPECT_EQ(HGCLOCK_SAMPLE_VALID, samples[SPIN_CPU].flags);

	memset(&snap, 0, sizeof(snap));
	snap.size = sizeof(snap);
	snap.cpu = SPIN_CPU;
	EXPECT_EQ(0, ioctl(fd, HGCLOCK_IOC_SNAPSHOT, &snap)) TH_LOG("SNAPSHOT cpu 1: %s",
								   strerror(errno));
	memset(&snap, 0, sizeof(snap));
	snap.size = sizeof(snap);
	snap.flags = HGCLOCK_SNAPSHOT_ALL_CPUS;
	EXPECT_EQ(0, ioctl(fd, HGCLOCK_IOC_SNAPSHOT, &snap)) TH_LOG("SNAPSHOT all: %s",
								   strerror(errno));

	kill(spinner, SIGKILL);
	waitpid(spinner, NULL, 0);
	starve_put(&st);
	close(fd);
}

TEST(late_exit_pair_then_unload)
{
	struct hgclock_info info;
	struct hgclock_exit_pair req;
	struct starve st;
	int fd, kmsg, status, tries;
	struct sched_param above_spinner = { .sched_priority = 2 }, normal = { 0 };
	pid_t spinner, remover, cpuhp;
	bool removed_before_spinner_stopped = false;

	if (geteuid())
		SKIP(return, "not root");
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		SKIP(return, "one CPU: no other CPU to starve");
	/* This test's own process (and rmmod) stay off the starved CPU. */
	ASSERT_EQ(0, pin_self(0));
	fd = open("/dev/hgclock", O_RDWR);
	if (fd < 0)
		SKIP(return, "/dev/hgclock: %s (module not loaded)", strerror(errno));
	memset(&info, 0, sizeof(info));
	info.size = sizeof(info);
	ASSERT_EQ(0, ioctl(fd, HGCLOCK_IOC_GET_INFO, &info));
	if (!(info.features & HGCLOCK_FEAT_EXIT_PAIR)) {
		close(fd);
		SKIP(return, "no hypervisor: no EXIT_PAIR");
	}

	kmsg = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	ASSERT_LE(0, kmsg);
	/* Only what the kernel logs from here on. */
	ASSERT_LE(0, lseek(kmsg, 0, SEEK_END));

	/*
	 * RT throttling (6.1) or the fair server (6.12) would give the
	 * workers a share of CPU 1 anyway.
	 */
	ASSERT_EQ(0, starve_get(&st));

	spinner = start_spinner(SPIN_CPU, fd);
	ASSERT_LT(0, spinner);
	/*
	 * CPU hotplug's thread on CPU 1 above the spinner: unloading stops
	 * the snapshot timers there through it, and would otherwise wait
	 * for the spinner too, letting the late item run before the module
	 * is freed (the bug would hide).  The pairings' worker stays below.
	 */
	cpuhp = find_kthread("cpuhp/1");
	ASSERT_LT(0, cpuhp);
	ASSERT_EQ(0, sched_setscheduler(cpuhp, SCHED_FIFO, &above_spinner));

	/*
	 * A worker that was already running may still get its pairing in:
	 * ask again until one times out (1 s each).
	 */
	for (tries = 0; tries < 5; tries++) {
		memset(&req, 0, sizeof(req));
		req.size = sizeof(req);
		req.flags = HGCLOCK_READ_CPU;
		req.cpu = SPIN_CPU;
		if (ioctl(fd, HGCLOCK_IOC_EXIT_PAIR, &req) && errno == ETIMEDOUT)
			break;
	}
	EXPECT_GT(5, tries) TH_LOG("EXIT_PAIR on a starved CPU never timed out");
	EXPECT_EQ(SPIN_CPU, req.cpu);
	EXPECT_EQ(0, req.nr_written);
	close(fd);

	/* rmmod while the item waits; the fixed module waits for it. */
	remover = fork();
	ASSERT_LE(0, remover);
	if (remover == 0)
		_exit(syscall(__NR_delete_module, "hgclock", O_NONBLOCK) ? errno : 0);
	sleep_ms(1500);
	if (waitpid(remover, &status, WNOHANG) == remover) {
		removed_before_spinner_stopped = true;
	} else {
		char path[64], stack[2048];

		/* Where rmmod waits: the fixed module, in the pairings' drain. */
		snprintf(path, sizeof(path), "/proc/%d/stack", remover);
		if (!read_small(path, stack, sizeof(stack)))
			printf("# rmmod waits in:\n%s", stack);
		else
			printf("# %s: %s\n", path, strerror(errno));
		fflush(stdout);
	}

	/* The worker on CPU 1 runs from here on. */
	kill(spinner, SIGKILL);
	waitpid(spinner, NULL, 0);
	sched_setscheduler(cpuhp, SCHED_OTHER, &normal);
	starve_put(&st);

	if (!removed_before_spinner_stopped) {
		for (tries = 0; tries < 300; tries++) {
			if (waitpid(remover, &status, WNOHANG) == remover)
				break;
			sleep_ms(100);
		}
		ASSERT_GT(300, tries) TH_LOG("rmmod still waiting 30 s after CPU 1 was freed");
	}
	TH_LOG("rmmod %s the late pairing",
	       removed_before_spinner_stopped ? "returned before" : "waited for");
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status)) TH_LOG("delete_module: %s",
						 strerror(WEXITSTATUS(status)));
	ASSERT_NE(0, access("/dev/hgclock", F_OK));

	/* Time for a late item to run, and to oops if it outlived the module. */
	sleep_ms(2000);
	EXPECT_EQ(0, kmsg_faults(kmsg)) TH_LOG("the kernel logged a fault after the unload");
	close(kmsg);
}

TEST_HARNESS_MAIN
