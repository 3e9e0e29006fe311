// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock kselftests: many users at once, unload attempts under them, and
 * CPU hotplug under a draining consumer.  Each test runs for
 * HGCLOCK_STRESS_SECONDS (default 12).  Run as root with hgclock.ko
 * loaded; vm-tests.sh unloads and reloads the module right after, once
 * everything here is closed.
 *
 * concurrent_users: openers, ioctl readers, mappers, a poller and the
 * consumer, all at once, while another thread keeps asking the kernel to
 * unload the module (delete_module(), and rmmod now and then).  Every
 * call must succeed (or give the one documented refusal, EBUSY for a
 * second consumer) and every unload attempt must fail with EAGAIN or
 * EBUSY: a mapping and an open file each pin the module.
 *
 * hotplug_storm: CPUs go offline and online in a loop while snapshots
 * are taken (periodic every 1 ms, by ioctl, at each CPU's return) into
 * 8 KiB rings and the consumer drains them, sometimes too slowly.  Every
 * snapshot must be delivered or counted lost: per CPU, the gap in the
 * snapshot sequence numbers before each delivered snapshot equals the
 * LOST records in between, and at the end delivered + lost equals the
 * last sequence number and the meta area's lost count.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "../user/lib/libhgclock.h"
#include "test_util.h"

static int stress_seconds(void)
{
	const char *s = getenv("HGCLOCK_STRESS_SECONDS");

	return s && atoi(s) > 0 ? atoi(s) : 12;
}

static int ncpus_online(void)
{
	return (int)sysconf(_SC_NPROCESSORS_ONLN);
}

struct shared {
	atomic_int stop;
	atomic_long ops;
	atomic_long bad;		/* undocumented results */
	atomic_long unload_tries;
	atomic_long unloaded;		/* delete_module() or rmmod succeeded */
	int ncpu;
	int consumer_fd;
	struct hgclock_map *map;	/* the consumer's mapping */
};

static void bad_result(struct shared *sh, const char *what, int err)
{
	if (atomic_fetch_add(&sh->bad, 1) < 20)
		fprintf(stderr, "# %s: %s\n", what, strerror(err));
}

static void *opener(void *arg)
{
	struct shared *sh = arg;
	struct hgclock_info info;

	while (!atomic_load(&sh->stop)) {
		int fd = open(HGCLOCK_DEV_PATH, O_RDWR | O_CLOEXEC);

		if (fd < 0) {
			bad_result(sh, "open", errno);
			continue;
		}
		if (hgclock_get_info(fd, &info))
			bad_result(sh, "GET_INFO", errno);
		close(fd);
		atomic_fetch_add(&sh->ops, 1);
	}
	return NULL;
}

static void *reader(void *arg)
{
	struct shared *sh = arg;
	struct hgclock_clock_sample samples[64], one;
	struct hgclock_vcpu_info *infos;
	struct hgclock_ring_config cfg;
	unsigned int n, i = 0;
	int fd, ret;

	fd = open(HGCLOCK_DEV_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		bad_result(sh, "reader open", errno);
		return NULL;
	}
	while (!atomic_load(&sh->stop)) {
		switch (i++ % 6) {
		case 0:
			ret = hgclock_read_clock(fd, -1, &one);
			break;
		case 1:
			ret = hgclock_read_clock(fd, i % sh->ncpu, &one);
			break;
		case 2:
			ret = hgclock_read_all_cpus(fd, samples, 64, &n);
			ret = ret < 0 ? ret : 0;
			break;
		case 3:
			ret = hgclock_snapshot(fd, -1);
			ret = ret < 0 ? ret : 0;
			break;
		case 4:
			memset(&cfg, 0, sizeof(cfg));
			ret = hgclock_ring_config(fd, &cfg);
			break;
		default:
			ret = hgclock_list_vcpus(fd, &infos, &n);
			if (!ret)
				free(infos);
			break;
		}
		if (ret)
			bad_result(sh, "reader ioctl", -ret);
		atomic_fetch_add(&sh->ops, 1);
	}
	close(fd);
	return NULL;
}

/*
 * Maps the rings, as a consumer and read-only, in a session of its own
 * (ABI 1.2: every open file has its own rings, no EBUSY any more).
 */
static void *mapper(void *arg)
{
	struct shared *sh = arg;
	struct hgclock_map map;
	unsigned int i = 0;
	int fd, ret;

	fd = open(HGCLOCK_DEV_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		bad_result(sh, "mapper open", errno);
		return NULL;
	}
	while (!atomic_load(&sh->stop)) {
		int flags = (i++ % 3) == 0 ? HGCLOCK_MAP_CONSUMER : HGCLOCK_MAP_TAILS_RO;

		ret = hgclock_map_open(fd, flags, &map);
		if (ret) {
			bad_result(sh, "mapper mmap", -ret);
			continue;
		}
		if (map.meta->magic != HGCLOCK_META_MAGIC)
			bad_result(sh, "mapper: bad magic", EPROTO);
		hgclock_map_close(&map);
		atomic_fetch_add(&sh->ops, 1);
	}
	close(fd);
	return NULL;
}

static void *poller(void *arg)
{
	struct shared *sh = arg;
	struct pollfd pfd;

	pfd.fd = open(HGCLOCK_DEV_PATH, O_RDWR | O_CLOEXEC);
	if (pfd.fd < 0) {
		bad_result(sh, "poller open", errno);
		return NULL;
	}
	pfd.events = POLLIN;
	while (!atomic_load(&sh->stop)) {
		if (poll(&pfd, 1, 5) < 0)
			bad_result(sh, "poll", errno);
		/* Nobody drains for the poller: do not spin on POLLIN. */
		usleep(1000);
		atomic_fetch_add(&sh->ops, 1);
	}
	close(pfd.fd);
	return NULL;
}

static int count_rec(const struct hgclock_rec_header *h, void *arg)
{
	(*(long *)arg)++;
	return 0;
}

/*
 * Drains the consumer mapping the test made before any thread started
 * (so that every mapper's attempt to become the consumer meets EBUSY).
 */
static void *consumer(void *arg)
{
	struct shared *sh = arg;
	struct pollfd pfd = { .fd = sh->consumer_fd, .events = POLLIN };
	long recs = 0;
	unsigned int cpu;

	while (!atomic_load(&sh->stop)) {
		poll(&pfd, 1, 10);
		for (cpu = 0; cpu < sh->map->meta->nr_cpus; cpu++)
			if (hgclock_ring_consume(sh->map, cpu, count_rec, &recs) < 0)
				bad_result(sh, "consume", EBADMSG);
		atomic_fetch_add(&sh->ops, 1);
	}
	return NULL;
}

static void *unloader(void *arg)
{
	struct shared *sh = arg;
	unsigned int i = 0;

	while (!atomic_load(&sh->stop)) {
		atomic_fetch_add(&sh->unload_tries, 1);
		if (++i % 25 == 0) {
			/* The tool users run; it must refuse and say so. */
			if (system("rmmod hgclock 2>/dev/null") == 0)
				atomic_fetch_add(&sh->unloaded, 1);
		} else if (syscall(SYS_delete_module, "hgclock", O_NONBLOCK) == 0) {
			atomic_fetch_add(&sh->unloaded, 1);
		} else if (errno != EAGAIN && errno != EBUSY) {
			bad_result(sh, "delete_module", errno);
		}
		usleep(20000);
	}
	return NULL;
}

FIXTURE(stress) {
	int fd;
	struct hgclock_info info;
	struct hgclock_ring_config saved;
};

FIXTURE_SETUP(stress)
{
	self->fd = open(HGCLOCK_DEV_PATH, O_RDWR | O_CLOEXEC);
	if (self->fd < 0 && errno == ENOENT)
		SKIP(return, HGCLOCK_DEV_PATH " missing: module not loaded");
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, hgclock_get_info(self->fd, &self->info));
	memset(&self->saved, 0, sizeof(self->saved));
	ASSERT_EQ(0, hgclock_ring_config(self->fd, &self->saved));
}

