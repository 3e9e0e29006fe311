// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of the guest-to-host mapping (user/sync.c): the pure
 * helpers (KVM TSC scaling and its inverse, conversion inversion, the
 * probe fit) against 128-bit references, then the whole path from a
 * synthetic correlation file to hgsync_to_host() against a known truth.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/hgclock.h>

#include "kselftest_harness.h"
#include "libhgclock.h"
#include "corr.h"
#include "proto.h"
#include "sync.h"

typedef unsigned __int128 u128;

/* ---- a fixed-seed PRNG (xorshift64*) ---- */

static uint64_t rng_state;

static void rng_seed(uint64_t seed)
{
	rng_state = seed ? seed : 0x9e3779b97f4a7c15ull;
}

static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

/* Uniform enough in [lo, hi]. */
static uint64_t rnd_range(uint64_t lo, uint64_t hi)
{
	return lo + rnd() % (hi - lo + 1);
}

static uint64_t absdiff(uint64_t a, uint64_t b)
{
	return a > b ? a - b : b - a;
}

/* ---- 1. KVM TSC scaling and its inverse ---- */

static uint64_t ref_guest_tsc(uint64_t h, uint64_t off, uint64_t ratio, uint32_t frac)
{
	return (uint64_t)(((u128)h * ratio) >> frac) + off;
}

/* The smallest h with (h * ratio) >> frac >= s. */
static uint64_t ref_host_scaled(uint64_t s, uint64_t ratio, uint32_t frac)
{
	return (uint64_t)((((u128)s << frac) + ratio - 1) / ratio);
}

#define NEG_OFFSET	((uint64_t)-28131585425ll)
#define POS_OFFSET	123456789ull

static const uint64_t fixed_h[] = {
	0, 1, 2, 3, 1000, 28131585424ull, 28131585425ull, 28131585426ull,
	(1ull << 32) - 1, 1ull << 32, (1ull << 40) + 12345,
	(1ull << 50) - 1, 1ull << 50, (1ull << 50) + 7, (1ull << 50) + (1ull << 20),
};

#define NR_FIXED_H	(sizeof(fixed_h) / sizeof(fixed_h[0]))

static uint64_t test_h(unsigned int i)
{
	return i < NR_FIXED_H ? fixed_h[i] : rnd_range(0, (1ull << 50) + (1ull << 20));
}

TEST(kvm_identity_round_trip)
{
	static const uint32_t fracs[] = { 32, 48 };
	static const uint64_t offs[] = { NEG_OFFSET, POS_OFFSET, 0 };

	rng_seed(1);
	for (unsigned int f = 0; f < 2; f++) {
		uint64_t ratio = 1ull << fracs[f];

		for (unsigned int o = 0; o < 3; o++) {
			for (unsigned int i = 0; i < 5000; i++) {
				uint64_t h = test_h(i);
				uint64_t g = hgsync_kvm_guest_tsc(h, offs[o], ratio, fracs[f]);

				ASSERT_EQ(h + offs[o], g) TH_LOG("frac %u h %llu", fracs[f],
								 (unsigned long long)h);
				ASSERT_EQ(h, hgsync_kvm_host_tsc(g, offs[o], ratio, fracs[f]))
					TH_LOG("frac %u h %llu", fracs[f], (unsigned long long)h);
			}
		}
	}
	/* Ratio unknown (0): the offset alone. */
	EXPECT_EQ(5 + NEG_OFFSET, hgsync_kvm_guest_tsc(5, NEG_OFFSET, 0, 0));
	EXPECT_EQ(5, hgsync_kvm_host_tsc(5 + NEG_OFFSET, NEG_OFFSET, 0, 0));
}

struct scaling {
	uint64_t ratio;
	uint32_t frac;
};

static const struct scaling scalings[] = {
	{ 5ull << 30, 32 },		/* AMD, 1.25 */
	{ 3435973837ull, 32 },		/* AMD, 0.8 */
	{ 5ull << 46, 48 },		/* Intel, 1.25 */
	{ 225179981368525ull, 48 },	/* Intel, 0.8 */
};

TEST(kvm_scaled_guest_then_host)
{
	rng_seed(2);
	for (unsigned int k = 0; k < 4; k++) {
		uint64_t ratio = scalings[k].ratio;
		uint32_t frac = scalings[k].frac;
		bool up = ratio >= 1ull << frac;

		for (unsigned int o = 0; o < 2; o++) {
			uint64_t off = o ? POS_OFFSET : NEG_OFFSET;

			for (unsigned int i = 0; i < 5000; i++) {
				uint64_t h = test_h(i);
				uint64_t g = hgsync_kvm_guest_tsc(h, off, ratio, frac);
				uint64_t back = hgsync_kvm_host_tsc(g, off, ratio, frac);

				ASSERT_EQ(ref_guest_tsc(h, off, ratio, frac), g)
					TH_LOG("ratio %llu frac %u h %llu",
					       (unsigned long long)ratio, frac,
					       (unsigned long long)h);
				if (up) {
					/* Scaling up is one to one: the exact h comes back. */
					ASSERT_EQ(h, back)
						TH_LOG("ratio %llu frac %u h %llu",
						       (unsigned long long)ratio, frac,
						       (unsigned long long)h);
					continue;
				}
				/*
				 * Scaling down maps several h to one g: the
				 * smallest of them comes back.
				 */
				ASSERT_TRUE(back <= h);
				ASSERT_EQ(g, hgsync_kvm_guest_tsc(back, off, ratio, frac))
					TH_LOG("h %llu back %llu", (unsigned long long)h,
					       (unsigned long long)back);
				if (back)
					ASSERT_NE(g, hgsync_kvm_guest_tsc(back - 1, off, ratio,
									  frac));
			}
		}
	}
}

TEST(kvm_scaled_smallest_inverse)
{
	rng_seed(3);
	for (unsigned int k = 0; k < 4; k++) {
		uint64_t ratio = scalings[k].ratio;
		uint32_t frac = scalings[k].frac;

		for (unsigned int o = 0; o < 2; o++) {
			uint64_t off = o ? POS_OFFSET : NEG_OFFSET;

			for (unsigned int i = 0; i < 5000; i++) {
				/* g - off: the scaled host TSC, 1 .. ~2^50. */
				uint64_t s = i < NR_FIXED_H ? fixed_h[i] + 1 :
					rnd_range(1, (1ull << 50) + (1ull << 20));
				uint64_t g = s + off;
				uint64_t h = hgsync_kvm_host_tsc(g, off, ratio, frac);
				uint64_t at, before;

				ASSERT_EQ(ref_host_scaled(s, ratio, frac), h)
					TH_LOG("ratio %llu frac %u s %llu",
					       (unsigned long long)ratio, frac,
					       (unsigned long long)s);
				ASSERT_LT(0, h);
				/* Signed differences: g may wrap around with off. */
				at = hgsync_kvm_guest_tsc(h, off, ratio, frac);
				before = hgsync_kvm_guest_tsc(h - 1, off, ratio, frac);
				ASSERT_LE(0, (int64_t)(at - g))
					TH_LOG("s %llu h %llu", (unsigned long long)s,
					       (unsigned long long)h);
				ASSERT_GT(0, (int64_t)(before - g))
					TH_LOG("s %llu h %llu", (unsigned long long)s,
					       (unsigned long long)h);
			}
		}
	}
}

/* ---- 2. inverting a TSC to sched_clock conversion ---- */

#define CONV_FLAGS	(HGCLOCK_CONV_VALID | HGCLOCK_CONV_EXACT)

/* 2.5 GHz: 0.4 ns a tick. */
static const struct hgclock_conversion native_pos = {
	.tsc_base = 0, .offset_ns = 123456789, .mult = 858993459, .shift = 31,
	.pre_shift = 0, .flags = CONV_FLAGS,
};

/*
 * Bare metal: sched_clock starts near 0 at boot while the TSC already
 * counts, so cyc2ns_offset is negative (here: the TSC was at 5e12).
 */
static const struct hgclock_conversion native_neg = {
	.tsc_base = 0, .offset_ns = (uint64_t)-2000000000000ll, .mult = 858993459,
	.shift = 31, .pre_shift = 0, .flags = CONV_FLAGS,
};
#define NATIVE_NEG_TSC0	5000000000000ull	/* where native_neg gives 0 */

/* kvm-clock: pvclock's tsc_shift -1 with 0.8, 0 with 0.4, +1 with 0.2. */
static const struct hgclock_conversion kvm_convs[] = {
	{ .tsc_base = 0x123456789abull, .offset_ns = 1000000000000ull, .mult = 3435973837u,
	  .shift = 32, .pre_shift = -1, .flags = CONV_FLAGS | HGCLOCK_CONV_PVCLOCK },
	{ .tsc_base = 0x123456789abull, .offset_ns = 1000000000000ull, .mult = 1717986918u,
	  .shift = 32, .pre_shift = 0, .flags = CONV_FLAGS | HGCLOCK_CONV_PVCLOCK },
	{ .tsc_base = 0x123456789abull, .offset_ns = 1000000000000ull, .mult = 858993459u,
	  .shift = 32, .pre_shift = 1, .flags = CONV_FLAGS | HGCLOCK_CONV_PVCLOCK },
};

