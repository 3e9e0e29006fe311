// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock kselftests: nothing of the kernel's own reaches user space.
 *
 * Every buffer the kernel writes is filled with 0xa5 first (inputs set on
 * top), then checked after the call: every reserved word and every byte
 * after a string's NUL is zero, no 64-bit word looks like a kernel
 * address, and nothing past the structure was written.  The same checks
 * run over the meta area and over every record type the module writes
 * (PAD excepted: only its type is defined), produced here on purpose:
 * LOST, CYC2NS and TEST from the ioctls, the tracking records from a
 * tracked thread, TSC_OFFSET and KVM's VCPU_SEEN from a tiny KVM guest
 * when the VM offers KVM.
 *
 * "Looks like a kernel address" is >= 0xffff800000000000: the x86-64
 * kernel half.  Fields that legitimately hold negative 64-bit values
 * (TSC offsets, conversion offsets, TEST's check = ~seq) are exempt and
 * named where they are skipped.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "../user/lib/libhgclock.h"
#include "test_util.h"

#define POISON		0xa5
#define GUARD		64	/* poisoned bytes after each structure */
#define MAX_EXEMPT	4

static bool kernel_looking(uint64_t v)
{
	return v >= 0xffff800000000000ULL;
}

/*
 * Counts the 8-byte aligned words of @p (@len bytes) that look like a
 * kernel address, skipping the words at the byte offsets in @exempt
 * (terminated by a negative value).  Prints each one.
 */
static int scan_words(const char *what, const void *p, size_t len,
		      const long *exempt)
{
	const unsigned char *b = p;
	int bad = 0;
	size_t off;

	for (off = 0; off + 8 <= len; off += 8) {
		uint64_t v;
		int i;
		bool skip = false;

		for (i = 0; exempt && i < MAX_EXEMPT && exempt[i] >= 0; i++)
			skip |= (size_t)exempt[i] == off;
		if (skip)
			continue;
		memcpy(&v, b + off, 8);
		if (kernel_looking(v)) {
			fprintf(stderr, "# %s +%zu: %#llx looks like a kernel address\n",
				what, off, (unsigned long long)v);
			bad++;
		}
	}
	return bad;
}

/* Bytes of @p that are not zero (each printed). */
static int nonzero_bytes(const char *what, const void *p, size_t len)
{
	const unsigned char *b = p;
	int bad = 0;
	size_t i;

	for (i = 0; i < len; i++) {
		if (b[i]) {
			if (bad < 4)
				fprintf(stderr, "# %s: byte %zu is %#x, want 0\n",
					what, i, b[i]);
			bad++;
		}
	}
	return bad;
}

/* A NUL terminated string in @len bytes with only zeros after the NUL. */
static int string_tail(const char *what, const char *s, size_t len)
{
	const char *nul = memchr(s, 0, len);

	if (!nul) {
		fprintf(stderr, "# %s: not NUL terminated\n", what);
		return 1;
	}
	return nonzero_bytes(what, nul, len - (nul - s));
}

/* Bytes of @p that lost their poison (written where nothing may be). */
static int unpoisoned(const char *what, const void *p, size_t len)
{
	const unsigned char *b = p;
	int bad = 0;
	size_t i;

	for (i = 0; i < len; i++)
		bad += b[i] != POISON;
	if (bad)
		fprintf(stderr, "# %s: %d bytes written past the structure\n", what, bad);
	return bad;
}

static int ncpus_online(void)
{
	return (int)sysconf(_SC_NPROCESSORS_ONLN);
}

/* ---- records -------------------------------------------------------- */

struct rec_check {
	unsigned int nr_cpus;
	unsigned long seen[HGCLOCK_REC_MAX + 1];
	int bad;
	pid_t kvm_tid;		/* a VCPU_SEEN with HGCLOCK_VCPU_KVM for it */
	bool kvm_seen;
};

/* Exempt offsets, -1 terminated; static: they outlive the switch below. */
static const long exempt_cyc2ns[] = {
	offsetof(struct hgclock_rec_cyc2ns, conv.offset_ns),
	offsetof(struct hgclock_rec_cyc2ns, conv.local_offset_ns), -1 };
static const long exempt_test[] = { offsetof(struct hgclock_rec_test, check), -1 };
static const long exempt_seen[] = {
	offsetof(struct hgclock_rec_vcpu_seen, tsc_offset), -1 };
static const long exempt_tsc_offset[] = {
	offsetof(struct hgclock_rec_tsc_offset, previous_offset),
	offsetof(struct hgclock_rec_tsc_offset, next_offset), -1 };
static const long exempt_vcpu_info[] = {
	offsetof(struct hgclock_vcpu_info, tsc_offset), -1 };
static const long exempt_meta_cpu[] = {
	offsetof(struct hgclock_meta_cpu, conv.offset_ns),
	offsetof(struct hgclock_meta_cpu, conv.local_offset_ns), -1 };

static int check_record(const struct hgclock_rec_header *h, void *arg)
{
	struct rec_check *c = arg;
	const long *exempt = NULL;
	size_t want = 0;
	int bad = 0;
	char what[48];

	snprintf(what, sizeof(what), "record %s", hgclock_rec_name(h->type));
	switch (h->type) {
	case HGCLOCK_REC_LOST:
		want = sizeof(struct hgclock_rec_lost);
		break;
	case HGCLOCK_REC_CYC2NS: {
		const struct hgclock_rec_cyc2ns *r = (const void *)h;

		want = sizeof(*r);
		/* Offsets of a linear function: negative as often as not. */
		exempt = exempt_cyc2ns;
		if (h->size == want && (r->conv.flags & ~0x3fU)) {
			fprintf(stderr, "# %s: unknown conv flags %#x\n", what, r->conv.flags);
			bad++;
		}
		if (h->size == want && (!r->reason || r->reason > HGCLOCK_SNAP_RESUME)) {
			fprintf(stderr, "# %s: reason %u\n", what, r->reason);
			bad++;
		}
		break;
	}
	case HGCLOCK_REC_TEST: {
		const struct hgclock_rec_test *r = (const void *)h;

		want = sizeof(*r);
		/* check is ~seq: all ones above; it is checked exactly instead. */
		exempt = exempt_test;
		if (h->size == want && r->check != ~r->seq) {
			fprintf(stderr, "# %s: check %#llx for seq %llu\n", what,
				(unsigned long long)r->check, (unsigned long long)r->seq);
			bad++;
		}
		break;
	}
	case HGCLOCK_REC_VCPU_SEEN: {
		const struct hgclock_rec_vcpu_seen *r = (const void *)h;

		want = sizeof(*r);
		exempt = exempt_seen;
		if (h->size != want)
			break;
		bad += string_tail("VCPU_SEEN.vm_name", r->vm_name, sizeof(r->vm_name));
		if (r->flags & ~0x7U) {
			fprintf(stderr, "# %s: unknown flags %#x\n", what, r->flags);
			bad++;
		}
		if (r->host_cpu < 0 || (unsigned int)r->host_cpu >= c->nr_cpus) {
			fprintf(stderr, "# %s: host_cpu %d\n", what, r->host_cpu);
			bad++;
		}
		if (c->kvm_tid && r->tid == c->kvm_tid && (r->flags & HGCLOCK_VCPU_KVM))
			c->kvm_seen = true;
		break;
	}
	case HGCLOCK_REC_VCPU_RUN:
	case HGCLOCK_REC_VCPU_STOP:
	case HGCLOCK_REC_VCPU_EXIT: {
		const struct hgclock_rec_vcpu *r = (const void *)h;

		want = sizeof(*r);
		/* No padding; nr_coalesced is a count, but a RUN's is 0. */
		if (h->size == want && h->type == HGCLOCK_REC_VCPU_RUN)
			bad += nonzero_bytes("VCPU_RUN.nr_coalesced", &r->nr_coalesced,
					     sizeof(r->nr_coalesced));
		break;
	}
	case HGCLOCK_REC_VCPU_MIGRATE: {
		const struct hgclock_rec_vcpu_migrate *r = (const void *)h;

		want = sizeof(*r);
		if (h->size == want)
			bad += nonzero_bytes("VCPU_MIGRATE.reserved", &r->reserved,
					     sizeof(r->reserved));
		break;
	}
	case HGCLOCK_REC_TSC_OFFSET: {
		const struct hgclock_rec_tsc_offset *r = (const void *)h;

		want = sizeof(*r);
		/* guest TSC minus host TSC: negative when the guest started later */
		exempt = exempt_tsc_offset;
		if (h->size == want) {
			bad += nonzero_bytes("TSC_OFFSET.reserved", &r->reserved,
					     sizeof(r->reserved));
			if (r->flags & ~0x7U) {
				fprintf(stderr, "# %s: unknown flags %#x\n", what, r->flags);
				bad++;
			}
		}
		break;
	}
	default:
		fprintf(stderr, "# record of unknown type %u, size %u\n", h->type, h->size);
		c->bad++;
		return 0;
	}
	if (h->size != want) {
		fprintf(stderr, "# %s: size %u, want %zu\n", what, h->size, want);
		bad++;
	} else {
		bad += scan_words(what, h, h->size, exempt);
	}
	if (h->cpu >= c->nr_cpus) {
		fprintf(stderr, "# %s: cpu %u\n", what, h->cpu);
		bad++;
	}
	c->seen[h->type]++;
	c->bad += bad;
	return 0;
}

static void drain_check(struct __test_metadata *_metadata,
			struct hgclock_map *map, struct rec_check *c)
{
	unsigned int cpu;

	for (cpu = 0; cpu < map->meta->nr_cpus; cpu++)
		ASSERT_LE(0, hgclock_ring_consume(map, cpu, check_record, c));
}

/* ---- fixture -------------------------------------------------------- */

FIXTURE(leak) {
	int fd;
	struct hgclock_info info;
	unsigned char *buf;	/* a poisoned buffer, one page */
	long coalesce_old;	/* coalesce_stop_us to restore, -1: untouched */
};

FIXTURE_SETUP(leak)
{
	self->buf = NULL;
	self->coalesce_old = -1;
	self->fd = open(HGCLOCK_DEV_PATH, O_RDWR | O_CLOEXEC);
	if (self->fd < 0 && errno == ENOENT)
		SKIP(return, HGCLOCK_DEV_PATH " missing: module not loaded");
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, hgclock_get_info(self->fd, &self->info));
	self->buf = malloc(4096);
	ASSERT_NE(NULL, self->buf);
}

