// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock kselftests: the mapped rings, CYC2NS snapshots and the
 * zero-syscall clock, in a real kernel with hgclock.ko loaded.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tracefs.h>
#include <event-parse.h>

#include "kselftest_harness.h"
#include "../user/lib/libhgclock.h"
#include "test_util.h"

static void pin_to_cpu(struct __test_metadata *_metadata, int cpu)
{
	ASSERT_EQ(0, pin_self(cpu));
}

static int ncpus_online(void)
{
	return (int)sysconf(_SC_NPROCESSORS_ONLN);
}

/*
 * CPUs isolated from kernel noise (nohz_full=, isolcpus=), where the
 * module arms no snapshot timer: @isolated[cpu] set for each, from
 * sysfs's lists ("1", "1-3,5").  Returns how many.
 */
static int isolated_cpus(bool *isolated, int max)
{
	static const char *const lists[] = {
		"/sys/devices/system/cpu/nohz_full",
		"/sys/devices/system/cpu/isolated",
	};
	int i, n = 0, lo, hi, cpu;

	memset(isolated, 0, max * sizeof(*isolated));
	for (i = 0; i < 2; i++) {
		char buf[256], *p;
		FILE *f = fopen(lists[i], "r");

		if (!f)
			continue;
		p = fgets(buf, sizeof(buf), f);
		fclose(f);
		while (p && *p && *p != '\n') {
			char *end;

			lo = hi = (int)strtol(p, &end, 10);
			if (end == p)
				break;
			if (*end == '-')
				hi = (int)strtol(end + 1, &end, 10);
			for (cpu = lo; cpu <= hi && cpu < max; cpu++)
				if (cpu >= 0 && !isolated[cpu]) {
					isolated[cpu] = true;
					n++;
				}
			p = *end == ',' ? end + 1 : end;
		}
	}
	return n;
}

/* Lines of @cpu's trace in @inst naming @func. */
static int trace_count(struct tracefs_instance *inst, int cpu, const char *func)
{
	char path[64], *text, *p;
	int n = 0;

	snprintf(path, sizeof(path), "per_cpu/cpu%d/trace", cpu);
	text = tracefs_instance_file_read(inst, path, NULL);
	if (!text)
		return -1;
	for (p = text; (p = strstr(p, func)); p++)
		n++;
	free(text);
	return n;
}

FIXTURE(ring) {
	int fd;
	struct hgclock_info info;
	struct hgclock_map map;
	struct hgclock_ring_config saved;
};

/*
 * Periodic snapshots are stopped while a test runs, so that what a test
 * produces and counts is all that is in the rings; the period comes back
 * afterwards.
 */
FIXTURE_SETUP(ring)
{
	struct hgclock_ring_config cfg;

	self->fd = open(HGCLOCK_DEV_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, hgclock_get_info(self->fd, &self->info));
	memset(&self->saved, 0, sizeof(self->saved));
	ASSERT_EQ(0, hgclock_ring_config(self->fd, &self->saved));
	memset(&cfg, 0, sizeof(cfg));
	cfg.flags = HGCLOCK_CFG_SET_PERIOD;
	cfg.snapshot_period_ns = 0;
	ASSERT_EQ(0, hgclock_ring_config(self->fd, &cfg));
	self->info.snapshot_period_ns = 0;
	ASSERT_EQ(0, hgclock_map_open(self->fd, HGCLOCK_MAP_CONSUMER, &self->map));
	hgclock_ring_skip_all(&self->map);
}

FIXTURE_TEARDOWN(ring)
{
	hgclock_map_close(&self->map);
	self->saved.flags = HGCLOCK_CFG_SET_PERIOD;
	hgclock_ring_config(self->fd, &self->saved);
	close(self->fd);
}

TEST_F(ring, meta_describes_itself)
{
	const struct hgclock_meta *meta = self->map.meta;
	long page = sysconf(_SC_PAGESIZE);
	int cpu;

	EXPECT_EQ(HGCLOCK_META_MAGIC, meta->magic);
	EXPECT_EQ(HGCLOCK_ABI_MAJOR, meta->abi_major);
	EXPECT_EQ(sizeof(struct hgclock_meta), meta->header_size);
	EXPECT_EQ(sizeof(struct hgclock_meta_cpu), meta->cpu_slot_size);
	EXPECT_EQ(self->info.nr_cpu_ids, meta->nr_cpus);
	EXPECT_EQ(self->info.ring_size, meta->ring_size);
	EXPECT_EQ(0, meta->meta_size % page);
	EXPECT_EQ(self->info.map_size, meta->meta_size + meta->nr_cpus * meta->ring_size);
	EXPECT_EQ(self->info.consumer_size, meta->consumer_size);
	EXPECT_EQ(0, meta->ring_size & (meta->ring_size - 1));
	EXPECT_EQ(self->info.tsc_khz, meta->tsc_khz);
	for (cpu = 0; cpu < ncpus_online(); cpu++) {
		const struct hgclock_meta_cpu *slot = hgclock_map_slot(&self->map, cpu);

		EXPECT_EQ(1, slot->online);
		EXPECT_TRUE(slot->conv.flags & HGCLOCK_CONV_VALID);
		EXPECT_EQ(0, slot->conv_seq & 1);
	}
}

TEST_F(ring, mmap_misuse_refused)
{
	size_t size = self->info.map_size;
	void *p;

	/* wrong size */
	p = mmap(NULL, size - 4096, PROT_READ, MAP_SHARED, self->fd, 0);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	p = mmap(NULL, size + 4096, PROT_READ, MAP_SHARED, self->fd, 0);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	/* wrong offset */
	p = mmap(NULL, size, PROT_READ, MAP_SHARED, self->fd, 4096);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	/* MAP_PRIVATE */
	p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, self->fd, 0);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	/* PROT_EXEC */
	p = mmap(NULL, size, PROT_READ | PROT_EXEC, MAP_SHARED, self->fd, 0);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EPERM, errno);
	/* writable meta and data pages */
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd, 0);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EPERM, errno);
	/* made writable or executable later */
	p = mmap(NULL, size, PROT_READ, MAP_SHARED, self->fd, 0);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_EQ(-1, mprotect(p, size, PROT_READ | PROT_WRITE));
	EXPECT_EQ(EACCES, errno);
	EXPECT_EQ(-1, mprotect(p, size, PROT_READ | PROT_EXEC));
	EXPECT_EQ(EACCES, errno);
	/* partial unmap would split the mapping */
	EXPECT_EQ(-1, munmap(p, 4096));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, munmap(p, size));
	/* consumer page: wrong size */
	p = mmap(NULL, self->info.consumer_size + 4096, PROT_READ | PROT_WRITE,
		 MAP_SHARED, self->fd, HGCLOCK_MMAP_CONSUMER_OFFSET);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
}

static int produce(int fd, int cpu, uint64_t count, struct hgclock_produce *p);

/* What a session's rings hold: its snapshots in order, TEST and other records. */
struct session_view {
	uint64_t snap_seq[256][64];	/* [cpu][i]: CYC2NS seq numbers */
	uint64_t snap_tsc[256][64];
	int nr_snaps[256];
	uint64_t nr_test, nr_lost, nr_tracking;
};

static int view_fn(const struct hgclock_rec_header *h, void *arg)
{
	struct session_view *v = arg;

	if (h->type == HGCLOCK_REC_CYC2NS && h->cpu < 256 && v->nr_snaps[h->cpu] < 64) {
		const struct hgclock_rec_cyc2ns *r = (const void *)h;

		v->snap_seq[h->cpu][v->nr_snaps[h->cpu]] = r->seq;
		v->snap_tsc[h->cpu][v->nr_snaps[h->cpu]++] = h->tsc;
	} else if (h->type == HGCLOCK_REC_TEST) {
		v->nr_test++;
	} else if (h->type == HGCLOCK_REC_LOST) {
		v->nr_lost += ((const struct hgclock_rec_lost *)h)->nr_lost;
	} else if (h->type >= 16) {
		v->nr_tracking++;
	}
	return 0;
}