/* t is the smallest TSC from @from on whose ns reaches @ns. */
static int check_invert(struct __test_metadata *_metadata,
			const struct hgclock_conversion *c, uint64_t ns, uint64_t from)
{
	uint64_t t = hgsync_conv_invert(c, ns);

	EXPECT_LE(from, t) TH_LOG("ns %llu: t %llu below %llu", (unsigned long long)ns,
				  (unsigned long long)t, (unsigned long long)from);
	EXPECT_LE(ns, hgclock_conv_apply(c, t))
		TH_LOG("ns %llu: t %llu gives %llu", (unsigned long long)ns,
		       (unsigned long long)t, (unsigned long long)hgclock_conv_apply(c, t));
	if (t > from)
		EXPECT_GT(ns, hgclock_conv_apply(c, t - 1))
			TH_LOG("ns %llu: t - 1 = %llu gives %llu already",
			       (unsigned long long)ns, (unsigned long long)(t - 1),
			       (unsigned long long)hgclock_conv_apply(c, t - 1));
	return _metadata->passed ? 0 : -1;
}

/* ns values reached at random TSCs in [base + lo, base + hi], +0..2. */
static void invert_range(struct __test_metadata *_metadata,
			 const struct hgclock_conversion *c, uint64_t base,
			 uint64_t lo, uint64_t hi, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		uint64_t t = base + rnd_range(lo, hi);
		uint64_t ns = hgclock_conv_apply(c, t) + rnd_range(0, 2);

		if (check_invert(_metadata, c, ns, base))
			return;
	}
}

TEST(conv_invert_native)
{
	rng_seed(4);
	invert_range(_metadata, &native_pos, 0, 1ull << 20, 1ull << 50, 20000);
}

/*
 * offset_ns is modulo 2^64 like the forward formula: taking ns -
 * offset_ns without the wrap gave a TSC near 2^63.
 */
TEST(conv_invert_native_negative_offset)
{
	rng_seed(5);
	/* sched_clock from 0 to ~5 days. */
	invert_range(_metadata, &native_neg, NATIVE_NEG_TSC0, 0, 1ull << 50, 20000);
}

TEST(conv_invert_kvmclock)
{
	rng_seed(6);
	for (unsigned int k = 0; k < 3; k++)
		invert_range(_metadata, &kvm_convs[k], kvm_convs[k].tsc_base,
			     1ull << 20, 1ull << 44, 20000);
}

/*
 * Every ns in the first few us after the conversion's base: the search
 * window must not start below tsc_base (the delta would wrap), or the
 * truncated estimate comes back 1-2 ticks short of reaching @ns.
 */
TEST(conv_invert_kvmclock_near_base)
{
	for (unsigned int k = 0; k < 3; k++) {
		const struct hgclock_conversion *c = &kvm_convs[k];

		for (uint64_t ns = c->offset_ns; ns < c->offset_ns + 5000; ns++)
			if (check_invert(_metadata, c, ns, c->tsc_base))
				return;
	}
}

/* ---- 3. the probe fit ---- */

#define FIT_X0		3000000000ull		/* guest ns */
#define FIT_SPAN	10000000000ull		/* 10 s */

/* host = 1e12 + x * (1 + 50e-6) */
static uint64_t fit_truth(uint64_t x)
{
	return 1000000000000ull + x + x * 50 / 1000000;
}

/*
 * @n observations evenly spread over the span (shuffled), delays in
 * [20, 500] us, every @tight_every-th and the last in [1, 3] us (0: none).
 */
static void make_obs(struct hgsync_obs *obs, size_t n, unsigned int tight_every)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t step = FIT_SPAN / (n - 1);
		uint64_t x = FIT_X0 + i * step + (i && i < n - 1 ? rnd_range(0, step / 2) : 0);
		bool tight = tight_every && (i % tight_every == 0 || i == n - 1);
		uint64_t d1 = tight ? rnd_range(1000, 3000) : rnd_range(20000, 500000);
		uint64_t d2 = tight ? rnd_range(1000, 3000) : rnd_range(20000, 500000);

		obs[i] = (struct hgsync_obs){ x, fit_truth(x) - d1, fit_truth(x) + d2 };
	}
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = rnd_range(0, i);
		struct hgsync_obs t = obs[i];

		obs[i] = obs[j];
		obs[j] = t;
	}
}

/* The largest error over 1000 points of the span. */
static uint64_t fit_max_error(const struct hgcor_segment *seg)
{
	uint64_t worst = 0;

	for (unsigned int i = 0; i < 1000; i++) {
		uint64_t x = FIT_X0 + (uint64_t)i * (FIT_SPAN / 999);
		uint64_t e = absdiff(hgsync_probe_apply(seg, x), fit_truth(x));

		if (e > worst)
			worst = e;
	}
	return worst;
}

TEST(probe_apply)
{
	struct hgcor_segment seg = {
		.method = HGCOR_METHOD_PROBE, .ref_guest = 1000000000, .ref_host = 5000000000,
		.rate_q48 = (1ll << 48) / 1000,		/* +1000 ppm (rounded down) */
	};

	EXPECT_EQ(5000000000ull, hgsync_probe_apply(&seg, 1000000000));
	/* 1e6 * 2^48/1000 >> 48: 999.99..., floored. */
	EXPECT_EQ(5000000000ull + 1000000 + 999, hgsync_probe_apply(&seg, 1001000000));
	/* Before the reference: a signed delta, floored towards -inf. */
	EXPECT_EQ(5000000000ull - 1000000 - 1000, hgsync_probe_apply(&seg, 999000000));
	seg.rate_q48 = -(1ll << 48) / 1000;
	EXPECT_EQ(5000000000ull + 1000000 - 1000, hgsync_probe_apply(&seg, 1001000000));
}

TEST(fit_drift_with_tight_samples)
{
	struct hgsync_obs obs[1000];
	struct hgcor_segment seg;
	uint64_t err;
	double rate;

	rng_seed(7);
	make_obs(obs, 1000, 10);
	memset(&seg, 0, sizeof(seg));
	ASSERT_EQ(0, hgsync_fit(obs, 1000, &seg));
	for (size_t i = 1; i < 1000; i++)
		ASSERT_LE(obs[i - 1].x, obs[i].x);	/* sorted on return */
	EXPECT_EQ(HGCOR_METHOD_PROBE, seg.method);
	EXPECT_LE(2, seg.nr_samples);
	EXPECT_GE(1000, seg.nr_samples);	/* all, when the intersection holds */
	err = fit_max_error(&seg);
	EXPECT_LE(err, seg.bound_ns) TH_LOG("error %llu bound %llu", (unsigned long long)err,
					    (unsigned long long)seg.bound_ns);
	EXPECT_GT(10000, seg.bound_ns) TH_LOG("bound %llu", (unsigned long long)seg.bound_ns);
	/* 50 ppm, to within 0.2 ppm. */
	rate = (double)seg.rate_q48 / 281474976710656.0;
	EXPECT_GT(0.2e-6, rate > 50e-6 ? rate - 50e-6 : 50e-6 - rate)
		TH_LOG("rate %.9f", rate);
}

/*
 * Only a few tight observations (6 of 1000): the wide ones the fit keeps
 * for the stretches without a tight one must not widen the bound (nor
 * drag the fit) beyond what the tight ones allow.
 */
TEST(fit_drift_few_tight_samples)
{
	struct hgsync_obs obs[1000];
	struct hgcor_segment seg;
	uint64_t err;

	rng_seed(7);
	make_obs(obs, 1000, 200);
	memset(&seg, 0, sizeof(seg));
	ASSERT_EQ(0, hgsync_fit(obs, 1000, &seg));
	err = fit_max_error(&seg);
	EXPECT_LE(err, seg.bound_ns) TH_LOG("error %llu bound %llu", (unsigned long long)err,
					    (unsigned long long)seg.bound_ns);
	EXPECT_GT(20000, seg.bound_ns) TH_LOG("bound %llu ns, error %llu ns",
					       (unsigned long long)seg.bound_ns,
					       (unsigned long long)err);
}

TEST(fit_drift_wide_samples_only)
{
	struct hgsync_obs obs[500];
	struct hgcor_segment seg;
	uint64_t err;

	rng_seed(8);
	make_obs(obs, 500, 0);
	memset(&seg, 0, sizeof(seg));
	ASSERT_EQ(0, hgsync_fit(obs, 500, &seg));
	err = fit_max_error(&seg);
	EXPECT_LE(err, seg.bound_ns) TH_LOG("error %llu bound %llu", (unsigned long long)err,
					    (unsigned long long)seg.bound_ns);
	EXPECT_GT(1000000, seg.bound_ns);
}

/*
 * A clock that steps (kvm-clock while KVM moves the offsets): for a short
 * stretch the truth is 3 ms off the line.  No line fits every bracket, so
 * the bound must widen to cover the observations the line misses; the
 * tight ones the fit keeps all lie off that stretch.
 */