FIXTURE_TEARDOWN(leak)
{
	restore_coalesce(self->coalesce_old);
	free(self->buf);
	if (self->fd >= 0)
		close(self->fd);
}

/* A larger caller buffer than the structure: the tail stays untouched. */
TEST_F(leak, get_info)
{
	struct hgclock_info *info = (void *)self->buf;
	int bad = 0;

	memset(self->buf, POISON, sizeof(*info) + GUARD);
	info->size = sizeof(*info) + GUARD;
	info->flags = 0;
	ASSERT_EQ(0, ioctl(self->fd, HGCLOCK_IOC_GET_INFO, info));
	EXPECT_EQ(sizeof(*info), info->size);
	EXPECT_EQ(0, info->flags);
	bad += nonzero_bytes("info.reserved", info->reserved, sizeof(info->reserved));
	bad += string_tail("info.clocksource", info->clocksource, sizeof(info->clocksource));
	bad += string_tail("info.hypervisor", info->hypervisor, sizeof(info->hypervisor));
	bad += scan_words("info", info, sizeof(*info), NULL);
	bad += unpoisoned("info tail", info + 1, GUARD);
	EXPECT_EQ(0, bad);
}

static int check_sample(const struct hgclock_clock_sample *s, const char *what)
{
	int bad = scan_words(what, s, sizeof(*s), NULL);

	if (s->flags != HGCLOCK_SAMPLE_VALID) {
		fprintf(stderr, "# %s: flags %#x\n", what, s->flags);
		bad++;
	}
	return bad;
}

