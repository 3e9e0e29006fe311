// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of migration and restore (format 1.5's DISRUPTION section;
 * Documentation/sync.rst, "Migration and restore"): synthetic files in
 * which one guest machine runs in two or three VM processes one after
 * the other, each with its own TSC offset, linked by DISRUPTION sections.
 * A guest TSC value must map, exactly, through the incarnation that made
 * it, values no incarnation made (the blackout) to nothing; the links and
 * the facts dump prints come from the host's records; bad sections are
 * refused, and damaged files are refused or read safely.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/hgclock.h>

#include "kselftest_harness.h"
#include "libhgclock.h"
#include "corr.h"
#include "corr_check.h"
#include "sync.h"
#include "gen.h"

#define KHZ		2500000u
#define T0		5000000000000ull	/* host TSC: VM A's first vCPU record */
#define RUN_LEN		10000000000ull		/* 4 s of host TSC: one VM's run */
#define DOWN_LEN	2500000000ull		/* 1 s: the blackout between VMs */
#define SAVE_DELAY	5000ull			/* the TSC is saved after the last exit */
#define OFF_A		((uint64_t)-4000000000000ll)
#define PID_A		100
#define PID_B		200
#define PID_C		300
#define MIG_AHEAD	1000ull			/* migration: the guest TSC 1000 ahead */

/* Restore: A, then B from its saved state (the guest's TSC stood still). */
#define T1		(T0 + RUN_LEN)		/* A's last exit from the guest */
/* The last record that proves a VM ran the guest: an exit pairing before its end. */
#define LAST_SEEN(end)	((end) - 1000)
#define T2		(T1 + DOWN_LEN)		/* B's first record */
#define T2E		(T2 + RUN_LEN)		/* B's last exit */
#define OFF_B		(T1 + SAVE_DELAY + OFF_A - T2)

/* Chain: A, B by migration (OFF_B3), C by restore from B (OFF_C3). */
#define OFF_B3		(OFF_A + MIG_AHEAD)
#define T3		(T2E + DOWN_LEN)
#define T3E		(T3 + RUN_LEN)
#define OFF_C3		(T2E + SAVE_DELAY + OFF_B3 - T3)

static const struct hgclock_conversion hconv = {
	.tsc_base = 0, .offset_ns = (uint64_t)-500000000000ll, .mult = 858993459, .shift = 31,
	.pre_shift = 0, .flags = HGCLOCK_CONV_VALID | HGCLOCK_CONV_EXACT,
};

/* One incarnation: a VM process and the host TSCs it ran the guest between. */
struct inc {
	int32_t pid;
	uint64_t off;		/* both vCPUs' TSC offset */
	uint64_t start;		/* vCPU 0's SEEN (vCPU 1's 50 later) */
	uint64_t end;		/* vCPU 0's last STOP (vCPU 1's 500 before) */
	/*
	 * Non-zero: as QEMU starts an incoming VM, KVM first sets the TSC
	 * offset at vCPU creation (to @init_off), then the restored one (to
	 * @off), both before the first entry, from threads not yet tracked.
	 */
	uint64_t init_off;
	/* Non-zero: the vCPU threads exit (VCPU_EXIT) here, after the last STOP. */
	uint64_t exit_at;
};

struct dscen {
	unsigned int nr_inc;	/* guest ids 0 .. nr_inc - 1, one per incarnation */
	unsigned int nr_rec_inc; /* whose host records are written (0: all) */
	struct inc inc[3];
	unsigned int nr_disr;
	struct hgcor_disruption disr[4];
};

/* vCPU n runs on host CPU n, as thread pid * 10 + n. */
static void put_seen(struct buf *b, const struct inc *in, int vcpu, uint64_t tsc)
{
	struct hgclock_rec_vcpu_seen r;

	gen_rec(&r, sizeof(r), HGCLOCK_REC_VCPU_SEEN, vcpu, tsc, hgclock_conv_apply(&hconv, tsc));
	r.tid = in->pid * 10 + vcpu;
	r.vm_pid = in->pid;
	r.vcpu_id = vcpu;
	r.flags = HGCLOCK_VCPU_KVM | HGCLOCK_VCPU_TSC_KNOWN;
	snprintf(r.vm_name, sizeof(r.vm_name), "%d-12", in->pid);
	r.tsc_offset = in->off;
	r.tsc_scaling_ratio = 1ull << 32;
	r.tsc_frac_bits = 32;
	r.host_cpu = vcpu;
	put(b, &r, sizeof(r));
}

static void put_vcpu(struct buf *b, const struct inc *in, uint16_t type, int vcpu, uint64_t tsc)
{
	struct hgclock_rec_vcpu r;

	gen_rec(&r, sizeof(r), type, vcpu, tsc, hgclock_conv_apply(&hconv, tsc));
	r.tid = in->pid * 10 + vcpu;
	r.vm_pid = in->pid;
	r.vcpu_id = vcpu;
	put(b, &r, sizeof(r));
}

/* KVM writes vCPU @vcpu's offset from an untracked thread (no TSC_KNOWN, no ratio). */
static void put_offset_write(struct buf *b, const struct inc *in, int vcpu, uint64_t tsc,
			     uint64_t prev, uint64_t next)
{
	struct hgclock_rec_tsc_offset r;

	gen_rec(&r, sizeof(r), HGCLOCK_REC_TSC_OFFSET, vcpu, tsc, hgclock_conv_apply(&hconv, tsc));
	r.tid = in->pid * 10 + vcpu;
	r.vm_pid = in->pid;
	r.vcpu_id = vcpu;
	r.previous_offset = prev;
	r.next_offset = next;
	put(b, &r, sizeof(r));
}

/*
 * An exit pairing's host half in @in's VM (the guest ran a CPUID there):
 * the last proof that the VM ran the guest, which
 * hgsync_disruption_facts() takes (scheduling records after it do not
 * say the guest ran).
 */
static void put_exit_host(struct buf *b, const struct inc *in, int vcpu, uint64_t tsc)
{
	struct hgclock_rec_exit_host r;

	gen_rec(&r, sizeof(r), HGCLOCK_REC_EXIT_HOST, vcpu, tsc, hgclock_conv_apply(&hconv, tsc));
	r.tid = in->pid * 10 + vcpu;
	r.vm_pid = in->pid;
	r.vcpu_id = vcpu;
	r.seq = 1;
	r.key = 0x1234;
	put(b, &r, sizeof(r));
}

