// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of the correlation file: a round trip, and a reader that
 * rejects every truncation, every flipped bit, newer versions and unknown
 * required sections with the right error, never crashing.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/hgclock.h>

#include "kselftest_harness.h"
#include "corr.h"
#include "corr_check.h"
#include "gen.h"

#ifndef HGCLOCK_NO_ZSTD
#include <zstd.h>
#endif

/* A file like `hgclock record` writes: info, a note, two record batches. */
static size_t make_file(const char *path, uint8_t **out)
{
	struct hgclock_rec_cyc2ns snap;
	struct hgclock_rec_vcpu_migrate mig;
	struct hgclock_info info;
	struct hgcor_writer w;
	uint8_t batch[sizeof(snap) + sizeof(mig)];
	size_t len = 0;

	memset(&info, 0, sizeof(info));
	info.size = sizeof(info);
	info.abi_major = HGCLOCK_ABI_MAJOR;
	info.nr_cpu_ids = 2;
	info.tsc_khz = 2100000;
	gen_rec(&snap, sizeof(snap), HGCLOCK_REC_CYC2NS, 0, 123456789, 0);
	snap.conv.mult = 1024560854;
	snap.conv.shift = 31;
	gen_rec(&mig, sizeof(mig), HGCLOCK_REC_VCPU_MIGRATE, 0, 0, 0);
	mig.tid = 42;
	mig.to_cpu = 1;
	memcpy(batch, &snap, sizeof(snap));
	memcpy(batch + sizeof(snap), &mig, sizeof(mig));

	if (hgcor_create(&w, path))
		return 0;
	if (hgcor_write_section(&w, HGCOR_SEC_HOST_INFO, 0, &info, sizeof(info)) ||
	    hgcor_write_section(&w, HGCOR_SEC_NOTE, 0, "note!", 5) ||
	    hgcor_write_section(&w, HGCOR_SEC_HOST_RECORDS, 0, batch, sizeof(batch)) ||
	    hgcor_write_section(&w, HGCOR_SEC_HOST_RECORDS, 0, &mig, sizeof(mig)) ||
	    hgcor_close(&w))
		return 0;
	*out = gen_slurp(path, &len);
	return *out ? len : 0;
}

static int count_rec(const void *rec, size_t size, void *ctx)
{
	(*(int *)ctx)++;
	return 0;
}

/* Reads the whole file: 0 when complete, else the error. */
static int read_all(const uint8_t *buf, size_t len, int *sections, int *records)
{
	struct hgcor_reader r;
	struct hgcor_view v;
	int ret;

	*sections = *records = 0;
	ret = hgcor_open(&r, buf, len);
	if (ret)
		return ret;
	while ((ret = hgcor_next(&r, &v)) > 0) {
		(*sections)++;
		if (v.type == HGCOR_SEC_HOST_RECORDS)
			hgcor_walk_records(v.payload, v.length, count_rec, records);
	}
	return ret;
}

FIXTURE(file) {
	char path[64];
	uint8_t *buf;
	size_t len;
};

FIXTURE_SETUP(file)
{
	snprintf(self->path, sizeof(self->path), "/tmp/hgcor-test-%d", getpid());
	self->len = make_file(self->path, &self->buf);
	ASSERT_LT(64, self->len);
}

FIXTURE_TEARDOWN(file)
{
	unlink(self->path);
	free(self->buf);
}

TEST_F(file, round_trip)
{
	int sections, records;

	const char *seed = getenv("HGCOR_SEED");

	EXPECT_EQ(0, read_all(self->buf, self->len, &sections, &records));
	EXPECT_EQ(5, sections);	/* info, note, 2 batches, end */
	/* tools/fuzz.sh takes this valid file as its fuzzing seed. */
	if (seed) {
		FILE *f = fopen(seed, "wb");

		ASSERT_NE(NULL, f);
		ASSERT_EQ(1, fwrite(self->buf, self->len, 1, f));
		fclose(f);
	}
	EXPECT_EQ(3, records);
	EXPECT_EQ(0, self->len % 8);
}

TEST_F(file, every_truncation_rejected)
{
	int sections, records;
	size_t cut;

	for (cut = 0; cut < self->len; cut++) {
		int ret = read_all(self->buf, cut, &sections, &records);

		ASSERT_NE(0, ret);
		ASSERT_TRUE(ret == HGCOR_E_SHORT || ret == HGCOR_E_TRUNCATED ||
			    ret == HGCOR_E_NO_END || ret == HGCOR_E_HEADER);
	}
}

TEST_F(file, every_bit_flip_rejected)
{
	int sections, records;
	size_t i;
	int bit;

	for (i = 0; i < self->len; i++) {
		for (bit = 0; bit < 8; bit++) {
			self->buf[i] ^= 1u << bit;
			ASSERT_NE(0, read_all(self->buf, self->len, &sections, &records))
				TH_LOG("flip of bit %d at byte %zu not detected", bit, i);
			self->buf[i] ^= 1u << bit;
		}
	}
}

static void rehash_header(uint8_t *buf)
{
	struct hgcor_file_header h;

	memcpy(&h, buf, sizeof(h));
	h.header_crc = 0;
	h.header_crc = hgcor_crc32(0, &h, sizeof(h));
	memcpy(buf, &h, sizeof(h));
}

TEST_F(file, newer_major_version_rejected)
{
	int sections, records;
	uint16_t major = HGCOR_VERSION_MAJOR + 1, minor = 7;

	memcpy(self->buf + 10, &minor, 2);
	rehash_header(self->buf);
	EXPECT_EQ(0, read_all(self->buf, self->len, &sections, &records));
	memcpy(self->buf + 8, &major, 2);
	rehash_header(self->buf);
	EXPECT_EQ(HGCOR_E_VERSION, read_all(self->buf, self->len, &sections, &records));
	EXPECT_NE(NULL, strstr(hgcor_strerror(HGCOR_E_VERSION), "newer"));
}

