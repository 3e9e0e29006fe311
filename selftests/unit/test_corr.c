// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of the correlation file: a round trip, and a reader that
 * rejects every truncation, every flipped bit, newer versions and unknown
 * required sections with the right error, never crashing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/hgclock.h>

#include "kselftest_harness.h"
#include "corr.h"

/* A file like `hgclock record` writes: info, a note, two record batches. */
static size_t make_file(const char *path, uint8_t **out)
{
	struct hgclock_rec_cyc2ns snap;
	struct hgclock_rec_vcpu_migrate mig;
	struct hgclock_info info;
	struct hgcor_writer w;
	uint8_t batch[sizeof(snap) + sizeof(mig)];
	FILE *f;
	long len;

	memset(&info, 0, sizeof(info));
	info.size = sizeof(info);
	info.abi_major = HGCLOCK_ABI_MAJOR;
	info.nr_cpu_ids = 2;
	info.tsc_khz = 2100000;
	memset(&snap, 0, sizeof(snap));
	snap.hdr.type = HGCLOCK_REC_CYC2NS;
	snap.hdr.size = sizeof(snap);
	snap.hdr.tsc = 123456789;
	snap.conv.mult = 1024560854;
	snap.conv.shift = 31;
	memset(&mig, 0, sizeof(mig));
	mig.hdr.type = HGCLOCK_REC_VCPU_MIGRATE;
	mig.hdr.size = sizeof(mig);
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
	f = fopen(path, "rb");
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	*out = malloc(len);
	if (fread(*out, 1, len, f) != (size_t)len)
		len = 0;
	fclose(f);
	return len;
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

TEST(crc32_known_value)
{
	/* The standard check value of CRC-32/ISO-HDLC. */
	EXPECT_EQ(0xCBF43926u, hgcor_crc32(0, "123456789", 9));
}

TEST_HARNESS_MAIN
