// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of the vCPU identity (Documentation/sync.rst, "vCPU
 * identity"): which of KVM's vCPUs a guest CPU is.  QEMU gives KVM each
 * vCPU's APIC ID as its vcpu_id, and APIC IDs have gaps when a topology
 * level is not a power of two (-smp 6,sockets=2,cores=3: 0 1 2 4 5 6).
 * The agent's CPU map (CPU_MAP, protocol 1.2) says it; without one,
 * guest CPU n is assumed to be vcpu_id n, which the loader flags, and
 * warns about when the host saw vcpu_ids with gaps or the exit pairings
 * ran elsewhere.
 *
 * A synthetic recording: six guest CPUs on vcpu_ids {0,1,2,4,5,6}, each
 * vCPU with its own TSC offset, host CPU (= its vcpu_id) and thread, and
 * exit pairings whose host halves name the true vcpu_id.
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
#include "corr_check.h"
#include "proto.h"
#include "sync.h"
#include "gen.h"

#define NR_GCPUS	6
#define NR_HCPUS	7
#define KHZ		2500000u
#define T0		5000000000000ull	/* host TSC where the recording starts */
#define SPAN		25000000000ull		/* 10 s of host TSC */
#define VM_PID		4321
#define NR_PAIRS	60			/* per guest CPU */
#define PAIR_KEY	0x51c3

/* -smp 6,sockets=2,cores=3: the APIC IDs of guest CPUs 0-5. */
static const uint32_t apic_gaps[NR_GCPUS] = { 0, 1, 2, 4, 5, 6 };
static const uint32_t apic_dense[NR_GCPUS] = { 0, 1, 2, 3, 4, 5 };

static const struct hgclock_conversion hconv = {
	.tsc_base = 0, .offset_ns = (uint64_t)-500000000000ll, .mult = 858993459, .shift = 31,
	.flags = HGCLOCK_CONV_VALID | HGCLOCK_CONV_EXACT | HGCLOCK_CONV_LOCAL_OFFSET,
};

/* Each vCPU's own TSC offset: a wrong vCPU gives a wrong host time. */
static uint64_t offset_of(uint32_t vcpu_id)
{
	return (uint64_t)-4000000000000ll + (uint64_t)vcpu_id * 1000000007ull;
}

static void put_cyc2ns(struct buf *b, uint32_t cpu, uint64_t tsc)
{
	struct hgclock_rec_cyc2ns r;

	gen_rec(&r, sizeof(r), HGCLOCK_REC_CYC2NS, cpu, tsc, hgclock_conv_apply(&hconv, tsc));
	r.conv = hconv;
	r.tsc_khz = KHZ;
	r.reason = HGCLOCK_SNAP_PERIODIC;
	r.seq = 1;
	put(b, &r, sizeof(r));
}

/* vCPU @vcpu_id found running on host CPU @vcpu_id, thread 3000 + id. */
static void put_vcpu(struct buf *b, uint32_t vcpu_id)
{
	struct hgclock_rec_vcpu_seen r;
	struct hgclock_rec_vcpu run;

	gen_rec(&r, sizeof(r), HGCLOCK_REC_VCPU_SEEN, vcpu_id, T0 + vcpu_id,
		hgclock_conv_apply(&hconv, T0 + vcpu_id));
	r.tid = 3000 + (int32_t)vcpu_id;
	r.vm_pid = VM_PID;
	r.vcpu_id = (int32_t)vcpu_id;
	r.flags = HGCLOCK_VCPU_KVM | HGCLOCK_VCPU_TSC_KNOWN;
	r.tsc_offset = offset_of(vcpu_id);
	r.tsc_scaling_ratio = 1ull << 32;
	r.tsc_frac_bits = 32;
	r.host_cpu = (int32_t)vcpu_id;
	put(b, &r, sizeof(r));

	gen_rec(&run, sizeof(run), HGCLOCK_REC_VCPU_RUN, vcpu_id, T0 + 100 + vcpu_id,
		hgclock_conv_apply(&hconv, T0 + 100 + vcpu_id));
	run.tid = 3000 + (int32_t)vcpu_id;
	run.vm_pid = VM_PID;
	run.vcpu_id = (int32_t)vcpu_id;
	put(b, &run, sizeof(run));
}

