// SPDX-License-Identifier: GPL-2.0
/*
 * Benchmark: the ring's producer.
 *
 *  - cost per record against a bare local_clock() call, both timed by the
 *    kernel in the same HGCLOCK_IOC_PRODUCE call on the same CPU;
 *  - sustained records per second with nothing lost: bursts of half a
 *    ring, each drained by the consumer before the next, timed end to end
 *    (produce + drain) from user space.
 *
 * Prints "BENCH <name> <value> <unit>" lines.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "libhgclock.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int count_rec(const struct hgclock_rec_header *rec, void *arg)
{
	uint64_t *n = arg;

	if (rec->type == HGCLOCK_REC_TEST)
		(*n)++;
	return 0;
}

static int produce(int fd, uint64_t count, struct hgclock_produce *p)
{
	memset(p, 0, sizeof(*p));
	p->size = sizeof(*p);
	p->cpu = 0;
	p->count = count;
	return ioctl(fd, HGCLOCK_IOC_PRODUCE, p) ? -errno : 0;
}

int main(void)
{
	uint64_t per_ring, burst, total = 0, lost = 0, seen = 0, t0, wall;
	double per_rec = 0, per_lc = 0;
	struct hgclock_produce p;
	struct hgclock_map map;
	int fd, ret, i;

	fd = hgclock_open(NULL);
	if (fd < 0) {
		fprintf(stderr, "bench_ring: %s\n", hgclock_open_hint(fd));
		return HGCLOCK_EXIT_NO_DEVICE;
	}
	ret = hgclock_map_open(fd, HGCLOCK_MAP_CONSUMER, &map);
	if (ret) {
		fprintf(stderr, "bench_ring: cannot map the ring: %s\n", strerror(-ret));
		return 1;
	}
	hgclock_ring_skip_all(&map);
	per_ring = map.meta->ring_size / sizeof(struct hgclock_rec_test);
	burst = per_ring / 2;

	/* Producer cost: a large burst the ring drops most of is still the
	 * producer's full path (a lost record costs a check, not a copy), so
	 * use bursts that fit. */
	for (i = 0; i < 8; i++) {
		if (produce(fd, burst, &p))
			return 1;
		per_rec += (double)p.produce_ns / (double)burst;
		per_lc += (double)p.local_clock_ns / (double)burst;
		hgclock_ring_consume(&map, 0, NULL, NULL);
	}
	per_rec /= 8;
	per_lc /= 8;

	t0 = now_ns();
	for (i = 0; i < 32; i++) {
		if (produce(fd, burst, &p))
			return 1;
		total += burst;
		lost += p.nr_lost;
		if (hgclock_ring_consume(&map, 0, count_rec, &seen) < 0)
			return 1;
	}
	wall = now_ns() - t0;

	printf("BENCH ring_produce_per_record %.1f ns\n", per_rec);
	printf("BENCH ring_local_clock_call %.1f ns\n", per_lc);
	printf("BENCH ring_produce_vs_local_clock %.3f ratio\n", per_rec / per_lc);
	printf("BENCH ring_sustained_no_loss %.0f records/s\n",
	       (double)seen * 1e9 / (double)wall);
	printf("BENCH ring_sustained_lost %llu records\n", (unsigned long long)lost);
	if (seen != total - lost)
		fprintf(stderr, "bench_ring: read %llu of %llu records\n",
			(unsigned long long)seen, (unsigned long long)total);
	hgclock_map_close(&map);
	close(fd);
	return lost ? 1 : 0;
}
