// SPDX-License-Identifier: LGPL-2.1
/*
 * libhgclock: the zero-syscall sched_clock / local_clock.
 *
 * The module publishes each CPU's TSC to sched_clock conversion in the meta
 * area under a sequence count.  We read the TSC and the CPU together with
 * rdtscp (Linux keeps the CPU number in TSC_AUX), take that CPU's
 * conversion under its sequence count, and apply it: the very value
 * sched_clock() would have returned for that TSC on that CPU.
 */
#include <cpuid.h>
#include <errno.h>
#include <string.h>

#include "libhgclock.h"

uint64_t hgclock_conv_apply(const struct hgclock_conversion *conv, uint64_t tsc)
{
	uint64_t delta = tsc - conv->tsc_base;

	if (conv->pre_shift >= 0)
		delta <<= conv->pre_shift;
	else
		delta >>= -conv->pre_shift;
	return conv->offset_ns +
	       (uint64_t)(((unsigned __int128)delta * conv->mult) >> conv->shift);
}

static inline uint64_t hg_rdtscp(unsigned int *aux)
{
	uint32_t lo, hi, c;

	__asm__ __volatile__("rdtscp" : "=a"(lo), "=d"(hi), "=c"(c));
	*aux = c;
	return ((uint64_t)hi << 32) | lo;
}

/*
 * CPUID 0x80000001 EDX bit 27; asked once, the answer cannot change.
 * Threads of an application may race to ask first: they store the same
 * value, atomically (relaxed: nothing else is published with it).
 */
static int hg_have_rdtscp(void)
{
	static int have = -1;
	int v = __atomic_load_n(&have, __ATOMIC_RELAXED);

	if (v < 0) {
		unsigned int eax, ebx, ecx, edx;

		v = __get_cpuid(0x80000001, &eax, &ebx, &ecx, &edx) &&
		    (edx & (1U << 27));
		__atomic_store_n(&have, v, __ATOMIC_RELAXED);
	}
	return v;
}

int hgclock_now_user(const struct hgclock_map *map, struct hgclock_now *now)
{
	const struct hgclock_meta_cpu *slot;
	struct hgclock_conversion conv;
	unsigned int aux, cpu, tries;
	uint32_t seq;
	uint64_t tsc;

	/* Without RDTSCP the TSC and the CPU cannot be read together. */
	if (!hg_have_rdtscp())
		return -ENODATA;
	for (tries = 0; tries < 100; tries++) {
		tsc = hg_rdtscp(&aux);
		cpu = aux & 0xfff;
		if (cpu >= map->meta->nr_cpus)
			return -ERANGE;
		slot = hgclock_map_slot(map, cpu);
		/* Pairs with the kernel's smp_wmb() after the odd count. */
		seq = __atomic_load_n(&slot->conv_seq, __ATOMIC_ACQUIRE);
		if (seq & 1)
			continue;
		memcpy(&conv, (const void *)&slot->conv, sizeof(conv));
		/* The copy completes before the count is read again. */
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&slot->conv_seq, __ATOMIC_RELAXED) != seq)
			continue;
		if (!(conv.flags & HGCLOCK_CONV_EXACT))
			return -ENODATA;
		now->tsc = tsc;
		now->tsc_after = tsc;
		now->cpu = cpu;
		now->conv_flags = conv.flags;
		now->sched_clock_ns = hgclock_conv_apply(&conv, tsc);
		now->has_local = !!(conv.flags & HGCLOCK_CONV_LOCAL_OFFSET);
		now->local_clock_ns = now->has_local ?
			now->sched_clock_ns + conv.local_offset_ns : 0;
		return 0;
	}
	return -EAGAIN;
}

int hgclock_now(int fd, const struct hgclock_map *map, struct hgclock_now *now,
		int *used_ioctl)
{
	struct hgclock_clock_sample s;
	int ret;

	*used_ioctl = 0;
	if (map && map->meta) {
		ret = hgclock_now_user(map, now);
		if (ret != -ENODATA && ret != -EAGAIN)
			return ret;
	}
	ret = hgclock_read_clock(fd, -1, &s);
	if (ret)
		return ret;
	*used_ioctl = 1;
	memset(now, 0, sizeof(*now));
	now->tsc = s.tsc_before;
	now->tsc_after = s.tsc_after;
	now->sched_clock_ns = s.sched_clock_ns;
	now->local_clock_ns = s.local_clock_ns;
	now->has_local = 1;
	now->cpu = s.cpu;
	return 0;
}