/*
 * Exit pairings of guest CPU @cpu, which is vcpu_id @vcpu_id: the guest
 * reads its TSC 1000 counts before and after the host's reading, which
 * the host makes in that vCPU's thread (the truth, whatever the map says).
 */
static void put_pairs(struct buf *host, struct buf *guest, uint32_t cpu, uint32_t vcpu_id)
{
	for (uint32_t i = 0; i < NR_PAIRS; i++) {
		uint64_t h = T0 + 1000000 + (uint64_t)i * (SPAN / NR_PAIRS) + cpu * 1000;
		struct hgclock_rec_exit_pair gp;
		struct hgclock_rec_exit_host hp;
		uint32_t seq = cpu * NR_PAIRS + i + 1;

		gen_rec(&gp, sizeof(gp), HGCLOCK_REC_EXIT_PAIR, cpu, h + 2000 + offset_of(vcpu_id),
			0);
		gp.seq = seq;
		gp.key = PAIR_KEY;
		gp.tsc_before = h - 1000 + offset_of(vcpu_id);
		gp.tsc_after = h + 1000 + offset_of(vcpu_id);
		gp.sched_clock_before_ns = 1000000000ull + i * 4000000ull;
		gp.sched_clock_after_ns = gp.sched_clock_before_ns + 800;
		put(guest, &gp, sizeof(gp));

		gen_rec(&hp, sizeof(hp), HGCLOCK_REC_EXIT_HOST, vcpu_id, h,
			hgclock_conv_apply(&hconv, h));
		hp.tid = 3000 + (int32_t)vcpu_id;
		hp.vm_pid = VM_PID;
		hp.vcpu_id = (int32_t)vcpu_id;
		hp.seq = seq;
		hp.key = PAIR_KEY;
		put(host, &hp, sizeof(hp));
	}
}

struct scen {
	const uint32_t *apic;		/* the truth: guest CPU -> vcpu_id */
	int nr_maps;			/* CPU_MAP sections written (0: an old agent) */
	const uint32_t *second_map;	/* the second one's APIC IDs, else @apic */
	struct hgcor_cpu_apic bad;	/* with bad_len: a hostile extra entry */
	size_t bad_len;			/* bytes of the extra entry (16 = whole) */
};