TEST_F(leak, read_clock)
{
	struct hgclock_read_clock *req = (void *)self->buf;
	struct hgclock_clock_sample *samples;
	int ncpu = ncpus_online(), cpu, bad = 0;
	unsigned int i;

	/* The calling CPU, then each CPU by number. */
	for (cpu = -1; cpu < ncpu; cpu++) {
		memset(req, POISON, sizeof(*req) + GUARD);
		req->size = sizeof(*req);
		req->flags = cpu < 0 ? 0 : HGCLOCK_READ_CPU;
		req->cpu = cpu < 0 ? 0 : cpu;
		req->samples_ptr = 0;
		memset(req->reserved, 0, sizeof(req->reserved));
		/* nr_samples and sample stay poisoned: output only. */
		ASSERT_EQ(0, ioctl(self->fd, HGCLOCK_IOC_READ_CLOCK, req));
		EXPECT_EQ(1, req->nr_samples);
		bad += check_sample(&req->sample, "read_clock.sample");
		bad += nonzero_bytes("read_clock.reserved", req->reserved, sizeof(req->reserved));
		bad += scan_words("read_clock", req, sizeof(*req), NULL);
		bad += unpoisoned("read_clock tail", req + 1, GUARD);
	}

	/* Every CPU, with one poisoned slot more than needed. */
	samples = malloc((ncpu + 1) * sizeof(*samples));
	ASSERT_NE(NULL, samples);
	memset(samples, POISON, (ncpu + 1) * sizeof(*samples));
	memset(req, POISON, sizeof(*req) + GUARD);
	req->size = sizeof(*req);
	req->flags = HGCLOCK_READ_ALL_CPUS;
	req->cpu = 0;
	req->nr_samples = ncpu + 1;
	req->samples_ptr = (uintptr_t)samples;
	memset(req->reserved, 0, sizeof(req->reserved));
	ASSERT_EQ(0, ioctl(self->fd, HGCLOCK_IOC_READ_CLOCK, req));
	ASSERT_EQ(ncpu, req->nr_samples);
	for (i = 0; i < req->nr_samples; i++)
		bad += check_sample(&samples[i], "read_clock.samples[]");
	bad += unpoisoned("read_clock.samples[nr]", &samples[ncpu], sizeof(*samples));
	/* With ALL_CPUS the kernel zeroes the single sample. */
	bad += nonzero_bytes("read_clock.sample (all cpus)", &req->sample, sizeof(req->sample));
	bad += nonzero_bytes("read_clock.reserved", req->reserved, sizeof(req->reserved));
	bad += unpoisoned("read_clock tail", req + 1, GUARD);

	/* ENOSPC writes the structure back: no poison may come back. */
	memset(samples, POISON, sizeof(*samples));
	req->nr_samples = 0;
	ASSERT_EQ(-1, ioctl(self->fd, HGCLOCK_IOC_READ_CLOCK, req));
	ASSERT_EQ(ENOSPC, errno);
	EXPECT_EQ(ncpu, req->nr_samples);
	bad += nonzero_bytes("read_clock.sample (ENOSPC)", &req->sample, sizeof(req->sample));
	bad += scan_words("read_clock (ENOSPC)", req, sizeof(*req), NULL);
	bad += unpoisoned("read_clock.samples (ENOSPC)", samples, sizeof(*samples));
	free(samples);
	EXPECT_EQ(0, bad);
}

