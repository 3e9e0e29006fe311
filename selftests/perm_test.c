// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock kselftests: who may do what with /dev/hgclock.
 *
 * Run as root with hgclock.ko loaded.  Each test forks a child that gives
 * up root the way an unprivileged user of the device is: setresuid() to
 * nobody (65534), keeping only the capabilities the test names, and then
 * uses a file the parent opened (or opens the node itself, for the device
 * mode).  The child reports each wrong answer on stderr and exits with the
 * number of them, so the verdict crosses the fork.
 *
 * The permission model (Documentation/uapi.rst, "Permissions"):
 *  - the node is root's, mode 0600 (a udev rule may give a group 0660);
 *  - an open file may read clocks, configuration and snapshots and map
 *    the rings;
 *  - TRACK and LIST_VCPUS need CAP_PERFMON or CAP_SYS_ADMIN
 *    (perfmon_capable());
 *  - PRODUCE and changing RING_CONFIG need CAP_SYS_ADMIN;
 *  - /dev/hgclock-clock is everyone's (0444): a read-only map of the
 *    conversions, nothing else;
 *  - at most max_sessions open files (ENFILE), max_sessions_per_user per
 *    user without CAP_SYS_ADMIN (EUSERS);
 *  - ring memory: at most ring_user_max_mb per user without
 *    CAP_SYS_ADMIN, and some always left for CAP_SYS_ADMIN (ENOSPC);
 *    RING_CONFIG's snapshots of every CPU count in the budget of
 *    interrupted CPUs (EAGAIN).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <stdint.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "../user/lib/libhgclock.h"
#include "../user/lib/appev.h"
#include <hgclock/hgclock.h>
#include "test_util.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif

#define NOBODY		65534
#define TEST_GID	4242	/* stands for the udev rule's "hgclock" group */

/* Capability bits as a 64-bit mask (v3 capabilities: two 32-bit words). */
#define CAPBIT(c)	(1ULL << (c))

static int child_errors;

#define CHILD_EXPECT(cond, fmt, ...) do {				\
	if (!(cond)) {							\
		fprintf(stderr, "# child: %s:%d: " fmt "\n",		\
			__FILE__, __LINE__, ##__VA_ARGS__);		\
		child_errors++;						\
	}								\
} while (0)

/* ioctl() as "0" or "errno name", for messages and comparisons. */
static int ioctl_err(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) ? errno : 0;
}

static int set_caps(unsigned long long mask)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[2];

	memset(data, 0, sizeof(data));
	data[0].effective = data[0].permitted = (__u32)mask;
	data[1].effective = data[1].permitted = (__u32)(mask >> 32);
	return syscall(SYS_capset, &hdr, data);
}

static unsigned long long get_effective(void)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[2];

	if (syscall(SYS_capget, &hdr, data))
		return ~0ULL;
	return data[0].effective | ((unsigned long long)data[1].effective << 32);
}

/*
 * In the child: become nobody with @caps only (and @gid as the one
 * supplementary group when not 0).  Exits 100 when that fails, which the
 * parent reports as a broken test, not as a verdict on the module.
 */
static void drop_to_uid(uid_t uid, unsigned long long caps, gid_t gid)
{
	gid_t groups[1] = { gid };

	if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) ||
	    setgroups(gid ? 1 : 0, groups) ||
	    setresgid(uid, uid, uid) ||
	    setresuid(uid, uid, uid) ||
	    set_caps(caps)) {
		perror("# child: dropping privileges");
		_exit(100);
	}
	if (get_effective() != caps || geteuid() != uid) {
		fprintf(stderr, "# child: capabilities %#llx, euid %d after drop\n",
			get_effective(), (int)geteuid());
		_exit(100);
	}
}

static void drop_to_nobody(unsigned long long caps, gid_t gid)
{
	drop_to_uid(NOBODY, caps, gid);
}

/* Runs @fn(@fd) in a child as @uid with @caps; returns its exit status. */
static int run_as_uid(uid_t uid, int fd, unsigned long long caps, gid_t gid,
		      void (*fn)(int fd))
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		drop_to_uid(uid, caps, gid);
		child_errors = 0;
		fn(fd);
		_exit(child_errors > 99 ? 99 : child_errors);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

static int run_as_nobody(int fd, unsigned long long caps, gid_t gid,
			 void (*fn)(int fd))
{
	return run_as_uid(NOBODY, fd, caps, gid, fn);
}

/* What every opener may do, whatever its capabilities. */
static void child_open_file_ops(int fd)
{
	struct hgclock_info info;
	struct hgclock_read_clock rc;
	struct hgclock_ring_config cfg;
	struct hgclock_map map;
	int ret;

	memset(&info, 0, sizeof(info));
	info.size = sizeof(info);
	CHILD_EXPECT(ioctl_err(fd, HGCLOCK_IOC_GET_INFO, &info) == 0,
		     "GET_INFO: %s", strerror(errno));
	memset(&rc, 0, sizeof(rc));
	rc.size = sizeof(rc);
	CHILD_EXPECT(ioctl_err(fd, HGCLOCK_IOC_READ_CLOCK, &rc) == 0,
		     "READ_CLOCK: %s", strerror(errno));
	CHILD_EXPECT(ioctl_err(fd, HGCLOCK_IOC_NOP, NULL) == 0, "NOP: %s",
		     strerror(errno));
	memset(&cfg, 0, sizeof(cfg));
	CHILD_EXPECT(hgclock_ring_config(fd, &cfg) == 0, "RING_CONFIG read");
	ret = hgclock_snapshot(fd, -1);
	CHILD_EXPECT(ret >= 1, "SNAPSHOT all: %d", ret);
	ret = hgclock_map_open(fd, HGCLOCK_MAP_CONSUMER, &map);
	CHILD_EXPECT(ret == 0, "mapping as the consumer: %s", strerror(-ret));
	if (!ret)
		hgclock_map_close(&map);
}

/* What needs CAP_SYS_ADMIN (and so fails for nobody without it). */
static void child_admin_ops_refused(int fd)
{
	struct hgclock_ring_config cfg;
	struct hgclock_produce prod;
	int ret;

	memset(&cfg, 0, sizeof(cfg));
	cfg.flags = HGCLOCK_CFG_SET_PERIOD;
	cfg.snapshot_period_ns = 1000000000ULL;
	ret = hgclock_ring_config(fd, &cfg);
	CHILD_EXPECT(ret == -EPERM, "RING_CONFIG set: %d, want -EPERM", ret);
	memset(&prod, 0, sizeof(prod));
	prod.size = sizeof(prod);
	prod.count = 1;
	ret = ioctl_err(fd, HGCLOCK_IOC_PRODUCE, &prod);
	CHILD_EXPECT(ret == EPERM, "PRODUCE: %s, want EPERM", strerror(ret));
}