TEST(unknown_sections)
{
	struct hgcor_writer w;
	char path[64];
	uint8_t buf[4096];
	int sections, records;
	size_t len;
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/hgcor-unknown-%d", getpid());
	ASSERT_EQ(0, hgcor_create(&w, path));
	ASSERT_EQ(0, hgcor_write_section(&w, 99, HGCOR_SEC_OPTIONAL, "abc", 3));
	ASSERT_EQ(0, hgcor_close(&w));
	f = fopen(path, "rb");
	len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	EXPECT_EQ(0, read_all(buf, len, &sections, &records));
	EXPECT_EQ(2, sections);

	ASSERT_EQ(0, hgcor_create(&w, path));
	ASSERT_EQ(0, hgcor_write_section(&w, 99, 0, "abc", 3));
	ASSERT_EQ(0, hgcor_close(&w));
	f = fopen(path, "rb");
	len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	EXPECT_EQ(HGCOR_E_UNKNOWN, read_all(buf, len, &sections, &records));
	unlink(path);
}

TEST(malformed_records_rejected)
{
	struct hgclock_rec_header h = { .type = HGCLOCK_REC_TEST, .size = 12 };

	EXPECT_EQ(HGCOR_E_CONTENT, hgcor_walk_records((void *)&h, sizeof(h), NULL, NULL));
	h.size = 48;	/* longer than what is there */
	EXPECT_EQ(HGCOR_E_CONTENT, hgcor_walk_records((void *)&h, sizeof(h), NULL, NULL));
	h.size = 24;
	EXPECT_EQ(HGCOR_OK, hgcor_walk_records((void *)&h, sizeof(h), NULL, NULL));
	EXPECT_EQ(HGCOR_E_CONTENT, hgcor_walk_records((void *)&h, 10, NULL, NULL));
}

/* ---- hostile values: well-formed sections whose values no recording holds ---- */

/* Writes a file of info, one section (@type, @payload) and END; reads it back. */
static int read_one_section(uint32_t type, const void *payload, size_t len)
{
	struct hgclock_info info;
	struct hgcor_writer w;
	char path[64];
	uint8_t *buf;
	int sections, records, ret;
	size_t flen = 0;

	memset(&info, 0, sizeof(info));
	info.size = sizeof(info);
	snprintf(path, sizeof(path), "/tmp/hgcor-hostile-%d", getpid());
	if (hgcor_create(&w, path) ||
	    hgcor_write_section(&w, HGCOR_SEC_HOST_INFO, 0, &info, sizeof(info)) ||
	    hgcor_write_section(&w, type, 0, payload, len) || hgcor_close(&w))
		return 1;
	buf = gen_slurp(path, &flen);
	unlink(path);
	ret = buf ? read_all(buf, flen, &sections, &records) : 1;
	free(buf);
	return ret;
}

static struct hgclock_rec_cyc2ns good_cyc2ns(void)
{
	struct hgclock_rec_cyc2ns snap;

	gen_rec(&snap, sizeof(snap), HGCLOCK_REC_CYC2NS, 0, 123456789, 0);
	snap.conv.mult = 1024560854;
	snap.conv.shift = 31;
	snap.conv.flags = HGCLOCK_CONV_VALID | HGCLOCK_CONV_EXACT;
	return snap;
}

TEST(hostile_conversion_shift)
{
	static const uint32_t bad_shifts[] = { 33, 100, 255, 0x80000000u, UINT32_MAX };
	static const int32_t bad_pre[] = { -33, -100, 33, 100, 255, INT32_MIN, INT32_MAX };
	struct hgclock_rec_cyc2ns snap = good_cyc2ns();

	ASSERT_EQ(0, read_one_section(HGCOR_SEC_HOST_RECORDS, &snap, sizeof(snap)));
	snap.conv.shift = 32;
	snap.conv.pre_shift = -32;
	EXPECT_EQ(0, read_one_section(HGCOR_SEC_HOST_RECORDS, &snap, sizeof(snap)));
	for (size_t i = 0; i < sizeof(bad_shifts) / sizeof(bad_shifts[0]); i++) {
		snap = good_cyc2ns();
		snap.conv.shift = bad_shifts[i];
		EXPECT_EQ(HGCOR_E_RANGE, read_one_section(HGCOR_SEC_HOST_RECORDS, &snap,
							  sizeof(snap)))
			TH_LOG("shift %u accepted", bad_shifts[i]);
	}
	for (size_t i = 0; i < sizeof(bad_pre) / sizeof(bad_pre[0]); i++) {
		snap = good_cyc2ns();
		snap.conv.pre_shift = bad_pre[i];
		EXPECT_EQ(HGCOR_E_RANGE, read_one_section(HGCOR_SEC_HOST_RECORDS, &snap,
							  sizeof(snap)))
			TH_LOG("pre_shift %d accepted", bad_pre[i]);
	}
	/* The reason names the section and the value. */
	EXPECT_NE(NULL, strstr(hgcor_strerror(HGCOR_E_RANGE), "host_records"));
	EXPECT_NE(NULL, strstr(hgcor_strerror(HGCOR_E_RANGE), "pre_shift"));
}

TEST(hostile_conversion_mult_zero)
{
	struct hgclock_rec_cyc2ns snap = good_cyc2ns();
	uint8_t guest[8 + sizeof(snap)] = { 0 };

	snap.conv.mult = 0;
	EXPECT_EQ(HGCOR_E_RANGE, read_one_section(HGCOR_SEC_HOST_RECORDS, &snap, sizeof(snap)));
	/* The guest's conversions too. */
	memcpy(guest + 8, &snap, sizeof(snap));
	EXPECT_EQ(HGCOR_E_RANGE, read_one_section(HGCOR_SEC_GUEST_RECORDS, guest, sizeof(guest)));
	/* An invalid conversion (no VALID flag) is never applied: allowed. */
	snap.conv.flags = 0;
	EXPECT_EQ(0, read_one_section(HGCOR_SEC_HOST_RECORDS, &snap, sizeof(snap)));
}