/* An incarnation's host records, in time order: found, runs, a pause, the end. */
static void put_inc(struct buf *b, const struct inc *in)
{
	uint64_t mid = in->start + (in->end - in->start) / 2;

	for (int vcpu = 0; in->init_off && vcpu < 2; vcpu++) {
		put_offset_write(b, in, vcpu, in->start - 2000000 + vcpu, 0, in->init_off);
		put_offset_write(b, in, vcpu, in->start - 1000000 + vcpu, in->init_off, in->off);
	}

	put_seen(b, in, 0, in->start);
	put_seen(b, in, 1, in->start + 50);
	put_vcpu(b, in, HGCLOCK_REC_VCPU_RUN, 0, in->start + 100);
	put_vcpu(b, in, HGCLOCK_REC_VCPU_RUN, 1, in->start + 200);
	put_vcpu(b, in, HGCLOCK_REC_VCPU_STOP, 0, mid);
	put_vcpu(b, in, HGCLOCK_REC_VCPU_STOP, 1, mid + 10);
	put_vcpu(b, in, HGCLOCK_REC_VCPU_RUN, 0, mid + 1000);
	put_vcpu(b, in, HGCLOCK_REC_VCPU_RUN, 1, mid + 2000);
	put_exit_host(b, in, 0, LAST_SEEN(in->end));
	put_vcpu(b, in, HGCLOCK_REC_VCPU_STOP, 1, in->end - 500);
	put_vcpu(b, in, HGCLOCK_REC_VCPU_STOP, 0, in->end);
}

/* The exits of incarnations' threads: after every incarnation's runs (time order). */
static void put_exits(struct buf *b, const struct dscen *sc)
{
	for (unsigned int k = 0; k < sc->nr_inc; k++)
		for (int vcpu = 0; sc->inc[k].exit_at && vcpu < 2; vcpu++)
			put_vcpu(b, &sc->inc[k], HGCLOCK_REC_VCPU_EXIT, vcpu,
				 sc->inc[k].exit_at + vcpu);
}

/* A DISRUPTION as the recorder writes it (JUMP_KNOWN, the jump from @old to @new). */
static struct hgcor_disruption make_disr(uint32_t id, uint32_t next, uint32_t kind,
					 const struct inc *old, const struct inc *new)
{
	struct hgcor_disruption d = {
		.guest_id = id, .next_guest_id = next, .kind = kind,
		.flags = HGCOR_DISRUPT_JUMP_KNOWN,
		.old_vm_pid = old->pid, .new_vm_pid = new->pid,
		.host_tsc_lost = old->end + 1000,
		.host_local_ns_lost = hgclock_conv_apply(&hconv, old->end + 1000),
		.host_tsc_back = new->start + 100000,
		.host_local_ns_back = hgclock_conv_apply(&hconv, new->start + 100000),
		.guest_tsc_jump = (int64_t)(new->off - old->off),
		.guest_local_jump_ns = (int64_t)(new->off - old->off) / 5 * 2,
		.jump_bound_ns = 5000,
	};

	return d;
}

/* Restore from A to B (test 1): with or without the DISRUPTION. */
static void scen_restore(struct dscen *sc, int with_disr)
{
	memset(sc, 0, sizeof(*sc));
	sc->nr_inc = 2;
	sc->inc[0] = (struct inc){ PID_A, OFF_A, T0, T1 };
	sc->inc[1] = (struct inc){ PID_B, OFF_B, T2, T2E };
	if (with_disr) {
		sc->nr_disr = 1;
		sc->disr[0] = make_disr(0, 1, HGCOR_DISRUPT_MIGRATION, &sc->inc[0], &sc->inc[1]);
	}
}

/* A, migrated to B, B restored as C. */
static void scen_chain(struct dscen *sc)
{
	memset(sc, 0, sizeof(*sc));
	sc->nr_inc = 3;
	sc->inc[0] = (struct inc){ PID_A, OFF_A, T0, T1 };
	sc->inc[1] = (struct inc){ PID_B, OFF_B3, T2, T2E };
	sc->inc[2] = (struct inc){ PID_C, OFF_C3, T3, T3E };
	sc->nr_disr = 2;
	sc->disr[0] = make_disr(0, 1, HGCOR_DISRUPT_MIGRATION, &sc->inc[0], &sc->inc[1]);
	sc->disr[1] = make_disr(1, 2, HGCOR_DISRUPT_RESTORE, &sc->inc[1], &sc->inc[2]);
}

/*
 * The file: host info and records, then per guest id its GUEST_INFO and
 * GUEST_VM, each DISRUPTION right after the sections of the guest it
 * ends (as the recorder writes them: the next guest's come after), those
 * of no such guest before END.  0 or an error.
 */
static int write_dscen(const char *path, const struct dscen *sc)
{
	struct hgclock_info hinfo, ginfo;
	struct hgcor_writer w;
	struct buf host = { 0 };
	int ret;

	gen_info(&hinfo, HGCLOCK_ROLE_HOST, 2, KHZ);
	gen_info(&ginfo, HGCLOCK_ROLE_GUEST, 2, KHZ);
	gen_cyc2ns(&host, 0, T0 - 1000, &hconv, KHZ, 1);
	gen_cyc2ns(&host, 1, T0 - 900, &hconv, KHZ, 1);
	for (unsigned int k = 0; k < (sc->nr_rec_inc ? sc->nr_rec_inc : sc->nr_inc); k++)
		put_inc(&host, &sc->inc[k]);
	put_exits(&host, sc);

	ret = hgcor_create(&w, path);
	if (ret)
		goto out;
	ret = hgcor_write_section(&w, HGCOR_SEC_HOST_INFO, 0, &hinfo, sizeof(hinfo));
	ret = ret ?: hgcor_write_section(&w, HGCOR_SEC_HOST_RECORDS, 0, host.p, host.len);
	for (unsigned int k = 0; k < sc->nr_inc && !ret; k++) {
		uint32_t prefix[2] = { k, 0 };
		struct hgcor_guest_vm vm;

		memset(&vm, 0, sizeof(vm));
		vm.guest_id = k;
		vm.vm_pid = sc->inc[k].pid;
		vm.how = HGCOR_VM_BY_OPTION;
		snprintf(vm.spec, sizeof(vm.spec), "g,vm=%d", sc->inc[k].pid);
		ret = hgcor_write_section2(&w, HGCOR_SEC_GUEST_INFO, 0, prefix, sizeof(prefix),
					   &ginfo, sizeof(ginfo));
		ret = ret ?: hgcor_write_section(&w, HGCOR_SEC_GUEST_VM, 0, &vm, sizeof(vm));
		for (unsigned int i = 0; i < sc->nr_disr && !ret; i++)
			if (sc->disr[i].guest_id == k)
				ret = hgcor_write_section(&w, HGCOR_SEC_DISRUPTION, 0,
							  &sc->disr[i], sizeof(sc->disr[i]));
	}
	for (unsigned int i = 0; i < sc->nr_disr && !ret; i++)
		if (sc->disr[i].guest_id >= sc->nr_inc)
			ret = hgcor_write_section(&w, HGCOR_SEC_DISRUPTION, 0, &sc->disr[i],
						  sizeof(sc->disr[i]));
	if (ret)
		hgcor_abort(&w);
	else
		ret = hgcor_close(&w);
out:
	free(host.p);
	return ret;
}