static void child_tracking_refused(int fd)
{
	struct hgclock_vcpu_info *infos = NULL;
	unsigned int nr = 0;
	int ret;

	ret = hgclock_track(fd, getpid(), 1);
	CHILD_EXPECT(ret == -EPERM, "TRACK add: %d, want -EPERM", ret);
	ret = hgclock_track(fd, getpid(), 0);
	CHILD_EXPECT(ret == -EPERM, "TRACK remove: %d, want -EPERM", ret);
	ret = hgclock_list_vcpus(fd, &infos, &nr);
	CHILD_EXPECT(ret == -EPERM, "LIST_VCPUS: %d, want -EPERM", ret);
	free(infos);
}

static void child_tracking_allowed(int fd)
{
	struct hgclock_vcpu_info *infos = NULL;
	unsigned int nr = 0, i;
	bool found = false;
	int ret;

	ret = hgclock_track(fd, getpid(), 1);
	CHILD_EXPECT(ret == 0, "TRACK add: %s", strerror(-ret));
	ret = hgclock_list_vcpus(fd, &infos, &nr);
	CHILD_EXPECT(ret == 0, "LIST_VCPUS: %s", strerror(-ret));
	for (i = 0; !ret && i < nr; i++)
		found |= infos[i].tid == getpid();
	CHILD_EXPECT(found, "the tracked thread is not listed");
	free(infos);
	ret = hgclock_track(fd, getpid(), 0);
	CHILD_EXPECT(ret == 0, "TRACK remove: %s", strerror(-ret));
}

/*
 * The children below open the device themselves, through the group a
 * udev rule would give (run_with_group_node() sets the node up): what a
 * file may do follows its opener's capabilities at open.
 */
static int child_open_own(void)
{
	int nfd = open(HGCLOCK_DEV_PATH, O_RDWR | O_CLOEXEC);

	CHILD_EXPECT(nfd >= 0, "open through group %d: %s", TEST_GID, strerror(errno));
	return nfd;
}

/* One all-CPU clock read: 0, or the errno. */
static int all_cpu_read(int fd)
{
	struct hgclock_clock_sample samples[256];
	struct hgclock_read_clock rc;

	memset(&rc, 0, sizeof(rc));
	rc.size = sizeof(rc);
	rc.flags = HGCLOCK_READ_ALL_CPUS;
	rc.nr_samples = 256;
	rc.samples_ptr = (__u64)(uintptr_t)samples;
	return ioctl(fd, HGCLOCK_IOC_READ_CLOCK, &rc) ? errno : 0;
}

/*
 * Calls that interrupt every CPU share a budget per second among
 * unprivileged openers (HGCLOCK_UNPRIV_CROSS_CPU_PER_SEC CPUs, so that
 * over the online CPUs per all-CPU read); a privileged file has none.
 * @calls all-CPU reads in a row: how many were refused with EAGAIN.
 */
static int all_cpu_reads_refused(int fd, int calls)
{
	int i, nr_again = 0;

	for (i = 0; i < calls; i++)
		nr_again += all_cpu_read(fd) == EAGAIN;
	return nr_again;
}

/* A child's exit status: the machine read slower than the budget (a skip). */
#define CHILD_TOO_SLOW	101

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* All-CPU reads the budget allows a loop of @elapsed_s: at most ceil(E) + 1 windows. */
static long budget_allows(long per_window, double elapsed_s)
{
	return per_window * ((long)elapsed_s + (elapsed_s > (long)elapsed_s) + 1);
}

/*
 * The budget, whatever the machine's speed: all-CPU reads in a loop for
 * up to 2 s (at most 4 windows' worth).  A loop of E s spans at most
 * ceil(E) + 1 of the module's one-second windows, so no more than that
 * many windows' reads may succeed; and when some were refused, the
 * budget was reached.  A loop whose reads all fit the windows it spans
 * and none was refused says nothing: the reads were slower than the
 * budget (the debug kernel under single-threaded emulation takes ms a
 * read), CHILD_TOO_SLOW.
 */
static void child_budget(int fd)
{
	long nr_cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int nfd = child_open_own(), err;
	long per_window, max_calls, calls = 0, nr_ok = 0, nr_again = 0, nr_other = 0;
	double t0, elapsed;
	long bound;

	if (nfd < 0)
		return;
	if (nr_cpus < 1)
		nr_cpus = 1;
	per_window = HGCLOCK_UNPRIV_CROSS_CPU_PER_SEC / nr_cpus;
	max_calls = 4 * per_window + 8;
	t0 = now_s();
	do {
		err = all_cpu_read(nfd);
		nr_ok += !err;
		nr_again += err == EAGAIN;
		nr_other += err && err != EAGAIN;
		calls++;
		elapsed = now_s() - t0;
	} while (calls < max_calls && elapsed < 2.0);
	close(nfd);
	bound = budget_allows(per_window, elapsed);
	fprintf(stderr, "# child: %ld all-CPU reads in %.3f s on %ld CPUs: %ld done, %ld "
		"refused (EAGAIN); the windows spanned allow %ld\n", calls, elapsed, nr_cpus,
		nr_ok, nr_again, bound);
	CHILD_EXPECT(!nr_other, "%ld reads failed otherwise", nr_other);
	CHILD_EXPECT(nr_ok <= bound, "%ld reads done in %.3f s, the budget allows %ld",
		     nr_ok, elapsed, bound);
	/* The budget is machine-wide: leave the next test a fresh second. */
	usleep(1100000);
	if (!nr_again && !child_errors && calls <= bound)
		_exit(CHILD_TOO_SLOW);
}

static void child_unprivileged(int fd)
{
	int nfd = child_open_own();

	if (nfd < 0)
		return;
	child_open_file_ops(nfd);
	child_admin_ops_refused(nfd);
	child_tracking_refused(nfd);
	close(nfd);
}

static void child_perfmon(int fd)
{
	int nfd = child_open_own();

	if (nfd < 0)
		return;
	child_open_file_ops(nfd);
	child_admin_ops_refused(nfd);
	child_tracking_allowed(nfd);
	CHILD_EXPECT(all_cpu_reads_refused(nfd, HGCLOCK_UNPRIV_CROSS_CPU_PER_SEC + 8) == 0,
		     "a CAP_PERFMON opener's all-CPU reads refused");
	close(nfd);
}

static void child_sys_admin(int fd)
{
	int nfd = child_open_own();

	if (nfd < 0)
		return;
	child_open_file_ops(nfd);
	child_tracking_allowed(nfd);
	close(nfd);
}

/* A privileged opener's file keeps its rights in an unprivileged hand. */
static void child_inherited_privileged_fd(int fd)
{
	child_tracking_allowed(fd);
}

/*
 * Gives the node the udev rule's group and mode, runs @fn as nobody with
 * @caps in that group, and puts the node back.
 */
static int run_with_group_node(int fd, unsigned long long caps, void (*fn)(int fd))
{
	struct stat st;
	int ret;

	if (stat(HGCLOCK_DEV_PATH, &st) || chown(HGCLOCK_DEV_PATH, 0, TEST_GID) ||
	    chmod(HGCLOCK_DEV_PATH, 0660))
		return -1;
	ret = run_as_nobody(fd, caps, TEST_GID, fn);
	if (chown(HGCLOCK_DEV_PATH, st.st_uid, st.st_gid) ||
	    chmod(HGCLOCK_DEV_PATH, st.st_mode & 07777))
		return -1;
	return ret;
}