TEST(hostile_pvclock_and_scaling)
{
	struct hgclock_rec_pvclock pv;
	struct hgclock_rec_tsc_offset off;

	gen_rec(&pv, sizeof(pv), HGCLOCK_REC_PVCLOCK, 0, 0, 0);
	pv.vm_pid = 1234;
	pv.tsc_to_system_mul = 3435973837u;
	pv.tsc_shift = -1;
	EXPECT_EQ(0, read_one_section(HGCOR_SEC_HOST_RECORDS, &pv, sizeof(pv)));
	pv.tsc_shift = -100;
	EXPECT_EQ(HGCOR_E_RANGE, read_one_section(HGCOR_SEC_HOST_RECORDS, &pv, sizeof(pv)));
	pv.tsc_shift = 100;
	EXPECT_EQ(HGCOR_E_RANGE, read_one_section(HGCOR_SEC_HOST_RECORDS, &pv, sizeof(pv)));
	pv.tsc_shift = 0;
	pv.tsc_to_system_mul = 0;
	EXPECT_EQ(HGCOR_E_RANGE, read_one_section(HGCOR_SEC_HOST_RECORDS, &pv, sizeof(pv)));

	gen_rec(&off, sizeof(off), HGCLOCK_REC_TSC_OFFSET, 0, 0, 0);
	off.vm_pid = 1234;
	off.flags = HGCLOCK_VCPU_KVM | HGCLOCK_VCPU_TSC_KNOWN;
	off.tsc_scaling_ratio = 1ull << 48;
	off.tsc_frac_bits = 48;
	EXPECT_EQ(0, read_one_section(HGCOR_SEC_HOST_RECORDS, &off, sizeof(off)));
	off.tsc_frac_bits = 255;
	EXPECT_EQ(HGCOR_E_RANGE, read_one_section(HGCOR_SEC_HOST_RECORDS, &off, sizeof(off)));
	off.tsc_frac_bits = 32;
	off.tsc_scaling_ratio = 0;
	EXPECT_EQ(HGCOR_E_RANGE, read_one_section(HGCOR_SEC_HOST_RECORDS, &off, sizeof(off)));
	off.tsc_scaling_ratio = 1ull << 32;
	off.vcpu_id = HGCOR_MAX_VCPU_ID;
	EXPECT_EQ(HGCOR_E_RANGE, read_one_section(HGCOR_SEC_HOST_RECORDS, &off, sizeof(off)));
	off.vcpu_id = -1;
	EXPECT_EQ(HGCOR_E_RANGE, read_one_section(HGCOR_SEC_HOST_RECORDS, &off, sizeof(off)));
}

TEST(hostile_cpu_number)
{
	struct hgclock_rec_cyc2ns snap = good_cyc2ns();

	snap.hdr.cpu = HGCOR_MAX_CPUS - 1;
	EXPECT_EQ(0, read_one_section(HGCOR_SEC_HOST_RECORDS, &snap, sizeof(snap)));
	snap.hdr.cpu = 65536;
	EXPECT_EQ(HGCOR_E_RANGE, read_one_section(HGCOR_SEC_HOST_RECORDS, &snap, sizeof(snap)));
	EXPECT_NE(NULL, strstr(hgcor_strerror(HGCOR_E_RANGE), "CPU 65536"));
	snap.hdr.cpu = UINT32_MAX;
	EXPECT_EQ(HGCOR_E_RANGE, read_one_section(HGCOR_SEC_HOST_RECORDS, &snap, sizeof(snap)));
}

TEST(hostile_probe_reply_before_send)
{
	struct {
		uint32_t guest_id, zero;
		struct hgcor_probe p[2];
	} sec;

	memset(&sec, 0, sizeof(sec));
	for (int i = 0; i < 2; i++) {
		sec.p[i].host_tsc_send = 1000000 + i * 1000;
		sec.p[i].host_tsc_recv = sec.p[i].host_tsc_send + 500;
		sec.p[i].host_ns_send = 400000 + i * 400;
		sec.p[i].host_ns_recv = sec.p[i].host_ns_send + 200;
	}
	EXPECT_EQ(0, read_one_section(HGCOR_SEC_PROBES, &sec, sizeof(sec)));
	sec.p[1].host_tsc_recv = sec.p[1].host_tsc_send - 1;
	EXPECT_EQ(HGCOR_E_RANGE, read_one_section(HGCOR_SEC_PROBES, &sec, sizeof(sec)));
	EXPECT_NE(NULL, strstr(hgcor_strerror(HGCOR_E_RANGE), "probes section"));
	sec.p[1].host_tsc_recv = sec.p[1].host_tsc_send;
	sec.p[1].host_ns_recv = 0;
	EXPECT_EQ(HGCOR_E_RANGE, read_one_section(HGCOR_SEC_PROBES, &sec, sizeof(sec)));
	sec.p[1].host_ns_recv = sec.p[1].host_ns_send;
	sec.p[1].guest_cpu = 65535;
	EXPECT_EQ(HGCOR_E_RANGE, read_one_section(HGCOR_SEC_PROBES, &sec, sizeof(sec)));
}