TEST(fit_stepped_clock_bound_covers_observations)
{
	const uint64_t step_ns = 3000000, blip_start = FIT_X0 + FIT_SPAN / 2,
		       blip_end = blip_start + FIT_SPAN / 100;
	struct hgsync_obs obs[1000];
	struct hgcor_segment seg;
	size_t nblip = 0;

	rng_seed(9);
	make_obs(obs, 1000, 10);
	for (size_t i = 0; i < 1000; i++) {
		uint64_t x = obs[i].x;

		if (x < blip_start || x >= blip_end)
			continue;
		/* Wide brackets around the stepped truth. */
		obs[i].lo = fit_truth(x) + step_ns - rnd_range(20000, 500000);
		obs[i].hi = fit_truth(x) + step_ns + rnd_range(20000, 500000);
		nblip++;
	}
	ASSERT_LT(0, nblip);
	memset(&seg, 0, sizeof(seg));
	ASSERT_EQ(0, hgsync_fit(obs, 1000, &seg));
	for (size_t i = 0; i < 1000; i++) {
		uint64_t x = obs[i].x;
		uint64_t truth = fit_truth(x) + (x >= blip_start && x < blip_end ? step_ns : 0);
		uint64_t e = absdiff(hgsync_probe_apply(&seg, x), truth);

		ASSERT_LE(e, seg.bound_ns) TH_LOG("observation at %llu: error %llu, bound %llu",
						  (unsigned long long)x, (unsigned long long)e,
						  (unsigned long long)seg.bound_ns);
	}
	/* And no wider than the step and a bracket or two. */
	EXPECT_GT(step_ns + 1000000, seg.bound_ns) TH_LOG("bound %llu", (unsigned long long)seg.bound_ns);
}

TEST(fit_two_and_fewer)
{
	struct hgsync_obs obs[2] = {
		{ FIT_X0 + FIT_SPAN, fit_truth(FIT_X0 + FIT_SPAN) - 2000,
		  fit_truth(FIT_X0 + FIT_SPAN) + 1000 },
		{ FIT_X0, fit_truth(FIT_X0) - 1500, fit_truth(FIT_X0) + 2500 },
	};
	struct hgcor_segment seg;

	memset(&seg, 0, sizeof(seg));
	EXPECT_EQ(-EINVAL, hgsync_fit(obs, 0, &seg));
	EXPECT_EQ(-EINVAL, hgsync_fit(obs, 1, &seg));
	EXPECT_EQ(0, seg.method);	/* untouched */
	ASSERT_EQ(0, hgsync_fit(obs, 2, &seg));
	EXPECT_EQ(2, seg.nr_samples);
	EXPECT_EQ(FIT_X0, obs[0].x);
	EXPECT_LE(fit_max_error(&seg), seg.bound_ns);
	EXPECT_GT(10000, seg.bound_ns);
}

/* ---- 4. a synthetic correlation file, end to end ---- */

#define KHZ		2500000u
#define T0		5000000000000ull	/* host TSC where the recording starts */
#define SPAN		25000000000ull		/* 10 s of host TSC */
#define TC		(T0 + SPAN / 2)		/* KVM changes vCPU 0's offset */
#define TM		(T0 + 20000000000ull)	/* vCPU 0 moves to host CPU 1 */
#define O1		((uint64_t)-4000000000000ll)
#define O2		(O1 + 2500000000ull)	/* the guest TSC jumps 1 s ahead */
#define VM_PID		1234
#define NR_PROBES	400
#define PROBE_LO	(T0 + 1000000)
#define PROBE_HI	(T0 + SPAN - 1000000)
#define HOST_LOCAL_OFF	4321
#define GUEST_LOCAL_OFF	777
#define B_REC_DELAY	1000			/* guest's new snapshot, ticks after TC */

static const struct hgclock_conversion hconv = {
	.tsc_base = 0, .offset_ns = (uint64_t)-500000000000ll, .mult = 858993459, .shift = 31,
	.pre_shift = 0, .local_offset_ns = HOST_LOCAL_OFF,
	.flags = HGCLOCK_CONV_VALID | HGCLOCK_CONV_EXACT | HGCLOCK_CONV_LOCAL_OFFSET,
};

#define GUEST_CONV_FLAGS (HGCLOCK_CONV_VALID | HGCLOCK_CONV_EXACT | HGCLOCK_CONV_PVCLOCK | \
			  HGCLOCK_CONV_LOCAL_OFFSET)

/*
 * kvm-clock of both vCPUs before TC, and vCPU 0's refreshed one after.
 * With @native, the guest's sched_clock is the TSC's (cyc2ns) instead:
 * one conversion, its offset negative as on any machine whose TSC ran
 * before sched_clock started (here 1 s of guest TSC before).
 */
static struct hgclock_conversion gconv_a, gconv_b;

static void init_gconv(int native)
{
	if (native) {
		gconv_a = (struct hgclock_conversion){
			.tsc_base = 0, .offset_ns = (uint64_t)-1000000000ll,
			.mult = 858993459, .shift = 31, .pre_shift = 0,
			.flags = HGCLOCK_CONV_VALID | HGCLOCK_CONV_EXACT |
				 HGCLOCK_CONV_LOCAL_OFFSET,
			.local_offset_ns = GUEST_LOCAL_OFF,
		};
		gconv_b = gconv_a;
		return;
	}
	gconv_a = (struct hgclock_conversion){
		.tsc_base = T0 - 1000000000 + O1, .offset_ns = 1000000000000ull,
		.mult = 3435973837u, .shift = 32, .pre_shift = -1,
		.flags = GUEST_CONV_FLAGS, .local_offset_ns = GUEST_LOCAL_OFF,
	};
	gconv_b = gconv_a;
	gconv_b.tsc_base = TC + O2;
	gconv_b.offset_ns = hgclock_conv_apply(&gconv_a, TC + O1);
}

static uint64_t offset_at(int vcpu, uint64_t h)
{
	return vcpu == 0 && h >= TC ? O2 : O1;
}

static const struct hgclock_conversion *gconv_at(int vcpu, uint64_t h)
{
	return vcpu == 0 && h >= TC ? &gconv_b : &gconv_a;
}

static uint64_t guest_tsc_at(int vcpu, uint64_t h)
{
	return h + offset_at(vcpu, h);
}

static uint64_t guest_ns_at(int vcpu, uint64_t h)
{
	return hgclock_conv_apply(gconv_at(vcpu, h), guest_tsc_at(vcpu, h));
}

static int host_cpu_of(int vcpu, uint64_t h)
{
	return vcpu == 0 && h < TM ? 0 : 1;
}

struct scen {
	int32_t vm_pid;		/* in GUEST_VM */
	int64_t probe_shift;	/* ticks added to every probe's guest TSC */
	int no_end;		/* abort instead of closing */
	int guest_native;	/* guest sched_clock from cyc2ns, not kvm-clock */
	int pairs;		/* exit pairings: NR_PAIRS of them */
	uint32_t host_key_xor;	/* flips bits of the host halves' key */
	int no_probes;		/* an empty PROBES section */
	int moving;		/* write_moving() instead: KVM re-bases the TSC */
	int moving_no_pvclock;	/* ... without the host's PVCLOCK records */
	int64_t moving_snap_skew; /* ns added to the guest snapshots' offset_ns */
};

struct buf {
	uint8_t *p;
	size_t len, cap;
};

static void put(struct buf *b, const void *p, size_t len)
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

static void put_cyc2ns(struct buf *b, uint32_t cpu, uint64_t tsc,
		       const struct hgclock_conversion *c, uint64_t seq)
{
	struct hgclock_rec_cyc2ns r;

	memset(&r, 0, sizeof(r));
	r.hdr.type = HGCLOCK_REC_CYC2NS;
	r.hdr.size = sizeof(r);
	r.hdr.cpu = cpu;
	r.hdr.tsc = tsc;
	r.hdr.sched_clock_ns = hgclock_conv_apply(c, tsc);
	r.local_clock_ns = r.hdr.sched_clock_ns + c->local_offset_ns;
	r.tsc_after = tsc + 60;
	r.conv = *c;
	r.tsc_khz = KHZ;
	r.reason = HGCLOCK_SNAP_PERIODIC;
	r.seq = seq;
	put(b, &r, sizeof(r));
}

static void put_seen(struct buf *b, int vcpu, uint64_t tsc)
{
	struct hgclock_rec_vcpu_seen r;

	memset(&r, 0, sizeof(r));
	r.hdr.type = HGCLOCK_REC_VCPU_SEEN;
	r.hdr.size = sizeof(r);
	r.hdr.cpu = host_cpu_of(vcpu, tsc);
	r.hdr.tsc = tsc;
	r.hdr.sched_clock_ns = hgclock_conv_apply(&hconv, tsc);
	r.tid = 2000 + vcpu;
	r.vm_pid = VM_PID;
	r.vcpu_id = vcpu;
	r.flags = HGCLOCK_VCPU_KVM | HGCLOCK_VCPU_TSC_KNOWN;
	snprintf(r.vm_name, sizeof(r.vm_name), "%d-12", VM_PID);
	r.tsc_offset = offset_at(vcpu, tsc);
	r.tsc_scaling_ratio = 1ull << 32;
	r.tsc_frac_bits = 32;
	r.host_cpu = host_cpu_of(vcpu, tsc);
	put(b, &r, sizeof(r));
}