static void child_open_denied(int fd)
{
	int nfd = open(HGCLOCK_DEV_PATH, O_RDWR | O_CLOEXEC);

	CHILD_EXPECT(nfd < 0 && errno == EACCES, "open as nobody: %d (%s), want EACCES",
		     nfd, nfd < 0 ? strerror(errno) : "opened");
	if (nfd >= 0)
		close(nfd);
}

/* Through the group a udev rule would give: open works, tracking does not. */
static void child_group_member(int fd)
{
	int nfd = open(HGCLOCK_DEV_PATH, O_RDWR | O_CLOEXEC);

	CHILD_EXPECT(nfd >= 0, "open through group %d: %s", TEST_GID, strerror(errno));
	if (nfd < 0)
		return;
	child_open_file_ops(nfd);
	child_admin_ops_refused(nfd);
	child_tracking_refused(nfd);
	close(nfd);
}

/* Module parameter @name, or @dflt when the module has none (older). */
static unsigned int param_or(const char *name, unsigned int dflt)
{
	char path[128];
	unsigned int val;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/module/hgclock/parameters/%s", name);
	f = fopen(path, "r");
	if (!f)
		return dflt;
	if (fscanf(f, "%u", &val) != 1)
		val = dflt;
	fclose(f);
	return val;
}

/* Opens into @fds until refused, at most @max; how many, errno in *@err. */
static int open_until_refused(int *fds, int max, int *err)
{
	int n;

	*err = 0;
	for (n = 0; n < max; n++) {
		fds[n] = open(HGCLOCK_DEV_PATH, O_RDWR | O_CLOEXEC);
		if (fds[n] < 0) {
			*err = errno;
			break;
		}
	}
	return n;
}

/* max_sessions_per_user files, then EUSERS; a close makes room. */
static void child_sessions_per_user(int fd)
{
	unsigned int per_user = param_or("max_sessions_per_user", 16);
	int fds[1024 + 8], n, i, err;

	n = open_until_refused(fds, per_user + 8, &err);
	CHILD_EXPECT(n == (int)per_user && err == EUSERS,
		     "%d opens, then %s; want %u, then EUSERS", n, strerror(err), per_user);
	if (n > 0) {
		close(fds[--n]);
		fds[n] = open(HGCLOCK_DEV_PATH, O_RDWR | O_CLOEXEC);
		CHILD_EXPECT(fds[n] >= 0, "open after a close: %s", strerror(errno));
		n += fds[n] >= 0;
	}
	for (i = 0; i < n; i++)
		close(fds[i]);
}

/* ---- ring memory and RING_CONFIG's snapshots (issue 30 item 5) ---- */

/* RING_CONFIG setting the ring size (0: only read it); errno or 0. */
static int ring_config_size(int fd, __u64 size, __u64 *now)
{
	struct hgclock_ring_config cfg;
	int err;

	memset(&cfg, 0, sizeof(cfg));
	cfg.size = sizeof(cfg);
	cfg.flags = size ? HGCLOCK_CFG_SET_RING_SIZE : 0;
	cfg.ring_size = size;
	err = ioctl_err(fd, HGCLOCK_IOC_RING_CONFIG, &cfg);
	if (now)
		*now = cfg.ring_size;
	return err;
}

/*
 * Opens a session, gives it @ring_size rings and maps them as a records
 * reader does (the ring, then the consumer area: every CPU's data area
 * is allocated then).  0 or the errno of the step that failed; the file
 * stays open in *@fdp (-1 if the open failed), the mappings stay.
 */