/* The file of @sc, malloc'd, in *@len bytes; NULL on failure. */
static uint8_t *dscen_bytes(const struct dscen *sc, size_t *len)
{
	char path[] = "/tmp/hgdisrupt-test-XXXXXX";
	uint8_t *data = NULL;

	*len = 0;
	if (gen_tmpfile(path))
		return NULL;
	if (!write_dscen(path, sc))
		data = gen_slurp(path, len);
	unlink(path);
	return data;
}

/* Loads and builds @sc into @s: the first error, or 0. */
static int load_dscen(struct hgsync *s, const struct dscen *sc)
{
	size_t len = 0;
	uint8_t *data = dscen_bytes(sc, &len);

	return gen_load_build(s, data, len);
}

/* The guest TSC incarnation @in's vCPUs read at host TSC @h. */
static uint64_t gtsc(const struct inc *in, uint64_t h)
{
	return h + in->off;
}

/*
 * Guest TSC @g, asked as guest @ask on @vcpu, must map exactly to host
 * TSC @h, by the KVM-exact method, through incarnation @want.
 */
static void expect_maps(struct __test_metadata *_metadata, const struct hgsync *s,
			uint32_t ask, int vcpu, uint64_t g, uint64_t h, uint32_t want)
{
	struct hgsync_result r;

	ASSERT_EQ(0, hgsync_to_host(s, ask, vcpu, HGSYNC_CLOCK_TSC, g, &r))
		TH_LOG("asked as guest %u, vcpu %d: host TSC %llu", ask, vcpu,
		       (unsigned long long)h);
	EXPECT_EQ(h, r.host_value) TH_LOG("asked as guest %u, vcpu %d", ask, vcpu);
	EXPECT_EQ(h, r.host_tsc);
	EXPECT_EQ(HGCOR_METHOD_KVM_EXACT, r.method);
	EXPECT_EQ(0, r.bound_ns);
	EXPECT_EQ(want, r.guest_id) TH_LOG("asked as guest %u, vcpu %d: host TSC %llu", ask,
					   vcpu, (unsigned long long)h);
	/* Where the vCPU ran (vCPU n on host CPU n); unknown before its first record. */
	EXPECT_TRUE(r.host_cpu == vcpu || r.host_cpu == -1) TH_LOG("host CPU %d", r.host_cpu);
}

/* Guest TSC @g, asked as guest @ask, must map to nothing. */
static void expect_unmapped(struct __test_metadata *_metadata, const struct hgsync *s,
			    uint32_t ask, int vcpu, uint64_t g)
{
	struct hgsync_result r;
	int ret = hgsync_to_host(s, ask, vcpu, HGSYNC_CLOCK_TSC, g, &r);

	EXPECT_NE(0, ret) TH_LOG("guest %u vcpu %d TSC %llu mapped to host TSC %llu (guest %u)",
				 ask, vcpu, (unsigned long long)g,
				 (unsigned long long)r.host_value, r.guest_id);
	EXPECT_EQ(-ENOENT, ret);
}

/* Host TSCs spread over [lo, hi], both ends included. */
static uint64_t spread(uint64_t lo, uint64_t hi, unsigned int i, unsigned int n)
{
	return lo + (hi - lo) / (n - 1) * i + (i == n - 1 ? (hi - lo) % (n - 1) : 0);
}

/* Every value an incarnation's vCPUs made, asked as every guest id of the chain. */
static void expect_incarnation(struct __test_metadata *_metadata, const struct hgsync *s,
			       const struct dscen *sc, uint32_t k)
{
	const struct inc *in = &sc->inc[k];

	for (unsigned int i = 0; i < 50; i++) {
		int vcpu = i & 1;
		uint64_t h = spread(in->start + (vcpu ? 50 : 0), in->end - (vcpu ? 500 : 0), i, 50);

		for (uint32_t ask = 0; ask < sc->nr_inc; ask++)
			expect_maps(_metadata, s, ask, vcpu, gtsc(in, h), h, k);
	}
}

static struct hgsync *new_sync(void)
{
	return calloc(1, sizeof(struct hgsync));
}

static void free_sync(struct hgsync *s)
{
	if (s)
		hgsync_free(s);
	free(s);
}

/* ---- 1. a restore: A, then B ---- */

FIXTURE(restore) {
	struct dscen sc;
	struct hgsync *s;
};

FIXTURE_SETUP(restore)
{
	scen_restore(&self->sc, 1);
	self->s = new_sync();
	ASSERT_NE(NULL, self->s);
	ASSERT_EQ(0, load_dscen(self->s, &self->sc));
}

FIXTURE_TEARDOWN(restore)
{
	free_sync(self->s);
}

TEST_F(restore, model)
{
	const struct hgsync *s = self->s;

	EXPECT_EQ(1, s->complete);
	EXPECT_EQ(2, s->nr_guests);
	EXPECT_EQ(4, s->nr_vcpus);
	ASSERT_EQ(1, s->nr_disr);
	EXPECT_EQ(0, memcmp(&self->sc.disr[0], &s->disr[0], sizeof(s->disr[0])));
	EXPECT_EQ(1, s->guests[0].has_next);
	EXPECT_EQ(1, s->guests[0].next_id);
	EXPECT_EQ(0, s->guests[0].has_prev);
	EXPECT_EQ(1, s->guests[1].has_prev);
	EXPECT_EQ(0, s->guests[1].prev_id);
	EXPECT_EQ(0, s->guests[1].has_next);
	EXPECT_EQ(0, hgsync_guest_root(s, 0));
	EXPECT_EQ(0, hgsync_guest_root(s, 1));
	/* The spans: A's from before the recording to its last exit, B's from its first record on. */
	EXPECT_EQ(0, s->guests[0].span_start_tsc);
	EXPECT_EQ(T1, s->guests[0].span_end_tsc);
	EXPECT_EQ(T2, s->guests[1].span_start_tsc);
	EXPECT_EQ(UINT64_MAX, s->guests[1].span_end_tsc);
	EXPECT_STREQ("migration", hgsync_disruption_name(s->disr[0].kind));
}

TEST_F(restore, each_value_through_its_incarnation)
{
	expect_incarnation(_metadata, self->s, &self->sc, 0);
	expect_incarnation(_metadata, self->s, &self->sc, 1);
}

/*
 * Guest TSCs above A's last value and below B's first: through A's
 * offsets after A's last exit, through B's before B's first record. The
 * guest never read them: no mapping, whichever guest id asks.
 */