/* A recording as `record` writes it, in memory (*@len bytes, malloc'd). */
static uint8_t *write_scen(const struct scen *sc, size_t *len)
{
	char path[] = "/tmp/hgclock-identity-XXXXXX";
	struct hgclock_info hinfo, ginfo;
	struct hgcor_guest_vm vm;
	struct hgcor_writer w;
	struct buf host = { 0 }, guest = { 0 };
	uint32_t prefix[2] = { 0, 0 };
	uint8_t *data = NULL;
	int ret;

	if (gen_tmpfile(path))
		return NULL;
	gen_info(&hinfo, HGCLOCK_ROLE_HOST, NR_HCPUS, KHZ);
	gen_info(&ginfo, HGCLOCK_ROLE_GUEST, NR_GCPUS, KHZ);

	for (uint32_t c = 0; c < NR_HCPUS; c++)
		put_cyc2ns(&host, c, T0 - 1000 + c);
	for (uint32_t c = 0; c < NR_GCPUS; c++)
		put_vcpu(&host, sc->apic[c]);
	for (uint32_t c = 0; c < NR_GCPUS; c++) {
		put_cyc2ns(&guest, c, T0 + offset_of(sc->apic[c]));
		put_pairs(&host, &guest, c, sc->apic[c]);
	}
	memset(&vm, 0, sizeof(vm));
	vm.vm_pid = VM_PID;
	vm.how = HGCOR_VM_BY_OPTION;
	snprintf(vm.spec, sizeof(vm.spec), "g,vm=%d", VM_PID);

	ret = hgcor_create(&w, path);
	if (ret)
		goto out;
	ret = hgcor_write_section(&w, HGCOR_SEC_HOST_INFO, 0, &hinfo, sizeof(hinfo));
	ret = ret ?: hgcor_write_section(&w, HGCOR_SEC_HOST_RECORDS, 0, host.p, host.len);
	ret = ret ?: hgcor_write_section2(&w, HGCOR_SEC_GUEST_INFO, 0, prefix, sizeof(prefix),
					  &ginfo, sizeof(ginfo));
	ret = ret ?: hgcor_write_section(&w, HGCOR_SEC_GUEST_VM, HGCOR_SEC_OPTIONAL, &vm,
					 sizeof(vm));
	/* As record writes them: right after the guest's HELLO, and on hotplug. */
	for (int m = 0; m < sc->nr_maps && !ret; m++) {
		const uint32_t *ids = m && sc->second_map ? sc->second_map : sc->apic;
		struct hgcor_cpu_apic e[NR_GCPUS + 1];
		size_t bytes = NR_GCPUS * sizeof(e[0]);

		for (uint32_t c = 0; c < NR_GCPUS; c++)
			e[c] = (struct hgcor_cpu_apic){ c, ids[c],
							HGP_CPU_APIC_CPUINFO | HGP_CPU_APIC_X2APIC |
							HGP_CPU_APIC_CHECKED, 0 };
		if (sc->bad_len) {
			e[NR_GCPUS] = sc->bad;
			bytes += sc->bad_len;
		}
		ret = hgcor_write_section2(&w, HGCOR_SEC_CPU_MAP, HGCOR_SEC_OPTIONAL, prefix,
					   sizeof(prefix), e, bytes);
	}
	ret = ret ?: hgcor_write_section2(&w, HGCOR_SEC_GUEST_RECORDS, 0, prefix,
					  sizeof(prefix), guest.p, guest.len);
	ret = ret ?: hgcor_write_section2(&w, HGCOR_SEC_PROBES, HGCOR_SEC_OPTIONAL, prefix,
					  sizeof(prefix), NULL, 0);
	if (ret)
		hgcor_abort(&w);
	else
		ret = hgcor_close(&w);
	if (!ret)
		data = gen_slurp(path, len);
out:
	unlink(path);
	free(host.p);
	free(guest.p);
	return data;
}

/* Loads @sc into @s and builds the mapping: 0 or the load's error. */
static int load_scen(struct hgsync *s, const struct scen *sc)
{
	size_t len = 0;
	uint8_t *data = write_scen(sc, &len);

	return gen_load_build(s, data, len);
}

static unsigned int count_segs(const struct hgsync_guest *g, uint32_t method, int vcpu)
{
	unsigned int n = 0;

	for (size_t i = 0; i < g->nr_segs; i++)
		if (g->segs[i].method == method && g->segs[i].vcpu_id == vcpu)
			n++;
	return n;
}

/* ---- with the agent's map ---- */

FIXTURE(gaps) {
	struct hgsync s;
};

FIXTURE_SETUP(gaps)
{
	struct scen sc = { .apic = apic_gaps, .nr_maps = 1 };

	ASSERT_EQ(0, load_scen(&self->s, &sc));
}

FIXTURE_TEARDOWN(gaps)
{
	hgsync_free(&self->s);
}