static void view(struct __test_metadata *_metadata, struct hgclock_map *map,
		 struct session_view *v)
{
	int cpu;

	memset(v, 0, sizeof(*v));
	for (cpu = 0; cpu < ncpus_online(); cpu++)
		ASSERT_LE(0, hgclock_ring_consume(map, cpu, view_fn, v));
}

/*
 * Every open file is a session with rings of its own: a second file maps
 * its own consumer area (no EBUSY), both get the same snapshots, and one
 * session's records and losses are not the other's.
 */
TEST_F(ring, sessions_are_independent)
{
	int fd2 = open(HGCLOCK_DEV_PATH, O_RDWR | O_CLOEXEC);
	uint64_t per_ring = self->info.ring_size / sizeof(struct hgclock_rec_test);
	struct session_view *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
	struct hgclock_produce p;
	struct hgclock_map map2;
	int i, cpu;

	ASSERT_LE(0, fd2);
	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	ASSERT_EQ(0, hgclock_map_open(fd2, HGCLOCK_MAP_CONSUMER, &map2));
	hgclock_ring_skip_all(&map2);
	hgclock_ring_skip_all(&self->map);

	/* The same snapshots in both, taken through either file. */
	for (i = 0; i < 5; i++) {
		EXPECT_EQ(ncpus_online(), hgclock_snapshot(i % 2 ? fd2 : self->fd, -1));
	}
	view(_metadata, &self->map, a);
	view(_metadata, &map2, b);
	for (cpu = 0; cpu < ncpus_online(); cpu++) {
		EXPECT_EQ(5, a->nr_snaps[cpu]);
		ASSERT_EQ(a->nr_snaps[cpu], b->nr_snaps[cpu]);
		for (i = 0; i < a->nr_snaps[cpu]; i++) {
			EXPECT_EQ(a->snap_seq[cpu][i], b->snap_seq[cpu][i]);
			EXPECT_EQ(a->snap_tsc[cpu][i], b->snap_tsc[cpu][i]);
		}
	}

	/* Session 2 overflows its own rings; session 1 sees none of it. */
	ASSERT_EQ(0, produce(fd2, 0, per_ring * 2, &p));
	EXPECT_LT(0, p.nr_lost);
	view(_metadata, &self->map, a);
	view(_metadata, &map2, b);
	EXPECT_EQ(0, a->nr_test);
	EXPECT_EQ(0, a->nr_lost);
	EXPECT_EQ(0, hgclock_map_slot(&self->map, 0)->lost);
	EXPECT_LT(0, b->nr_test);
	/* Its losses: in its meta area (the LOST record waits for room). */
	EXPECT_EQ(p.nr_lost, hgclock_map_slot(&map2, 0)->lost);

	hgclock_map_close(&map2);
	close(fd2);
	free(a);
	free(b);
}

/*
 * A file that only reads the clock (the meta area, no consumer mapping)
 * costs no data areas: the rings' memory grows when it starts reading.
 */
TEST(clock_only_session_is_small)
{
	int fd = open(HGCLOCK_DEV_PATH, O_RDWR | O_CLOEXEC);
	struct hgclock_info before, meta_only, consuming;
	struct hgclock_map map;

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, hgclock_get_info(fd, &before));
	ASSERT_EQ(0, hgclock_map_open(fd, 0, &map));
	ASSERT_EQ(0, hgclock_get_info(fd, &meta_only));
	EXPECT_GE(before.ring_bytes + 2 * 65536, meta_only.ring_bytes);
	hgclock_map_close(&map);
	ASSERT_EQ(0, hgclock_map_open(fd, HGCLOCK_MAP_CONSUMER, &map));
	ASSERT_EQ(0, hgclock_get_info(fd, &consuming));
	EXPECT_LE(meta_only.ring_bytes + (uint64_t)ncpus_online() * consuming.ring_size,
		  consuming.ring_bytes);
	hgclock_map_close(&map);
	close(fd);
}

TEST_F(ring, config_checks)
{
	struct hgclock_ring_config cfg;

	memset(&cfg, 0, sizeof(cfg));
	ASSERT_EQ(0, hgclock_ring_config(self->fd, &cfg));
	EXPECT_EQ(self->info.ring_size, cfg.ring_size);
	EXPECT_LT(0, cfg.watermark);
	EXPECT_EQ(self->info.snapshot_period_ns, cfg.snapshot_period_ns);

	/* Resizing while mapped */
	cfg.flags = HGCLOCK_CFG_SET_RING_SIZE;
	cfg.ring_size = self->info.ring_size * 2;
	EXPECT_EQ(-EBUSY, hgclock_ring_config(self->fd, &cfg));
	/* Bad values */
	memset(&cfg, 0, sizeof(cfg));
	cfg.flags = HGCLOCK_CFG_SET_RING_SIZE;
	cfg.ring_size = 12345;
	EXPECT_EQ(-EINVAL, hgclock_ring_config(self->fd, &cfg));
	cfg.ring_size = 4096;
	EXPECT_EQ(-EINVAL, hgclock_ring_config(self->fd, &cfg));
	memset(&cfg, 0, sizeof(cfg));
	cfg.flags = HGCLOCK_CFG_SET_WATERMARK;
	EXPECT_EQ(-EINVAL, hgclock_ring_config(self->fd, &cfg));
	cfg.watermark = self->info.ring_size + 1;
	EXPECT_EQ(-EINVAL, hgclock_ring_config(self->fd, &cfg));
	memset(&cfg, 0, sizeof(cfg));
	cfg.flags = HGCLOCK_CFG_SET_PERIOD;
	cfg.snapshot_period_ns = 1000;
	EXPECT_EQ(-EINVAL, hgclock_ring_config(self->fd, &cfg));
	cfg.snapshot_period_ns = 1000000ULL - 1;
	EXPECT_EQ(-EINVAL, hgclock_ring_config(self->fd, &cfg));
	/*
	 * Above one hour (HGCLOCK_SNAPSHOT_PERIOD_MAX_NS): refused, and the
	 * period unchanged.  An assertion: a module without the bound would
	 * take the next value too, a negative ktime, and its timers would
	 * fire back to back.
	 */
	cfg.snapshot_period_ns = HGCLOCK_SNAPSHOT_PERIOD_MAX_NS + 1;
	ASSERT_EQ(-EINVAL, hgclock_ring_config(self->fd, &cfg));
	cfg.snapshot_period_ns = ~0ULL;
	EXPECT_EQ(-EINVAL, hgclock_ring_config(self->fd, &cfg));
	memset(&cfg, 0, sizeof(cfg));
	ASSERT_EQ(0, hgclock_ring_config(self->fd, &cfg));
	EXPECT_EQ(0, cfg.snapshot_period_ns);
	/*
	 * Both bounds themselves are taken (a RING_CONFIG that succeeds
	 * hands back flags 0; the teardown restores the period).
	 */
	cfg.flags = HGCLOCK_CFG_SET_PERIOD;
	cfg.snapshot_period_ns = HGCLOCK_SNAPSHOT_PERIOD_MAX_NS;
	EXPECT_EQ(0, hgclock_ring_config(self->fd, &cfg));
	EXPECT_EQ(HGCLOCK_SNAPSHOT_PERIOD_MAX_NS, cfg.snapshot_period_ns);
	cfg.flags = HGCLOCK_CFG_SET_PERIOD;
	cfg.snapshot_period_ns = 1000000ULL;
	EXPECT_EQ(0, hgclock_ring_config(self->fd, &cfg));
	EXPECT_EQ(1000000ULL, cfg.snapshot_period_ns);
	cfg.flags = HGCLOCK_CFG_SET_PERIOD;
	cfg.snapshot_period_ns = 0;
	EXPECT_EQ(0, hgclock_ring_config(self->fd, &cfg));
	EXPECT_EQ(0, cfg.snapshot_period_ns);
	memset(&cfg, 0, sizeof(cfg));
	cfg.flags = 1U << 9;
	EXPECT_EQ(-EINVAL, hgclock_ring_config(self->fd, &cfg));
	memset(&cfg, 0, sizeof(cfg));
	cfg.size = sizeof(cfg) - 8;
	EXPECT_EQ(-1, ioctl(self->fd, HGCLOCK_IOC_RING_CONFIG, &cfg));
	EXPECT_EQ(EINVAL, errno);
	memset(&cfg, 0, sizeof(cfg));
	cfg.size = sizeof(cfg);
	cfg.reserved[2] = 1;
	EXPECT_EQ(-1, ioctl(self->fd, HGCLOCK_IOC_RING_CONFIG, &cfg));
	EXPECT_EQ(EINVAL, errno);
}