static void put_run(struct buf *b, int vcpu, uint64_t tsc)
{
	struct hgclock_rec_vcpu r;

	memset(&r, 0, sizeof(r));
	r.hdr.type = HGCLOCK_REC_VCPU_RUN;
	r.hdr.size = sizeof(r);
	r.hdr.cpu = host_cpu_of(vcpu, tsc);
	r.hdr.tsc = tsc;
	r.hdr.sched_clock_ns = hgclock_conv_apply(&hconv, tsc);
	r.tid = 2000 + vcpu;
	r.vm_pid = VM_PID;
	r.vcpu_id = vcpu;
	put(b, &r, sizeof(r));
}

static void put_tsc_offset(struct buf *b)
{
	struct hgclock_rec_tsc_offset r;

	memset(&r, 0, sizeof(r));
	r.hdr.type = HGCLOCK_REC_TSC_OFFSET;
	r.hdr.size = sizeof(r);
	r.hdr.cpu = host_cpu_of(0, TC);
	r.hdr.tsc = TC;
	r.hdr.sched_clock_ns = hgclock_conv_apply(&hconv, TC);
	r.tid = 2000;
	r.vm_pid = VM_PID;
	r.vcpu_id = 0;
	r.flags = HGCLOCK_VCPU_KVM | HGCLOCK_VCPU_TSC_KNOWN;
	r.previous_offset = O1;
	r.next_offset = O2;
	r.tsc_scaling_ratio = 1ull << 32;
	r.tsc_frac_bits = 32;
	put(b, &r, sizeof(r));
}

/* The true host TSC of each probe's guest reading. */
static uint64_t probe_h[NR_PROBES];

static void make_probes(struct hgcor_probe *pr, int64_t shift)
{
	rng_seed(9);
	for (unsigned int i = 0; i < NR_PROBES; i++) {
		int vcpu = i & 1;
		uint64_t h = PROBE_LO + i * ((PROBE_HI - PROBE_LO) / NR_PROBES) +
			     rnd_range(0, 1000000);
		/* 1-5 us round trips, every 4th one 50-500 us (queueing). */
		uint64_t wide = i % 4 == 3;
		uint64_t d1 = wide ? rnd_range(125000, 1250000) : rnd_range(2500, 12500);
		uint64_t d2 = wide ? rnd_range(125000, 1250000) : rnd_range(2500, 12500);
		uint64_t g;

		/* KVM changes the offset while the vCPU is out: no probe spans it. */
		if (h - d1 < TC + 2500000 && h + d2 + 2500000 > TC)
			h = TC + 2500000 + d1;
		probe_h[i] = h;
		g = guest_tsc_at(vcpu, h) + (uint64_t)shift;
		memset(&pr[i], 0, sizeof(pr[i]));
		pr[i].host_tsc_send = h - d1;
		pr[i].host_ns_send = hgclock_conv_apply(&hconv, h - d1);
		pr[i].host_tsc_recv = h + d2;
		pr[i].host_ns_recv = hgclock_conv_apply(&hconv, h + d2);
		pr[i].guest_tsc = g;
		pr[i].guest_sched_ns = hgclock_conv_apply(gconv_at(vcpu, h), g);
		pr[i].guest_local_ns = pr[i].guest_sched_ns + GUEST_LOCAL_OFF;
		pr[i].host_cpu_send = pr[i].host_cpu_recv = host_cpu_of(vcpu, h);
		pr[i].guest_cpu = vcpu;
		pr[i].flags = HGP_PROBE_EXACT | HGP_PROBE_HAS_LOCAL;
	}
}

/*
 * Exit pairings: the guest reads its clocks 0.4-2 us before the host's
 * reading in kvm_cpuid and 0.4-2 us after, as a CPUID exit would.  None
 * straddles vCPU 0's offset change.
 */
#define NR_PAIRS	1000
#define PAIR_KEY	0x2b5d

static void put_pairs(struct buf *host, struct buf *guest, uint32_t host_key_xor)
{
	rng_seed(21);
	for (unsigned int i = 0; i < NR_PAIRS; i++) {
		int vcpu = i & 1;
		uint64_t h = PROBE_LO + i * ((PROBE_HI - PROBE_LO) / NR_PAIRS) + rnd_range(0, 1000000);
		uint64_t d1 = rnd_range(1000, 5000), d2 = rnd_range(1000, 5000);
		struct hgclock_rec_exit_pair gp;
		struct hgclock_rec_exit_host hp;

		if (h - d1 < TC + 2500000 && h + d2 + 2500000 > TC)
			h = TC + 2500000 + d1;
		memset(&gp, 0, sizeof(gp));
		gp.hdr.type = HGCLOCK_REC_EXIT_PAIR;
		gp.hdr.size = sizeof(gp);
		gp.hdr.cpu = vcpu;
		gp.hdr.tsc = guest_tsc_at(vcpu, h + d2 + 100);
		gp.seq = i + 1;
		gp.key = PAIR_KEY;
		gp.tsc_before = guest_tsc_at(vcpu, h - d1);
		gp.sched_clock_before_ns = hgclock_conv_apply(gconv_at(vcpu, h), gp.tsc_before + 20);
		gp.tsc_after = guest_tsc_at(vcpu, h + d2);
		gp.sched_clock_after_ns = hgclock_conv_apply(gconv_at(vcpu, h), gp.tsc_after - 20);
		put(guest, &gp, sizeof(gp));

		memset(&hp, 0, sizeof(hp));
		hp.hdr.type = HGCLOCK_REC_EXIT_HOST;
		hp.hdr.size = sizeof(hp);
		hp.hdr.cpu = host_cpu_of(vcpu, h);
		hp.hdr.tsc = h;
		hp.hdr.sched_clock_ns = hgclock_conv_apply(&hconv, h + 30);
		hp.tid = 2000 + vcpu;
		hp.vm_pid = VM_PID;
		hp.vcpu_id = vcpu;
		hp.seq = i + 1;
		hp.key = PAIR_KEY ^ host_key_xor;
		put(host, &hp, sizeof(hp));
	}
}

/*
 * An unstable host TSC: KVM re-bases both vCPUs' TSC offsets every 50 ms
 * (the guest's TSC jumps 0..100 ms ahead: KVM keeps it from going back)
 * and rewrites their kvm-clock parameters right
 * after, keeping kvm-clock continuous to within +-50 ns (its new base is
 * the host's clock, not the old formula).  The guest's own snapshots see
 * parameters without the stable bit: no exact conversion of their own.
 */
#define MV_DT		125000000ull	/* 50 ms of host TSC between updates */
#define MV_NR		190		/* updates per vCPU */
#define MV_SCHED_OFF	123456789ull	/* the guest's kvm_sched_clock_offset */
#define MV_MUL		1717986918u	/* 0.4 ns per TSC count, 32.32 */
#define MV_K0		7000000000ull	/* kvm-clock at T0 */

struct mv_epoch {
	uint64_t host_tsc;	/* of the update (the offset changed 500 before) */
	uint64_t offset;
	struct hgclock_conversion conv;	/* the guest's sched_clock under it */
	uint64_t system_time;
};

static struct mv_epoch mv[2][MV_NR + 1];

static uint64_t mv_kvmclock(uint64_t h)
{
	return MV_K0 + (uint64_t)(int64_t)(((__int128)(int64_t)(h - T0) * MV_MUL) >> 32);
}

static void mv_init(void)
{
	rng_seed(31);
	for (int c = 0; c < 2; c++) {
		uint64_t off = O1 + (uint64_t)c * 1000;

		for (unsigned int k = 0; k <= MV_NR; k++) {
			struct mv_epoch *e = &mv[c][k];
			/* Epoch 0: parameters written before the recording began. */
			uint64_t u = k ? T0 + k * MV_DT + (uint64_t)c * 7000000 : T0 - 5000;

			if (k)
				off += rnd_range(0, 250000000);
			e->host_tsc = u;
			e->offset = off;
			e->system_time = mv_kvmclock(u) + rnd_range(0, 100) - 50;
			e->conv = (struct hgclock_conversion){
				.tsc_base = u + off, .offset_ns = e->system_time - MV_SCHED_OFF,
				.mult = MV_MUL, .shift = 32, .pre_shift = 0,
				.flags = HGCLOCK_CONV_VALID | HGCLOCK_CONV_PVCLOCK,
			};
		}
	}
}

static const struct mv_epoch *mv_at(int c, uint64_t h)
{
	unsigned int k = 0;

	while (k < MV_NR && mv[c][k + 1].host_tsc <= h)
		k++;
	return &mv[c][k];
}