static int map_session(__u64 ring_size, int *fdp)
{
	struct hgclock_info info;
	void *p;
	int fd;

	*fdp = fd = open(HGCLOCK_DEV_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return errno;
	if (ring_config_size(fd, ring_size, NULL))
		return errno;
	memset(&info, 0, sizeof(info));
	info.size = sizeof(info);
	if (ioctl(fd, HGCLOCK_IOC_GET_INFO, &info))
		return errno;
	p = mmap(NULL, info.map_size, PROT_READ, MAP_SHARED, fd, HGCLOCK_MMAP_RING_OFFSET);
	if (p == MAP_FAILED)
		return errno;
	p = mmap(NULL, info.consumer_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 HGCLOCK_MMAP_CONSUMER_OFFSET);
	if (p == MAP_FAILED)
		return errno;
	return 0;
}

/* The ring size of the memory tests: 8 sessions take all of ring_max_mb. */
static __u64 test_ring_size;

static __u64 big_ring_size(const struct hgclock_info *info)
{
	__u64 want = info->ring_max_bytes / (8ULL * info->nr_online_cpus), size = 8192;

	while (size < want && size < (64ULL << 20))
		size <<= 1;
	return size;
}

/* Another user, while nobody holds all it may: one session still maps. */
static void child_map_one_session(int fd)
{
	int nfd, err = map_session(test_ring_size, &nfd);

	CHILD_EXPECT(err == 0, "uid %d: a session of %llu-byte rings: %s", (int)getuid(),
		     (unsigned long long)test_ring_size, strerror(err));
}

/*
 * Spends the unprivileged budget of interrupted CPUs: all-CPU reads until
 * one is refused (0), for up to 2 s.  None refused: CHILD_TOO_SLOW when
 * the reads done fit the windows the loop spanned (a read slower than a
 * window's share: 515 reads in 2 s on the 6.12-rt VM of a verification
 * on 2026-12-07), else -1: more were done than the budget allows.
 */
static int spend_budget(int fd)
{
	long nr_cpus = sysconf(_SC_NPROCESSORS_ONLN);
	long per_window = HGCLOCK_UNPRIV_CROSS_CPU_PER_SEC / (nr_cpus > 0 ? nr_cpus : 1);
	long nr_ok = 0, bound;
	double t0 = now_s(), elapsed;
	int err;

	do {
		err = all_cpu_read(fd);
		if (err == EAGAIN)
			return 0;
		nr_ok += !err;
		elapsed = now_s() - t0;
	} while (elapsed < 2.0);
	bound = budget_allows(per_window, elapsed);
	fprintf(stderr, "# child: %ld all-CPU reads in %.3f s on %ld CPUs, none refused; "
		"the windows spanned allow %ld\n", nr_ok, elapsed, nr_cpus, bound);
	return nr_ok <= bound ? CHILD_TOO_SLOW : -1;
}

/*
 * A ring replacement snapshots every online CPU: with the budget spent
 * it fails with EAGAIN and changes nothing; a second later it works.
 * The budget's window may turn between spending it and the call, so a
 * few tries, one of which must be refused.
 */
static void child_ring_config_budget(int fd)
{
	__u64 cur = 0, want, now = 0;
	int nfd = child_open_own(), i, err;
	struct hgclock_info info;
	bool refused = false;
	void *p;

	if (nfd < 0)
		return;
	/* Rings exist once mapped: from then on a new size replaces them. */
	err = ring_config_size(nfd, 16384, &cur);
	CHILD_EXPECT(err == 0, "RING_CONFIG 16 KiB before mapping: %s", strerror(err));
	memset(&info, 0, sizeof(info));
	info.size = sizeof(info);
	CHILD_EXPECT(ioctl_err(nfd, HGCLOCK_IOC_GET_INFO, &info) == 0, "GET_INFO: %s",
		     strerror(errno));
	p = mmap(NULL, info.map_size, PROT_READ, MAP_SHARED, nfd, HGCLOCK_MMAP_RING_OFFSET);
	CHILD_EXPECT(p != MAP_FAILED, "mapping the ring: %s", strerror(errno));
	if (p == MAP_FAILED) {
		close(nfd);
		return;
	}
	/* A ring mapping makes the replacement EBUSY: unmap it. */
	munmap(p, info.map_size);
	for (i = 0; i < 5 && !refused; i++) {
		int spent = spend_budget(nfd);

		want = cur == 16384 ? 32768 : 16384;
		if (spent == CHILD_TOO_SLOW && !child_errors) {
			close(nfd);
			_exit(CHILD_TOO_SLOW);
		}
		CHILD_EXPECT(spent == 0, "the budget was not spent: more all-CPU reads done "
			     "than it allows");
		err = ring_config_size(nfd, want, &now);
		if (err == EAGAIN) {
			refused = true;
			err = ring_config_size(nfd, 0, &now);
			CHILD_EXPECT(!err && now == cur, "after EAGAIN: ring size %llu, want %llu",
				     (unsigned long long)now, (unsigned long long)cur);
		} else {
			CHILD_EXPECT(err == 0, "RING_CONFIG: %s", strerror(err));
			cur = now;
		}
	}
	CHILD_EXPECT(refused, "5 ring replacements, each right after the budget was spent: none refused with EAGAIN");
	/* A fresh second: the same replacement works. */
	usleep(1100000);
	want = cur == 16384 ? 32768 : 16384;
	err = ring_config_size(nfd, want, &now);
	CHILD_EXPECT(err == 0 && now == want, "RING_CONFIG in a fresh second: %s, size %llu",
		     strerror(err), (unsigned long long)now);
	close(nfd);
	/* The budget is machine-wide: leave the next test a fresh second. */
	usleep(1100000);
}

FIXTURE(perm) {
	int fd;
	long coalesce_old;	/* coalesce_stop_us to restore, -1: untouched */
};

FIXTURE_SETUP(perm)
{
	self->coalesce_old = -1;
	self->fd = open(HGCLOCK_DEV_PATH, O_RDWR | O_CLOEXEC);
	if (self->fd < 0 && errno == ENOENT)
		SKIP(return, HGCLOCK_DEV_PATH " missing: module not loaded");
	ASSERT_LE(0, self->fd);
	if (geteuid() != 0)
		SKIP(return, "needs root to drop privileges from");
}

FIXTURE_TEARDOWN(perm)
{
	restore_coalesce(self->coalesce_old);
	if (self->fd >= 0)
		close(self->fd);
}

TEST_F(perm, node_root_only)
{
	struct stat st;

	ASSERT_EQ(0, stat(HGCLOCK_DEV_PATH, &st));
	EXPECT_TRUE(S_ISCHR(st.st_mode));
	EXPECT_EQ(0600, st.st_mode & 07777);
	EXPECT_EQ(0, st.st_uid);
	EXPECT_EQ(0, run_as_nobody(self->fd, 0, 0, child_open_denied));
}

TEST_F(perm, no_capabilities)
{
	EXPECT_EQ(0, run_with_group_node(self->fd, 0, child_unprivileged));
}

/* Its own test, so that a machine too slow to reach the budget is a skip. */
TEST_F(perm, unprivileged_cross_cpu_budget)
{
	int ret = run_with_group_node(self->fd, 0, child_budget);

	if (ret == CHILD_TOO_SLOW)
		SKIP(return, "the all-CPU reads were slower than the budget (see the child's "
		     "line): it cannot be reached here");
	EXPECT_EQ(0, ret);
}

TEST_F(perm, cap_perfmon_tracks)
{
	EXPECT_EQ(0, run_with_group_node(self->fd, CAPBIT(CAP_PERFMON), child_perfmon));
}

TEST_F(perm, cap_sys_admin_tracks)
{
	EXPECT_EQ(0, run_with_group_node(self->fd, CAPBIT(CAP_SYS_ADMIN), child_sys_admin));
}

/* File credentials: root's descriptor handed to nobody still tracks. */
TEST_F(perm, rights_follow_the_opener)
{
	EXPECT_EQ(0, run_as_nobody(self->fd, 0, 0, child_inherited_privileged_fd));
}

/* Tracking records in a session: those of types 16 and up. */
static int count_tracking(const struct hgclock_rec_header *h, void *arg)
{
	if (h->type >= 16)
		++*(long *)arg;
	return 0;
}

static long tracking_records(struct hgclock_map *map)
{
	long n = 0;
	long cpu;

	for (cpu = 0; cpu < sysconf(_SC_NPROCESSORS_ONLN); cpu++)
		if (hgclock_ring_consume(map, cpu, count_tracking, &n) < 0)
			return -1;
	return n;
}

/*
 * Sessions of unprivileged openers get no tracking record: root tracks
 * itself and switches 50 times; its own session gets the records, the
 * session nobody opened through the group at the same time gets none.
 * Every stop is written, late (coalesce_stop_us 1 us): the STOPs kept
 * in the slot and written at the next run go to root's session only too.
 */
TEST_F(perm, unprivileged_session_gets_no_tracking_records)
{
	int ready[2], done[2], status;
	struct hgclock_map map;
	struct stat st;
	long n_root;
	pid_t child;
	char c;
	int i;

	ASSERT_EQ(0, pipe(ready));
	ASSERT_EQ(0, pipe(done));
	ASSERT_EQ(0, stat(HGCLOCK_DEV_PATH, &st));
	ASSERT_EQ(0, chown(HGCLOCK_DEV_PATH, 0, TEST_GID));
	ASSERT_EQ(0, chmod(HGCLOCK_DEV_PATH, 0660));
	child = fork();
	ASSERT_LE(0, child);
	if (child == 0) {
		struct hgclock_map cmap;
		int nfd;
		long n;

		drop_to_nobody(0, TEST_GID);
		nfd = open(HGCLOCK_DEV_PATH, O_RDWR | O_CLOEXEC);
		if (nfd < 0 || hgclock_map_open(nfd, HGCLOCK_MAP_CONSUMER, &cmap))
			_exit(100);
		hgclock_ring_skip_all(&cmap);
		if (write(ready[1], "r", 1) != 1 || read(done[0], &c, 1) != 1)
			_exit(100);
		n = tracking_records(&cmap);
		if (n)
			fprintf(stderr, "# child: %ld tracking records in an unprivileged session\n", n);
		_exit(n ? 1 : 0);
	}
	ASSERT_EQ(0, hgclock_map_open(self->fd, HGCLOCK_MAP_CONSUMER, &map));
	hgclock_ring_skip_all(&map);
	ASSERT_EQ(1, read(ready[0], &c, 1));
	self->coalesce_old = set_coalesce(1);
	ASSERT_EQ(0, hgclock_track(self->fd, getpid(), 1));
	for (i = 0; i < 50; i++)
		usleep(1000);
	EXPECT_EQ(0, hgclock_track(self->fd, getpid(), 0));
	ASSERT_EQ(1, write(done[1], "d", 1));
	ASSERT_EQ(child, waitpid(child, &status, 0));
	EXPECT_EQ(0, chown(HGCLOCK_DEV_PATH, st.st_uid, st.st_gid));
	EXPECT_EQ(0, chmod(HGCLOCK_DEV_PATH, st.st_mode & 07777));
	n_root = tracking_records(&map);
	hgclock_map_close(&map);
	EXPECT_LT(20, n_root);
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
}

/* Root's file is not held to the unprivileged budget. */
TEST_F(perm, privileged_reads_not_limited)
{
	EXPECT_EQ(0, all_cpu_reads_refused(self->fd, HGCLOCK_UNPRIV_CROSS_CPU_PER_SEC + 8));
}

/* The udev rule's mode and group, set by hand here and put back after. */
TEST_F(perm, group_access_like_udev_rule)
{
	struct stat st;
	int ret;

	ASSERT_EQ(0, stat(HGCLOCK_DEV_PATH, &st));
	ASSERT_EQ(0, chown(HGCLOCK_DEV_PATH, 0, TEST_GID));
	ASSERT_EQ(0, chmod(HGCLOCK_DEV_PATH, 0660));
	ret = run_as_nobody(self->fd, 0, TEST_GID, child_group_member);
	/* Another group is still kept out. */
	EXPECT_EQ(0, run_as_nobody(self->fd, 0, TEST_GID + 1, child_open_denied));
	ASSERT_EQ(0, chown(HGCLOCK_DEV_PATH, st.st_uid, st.st_gid));
	ASSERT_EQ(0, chmod(HGCLOCK_DEV_PATH, st.st_mode & 07777));
	EXPECT_EQ(0, ret);
}

/* ---- /dev/hgclock-clock: the clock alone, for everyone ---------------- */

#define CLOCK_DEV_PATH "/dev/" HGCLOCK_CLOCK_DEVICE_NAME

/* A conversion copied under its sequence count; false if it kept moving. */
static bool copy_conv(const struct hgclock_meta_cpu *slot,
		      struct hgclock_conversion *conv)
{
	int tries;

	for (tries = 0; tries < 1000; tries++) {
		uint32_t seq = __atomic_load_n(&slot->conv_seq, __ATOMIC_ACQUIRE);

		if (seq & 1)
			continue;
		memcpy(conv, (const void *)&slot->conv, sizeof(*conv));
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&slot->conv_seq, __ATOMIC_RELAXED) == seq)
			return true;
	}
	return false;
}