TEST(hostile_segments_and_guest_vm)
{
	struct hgcor_segment seg;
	struct hgcor_guest_vm vm;

	memset(&seg, 0, sizeof(seg));
	seg.method = HGCOR_METHOD_PROBE;
	seg.clock = HGCOR_CLOCK_SCHED;
	seg.host_tsc_end = UINT64_MAX;
	seg.guest_end = UINT64_MAX;
	seg.bound_ns = 5000;
	seg.rate_q48 = -1000000;
	EXPECT_EQ(0, read_one_section(HGCOR_SEC_SEGMENTS, &seg, sizeof(seg)));
	seg.rate_q48 = INT64_MIN;
	EXPECT_EQ(HGCOR_E_RANGE, read_one_section(HGCOR_SEC_SEGMENTS, &seg, sizeof(seg)));
	seg.rate_q48 = 0;
	seg.guest_start = 10;
	seg.guest_end = 5;
	EXPECT_EQ(HGCOR_E_RANGE, read_one_section(HGCOR_SEC_SEGMENTS, &seg, sizeof(seg)));
	seg.guest_start = 0;
	seg.method = HGCOR_METHOD_KVM_EXACT;	/* on the sched clock: never written */
	EXPECT_EQ(HGCOR_E_RANGE, read_one_section(HGCOR_SEC_SEGMENTS, &seg, sizeof(seg)));
	seg.clock = HGCOR_CLOCK_TSC;
	seg.bound_ns = 0;
	seg.tsc_frac_bits = 100;
	seg.tsc_ratio = 1;
	EXPECT_EQ(HGCOR_E_RANGE, read_one_section(HGCOR_SEC_SEGMENTS, &seg, sizeof(seg)));
	seg.tsc_frac_bits = 0;
	seg.tsc_ratio = 0;
	EXPECT_EQ(0, read_one_section(HGCOR_SEC_SEGMENTS, &seg, sizeof(seg)));

	memset(&vm, 0, sizeof(vm));
	vm.vm_pid = -1;
	EXPECT_EQ(0, read_one_section(HGCOR_SEC_GUEST_VM, &vm, sizeof(vm)));
	memset(vm.spec, 'x', sizeof(vm.spec));	/* printed with %s */
	EXPECT_EQ(HGCOR_E_RANGE, read_one_section(HGCOR_SEC_GUEST_VM, &vm, sizeof(vm)));
}

/* ---- compressed sections (format 1.4) ---- */

#ifndef HGCLOCK_NO_ZSTD

/*
 * A batch of @n vCPU run/stop records on two CPUs, as an idle guest
 * makes them (the bulk of a recording): timestamps rising by a few us.
 */
static void vcpu_batch(struct buf *b, int n, uint64_t tsc)
{
	for (int i = 0; i < n; i++) {
		struct hgclock_rec_vcpu r;

		tsc += rnd_range(2000, 40000);
		gen_rec(&r, sizeof(r), i % 2 ? HGCLOCK_REC_VCPU_STOP : HGCLOCK_REC_VCPU_RUN,
			(uint32_t)(i / 2 % 2), tsc, tsc / 2);
		r.tid = 4000 + i / 2 % 2;
		r.vm_pid = 3999;
		r.vcpu_id = i / 2 % 2;
		put(b, &r, sizeof(r));
	}
}

/*
 * Writes info, a note, three record batches, a probes section and END,
 * compressed as @compress says; the file's bytes in *@out.
 */
static size_t make_file_compressed(const char *path, int compress, uint8_t **out)
{
	struct buf b1 = { 0 }, b2 = { 0 }, tiny = { 0 };
	struct hgclock_info info;
	struct hgcor_writer w;
	struct {
		uint32_t guest_id, zero;
		struct hgcor_probe p[16];
	} probes;
	size_t len = 0;
	int ret;

	rng_seed(7);
	gen_info(&info, HGCLOCK_ROLE_HOST, 2, 2100000);
	vcpu_batch(&b1, 60, 1000000);
	vcpu_batch(&b2, 200, 90000000);
	vcpu_batch(&tiny, 1, 200000000);	/* 48 bytes: below the writer's minimum */
	memset(&probes, 0, sizeof(probes));
	for (int i = 0; i < 16; i++) {
		probes.p[i].host_tsc_send = 1000000 + i * 100000;
		probes.p[i].host_tsc_recv = probes.p[i].host_tsc_send + 900;
		probes.p[i].host_ns_send = 500000 + i * 50000;
		probes.p[i].host_ns_recv = probes.p[i].host_ns_send + 450;
	}
	ret = hgcor_create(&w, path);
	ret = ret ?: hgcor_set_compression(&w, compress);
	ret = ret ?: hgcor_write_section(&w, HGCOR_SEC_HOST_INFO, 0, &info, sizeof(info));
	ret = ret ?: hgcor_write_section(&w, HGCOR_SEC_NOTE, 0, "note!", 5);
	ret = ret ?: hgcor_write_section(&w, HGCOR_SEC_HOST_RECORDS, 0, b1.p, b1.len);
	ret = ret ?: hgcor_write_section(&w, HGCOR_SEC_HOST_RECORDS, 0, b2.p, b2.len);
	ret = ret ?: hgcor_write_section(&w, HGCOR_SEC_HOST_RECORDS, 0, tiny.p, tiny.len);
	ret = ret ?: hgcor_write_section(&w, HGCOR_SEC_PROBES, HGCOR_SEC_OPTIONAL, &probes,
					 sizeof(probes));
	ret = ret ?: hgcor_close(&w);
	free(b1.p);
	free(b2.p);
	free(tiny.p);
	if (ret)
		return 0;
	*out = gen_slurp(path, &len);
	return *out ? len : 0;
}

/* What a reader saw of a file: per section its type, encoding and payload's CRC. */
struct seen {
	int n;
	uint32_t type[16], flags[16], encoding[16], crc[16];
	uint64_t offset[16], length[16], stored[16];
	int records;
};

static int read_seen(const uint8_t *buf, size_t len, struct seen *sn)
{
	struct hgcor_reader r;
	struct hgcor_view v;
	int ret;

	memset(sn, 0, sizeof(*sn));
	ret = hgcor_open(&r, buf, len);
	if (ret)
		return ret;
	while ((ret = hgcor_next(&r, &v)) > 0) {
		if (sn->n < 16) {
			sn->type[sn->n] = v.type;
			sn->flags[sn->n] = v.flags;
			sn->encoding[sn->n] = v.encoding;
			sn->crc[sn->n] = hgcor_crc32(0, v.payload, v.length);
			sn->offset[sn->n] = v.offset;
			sn->length[sn->n] = v.length;
			sn->stored[sn->n] = v.stored_length;
		}
		sn->n++;
		if (v.type == HGCOR_SEC_HOST_RECORDS)
			hgcor_walk_records(v.payload, v.length, count_rec, &sn->records);
	}
	hgcor_release(&r);
	return ret;
}