static void write_moving_records(struct buf *host, struct buf *guest, const struct scen *sc)
{
	mv_init();
	put_cyc2ns(host, 0, T0 - 1000, &hconv, 1);
	put_cyc2ns(host, 1, T0 - 900, &hconv, 1);
	for (int c = 0; c < 2; c++) {
		struct hgclock_rec_vcpu_seen r;
		struct hgclock_conversion cv = mv[c][0].conv;

		memset(&r, 0, sizeof(r));
		r.hdr.type = HGCLOCK_REC_VCPU_SEEN;
		r.hdr.size = sizeof(r);
		r.hdr.cpu = c;
		r.hdr.tsc = T0 + c;
		r.tid = 2000 + c;
		r.vm_pid = VM_PID;
		r.vcpu_id = c;
		r.flags = HGCLOCK_VCPU_KVM | HGCLOCK_VCPU_TSC_KNOWN;
		r.tsc_offset = mv[c][0].offset;
		r.tsc_scaling_ratio = 1ull << 32;
		r.tsc_frac_bits = 32;
		r.host_cpu = c;
		put(host, &r, sizeof(r));
		put_run(host, c, T0 + 10 + c);
		cv.offset_ns += (uint64_t)sc->moving_snap_skew;
		put_cyc2ns(guest, c, T0 + 1000 + mv[c][0].offset, &cv, 1);
	}
	for (unsigned int k = 1; k <= MV_NR; k++) {
		for (int c = 0; c < 2; c++) {
			const struct mv_epoch *e = &mv[c][k];
			struct hgclock_rec_tsc_offset t;
			struct hgclock_rec_pvclock p;
			struct hgclock_conversion cv = e->conv;

			memset(&t, 0, sizeof(t));
			t.hdr.type = HGCLOCK_REC_TSC_OFFSET;
			t.hdr.size = sizeof(t);
			t.hdr.cpu = c;
			t.hdr.tsc = e->host_tsc - 500;
			t.tid = 2000 + c;
			t.vm_pid = VM_PID;
			t.vcpu_id = c;
			t.flags = HGCLOCK_VCPU_KVM | HGCLOCK_VCPU_TSC_KNOWN;
			t.previous_offset = mv[c][k - 1].offset;
			t.next_offset = e->offset;
			t.tsc_scaling_ratio = 1ull << 32;
			t.tsc_frac_bits = 32;
			put(host, &t, sizeof(t));
			if (!sc->moving_no_pvclock) {
				memset(&p, 0, sizeof(p));
				p.hdr.type = HGCLOCK_REC_PVCLOCK;
				p.hdr.size = sizeof(p);
				p.hdr.cpu = c;
				p.hdr.tsc = e->host_tsc;
				p.tid = 2000 + c;
				p.vm_pid = VM_PID;
				p.vcpu_id = c;
				p.version = 2 * k;
				p.tsc_timestamp = e->conv.tsc_base;
				p.system_time = e->system_time;
				p.tsc_to_system_mul = MV_MUL;
				put(host, &p, sizeof(p));
			}
			/* The guest's snapshot a little later shows the new parameters. */
			cv.offset_ns += (uint64_t)sc->moving_snap_skew;
			put_cyc2ns(guest, c, e->host_tsc + 3000 + e->offset, &cv, k + 1);
		}
	}
}

static int write_scen(const char *path, const struct scen *sc)
{
	static struct hgcor_probe probes[NR_PROBES];
	struct hgclock_info hinfo, ginfo;
	struct hgcor_guest_vm vm;
	struct hgcor_writer w;
	struct buf host = { 0 }, guest = { 0 };
	uint32_t prefix[2] = { 0, 0 };
	int ret;

	init_gconv(sc->guest_native);
	memset(&hinfo, 0, sizeof(hinfo));
	hinfo.size = sizeof(hinfo);
	hinfo.abi_major = HGCLOCK_ABI_MAJOR;
	hinfo.nr_cpu_ids = 2;
	hinfo.nr_online_cpus = 2;
	hinfo.tsc_khz = KHZ;
	hinfo.role = HGCLOCK_ROLE_HOST;
	strcpy(hinfo.clocksource, "tsc");
	ginfo = hinfo;
	ginfo.role = HGCLOCK_ROLE_GUEST;
	strcpy(ginfo.clocksource, sc->guest_native ? "tsc" : "kvm-clock");
	strcpy(ginfo.hypervisor, "KVMKVMKVM");

	if (sc->moving) {
		write_moving_records(&host, &guest, sc);
		goto sections;
	}
	/* Host: conversions, the vCPUs found, where they run, the change. */
	put_cyc2ns(&host, 0, T0 - 1000, &hconv, 1);
	put_cyc2ns(&host, 1, T0 - 900, &hconv, 1);
	put_seen(&host, 0, T0);
	put_seen(&host, 1, T0 + 50);
	put_run(&host, 0, T0 + 100);
	put_run(&host, 1, T0 + 200);
	put_cyc2ns(&host, 0, T0 + 12000000000ull, &hconv, 2);
	put_cyc2ns(&host, 1, T0 + 12000000100ull, &hconv, 2);
	put_tsc_offset(&host);
	put_run(&host, 0, TM);
	if (sc->pairs)
		put_pairs(&host, &guest, sc->host_key_xor);

	/* Guest: kvm-clock on both CPUs, CPU 0's refreshed after the change. */
	put_cyc2ns(&guest, 0, T0 + O1, &gconv_a, 1);
	put_cyc2ns(&guest, 1, T0 + 10 + O1, &gconv_a, 1);
	put_cyc2ns(&guest, 0, TC + B_REC_DELAY + O2, &gconv_b, 2);

sections:
	memset(&vm, 0, sizeof(vm));
	vm.guest_id = 0;
	vm.vm_pid = sc->vm_pid;
	vm.how = HGCOR_VM_BY_OPTION;
	snprintf(vm.spec, sizeof(vm.spec), "g,vm=%d", sc->vm_pid);

	if (!sc->moving)
		make_probes(probes, sc->probe_shift);

	ret = hgcor_create(&w, path);
	if (ret)
		goto out;
	ret = hgcor_write_section(&w, HGCOR_SEC_HOST_INFO, 0, &hinfo, sizeof(hinfo));
	ret = ret ?: hgcor_write_section(&w, HGCOR_SEC_HOST_RECORDS, 0, host.p, host.len);
	ret = ret ?: hgcor_write_section2(&w, HGCOR_SEC_GUEST_INFO, 0, prefix, sizeof(prefix),
					  &ginfo, sizeof(ginfo));
	ret = ret ?: hgcor_write_section(&w, HGCOR_SEC_GUEST_VM, 0, &vm, sizeof(vm));
	ret = ret ?: hgcor_write_section2(&w, HGCOR_SEC_GUEST_RECORDS, 0, prefix,
					  sizeof(prefix), guest.p, guest.len);
	ret = ret ?: hgcor_write_section2(&w, HGCOR_SEC_PROBES, 0, prefix, sizeof(prefix),
					  probes, sc->no_probes || sc->moving ? 0 : sizeof(probes));
	if (ret || sc->no_end)
		hgcor_abort(&w);
	else
		ret = hgcor_close(&w);
out:
	free(host.p);
	free(guest.p);
	return ret;
}

/*
 * Writes scenario @sc to a temporary file, reads it back and loads it
 * into @s with @flags, then builds the mapping.  The load's result.
 */
static int load_scen(struct hgsync *s, const struct scen *sc, int flags)
{
	char path[] = "/tmp/hgsync-test-XXXXXX";
	uint8_t *data = NULL;
	size_t pos;
	long len;
	FILE *f;
	int fd, ret;

	fd = mkstemp(path);
	if (fd < 0)
		return -errno;
	close(fd);
	ret = write_scen(path, sc);
	f = ret ? NULL : fopen(path, "rb");
	if (f && !fseek(f, 0, SEEK_END) && (len = ftell(f)) > 0) {
		rewind(f);
		data = malloc(len);
		if (!data || fread(data, 1, len, f) != (size_t)len)
			ret = -EIO;
	} else if (!ret) {
		ret = -EIO;
	}
	if (f)
		fclose(f);
	unlink(path);
	if (!ret)
		ret = hgsync_load(s, data, len, flags, &pos);
	free(data);
	if (!ret)
		ret = hgsync_build(s);
	return ret;
}

static unsigned int count_segs(const struct hgsync_guest *g, uint32_t method, uint32_t clock,
			       int vcpu)
{
	unsigned int n = 0;

	for (size_t i = 0; i < g->nr_segs; i++)
		if (g->segs[i].method == method && g->segs[i].clock == clock &&
		    g->segs[i].vcpu_id == vcpu)
			n++;
	return n;
}

/* Host TSCs of the span, off the few ticks around the change. */
static uint64_t span_h(unsigned int i, unsigned int n)
{
	uint64_t h = PROBE_LO + (uint64_t)i * ((PROBE_HI - PROBE_LO) / (n - 1)) +
		     rnd_range(0, 1000);

	if (h >= TC - 10 && h < TC + B_REC_DELAY + 10)
		h = TC + B_REC_DELAY + 10;
	return h;
}

FIXTURE(good) {
	struct hgsync *s;
};

FIXTURE_SETUP(good)
{
	struct scen sc = { .vm_pid = VM_PID };

	self->s = calloc(1, sizeof(*self->s));
	ASSERT_NE(NULL, self->s);
	ASSERT_EQ(0, load_scen(self->s, &sc, 0));
}

FIXTURE_TEARDOWN(good)
{
	hgsync_free(self->s);
	free(self->s);
}