TEST_F(gaps, map_loaded)
{
	const struct hgsync_guest *g = &self->s.guests[0];
	char note[512];

	/* The gaps are a fact of the VM; with a map they are no problem. */
	EXPECT_EQ(HGSYNC_ID_MAP | HGSYNC_ID_GAPS, g->id_flags);
	EXPECT_EQ(NR_GCPUS, g->nr_cpu_vcpu);
	for (int c = 0; c < NR_GCPUS; c++) {
		EXPECT_EQ((int)apic_gaps[c], hgsync_guest_vcpu_id(&self->s, 0, c));
		EXPECT_EQ(c, hgsync_vcpu_guest_cpu(&self->s, 0, (int)apic_gaps[c]));
	}
	/* vcpu_id 3 is no guest CPU, guest CPU 6 no vCPU. */
	EXPECT_EQ(-1, hgsync_vcpu_guest_cpu(&self->s, 0, 3));
	EXPECT_EQ(-1, hgsync_guest_vcpu_id(&self->s, 0, 6));
	EXPECT_EQ(6, g->id_nr_vcpus);
	EXPECT_EQ(6, g->id_max_vcpu);
	/* Nothing to say: the map agrees with every exit pairing. */
	EXPECT_EQ(0, hgsync_identity_note(&self->s, 0, note, sizeof(note)));
	EXPECT_STREQ("", note);
}

TEST_F(gaps, cpu3_is_vcpu4)
{
	const struct hgsync *s = &self->s;
	uint64_t h = T0 + SPAN / 3;
	struct hgsync_result r;
	struct hgsync_place p;

	/* Guest CPU 3's TSC reading: vcpu_id 4's offset, host CPU 4, its thread. */
	ASSERT_EQ(0, hgsync_to_host_by(s, 0, 3, HGSYNC_CLOCK_TSC, h + offset_of(4),
				       HGCOR_METHOD_KVM_EXACT, &r));
	EXPECT_EQ(h, r.host_value);
	EXPECT_EQ(4, r.host_cpu);
	ASSERT_EQ(0, hgsync_vcpu_place(s, 0, 3, h, &p));
	EXPECT_EQ(3004, p.tid);
	EXPECT_EQ(4, p.host_cpu);
	EXPECT_EQ(1, p.running);
	/* The same for every CPU after the gap, and before it unchanged. */
	for (int c = 0; c < NR_GCPUS; c++) {
		ASSERT_EQ(0, hgsync_to_host(s, 0, c, HGSYNC_CLOCK_TSC,
					    h + offset_of(apic_gaps[c]), &r));
		EXPECT_EQ(HGCOR_METHOD_KVM_EXACT, r.method);
		EXPECT_EQ(h, r.host_value);
		EXPECT_EQ((int)apic_gaps[c], r.host_cpu);
	}
}

TEST_F(gaps, segments_keyed_by_guest_cpu)
{
	const struct hgsync_guest *g = &self->s.guests[0];

	/* One KVM segment per guest CPU, numbered as the guest numbers them. */
	for (int c = 0; c < NR_GCPUS; c++)
		EXPECT_EQ(1, count_segs(g, HGCOR_METHOD_KVM_EXACT, c));
	EXPECT_EQ(0, count_segs(g, HGCOR_METHOD_KVM_EXACT, 6));
}

TEST_F(gaps, exit_pairings_join_on_every_cpu)
{
	const struct hgsync_guest *g = &self->s.guests[0];

	EXPECT_EQ(NR_GCPUS * NR_PAIRS, g->nr_xpairs);
	EXPECT_EQ(NR_GCPUS * NR_PAIRS, g->id_pairs_checked);
	EXPECT_EQ(0, g->id_pairs_other);
	/* And KVM's offsets agree with every one of them. */
	EXPECT_EQ(NR_GCPUS * NR_PAIRS, g->kvm_checked);
	EXPECT_EQ(g->kvm_checked, g->kvm_agree);
	EXPECT_LT(0, count_segs(g, HGCOR_METHOD_EXIT, 5));
}

/* ---- without it (an agent before protocol 1.2) ---- */