/*
 * As nobody with no capability and no group, with @fd (root's
 * /dev/hgclock file) only for the READ_CLOCK brackets: open and map the
 * public clock, find the device's rules kept, and read sched_clock from
 * it without a syscall between two of the kernel's own reads.
 */
static void child_public_clock(int fd)
{
	long page = sysconf(_SC_PAGESIZE);
	const struct hgclock_meta *meta;
	struct hgclock_map map;
	struct hgclock_now now;
	struct hgclock_read_clock before, after;
	size_t meta_size;
	void *p;
	int cfd, ret;

	CHILD_EXPECT(open(CLOCK_DEV_PATH, O_RDWR) < 0 && errno == EACCES,
		     "open O_RDWR as nobody: %s, want EACCES", strerror(errno));
	cfd = open(CLOCK_DEV_PATH, O_RDONLY | O_CLOEXEC);
	CHILD_EXPECT(cfd >= 0, "open O_RDONLY as nobody: %s", strerror(errno));
	if (cfd < 0)
		return;
	/* One page first, to learn the area's length. */
	p = mmap(NULL, page, PROT_READ, MAP_SHARED, cfd, 0);
	CHILD_EXPECT(p != MAP_FAILED, "mmap one page: %s", strerror(errno));
	if (p == MAP_FAILED)
		goto out;
	meta = p;
	CHILD_EXPECT(meta->magic == HGCLOCK_META_MAGIC, "magic %#x", meta->magic);
	CHILD_EXPECT(meta->abi_major == HGCLOCK_ABI_MAJOR && meta->abi_minor >= 3,
		     "ABI %u.%u", meta->abi_major, meta->abi_minor);
	CHILD_EXPECT(meta->ring_size == 0 && meta->consumer_size == 0,
		     "ring_size %llu consumer_size %llu, want 0 0",
		     (unsigned long long)meta->ring_size,
		     (unsigned long long)meta->consumer_size);
	meta_size = meta->meta_size;
	CHILD_EXPECT(meta_size >= (size_t)page && meta_size % page == 0 &&
		     meta->header_size + (size_t)meta->nr_cpus * meta->cpu_slot_size <= meta_size,
		     "meta_size %zu for %u CPUs", meta_size, meta->nr_cpus);
	munmap(p, page);
	/* What it must refuse: writing, executing, private, too long, offset. */
	CHILD_EXPECT(mmap(NULL, meta_size, PROT_READ | PROT_WRITE, MAP_SHARED, cfd, 0) ==
		     MAP_FAILED && errno == EACCES, "mmap PROT_WRITE: want EACCES, got %s",
		     strerror(errno));
	CHILD_EXPECT(mmap(NULL, meta_size, PROT_READ | PROT_EXEC, MAP_SHARED, cfd, 0) ==
		     MAP_FAILED, "mmap PROT_EXEC succeeded");
	CHILD_EXPECT(mmap(NULL, meta_size, PROT_READ, MAP_PRIVATE, cfd, 0) == MAP_FAILED &&
		     errno == EINVAL, "mmap MAP_PRIVATE: want EINVAL, got %s", strerror(errno));
	CHILD_EXPECT(mmap(NULL, meta_size + page, PROT_READ, MAP_SHARED, cfd, 0) ==
		     MAP_FAILED && errno == EINVAL, "mmap past meta_size: want EINVAL, got %s",
		     strerror(errno));
	CHILD_EXPECT(mmap(NULL, page, PROT_READ, MAP_SHARED, cfd, page) == MAP_FAILED &&
		     errno == EINVAL, "mmap at offset 1 page: want EINVAL, got %s", strerror(errno));
	CHILD_EXPECT(ioctl(cfd, HGCLOCK_IOC_GET_INFO, NULL) < 0 && errno == ENOTTY,
		     "an ioctl on the public clock: want ENOTTY, got %s", strerror(errno));

	p = mmap(NULL, meta_size, PROT_READ, MAP_SHARED, cfd, 0);
	CHILD_EXPECT(p != MAP_FAILED, "mmap meta_size: %s", strerror(errno));
	if (p == MAP_FAILED)
		goto out;
	CHILD_EXPECT(mprotect(p, meta_size, PROT_READ | PROT_WRITE) < 0 && errno == EACCES,
		     "mprotect PROT_WRITE: want EACCES, got %s", strerror(errno));
	memset(&map, 0, sizeof(map));
	map.meta = p;
	map.map_size = meta_size;
	/* On one CPU, so that both brackets are that CPU's sched_clock. */
	memset(&before, 0, sizeof(before));
	before.size = sizeof(before);
	after = before;
	ret = ioctl(fd, HGCLOCK_IOC_READ_CLOCK, &before);
	ret = ret ?: hgclock_now_user(&map, &now);
	ret = ret ?: ioctl(fd, HGCLOCK_IOC_READ_CLOCK, &after);
	if (ret == -ENODATA) {
		/* Not a failure of the device: say so in the log. */
		fprintf(stderr, "# child: no exact conversion on this CPU: bracket not checked\n");
	} else {
		CHILD_EXPECT(ret == 0, "reads: %d", ret);
		CHILD_EXPECT(before.sample.cpu == now.cpu && now.cpu == after.sample.cpu,
			     "CPUs %u %u %u (pinned)", before.sample.cpu, now.cpu,
			     after.sample.cpu);
		CHILD_EXPECT(before.sample.sched_clock_ns <= now.sched_clock_ns &&
			     now.sched_clock_ns <= after.sample.sched_clock_ns,
			     "sched_clock %llu not within [%llu, %llu]",
			     (unsigned long long)now.sched_clock_ns,
			     (unsigned long long)before.sample.sched_clock_ns,
			     (unsigned long long)after.sample.sched_clock_ns);
	}
	munmap(p, meta_size);
out:
	close(cfd);
}