struct snap_collect {
	struct hgclock_rec_cyc2ns snaps[256];
	int nr;
	int nr_lost_records;
	unsigned int reasons_seen;
};

static int collect_snap(const struct hgclock_rec_header *rec, void *arg)
{
	struct snap_collect *c = arg;

	if (rec->type == HGCLOCK_REC_LOST)
		c->nr_lost_records++;
	if (rec->type != HGCLOCK_REC_CYC2NS)
		return 0;
	if (c->nr < 256)
		memcpy(&c->snaps[c->nr++], rec, sizeof(c->snaps[0]));
	c->reasons_seen |= 1U << ((const struct hgclock_rec_cyc2ns *)rec)->reason;
	return 0;
}

/*
 * Every snapshot's conversion brackets its own sched_clock reading, and an
 * exact one reproduces the kernel's conversion of the same TSC to the ns.
 */
TEST_F(ring, snapshots_are_exact)
{
	struct snap_collect *c = calloc(1, sizeof(*c));
	int round, i, cpu, exact = 0, ioctl_snaps = 0;

	ASSERT_NE(NULL, c);
	for (round = 0; round < 20; round++)
		ASSERT_EQ(ncpus_online(), hgclock_snapshot(self->fd, -1));
	for (cpu = 0; cpu < ncpus_online(); cpu++)
		ASSERT_LE(0, hgclock_ring_consume(&self->map, cpu, collect_snap, c));
	EXPECT_EQ(0, c->nr_lost_records);
	for (i = 0; i < c->nr; i++) {
		const struct hgclock_rec_cyc2ns *s = &c->snaps[i];
		uint64_t lo = hgclock_conv_apply(&s->conv, s->hdr.tsc);
		uint64_t hi = hgclock_conv_apply(&s->conv, s->tsc_after);

		ASSERT_TRUE(s->conv.flags & HGCLOCK_CONV_VALID);
		/* Ours, and any periodic one that fell in between. */
		if (s->reason == HGCLOCK_SNAP_IOCTL)
			ioctl_snaps++;
		else
			EXPECT_TRUE(s->reason == HGCLOCK_SNAP_PERIODIC ||
				    s->reason == HGCLOCK_SNAP_CHANGED);
		EXPECT_EQ(self->info.tsc_khz, s->tsc_khz);
		EXPECT_LE(s->hdr.tsc, s->tsc_after);
		if (s->conv.flags & HGCLOCK_CONV_EXACT) {
			exact++;
			EXPECT_EQ(0, s->conv.bound_ns);
			EXPECT_LE(lo, s->hdr.sched_clock_ns);
			EXPECT_GE(hi, s->hdr.sched_clock_ns);
			if (s->kernel_ns_at_tsc) {
				EXPECT_EQ(s->kernel_ns_at_tsc, lo);
			}
			if (s->conv.flags & HGCLOCK_CONV_LOCAL_OFFSET) {
				EXPECT_LE(lo + s->conv.local_offset_ns, s->local_clock_ns);
				EXPECT_GE(hi + s->conv.local_offset_ns, s->local_clock_ns);
			}
		} else if (s->conv.flags & HGCLOCK_CONV_DERIVED) {
			EXPECT_LE(lo, s->hdr.sched_clock_ns + s->conv.bound_ns);
			EXPECT_GE(hi + s->conv.bound_ns, s->hdr.sched_clock_ns);
		}
	}
	EXPECT_EQ(20 * ncpus_online(), ioctl_snaps);
	TH_LOG("%d of %d snapshots exact; kernel_ns_at_tsc %s", exact, c->nr,
	       c->snaps[0].kernel_ns_at_tsc ? "available" : "unavailable");
	free(c);
}

/* The meta area's conversion is the one the last snapshot carried. */
TEST_F(ring, meta_matches_snapshot)
{
	struct snap_collect *c = calloc(1, sizeof(*c));
	int i;

	ASSERT_NE(NULL, c);
	ASSERT_EQ(ncpus_online(), hgclock_snapshot(self->fd, -1));
	for (i = 0; i < ncpus_online(); i++)
		ASSERT_LE(0, hgclock_ring_consume(&self->map, i, collect_snap, c));
	/* A periodic snapshot may add to ours; each carries the same. */
	ASSERT_LE(ncpus_online(), c->nr);
	for (i = 0; i < c->nr; i++) {
		const struct hgclock_meta_cpu *slot =
			hgclock_map_slot(&self->map, c->snaps[i].hdr.cpu);

		if (c->snaps[i].conv.flags & HGCLOCK_CONV_DERIVED)
			continue;	/* refitted each time, within its bound */
		EXPECT_EQ(0, memcmp(&slot->conv, &c->snaps[i].conv, sizeof(slot->conv)));
	}
	free(c);
}

static uint64_t now_or_skip(struct __test_metadata *_metadata,
			    const struct hgclock_map *map, struct hgclock_now *now)
{
	int ret = hgclock_now_user(map, now);

	if (ret == -ENODATA)
		return 0;
	EXPECT_EQ(0, ret);
	return now->sched_clock_ns;
}

/* The zero-syscall clock lies between two READ_CLOCKs on the same CPU. */
TEST_F(ring, user_clock_between_read_clocks)
{
	struct hgclock_clock_sample before, after;
	struct hgclock_now now;
	int cpu, i;

	for (cpu = 0; cpu < ncpus_online(); cpu++) {
		pin_to_cpu(_metadata, cpu);
		for (i = 0; i < 1000; i++) {
			ASSERT_EQ(0, hgclock_read_clock(self->fd, -1, &before));
			if (!now_or_skip(_metadata, &self->map, &now))
				SKIP(return, "no exact conversion on CPU %d: ioctl fallback", cpu);
			ASSERT_EQ(0, hgclock_read_clock(self->fd, -1, &after));
			ASSERT_EQ(cpu, now.cpu);
			ASSERT_LE(before.sched_clock_ns, now.sched_clock_ns);
			ASSERT_GE(after.sched_clock_ns, now.sched_clock_ns);
			ASSERT_LE(before.tsc_after, now.tsc);
			ASSERT_GE(after.tsc_before, now.tsc);
			if (now.has_local) {
				ASSERT_LE(before.local_clock_ns, now.local_clock_ns);
				ASSERT_GE(after.local_clock_ns, now.local_clock_ns);
			}
		}
	}
}