TEST_F(leak, ring_config_read)
{
	struct hgclock_ring_config *cfg = (void *)self->buf;
	int bad = 0;

	memset(cfg, POISON, sizeof(*cfg) + GUARD);
	cfg->size = sizeof(*cfg);
	cfg->flags = 0;
	memset(cfg->reserved, 0, sizeof(cfg->reserved));
	/* ring_size, watermark and the period are not read without flags. */
	ASSERT_EQ(0, ioctl(self->fd, HGCLOCK_IOC_RING_CONFIG, cfg));
	EXPECT_EQ(self->info.ring_size, cfg->ring_size);
	EXPECT_LE(cfg->watermark, cfg->ring_size);
	EXPECT_LT(0, cfg->watermark);
	EXPECT_EQ(0, cfg->flags);
	bad += nonzero_bytes("ring_config.reserved", cfg->reserved, sizeof(cfg->reserved));
	bad += scan_words("ring_config", cfg, sizeof(*cfg), NULL);
	bad += unpoisoned("ring_config tail", cfg + 1, GUARD);
	EXPECT_EQ(0, bad);
}

TEST_F(leak, snapshot_and_produce)
{
	struct hgclock_snapshot *snap = (void *)self->buf;
	struct hgclock_produce *prod = (void *)self->buf;
	int bad = 0;

	memset(snap, POISON, sizeof(*snap) + GUARD);
	memset(snap, 0, sizeof(*snap));
	snap->size = sizeof(*snap);
	snap->flags = HGCLOCK_SNAPSHOT_ALL_CPUS;
	ASSERT_EQ(0, ioctl(self->fd, HGCLOCK_IOC_SNAPSHOT, snap));
	EXPECT_EQ(ncpus_online(), snap->nr_written);
	EXPECT_EQ(0, snap->cpu);
	bad += nonzero_bytes("snapshot.reserved", snap->reserved, sizeof(snap->reserved));
	bad += scan_words("snapshot", snap, sizeof(*snap), NULL);
	bad += unpoisoned("snapshot tail", snap + 1, GUARD);

	memset(prod, POISON, sizeof(*prod) + GUARD);
	memset(prod, 0, sizeof(*prod));
	prod->size = sizeof(*prod);
	prod->cpu = 0;
	prod->count = 16;
	ASSERT_EQ(0, ioctl(self->fd, HGCLOCK_IOC_PRODUCE, prod));
	EXPECT_EQ(16, prod->nr_written + prod->nr_lost);
	bad += nonzero_bytes("produce.reserved", prod->reserved, sizeof(prod->reserved));
	bad += scan_words("produce", prod, sizeof(*prod), NULL);
	bad += unpoisoned("produce tail", prod + 1, GUARD);
	EXPECT_EQ(0, bad);
}