TEST(no_map_gaps_assumed_and_warned)
{
	struct scen sc = { .apic = apic_gaps, .nr_maps = 0 };
	struct hgsync s;
	struct hgsync_result r;
	uint64_t h = T0 + SPAN / 3;
	const struct hgsync_guest *g;
	char note[512];

	ASSERT_EQ(0, load_scen(&s, &sc));
	g = &s.guests[0];
	EXPECT_TRUE(g->id_flags & HGSYNC_ID_ASSUMED);
	EXPECT_FALSE(g->id_flags & HGSYNC_ID_MAP);
	EXPECT_TRUE(g->id_flags & HGSYNC_ID_GAPS);
	EXPECT_EQ(3, hgsync_guest_vcpu_id(&s, 0, 3));
	/* The exit pairings of CPUs 3-5 ran on vcpu_ids 4-6: the assumption is wrong. */
	EXPECT_TRUE(g->id_flags & HGSYNC_ID_PAIRS_DISAGREE);
	EXPECT_EQ(3 * NR_PAIRS, g->id_pairs_other);
	EXPECT_EQ(3 * NR_PAIRS, g->nr_xpairs);
	EXPECT_EQ(2, hgsync_identity_note(&s, 0, note, sizeof(note)));
	EXPECT_NE(NULL, strstr(note, "vCPU identity assumed: guest cpu n = vcpu_id n"));
	EXPECT_NE(NULL, strstr(note, "6 vCPUs with vcpu_ids up to 6 (gaps)"));
	EXPECT_NE(NULL, strstr(note, "180 of 360 exit pairings ran on another vcpu_id"));
	/* What it gets wrong: CPU 3 has no vCPU, CPU 4 gets vcpu_id 4's offset and host CPU. */
	EXPECT_EQ(-ENOENT, hgsync_to_host_by(&s, 0, 3, HGSYNC_CLOCK_TSC, h + offset_of(4),
					     HGCOR_METHOD_KVM_EXACT, &r));
	ASSERT_EQ(0, hgsync_to_host_by(&s, 0, 4, HGSYNC_CLOCK_TSC, h + offset_of(5),
				       HGCOR_METHOD_KVM_EXACT, &r));
	EXPECT_NE(h, r.host_value);
	EXPECT_EQ(4, r.host_cpu);
	hgsync_free(&s);
}

TEST(no_map_dense_assumed_quietly)
{
	struct scen sc = { .apic = apic_dense, .nr_maps = 0 };
	struct hgsync s;
	struct hgsync_result r;
	uint64_t h = T0 + SPAN / 3;
	const struct hgsync_guest *g;
	char note[512];

	ASSERT_EQ(0, load_scen(&s, &sc));
	g = &s.guests[0];
	EXPECT_EQ(HGSYNC_ID_ASSUMED, g->id_flags);
	EXPECT_EQ(0, g->id_pairs_other);
	EXPECT_EQ(NR_GCPUS * NR_PAIRS, g->nr_xpairs);
	/* Assumed, so said, but nothing suggests it is wrong. */
	EXPECT_EQ(1, hgsync_identity_note(&s, 0, note, sizeof(note)));
	EXPECT_NE(NULL, strstr(note, "vCPU identity assumed"));
	EXPECT_EQ(NULL, strstr(note, "gaps"));
	ASSERT_EQ(0, hgsync_to_host(&s, 0, 3, HGSYNC_CLOCK_TSC, h + offset_of(3), &r));
	EXPECT_EQ(h, r.host_value);
	EXPECT_EQ(3, r.host_cpu);
	hgsync_free(&s);
}

/* A map that contradicts the host (the wrong guest's, or a broken agent) is caught. */
TEST(wrong_map_contradicted_by_pairings)
{
	struct scen sc = { .apic = apic_gaps, .nr_maps = 2, .second_map = apic_dense };
	struct hgsync s;
	char note[512];

	ASSERT_EQ(0, load_scen(&s, &sc));
	/* Two maps that differ: the last (dense, wrong) is used and both are said. */
	EXPECT_TRUE(s.guests[0].id_flags & HGSYNC_ID_MAP);
	EXPECT_TRUE(s.guests[0].id_flags & HGSYNC_ID_CHANGED);
	EXPECT_EQ(3, hgsync_guest_vcpu_id(&s, 0, 3));
	EXPECT_TRUE(s.guests[0].id_flags & HGSYNC_ID_PAIRS_DISAGREE);
	EXPECT_EQ(2, hgsync_identity_note(&s, 0, note, sizeof(note)));
	EXPECT_NE(NULL, strstr(note, "CPU map changed"));
	hgsync_free(&s);
}

