// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock kselftest: random ioctls against /dev/hgclock, for a bounded
 * time (HGCLOCK_FUZZ_IOCTL_SECONDS, default 20; HGCLOCK_FUZZ_SEED to
 * replay a run, the seed is printed).
 *
 * Commands: hgclock's own, hgclock's numbers with a random size or
 * direction, random numbers of hgclock's type and of other types.
 * Arguments: random bytes of random length with, often, a plausible size
 * word, flags, CPU numbers and user pointers on top; the argument pointer
 * itself is valid, short of a page end (the rest unmapped), read-only,
 * misaligned, NULL, unmapped or a kernel address.  Run as root, so that
 * every ioctl gets past its permission check and into its argument.
 *
 * Each call must succeed or fail with an errno Documentation/uapi.rst
 * lists for that ioctl (ENOTTY for any command the module does not
 * know).  read() and write() must fail with EINVAL.  Afterwards the
 * kernel log written during the run must hold no warning, and the
 * configuration and tracking table are put back as they were.
 *
 * Other types' commands exclude those the VFS handles itself before the
 * driver sees them (FIOCLEX, FIONBIO, FIFREEZE, FS_IOC_*, FICLONE, ...):
 * they act on the file or the file system, not on hgclock.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "../user/lib/libhgclock.h"
#include "test_util.h"

static uint64_t rng_state;