/* TRACK writes nothing back: the structure and its guard keep their bytes. */
TEST_F(leak, track_and_list)
{
	struct hgclock_track *tr = (void *)self->buf;
	struct hgclock_list_vcpus *list = (void *)(self->buf + 1024);
	struct hgclock_vcpu_info *infos;
	struct hgclock_track copy;
	unsigned int i, n, cap = 300;
	bool found = false;
	int bad = 0;

	memset(tr, POISON, sizeof(*tr) + GUARD);
	memset(tr, 0, sizeof(*tr));
	tr->size = sizeof(*tr);
	tr->flags = HGCLOCK_TRACK_ADD;
	tr->tid = getpid();
	memcpy(&copy, tr, sizeof(copy));
	ASSERT_EQ(0, ioctl(self->fd, HGCLOCK_IOC_TRACK, tr));
	EXPECT_EQ(0, memcmp(&copy, tr, sizeof(copy)));
	bad += unpoisoned("track tail", tr + 1, GUARD);

	infos = malloc(cap * sizeof(*infos));
	ASSERT_NE(NULL, infos);
	memset(infos, POISON, cap * sizeof(*infos));
	memset(list, POISON, sizeof(*list) + GUARD);
	list->size = sizeof(*list);
	list->nr = cap;
	list->vcpus_ptr = (uintptr_t)infos;
	memset(list->reserved, 0, sizeof(list->reserved));
	ASSERT_EQ(0, ioctl(self->fd, HGCLOCK_IOC_LIST_VCPUS, list));
	n = list->nr;
	ASSERT_LE(1, n);
	ASSERT_GT(cap, n);
	for (i = 0; i < n; i++) {
		found |= infos[i].tid == getpid();
		bad += string_tail("vcpu_info.vm_name", infos[i].vm_name,
				   sizeof(infos[i].vm_name));
		bad += scan_words("vcpu_info", &infos[i], sizeof(infos[i]),
				  exempt_vcpu_info);
		if (infos[i].flags & ~0x7U) {
			fprintf(stderr, "# vcpu_info: unknown flags %#x\n", infos[i].flags);
			bad++;
		}
	}
	EXPECT_TRUE(found);
	bad += unpoisoned("vcpu_info[nr]", &infos[n], sizeof(*infos));
	bad += nonzero_bytes("list_vcpus.reserved", list->reserved, sizeof(list->reserved));
	bad += scan_words("list_vcpus", list, sizeof(*list), NULL);
	bad += unpoisoned("list_vcpus tail", list + 1, GUARD);

	/* ENOSPC: the count comes back, the array is not touched. */
	memset(infos, POISON, sizeof(*infos));
	list->nr = 0;
	ASSERT_EQ(-1, ioctl(self->fd, HGCLOCK_IOC_LIST_VCPUS, list));
	ASSERT_EQ(ENOSPC, errno);
	EXPECT_EQ(n, list->nr);
	bad += unpoisoned("vcpu_info (ENOSPC)", infos, sizeof(*infos));
	bad += nonzero_bytes("list_vcpus.reserved", list->reserved, sizeof(list->reserved));
	free(infos);

	tr->flags = HGCLOCK_TRACK_REMOVE;
	EXPECT_EQ(0, ioctl(self->fd, HGCLOCK_IOC_TRACK, tr));
	EXPECT_EQ(0, bad);
}