/* Without an exact conversion hgclock_now() falls back to the ioctl. */
TEST_F(ring, user_clock_fallback)
{
	struct hgclock_now now;
	int used_ioctl = -1;

	ASSERT_EQ(0, hgclock_now(self->fd, NULL, &now, &used_ioctl));
	EXPECT_EQ(1, used_ioctl);
	EXPECT_LT(0, now.sched_clock_ns);
	ASSERT_EQ(0, hgclock_now(self->fd, &self->map, &now, &used_ioctl));
	if (hgclock_map_slot(&self->map, now.cpu)->conv.flags & HGCLOCK_CONV_EXACT) {
		EXPECT_EQ(0, used_ioctl);
	} else {
		EXPECT_EQ(1, used_ioctl);
	}
}

/* Both markers in one pass: reading trace_pipe_raw consumes the events. */
struct marker_search {
	const char *token[2];
	unsigned long long ts[2];
	int found[2];
};

static int find_marker(struct tep_event *event, struct tep_record *record,
		       int cpu, void *context)
{
	struct marker_search *ms = context;
	int i;

	for (i = 0; i < 2; i++) {
		if (memmem(record->data, record->size, ms->token[i],
			   strlen(ms->token[i]))) {
			ms->ts[i] = record->ts;
			ms->found[i]++;
		}
	}
	return 0;
}

/* With trace_clock=local, the zero-syscall value lies between two markers. */
TEST_F(ring, user_clock_between_trace_markers)
{
	const char *systems[] = { "ftrace", NULL };
	struct tracefs_instance *inst;
	struct hgclock_now now;
	struct tep_handle *tep;
	char t1[64], t2[64];
	int round;

	pin_to_cpu(_metadata, 0);
	if (!now_or_skip(_metadata, &self->map, &now))
		SKIP(return, "no exact conversion: ioctl fallback");
	inst = tracefs_instance_create("hgclock_ring_test");
	if (!inst)
		SKIP(return, "no tracefs instance");
	ASSERT_LE(0, tracefs_instance_file_write(inst, "trace_clock", "local"));
	tep = tracefs_local_events_system(NULL, systems);
	ASSERT_NE(NULL, tep);
	for (round = 0; round < 10; round++) {
		struct marker_search ms = { .token = { t1, t2 } };

		snprintf(t1, sizeof(t1), "hgclock-uclock-a-%d-%d", getpid(), round);
		snprintf(t2, sizeof(t2), "hgclock-uclock-b-%d-%d", getpid(), round);
		ASSERT_LE(0, tracefs_printf(inst, "%s\n", t1));
		ASSERT_NE(0, now_or_skip(_metadata, &self->map, &now));
		ASSERT_LE(0, tracefs_printf(inst, "%s\n", t2));
		ASSERT_EQ(0, tracefs_iterate_raw_events(tep, inst, NULL, 0,
							find_marker, &ms));
		ASSERT_EQ(1, ms.found[0]);
		ASSERT_EQ(1, ms.found[1]);
		EXPECT_LE(ms.ts[0], now.sched_clock_ns);
		EXPECT_GE(ms.ts[1], now.sched_clock_ns);
	}
	tep_free(tep);
	tracefs_instance_destroy(inst);
	tracefs_instance_free(inst);
}

/*
 * perf's mmap page exposes the same cyc2ns data (time_mult, time_shift,
 * time_zero = offset + __sched_clock_offset) when sched_clock is stable
 * and the TSC constant: an independent check of ours.
 */
TEST_F(ring, conversion_agrees_with_perf)
{
	struct perf_event_attr attr;
	struct perf_event_mmap_page *pg;
	const struct hgclock_meta_cpu *slot;
	struct hgclock_conversion conv;
	int pfd;

	pin_to_cpu(_metadata, 0);
	ASSERT_EQ(1, hgclock_snapshot(self->fd, 0));
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_DUMMY;
	pfd = syscall(SYS_perf_event_open, &attr, -1, 0, -1, 0);
	if (pfd < 0)
		SKIP(return, "perf_event_open: %s", strerror(errno));
	pg = mmap(NULL, sysconf(_SC_PAGESIZE), PROT_READ, MAP_SHARED, pfd, 0);
	ASSERT_NE(MAP_FAILED, pg);
	if (!pg->cap_user_time_zero) {
		munmap(pg, sysconf(_SC_PAGESIZE));
		close(pfd);
		SKIP(return, "perf page has no time_zero (sched_clock not native TSC, or not stable)");
	}
	slot = hgclock_map_slot(&self->map, 0);
	memcpy(&conv, &slot->conv, sizeof(conv));
	ASSERT_TRUE(conv.flags & HGCLOCK_CONV_VALID);
	EXPECT_EQ(pg->time_mult, conv.mult);
	EXPECT_EQ(pg->time_shift, conv.shift);
	if (conv.flags & HGCLOCK_CONV_EXACT) {
		EXPECT_EQ(pg->time_zero, conv.offset_ns + conv.local_offset_ns);
	} else if (conv.flags & HGCLOCK_CONV_LOCAL_OFFSET) {
		/* A derived conversion is off by no more than its bound. */
		int64_t diff = (int64_t)(pg->time_zero -
					 (conv.offset_ns + conv.local_offset_ns));

		TH_LOG("derived offset vs perf: %lld ns, bound %llu ns",
		       (long long)diff, (unsigned long long)conv.bound_ns);
		EXPECT_GE((int64_t)conv.bound_ns, diff);
		EXPECT_LE(-(int64_t)conv.bound_ns, diff);
	}
	munmap(pg, sysconf(_SC_PAGESIZE));
	close(pfd);
}

struct test_collect {
	uint64_t next_seq;
	uint64_t nr;
	uint64_t lost;
	uint64_t bad;
	uint64_t lost_records;
};

/* TEST records must come in order, gaps exactly covered by LOST records. */
static int collect_test(const struct hgclock_rec_header *rec, void *arg)
{
	struct test_collect *c = arg;

	if (rec->type == HGCLOCK_REC_LOST) {
		const struct hgclock_rec_lost *l = (const void *)rec;

		c->lost += l->nr_lost;
		c->next_seq += l->nr_lost;
		c->lost_records++;
		return 0;
	}
	if (rec->type != HGCLOCK_REC_TEST)
		return 0;

	const struct hgclock_rec_test *t = (const void *)rec;

	if (rec->size != sizeof(*t) || t->seq != c->next_seq || t->check != ~t->seq)
		c->bad++;
	c->next_seq = t->seq + 1;
	c->nr++;
	return 0;
}

static int produce(int fd, int cpu, uint64_t count, struct hgclock_produce *p)
{
	memset(p, 0, sizeof(*p));
	p->size = sizeof(*p);
	p->cpu = cpu;
	p->count = count;
	return ioctl(fd, HGCLOCK_IOC_PRODUCE, p) ? -errno : 0;
}

/* With the reader stopped: lost == produced - read, exactly. */
TEST_F(ring, full_ring_counts_losses_exactly)
{
	uint64_t per_ring = self->info.ring_size / sizeof(struct hgclock_rec_test);
	uint64_t count = per_ring * 3;
	const struct hgclock_meta_cpu *slot = hgclock_map_slot(&self->map, 0);
	uint64_t lost_before = slot->lost;
	struct test_collect c = { 0 };
	struct hgclock_produce p;

	ASSERT_EQ(0, produce(self->fd, 0, count, &p));
	EXPECT_EQ(count, p.nr_written + p.nr_lost);
	EXPECT_LT(0, p.nr_lost);
	EXPECT_EQ(lost_before + p.nr_lost, slot->lost);
	/* One snapshot afterwards flushes the pending LOST record. */
	EXPECT_LE(0, hgclock_ring_consume(&self->map, 0, collect_test, &c));
	ASSERT_EQ(1, hgclock_snapshot(self->fd, 0));
	EXPECT_LE(0, hgclock_ring_consume(&self->map, 0, collect_test, &c));
	EXPECT_EQ(0, c.bad);
	EXPECT_EQ(p.nr_written, c.nr);
	EXPECT_EQ(p.nr_lost, c.lost);
	EXPECT_EQ(count, c.nr + c.lost);
	EXPECT_EQ(1, c.lost_records);
}

