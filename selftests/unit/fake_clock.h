/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A public clock without the module, for the unit tests and the native
 * benches: a meta area laid out exactly as the module publishes
 * /dev/hgclock-clock (struct hgclock_meta, then nr_cpus struct
 * hgclock_meta_cpu; ring_size and consumer_size 0; a whole number of pages),
 * in a memfd.  The library maps it as it maps the device: through
 * hgclock_map_clock(), or hgclock_clock_open() on fake_clock.path
 * (/proc/self/fd/N; GET_INFO fails there with ENOTTY as on the public
 * clock).  Conversions are written the kernel's way, under conv_seq.
 *
 * fake_clock_native() fills a conversion for this machine's TSC as the
 * kernel's cyc2ns does (clocks_calc_mult_shift() of the TSC's kHz to ns,
 * shift at most 32), the frequency measured against CLOCK_MONOTONIC_RAW:
 * values near the machine's own clocks, the arithmetic of the real thing.
 * Header only (static inline), like gen.h.
 */
#ifndef HGCLOCK_UNIT_FAKE_CLOCK_H
#define HGCLOCK_UNIT_FAKE_CLOCK_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <linux/hgclock.h>

#include "libhgclock.h"

struct fake_clock {
	int fd;
	size_t size;
	struct hgclock_meta *meta;	/* writable: we are the kernel here */
	struct hgclock_map map;		/* the library's read-only view */
	char path[64];
};

static inline struct hgclock_meta_cpu *fake_clock_slot(struct fake_clock *fc, unsigned int cpu)
{
	return (struct hgclock_meta_cpu *)((char *)fc->meta + fc->meta->header_size +
					   (size_t)cpu * fc->meta->cpu_slot_size);
}

/* 0 or -errno; fc->map is mapped by hgclock_map_clock(). */
static inline int fake_clock_create(struct fake_clock *fc, unsigned int nr_cpus)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t used = sizeof(struct hgclock_meta) +
		      (size_t)nr_cpus * sizeof(struct hgclock_meta_cpu);
	unsigned int cpu;
	int ret;

	memset(fc, 0, sizeof(*fc));
	fc->size = (used + (size_t)page - 1) / (size_t)page * (size_t)page;
	fc->fd = memfd_create("hgclock-fake-clock", MFD_CLOEXEC);
	if (fc->fd < 0)
		return -errno;
	if (ftruncate(fc->fd, (off_t)fc->size))
		goto fail;
	fc->meta = mmap(NULL, fc->size, PROT_READ | PROT_WRITE, MAP_SHARED, fc->fd, 0);
	if (fc->meta == MAP_FAILED) {
		fc->meta = NULL;
		goto fail;
	}
	fc->meta->magic = HGCLOCK_META_MAGIC;
	fc->meta->abi_major = HGCLOCK_ABI_MAJOR;
	fc->meta->abi_minor = HGCLOCK_ABI_MINOR;
	fc->meta->meta_size = (uint32_t)fc->size;
	fc->meta->header_size = sizeof(struct hgclock_meta);
	fc->meta->cpu_slot_size = sizeof(struct hgclock_meta_cpu);
	fc->meta->nr_cpus = nr_cpus;
	for (cpu = 0; cpu < nr_cpus; cpu++)
		fake_clock_slot(fc, cpu)->online = 1;
	snprintf(fc->path, sizeof(fc->path), "/proc/self/fd/%d", fc->fd);
	ret = hgclock_map_clock(fc->fd, &fc->map);
	if (ret) {
		errno = -ret;
		goto fail;
	}
	return 0;
fail:
	ret = -errno;
	if (fc->meta)
		munmap(fc->meta, fc->size);
	close(fc->fd);
	memset(fc, 0, sizeof(*fc));
	return ret;
}

static inline void fake_clock_destroy(struct fake_clock *fc)
{
	hgclock_map_close(&fc->map);
	if (fc->meta)
		munmap(fc->meta, fc->size);
	if (fc->fd > 0)
		close(fc->fd);
	memset(fc, 0, sizeof(*fc));
}

/*
 * The kernel's write of a CPU's conversion: conv_seq odd, the conversion,
 * conv_seq even again; the release fences stand for its smp_wmb()s.
 */
static inline void fake_clock_set(struct fake_clock *fc, unsigned int cpu,
				  const struct hgclock_conversion *conv)
{
	struct hgclock_meta_cpu *slot = fake_clock_slot(fc, cpu);
	uint32_t seq = __atomic_load_n(&slot->conv_seq, __ATOMIC_RELAXED);

	__atomic_store_n(&slot->conv_seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy(&slot->conv, conv, sizeof(*conv));
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&slot->conv_seq, seq + 2, __ATOMIC_RELAXED);
}

/* The kernel's clocks_calc_mult_shift(), maxsec 0: @from_hz units to @to_hz. */
static inline void fake_clock_mult_shift(uint32_t *mult, uint32_t *shift, uint32_t from_hz,
					 uint32_t to_hz)
{
	uint64_t tmp = 0;
	uint32_t sft, sftacc = 32;

	for (sft = 32; sft > 0; sft--) {
		tmp = (uint64_t)to_hz << sft;
		tmp += from_hz / 2;
		tmp /= from_hz;
		if ((tmp >> sftacc) == 0)
			break;
	}
	*mult = (uint32_t)tmp;
	*shift = sft;
}

static inline uint64_t fake_clock_rdtsc(void)
{
	uint32_t lo, hi;

	__asm__ __volatile__("lfence\n\trdtsc" : "=a"(lo), "=d"(hi) : : "memory");
	return ((uint64_t)hi << 32) | lo;
}

static inline uint64_t fake_clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * A native cyc2ns conversion for this machine's TSC (EXACT, with a
 * local_clock offset): its kHz over @calib_ms against CLOCK_MONOTONIC_RAW,
 * the offset making sched_clock_ns CLOCK_MONOTONIC now.  *@tsc_khz the kHz.
 */
static inline void fake_clock_native(struct hgclock_conversion *conv, unsigned int calib_ms,
				     uint32_t *tsc_khz)
{
	struct timespec pause = { 0, (long)calib_ms * 1000000L };
	uint64_t tsc0, ns0, tsc1, ns1, khz, tsc_now, mono_now;

	ns0 = fake_clock_ns(CLOCK_MONOTONIC_RAW);
	tsc0 = fake_clock_rdtsc();
	nanosleep(&pause, NULL);
	ns1 = fake_clock_ns(CLOCK_MONOTONIC_RAW);
	tsc1 = fake_clock_rdtsc();
	khz = (tsc1 - tsc0) * 1000000ull / (ns1 - ns0 ? ns1 - ns0 : 1);
	memset(conv, 0, sizeof(*conv));
	fake_clock_mult_shift(&conv->mult, &conv->shift, (uint32_t)khz, 1000000);
	tsc_now = fake_clock_rdtsc();
	mono_now = fake_clock_ns(CLOCK_MONOTONIC);
	conv->tsc_base = 0;
	conv->pre_shift = 0;
	conv->offset_ns = mono_now -
		(uint64_t)(((unsigned __int128)tsc_now * conv->mult) >> conv->shift);
	conv->flags = HGCLOCK_CONV_VALID | HGCLOCK_CONV_EXACT | HGCLOCK_CONV_LOCAL_OFFSET |
		      HGCLOCK_CONV_SCHED_CLOCK_STABLE;
	conv->local_offset_ns = 1000;
	if (tsc_khz)
		*tsc_khz = (uint32_t)khz;
}

#endif /* HGCLOCK_UNIT_FAKE_CLOCK_H */