FIXTURE(zfile) {
	char path[64];
	uint8_t *plain, *z;
	size_t plain_len, z_len;
};

FIXTURE_SETUP(zfile)
{
	snprintf(self->path, sizeof(self->path), "/tmp/hgcor-ztest-%d", getpid());
	self->plain_len = make_file_compressed(self->path, HGCOR_COMPRESS_NONE, &self->plain);
	self->z_len = make_file_compressed(self->path, HGCOR_COMPRESS_ZSTD, &self->z);
	ASSERT_LT(64, self->plain_len);
	ASSERT_LT(64, self->z_len);
}

FIXTURE_TEARDOWN(zfile)
{
	unlink(self->path);
	free(self->plain);
	free(self->z);
}

/* The section of @sn at index @i, as written: its stored header. */
static struct hgcor_section stored_header(const uint8_t *buf, const struct seen *sn, int i)
{
	struct hgcor_section s;

	memcpy(&s, buf + sn->offset[i], sizeof(s));
	return s;
}

TEST_F(zfile, round_trip_zstd)
{
	const char *seed = getenv("HGCOR_SEED");
	struct seen a, b;
	int compressed = 0;

	ASSERT_EQ(0, read_seen(self->plain, self->plain_len, &a));
	ASSERT_EQ(0, read_seen(self->z, self->z_len, &b));
	/* make fuzz takes this file as a seed of compressed sections. */
	if (seed) {
		FILE *f = fopen(seed, "wb");

		ASSERT_NE(NULL, f);
		ASSERT_EQ(1, fwrite(self->z, self->z_len, 1, f));
		fclose(f);
	}
	/* The same sections, records and payload bytes, read back. */
	ASSERT_EQ(7, a.n);
	ASSERT_EQ(a.n, b.n);
	EXPECT_EQ(261, b.records);
	EXPECT_EQ(a.records, b.records);
	for (int i = 0; i < a.n; i++) {
		struct hgcor_section s = stored_header(self->z, &b, i);

		EXPECT_EQ(a.type[i], b.type[i]);
		EXPECT_EQ(a.flags[i], b.flags[i]);
		EXPECT_EQ(a.length[i], b.length[i]);
		EXPECT_EQ(a.crc[i], b.crc[i]) TH_LOG("section %d's payload differs", i);
		EXPECT_EQ(HGCOR_ENC_NONE, a.encoding[i]);
		if (b.encoding[i] != HGCOR_ENC_ZSTD) {
			EXPECT_EQ(b.type[i], s.type);
			EXPECT_EQ(b.length[i], b.stored[i]);
			continue;
		}
		compressed++;
		/*
		 * On disk: type ZSTD with flags 0, which a reader of 1.3 refuses
		 * (type above its 11, not optional) instead of misreading.
		 */
		EXPECT_EQ(HGCOR_SEC_ZSTD, s.type);
		EXPECT_EQ(0, s.flags);
		EXPECT_EQ(s.length, b.stored[i]);
		EXPECT_LT(b.stored[i] * 2, b.length[i]) TH_LOG("section %d: %llu stored for %llu",
			i, (unsigned long long)b.stored[i], (unsigned long long)b.length[i]);
	}
	/* The two big batches and the probes; not info, note, the tiny batch, END. */
	EXPECT_EQ(3, compressed);
	EXPECT_EQ(HGCOR_ENC_NONE, b.encoding[4]);
	EXPECT_EQ(HGCOR_SEC_OPTIONAL, b.flags[5]);	/* the inner PROBES' flags */
	EXPECT_LT(self->z_len * 2, self->plain_len);
	EXPECT_EQ(0, self->z_len % 8);
	/* The file says 1.4 or later (1.5: DISRUPTION): what an older reader needs. */
	EXPECT_EQ(HGCOR_VERSION_MINOR, self->z[10]);
	EXPECT_LE(4, self->z[10]);
}

TEST_F(zfile, zstd_every_truncation_rejected)
{
	struct seen sn;

	for (size_t cut = 0; cut < self->z_len; cut++) {
		int ret = read_seen(self->z, cut, &sn);

		ASSERT_TRUE(ret == HGCOR_E_SHORT || ret == HGCOR_E_TRUNCATED ||
			    ret == HGCOR_E_NO_END || ret == HGCOR_E_HEADER)
			TH_LOG("cut at %zu: %d", cut, ret);
	}
}

TEST_F(zfile, zstd_every_bit_flip_rejected)
{
	struct seen sn, good;

	ASSERT_EQ(0, read_seen(self->z, self->z_len, &good));
	for (size_t i = 0; i < self->z_len; i++) {
		for (int bit = 0; bit < 8; bit++) {
			self->z[i] ^= 1u << bit;
			ASSERT_NE(0, read_seen(self->z, self->z_len, &sn))
				TH_LOG("flip of bit %d at byte %zu not detected", bit, i);
			self->z[i] ^= 1u << bit;
		}
	}
	/* In a compressed payload (header and frame): the CRC, before decompression. */
	for (int i = 0; i < good.n; i++) {
		if (good.encoding[i] != HGCOR_ENC_ZSTD)
			continue;
		for (uint64_t off = 0; off < good.stored[i]; off++) {
			size_t at = good.offset[i] + sizeof(struct hgcor_section) + off;

			for (int bit = 0; bit < 8; bit++) {
				int ret;

				self->z[at] ^= 1u << bit;
				ret = read_seen(self->z, self->z_len, &sn);

				self->z[at] ^= 1u << bit;
				ASSERT_EQ(HGCOR_E_PAYLOAD_CRC, ret)
					TH_LOG("bit %d at byte %zu: %d", bit, at, ret);
			}
		}
	}
}