TEST_F(good, model)
{
	const struct hgsync *s = self->s;
	const struct hgsync_guest *g = &s->guests[0];

	EXPECT_EQ(1, s->complete);
	EXPECT_EQ(0, s->has_file_segments);
	EXPECT_EQ(KHZ, s->host_info.tsc_khz);
	EXPECT_EQ(1, s->nr_guests);
	EXPECT_EQ(1, g->present);
	EXPECT_EQ(VM_PID, g->vm.vm_pid);
	EXPECT_EQ(2, g->nr_cpus);
	EXPECT_EQ(NR_PROBES, g->nr_probes);
	EXPECT_EQ(2, s->nr_host_cpus);
	EXPECT_EQ(2, s->nr_vcpus);
	/* One KVM segment per offset in force. */
	EXPECT_EQ(2, count_segs(g, HGCOR_METHOD_KVM_EXACT, HGCOR_CLOCK_TSC, 0));
	EXPECT_EQ(1, count_segs(g, HGCOR_METHOD_KVM_EXACT, HGCOR_CLOCK_TSC, 1));
	/* Every probe agrees with KVM's offsets. */
	EXPECT_EQ(NR_PROBES, g->kvm_checked);
	EXPECT_EQ(g->kvm_checked, g->kvm_agree);
	/*
	 * Probe segments as well, per vCPU and per epoch between offset
	 * changes (a rare change may step the guest's kvm-clock): vCPU 0 in
	 * two pieces on both clocks, vCPU 1 in one.
	 */
	EXPECT_EQ(0, count_segs(g, HGCOR_METHOD_PROBE, HGCOR_CLOCK_SCHED, -1));
	EXPECT_EQ(2, count_segs(g, HGCOR_METHOD_PROBE, HGCOR_CLOCK_SCHED, 0));
	EXPECT_EQ(1, count_segs(g, HGCOR_METHOD_PROBE, HGCOR_CLOCK_SCHED, 1));
	EXPECT_EQ(2, count_segs(g, HGCOR_METHOD_PROBE, HGCOR_CLOCK_TSC, 0));
	EXPECT_EQ(1, count_segs(g, HGCOR_METHOD_PROBE, HGCOR_CLOCK_TSC, 1));
}

TEST_F(good, kvm_tsc_exact)
{
	struct hgsync_result r;

	rng_seed(10);
	for (unsigned int i = 0; i < 2000; i++) {
		int vcpu = i & 1;
		uint64_t h = span_h(i / 2, 1000);
		uint64_t g = guest_tsc_at(vcpu, h);

		ASSERT_EQ(0, hgsync_to_host(self->s, 0, vcpu, HGSYNC_CLOCK_TSC, g, &r))
			TH_LOG("vcpu %d h %llu", vcpu, (unsigned long long)h);
		ASSERT_EQ(HGCOR_METHOD_KVM_EXACT, r.method);
		ASSERT_EQ(h, r.host_value)
			TH_LOG("vcpu %d h %llu (%s the change)", vcpu, (unsigned long long)h,
			       h < TC ? "before" : "after");
		ASSERT_EQ(0, r.bound_ns);
		ASSERT_EQ(host_cpu_of(vcpu, h), r.host_cpu)
			TH_LOG("vcpu %d h %llu", vcpu, (unsigned long long)h);
		ASSERT_NE(NULL, r.seg);
		ASSERT_EQ(offset_at(vcpu, h), r.seg->tsc_offset);
	}
	/* Right before and right at the change. */
	ASSERT_EQ(0, hgsync_to_host(self->s, 0, 0, HGSYNC_CLOCK_TSC, TC - 1 + O1, &r));
	EXPECT_EQ(TC - 1, r.host_value);
	ASSERT_EQ(0, hgsync_to_host(self->s, 0, 0, HGSYNC_CLOCK_TSC, TC + O2, &r));
	EXPECT_EQ(TC, r.host_value);
	EXPECT_EQ(HGCOR_METHOD_KVM_EXACT, r.method);
}

/*
 * Guest sched_clock (and local_clock) through the guest's conversion,
 * KVM's offset and the host's cyc2ns, for guest times on both sides of
 * the change: within 2 ns of the truth.  With @in_bound, the error must
 * also stay within the bound the result states.
 */
static void check_kvm_sched(struct __test_metadata *_metadata, const struct hgsync *s,
			    bool in_bound)
{
	struct hgsync_result r;

	rng_seed(11);
	for (unsigned int i = 0; i < 2000; i++) {
		int vcpu = i & 1;
		uint64_t h = span_h(i / 2, 1000);
		uint64_t gns = guest_ns_at(vcpu, h);
		uint64_t truth = hgclock_conv_apply(&hconv, h);
		uint64_t e;

		ASSERT_EQ(0, hgsync_to_host(s, 0, vcpu, HGSYNC_CLOCK_SCHED, gns, &r))
			TH_LOG("vcpu %d h %llu", vcpu, (unsigned long long)h);
		ASSERT_EQ(HGCOR_METHOD_KVM_EXACT, r.method)
			TH_LOG("vcpu %d h %llu", vcpu, (unsigned long long)h);
		ASSERT_GE(2, r.bound_ns);
		e = absdiff(r.host_value, truth);
		ASSERT_GE(2, e) TH_LOG("vcpu %d h %llu (%s the change): got %llu, truth %llu",
				       vcpu, (unsigned long long)h, h < TC ? "before" : "after",
				       (unsigned long long)r.host_value,
				       (unsigned long long)truth);
		if (in_bound)
			ASSERT_LE(e, r.bound_ns)
				TH_LOG("vcpu %d h %llu: guest ns %llu, got %llu, truth %llu, "
				       "bound %llu", vcpu, (unsigned long long)h,
				       (unsigned long long)gns,
				       (unsigned long long)r.host_value,
				       (unsigned long long)truth,
				       (unsigned long long)r.bound_ns);

		ASSERT_EQ(0, hgsync_to_host(s, 0, vcpu, HGSYNC_CLOCK_LOCAL,
					    gns + GUEST_LOCAL_OFF, &r));
		ASSERT_EQ(HGCOR_METHOD_KVM_EXACT, r.method);
		ASSERT_GE(2, absdiff(r.host_value, truth + HOST_LOCAL_OFF));
	}
}

TEST_F(good, kvm_sched_chained)
{
	check_kvm_sched(_metadata, self->s, false);
}

/*
 * The stated bound holds: one guest ns of kvm-clock with tsc_shift -1
 * covers up to 4 TSC ticks (1.6 host ns), which the bound must include.
 */
TEST_F(good, kvm_sched_error_within_bound)
{
	check_kvm_sched(_metadata, self->s, true);
}

/*
 * A guest whose sched_clock is the TSC's (negative cyc2ns offset): a
 * wrong inversion there lands in the vCPU's open-ended last KVM segment
 * and comes out as garbage labelled exact.
 */
TEST(native_guest_sched_clock)
{
	struct scen sc = { .vm_pid = VM_PID, .guest_native = 1 };
	struct hgsync *s = calloc(1, sizeof(*s));
	struct hgsync_result r;

	ASSERT_NE(NULL, s);
	ASSERT_EQ(0, load_scen(s, &sc, 0));
	rng_seed(14);
	for (unsigned int i = 0; i < 2000; i++) {
		int vcpu = i & 1;
		uint64_t h = span_h(i / 2, 1000);
		uint64_t truth = hgclock_conv_apply(&hconv, h);

		ASSERT_EQ(0, hgsync_to_host(s, 0, vcpu, HGSYNC_CLOCK_SCHED,
					    guest_ns_at(vcpu, h), &r))
			TH_LOG("vcpu %d h %llu", vcpu, (unsigned long long)h);
		ASSERT_EQ(HGCOR_METHOD_KVM_EXACT, r.method);
		ASSERT_GE(2, absdiff(r.host_value, truth))
			TH_LOG("vcpu %d h %llu: guest ns %llu, got %llu (bound %llu), truth %llu",
			       vcpu, (unsigned long long)h,
			       (unsigned long long)guest_ns_at(vcpu, h),
			       (unsigned long long)r.host_value,
			       (unsigned long long)r.bound_ns, (unsigned long long)truth);
	}
	hgsync_free(s);
	free(s);
}

static void check_probe_fallback(struct __test_metadata *_metadata, const struct hgsync *s)
{
	struct hgsync_result r;

	rng_seed(12);
	for (unsigned int i = 0; i < 2000; i++) {
		int vcpu = i & 1;
		uint64_t h = span_h(i / 2, 1000);
		uint64_t truth = hgclock_conv_apply(&hconv, h);
		uint64_t e;

		ASSERT_EQ(0, hgsync_to_host(s, 0, vcpu, HGSYNC_CLOCK_SCHED,
					    guest_ns_at(vcpu, h), &r))
			TH_LOG("vcpu %d h %llu", vcpu, (unsigned long long)h);
		ASSERT_EQ(HGCOR_METHOD_PROBE, r.method);
		ASSERT_GT(20000, r.bound_ns);
		e = absdiff(r.host_value, truth);
		ASSERT_LE(e, r.bound_ns) TH_LOG("sched: vcpu %d h %llu error %llu bound %llu",
						vcpu, (unsigned long long)h,
						(unsigned long long)e,
						(unsigned long long)r.bound_ns);
		ASSERT_EQ(-1, r.host_cpu);
	}
}