TEST_F(restore, blackout_maps_to_nothing)
{
	const struct inc *a = &self->sc.inc[0], *b = &self->sc.inc[1];
	uint64_t lo = gtsc(a, T1) + 1, hi = gtsc(b, T2) - 1;

	ASSERT_LT(lo, hi);
	for (uint32_t ask = 0; ask < 2; ask++)
		for (int vcpu = 0; vcpu < 2; vcpu++) {
			expect_unmapped(_metadata, self->s, ask, vcpu, lo);
			expect_unmapped(_metadata, self->s, ask, vcpu, lo + (hi - lo) / 2);
			expect_unmapped(_metadata, self->s, ask, vcpu, hi);
		}
}

/* ---- 2. the edges ---- */

TEST_F(restore, edges)
{
	const struct inc *a = &self->sc.inc[0], *b = &self->sc.inc[1];

	for (uint32_t ask = 0; ask < 2; ask++) {
		/* B's first value, at its first record, and right after. */
		expect_maps(_metadata, self->s, ask, 0, gtsc(b, T2), T2, 1);
		expect_maps(_metadata, self->s, ask, 0, gtsc(b, T2) + 1, T2 + 1, 1);
		expect_maps(_metadata, self->s, ask, 1, gtsc(b, T2 + 50), T2 + 50, 1);
		/* A's last values: at its last exit and right before. */
		expect_maps(_metadata, self->s, ask, 0, gtsc(a, T1), T1, 0);
		expect_maps(_metadata, self->s, ask, 0, gtsc(a, T1) - 1, T1 - 1, 0);
		expect_maps(_metadata, self->s, ask, 1, gtsc(a, T1 - 500), T1 - 500, 0);
		/* A's first, and a value from before the recording: A's too. */
		expect_maps(_metadata, self->s, ask, 0, gtsc(a, T0), T0, 0);
		expect_maps(_metadata, self->s, ask, 0, gtsc(a, T0 - 1000000), T0 - 1000000, 0);
		/* B's last, and long after: B's. */
		expect_maps(_metadata, self->s, ask, 0, gtsc(b, T2E), T2E, 1);
		expect_maps(_metadata, self->s, ask, 0, gtsc(b, T2E + RUN_LEN), T2E + RUN_LEN, 1);
	}
}

TEST_F(restore, facts)
{
	struct hgsync_disr_facts f;

	ASSERT_EQ(0, hgsync_disruption_facts(self->s, 0, &f));
	EXPECT_EQ(1, f.has_old_run);
	EXPECT_EQ(1, f.has_new_run);
	EXPECT_EQ(1, f.has_kvm_jump);
	EXPECT_EQ(LAST_SEEN(T1), f.old_last_run_tsc);
	EXPECT_EQ(T2, f.new_first_run_tsc);
	EXPECT_EQ((int64_t)(OFF_B - OFF_A), f.kvm_jump_tsc);
	/* The guest's clock stood still but for the save's delay. */
	EXPECT_EQ((int64_t)SAVE_DELAY - (int64_t)DOWN_LEN, f.kvm_jump_tsc);
	EXPECT_EQ(-EINVAL, hgsync_disruption_facts(self->s, 1, &f));
	EXPECT_EQ(0, f.has_old_run);
	EXPECT_EQ(0, f.has_kvm_jump);
}

/*
 * The incoming VM's offsets as KVM writes them: at vCPU creation (guest
 * TSC 0), then the saved TSC, both before its first entry, which
 * VCPU_SEEN then reports.  Values map as before; the jump is between the
 * offsets the guest ran with, the restored one, not the creation's.
 */
TEST(restore_offset_written_before_first_entry)
{
	struct dscen sc;
	struct hgsync *s = new_sync();
	struct hgsync_disr_facts f;

	ASSERT_NE(NULL, s);
	scen_restore(&sc, 1);
	sc.inc[1].init_off = (uint64_t)0 - (T2 - 2000000);
	ASSERT_EQ(0, load_dscen(s, &sc));
	EXPECT_EQ(T2, s->guests[1].span_start_tsc);
	expect_incarnation(_metadata, s, &sc, 0);
	expect_incarnation(_metadata, s, &sc, 1);
	expect_unmapped(_metadata, s, 1, 0, gtsc(&sc.inc[0], T1) + 1);
	expect_unmapped(_metadata, s, 1, 0, gtsc(&sc.inc[1], T2) - 1);
	ASSERT_EQ(0, hgsync_disruption_facts(s, 0, &f));
	EXPECT_EQ(LAST_SEEN(T1), f.old_last_run_tsc);
	EXPECT_EQ(T2, f.new_first_run_tsc);
	EXPECT_EQ(1, f.has_kvm_jump);
	EXPECT_EQ((int64_t)(OFF_B - OFF_A), f.kvm_jump_tsc)
		TH_LOG("jump %lld: the creation offset's would be %lld",
		       (long long)f.kvm_jump_tsc, (long long)(sc.inc[1].init_off - OFF_A));
	free_sync(s);
}

/*
 * The old VM's process ends only after the new one ran the guest (QEMU
 * quits once the migration is over): its threads' EXIT records come
 * after B's first entry.  A left the guest at its last STOP all the same:
 * the blackout still maps to nothing, and A's values and B's as before.
 */
TEST(old_vm_exits_after_new_vm_started)
{
	struct dscen sc;
	struct hgsync *s = new_sync();
	struct hgsync_disr_facts f;

	ASSERT_NE(NULL, s);
	scen_restore(&sc, 1);
	sc.inc[0].exit_at = T2 + 1000000;
	ASSERT_EQ(0, load_dscen(s, &sc));
	expect_incarnation(_metadata, s, &sc, 0);
	expect_incarnation(_metadata, s, &sc, 1);
	ASSERT_EQ(0, hgsync_disruption_facts(s, 0, &f));
	EXPECT_EQ(LAST_SEEN(T1), f.old_last_run_tsc);
	EXPECT_EQ(T2, f.new_first_run_tsc);
	for (uint32_t ask = 0; ask < 2; ask++) {
		expect_unmapped(_metadata, s, ask, 0, gtsc(&sc.inc[0], T1) + 1);
		expect_unmapped(_metadata, s, ask, 0, gtsc(&sc.inc[1], T2) - 1);
	}
	free_sync(s);
}

TEST_F(restore, bad_requests)
{
	struct hgsync_result r;

	EXPECT_EQ(-EINVAL, hgsync_to_host(self->s, 2, 0, HGSYNC_CLOCK_TSC, gtsc(&self->sc.inc[1],
										  T2), &r));
	EXPECT_EQ(-EINVAL, hgsync_to_host(self->s, 1, 0, 0, gtsc(&self->sc.inc[1], T2), &r));
	/* A guest CPU neither VM had: nothing, through either incarnation. */
	EXPECT_NE(0, hgsync_to_host(self->s, 1, 2, HGSYNC_CLOCK_TSC,
				    gtsc(&self->sc.inc[1], T2 + 1000), &r));
	/* Ids beyond the file are their own roots: nothing to walk. */
	EXPECT_EQ(5, hgsync_guest_root(self->s, 5));
}