TEST_F(leak, meta_area)
{
	struct hgclock_map map;
	const struct hgclock_meta *meta;
	size_t slots_end;
	unsigned int cpu;
	int bad = 0;

	ASSERT_EQ(0, hgclock_map_open(self->fd, HGCLOCK_MAP_TAILS_RO, &map));
	meta = map.meta;
	bad += nonzero_bytes("meta.reserved0", &meta->reserved0, sizeof(meta->reserved0));
	bad += nonzero_bytes("meta.reserved", meta->reserved, sizeof(meta->reserved));
	bad += scan_words("meta", meta, sizeof(*meta), NULL);
	for (cpu = 0; cpu < meta->nr_cpus; cpu++) {
		const struct hgclock_meta_cpu *slot = hgclock_map_slot(&map, cpu);

		bad += scan_words("meta_cpu", slot, sizeof(*slot),
				  exempt_meta_cpu);
		if (slot->online > 1 || (slot->conv.flags & ~0x3fU)) {
			fprintf(stderr, "# meta_cpu %u: online %u conv.flags %#x\n",
				cpu, slot->online, slot->conv.flags);
			bad++;
		}
	}
	/* Between the last slot and the first data area: zero. */
	slots_end = meta->header_size + (size_t)meta->nr_cpus * meta->cpu_slot_size;
	ASSERT_LE(slots_end, meta->meta_size);
	bad += nonzero_bytes("meta padding", (const char *)meta + slots_end,
			     meta->meta_size - slots_end);
	/* Consumer positions past the last CPU: zero (no one writes them). */
	bad += nonzero_bytes("consumer padding", map.tail + meta->nr_cpus,
			     map.consumer_size - meta->nr_cpus * sizeof(__u64));
	hgclock_map_close(&map);
	EXPECT_EQ(0, bad);
}

/*
 * A thread that moves between CPUs and sleeps: RUN, STOP and MIGRATE.  It
 * publishes its id and waits until it is tracked.
 */
struct hopper_arg {
	volatile pid_t tid;
	volatile int go;
};

static void *hopper(void *p)
{
	struct hopper_arg *a = p;
	int ncpu = ncpus_online(), i;

	a->tid = (pid_t)syscall(SYS_gettid);
	while (!a->go)
		usleep(1000);
	for (i = 0; i < 40; i++) {
		pin_self(i % ncpu);
		usleep(2000);
	}
	return NULL;
}