FIXTURE_TEARDOWN(stress)
{
	struct hgclock_ring_config cfg = self->saved;

	if (self->fd < 0)
		return;
	cfg.flags = HGCLOCK_CFG_FLAGS_ALL;
	if (hgclock_ring_config(self->fd, &cfg))
		fprintf(stderr, "# could not restore the ring configuration\n");
	close(self->fd);
}

TEST_F_TIMEOUT(stress, concurrent_users, 300)
{
	void *(*const fns[])(void *) = {
		opener, opener, reader, reader, mapper, mapper, poller,
		consumer, unloader,
	};
	pthread_t thr[sizeof(fns) / sizeof(fns[0])];
	struct hgclock_ring_config cfg;
	struct hgclock_map map;
	struct shared sh;
	size_t i;

	memset(&sh, 0, sizeof(sh));
	sh.ncpu = ncpus_online();
	/* Producers busy too: a snapshot every 10 ms on every CPU. */
	memset(&cfg, 0, sizeof(cfg));
	cfg.flags = HGCLOCK_CFG_SET_PERIOD;
	cfg.snapshot_period_ns = 10000000;
	ASSERT_EQ(0, hgclock_ring_config(self->fd, &cfg));

	sh.consumer_fd = self->fd;
	sh.map = &map;
	ASSERT_EQ(0, hgclock_map_open(self->fd, HGCLOCK_MAP_CONSUMER, &map));
	for (i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		ASSERT_EQ(0, pthread_create(&thr[i], NULL, fns[i], &sh));
	sleep(stress_seconds());
	atomic_store(&sh.stop, 1);
	for (i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		pthread_join(thr[i], NULL);
	hgclock_map_close(&map);

	TH_LOG("%ld operations, %ld unload attempts refused",
	       atomic_load(&sh.ops), atomic_load(&sh.unload_tries) - atomic_load(&sh.unloaded));
	EXPECT_EQ(0, atomic_load(&sh.unloaded));
	EXPECT_EQ(0, atomic_load(&sh.bad));
	EXPECT_LT(0, atomic_load(&sh.unload_tries));
	/* The module is still there and answers. */
	EXPECT_EQ(0, hgclock_get_info(self->fd, &self->info));
}

/* ---- hotplug -------------------------------------------------------- */

#define MAX_CPUS 64

struct cpu_acct {
	unsigned long long first_seq;	/* the session's first snapshot, minus 1 */
	unsigned long long last_seq;	/* last snapshot delivered */
	unsigned long long pending;	/* lost since then, per LOST records */
	unsigned long long lost;	/* sum of LOST records' nr_lost */
	unsigned long long delivered;
	unsigned long long hotplug;	/* snapshots taken as the CPU came back */
};

struct acct {
	struct cpu_acct cpu[MAX_CPUS];
	unsigned int cur;
	long bad;
};

static int acct_rec(const struct hgclock_rec_header *h, void *arg)
{
	struct acct *a = arg;
	struct cpu_acct *c = &a->cpu[a->cur];

	if (h->cpu != a->cur) {
		fprintf(stderr, "# record of cpu %u in cpu %u's ring\n", h->cpu, a->cur);
		a->bad++;
	}
	if (h->type == HGCLOCK_REC_LOST) {
		const struct hgclock_rec_lost *l = (const void *)h;

		c->pending += l->nr_lost;
		c->lost += l->nr_lost;
		if (l->total_lost != c->lost) {
			fprintf(stderr, "# cpu %u: LOST total %llu, sum of LOST %llu\n", a->cur,
				(unsigned long long)l->total_lost, c->lost);
			a->bad++;
		}
	} else if (h->type == HGCLOCK_REC_CYC2NS) {
		const struct hgclock_rec_cyc2ns *s = (const void *)h;

		/*
		 * seq counts a CPU's snapshots since load; this session
		 * starts somewhere in that count.
		 */
		if (!c->delivered)
			c->first_seq = c->last_seq = s->seq - 1 - c->pending;
		if (s->seq != c->last_seq + 1 + c->pending) {
			fprintf(stderr, "# cpu %u: snapshot %llu after %llu with %llu lost between\n",
				a->cur, (unsigned long long)s->seq, c->last_seq, c->pending);
			a->bad++;
		}
		c->last_seq = s->seq;
		c->pending = 0;
		c->delivered++;
		c->hotplug += s->reason == HGCLOCK_SNAP_HOTPLUG;
	} else {
		fprintf(stderr, "# cpu %u: unexpected record type %u\n", a->cur, h->type);
		a->bad++;
	}
	return 0;
}

static void drain_acct(struct __test_metadata *_metadata, struct hgclock_map *map,
		       struct acct *a)
{
	unsigned int cpu;

	for (cpu = 0; cpu < map->meta->nr_cpus && cpu < MAX_CPUS; cpu++) {
		a->cur = cpu;
		ASSERT_LE(0, hgclock_ring_consume(map, cpu, acct_rec, a));
	}
}

struct plug {
	struct shared *sh;
	int cpus[MAX_CPUS];
	int n;
	long toggles;
};

static int set_online(int cpu, int on)
{
	char path[80];

	snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/online", cpu);
	return write_sysfs(path, on ? "1" : "0");
}

static void *hotplugger(void *arg)
{
	struct plug *pl = arg;
	int i = 0, ret;

	while (!atomic_load(&pl->sh->stop)) {
		int cpu = pl->cpus[i++ % pl->n];

		ret = set_online(cpu, 0);
		if (ret && ret != -EBUSY)
			bad_result(pl->sh, "offline", -ret);
		usleep(5000);
		ret = set_online(cpu, 1);
		if (ret)
			bad_result(pl->sh, "online", -ret);
		pl->toggles++;
		usleep(5000);
	}
	return NULL;
}

/* Snapshots and clock reads on CPUs that come and go. */
static void *snapper(void *arg)
{
	struct shared *sh = arg;
	struct hgclock_clock_sample one;
	unsigned int i = 0;
	int fd, ret;

	fd = open(HGCLOCK_DEV_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		bad_result(sh, "snapper open", errno);
		return NULL;
	}
	while (!atomic_load(&sh->stop)) {
		int cpu = i++ % sh->ncpu;

		ret = hgclock_snapshot(fd, -1);
		if (ret < 0)
			bad_result(sh, "SNAPSHOT all", -ret);
		/* A CPU that is offline right now: EINVAL, documented. */
		ret = hgclock_snapshot(fd, cpu);
		if (ret < 0 && ret != -EINVAL)
			bad_result(sh, "SNAPSHOT one", -ret);
		ret = hgclock_read_clock(fd, cpu, &one);
		if (ret && ret != -EINVAL)
			bad_result(sh, "READ_CLOCK cpu", -ret);
		usleep(2000);
	}
	close(fd);
	return NULL;
}

TEST_F_TIMEOUT(stress, hotplug_storm, 300)
{
	struct hgclock_vcpu_info *infos;
	struct hgclock_ring_config cfg;
	struct hgclock_map map;
	pthread_t plug_thr, snap_thr;
	struct shared sh;
	struct plug pl;
	struct acct a;
	unsigned long long delivered = 0, lost = 0, hotplug = 0;
	unsigned int nr, cpu;
	time_t end;
	int i, ret;

	memset(&sh, 0, sizeof(sh));
	memset(&pl, 0, sizeof(pl));
	pl.sh = &sh;
	sh.ncpu = (int)sysconf(_SC_NPROCESSORS_CONF);
	for (i = 1; i < sh.ncpu && i < MAX_CPUS; i++) {
		char path[80];

		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/online", i);
		if (!access(path, W_OK))
			pl.cpus[pl.n++] = i;
	}
	if (!pl.n)
		SKIP(return, "no CPU can go offline here (one CPU, or no hotplug)");
	/* Only snapshots may be produced: tracking records would blur the count. */
	ASSERT_EQ(0, hgclock_list_vcpus(self->fd, &infos, &nr));
	free(infos);
	ASSERT_EQ(0, nr);

	/* Fresh small rings: sequence numbers from 1, losses likely. */
	memset(&cfg, 0, sizeof(cfg));
	cfg.flags = HGCLOCK_CFG_FLAGS_ALL;
	cfg.ring_size = 8192;
	cfg.watermark = 1024;
	cfg.snapshot_period_ns = 1000000;
	ret = hgclock_ring_config(self->fd, &cfg);
	if (ret == -EBUSY)
		SKIP(return, "the ring is mapped by someone else: cannot resize it");
	ASSERT_EQ(0, ret);
	ASSERT_EQ(0, hgclock_map_open(self->fd, HGCLOCK_MAP_CONSUMER, &map));
	memset(&a, 0, sizeof(a));

	ASSERT_EQ(0, pthread_create(&plug_thr, NULL, hotplugger, &pl));
	ASSERT_EQ(0, pthread_create(&snap_thr, NULL, snapper, &sh));
	end = time(NULL) + stress_seconds();
	for (i = 0; time(NULL) < end; i++) {
		struct pollfd pfd = { .fd = self->fd, .events = POLLIN };

		poll(&pfd, 1, 5);
		drain_acct(_metadata, &map, &a);
		/* A slow consumer now and then: rings overflow. */
		if (i % 8 == 7)
			usleep(150000);
	}
	atomic_store(&sh.stop, 1);
	pthread_join(plug_thr, NULL);
	pthread_join(snap_thr, NULL);
	for (i = 0; i < pl.n; i++)
		set_online(pl.cpus[i], 1);

	/* Quiet: no periodic snapshots; then one last snapshot everywhere. */
	memset(&cfg, 0, sizeof(cfg));
	cfg.flags = HGCLOCK_CFG_SET_PERIOD;
	ASSERT_EQ(0, hgclock_ring_config(self->fd, &cfg));
	drain_acct(_metadata, &map, &a);
	EXPECT_EQ(ncpus_online(), hgclock_snapshot(self->fd, -1));
	drain_acct(_metadata, &map, &a);

	for (cpu = 0; cpu < map.meta->nr_cpus && cpu < MAX_CPUS; cpu++) {
		const struct hgclock_meta_cpu *slot = hgclock_map_slot(&map, cpu);
		struct cpu_acct *c = &a.cpu[cpu];

		if (!c->delivered && !slot->lost)
			continue;
		/* The last snapshot was delivered, after every LOST record. */
		EXPECT_EQ(0, c->pending);
		EXPECT_EQ(c->last_seq - c->first_seq, c->delivered + c->lost);
		EXPECT_EQ(slot->lost, c->lost);
		delivered += c->delivered;
		lost += c->lost;
		hotplug += c->hotplug;
	}
	hgclock_map_close(&map);
	TH_LOG("%ld CPU offline/online cycles; snapshots: %llu delivered, %llu lost, %llu at CPU return",
	       pl.toggles, delivered, lost, hotplug);
	EXPECT_EQ(0, a.bad);
	EXPECT_EQ(0, atomic_load(&sh.bad));
	EXPECT_LT(0, pl.toggles);
	EXPECT_LT(0, delivered);
	/* The slow consumer made the lost path run. */
	EXPECT_LT(0, lost);
}

TEST_HARNESS_MAIN