/* ---- 3. three incarnations: migration, then restore ---- */

TEST(chain_of_three)
{
	struct dscen sc;
	struct hgsync *s = new_sync();
	struct hgsync_disr_facts f;

	ASSERT_NE(NULL, s);
	scen_chain(&sc);
	ASSERT_EQ(0, load_dscen(s, &sc));
	ASSERT_EQ(3, s->nr_guests);
	ASSERT_EQ(2, s->nr_disr);
	EXPECT_EQ(0, hgsync_guest_root(s, 2));
	EXPECT_EQ(0, hgsync_guest_root(s, 1));
	EXPECT_EQ(T2, s->guests[1].span_start_tsc);
	EXPECT_EQ(T2E, s->guests[1].span_end_tsc);
	EXPECT_EQ(T3, s->guests[2].span_start_tsc);
	for (uint32_t k = 0; k < 3; k++)
		expect_incarnation(_metadata, s, &sc, k);
	for (uint32_t ask = 0; ask < 3; ask++) {
		/* Each edge. */
		expect_maps(_metadata, s, ask, 0, gtsc(&sc.inc[0], T1), T1, 0);
		expect_maps(_metadata, s, ask, 0, gtsc(&sc.inc[1], T2), T2, 1);
		expect_maps(_metadata, s, ask, 0, gtsc(&sc.inc[1], T2E), T2E, 1);
		expect_maps(_metadata, s, ask, 0, gtsc(&sc.inc[2], T3), T3, 2);
		/* Both blackouts. */
		expect_unmapped(_metadata, s, ask, 0, gtsc(&sc.inc[0], T1) + 1);
		expect_unmapped(_metadata, s, ask, 0, gtsc(&sc.inc[1], T2) - 1);
		expect_unmapped(_metadata, s, ask, 1, gtsc(&sc.inc[0], T1 + DOWN_LEN / 2));
		expect_unmapped(_metadata, s, ask, 0, gtsc(&sc.inc[1], T2E) + 1);
		expect_unmapped(_metadata, s, ask, 0, gtsc(&sc.inc[2], T3) - 1);
	}
	ASSERT_EQ(0, hgsync_disruption_facts(s, 0, &f));
	EXPECT_EQ(LAST_SEEN(T1), f.old_last_run_tsc);
	EXPECT_EQ(T2, f.new_first_run_tsc);
	EXPECT_EQ(1, f.has_kvm_jump);
	EXPECT_EQ((int64_t)MIG_AHEAD, f.kvm_jump_tsc);
	ASSERT_EQ(0, hgsync_disruption_facts(s, 1, &f));
	EXPECT_EQ(LAST_SEEN(T2E), f.old_last_run_tsc);
	EXPECT_EQ(T3, f.new_first_run_tsc);
	EXPECT_EQ((int64_t)(OFF_C3 - OFF_B3), f.kvm_jump_tsc);
	free_sync(s);
}

/* ---- 4. without the DISRUPTION: two unrelated guests ---- */

TEST(without_disruption_plain)
{
	struct dscen sc;
	struct hgsync *s = new_sync();
	struct hgsync_result r;
	const struct inc *a, *b;

	ASSERT_NE(NULL, s);
	scen_restore(&sc, 0);
	a = &sc.inc[0];
	b = &sc.inc[1];
	ASSERT_EQ(0, load_dscen(s, &sc));
	EXPECT_EQ(0, s->nr_disr);
	EXPECT_EQ(1, hgsync_guest_root(s, 1));
	EXPECT_EQ(0, s->guests[0].has_next);
	EXPECT_EQ(0, s->guests[1].has_prev);
	for (unsigned int i = 0; i < 50; i++) {
		int vcpu = i & 1;
		uint64_t ha = spread(T0 + 50, T1 - 500, i, 50), hb = spread(T2 + 50, T2E - 500, i, 50);

		expect_maps(_metadata, s, 1, vcpu, gtsc(b, hb), hb, 1);
		expect_maps(_metadata, s, 0, vcpu, gtsc(a, ha), ha, 0);
	}
	/* No chain, no spans: B's first value asked as guest 0 goes through A's offset. */
	ASSERT_EQ(0, hgsync_to_host(s, 0, 0, HGSYNC_CLOCK_TSC, gtsc(b, T2), &r));
	EXPECT_EQ(gtsc(b, T2) - OFF_A, r.host_value);
	EXPECT_EQ(0, r.guest_id);
	/* ... and a blackout value too. */
	ASSERT_EQ(0, hgsync_to_host(s, 1, 0, HGSYNC_CLOCK_TSC, gtsc(a, T1) + 1, &r));
	EXPECT_EQ(gtsc(a, T1) + 1 - OFF_B, r.host_value);
	EXPECT_EQ(1, r.guest_id);
	free_sync(s);
}

/* A new boot, and a guest that never came back: kept, never linked. */
TEST(reboot_and_gone_do_not_link)
{
	struct dscen sc;
	struct hgsync *s = new_sync();
	struct hgsync_disr_facts f;
	struct hgsync_result r;

	ASSERT_NE(NULL, s);
	scen_restore(&sc, 1);
	sc.disr[0].kind = HGCOR_DISRUPT_REBOOT;
	ASSERT_EQ(0, load_dscen(s, &sc));
	EXPECT_EQ(1, s->nr_disr);
	EXPECT_EQ(1, hgsync_guest_root(s, 1));
	EXPECT_EQ(0, s->guests[0].has_next);
	ASSERT_EQ(0, hgsync_to_host(s, 0, 0, HGSYNC_CLOCK_TSC, gtsc(&sc.inc[1], T2), &r));
	EXPECT_EQ(gtsc(&sc.inc[1], T2) - OFF_A, r.host_value);	/* plain: A's offset */
	EXPECT_EQ(0, r.guest_id);
	/* The facts hold whatever the kind. */
	ASSERT_EQ(0, hgsync_disruption_facts(s, 0, &f));
	EXPECT_EQ(LAST_SEEN(T1), f.old_last_run_tsc);
	EXPECT_EQ(T2, f.new_first_run_tsc);
	hgsync_free(s);

	/* GONE: A alone came and went. */
	sc.nr_inc = 1;
	sc.disr[0] = make_disr(0, HGCOR_NO_GUEST, HGCOR_DISRUPT_GONE, &sc.inc[0], &sc.inc[0]);
	sc.disr[0].new_vm_pid = -1;
	sc.disr[0].host_tsc_back = sc.disr[0].host_local_ns_back = 0;
	sc.disr[0].flags = 0;
	sc.disr[0].guest_tsc_jump = sc.disr[0].guest_local_jump_ns = 0;
	sc.disr[0].jump_bound_ns = 0;
	ASSERT_EQ(0, load_dscen(s, &sc));
	EXPECT_EQ(1, s->nr_disr);
	EXPECT_EQ(1, s->nr_guests);
	EXPECT_EQ(0, s->guests[0].has_next);
	EXPECT_STREQ("gone", hgsync_disruption_name(s->disr[0].kind));
	expect_maps(_metadata, s, 0, 0, gtsc(&sc.inc[0], T1), T1, 0);
	ASSERT_EQ(0, hgsync_disruption_facts(s, 0, &f));
	EXPECT_EQ(1, f.has_old_run);
	EXPECT_EQ(LAST_SEEN(T1), f.old_last_run_tsc);
	EXPECT_EQ(0, f.has_new_run);
	EXPECT_EQ(0, f.new_first_run_tsc);
	EXPECT_EQ(0, f.has_kvm_jump);
	free_sync(s);
}