TEST_F(leak, every_record_type)
{
	struct hgclock_produce prod;
	struct rec_check c;
	struct hgclock_map map;
	struct hopper_arg ha;
	pthread_t thr;
	int ret;

	memset(&c, 0, sizeof(c));
	c.nr_cpus = self->info.nr_cpu_ids;
	ret = hgclock_map_open(self->fd, HGCLOCK_MAP_CONSUMER, &map);
	if (ret == -EBUSY)
		SKIP(return, "another process is the ring's consumer");
	ASSERT_EQ(0, ret);
	hgclock_ring_skip_all(&map);

	/* CYC2NS on every CPU. */
	ASSERT_EQ(ncpus_online(), hgclock_snapshot(self->fd, -1));

	/* TEST records past the ring's end (losses, and a PAD at the wrap)... */
	memset(&prod, 0, sizeof(prod));
	prod.size = sizeof(prod);
	prod.cpu = 0;
	prod.count = self->info.ring_size / sizeof(struct hgclock_rec_test) + 64;
	ASSERT_EQ(0, ioctl(self->fd, HGCLOCK_IOC_PRODUCE, &prod));
	EXPECT_LT(0, prod.nr_lost);
	drain_check(_metadata, &map, &c);
	/* ...then one more, which the LOST record precedes. */
	memset(&prod, 0, sizeof(prod));
	prod.size = sizeof(prod);
	prod.count = 1;
	ASSERT_EQ(0, ioctl(self->fd, HGCLOCK_IOC_PRODUCE, &prod));
	EXPECT_EQ(1, prod.nr_written);

	/*
	 * The tracking records: a tracked thread hops, sleeps and exits.
	 * Each of its stops is written late (coalesce_stop_us 1 us, far less
	 * than its sleeps), from the copy the module keeps: those bytes are
	 * checked too, and there are STOPs even on one CPU.
	 */
	self->coalesce_old = set_coalesce(1);
	memset(&ha, 0, sizeof(ha));
	ASSERT_EQ(0, pthread_create(&thr, NULL, hopper, &ha));
	while (!ha.tid)
		usleep(1000);
	ret = hgclock_track(self->fd, ha.tid, 1);
	ha.go = 1;
	ASSERT_EQ(0, pthread_join(thr, NULL));
	ASSERT_EQ(0, ret);
	/* The exit record comes from sched_process_exit, after the join. */
	usleep(20000);
	drain_check(_metadata, &map, &c);
	hgclock_map_close(&map);

	EXPECT_EQ(0, c.bad);
	EXPECT_LT(0, c.seen[HGCLOCK_REC_LOST]);
	EXPECT_LT(0, c.seen[HGCLOCK_REC_CYC2NS]);
	EXPECT_LT(0, c.seen[HGCLOCK_REC_TEST]);
	EXPECT_LT(0, c.seen[HGCLOCK_REC_VCPU_SEEN]);
	EXPECT_LT(0, c.seen[HGCLOCK_REC_VCPU_RUN]);
	EXPECT_LT(0, c.seen[HGCLOCK_REC_VCPU_STOP]);
	EXPECT_LT(0, c.seen[HGCLOCK_REC_VCPU_EXIT]);
	if (ncpus_online() > 1)
		EXPECT_LT(0, c.seen[HGCLOCK_REC_VCPU_MIGRATE]);
	TH_LOG("records checked: LOST %lu CYC2NS %lu TEST %lu SEEN %lu RUN %lu STOP %lu MIGRATE %lu EXIT %lu",
	       c.seen[1], c.seen[2], c.seen[3], c.seen[16], c.seen[17], c.seen[18],
	       c.seen[19], c.seen[20]);
}

/*
 * The child of kvm_records: a VM with one vCPU (creating it makes KVM
 * write the vCPU's TSC offset: a TSC_OFFSET record) that runs one HLT in
 * real mode (its first VM entry: VCPU_SEEN with HGCLOCK_VCPU_KVM).
 * Exits 0 after the HLT exit, 2 when KVM_RUN did not get there, 1 when
 * no vCPU could be made.
 */