static uint64_t rnd(void)
{
	/* xorshift64*: reproducible from the printed seed */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

static uint64_t rnd_below(uint64_t n)
{
	return n ? rnd() % n : 0;
}

/* Errno sets of Documentation/uapi.rst, per command. */
struct known_cmd {
	unsigned long cmd;
	const char *name;
	int errs[8];		/* 0 terminated */
};

/* E2BIG: a size past the first published one with a non-zero tail. */
static const struct known_cmd known[] = {
	{ HGCLOCK_IOC_GET_INFO, "GET_INFO", { EFAULT, EINVAL } },
	{ HGCLOCK_IOC_READ_CLOCK, "READ_CLOCK", { EFAULT, EINVAL, ENOSPC, ENOMEM, E2BIG } },
	{ HGCLOCK_IOC_NOP, "NOP", { 0 } },
	{ HGCLOCK_IOC_RING_CONFIG, "RING_CONFIG",
	  { EFAULT, EINVAL, EPERM, EBUSY, ENOMEM, ENOSPC, E2BIG } },
	{ HGCLOCK_IOC_SNAPSHOT, "SNAPSHOT", { EFAULT, EINVAL, E2BIG } },
	{ HGCLOCK_IOC_PRODUCE, "PRODUCE", { EPERM, EFAULT, EINVAL, E2BIG } },
	{ HGCLOCK_IOC_TRACK, "TRACK",
	  { EPERM, EFAULT, EINVAL, ENOENT, EEXIST, ENOSPC, E2BIG } },
	{ HGCLOCK_IOC_LIST_VCPUS, "LIST_VCPUS",
	  { EPERM, EFAULT, EINVAL, ENOMEM, ENOSPC, E2BIG } },
	{ HGCLOCK_IOC_EXIT_PAIR, "EXIT_PAIR",
	  { EFAULT, EINVAL, ENODEV, ENOMEM, ETIMEDOUT, E2BIG } },
};
#define NR_KNOWN (sizeof(known) / sizeof(known[0]))

/* ioctl types the VFS (do_vfs_ioctl, file_ioctl) answers itself. */
static bool vfs_type(unsigned int type)
{
	switch (type) {
	case 0x00:	/* FIBMAP, FIGETBSZ */
	case 0x12:	/* BLK* */
	case 0x15:	/* FS_IOC_GETFSUUID, FS_IOC_GETFSSYSFSPATH */
	case 0x54:	/* 'T': FIONBIO, FIOCLEX, FIOASYNC, FIONREAD, FIOQSIZE */
	case 0x58:	/* 'X': FIFREEZE, FITHAW, FITRIM, FS_IOC_FS[GS]ETXATTR */
	case 0x66:	/* 'f': FS_IOC_[GS]ETFLAGS */
	case 0x76:	/* 'v': FS_IOC_[GS]ETVERSION */
	case 0x94:	/* FICLONE, FIDEDUPERANGE, FS_IOC_[GS]ETFSLABEL */
		return true;
	}
	return false;
}

struct pool {
	unsigned char *page;	/* two pages: RW, then PROT_NONE */
	unsigned char *ro;	/* a read-only page */
	unsigned long unmapped;	/* an address with nothing mapped */
	int ncpu;
	unsigned int nr_cpu_ids;
};

static const uint64_t kernel_ptrs[] = {
	0xffffffff81000000ULL, 0xffff888000000000ULL, 0xffffc90000000000ULL,
	0xffffffffffffffffULL, 0x8000000000000000ULL, 0x00007ffffffff000ULL,
};

/* A user pointer for samples_ptr/vcpus_ptr: usually valid, often not. */
static uint64_t rnd_uptr(struct pool *p)
{
	switch (rnd_below(8)) {
	case 0: return 0;
	case 1: return p->unmapped;
	case 2: return kernel_ptrs[rnd_below(6)];
	case 3: return (uintptr_t)p->ro;
	case 4: return (uintptr_t)p->page + 4096 - 8 * rnd_below(64);	/* runs off */
	case 5: return (uintptr_t)p->page + 1 + rnd_below(7);		/* misaligned */
	default: return (uintptr_t)p->page;
	}
}

static uint32_t rnd_cpu(struct pool *p)
{
	switch (rnd_below(6)) {
	case 0: return (uint32_t)rnd();
	case 1: return p->nr_cpu_ids;
	case 2: return p->nr_cpu_ids + rnd_below(4096);
	default: return rnd_below(p->ncpu);
	}
}

/*
 * Fills @arg (@len bytes, 8 aligned at least up to 128) with random bytes
 * and, most of the time, plausible words at the offsets every hgclock
 * structure shares: size, flags, then CPU numbers and pointers.
 */
static void fill_arg(struct pool *p, unsigned char *arg, size_t len, unsigned long cmd)
{
	size_t i;

	/* Mostly zero: reserved words must be zero for a call to get far. */
	for (i = 0; i < len; i++)
		arg[i] = rnd_below(16) ? 0 : (unsigned char)rnd();
	if (len >= 4 && rnd_below(4)) {
		uint32_t size = _IOC_SIZE(cmd);

		if (!rnd_below(8))
			size = (uint32_t)rnd_below(5000);
		memcpy(arg, &size, 4);
	}
	if (len >= 8 && rnd_below(2)) {
		uint32_t flags = 1U << rnd_below(4);

		if (!rnd_below(4))
			flags = (uint32_t)rnd();
		memcpy(arg + 4, &flags, 4);
	}
	if (len >= 12 && rnd_below(2)) {
		uint32_t v = rnd_cpu(p);

		memcpy(arg + 8, &v, 4);
	}
	/* READ_CLOCK's nr_samples, LIST_VCPUS's nr: small capacities. */
	if (len >= 16 && rnd_below(2)) {
		uint32_t v = (uint32_t)rnd_below(rnd_below(4) ? 64 : 1U << 31);

		memcpy(arg + (cmd == HGCLOCK_IOC_LIST_VCPUS ? 4 : 12), &v, 4);
	}
	/* READ_CLOCK's samples_ptr, LIST_VCPUS's vcpus_ptr. */
	if (rnd_below(2)) {
		size_t off = cmd == HGCLOCK_IOC_LIST_VCPUS ? 8 : 16;
		uint64_t v = rnd_uptr(p);

		if (len >= off + 8)
			memcpy(arg + off, &v, 8);
	}
	/*
	 * PRODUCE's count: valid ones small (a fuzz run must not produce for
	 * minutes), invalid ones just past the limit or anywhere.
	 */
	if (cmd == HGCLOCK_IOC_PRODUCE && len >= 16) {
		uint64_t count;

		if (rnd_below(8))
			count = rnd_below(4096);
		else if (rnd_below(2))
			count = (1ULL << 24) + 1 + rnd_below(1000);
		else
			count = rnd() | (1ULL << 63);
		memcpy(arg + 8, &count, 8);
	}
	/* RING_CONFIG: sizes around the valid range, plausible periods. */
	if (cmd == HGCLOCK_IOC_RING_CONFIG && len >= 32 && !rnd_below(4)) {
		uint64_t size = 1ULL << (12 + rnd_below(16));	/* 4 KiB .. 128 MiB */
		uint64_t wm = rnd_below(2) ? size / 2 : rnd_below(size * 2);
		uint64_t period = rnd_below(2) ? 0 : rnd_below(3000000000ULL);

		memcpy(arg + 8, &size, 8);
		memcpy(arg + 16, &wm, 8);
		memcpy(arg + 24, &period, 8);
	}
	/* TRACK's tid: ourselves, pid 1, nothing, or random. */
	if (cmd == HGCLOCK_IOC_TRACK && len >= 12 && rnd_below(2)) {
		int32_t tid;

		switch (rnd_below(4)) {
		case 0: tid = getpid(); break;
		case 1: tid = 1; break;
		case 2: tid = (int32_t)rnd_below(1 << 22); break;
		default: tid = (int32_t)rnd(); break;
		}
		memcpy(arg + 8, &tid, 4);
	}
}

struct stats {
	unsigned long calls, ok, bad;
	unsigned long per_known_ok[NR_KNOWN];
};

static void report_bad(struct stats *st, const char *what, unsigned long cmd,
		       size_t len, int err)
{
	st->bad++;
	if (st->bad <= 20)
		fprintf(stderr, "# %s cmd %#lx (arg %zu bytes): %s, not documented\n",
			what, cmd, len, strerror(err));
}

static bool errno_allowed(const struct known_cmd *k, int err)
{
	int i;

	for (i = 0; i < 8 && k->errs[i]; i++)
		if (k->errs[i] == err)
			return true;
	return false;
}

static void one_call(struct pool *p, int fd, struct stats *st)
{
	const struct known_cmd *k = NULL;
	unsigned char *arg, *base;
	unsigned long cmd;
	size_t len = 0;
	unsigned int kind = rnd_below(16);
	int ret, err, i;

	if (kind < 9) {			/* an hgclock command as is */
		k = &known[rnd_below(NR_KNOWN)];
		cmd = k->cmd;
	} else if (kind < 12) {		/* an hgclock number, size/dir changed */
		unsigned int nr = rnd_below(NR_KNOWN + 2);

		cmd = _IOC(rnd_below(4), HGCLOCK_IOC_MAGIC, nr, rnd_below(1 << 14));
	} else if (kind < 14) {		/* anything of hgclock's type */
		cmd = _IOC(rnd_below(4), HGCLOCK_IOC_MAGIC, rnd_below(256),
			   rnd_below(1 << 14));
	} else {			/* another type */
		unsigned int type;

		do
			type = rnd_below(256);
		while (type == HGCLOCK_IOC_MAGIC || vfs_type(type));
		cmd = _IOC(rnd_below(4), type, rnd_below(256), rnd_below(1 << 14));
	}
	for (i = 0; !k && i < (int)NR_KNOWN; i++)
		if (known[i].cmd == cmd)
			k = &known[i];

	/* Where the argument lives. */
	switch (rnd_below(12)) {
	case 0:
		arg = NULL;
		break;
	case 1:
		arg = (unsigned char *)p->unmapped;
		break;
	case 2:
		arg = (unsigned char *)(uintptr_t)kernel_ptrs[rnd_below(6)];
		break;
	case 3:
		arg = p->ro;
		break;
	default:
		/* Ends at the page end (the next page is PROT_NONE) or earlier. */
		len = rnd_below(4) ? _IOC_SIZE(cmd) : rnd_below(512);
		if (len > 4096)
			len = 4096;
		base = p->page + 4096 - len;
		if (!rnd_below(4) && base - p->page >= 64)
			base -= 8 * rnd_below(8);
		if (!rnd_below(6) && base - p->page >= 8)
			base -= 1 + rnd_below(7);	/* misaligned */
		arg = base;
		fill_arg(p, arg, len, k ? k->cmd : cmd);
		break;
	}

	st->calls++;
	ret = ioctl(fd, cmd, arg);
	err = errno;
	if (!ret) {
		st->ok++;
		if (k)
			st->per_known_ok[k - known]++;
		else
			report_bad(st, "unknown, yet succeeded:", cmd, len, 0);
		return;
	}
	if (k ? !errno_allowed(k, err) : err != ENOTTY)
		report_bad(st, k ? k->name : "unknown", cmd, len, err);
}

/* Lines of /dev/kmsg written since @fd was opened that hold an error. */
static int kmsg_errors(int fd)
{
	static const char *const bad[] = {
		"WARNING:", "BUG:", "Oops", "general protection", "KASAN", "UBSAN",
		"possible circular locking", "sleeping function called from invalid",
		"Call Trace", "hgclock: cannot",
	};
	char line[2048];
	int n = 0;
	ssize_t r;
	size_t i;

	for (;;) {
		r = read(fd, line, sizeof(line) - 1);
		if (r < 0 && errno == EPIPE)
			continue;	/* overwritten records: keep reading */
		if (r <= 0)
			break;
		line[r] = 0;
		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			if (strstr(line, bad[i])) {
				fprintf(stderr, "# kernel: %s", strchr(line, ';') ?: line);
				n++;
				break;
			}
		}
	}
	return n;
}