/*
 * A reconnection: one VM process, two sessions (two guest ids with the
 * same VM).  The spans meet at the recorder's times; either maps every
 * value the same, the later from when the session was found over.
 */
TEST(reconnect_same_vm)
{
	struct dscen sc;
	struct hgsync *s = new_sync();
	const struct inc *a;
	uint64_t lost;

	ASSERT_NE(NULL, s);
	scen_restore(&sc, 1);
	sc.inc[1] = sc.inc[0];
	sc.nr_rec_inc = 1;	/* one VM's records, two guest ids */
	a = &sc.inc[0];
	sc.disr[0] = make_disr(0, 1, HGCOR_DISRUPT_RECONNECT, a, a);
	sc.disr[0].host_tsc_lost = T0 + RUN_LEN / 2;
	sc.disr[0].host_tsc_back = T0 + RUN_LEN / 2 + 1000000;
	lost = sc.disr[0].host_tsc_lost;
	ASSERT_EQ(0, load_dscen(s, &sc));
	ASSERT_EQ(2, s->nr_guests);
	EXPECT_EQ(0, hgsync_guest_root(s, 1));
	for (uint32_t ask = 0; ask < 2; ask++) {
		expect_maps(_metadata, s, ask, 0, gtsc(a, T0 + 1000), T0 + 1000, 0);
		expect_maps(_metadata, s, ask, 0, gtsc(a, lost - 1), lost - 1, 0);
		expect_maps(_metadata, s, ask, 0, gtsc(a, lost), lost, 1);
		expect_maps(_metadata, s, ask, 1, gtsc(a, T1 - 500), T1 - 500, 1);
	}
	free_sync(s);
}

/* ---- 5. bad sections ---- */

static struct hgcor_disruption good_disr(void)
{
	static const struct inc a = { PID_A, OFF_A, T0, T1 }, b = { PID_B, OFF_B, T2, T2E };

	return make_disr(0, 1, HGCOR_DISRUPT_MIGRATION, &a, &b);
}

static int check_disr(const struct hgcor_disruption *d)
{
	return hgcor_check_values(HGCOR_SEC_DISRUPTION, (const uint8_t *)d, sizeof(*d), 64);
}

/* The restore scenario with its DISRUPTION replaced by @d: hgsync_load()'s result. */
static int load_with(const struct hgcor_disruption *d)
{
	struct dscen sc;
	struct hgsync *s = new_sync();
	int ret;

	if (!s)
		return -ENOMEM;
	scen_restore(&sc, 1);
	sc.disr[0] = *d;
	ret = load_dscen(s, &sc);
	free_sync(s);
	return ret;
}

TEST(range_checks)
{
	static const uint32_t bad_kinds[] = { 0, HGCOR_DISRUPT_KIND_MAX + 1, 100, UINT32_MAX };
	struct hgcor_disruption d = good_disr(), b;

	EXPECT_EQ(HGCOR_OK, check_disr(&d));
	EXPECT_EQ(0, load_with(&d));
	for (unsigned int i = 0; i < sizeof(bad_kinds) / sizeof(bad_kinds[0]); i++) {
		b = d;
		b.kind = bad_kinds[i];
		EXPECT_EQ(HGCOR_E_RANGE, check_disr(&b)) TH_LOG("kind %u", b.kind);
	}
	for (uint32_t k = HGCOR_DISRUPT_RECONNECT; k <= HGCOR_DISRUPT_KIND_MAX; k++) {
		b = d;
		b.kind = k;
		if (k == HGCOR_DISRUPT_GONE)
			continue;
		EXPECT_EQ(HGCOR_OK, check_disr(&b)) TH_LOG("kind %u", k);
	}
	/* Not a later id, or beyond the reader's guests. */
	b = d;
	b.next_guest_id = 0;
	EXPECT_EQ(HGCOR_E_RANGE, check_disr(&b));
	b.guest_id = 5;
	b.next_guest_id = 4;
	EXPECT_EQ(HGCOR_E_RANGE, check_disr(&b));
	b.next_guest_id = HGCOR_MAX_GUEST_ID;
	EXPECT_EQ(HGCOR_E_RANGE, check_disr(&b));
	b.next_guest_id = HGCOR_NO_GUEST;
	EXPECT_EQ(HGCOR_E_RANGE, check_disr(&b));
	b.next_guest_id = HGCOR_MAX_GUEST_ID - 1;
	EXPECT_EQ(HGCOR_OK, check_disr(&b));
	b.guest_id = HGCOR_MAX_GUEST_ID;
	b.next_guest_id = HGCOR_MAX_GUEST_ID + 1;
	EXPECT_EQ(HGCOR_E_RANGE, check_disr(&b));
	/* GONE: nothing follows. */
	b = d;
	b.kind = HGCOR_DISRUPT_GONE;
	EXPECT_EQ(HGCOR_E_RANGE, check_disr(&b));	/* next 1 */
	b.next_guest_id = HGCOR_NO_GUEST;
	EXPECT_EQ(HGCOR_E_RANGE, check_disr(&b));	/* a new VM, back */
	b.new_vm_pid = -1;
	b.host_tsc_back = b.host_local_ns_back = 0;
	EXPECT_EQ(HGCOR_OK, check_disr(&b));
	b.next_guest_id = 1;
	EXPECT_EQ(HGCOR_E_RANGE, check_disr(&b));
	/* The rest of the section. */
	b = d;
	b.old_vm_pid = -2;
	EXPECT_EQ(HGCOR_E_RANGE, check_disr(&b));
	b = d;
	b.flags = 2;
	EXPECT_EQ(HGCOR_E_RANGE, check_disr(&b));
	b = d;
	b.reserved = 1;
	EXPECT_EQ(HGCOR_E_RANGE, check_disr(&b));
	b = d;
	b.host_tsc_back = b.host_tsc_lost - 1;
	EXPECT_EQ(HGCOR_E_RANGE, check_disr(&b));
	b = d;
	b.flags = 0;
	EXPECT_EQ(HGCOR_E_RANGE, check_disr(&b));	/* a jump, not known */
	b.guest_tsc_jump = b.guest_local_jump_ns = 0;
	b.jump_bound_ns = 0;
	EXPECT_EQ(HGCOR_OK, check_disr(&b));
}