TEST_F(zfile, zstd_older_minor_and_plain_files_read)
{
	struct seen sn;
	uint16_t minor = 3;

	/* A file written without compression by 1.4 reads as 1.3's did. */
	ASSERT_EQ(0, read_seen(self->plain, self->plain_len, &sn));
	EXPECT_EQ(7, sn.n);
	/* A 1.3 (and 1.0) header: still read. */
	memcpy(self->plain + 10, &minor, 2);
	rehash_header(self->plain);
	EXPECT_EQ(0, read_seen(self->plain, self->plain_len, &sn));
	minor = 0;
	memcpy(self->plain + 10, &minor, 2);
	rehash_header(self->plain);
	EXPECT_EQ(0, read_seen(self->plain, self->plain_len, &sn));
	EXPECT_EQ(261, sn.records);
}

/* The path of the real recording unpacked next to this test (the Makefile's MERGE_DATA). */
static int real_capture(char *path, size_t size)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	if (n <= 0)
		return -1;
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	snprintf(path, size, "%s/data/merge.hgc", exe);
	return access(path, R_OK);
}

/*
 * The real recording of selftests/data (format 1.1, written by record
 * before 1.4) reads as it is; written again section by section with
 * compression, it reads back to the same sections, records and payloads,
 * smaller.
 */
TEST(zstd_real_capture_round_trip)
{
	struct hgcor_reader ra, rb;
	struct hgcor_view va, vb;
	struct hgcor_writer w;
	char src[PATH_MAX + 32], dst[64];
	uint8_t *a, *b;
	size_t alen = 0, blen = 0;
	uint64_t n = 0, nz = 0;
	int ret, rb_ret;

	if (real_capture(src, sizeof(src)))
		SKIP(return, "no data/merge.hgc next to the test (make unit unpacks it)");
	a = gen_slurp(src, &alen);
	ASSERT_NE(NULL, a);
	ASSERT_EQ(0, hgcor_open(&ra, a, alen));
	EXPECT_EQ(1, ra.hdr.version_minor);
	snprintf(dst, sizeof(dst), "/tmp/hgcor-zreal-%d", getpid());
	ASSERT_EQ(0, hgcor_create(&w, dst));
	ASSERT_EQ(0, hgcor_set_compression(&w, HGCOR_COMPRESS_ZSTD));
	while ((ret = hgcor_next(&ra, &va)) > 0) {
		if (va.type == HGCOR_SEC_END)
			continue;
		ASSERT_EQ(0, hgcor_write_section(&w, va.type, va.flags, va.payload, va.length));
	}
	ASSERT_EQ(0, ret);
	ASSERT_EQ(0, hgcor_close(&w));
	/* The writer's count: the payloads given, and fewer bytes stored. */
	EXPECT_LT(w.stored_bytes * 2, w.raw_bytes);
	b = gen_slurp(dst, &blen);
	unlink(dst);
	ASSERT_NE(NULL, b);
	/* Both again, side by side. */
	ASSERT_EQ(0, hgcor_open(&ra, a, alen));
	ASSERT_EQ(0, hgcor_open(&rb, b, blen));
	while ((ret = hgcor_next(&ra, &va)) > 0) {
		rb_ret = hgcor_next(&rb, &vb);
		ASSERT_EQ(1, rb_ret);
		ASSERT_EQ(va.type, vb.type);
		ASSERT_EQ(va.flags, vb.flags);
		ASSERT_EQ(va.length, vb.length);
		ASSERT_EQ(0, memcmp(va.payload, vb.payload, va.length));
		n++;
		nz += vb.encoding == HGCOR_ENC_ZSTD;
	}
	EXPECT_EQ(0, ret);
	EXPECT_EQ(0, hgcor_next(&rb, &vb));
	EXPECT_EQ(3228, n);
	EXPECT_LT(2000, nz);
	EXPECT_LT(blen * 2, alen) TH_LOG("%zu bytes compressed, %zu plain", blen, alen);
	hgcor_release(&ra);
	hgcor_release(&rb);
	free(a);
	free(b);
}

/* The stored payload of a ZSTD section: header @zh, then @frame. */
static int read_zstd_section(const struct hgcor_zstd_header *zh, const void *frame,
			     size_t frame_len)
{
	uint8_t *p = malloc(sizeof(*zh) + frame_len);
	int ret;

	if (!p)
		return 1;
	memcpy(p, zh, sizeof(*zh));
	memcpy(p + sizeof(*zh), frame, frame_len);
	ret = read_one_section(HGCOR_SEC_ZSTD, p, sizeof(*zh) + frame_len);
	free(p);
	return ret;
}

/* A frame of @raw (with its content size when @with_size), in *@frame: its length. */
static size_t make_frame(const void *raw, size_t len, int with_size, uint8_t **frame)
{
	ZSTD_CCtx *c = ZSTD_createCCtx();
	size_t cap = ZSTD_compressBound(len), n;

	*frame = malloc(cap);
	ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, with_size);
	n = ZSTD_compress2(c, *frame, cap, raw, len);
	ZSTD_freeCCtx(c);
	return ZSTD_isError(n) ? 0 : n;
}

/*
 * The size of @frame's header (RFC 8878 3.1.1.1): magic, descriptor,
 * window descriptor unless single segment, dictionary id, content size
 * (@fcs_size bytes, its last field).
 */
static size_t frame_header_size(const uint8_t *frame, size_t fcs_size)
{
	static const size_t did_bytes[] = { 0, 1, 2, 4 };
	uint8_t fhd = frame[4];

	return 4 + 1 + (fhd & 0x20 ? 0 : 1) + did_bytes[fhd & 3] + fcs_size;
}