/* ---- hostile maps ---- */

TEST(load_refuses_apic_id_16384)
{
	struct scen sc = { .apic = apic_gaps, .nr_maps = 1,
			   .bad = { 6, HGCOR_MAX_VCPU_ID, 0, 0 }, .bad_len = 16 };
	struct hgsync s;

	EXPECT_EQ(HGCOR_E_RANGE, load_scen(&s, &sc));
	EXPECT_NE(NULL, strstr(hgcor_strerror(HGCOR_E_RANGE), "cpu_map section"));
}

TEST(load_refuses_guest_cpu_8192)
{
	struct scen sc = { .apic = apic_gaps, .nr_maps = 1,
			   .bad = { HGCOR_MAX_CPUS, 7, 0, 0 }, .bad_len = 16 };
	struct hgsync s;

	EXPECT_EQ(HGCOR_E_RANGE, load_scen(&s, &sc));
}

TEST(load_refuses_partial_entry)
{
	struct scen sc = { .apic = apic_gaps, .nr_maps = 1, .bad = { 6, 7, 0, 0 }, .bad_len = 8 };
	struct hgsync s;

	EXPECT_EQ(HGCOR_E_CONTENT, load_scen(&s, &sc));
}

/* ---- the protocol message and the agent's sources ---- */

TEST(cpu_map_message_checks)
{
	struct hgp_cpu_apic m[3] = { { 0, 0, 0, 0 }, { 1, 1, 0, 0 }, { 3, 6, 0, 0 } };
	struct hgp_header h = { .magic = HGP_MAGIC, .type = HGP_CPU_MAP, .length = 16 };

	EXPECT_EQ(0, hgp_cpu_map_check(m, sizeof(m), HGP_APIC_ID_LIMIT));
	EXPECT_EQ(-EPROTO, hgp_cpu_map_check(m, 0, HGP_APIC_ID_LIMIT));
	EXPECT_EQ(-EPROTO, hgp_cpu_map_check(m, sizeof(m) - 1, HGP_APIC_ID_LIMIT));
	/* Only the limit given: the host's is KVM's largest vcpu_id + 1. */
	EXPECT_EQ(-EPROTO, hgp_cpu_map_check(m, sizeof(m), 6));
	m[2].apic_id = HGP_APIC_ID_LIMIT;
	EXPECT_EQ(-EPROTO, hgp_cpu_map_check(m, sizeof(m), HGP_APIC_ID_LIMIT));
	m[2].apic_id = 6;
	m[2].cpu = HGP_CPU_MAP_MAX;
	EXPECT_EQ(-EPROTO, hgp_cpu_map_check(m, sizeof(m), HGP_APIC_ID_LIMIT));
	/* A CPU twice, or out of order. */
	m[2].cpu = 1;
	EXPECT_EQ(-EPROTO, hgp_cpu_map_check(m, sizeof(m), HGP_APIC_ID_LIMIT));
	m[2].cpu = 0;
	EXPECT_EQ(-EPROTO, hgp_cpu_map_check(m, sizeof(m), HGP_APIC_ID_LIMIT));
	m[2].cpu = 3;
	m[1].reserved = 1;
	EXPECT_EQ(-EPROTO, hgp_cpu_map_check(m, sizeof(m), HGP_APIC_ID_LIMIT));
	/* The type is one a 1.2 receiver accepts, and only since 1.2. */
	EXPECT_EQ(0, hgp_check_header(&h));
	EXPECT_LE(2, HGP_VERSION_MINOR);
}