/*
 * libhgclock's application API as nobody: hgclock_clock_open(NULL) maps
 * the public clock, and a read lies between two of the kernel's own
 * readings (root's file) on the same CPU, local and perf clocks alike.
 */
static void child_library_clock(int fd)
{
	struct hgclock_read_clock before, after;
	struct hgclock_reading r;
	struct hgclock_clock *clk;

	clk = hgclock_clock_open(NULL, 0);
	CHILD_EXPECT(clk, "hgclock_clock_open(NULL) as nobody: %s", strerror(errno));
	if (!clk)
		return;
	memset(&before, 0, sizeof(before));
	before.size = sizeof(before);
	after = before;
	CHILD_EXPECT(!ioctl(fd, HGCLOCK_IOC_READ_CLOCK, &before), "READ_CLOCK: %s",
		     strerror(errno));
	if (hgclock_clock_read(clk, &r)) {
		CHILD_EXPECT(errno == ENODATA, "hgclock_clock_read: %s", strerror(errno));
		fprintf(stderr, "# child: no exact conversion on this CPU: bracket not checked\n");
		hgclock_clock_close(clk);
		return;
	}
	CHILD_EXPECT(!ioctl(fd, HGCLOCK_IOC_READ_CLOCK, &after), "READ_CLOCK: %s",
		     strerror(errno));
	CHILD_EXPECT(r.flags & HGCLOCK_READING_EXACT, "reading flags %#x: not exact", r.flags);
	CHILD_EXPECT(r.cpu == before.sample.cpu && r.cpu == after.sample.cpu,
		     "CPUs %u %u %u (pinned)", before.sample.cpu, r.cpu, after.sample.cpu);
	CHILD_EXPECT(before.sample.sched_clock_ns <= r.local_ns &&
		     r.local_ns <= after.sample.sched_clock_ns,
		     "local %llu not within [%llu, %llu]", (unsigned long long)r.local_ns,
		     (unsigned long long)before.sample.sched_clock_ns,
		     (unsigned long long)after.sample.sched_clock_ns);
	if (r.flags & HGCLOCK_READING_PERF)
		CHILD_EXPECT(before.sample.local_clock_ns <= r.perf_ns &&
			     r.perf_ns <= after.sample.local_clock_ns,
			     "perf %llu not within [%llu, %llu]", (unsigned long long)r.perf_ns,
			     (unsigned long long)before.sample.local_clock_ns,
			     (unsigned long long)after.sample.local_clock_ns);
	/* The fast path: perf's clock alone, between two kernel readings. */
	if (r.flags & HGCLOCK_READING_PERF) {
		uint64_t perf_ns = 0;
		int ret;

		CHILD_EXPECT(!ioctl(fd, HGCLOCK_IOC_READ_CLOCK, &before), "READ_CLOCK: %s",
			     strerror(errno));
		ret = hgclock_clock_perf_ns(clk, &perf_ns);
		CHILD_EXPECT(!ioctl(fd, HGCLOCK_IOC_READ_CLOCK, &after), "READ_CLOCK: %s",
			     strerror(errno));
		CHILD_EXPECT(ret == 0, "hgclock_clock_perf_ns: %s", strerror(errno));
		CHILD_EXPECT(before.sample.local_clock_ns <= perf_ns &&
			     perf_ns <= after.sample.local_clock_ns,
			     "perf_ns %llu not within [%llu, %llu]", (unsigned long long)perf_ns,
			     (unsigned long long)before.sample.local_clock_ns,
			     (unsigned long long)after.sample.local_clock_ns);
	}
	hgclock_clock_close(clk);
}

TEST_F(perm, public_clock_library_for_nobody)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(0, &one);
	ASSERT_EQ(0, sched_setaffinity(0, sizeof(one), &one));
	EXPECT_EQ(0, run_as_nobody(self->fd, 0, 0, child_library_clock));
}

/*
 * Application events as nobody (hgclock_events_open(3)): the file is
 * created (and not replaced without HGCLOCK_EVENTS_OVERWRITE), an event
 * stamped between two of the kernel's readings on one CPU lies between
 * them, and two threads' events on every CPU come back whole, each
 * CPU's in time order (the file is ordered per CPU, not as a whole), with
 * the process's id and name.
 */
#define EV_THREAD_EVENTS	2000
static struct hgclock_events *child_evs;

static void *child_events_thread(void *arg)
{
	cpu_set_t all;

	(void)arg;
	/* Unpinned: the events land on whatever CPUs the scheduler picks. */
	CPU_ZERO(&all);
	for (int c = 0; c < CPU_SETSIZE; c++)
		CPU_SET(c, &all);
	sched_setaffinity(0, sizeof(all), &all);
	for (int i = 0; i < EV_THREAD_EVENTS; i++)
		if (hgclock_event(child_evs, HGCLOCK_EVENT_INSTANT, "tick", "thread"))
			return (void *)(size_t)errno;
	return NULL;
}

static char events_path[64];