static void untrack_all(int fd, const struct hgclock_vcpu_info *keep, unsigned int nkeep)
{
	struct hgclock_vcpu_info *infos;
	unsigned int nr, i, j;

	if (hgclock_list_vcpus(fd, &infos, &nr))
		return;
	for (i = 0; i < nr; i++) {
		bool kept = false;

		for (j = 0; j < nkeep; j++)
			kept |= keep[j].tid == infos[i].tid;
		if (!kept && (infos[i].flags & HGCLOCK_VCPU_MANUAL))
			hgclock_track(fd, infos[i].tid, 0);
	}
	free(infos);
}

FIXTURE(fuzz) {
	int unused;
};

FIXTURE_SETUP(fuzz)
{
}

FIXTURE_TEARDOWN(fuzz)
{
}

/* The harness's 30 s default is shorter than a run: room for 600 s. */
TEST_F_TIMEOUT(fuzz, ioctls, 660)
{
	const char *env_s = getenv("HGCLOCK_FUZZ_IOCTL_SECONDS");
	const char *env_seed = getenv("HGCLOCK_FUZZ_SEED");
	struct hgclock_ring_config saved, cfg;
	struct hgclock_vcpu_info *tracked;
	unsigned int nr_tracked;
	struct hgclock_info info;
	struct stats st;
	struct pool p;
	time_t end, seconds = env_s ? atoi(env_s) : 20;
	int fd, kmsg;
	char c;
	size_t i;

	fd = open(HGCLOCK_DEV_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		SKIP(return, HGCLOCK_DEV_PATH " missing: module not loaded");
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, hgclock_get_info(fd, &info));
	memset(&saved, 0, sizeof(saved));
	ASSERT_EQ(0, hgclock_ring_config(fd, &saved));
	ASSERT_EQ(0, hgclock_list_vcpus(fd, &tracked, &nr_tracked));

	rng_state = env_seed ? strtoull(env_seed, NULL, 0) : (uint64_t)time(NULL) * 2654435761ULL;
	if (!rng_state)
		rng_state = 1;
	TH_LOG("seed %#llx (HGCLOCK_FUZZ_SEED), %ld s (HGCLOCK_FUZZ_IOCTL_SECONDS)",
	       (unsigned long long)rng_state, (long)seconds);

	memset(&p, 0, sizeof(p));
	p.ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
	p.nr_cpu_ids = info.nr_cpu_ids;
	p.page = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, p.page);
	ASSERT_EQ(0, mprotect(p.page + 4096, 4096, PROT_NONE));
	/* The third page, unmapped: a hole right after the guard page. */
	ASSERT_EQ(0, munmap(p.page + 2 * 4096, 4096));
	p.unmapped = (unsigned long)(p.page + 2 * 4096);
	p.ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, p.ro);

	kmsg = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (kmsg >= 0)
		lseek(kmsg, 0, SEEK_END);

	memset(&st, 0, sizeof(st));
	end = time(NULL) + seconds;
	while (time(NULL) < end) {
		for (i = 0; i < 64; i++)
			one_call(&p, fd, &st);
		/* read() and write() do not exist: EINVAL. */
		if (read(fd, &c, rnd_below(2)) != -1 || errno != EINVAL)
			report_bad(&st, "read()", 0, 1, errno);
		if (write(fd, &c, 1) != -1 || errno != EINVAL)
			report_bad(&st, "write()", 0, 1, errno);
	}

	/* Put back what the fuzzing may have changed. */
	untrack_all(fd, tracked, nr_tracked);
	free(tracked);
	cfg = saved;
	cfg.flags = HGCLOCK_CFG_FLAGS_ALL;
	EXPECT_EQ(0, hgclock_ring_config(fd, &cfg));

	TH_LOG("%lu calls, %lu succeeded, %lu undocumented results", st.calls, st.ok, st.bad);
	for (i = 0; i < NR_KNOWN; i++)
		TH_LOG("  %-12s %lu succeeded", known[i].name, st.per_known_ok[i]);
	EXPECT_EQ(0, st.bad);
	/* Each ioctl was reached and got past its checks at least once. */
	for (i = 0; i < NR_KNOWN; i++)
		EXPECT_LT(0, st.per_known_ok[i]);
	if (kmsg >= 0) {
		EXPECT_EQ(0, kmsg_errors(kmsg));
		close(kmsg);
	}
	close(fd);
}

TEST_HARNESS_MAIN