static int kvm_child(void)
{
	struct kvm_userspace_memory_region region;
	struct kvm_sregs sregs;
	struct kvm_regs regs;
	struct kvm_run *run;
	int kvm, vm, vcpu, size;
	unsigned char *mem;

	kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0)
		return 1;
	vm = ioctl(kvm, KVM_CREATE_VM, 0);
	if (vm < 0)
		return 1;
	mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return 1;
	mem[0] = 0xf4;	/* hlt */
	memset(&region, 0, sizeof(region));
	region.memory_size = 4096;
	region.userspace_addr = (uintptr_t)mem;
	if (ioctl(vm, KVM_SET_USER_MEMORY_REGION, &region))
		return 1;
	vcpu = ioctl(vm, KVM_CREATE_VCPU, 0);
	if (vcpu < 0)
		return 1;
	size = ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	run = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu, 0);
	if (size <= 0 || run == MAP_FAILED)
		return 2;
	if (ioctl(vcpu, KVM_GET_SREGS, &sregs))
		return 2;
	sregs.cs.base = 0;
	sregs.cs.selector = 0;
	if (ioctl(vcpu, KVM_SET_SREGS, &sregs))
		return 2;
	memset(&regs, 0, sizeof(regs));
	regs.rflags = 2;
	if (ioctl(vcpu, KVM_SET_REGS, &regs))
		return 2;
	/* Emulated SVM under TCG: give it time, but not forever. */
	alarm(30);
	if (ioctl(vcpu, KVM_RUN, 0) || run->exit_reason != KVM_EXIT_HLT) {
		fprintf(stderr, "# KVM_RUN: %s, exit reason %u\n", strerror(errno),
			run->exit_reason);
		return 2;
	}
	return 0;
}

TEST_F_TIMEOUT(leak, kvm_records, 180)
{
	struct hgclock_map map;
	struct rec_check c;
	bool loaded = false;
	int ret, status;
	pid_t pid;

	if (access("/dev/kvm", R_OK | W_OK)) {
		loaded = true;
		ret = system("modprobe kvm_amd >/dev/null 2>&1 || modprobe kvm_intel >/dev/null 2>&1");
		if (access("/dev/kvm", R_OK | W_OK))
			SKIP(return, "no KVM in this VM (modprobe kvm_amd/kvm_intel: %d)", ret);
	}
	/* kvm.ko's arrival attaches the module to its tracepoints. */
	ASSERT_EQ(0, hgclock_get_info(self->fd, &self->info));
	EXPECT_TRUE(self->info.features & HGCLOCK_FEAT_KVM_TRACK);

	memset(&c, 0, sizeof(c));
	c.nr_cpus = self->info.nr_cpu_ids;
	ret = hgclock_map_open(self->fd, HGCLOCK_MAP_CONSUMER, &map);
	ASSERT_EQ(0, ret);
	hgclock_ring_skip_all(&map);

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		_exit(kvm_child());
	c.kvm_tid = pid;
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	usleep(20000);
	drain_check(_metadata, &map, &c);
	hgclock_map_close(&map);
	if (loaded)
		ret = system("modprobe -r kvm_amd >/dev/null 2>&1; modprobe -r kvm_intel >/dev/null 2>&1; modprobe -r kvm >/dev/null 2>&1");

	EXPECT_EQ(0, c.bad);
	ASSERT_TRUE(WIFEXITED(status) || WIFSIGNALED(status));
	/* A skip must not hide a failure found above. */
	if (WIFEXITED(status) && WEXITSTATUS(status) == 1 && _metadata->passed)
		SKIP(return, "KVM present but no vCPU could be created");
	EXPECT_LT(0, c.seen[HGCLOCK_REC_TSC_OFFSET]);
	TH_LOG("records checked: TSC_OFFSET %lu SEEN %lu EXIT %lu; guest %s",
	       c.seen[HGCLOCK_REC_TSC_OFFSET], c.seen[HGCLOCK_REC_VCPU_SEEN],
	       c.seen[HGCLOCK_REC_VCPU_EXIT],
	       WIFEXITED(status) && !WEXITSTATUS(status) ? "ran to HLT" : "did not run");
	/* Only a guest that entered can have been discovered. */
	if (WIFEXITED(status) && !WEXITSTATUS(status)) {
		EXPECT_TRUE(c.kvm_seen);
		EXPECT_LT(0, c.seen[HGCLOCK_REC_VCPU_EXIT]);
	} else if (_metadata->passed) {
		SKIP(return, "the tiny guest did not reach its HLT: VCPU_SEEN not covered");
	}
}

TEST_HARNESS_MAIN