static void child_events(int fd)
{
	struct hgclock_read_clock before, after;
	struct hgclock_clock *clk;
	struct hgclock_events *again;
	pthread_t t[2];
	void *res[2];

	prctl(PR_SET_NAME, "evtest");
	clk = hgclock_clock_open(NULL, 0);
	CHILD_EXPECT(clk, "hgclock_clock_open(NULL): %s", strerror(errno));
	if (!clk)
		return;
	child_evs = hgclock_events_open(clk, events_path, 0);
	CHILD_EXPECT(child_evs, "hgclock_events_open(%s): %s", events_path, strerror(errno));
	if (!child_evs)
		return;
	again = hgclock_events_open(clk, events_path, 0);
	CHILD_EXPECT(!again && errno == EEXIST, "a second open: %p, %s", (void *)again,
		     strerror(errno));
	CHILD_EXPECT(hgclock_event(child_evs, 9, "x", NULL) == -1 && errno == EINVAL,
		     "kind 9 accepted");
	CHILD_EXPECT(hgclock_event(child_evs, HGCLOCK_EVENT_INSTANT, "", NULL) == -1 &&
		     errno == EINVAL, "an empty name accepted");
	memset(&before, 0, sizeof(before));
	before.size = sizeof(before);
	after = before;
	CHILD_EXPECT(!ioctl(fd, HGCLOCK_IOC_READ_CLOCK, &before), "READ_CLOCK: %s",
		     strerror(errno));
	if (hgclock_event(child_evs, HGCLOCK_EVENT_BEGIN, "bracketed", "first")) {
		/* As hgclock_clock_read(): no exact conversion, no fallback for nobody. */
		CHILD_EXPECT(errno == ENODATA, "hgclock_event: %s", strerror(errno));
		CHILD_EXPECT(!hgclock_events_close(child_evs), "close: %s", strerror(errno));
		hgclock_clock_close(clk);
		return;
	}
	CHILD_EXPECT(!ioctl(fd, HGCLOCK_IOC_READ_CLOCK, &after), "READ_CLOCK: %s",
		     strerror(errno));
	/* The bracket, for the parent's check: as the END event's text. */
	{
		char text[64];

		snprintf(text, sizeof(text), "%llu %llu",
			 (unsigned long long)before.sample.local_clock_ns,
			 (unsigned long long)after.sample.local_clock_ns);
		CHILD_EXPECT(!hgclock_event(child_evs, HGCLOCK_EVENT_END, "bracketed", text),
			     "hgclock_event: %s", strerror(errno));
	}
	for (int i = 0; i < 2; i++)
		CHILD_EXPECT(!pthread_create(&t[i], NULL, child_events_thread, NULL), "thread");
	for (int i = 0; i < 2; i++) {
		pthread_join(t[i], &res[i]);
		CHILD_EXPECT(!res[i], "thread %d: %s", i, strerror((int)(size_t)res[i]));
	}
	CHILD_EXPECT(!hgclock_events_close(child_evs), "close: %s", strerror(errno));
	hgclock_clock_close(clk);
}

TEST_F(perm, public_clock_events_for_nobody)
{
	uint64_t last[HGEV_MAX_CPUS] = { 0 };
	unsigned long long lo = 0, hi = 0;
	struct hgev_header h;
	struct hgev_rec r;
	int n = 0, n0 = 0, cpus = 0, backwards = 0, exact = 0, fd;
	char err[256];
	cpu_set_t one;
	FILE *f;

	CPU_ZERO(&one);
	CPU_SET(0, &one);
	ASSERT_EQ(0, sched_setaffinity(0, sizeof(one), &one));
	strcpy(events_path, "/tmp/hgclock-events-XXXXXX");
	fd = mkstemp(events_path);
	ASSERT_LE(0, fd);
	close(fd);
	unlink(events_path);	/* nobody creates it */
	EXPECT_EQ(0, run_as_nobody(self->fd, 0, 0, child_events));
	f = fopen(events_path, "rb");
	ASSERT_NE(NULL, f) TH_LOG("%s: %s", events_path, strerror(errno));
	ASSERT_EQ(0, hgev_read_header(f, &h, err, sizeof(err))) TH_LOG("%s", err);
	EXPECT_EQ(HGEV_CLOCK_PERF, h.clock);
	EXPECT_STREQ("evtest", h.comm);
	while (hgev_read_record(f, &r, err, sizeof(err)) == 1) {
		if (!last[r.cpu])
			cpus++;
		if (r.ts < last[r.cpu])
			backwards++;
		last[r.cpu] = r.ts;
		exact += !!(r.flags & HGEV_REC_EXACT);
		/*
		 * The bracket is CPU 0's first two records (stamped there
		 * before the threads start); the file is per-CPU ordered, so
		 * another CPU's buffer may come before it.
		 */
		if (r.cpu == 0 && n0 == 0) {
			EXPECT_STREQ("bracketed", r.name);
			lo = r.ts;
		} else if (r.cpu == 0 && n0 == 1) {
			unsigned long long b, a;

			ASSERT_EQ(2, sscanf(r.text, "%llu %llu", &b, &a));
			EXPECT_LE(b, lo);
			EXPECT_GE(a, lo);
			hi = a;
		}
		n0 += r.cpu == 0;
		n++;
	}
	fclose(f);
	if (!n) {
		unlink(events_path);
		SKIP(return, "no exact conversion on CPU 0 (TCG without tsc=reliable?): "
		     "nobody's events cannot be stamped");
	}
	TH_LOG("%d events on %d CPUs, %d stamped without a syscall; first at %llu, bracket end %llu",
	       n, cpus, exact, lo, hi);
	EXPECT_EQ(2 + 2 * EV_THREAD_EVENTS, n);
	EXPECT_EQ(0, backwards);
	unlink(events_path);
}

TEST_F(perm, public_clock_node)
{
	struct stat st;

	ASSERT_EQ(0, stat(CLOCK_DEV_PATH, &st));
	EXPECT_TRUE(S_ISCHR(st.st_mode));
	EXPECT_EQ(0444, st.st_mode & 07777);
	EXPECT_EQ(0, st.st_uid);
}

TEST_F(perm, public_clock_for_nobody)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(0, &one);
	ASSERT_EQ(0, sched_setaffinity(0, sizeof(one), &one));
	EXPECT_EQ(0, run_as_nobody(self->fd, 0, 0, child_public_clock));
}

/*
 * The public area says what a session's meta area says: the same
 * conversion on every CPU (a snapshot first, so that every CPU has one),
 * the same online flags, and nothing in the heads or losses.
 */