/* ---- which machine a guest is (IDENTITY, protocol 1.3) ---- */

static void identity_good(struct hgp_identity *id)
{
	memset(id, 0, sizeof(*id));
	strcpy(id->nodename, "web1");
	strcpy(id->machine_id, "0123456789abcdef0123456789abcdef");
	strcpy(id->boot_id, "6a0c2a31-6f8e-4bb4-9c1e-2f4b1a9d0e7c");
}

TEST(identity_message_checks)
{
	struct hgp_header h = { HGP_MAGIC, HGP_IDENTITY, 0, sizeof(struct hgp_identity), 0 };
	struct hgp_identity id;

	identity_good(&id);
	EXPECT_EQ(0, hgp_identity_check(&id, sizeof(id)));
	EXPECT_EQ(-EPROTO, hgp_identity_check(&id, sizeof(id) - 1));
	EXPECT_EQ(-EPROTO, hgp_identity_check(&id, 0));
	/* Ids may be missing (unreadable), the nodename may not. */
	memset(id.machine_id, 0, sizeof(id.machine_id));
	memset(id.boot_id, 0, sizeof(id.boot_id));
	EXPECT_EQ(0, hgp_identity_check(&id, sizeof(id)));
	memset(id.nodename, 0, sizeof(id.nodename));
	EXPECT_EQ(-EPROTO, hgp_identity_check(&id, sizeof(id)));
	/* 64 characters (Linux's limit) pass, 65 do not. */
	memset(id.nodename, 'a', 64);
	EXPECT_EQ(0, hgp_identity_check(&id, sizeof(id)));
	id.nodename[64] = 'a';
	EXPECT_EQ(-EPROTO, hgp_identity_check(&id, sizeof(id)));
	/* Spaces, quotes, control bytes; bytes after the NUL; no NUL at all. */
	identity_good(&id);
	id.nodename[1] = ' ';
	EXPECT_EQ(-EPROTO, hgp_identity_check(&id, sizeof(id)));
	id.nodename[1] = '"';
	EXPECT_EQ(-EPROTO, hgp_identity_check(&id, sizeof(id)));
	id.nodename[1] = '\n';
	EXPECT_EQ(-EPROTO, hgp_identity_check(&id, sizeof(id)));
	identity_good(&id);
	id.nodename[70] = 'x';
	EXPECT_EQ(-EPROTO, hgp_identity_check(&id, sizeof(id)));
	identity_good(&id);
	memset(id.boot_id, 'a', sizeof(id.boot_id));
	EXPECT_EQ(-EPROTO, hgp_identity_check(&id, sizeof(id)));
	/* Ids of the wrong form: upper case, short, a UUID without dashes. */
	identity_good(&id);
	id.machine_id[0] = 'A';
	EXPECT_EQ(-EPROTO, hgp_identity_check(&id, sizeof(id)));
	identity_good(&id);
	id.machine_id[31] = '\0';
	EXPECT_EQ(-EPROTO, hgp_identity_check(&id, sizeof(id)));
	identity_good(&id);
	id.boot_id[8] = '0';
	EXPECT_EQ(-EPROTO, hgp_identity_check(&id, sizeof(id)));
	/* A 1.3 receiver takes the type; a 1.3 agent sends it to 1.3 hosts only. */
	EXPECT_EQ(0, hgp_check_header(&h));
	EXPECT_LE(3, HGP_VERSION_MINOR);
	EXPECT_EQ(152, sizeof(struct hgp_identity));
	EXPECT_EQ(sizeof(struct hgp_identity), sizeof(struct hgcor_identity));
}