static void check_probe_fallback_tsc(struct __test_metadata *_metadata, const struct hgsync *s)
{
	struct hgsync_result r;

	rng_seed(13);
	for (unsigned int i = 0; i < 2000; i++) {
		int vcpu = i & 1;
		uint64_t h = span_h(i / 2, 1000);
		uint64_t e_ns;

		/* Between the last probe before the change and the change: a gap. */
		if (vcpu == 0 && h < TC + 10000000 && h + 200000000 > TC)
			continue;
		ASSERT_EQ(0, hgsync_to_host(s, 0, vcpu, HGSYNC_CLOCK_TSC,
					    guest_tsc_at(vcpu, h), &r))
			TH_LOG("vcpu %d h %llu", vcpu, (unsigned long long)h);
		ASSERT_EQ(HGCOR_METHOD_PROBE, r.method);
		ASSERT_GT(20000, r.bound_ns);
		e_ns = absdiff(r.host_value, h) * 1000000 / KHZ;
		ASSERT_LE(e_ns, r.bound_ns) TH_LOG("tsc: vcpu %d h %llu error %llu ns bound %llu",
						   vcpu, (unsigned long long)h,
						   (unsigned long long)e_ns,
						   (unsigned long long)r.bound_ns);
	}
}

TEST(wrong_vm_falls_back_to_probes)
{
	struct scen sc = { .vm_pid = 999 };
	struct hgsync *s = calloc(1, sizeof(*s));

	ASSERT_NE(NULL, s);
	ASSERT_EQ(0, load_scen(s, &sc, 0));
	EXPECT_EQ(999, s->guests[0].vm.vm_pid);
	EXPECT_EQ(0, count_segs(&s->guests[0], HGCOR_METHOD_KVM_EXACT, HGCOR_CLOCK_TSC, 0));
	EXPECT_EQ(0, count_segs(&s->guests[0], HGCOR_METHOD_KVM_EXACT, HGCOR_CLOCK_TSC, 1));
	EXPECT_EQ(0, s->guests[0].kvm_checked);
	check_probe_fallback(_metadata, s);
	check_probe_fallback_tsc(_metadata, s);
	hgsync_free(s);
	free(s);
}

TEST(inconsistent_probes_reject_kvm)
{
	/* Every guest reading 10 ms later than KVM's offsets say. */
	struct scen sc = { .vm_pid = VM_PID, .probe_shift = 25000000 };
	struct hgsync *s = calloc(1, sizeof(*s));
	struct hgsync_result r;
	uint64_t h = T0 + SPAN / 4;

	ASSERT_NE(NULL, s);
	ASSERT_EQ(0, load_scen(s, &sc, 0));
	EXPECT_EQ(NR_PROBES, s->guests[0].kvm_checked);
	EXPECT_EQ(0, s->guests[0].kvm_agree);
	EXPECT_EQ(0, count_segs(&s->guests[0], HGCOR_METHOD_KVM_EXACT, HGCOR_CLOCK_TSC, 0));
	EXPECT_EQ(0, count_segs(&s->guests[0], HGCOR_METHOD_KVM_EXACT, HGCOR_CLOCK_TSC, 1));
	for (int vcpu = 0; vcpu < 2; vcpu++) {
		ASSERT_EQ(0, hgsync_to_host(s, 0, vcpu, HGSYNC_CLOCK_TSC,
					    guest_tsc_at(vcpu, h), &r));
		EXPECT_EQ(HGCOR_METHOD_PROBE, r.method);
		ASSERT_EQ(0, hgsync_to_host(s, 0, vcpu, HGSYNC_CLOCK_SCHED,
					    guest_ns_at(vcpu, h), &r));
		EXPECT_EQ(HGCOR_METHOD_PROBE, r.method);
	}
	hgsync_free(s);
	free(s);
}

/*
 * Exit pairings with no VM known (no KVM mapping): on both clocks they
 * give the mapping, within their bound everywhere, and a bound near the
 * exits' length (a few us), not the probes' round trips.
 */
static void check_exit(struct __test_metadata *_metadata, const struct hgsync *s,
		       uint32_t want_method, uint64_t max_bound)
{
	struct hgsync_result r;

	rng_seed(14);
	for (unsigned int i = 0; i < 2000; i++) {
		int vcpu = i & 1;
		uint64_t h = span_h(i / 2, 1000);
		uint64_t truth = hgclock_conv_apply(&hconv, h), e;

		/* vCPU 0's TSC jumps at TC: its pairings before and after are two lines. */
		if (vcpu == 0 && h < TC + 10000000 && h + 20000000 > TC)
			continue;
		ASSERT_EQ(0, hgsync_to_host(s, 0, vcpu, HGSYNC_CLOCK_SCHED,
					    guest_ns_at(vcpu, h), &r));
		ASSERT_EQ(want_method, r.method);
		ASSERT_GE(max_bound, r.bound_ns);
		e = absdiff(r.host_value, truth);
		ASSERT_LE(e, r.bound_ns) TH_LOG("sched: vcpu %d h %llu error %llu bound %llu",
						vcpu, (unsigned long long)h,
						(unsigned long long)e,
						(unsigned long long)r.bound_ns);
		ASSERT_EQ(0, hgsync_to_host(s, 0, vcpu, HGSYNC_CLOCK_TSC,
					    guest_tsc_at(vcpu, h), &r));
		ASSERT_EQ(want_method, r.method);
		e = absdiff(r.host_value, h) * 1000000 / KHZ;
		ASSERT_LE(e, r.bound_ns) TH_LOG("tsc: vcpu %d h %llu error %llu bound %llu",
						vcpu, (unsigned long long)h,
						(unsigned long long)e,
						(unsigned long long)r.bound_ns);
	}
}

TEST(exit_pairs_without_vm)
{
	struct scen sc = { .vm_pid = -1, .pairs = 1 };
	struct hgsync *s = calloc(1, sizeof(*s));

	ASSERT_NE(NULL, s);
	ASSERT_EQ(0, load_scen(s, &sc, 0));
	EXPECT_EQ(NR_PAIRS, s->guests[0].nr_gpairs);
	EXPECT_EQ(NR_PAIRS, s->guests[0].nr_xpairs);
	EXPECT_LT(0, count_segs(&s->guests[0], HGCOR_METHOD_EXIT, HGCOR_CLOCK_SCHED, 0));
	EXPECT_LT(0, count_segs(&s->guests[0], HGCOR_METHOD_EXIT, HGCOR_CLOCK_TSC, 1));
	/* Exits of 0.8-4 us: a bound of a few us, where probes gave 20. */
	check_exit(_metadata, s, HGCOR_METHOD_EXIT, 5000);
	hgsync_free(s);
	free(s);
}

TEST(exit_pairs_alone)
{
	struct scen sc = { .vm_pid = -1, .pairs = 1, .no_probes = 1 };
	struct hgsync *s = calloc(1, sizeof(*s));

	ASSERT_NE(NULL, s);
	ASSERT_EQ(0, load_scen(s, &sc, 0));
	EXPECT_EQ(0, s->guests[0].nr_probes);
	check_exit(_metadata, s, HGCOR_METHOD_EXIT, 5000);
	hgsync_free(s);
	free(s);
}

TEST(exit_pairs_wrong_key_unused)
{
	struct scen sc = { .vm_pid = -1, .pairs = 1, .host_key_xor = 1 };
	struct hgsync *s = calloc(1, sizeof(*s));

	ASSERT_NE(NULL, s);
	ASSERT_EQ(0, load_scen(s, &sc, 0));
	EXPECT_EQ(NR_PAIRS, s->guests[0].nr_gpairs);
	EXPECT_EQ(0, s->guests[0].nr_xpairs);
	EXPECT_EQ(0, count_segs(&s->guests[0], HGCOR_METHOD_EXIT, HGCOR_CLOCK_SCHED, 0));
	check_probe_fallback(_metadata, s);
	hgsync_free(s);
	free(s);
}

TEST(exit_pairs_check_kvm)
{
	struct scen sc = { .vm_pid = VM_PID, .pairs = 1 };
	struct hgsync *s = calloc(1, sizeof(*s));
	struct hgsync_result r;

	ASSERT_NE(NULL, s);
	ASSERT_EQ(0, load_scen(s, &sc, 0));
	/* Every probe and every pairing agrees with KVM's offsets. */
	EXPECT_EQ(NR_PROBES + NR_PAIRS, s->guests[0].kvm_checked);
	EXPECT_EQ(NR_PROBES + NR_PAIRS, s->guests[0].kvm_agree);
	/* KVM's exact mapping still comes first; the pairings by name. */
	ASSERT_EQ(0, hgsync_to_host(s, 0, 1, HGSYNC_CLOCK_TSC, guest_tsc_at(1, T0 + SPAN / 3), &r));
	EXPECT_EQ(HGCOR_METHOD_KVM_EXACT, r.method);
	ASSERT_EQ(0, hgsync_to_host_by(s, 0, 1, HGSYNC_CLOCK_SCHED, guest_ns_at(1, T0 + SPAN / 3),
				       HGCOR_METHOD_EXIT, &r));
	EXPECT_EQ(HGCOR_METHOD_EXIT, r.method);
	EXPECT_LE(absdiff(r.host_value, hgclock_conv_apply(&hconv, T0 + SPAN / 3)), r.bound_ns);
	hgsync_free(s);
	free(s);
}