TEST(zstd_crafted_frames)
{
	struct hgcor_zstd_header zh = { .type = HGCOR_SEC_HOST_RECORDS };
	struct buf recs = { 0 };
	uint8_t *frame, *nosize, *two;
	size_t n, n_nosize, fcs_size, hdr_size;
	uint64_t fcs = 0;

	rng_seed(3);
	vcpu_batch(&recs, 40, 5000000);
	zh.raw_length = recs.len;
	n = make_frame(recs.p, recs.len, 1, &frame);
	ASSERT_LT(0, n);
	ASSERT_EQ(0, read_zstd_section(&zh, frame, n));

	/* The header's size is not the frame's (one more, one less). */
	zh.raw_length = recs.len + 8;
	EXPECT_EQ(HGCOR_E_DECOMPRESS, read_zstd_section(&zh, frame, n));
	zh.raw_length = recs.len - 8;
	EXPECT_EQ(HGCOR_E_DECOMPRESS, read_zstd_section(&zh, frame, n));
	zh.raw_length = recs.len;

	/* A frame that does not say its size. */
	n_nosize = make_frame(recs.p, recs.len, 0, &nosize);
	ASSERT_LT(0, n_nosize);
	EXPECT_EQ(HGCOR_E_DECOMPRESS, read_zstd_section(&zh, nosize, n_nosize));

	/*
	 * A frame whose declared content size lies: the header and the frame
	 * agree on 8 bytes more than it holds.  The content size field ends
	 * the frame header; for this size it is 2 bytes, value - 256.
	 */
	ASSERT_EQ(1, frame[4] >> 6);	/* Frame_Content_Size_flag 1: 2 bytes */
	fcs_size = 2;
	hdr_size = frame_header_size(frame, fcs_size);
	memcpy(&fcs, frame + hdr_size - fcs_size, fcs_size);
	fcs += 8;
	memcpy(frame + hdr_size - fcs_size, &fcs, fcs_size);
	ASSERT_EQ(recs.len + 8, ZSTD_getFrameContentSize(frame, n));
	zh.raw_length = recs.len + 8;
	EXPECT_EQ(HGCOR_E_DECOMPRESS, read_zstd_section(&zh, frame, n));
	fcs -= 8;
	memcpy(frame + hdr_size - fcs_size, &fcs, fcs_size);
	zh.raw_length = recs.len;
	ASSERT_EQ(0, read_zstd_section(&zh, frame, n));

	/* A frame cut short (its CRC recomputed: the cut is the writer's). */
	EXPECT_EQ(HGCOR_E_DECOMPRESS, read_zstd_section(&zh, frame, n - 1));
	EXPECT_EQ(HGCOR_E_DECOMPRESS, read_zstd_section(&zh, frame, n / 2));
	/* 3 bytes cannot hold 1920 within the ratio cap: refused before zstd sees it. */
	EXPECT_EQ(HGCOR_E_TOO_BIG, read_zstd_section(&zh, frame, 3));
	/* Nothing after the header: too short for any frame. */
	EXPECT_EQ(HGCOR_E_TOO_BIG, read_zstd_section(&zh, frame, 0));

	/* Two frames, or bytes after the frame: not one frame. */
	two = malloc(2 * n + 8);
	ASSERT_NE(NULL, two);
	memcpy(two, frame, n);
	memcpy(two + n, frame, n);
	EXPECT_EQ(HGCOR_E_DECOMPRESS, read_zstd_section(&zh, two, 2 * n));
	memset(two + n, 0, 8);
	EXPECT_EQ(HGCOR_E_DECOMPRESS, read_zstd_section(&zh, two, n + 8));
	/* Not a frame at all. */
	memset(two, 0x5a, n);
	EXPECT_EQ(HGCOR_E_DECOMPRESS, read_zstd_section(&zh, two, n));

	/* The inner type: never END or ZSTD; unknown ones as for plain sections. */
	zh.type = HGCOR_SEC_END;
	EXPECT_EQ(HGCOR_E_CONTENT, read_zstd_section(&zh, frame, n));
	zh.type = HGCOR_SEC_ZSTD;
	EXPECT_EQ(HGCOR_E_CONTENT, read_zstd_section(&zh, frame, n));
	zh.type = 99;
	EXPECT_EQ(HGCOR_E_UNKNOWN, read_zstd_section(&zh, frame, n));
	zh.flags = HGCOR_SEC_OPTIONAL;
	EXPECT_EQ(0, read_zstd_section(&zh, frame, n));
	/* Content checked after decompression: these records are not a probes section. */
	zh.type = HGCOR_SEC_GUEST_VM;
	EXPECT_EQ(HGCOR_E_CONTENT, read_zstd_section(&zh, frame, n));
	/* A stored payload shorter than its header. */
	EXPECT_EQ(HGCOR_E_CONTENT, read_one_section(HGCOR_SEC_ZSTD, &zh, 8));
	EXPECT_NE(NULL, strstr(hgcor_strerror(HGCOR_E_DECOMPRESS), "compressed"));
	free(frame);
	free(nosize);
	free(two);
	free(recs.p);
}

TEST(zstd_bombs_refused)
{
	struct hgcor_zstd_header zh = { .type = HGCOR_SEC_NOTE };
	size_t big = HGCOR_MAX_SECTION, n;
	uint8_t *zeros = calloc(1, big + 1), *frame;

	ASSERT_NE(NULL, zeros);
	/* 64 MiB of zeros: a frame of a few KiB, far above the ratio cap. */
	n = make_frame(zeros, big, 1, &frame);
	ASSERT_LT(0, n);
	ASSERT_LT(n * HGCOR_ZSTD_MAX_RATIO, big);
	zh.raw_length = big;
	EXPECT_EQ(HGCOR_E_TOO_BIG, read_zstd_section(&zh, frame, n));
	free(frame);
	/* Over the per-section cap, whatever the frame. */
	n = make_frame(zeros, 4096, 1, &frame);
	ASSERT_LT(0, n);
	zh.raw_length = (uint64_t)HGCOR_MAX_SECTION + 1;
	EXPECT_EQ(HGCOR_E_TOO_BIG, read_zstd_section(&zh, frame, n));
	zh.raw_length = UINT64_MAX;
	EXPECT_EQ(HGCOR_E_TOO_BIG, read_zstd_section(&zh, frame, n));
	/* 4096 zeros fit the ratio only if the frame is 64 bytes or more. */
	zh.raw_length = 4096;
	EXPECT_EQ(n * HGCOR_ZSTD_MAX_RATIO >= 4096 ? 0 : HGCOR_E_TOO_BIG,
		  read_zstd_section(&zh, frame, n));
	free(frame);
	free(zeros);
}