struct drain_arg {
	struct hgclock_map *map;
	int cpu;
	volatile int stop;
	struct test_collect c;
	long err;
};

static void *drain_thread(void *arg)
{
	struct drain_arg *d = arg;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(1, &set);
	sched_setaffinity(0, sizeof(set), &set);
	while (!d->stop) {
		long ret = hgclock_ring_consume(d->map, d->cpu, collect_test, &d->c);

		if (ret < 0) {
			d->err = ret;
			break;
		}
	}
	if (!d->err)
		d->err = hgclock_ring_consume(d->map, d->cpu, collect_test, &d->c) < 0;
	return NULL;
}

/*
 * Producer at full rate on CPU 0, reader draining on CPU 1: every record
 * arrives intact and in order, and whatever the reader could not keep up
 * with is accounted for to the record.
 */
TEST_F(ring, stress_drain_while_producing)
{
	uint64_t per_ring = self->info.ring_size / sizeof(struct hgclock_rec_test);
	uint64_t count = per_ring * 8;
	struct drain_arg d = { .map = &self->map, .cpu = 0 };
	struct hgclock_produce p;
	uint64_t snaps_lost = 0;
	int produced, written = 0;
	pthread_t th;

	if (ncpus_online() < 2)
		SKIP(return, "needs two CPUs");
	ASSERT_EQ(0, pthread_create(&th, NULL, drain_thread, &d));
	usleep(10000);
	produced = produce(self->fd, 0, count, &p);
	/*
	 * Flush a pending LOST record, if any, with a snapshot.  The reader
	 * may still be far behind (a loaded machine, CI on 2026-12-02 under
	 * PREEMPT_RT): a snapshot that finds the ring full is lost, and
	 * counted as lost like any record; try again while the reader makes
	 * room (10 s at most).  The reader is stopped before any assertion:
	 * it reads the mapping the fixture's teardown unmaps.
	 */
	while (!produced && written == 0 && snaps_lost < 1000) {
		written = hgclock_snapshot(self->fd, 0);
		if (written == 0) {
			snaps_lost++;
			usleep(10000);
		}
	}
	d.stop = 1;
	pthread_join(th, NULL);
	ASSERT_EQ(0, produced);
	ASSERT_EQ(1, written);
	EXPECT_EQ(0, d.err);
	EXPECT_EQ(0, d.c.bad);
	EXPECT_EQ(count, p.nr_written + p.nr_lost);
	EXPECT_EQ(p.nr_written, d.c.nr);
	EXPECT_EQ(p.nr_lost + snaps_lost, d.c.lost);
	/*
	 * A LOST record advances the expected sequence by all it counts:
	 * the snapshots lost after the last test record are in the one
	 * flushed before the snapshot that was written.
	 */
	EXPECT_EQ(count + snaps_lost, d.c.next_seq);
	TH_LOG("%llu records through a %llu-record ring, %llu lost while draining, %llu snapshots lost",
	       (unsigned long long)count, (unsigned long long)per_ring,
	       (unsigned long long)p.nr_lost, (unsigned long long)snaps_lost);
}

/* A reader that keeps up loses nothing. */
TEST_F(ring, no_loss_when_reader_keeps_up)
{
	uint64_t per_ring = self->info.ring_size / sizeof(struct hgclock_rec_test);
	struct test_collect c = { 0 };
	struct hgclock_produce p;
	int chunk;

	/* Half a ring at a time, drained in between: never full. */
	for (chunk = 0; chunk < 16; chunk++) {
		ASSERT_EQ(0, produce(self->fd, 0, per_ring / 2, &p));
		EXPECT_EQ(0, p.nr_lost);
		c.next_seq = 0;	/* each PRODUCE call counts from 0 */
		ASSERT_LE(0, hgclock_ring_consume(&self->map, 0, collect_test, &c));
	}
	EXPECT_EQ(0, c.bad);
	EXPECT_EQ(0, c.lost);
	EXPECT_EQ(16 * (per_ring / 2), c.nr);
}

TEST_F(ring, produce_bad_input)
{
	struct hgclock_produce p;

	EXPECT_EQ(-EINVAL, produce(self->fd, 0, 0, &p));
	EXPECT_EQ(-EINVAL, produce(self->fd, 0, (1ULL << 24) + 1, &p));
	EXPECT_EQ(-EINVAL, produce(self->fd, 100000, 1, &p));
	memset(&p, 0, sizeof(p));
	p.size = sizeof(p);
	p.count = 1;
	p.reserved[1] = 1;
	EXPECT_EQ(-1, ioctl(self->fd, HGCLOCK_IOC_PRODUCE, &p));
	EXPECT_EQ(EINVAL, errno);
}

TEST_F(ring, snapshot_bad_input)
{
	struct hgclock_snapshot req;

	EXPECT_EQ(-EINVAL, hgclock_snapshot(self->fd, 100000));
	memset(&req, 0, sizeof(req));
	req.size = sizeof(req);
	req.flags = 2;
	EXPECT_EQ(-1, ioctl(self->fd, HGCLOCK_IOC_SNAPSHOT, &req));
	EXPECT_EQ(EINVAL, errno);
	memset(&req, 0, sizeof(req));
	req.size = sizeof(req);
	req.flags = HGCLOCK_SNAPSHOT_ALL_CPUS;
	req.cpu = 1;
	EXPECT_EQ(-1, ioctl(self->fd, HGCLOCK_IOC_SNAPSHOT, &req));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, ioctl(self->fd, HGCLOCK_IOC_SNAPSHOT, NULL));
	EXPECT_EQ(EFAULT, errno);
}

/* Exit pairings: what the guest's half records, per CPU, in order. */
struct pair_collect {
	struct hgclock_rec_exit_pair pairs[64];
	int nr;
	unsigned int cpu_mismatch;
};

static int collect_pair(const struct hgclock_rec_header *rec, void *arg)
{
	struct pair_collect *c = arg;

	if (rec->type != HGCLOCK_REC_EXIT_PAIR)
		return 0;
	if (c->nr < 64)
		memcpy(&c->pairs[c->nr++], rec, sizeof(c->pairs[0]));
	return 0;
}

/*
 * EXIT_PAIR under the VM's hypervisor (TCG sets the hypervisor bit): a
 * record per CPU asked, on that CPU's ring, its readings in order around
 * the CPUID, one sequence number each, the same key.  No KVM here, so no
 * host half: that is the nested test's.
 */
TEST_F(ring, exit_pair_records)
{
	struct pair_collect *c = calloc(1, sizeof(*c));
	int n = ncpus_online(), cpu, i;

	ASSERT_NE(NULL, c);
	if (!(self->info.features & HGCLOCK_FEAT_EXIT_PAIR)) {
		EXPECT_EQ(-ENODEV, hgclock_exit_pair(self->fd, -1));
		free(c);
		SKIP(return, "no hypervisor: EXIT_PAIR refused with ENODEV, as it should");
	}
	ASSERT_EQ(n, hgclock_exit_pair(self->fd, -1));
	ASSERT_EQ(1, hgclock_exit_pair(self->fd, 0));
	for (cpu = 0; cpu < n; cpu++) {
		int before = c->nr;

		ASSERT_LE(0, hgclock_ring_consume(&self->map, cpu, collect_pair, c));
		for (i = before; i < c->nr; i++)
			EXPECT_EQ((uint32_t)cpu, c->pairs[i].hdr.cpu);
		/* CPU 0 was asked twice. */
		EXPECT_EQ(cpu == 0 ? 2 : 1, c->nr - before);
	}
	ASSERT_EQ(n + 1, c->nr);
	for (i = 0; i < c->nr; i++) {
		const struct hgclock_rec_exit_pair *p = &c->pairs[i];

		EXPECT_EQ(sizeof(*p), p->hdr.size);
		EXPECT_LE(p->tsc_before, p->tsc_after);
		EXPECT_LE(p->sched_clock_before_ns, p->sched_clock_after_ns);
		EXPECT_LE(p->tsc_after, p->hdr.tsc);
		EXPECT_GT(0x10000u, p->key);
		EXPECT_EQ(c->pairs[0].key, p->key);
		EXPECT_NE(0, p->seq);
	}
	/* Sequence numbers: all different. */
	for (i = 0; i < c->nr; i++)
		for (int j = i + 1; j < c->nr; j++)
			EXPECT_NE(c->pairs[i].seq, c->pairs[j].seq);
	free(c);
}

