// SPDX-License-Identifier: GPL-2.0
/*
 * cpuid_flood CPU COUNT [SECONDS [KEY]]: on CPU, executes CPUID with
 * EAX = 0x4847KKKK (hgclock's exit-pairing leaf, key KEY, default 0xf10d)
 * and ECX = 0x80000000 | i, for i = 0 .. COUNT-1, back to back, or until
 * SECONDS (default: no limit) have passed.  Every one exits to KVM; a
 * host with hgclock records at most HGCLOCK_PAIR_MAX_PER_SEC of them per
 * vCPU and counts the rest.  The top bit of ECX keeps the flood's
 * sequence numbers apart from the agent's exit pairings (numbered from 1),
 * whatever the agent's key.  Prints one JSON line: what ran, how long it
 * took and the guest's TSC around it.  A test aid for the nested testbed
 * (selftests/nested/track-guest.sh), linked static for the guest's
 * initramfs.
 */
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

#define PAIR_LEAF_BASE	0x48470000U	/* HGCLOCK_PAIR_LEAF_BASE */
#define SEQ_BASE	0x80000000U

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void cpuid(uint32_t leaf, uint32_t sub)
{
	uint32_t a = leaf, b, c = sub, d;

	asm volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d) : : "memory");
}

int main(int argc, char **argv)
{
	unsigned long long count, key = 0xf10d, i;
	double seconds = 0;
	uint64_t t0, t1, limit_ns = 0, tsc0, tsc1;
	cpu_set_t set;
	char *end;
	long cpu;

	if (argc < 3 || argc > 5) {
		fprintf(stderr, "usage: cpuid_flood CPU COUNT [SECONDS [KEY]]\n");
		return 2;
	}
	cpu = strtol(argv[1], &end, 10);
	if (*end || cpu < 0 || cpu >= CPU_SETSIZE)
		return 2;
	count = strtoull(argv[2], &end, 0);
	if (*end || count > SEQ_BASE)
		return 2;
	if (argc > 3) {
		seconds = strtod(argv[3], &end);
		if (*end || seconds < 0)
			return 2;
		limit_ns = (uint64_t)(seconds * 1e9);
	}
	if (argc > 4) {
		key = strtoull(argv[4], &end, 0);
		if (*end || key > 0xffff)
			return 2;
	}
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("sched_setaffinity");
		return 1;
	}
	t0 = now_ns();
	tsc0 = __rdtsc();
	for (i = 0; i < count; i++) {
		cpuid(PAIR_LEAF_BASE | (uint32_t)key, SEQ_BASE | (uint32_t)i);
		/* The clock (vDSO: no exit) once every 1024 CPUIDs. */
		if (limit_ns && !(i & 1023) && now_ns() - t0 >= limit_ns) {
			i++;
			break;
		}
	}
	tsc1 = __rdtsc();
	t1 = now_ns();
	printf("{\"cpu\": %ld, \"count\": %llu, \"asked\": %llu, \"key\": %llu, \"seq_base\": %u, "
	       "\"elapsed_ns\": %llu, \"per_second\": %.0f, \"tsc_start\": %llu, \"tsc_end\": %llu}\n",
	       cpu, i, count, key, SEQ_BASE, (unsigned long long)(t1 - t0),
	       t1 > t0 ? i * 1e9 / (double)(t1 - t0) : 0.0, (unsigned long long)tsc0,
	       (unsigned long long)tsc1);
	return 0;
}