TEST_F(perm, public_clock_same_conversions)
{
	const struct hgclock_meta *pub;
	struct hgclock_map map;
	unsigned int cpu, compared = 0;
	size_t len;
	int cfd, round;

	ASSERT_LE(1, hgclock_snapshot(self->fd, -1));
	ASSERT_EQ(0, hgclock_map_open(self->fd, 0, &map));
	cfd = open(CLOCK_DEV_PATH, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, cfd);
	len = map.meta->meta_size;
	pub = mmap(NULL, len, PROT_READ, MAP_SHARED, cfd, 0);
	ASSERT_NE(MAP_FAILED, pub);
	EXPECT_EQ(map.meta->nr_cpus, pub->nr_cpus);
	EXPECT_EQ(map.meta->meta_size, pub->meta_size);
	EXPECT_EQ(map.meta->tsc_khz, pub->tsc_khz);
	for (cpu = 0; cpu < pub->nr_cpus; cpu++) {
		const struct hgclock_meta_cpu *ps = (const void *)pub + pub->header_size +
						    (size_t)cpu * pub->cpu_slot_size;
		const struct hgclock_meta_cpu *ss = hgclock_map_slot(&map, cpu);
		struct hgclock_conversion pc, sc;
		bool same = false;

		EXPECT_EQ(ss->online, ps->online) TH_LOG("CPU %u", cpu);
		EXPECT_EQ(0, ps->head);
		EXPECT_EQ(0, ps->lost);
		if (!ss->online)
			continue;
		/* A snapshot may land between the two copies: try again. */
		for (round = 0; round < 5 && !same; round++) {
			ASSERT_TRUE(copy_conv(ps, &pc));
			ASSERT_TRUE(copy_conv(ss, &sc));
			same = !memcmp(&pc, &sc, sizeof(pc));
		}
		EXPECT_TRUE(same) TH_LOG("CPU %u: public and session conversions differ", cpu);
		EXPECT_NE(0, pc.flags & HGCLOCK_CONV_VALID) TH_LOG("CPU %u", cpu);
		compared++;
	}
	EXPECT_LE(1, compared);
	munmap((void *)pub, len);
	close(cfd);
	hgclock_map_close(&map);
}

/*
 * Every record writer walks all sessions with interrupts off: at most
 * max_sessions open files (issue 30 item 4).  Past it ENFILE; closing
 * them all is quick (no grace period waited per close); then an open
 * works again.
 */
TEST_F(perm, sessions_bounded)
{
	unsigned int max = param_or("max_sessions", 64);
	struct timespec t0, t1;
	int *fds, n, i, err, nfd;

	fds = calloc(max + 8, sizeof(*fds));
	ASSERT_NE(NULL, fds);
	n = open_until_refused(fds, max + 8, &err);
	/* The fixture holds one session. */
	EXPECT_GE((int)max - 1, n);
	EXPECT_EQ(ENFILE, err);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < n; i++)
		close(fds[i]);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	TH_LOG("%d sessions opened, closed in %.1f ms", n,
	       (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
	nfd = open(HGCLOCK_DEV_PATH, O_RDWR | O_CLOEXEC);
	EXPECT_LE(0, nfd);
	if (nfd >= 0)
		close(nfd);
	free(fds);
}

/* A user without CAP_SYS_ADMIN: max_sessions_per_user, then EUSERS. */
TEST_F(perm, sessions_per_user)
{
	EXPECT_EQ(0, run_with_group_node(self->fd, 0, child_sessions_per_user));
}

/*
 * RING_CONFIG's snapshots of every CPU are charged to the budget (item 5).
 * A machine whose all-CPU reads cannot reach the budget cannot spend it
 * first: a skip, as unprivileged_cross_cpu_budget.
 */
TEST_F(perm, ring_config_charged_to_budget)
{
	int ret = run_with_group_node(self->fd, 0, child_ring_config_budget);

	if (ret == CHILD_TOO_SLOW)
		SKIP(return, "the all-CPU reads were slower than the budget (see the child's "
		     "line): it cannot be spent here");
	EXPECT_EQ(0, ret);
}

/*
 * One user without CAP_SYS_ADMIN maps sessions of rings big enough that
 * eight would take all of ring_max_mb until refused: ENOSPC once it holds
 * its ring_user_max_mb, with another user and root still getting rings
 * while it keeps them (issue 30 item 5).  Without the per-user cap that
 * user takes everything and the others get ENOSPC.
 */
TEST_F(perm, ring_memory_per_user)
{
	unsigned int user_max_mb = param_or("ring_user_max_mb", 0);
	int res[2], go[2], out[2] = { 0, 0 }, status, rootfd, err;
	struct hgclock_info info;
	__u64 user_max, before;
	struct stat st;
	pid_t pid;
	char c = 0;

	memset(&info, 0, sizeof(info));
	info.size = sizeof(info);
	ASSERT_EQ(0, ioctl(self->fd, HGCLOCK_IOC_GET_INFO, &info));
	ASSERT_LT(0, info.ring_max_bytes);
	test_ring_size = big_ring_size(&info);
	user_max = user_max_mb ? (__u64)user_max_mb << 20 : info.ring_max_bytes / 4;
	before = info.ring_bytes;
	ASSERT_EQ(0, pipe(res));
	ASSERT_EQ(0, pipe(go));
	ASSERT_EQ(0, stat(HGCLOCK_DEV_PATH, &st));
	ASSERT_EQ(0, chown(HGCLOCK_DEV_PATH, 0, TEST_GID));
	ASSERT_EQ(0, chmod(HGCLOCK_DEV_PATH, 0660));

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int fds[1024 + 8];

		drop_to_nobody(0, TEST_GID);
		for (out[0] = 0; out[0] < 1024; out[0]++) {
			out[1] = map_session(test_ring_size, &fds[out[0]]);
			if (out[1])
				break;
		}
		if (write(res[1], out, sizeof(out)) != sizeof(out) || read(go[0], &c, 1) != 1)
			_exit(1);
		_exit(0);
	}
	ASSERT_EQ((ssize_t)sizeof(out), read(res[0], out, sizeof(out)));
	ASSERT_EQ(0, ioctl(self->fd, HGCLOCK_IOC_GET_INFO, &info));
	TH_LOG("nobody: %d sessions of %llu-byte rings on %u CPUs, then %s: %llu bytes of %llu (per user %llu)",
	       out[0], (unsigned long long)test_ring_size, info.nr_online_cpus,
	       strerror(out[1]), (unsigned long long)(info.ring_bytes - before),
	       (unsigned long long)info.ring_max_bytes, (unsigned long long)user_max);
	EXPECT_EQ(ENOSPC, out[1]);
	EXPECT_GE(user_max, info.ring_bytes - before);

	/* Another user still gets its share, */
	EXPECT_EQ(0, run_as_uid(NOBODY - 1, self->fd, 0, TEST_GID, child_map_one_session));
	/* and so does the recorder (CAP_SYS_ADMIN). */
	err = map_session(test_ring_size, &rootfd);
	EXPECT_EQ(0, err) TH_LOG("root: a session of %llu-byte rings: %s",
				 (unsigned long long)test_ring_size, strerror(err));

	EXPECT_EQ(1, write(go[1], &c, 1));
	EXPECT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_EQ(0, chown(HGCLOCK_DEV_PATH, st.st_uid, st.st_gid));
	EXPECT_EQ(0, chmod(HGCLOCK_DEV_PATH, st.st_mode & 07777));
}

TEST_HARNESS_MAIN