/*
 * The loader refuses the same sections.  The reader range-checks every
 * section before hgsync_load() sees it (corr.c, next_section()), so the
 * error is HGCOR_E_RANGE, not disruption_add()'s own HGCOR_E_CONTENT.
 */
TEST(load_refuses_bad_disruptions)
{
	struct hgcor_disruption d = good_disr(), b;

	b = d;
	b.next_guest_id = 0;
	EXPECT_EQ(HGCOR_E_RANGE, load_with(&b));
	b = d;
	b.guest_id = 1;	/* next == guest_id */
	EXPECT_EQ(HGCOR_E_RANGE, load_with(&b));
	b = d;
	b.next_guest_id = HGCOR_MAX_GUEST_ID;
	EXPECT_EQ(HGCOR_E_RANGE, load_with(&b));
	b = d;
	b.next_guest_id = HGCOR_NO_GUEST;
	EXPECT_EQ(HGCOR_E_RANGE, load_with(&b));
	b = d;
	b.kind = 0;
	EXPECT_EQ(HGCOR_E_RANGE, load_with(&b));
	b.kind = HGCOR_DISRUPT_KIND_MAX + 1;
	EXPECT_EQ(HGCOR_E_RANGE, load_with(&b));
	b = d;
	b.kind = HGCOR_DISRUPT_GONE;
	b.new_vm_pid = -1;
	b.host_tsc_back = b.host_local_ns_back = 0;
	EXPECT_EQ(HGCOR_E_RANGE, load_with(&b));	/* GONE with a next guest */
	b.next_guest_id = HGCOR_NO_GUEST;
	EXPECT_EQ(0, load_with(&b));
}

/* A second claim on an incarnation, before or after: the first link stands. */
TEST(second_claim_does_not_relink)
{
	struct dscen sc;
	struct hgsync *s = new_sync();

	ASSERT_NE(NULL, s);
	scen_chain(&sc);
	/* 0 -> 2 first (a later id, allowed), then 1 -> 2 claims 2 again. */
	sc.disr[0] = make_disr(0, 2, HGCOR_DISRUPT_RESTORE, &sc.inc[0], &sc.inc[2]);
	sc.disr[1] = make_disr(1, 2, HGCOR_DISRUPT_RESTORE, &sc.inc[1], &sc.inc[2]);
	ASSERT_EQ(0, load_dscen(s, &sc));
	EXPECT_EQ(2, s->nr_disr);	/* both kept, for dump */
	EXPECT_EQ(0, hgsync_guest_root(s, 2));
	EXPECT_EQ(1, hgsync_guest_root(s, 1));
	EXPECT_EQ(1, s->guests[0].has_next);
	EXPECT_EQ(2, s->guests[0].next_id);
	EXPECT_EQ(0, s->guests[1].has_next);
	EXPECT_EQ(0, s->guests[2].prev_id);
	hgsync_free(s);

	/* 0 -> 1 first, then 0 -> 2 claims 0 again: 2 stays alone. */
	scen_chain(&sc);
	sc.disr[1] = make_disr(0, 2, HGCOR_DISRUPT_RESTORE, &sc.inc[0], &sc.inc[2]);
	ASSERT_EQ(0, load_dscen(s, &sc));
	EXPECT_EQ(2, s->nr_disr);
	EXPECT_EQ(1, s->guests[0].next_id);
	EXPECT_EQ(0, hgsync_guest_root(s, 1));
	EXPECT_EQ(2, hgsync_guest_root(s, 2));
	EXPECT_EQ(0, s->guests[2].has_prev);
	EXPECT_EQ(0, s->guests[1].has_next);
	/* Guest 2 alone: C's values, plain. */
	expect_maps(_metadata, s, 2, 0, gtsc(&sc.inc[2], T3), T3, 2);
	free_sync(s);
}

/*
 * A long chain (reconnections of a flaky session, one VM process): every
 * incarnation's values, the last's included, map through it.  Chains are
 * walked from the root in hgsync_to_host_by(); HGSYNC_MAX_GUESTS allows
 * up to 1024 incarnations.
 */
TEST(long_chain_of_reconnections)
{
	enum { N = 80 };
	struct dscen sc;
	struct hgsync *s = new_sync();
	char path[] = "/tmp/hgdisrupt-long-XXXXXX";
	struct hgclock_info hinfo;
	struct hgcor_writer w;
	struct buf host = { 0 };
	uint8_t *data;
	size_t len = 0, pos;
	uint64_t step = RUN_LEN / N;
	int ret;

	ASSERT_NE(NULL, s);
	scen_restore(&sc, 0);
	gen_info(&hinfo, HGCLOCK_ROLE_HOST, 2, KHZ);
	gen_cyc2ns(&host, 0, T0 - 1000, &hconv, KHZ, 1);
	gen_cyc2ns(&host, 1, T0 - 900, &hconv, KHZ, 1);
	put_inc(&host, &sc.inc[0]);
	ASSERT_EQ(0, gen_tmpfile(path));
	ret = hgcor_create(&w, path);
	ret = ret ?: hgcor_write_section(&w, HGCOR_SEC_HOST_INFO, 0, &hinfo, sizeof(hinfo));
	ret = ret ?: hgcor_write_section(&w, HGCOR_SEC_HOST_RECORDS, 0, host.p, host.len);
	for (uint32_t k = 0; k < N && !ret; k++) {
		struct hgcor_guest_vm vm = { .guest_id = k, .vm_pid = PID_A,
					     .how = HGCOR_VM_BY_OPTION };
		struct hgcor_disruption d = make_disr(k, k + 1, HGCOR_DISRUPT_RECONNECT,
						      &sc.inc[0], &sc.inc[0]);

		ret = hgcor_write_section(&w, HGCOR_SEC_GUEST_VM, 0, &vm, sizeof(vm));
		d.host_tsc_lost = T0 + (k + 1) * step;
		d.host_tsc_back = d.host_tsc_lost + 10;
		if (k + 1 < N)
			ret = ret ?: hgcor_write_section(&w, HGCOR_SEC_DISRUPTION, 0, &d, sizeof(d));
	}
	ret = ret ?: hgcor_close(&w);
	free(host.p);
	data = ret ? NULL : gen_slurp(path, &len);
	unlink(path);
	ASSERT_NE(NULL, data);
	ASSERT_EQ(0, hgsync_load(s, data, len, 0, &pos));
	free(data);
	ASSERT_EQ(0, hgsync_build(s));
	ASSERT_EQ(N, s->nr_guests);
	EXPECT_EQ(0, hgsync_guest_root(s, N - 1));
	for (uint32_t k = 0; k < N; k++) {
		uint64_t h = T0 + k * step + step / 2;

		expect_maps(_metadata, s, k, 0, gtsc(&sc.inc[0], h), h, k);
		expect_maps(_metadata, s, 0, 0, gtsc(&sc.inc[0], h), h, k);
	}
	free_sync(s);
}