TEST(zstd_values_checked_after_decompression)
{
	struct hgclock_rec_cyc2ns snaps[4];
	struct hgcor_zstd_header zh = { .type = HGCOR_SEC_HOST_RECORDS,
					.raw_length = sizeof(snaps) };
	char where[80];
	uint8_t *frame;
	size_t n;

	for (int i = 0; i < 4; i++)
		snaps[i] = good_cyc2ns();
	snaps[2].conv.shift = 100;
	n = make_frame(snaps, sizeof(snaps), 1, &frame);
	ASSERT_LT(0, n);
	EXPECT_EQ(HGCOR_E_RANGE, read_zstd_section(&zh, frame, n));
	/* The reason says where in the uncompressed payload. */
	EXPECT_NE(NULL, strstr(hgcor_strerror(HGCOR_E_RANGE), "compressed host_records"));
	snprintf(where, sizeof(where), "item at byte %zu of its uncompressed payload",
		 2 * sizeof(snaps[0]));
	EXPECT_NE(NULL, strstr(hgcor_strerror(HGCOR_E_RANGE), where))
		TH_LOG("%s", hgcor_strerror(HGCOR_E_RANGE));
	free(frame);
}

TEST(zstd_writer_stores_plain_what_does_not_shrink)
{
	struct hgcor_writer w;
	struct hgcor_reader r;
	struct hgcor_view v;
	char path[64];
	uint8_t noise[4096], *buf;
	size_t len = 0;
	int ret, nz = 0;

	rng_seed(11);
	for (size_t i = 0; i < sizeof(noise); i += 8) {
		uint64_t x = rnd();

		memcpy(noise + i, &x, 8);
	}
	snprintf(path, sizeof(path), "/tmp/hgcor-znoise-%d", getpid());
	ASSERT_EQ(-EINVAL, hgcor_set_compression(&w, 7));
	ASSERT_EQ(0, hgcor_create(&w, path));
	ASSERT_EQ(0, hgcor_set_compression(&w, HGCOR_COMPRESS_ZSTD));
	/* Random bytes as an unknown optional... and as a note: never compressed. */
	ASSERT_EQ(0, hgcor_write_section(&w, HGCOR_SEC_NOTE, 0, noise, sizeof(noise)));
	memset(noise + 2048, 0, 2048);
	ASSERT_EQ(0, hgcor_write_section(&w, HGCOR_SEC_NOTE, 0, noise, sizeof(noise)));
	ASSERT_EQ(0, hgcor_close(&w));
	EXPECT_EQ(w.raw_bytes, w.stored_bytes);
	buf = gen_slurp(path, &len);
	unlink(path);
	ASSERT_NE(NULL, buf);
	ASSERT_EQ(0, hgcor_open(&r, buf, len));
	while ((ret = hgcor_next(&r, &v)) > 0)
		nz += v.encoding == HGCOR_ENC_ZSTD;
	EXPECT_EQ(0, ret);
	EXPECT_EQ(0, nz);
	EXPECT_EQ(64 + 2 * (24 + 4096) + 24 + 8, len);
	free(buf);
}

#else /* HGCLOCK_NO_ZSTD */

TEST(zstd_absent)
{
	struct hgcor_writer w = { 0 };
	struct hgcor_zstd_header zh = { .type = HGCOR_SEC_NOTE, .raw_length = 4 };
	uint8_t p[sizeof(zh) + 8] = { 0 };

	EXPECT_EQ(-ENOTSUP, hgcor_set_compression(&w, HGCOR_COMPRESS_ZSTD));
	memcpy(p, &zh, sizeof(zh));
	EXPECT_EQ(HGCOR_E_NO_ZSTD, read_one_section(HGCOR_SEC_ZSTD, p, sizeof(p)));
}

#endif

TEST(crc32_known_value)
{
	/* The standard check value of CRC-32/ISO-HDLC. */
	EXPECT_EQ(0xCBF43926u, hgcor_crc32(0, "123456789", 9));
	EXPECT_EQ(0xCBF43926u, hgcor_crc32_bytewise(0, "123456789", 9));
	/* In two pieces, split where the 8-byte steps do not line up. */
	EXPECT_EQ(0xCBF43926u, hgcor_crc32(hgcor_crc32(0, "123", 3), "456789", 6));
}

/*
 * The 8-byte steps against the byte-at-a-time reference: every length up
 * to 80 at every start offset 0-7 (the loads are unaligned), longer
 * buffers, chained calls, and all-ones data (every table index 0xff).
 */
TEST(crc32_slices_match_bytewise)
{
	static uint8_t buf[4096 + 8];
	unsigned int seed = 12345;

	for (size_t i = 0; i < sizeof(buf); i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = seed >> 16;
	}
	for (size_t off = 0; off < 8; off++) {
		for (size_t len = 0; len <= 80; len++) {
			if (hgcor_crc32_bytewise(0, buf + off, len) !=
			    hgcor_crc32(0, buf + off, len)) {
				TH_LOG("offset %zu length %zu", off, len);
				ASSERT_TRUE(0);
			}
		}
	}
	EXPECT_EQ(hgcor_crc32_bytewise(0, buf, 4096), hgcor_crc32(0, buf, 4096));
	EXPECT_EQ(hgcor_crc32_bytewise(0x12345678u, buf + 3, 4093),
		  hgcor_crc32(0x12345678u, buf + 3, 4093));
	EXPECT_EQ(hgcor_crc32(0, buf, 4096),
		  hgcor_crc32(hgcor_crc32(0, buf, 1001), buf + 1001, 4096 - 1001));
	memset(buf, 0xff, sizeof(buf));
	EXPECT_EQ(hgcor_crc32_bytewise(0, buf, 777), hgcor_crc32(0, buf, 777));
}

TEST_HARNESS_MAIN