TEST(identity_fill)
{
	struct hgp_identity id;
	char long_name[80];

	/* As the files read: trailing newlines dropped. */
	hgp_identity_fill(&id, "web1", "0123456789abcdef0123456789abcdef\n",
			  "6a0c2a31-6f8e-4bb4-9c1e-2f4b1a9d0e7c\n");
	EXPECT_STREQ("web1", id.nodename);
	EXPECT_STREQ("0123456789abcdef0123456789abcdef", id.machine_id);
	EXPECT_STREQ("6a0c2a31-6f8e-4bb4-9c1e-2f4b1a9d0e7c", id.boot_id);
	EXPECT_EQ(0, hgp_identity_check(&id, sizeof(id)));
	/* Unreadable or malformed: empty ids, "(none)" for the name; still valid. */
	memset(long_name, 'a', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	hgp_identity_fill(&id, long_name, "uninitialized\n", "not-a-uuid");
	EXPECT_STREQ("(none)", id.nodename);
	EXPECT_STREQ("", id.machine_id);
	EXPECT_STREQ("", id.boot_id);
	EXPECT_EQ(0, hgp_identity_check(&id, sizeof(id)));
	hgp_identity_fill(&id, NULL, NULL, NULL);
	EXPECT_STREQ("(none)", id.nodename);
	EXPECT_EQ(0, hgp_identity_check(&id, sizeof(id)));
	hgp_identity_fill(&id, "a b", NULL, NULL);
	EXPECT_STREQ("(none)", id.nodename);
}

/* The file's reader: the section's size, then its strings (HGCOR_E_RANGE). */
TEST(identity_section_checks)
{
	uint8_t p[8 + sizeof(struct hgcor_identity)] = { 0 };
	struct hgp_identity id;

	identity_good(&id);
	memcpy(p + 8, &id, sizeof(id));
	EXPECT_EQ(HGCOR_OK, hgcor_check_values(HGCOR_SEC_GUEST_IDENTITY, p, sizeof(p), 64));
	p[8 + 2] = ' ';
	EXPECT_EQ(HGCOR_E_RANGE, hgcor_check_values(HGCOR_SEC_GUEST_IDENTITY, p, sizeof(p), 64));
	EXPECT_NE(NULL, strstr(hgcor_strerror(HGCOR_E_RANGE), "nodename"));
	p[8 + 2] = 'b';
	memset(p + 8 + 72, 'a', 40);	/* machine id without its NUL */
	EXPECT_EQ(HGCOR_E_RANGE, hgcor_check_values(HGCOR_SEC_GUEST_IDENTITY, p, sizeof(p), 64));
	EXPECT_NE(NULL, strstr(hgcor_strerror(HGCOR_E_RANGE), "machine id"));
}

TEST(cpuinfo_apic_ids)
{
	static const char text[] =
		"processor\t: 0\nvendor_id\t: GenuineIntel\napicid\t\t: 0\n"
		"initial apicid\t: 99\n\n"
		"processor\t: 1\napicid\t\t: 2\ninitial apicid\t: 2\n\n"
		"processor\t: 3\nflags\t\t: fpu apicid\napicid\t\t: 6\n\n"
		"processor\t: 4\ncore id\t\t: 1\n\n"
		"processor\t: 5\napicid\t\t: 12x\n\n"
		"processor\t: 70000\napicid\t\t: 8\n";
	int64_t id[8];

	EXPECT_EQ(3, hgp_cpuinfo_apic_ids(text, sizeof(text) - 1, id, 8));
	EXPECT_EQ(0, id[0]);		/* not "initial apicid" */
	EXPECT_EQ(2, id[1]);
	EXPECT_EQ(-1, id[2]);		/* offline: no block */
	EXPECT_EQ(6, id[3]);
	EXPECT_EQ(-1, id[4]);		/* no apicid line */
	EXPECT_EQ(-1, id[5]);		/* not a number */
	EXPECT_EQ(-1, id[7]);
	/* Cut anywhere: never past the text, never more than it says. */
	for (size_t n = 0; n < sizeof(text) - 1; n++)
		EXPECT_GE(3, hgp_cpuinfo_apic_ids(text, n, id, 8));
}

TEST_HARNESS_MAIN
