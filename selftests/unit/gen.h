/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the unit tests that make synthetic recordings share: a fixed-seed
 * PRNG, a growing byte buffer of ring records, a record's zeroed body and
 * header, a periodic CYC2NS snapshot, an hgclock_info as a host or guest
 * module reports it, the temporary files a correlation file is written to
 * and read back from, and LeakSanitizer asked from inside a test.
 * Header only (static inline): each test is one translation unit, with its
 * own PRNG state.  tools/bench/bench_compress.c reads its input with
 * gen_slurp() too.
 */
#ifndef HGCLOCK_UNIT_GEN_H
#define HGCLOCK_UNIT_GEN_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/hgclock.h>
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

#include "libhgclock.h"

/* ---- a fixed-seed PRNG (xorshift64*): the same runs on every machine ---- */

static uint64_t rng_state;

static inline void rng_seed(uint64_t seed)
{
	rng_state = seed ? seed : 0x9e3779b97f4a7c15ull;
}

static inline uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

/* Uniform enough in [lo, hi]. */
static inline uint64_t rnd_range(uint64_t lo, uint64_t hi)
{
	return lo + rnd() % (hi - lo + 1);
}

/* ---- records ---- */

/* Ring records as a section's payload; aborts when out of memory. */
struct buf {
	uint8_t *p;
	size_t len, cap;
};

static inline void put(struct buf *b, const void *p, size_t len)
{
	if (b->len + len > b->cap) {
		b->cap = (b->len + len) * 2;
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			abort();
	}
	memcpy(b->p + b->len, p, len);
	b->len += len;
}

/*
 * Zeroes the record @rec of @size bytes (reserved fields and padding
 * included, as the module does) and fills its header.
 */
static inline void gen_rec(void *rec, size_t size, uint16_t type, uint32_t cpu, uint64_t tsc,
			   uint64_t sched_clock_ns)
{
	struct hgclock_rec_header *h = rec;

	memset(rec, 0, size);
	h->type = type;
	h->size = (uint16_t)size;
	h->cpu = cpu;
	h->tsc = tsc;
	h->sched_clock_ns = sched_clock_ns;
}

/*
 * A periodic CYC2NS snapshot of conversion @c on @cpu at @tsc, appended
 * to @b: sched_clock and local_clock by @c (local_offset_ns), read in 60
 * TSC cycles.
 */
static inline void gen_cyc2ns(struct buf *b, uint32_t cpu, uint64_t tsc,
			      const struct hgclock_conversion *c, uint32_t tsc_khz, uint64_t seq)
{
	struct hgclock_rec_cyc2ns r;

	gen_rec(&r, sizeof(r), HGCLOCK_REC_CYC2NS, cpu, tsc, hgclock_conv_apply(c, tsc));
	r.local_clock_ns = r.hdr.sched_clock_ns + c->local_offset_ns;
	r.tsc_after = tsc + 60;
	r.conv = *c;
	r.tsc_khz = tsc_khz;
	r.reason = HGCLOCK_SNAP_PERIODIC;
	r.seq = seq;
	put(b, &r, sizeof(r));
}

/*
 * GET_INFO as a module with a TSC clocksource reports it: a host's, or a
 * KVM guest's (role HGCLOCK_ROLE_GUEST: hypervisor "KVMKVMKVM").
 */
static inline void gen_info(struct hgclock_info *info, uint32_t role, uint32_t nr_cpus,
			    uint32_t tsc_khz)
{
	memset(info, 0, sizeof(*info));
	info->size = sizeof(*info);
	info->abi_major = HGCLOCK_ABI_MAJOR;
	info->nr_cpu_ids = nr_cpus;
	info->nr_online_cpus = nr_cpus;
	info->tsc_khz = tsc_khz;
	info->role = role;
	strcpy(info->clocksource, "tsc");
	if (role == HGCLOCK_ROLE_GUEST)
		strcpy(info->hypervisor, "KVMKVMKVM");
}

/* ---- files ---- */

/* Creates the file @path_template (ending in XXXXXX) names: 0 or -errno. */
static inline int gen_tmpfile(char *path_template)
{
	int fd = mkstemp(path_template);

	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

#ifdef HGCLOCK_SYNC_H
/*
 * Loads the correlation file bytes @data (@len of them, malloc'd; freed
 * here, NULL is -EIO: the writer failed) into @s and builds the mapping:
 * the first error, or 0.  Only for tests that include sync.h first.
 */
static inline int gen_load_build(struct hgsync *s, uint8_t *data, size_t len)
{
	size_t pos;
	int ret;

	if (!data)
		return -EIO;
	ret = hgsync_load(s, data, len, 0, &pos);
	free(data);
	if (!ret)
		ret = hgsync_build(s);
	return ret;
}
#endif

/* The whole of file @path, malloc'd, *@len bytes; NULL when unreadable or empty. */
static inline void *gen_slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	void *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (!fseek(f, 0, SEEK_END) && (n = ftell(f)) > 0 && !fseek(f, 0, SEEK_SET)) {
		buf = malloc((size_t)n);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		}
		*len = (size_t)n;
	}
	fclose(f);
	return buf;
}

/*
 * Under ASan (make asan): 0 when nothing leaked so far.  The harness runs
 * each test in a child that ends with _exit(), where LeakSanitizer never
 * looks: it is asked here.  Elsewhere a no-op.
 */
static inline int gen_leaked(void)
{
#ifdef __SANITIZE_ADDRESS__
	return __lsan_do_recoverable_leak_check();
#else
	return 0;
#endif
}

#endif /* HGCLOCK_UNIT_GEN_H */