TEST_F(ring, exit_pair_bad_input)
{
	struct hgclock_exit_pair req;

	memset(&req, 0, sizeof(req));
	req.size = sizeof(req) - 8;
	EXPECT_EQ(-1, ioctl(self->fd, HGCLOCK_IOC_EXIT_PAIR, &req));
	EXPECT_EQ(EINVAL, errno);
	memset(&req, 0, sizeof(req));
	req.size = sizeof(req);
	req.flags = HGCLOCK_READ_CPU | HGCLOCK_READ_ALL_CPUS;
	EXPECT_EQ(-1, ioctl(self->fd, HGCLOCK_IOC_EXIT_PAIR, &req));
	EXPECT_EQ(EINVAL, errno);
	req.flags = 0;
	req.cpu = 1;		/* a CPU without HGCLOCK_READ_CPU */
	EXPECT_EQ(-1, ioctl(self->fd, HGCLOCK_IOC_EXIT_PAIR, &req));
	EXPECT_EQ(EINVAL, errno);
	req.cpu = 0;
	req.reserved[1] = 1;
	EXPECT_EQ(-1, ioctl(self->fd, HGCLOCK_IOC_EXIT_PAIR, &req));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, ioctl(self->fd, HGCLOCK_IOC_EXIT_PAIR, NULL));
	EXPECT_EQ(EFAULT, errno);
	if (self->info.features & HGCLOCK_FEAT_EXIT_PAIR)
		EXPECT_EQ(-EINVAL, hgclock_exit_pair(self->fd, 100000));
}

/* poll() wakes at the watermark and not before. */
TEST_F(ring, poll_wakes_at_watermark)
{
	struct hgclock_ring_config cfg, saved;
	struct pollfd pfd = { .fd = self->fd, .events = POLLIN };

	memset(&saved, 0, sizeof(saved));
	ASSERT_EQ(0, hgclock_ring_config(self->fd, &saved));
	memset(&cfg, 0, sizeof(cfg));
	cfg.flags = HGCLOCK_CFG_SET_WATERMARK | HGCLOCK_CFG_SET_PERIOD;
	cfg.watermark = 2 * sizeof(struct hgclock_rec_cyc2ns);
	cfg.snapshot_period_ns = 0;
	ASSERT_EQ(0, hgclock_ring_config(self->fd, &cfg));
	hgclock_ring_skip_all(&self->map);

	EXPECT_EQ(0, poll(&pfd, 1, 50));
	ASSERT_EQ(1, hgclock_snapshot(self->fd, 0));
	EXPECT_EQ(0, poll(&pfd, 1, 50));	/* one record: below the mark */
	ASSERT_EQ(1, hgclock_snapshot(self->fd, 0));
	EXPECT_EQ(1, poll(&pfd, 1, 1000));
	EXPECT_TRUE(pfd.revents & POLLIN);
	hgclock_ring_skip_all(&self->map);
	EXPECT_EQ(0, poll(&pfd, 1, 50));

	saved.flags = HGCLOCK_CFG_SET_WATERMARK | HGCLOCK_CFG_SET_PERIOD;
	ASSERT_EQ(0, hgclock_ring_config(self->fd, &saved));
}

/*
 * A sleeping poller is woken by a record from another CPU's producer,
 * and soon: poll() looks at the file once more when its timeout ends,
 * so without a wake it would still return 1, after 10 s.
 */