/*
 * Moving offsets, on ftrace's local clock: with the host's PVCLOCK
 * records each guest reading goes back to its guest TSC through the
 * parameters in force, then through the offset in force: exact (a ns of
 * rounding), the bound only the clamp's (the vCPUs' clocks disagree by
 * up to 100 ns here).
 */
TEST(moving_pvclock_exact)
{
	struct scen sc = { .vm_pid = VM_PID, .moving = 1 };
	struct hgsync *s = calloc(1, sizeof(*s));
	struct hgsync_result r;
	uint64_t worst = 0;
	unsigned int n = 0, exact = 0;

	ASSERT_NE(NULL, s);
	ASSERT_EQ(0, load_scen(s, &sc, 0));
	EXPECT_EQ(1, s->guests[0].pv_known);
	EXPECT_EQ(MV_SCHED_OFF, s->guests[0].pv_sched_offset);
	/* Every snapshot but the two from before the first record matched. */
	EXPECT_EQ(2 * MV_NR + 2, s->guests[0].pv_checked);
	EXPECT_EQ(2 * MV_NR, s->guests[0].pv_agree);
	EXPECT_GE(200, s->guests[0].pv_clamp_ns);
	rng_seed(32);
	for (unsigned int i = 0; i < 4000; i++) {
		int c = i & 1;
		uint64_t h = T0 + 20000 + rnd_range(0, MV_NR * MV_DT);
		const struct mv_epoch *e = mv_at(c, h);
		uint64_t gns, e_ns;

		/* The vCPU does not run between its offset change and update. */
		if (h < e->host_tsc + 100 || (e < &mv[c][MV_NR] && h + 600 > e[1].host_tsc))
			continue;
		gns = hgclock_conv_apply(&e->conv, h + e->offset);
		ASSERT_EQ(0, hgsync_to_host(s, 0, c, HGSYNC_CLOCK_SCHED, gns, &r))
			TH_LOG("vcpu %d h %llu", c, (unsigned long long)h);
		ASSERT_EQ(HGCOR_METHOD_KVM_EXACT, r.method);
		e_ns = absdiff(r.host_value, hgclock_conv_apply(&hconv, h));
		ASSERT_LE(e_ns, r.bound_ns) TH_LOG("vcpu %d h %llu: error %llu ns", c,
						   (unsigned long long)h, (unsigned long long)e_ns);
		ASSERT_GE(300, r.bound_ns);
		/*
		 * Exact but where kvm-clock stepped back at an update: those
		 * values were read under both parameter sets (a real guest
		 * clamps them), and the bound covers the step.
		 */
		if (e_ns <= 1)
			exact++;
		n++;
		if (e_ns > worst)
			worst = e_ns;
		/* And on x86-tsc: KVM's offsets alone. */
		ASSERT_EQ(0, hgsync_to_host(s, 0, c, HGSYNC_CLOCK_TSC, h + e->offset, &r));
		ASSERT_EQ(h, r.host_value);
	}
	TH_LOG("%u of %u exact, worst error %llu ns", exact, n, (unsigned long long)worst);
	ASSERT_LE(n * 99, exact * 100);
	hgsync_free(s);
	free(s);
}

TEST(moving_without_pvclock_records)
{
	struct scen sc = { .vm_pid = VM_PID, .moving = 1, .moving_no_pvclock = 1 };
	struct hgsync *s = calloc(1, sizeof(*s));
	struct hgsync_result r;
	const struct mv_epoch *e;

	ASSERT_NE(NULL, s);
	ASSERT_EQ(0, load_scen(s, &sc, 0));
	EXPECT_EQ(0, s->guests[0].pv_known);
	e = mv_at(0, T0 + 10 * MV_DT + 5000);
	/* The guest's parameters lack the stable bit: nothing exact. */
	EXPECT_NE(0, hgsync_to_host_by(s, 0, 0, HGSYNC_CLOCK_SCHED,
				       hgclock_conv_apply(&e->conv, T0 + 10 * MV_DT + 5000 + e->offset),
				       HGCOR_METHOD_KVM_EXACT, &r));
	hgsync_free(s);
	free(s);
}

TEST(moving_sched_offset_from_snapshots)
{
	/* Snapshots 1000 ns off: the guest's constant follows them. */
	struct scen sc = { .vm_pid = VM_PID, .moving = 1, .moving_snap_skew = 1000 };
	struct hgsync *s = calloc(1, sizeof(*s));
	struct hgsync_result r;
	uint64_t h = T0 + 33 * MV_DT + 4000;
	const struct mv_epoch *e;

	ASSERT_NE(NULL, s);
	ASSERT_EQ(0, load_scen(s, &sc, 0));
	ASSERT_EQ(1, s->guests[0].pv_known);
	EXPECT_EQ(MV_SCHED_OFF - 1000, s->guests[0].pv_sched_offset);
	e = mv_at(0, h);
	ASSERT_EQ(0, hgsync_to_host(s, 0, 0, HGSYNC_CLOCK_SCHED,
				    hgclock_conv_apply(&e->conv, h + e->offset) + 1000, &r));
	EXPECT_GE(1, absdiff(r.host_value, hgclock_conv_apply(&hconv, h)));
	hgsync_free(s);
	memset(s, 0, sizeof(*s));
	/* Another VM's records: no snapshot matches, nothing known. */
	sc.vm_pid = 999;
	ASSERT_EQ(0, load_scen(s, &sc, 0));
	EXPECT_EQ(0, s->guests[0].pv_known);
	EXPECT_EQ(0, s->guests[0].pv_agree);
	hgsync_free(s);
	free(s);
}

TEST(file_without_end)
{
	struct scen sc = { .vm_pid = VM_PID, .no_end = 1 };
	struct hgsync *s = calloc(1, sizeof(*s));
	struct hgsync_result r;

	ASSERT_NE(NULL, s);
	EXPECT_EQ(HGCOR_E_NO_END, load_scen(s, &sc, 0));
	ASSERT_EQ(0, load_scen(s, &sc, HGSYNC_ALLOW_OPEN));
	EXPECT_EQ(0, s->complete);
	EXPECT_EQ(NR_PROBES, s->guests[0].nr_probes);
	ASSERT_EQ(0, hgsync_to_host(s, 0, 1, HGSYNC_CLOCK_TSC, guest_tsc_at(1, T0 + 777), &r));
	EXPECT_EQ(HGCOR_METHOD_KVM_EXACT, r.method);
	EXPECT_EQ(T0 + 777, r.host_value);
	hgsync_free(s);
	free(s);
}

TEST_F(good, bad_requests)
{
	struct hgsync_result r;
	uint64_t g = guest_tsc_at(0, T0 + 1000);

	EXPECT_EQ(-EINVAL, hgsync_to_host(self->s, 1, 0, HGSYNC_CLOCK_TSC, g, &r));
	EXPECT_EQ(HGSYNC_NO_BOUND, r.bound_ns);
	EXPECT_EQ(-EINVAL, hgsync_to_host(self->s, HGSYNC_MAX_GUESTS - 1, 0,
					  HGSYNC_CLOCK_TSC, g, &r));
	EXPECT_EQ(-EINVAL, hgsync_to_host(self->s, HGSYNC_MAX_GUESTS + 5, 0,
					  HGSYNC_CLOCK_TSC, g, &r));
	EXPECT_EQ(-EINVAL, hgsync_to_host(self->s, 0, 0, 0, g, &r));
	EXPECT_EQ(-EINVAL, hgsync_to_host(self->s, 0, 0, HGSYNC_CLOCK_LOCAL + 1, g, &r));
	/* The same request with a known guest works. */
	EXPECT_EQ(0, hgsync_to_host(self->s, 0, 0, HGSYNC_CLOCK_TSC, g, &r));
	EXPECT_EQ(T0 + 1000, r.host_value);
	/* A vCPU the guest never had: nothing covers it. */
	EXPECT_NE(0, hgsync_to_host(self->s, 0, 7, HGSYNC_CLOCK_TSC, g, &r));
}

TEST(names)
{
	EXPECT_STREQ("kvm-exact", hgsync_method_name(HGCOR_METHOD_KVM_EXACT));
	EXPECT_STREQ("probe", hgsync_method_name(HGCOR_METHOD_PROBE));
	EXPECT_STREQ("exit", hgsync_method_name(HGCOR_METHOD_EXIT));
	EXPECT_EQ(HGCOR_METHOD_EXIT, hgsync_method_parse("exit"));
	EXPECT_EQ(HGCOR_METHOD_KVM_EXACT, hgsync_method_parse("kvm"));
	EXPECT_EQ(0, hgsync_method_parse("auto"));
	EXPECT_EQ(-1, hgsync_method_parse("ptp"));
	EXPECT_STREQ("none", hgsync_method_name(0));
	EXPECT_STREQ("x86-tsc", hgsync_clock_name(HGSYNC_CLOCK_TSC));
	EXPECT_STREQ("local", hgsync_clock_name(HGSYNC_CLOCK_SCHED));
	EXPECT_STREQ("perf", hgsync_clock_name(HGSYNC_CLOCK_LOCAL));
}

TEST_HARNESS_MAIN