/* ---- 6. damaged files ---- */

FIXTURE(damaged) {
	uint8_t *buf;
	size_t len;
	size_t disr_off;	/* the DISRUPTION section's header */
};

FIXTURE_SETUP(damaged)
{
	struct dscen sc;
	struct hgcor_reader r;
	struct hgcor_view v;

	scen_chain(&sc);
	self->buf = dscen_bytes(&sc, &self->len);
	ASSERT_NE(NULL, self->buf);
	self->disr_off = 0;
	ASSERT_EQ(0, hgcor_open(&r, self->buf, self->len));
	while (hgcor_next(&r, &v) > 0)
		if (v.type == HGCOR_SEC_DISRUPTION && !self->disr_off)
			self->disr_off = v.offset;
	hgcor_release(&r);
	ASSERT_LT(0, self->disr_off);
}

FIXTURE_TEARDOWN(damaged)
{
	free(self->buf);
}

/*
 * What a loaded file may answer: any guest's root an id no larger, any
 * mapping from an incarnation of that chain.  Never a crash.
 */
static void use_loaded(struct __test_metadata *_metadata, struct hgsync *s)
{
	static const uint64_t hs[] = { T0 + 1000, T1, T2, T2E, T3 + 5 };
	struct hgsync_disr_facts f;

	if (hgsync_build(s))
		return;
	for (uint32_t id = 0; id < s->nr_guests; id++) {
		uint32_t root = hgsync_guest_root(s, id);

		ASSERT_LE(root, id);
		for (unsigned int i = 0; i < sizeof(hs) / sizeof(hs[0]); i++) {
			struct hgsync_result r;

			if (hgsync_to_host(s, id, 0, HGSYNC_CLOCK_TSC, hs[i] + OFF_A, &r))
				continue;
			ASSERT_LT(r.guest_id, s->nr_guests);
			ASSERT_EQ(root, hgsync_guest_root(s, r.guest_id));
		}
	}
	for (size_t i = 0; i < s->nr_disr; i++)
		ASSERT_EQ(0, hgsync_disruption_facts(s, i, &f));
}

TEST_F(damaged, every_truncation)
{
	for (size_t cut = 0; cut < self->len; cut++) {
		struct hgsync s;
		size_t pos;
		int ret = hgsync_load(&s, self->buf, cut, 0, &pos);

		ASSERT_NE(0, ret) TH_LOG("cut at %zu of %zu", cut, self->len);
		ASSERT_TRUE(ret == HGCOR_E_SHORT || ret == HGCOR_E_TRUNCATED ||
			    ret == HGCOR_E_NO_END || ret == HGCOR_E_HEADER)
			TH_LOG("cut at %zu: %d", cut, ret);
		/* An open file (the recorder still writing) reads to its last whole section. */
		ret = hgsync_load(&s, self->buf, cut, HGSYNC_ALLOW_OPEN, &pos);
		if (!ret) {
			use_loaded(_metadata, &s);
			hgsync_free(&s);
		}
	}
}

TEST_F(damaged, every_bit_flip_of_the_disruption)
{
	size_t end = self->disr_off + sizeof(struct hgcor_section) +
		     sizeof(struct hgcor_disruption);

	ASSERT_LE(end, self->len);
	for (size_t i = self->disr_off; i < end; i++)
		for (int bit = 0; bit < 8; bit++) {
			struct hgsync s;
			size_t pos;

			self->buf[i] ^= 1u << bit;
			ASSERT_NE(0, hgsync_load(&s, self->buf, self->len, 0, &pos))
				TH_LOG("flip of bit %d at byte %zu not detected", bit, i);
			self->buf[i] ^= 1u << bit;
		}
}

/* Values no CRC catches (a buggy writer): refused by range, or read safely. */
TEST_F(damaged, hostile_values_with_good_crcs)
{
	static const uint32_t vals[] = {
		0, 1, 2, 3, 5, 6, 7, 0x3ff, 0x400, 0x7fffffff, 0x80000000u, UINT32_MAX,
	};
	uint8_t *p = self->buf + self->disr_off + sizeof(struct hgcor_section);
	unsigned int loaded = 0, refused = 0;
	struct hgcor_section h;

	memcpy(&h, self->buf + self->disr_off, sizeof(h));
	ASSERT_EQ(sizeof(struct hgcor_disruption), h.length);
	for (size_t w = 0; w < sizeof(struct hgcor_disruption) / 4; w++)
		for (unsigned int k = 0; k < sizeof(vals) / sizeof(vals[0]); k++) {
			struct hgsync s;
			uint32_t old;
			size_t pos;
			int ret;

			memcpy(&old, p + w * 4, 4);
			memcpy(p + w * 4, &vals[k], 4);
			h.payload_crc = hgcor_crc32(0, p, h.length);
			h.header_crc = hgcor_crc32(0, &h, offsetof(struct hgcor_section,
								   header_crc));
			memcpy(self->buf + self->disr_off, &h, sizeof(h));
			ret = hgsync_load(&s, self->buf, self->len, 0, &pos);
			if (!ret) {
				loaded++;
				use_loaded(_metadata, &s);
				hgsync_free(&s);
			} else {
				refused++;
				ASSERT_TRUE(ret == HGCOR_E_RANGE || ret == HGCOR_E_CONTENT)
					TH_LOG("word %zu = %u: %d", w, vals[k], ret);
			}
			memcpy(p + w * 4, &old, 4);
		}
	/* Restored: the file loads again. */
	h.payload_crc = hgcor_crc32(0, p, h.length);
	h.header_crc = hgcor_crc32(0, &h, offsetof(struct hgcor_section, header_crc));
	memcpy(self->buf + self->disr_off, &h, sizeof(h));
	{
		struct hgsync s;
		size_t pos;

		ASSERT_EQ(0, hgsync_load(&s, self->buf, self->len, 0, &pos));
		hgsync_free(&s);
	}
	EXPECT_LT(0, loaded);
	EXPECT_LT(0, refused);
}

TEST_HARNESS_MAIN