TEST_F(ring, poll_sleeper_woken)
{
	struct hgclock_ring_config cfg, saved;
	struct pollfd pfd = { .fd = self->fd, .events = POLLIN };
	struct timespec t0, t1;
	pid_t child;
	long ms;
	int status;

	memset(&saved, 0, sizeof(saved));
	ASSERT_EQ(0, hgclock_ring_config(self->fd, &saved));
	memset(&cfg, 0, sizeof(cfg));
	cfg.flags = HGCLOCK_CFG_SET_WATERMARK | HGCLOCK_CFG_SET_PERIOD;
	cfg.watermark = 1;
	cfg.snapshot_period_ns = 0;
	ASSERT_EQ(0, hgclock_ring_config(self->fd, &cfg));
	hgclock_ring_skip_all(&self->map);

	child = fork();
	ASSERT_LE(0, child);
	if (child == 0) {
		int fd = open(HGCLOCK_DEV_PATH, O_RDWR);

		usleep(200000);
		_exit(hgclock_snapshot(fd, 0) == 1 ? 0 : 1);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	EXPECT_EQ(1, poll(&pfd, 1, 10000));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	EXPECT_GT(5000, ms);
	TH_LOG("poll returned after %ld ms (the child writes after 200 ms)", ms);
	ASSERT_EQ(child, waitpid(child, &status, 0));
	EXPECT_EQ(0, status);

	saved.flags = HGCLOCK_CFG_SET_WATERMARK | HGCLOCK_CFG_SET_PERIOD;
	ASSERT_EQ(0, hgclock_ring_config(self->fd, &saved));
}

struct epoll_producer {
	int fd;
	int cpu;
	uint64_t count;
	useconds_t delay_us;
	int ret;
	struct hgclock_produce p;
};

/* Pinned to the CPU whose ring it fills: PRODUCE's records on that CPU. */
static void *epoll_producer_fn(void *arg)
{
	struct epoll_producer *e = arg;

	e->ret = pin_self(e->cpu);
	if (e->ret)
		return NULL;
	usleep(e->delay_us);
	e->ret = produce(e->fd, e->cpu, e->count, &e->p);
	return NULL;
}

static int epoll_produce(struct epoll_producer *e, pthread_t *th)
{
	return pthread_create(th, NULL, epoll_producer_fn, e);
}

/*
 * epoll (issue 14 item 7: the wake carries a poll key, which epoll's
 * callback filters on): the waiter on CPU 0, a thread on CPU 1 filling
 * CPU 1's ring.  Nothing is reported below the watermark, EPOLLIN once a
 * record takes the ring to it, and nothing after the reader drained.
 */
TEST_F(ring, epoll_wakes_at_watermark)
{
	uint64_t rec = sizeof(struct hgclock_rec_test), below = 15;
	struct epoll_producer e = { .fd = self->fd, .cpu = 1 };
	struct epoll_event ev = { .events = EPOLLIN }, out;
	struct hgclock_ring_config cfg, saved;
	struct timespec t0, t1;
	pthread_t th;
	int ep, n;

	if (ncpus_online() < 2)
		SKIP(return, "needs two CPUs");
	pin_to_cpu(_metadata, 0);
	memset(&saved, 0, sizeof(saved));
	ASSERT_EQ(0, hgclock_ring_config(self->fd, &saved));
	memset(&cfg, 0, sizeof(cfg));
	cfg.flags = HGCLOCK_CFG_SET_WATERMARK | HGCLOCK_CFG_SET_PERIOD;
	cfg.watermark = (below + 1) * rec;
	cfg.snapshot_period_ns = 0;
	ASSERT_EQ(0, hgclock_ring_config(self->fd, &cfg));
	hgclock_ring_skip_all(&self->map);
	ep = epoll_create1(EPOLL_CLOEXEC);
	ASSERT_LE(0, ep);
	ev.data.fd = self->fd;
	ASSERT_EQ(0, epoll_ctl(ep, EPOLL_CTL_ADD, self->fd, &ev));

	EXPECT_EQ(0, epoll_wait(ep, &out, 1, 50));
	/* One record short of the mark, written while we wait: no event. */
	e.count = below;
	e.delay_us = 20000;
	ASSERT_EQ(0, epoll_produce(&e, &th));
	EXPECT_EQ(0, epoll_wait(ep, &out, 1, 300));
	ASSERT_EQ(0, pthread_join(th, NULL));
	ASSERT_EQ(0, e.ret);
	ASSERT_EQ(below, e.p.nr_written);
	EXPECT_EQ(0, epoll_wait(ep, &out, 1, 50));
	/* The record that reaches it wakes the sleeping waiter. */
	e.count = 1;
	e.delay_us = 200000;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ASSERT_EQ(0, epoll_produce(&e, &th));
	n = epoll_wait(ep, &out, 1, 10000);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ASSERT_EQ(0, pthread_join(th, NULL));
	ASSERT_EQ(0, e.ret);
	EXPECT_EQ(1, e.p.nr_written);
	EXPECT_EQ(1, n);
	if (n == 1) {
		EXPECT_TRUE(out.events & EPOLLIN);
		EXPECT_EQ(self->fd, out.data.fd);
	}
	TH_LOG("epoll_wait gave %d after %ld ms (the producer waits 200 ms)", n,
	       (long)((t1.tv_sec - t0.tv_sec) * 1000 +
		      (t1.tv_nsec - t0.tv_nsec) / 1000000));
	/* Level-triggered: still ready until drained, then not. */
	EXPECT_EQ(1, epoll_wait(ep, &out, 1, 0));
	hgclock_ring_skip_all(&self->map);
	EXPECT_EQ(0, epoll_wait(ep, &out, 1, 50));

	close(ep);
	saved.flags = HGCLOCK_CFG_SET_WATERMARK | HGCLOCK_CFG_SET_PERIOD;
	ASSERT_EQ(0, hgclock_ring_config(self->fd, &saved));
}

/* A CPU coming online gets a HOTPLUG snapshot in its ring. */
TEST_F(ring, hotplug_snapshot)
{
	const char *path = "/sys/devices/system/cpu/cpu1/online";
	const struct hgclock_meta_cpu *slot;
	struct snap_collect *c;
	int ret;

	if (ncpus_online() < 2 || access(path, W_OK))
		SKIP(return, "CPU 1 cannot be taken offline here");
	slot = hgclock_map_slot(&self->map, 1);
	hgclock_ring_skip_all(&self->map);
	ret = write_sysfs(path, "0");
	if (ret)
		SKIP(return, "offlining CPU 1: %s", strerror(-ret));
	EXPECT_EQ(0, slot->online);
	ASSERT_EQ(0, write_sysfs(path, "1"));
	EXPECT_EQ(1, slot->online);

	c = calloc(1, sizeof(*c));
	ASSERT_NE(NULL, c);
	ASSERT_LE(0, hgclock_ring_consume(&self->map, 1, collect_snap, c));
	EXPECT_TRUE(c->reasons_seen & (1U << HGCLOCK_SNAP_HOTPLUG));
	free(c);
}

/* Periodic snapshots arrive at the configured period. */
TEST_F(ring, periodic_snapshots)
{
	struct hgclock_ring_config cfg, saved;
	struct snap_collect *c = calloc(1, sizeof(*c));
	bool isolated[1024];
	int cpu, nr_timers, i;

	ASSERT_NE(NULL, c);
	/* No timer on an isolated CPU (issue 30 item 7). */
	nr_timers = ncpus_online() - isolated_cpus(isolated, 1024);
	memset(&saved, 0, sizeof(saved));
	ASSERT_EQ(0, hgclock_ring_config(self->fd, &saved));
	memset(&cfg, 0, sizeof(cfg));
	cfg.flags = HGCLOCK_CFG_SET_PERIOD;
	cfg.snapshot_period_ns = 50 * 1000000ULL;
	ASSERT_EQ(0, hgclock_ring_config(self->fd, &cfg));
	hgclock_ring_skip_all(&self->map);
	/*
	 * 6 snapshots per timer CPU: 300 ms at this period.  Not a fixed
	 * sleep: an emulated VM starved of host CPU fires its timers late
	 * (missed periods are skipped), so wait for them up to 3 s, which
	 * at the default period (1 s) would give at most 3 or 4 per CPU.
	 */
	for (i = 0; i < 30 && c->nr < 6 * nr_timers; i++) {
		usleep(100000);
		for (cpu = 0; cpu < ncpus_online(); cpu++)
			ASSERT_LE(0, hgclock_ring_consume(&self->map, cpu, collect_snap, c));
	}
	saved.flags = HGCLOCK_CFG_SET_PERIOD;
	ASSERT_EQ(0, hgclock_ring_config(self->fd, &saved));
	TH_LOG("%d snapshots in %d ms", c->nr, i * 100);
	EXPECT_LE(6 * nr_timers, c->nr);
	EXPECT_TRUE(c->reasons_seen & (1U << HGCLOCK_SNAP_PERIODIC));
	free(c);
}

/*
 * Issue 30 item 7: with CPUs isolated (boot with "nohz_full=1
 * isolcpus=1", Documentation/testing.rst), a 10 ms period for a second
 * gives no hrtimer expiry of the snapshot timer (hrtimer_expire_entry,
 * function hg_snap_timer_fn) and no periodic snapshot on them, while the
 * other CPUs have both; a SNAPSHOT on demand still reaches them.
 * Skipped when no CPU is isolated.
 */
TEST_F(ring, no_timer_on_isolated_cpus)
{
	struct hgclock_ring_config cfg, saved;
	struct snap_collect *c = calloc(1, sizeof(*c));
	struct tracefs_instance *inst;
	int cpu, i, n, nr_isolated, first_isolated = -1;
	int expiries[1024] = { 0 }, periodic[1024] = { 0 };
	bool isolated[1024];

	ASSERT_NE(NULL, c);
	nr_isolated = isolated_cpus(isolated, 1024);
	if (!nr_isolated) {
		free(c);
		SKIP(return, "no isolated CPU (boot with nohz_full= isolcpus=)");
	}
	inst = tracefs_instance_create("hgclock_isol_test");
	ASSERT_NE(NULL, inst);
	ASSERT_LE(0, tracefs_instance_file_write(inst, "buffer_size_kb", "4096"));
	ASSERT_LE(0, tracefs_instance_file_write(inst, "events/timer/hrtimer_expire_entry/enable", "1"));
	memset(&saved, 0, sizeof(saved));
	ASSERT_EQ(0, hgclock_ring_config(self->fd, &saved));
	memset(&cfg, 0, sizeof(cfg));
	cfg.flags = HGCLOCK_CFG_SET_PERIOD;
	cfg.snapshot_period_ns = 10 * 1000000ULL;
	hgclock_ring_skip_all(&self->map);
	ASSERT_EQ(0, hgclock_ring_config(self->fd, &cfg));
	usleep(1000000);
	cfg.snapshot_period_ns = 0;
	ASSERT_EQ(0, hgclock_ring_config(self->fd, &cfg));
	tracefs_instance_file_write(inst, "events/timer/hrtimer_expire_entry/enable", "0");
	for (cpu = 0; cpu < ncpus_online() && cpu < 1024; cpu++) {
		expiries[cpu] = trace_count(inst, cpu, "hg_snap_timer_fn");
		c->nr = 0;
		ASSERT_LE(0, hgclock_ring_consume(&self->map, cpu, collect_snap, c));
		for (i = 0; i < c->nr; i++)
			periodic[cpu] += c->snaps[i].reason == HGCLOCK_SNAP_PERIODIC;
		TH_LOG("CPU %d%s: %d snapshot timer expiries, %d periodic snapshots",
		       cpu, isolated[cpu] ? " (isolated)" : "", expiries[cpu], periodic[cpu]);
		if (isolated[cpu]) {
			EXPECT_EQ(0, expiries[cpu]);
			EXPECT_EQ(0, periodic[cpu]);
			if (first_isolated < 0)
				first_isolated = cpu;
		} else {
			/* 100 periods; a slow, emulated machine gets a tenth. */
			EXPECT_LE(10, expiries[cpu]);
			EXPECT_LE(10, periodic[cpu]);
		}
	}
	tracefs_instance_destroy(inst);
	tracefs_instance_free(inst);
	saved.flags = HGCLOCK_CFG_SET_PERIOD;
	ASSERT_EQ(0, hgclock_ring_config(self->fd, &saved));
	/* On demand, the isolated CPU is snapshotted (one call on it). */
	ASSERT_LE(0, first_isolated);
	n = hgclock_snapshot(self->fd, first_isolated);
	EXPECT_EQ(1, n);
	free(c);
}

/* The ring size can change when nothing is mapped; a new ring starts clean. */
TEST(resize_when_unmapped)
{
	int fd = open(HGCLOCK_DEV_PATH, O_RDWR | O_CLOEXEC);
	struct hgclock_ring_config cfg, saved;
	struct hgclock_info info;
	struct hgclock_map map;
	int cpu;

	ASSERT_LE(0, fd);
	memset(&saved, 0, sizeof(saved));
	ASSERT_EQ(0, hgclock_ring_config(fd, &saved));
	memset(&cfg, 0, sizeof(cfg));
	cfg.flags = HGCLOCK_CFG_SET_RING_SIZE;
	cfg.ring_size = saved.ring_size * 2;
	ASSERT_EQ(0, hgclock_ring_config(fd, &cfg));
	EXPECT_EQ(saved.ring_size * 2, cfg.ring_size);
	ASSERT_EQ(0, hgclock_get_info(fd, &info));
	EXPECT_EQ(saved.ring_size * 2, info.ring_size);
	ASSERT_EQ(0, hgclock_map_open(fd, HGCLOCK_MAP_TAILS_RO, &map));
	EXPECT_EQ(saved.ring_size * 2, map.meta->ring_size);
	/* START snapshots: every online CPU has a valid conversion. */
	for (cpu = 0; cpu < ncpus_online(); cpu++)
		EXPECT_TRUE(hgclock_map_slot(&map, cpu)->conv.flags & HGCLOCK_CONV_VALID);
	hgclock_map_close(&map);
	saved.flags = HGCLOCK_CFG_SET_RING_SIZE | HGCLOCK_CFG_SET_WATERMARK;
	ASSERT_EQ(0, hgclock_ring_config(fd, &saved));
	close(fd);
}

/*
 * probe_stats (bench only, Documentation/bench.rst): the module times its
 * sched_switch probe per CPU.  While on, the calls grow with this
 * thread's context switches (tracked: the probe's full path, a record
 * into this session's rings), the time is not zero and no more than the
 * wall time; a reset starts from zero; while off, nothing is counted.
 */
#define PROBE_STATS_PARAM "/sys/module/hgclock/parameters/probe_stats"
#define PROBE_STATS_FILE "/sys/kernel/debug/hgclock/probe_stats"

/* The sum line "sched_switch CALLS NS"; 0 or -1. */
static int probe_stats_read(unsigned long long *calls, unsigned long long *ns)
{
	FILE *f = fopen(PROBE_STATS_FILE, "re");
	char line[256];
	int ret = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "sched_switch %llu %llu", calls, ns) == 2)
			ret = 0;
	fclose(f);
	return ret;
}

static long thread_switches(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru))
		return -1;
	return ru.ru_nvcsw + ru.ru_nivcsw;
}

/* Sleeps until this thread has switched out at least @n times. */
static long switch_out(long n)
{
	long sw0 = thread_switches(), i;

	for (i = 0; i < 10 * n && thread_switches() - sw0 < n; i++)
		usleep(1000);
	return thread_switches() - sw0;
}

TEST_F(ring, probe_stats_count_switches)
{
	unsigned long long calls, ns, calls2, ns2;
	pid_t tid = (pid_t)syscall(SYS_gettid);
	char was[8] = "";
	struct timespec t0, t1;
	double wall_ns;
	FILE *f;

	f = fopen(PROBE_STATS_PARAM, "re");
	if (!f)
		SKIP(return, "no probe_stats parameter (module before issue 30)");
	if (!fgets(was, sizeof(was), f))
		was[0] = 'N';
	fclose(f);
	if (access(PROBE_STATS_FILE, R_OK | W_OK))
		SKIP(return, "%s: %s", PROBE_STATS_FILE, strerror(errno));

	pin_to_cpu(_metadata, 0);
	ASSERT_EQ(0, write_sysfs(PROBE_STATS_PARAM, "1"));
	ASSERT_EQ(0, write_sysfs(PROBE_STATS_FILE, "0"));
	ASSERT_EQ(0, hgclock_track(self->fd, tid, 1));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* Each switch out and back in is two calls on CPU 0. */
	EXPECT_LE(20, switch_out(20));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ASSERT_EQ(0, probe_stats_read(&calls, &ns));
	ASSERT_EQ(0, hgclock_track(self->fd, tid, 0));
	wall_ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
	EXPECT_LE(40, calls);
	EXPECT_LT(0, ns);
	/* Every CPU's probes together: at most the wall time on each CPU. */
	EXPECT_GE(wall_ns * ncpus_online(), (double)ns);
	/* And one call under a millisecond, even under KASAN and TCG. */
	EXPECT_GT(1e6, (double)ns / (calls ? calls : 1));
	TH_LOG("%llu calls, %.0f ns each", calls, (double)ns / (calls ? calls : 1));

	/* Reset: from zero again (a few switches may have come since). */
	ASSERT_EQ(0, write_sysfs(PROBE_STATS_FILE, "0"));
	ASSERT_EQ(0, probe_stats_read(&calls2, &ns2));
	EXPECT_GT(calls, calls2);
	EXPECT_LE(20, switch_out(20));
	ASSERT_EQ(0, probe_stats_read(&calls2, &ns2));
	EXPECT_LE(40, calls2);

	/* Off: the static key is off, nothing more is counted. */
	ASSERT_EQ(0, write_sysfs(PROBE_STATS_PARAM, "0"));
	ASSERT_EQ(0, probe_stats_read(&calls, &ns));
	EXPECT_LE(20, switch_out(20));
	ASSERT_EQ(0, probe_stats_read(&calls2, &ns2));
	EXPECT_EQ(calls, calls2);
	EXPECT_EQ(ns, ns2);
	write_sysfs(PROBE_STATS_PARAM, was[0] == 'Y' ? "1" : "0");
}

int main(int argc, char **argv)
{
	int fd = open(HGCLOCK_DEV_PATH, O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		printf("TAP version 13\n1..1\nok 1 ring_test # SKIP %s: %s\n",
		       HGCLOCK_DEV_PATH, strerror(errno));
		return KSFT_SKIP;
	}
	close(fd);
	return test_harness_run(argc, argv);
}
