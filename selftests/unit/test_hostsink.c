// SPDX-License-Identifier: GPL-2.0
/*
 * The recorder's holds (user/record/writer.c): drained batches of host
 * records, and each guest's record messages, are held and written as one
 * HOST_RECORDS (GUEST_RECORDS) section when 64 KiB are pending, when the
 * oldest is a second old, or when forced (the last pass).  Checked by reading back the file: every record,
 * whole, in the order given, in as few sections as the rules allow.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "record/record.h"
#include "corr.h"

struct readback {
	unsigned int sections;	/* HOST_RECORDS sections */
	unsigned int records;
	uint64_t next_tsc;	/* records carry 1, 2, 3... in hdr.tsc */
	int out_of_order;
};

static int count_rec(const void *rec, size_t size, void *ctx)
{
	const struct hgclock_rec_header *h = rec;
	struct readback *rb = ctx;

	rb->records++;
	if (h->tsc != ++rb->next_tsc || size != sizeof(struct hgclock_rec_vcpu))
		rb->out_of_order++;
	return 0;
}

static void read_back(struct __test_metadata *_metadata, const char *path,
		      struct readback *rb)
{
	struct hgcor_reader r;
	struct hgcor_view v;
	const void *buf;
	size_t len;
	int ret;

	memset(rb, 0, sizeof(*rb));
	ASSERT_EQ(0, hg_map_file(path, &buf, &len));
	ASSERT_EQ(0, hgcor_open(&r, buf, len));
	while ((ret = hgcor_next(&r, &v)) > 0) {
		if (v.type != HGCOR_SEC_HOST_RECORDS)
			continue;
		rb->sections++;
		ASSERT_EQ(0, hgcor_walk_records(v.payload, v.length, count_rec, rb));
	}
	EXPECT_EQ(0, ret);
	hgcor_release(&r);
	hg_unmap_file(buf, len);
}

/* A batch of @n RUN records stamped *tsc + 1 onwards. */
static void fill(struct hg_batch *b, unsigned int n, uint64_t *tsc)
{
	struct hgclock_rec_vcpu rec;

	b->len = 0;
	b->nr = n;
	b->lost = 0;
	for (unsigned int i = 0; i < n; i++) {
		memset(&rec, 0, sizeof(rec));
		rec.hdr.type = HGCLOCK_REC_VCPU_RUN;
		rec.hdr.size = sizeof(rec);
		rec.hdr.tsc = ++*tsc;
		rec.tid = 100;
		rec.vcpu_id = 0;
		memcpy(b->buf + b->len, &rec, sizeof(rec));
		b->len += sizeof(rec);
	}
}

FIXTURE(sink) {
	char path[64];
	struct hgcor_writer w;
	struct host_sink sink;
	struct hg_batch b;
	uint64_t tsc;
};

FIXTURE_SETUP(sink)
{
	int fd;

	strcpy(self->path, "/tmp/hgclock-test-hostsink-XXXXXX");
	fd = mkstemp(self->path);
	ASSERT_LE(0, fd);
	close(fd);
	ASSERT_EQ(0, hgcor_create(&self->w, self->path));
	out_name = self->path;
	memset(&self->sink, 0, sizeof(self->sink));
	self->sink.w = &self->w;
	self->sink.hold.buf = malloc(HG_HOST_HOLD_BYTES);
	ASSERT_NE(NULL, self->sink.hold.buf);
	self->b.max = HG_SECTION_MAX;
	self->b.buf = malloc(self->b.max);
	ASSERT_NE(NULL, self->b.buf);
	self->tsc = 0;
}

FIXTURE_TEARDOWN(sink)
{
	free(self->sink.hold.buf);
	free(self->b.buf);
	unlink(self->path);
}

/* Small drains are held: a hundred of them make one section, at the end. */
TEST_F(sink, small_drains_make_one_section)
{
	struct readback rb;
	uint64_t bytes0 = self->w.bytes;

	for (int i = 0; i < 100; i++) {
		fill(&self->b, 3, &self->tsc);
		ASSERT_EQ(0, write_host_batch(&self->b, &self->sink));
		ASSERT_EQ(0, host_sink_flush(&self->sink, false));
	}
	EXPECT_EQ(bytes0, self->w.bytes);	/* nothing written yet */
	ASSERT_EQ(0, host_sink_flush(&self->sink, true));
	EXPECT_EQ(300, self->sink.total);
	ASSERT_EQ(0, hgcor_close(&self->w));
	read_back(_metadata, self->path, &rb);
	EXPECT_EQ(1, rb.sections);
	EXPECT_EQ(300, rb.records);
	EXPECT_EQ(0, rb.out_of_order);
}

/*
 * The hold's limits: a section once 64 KiB would be exceeded, a batch
 * larger than the hold written after what was held, a second's wait.
 */
TEST_F(sink, full_hold_large_batch_and_age)
{
	unsigned int per = HG_HOST_HOLD_BYTES / sizeof(struct hgclock_rec_vcpu);
	struct readback rb;

	/* Just fits, then one more: the first is written, the second held. */
	fill(&self->b, per, &self->tsc);
	ASSERT_EQ(0, write_host_batch(&self->b, &self->sink));
	fill(&self->b, 1, &self->tsc);
	ASSERT_EQ(0, write_host_batch(&self->b, &self->sink));
	EXPECT_EQ(sizeof(struct hgclock_rec_vcpu), self->sink.hold.len);
	/* Larger than the hold: the held record first, then the batch. */
	fill(&self->b, per + 10, &self->tsc);
	ASSERT_EQ(0, write_host_batch(&self->b, &self->sink));
	EXPECT_EQ(0, self->sink.hold.len);
	/* Held, then written by age alone. */
	fill(&self->b, 2, &self->tsc);
	ASSERT_EQ(0, write_host_batch(&self->b, &self->sink));
	ASSERT_EQ(0, host_sink_flush(&self->sink, false));
	EXPECT_NE(0, self->sink.hold.len);
	usleep((useconds_t)(HG_HOST_HOLD_S * 1e6) + 100000);
	ASSERT_EQ(0, host_sink_flush(&self->sink, false));
	EXPECT_EQ(0, self->sink.hold.len);
	ASSERT_EQ(0, hgcor_close(&self->w));
	read_back(_metadata, self->path, &rb);
	EXPECT_EQ(4, rb.sections);
	EXPECT_EQ(2 * per + 13, rb.records);
	EXPECT_EQ(0, rb.out_of_order);
}

/* No hold buffer: every batch is a section, as before. */
TEST_F(sink, no_hold_writes_each_batch)
{
	struct readback rb;

	free(self->sink.hold.buf);
	self->sink.hold.buf = NULL;
	for (int i = 0; i < 5; i++) {
		fill(&self->b, 2, &self->tsc);
		ASSERT_EQ(0, write_host_batch(&self->b, &self->sink));
	}
	ASSERT_EQ(0, host_sink_flush(&self->sink, true));
	ASSERT_EQ(0, hgcor_close(&self->w));
	read_back(_metadata, self->path, &rb);
	EXPECT_EQ(5, rb.sections);
	EXPECT_EQ(10, rb.records);
	EXPECT_EQ(0, rb.out_of_order);
}

/*
 * A guest's record messages through rec_hold_add() under its id: small
 * ones held into one GUEST_RECORDS section, then (the guest's id changed
 * after a disruption, as follow_finish() flushes first) the next ones in a
 * section of the new id.  Every record once, whole, in order.
 */
TEST_F(sink, guest_records_held_under_their_id)
{
	struct readback rb = { 0 };	/* GUEST_RECORDS, after (guest id, 0) */
	struct rec_hold hold = { 0 };
	unsigned int wrong_id = 0;
	uint32_t prefix[2] = { 7, 0 };
	struct hgcor_reader r;
	struct hgcor_view v;
	uint64_t bytes0 = self->w.bytes;
	const void *buf;
	size_t len;
	int ret;

	hold.buf = malloc(HG_HOST_HOLD_BYTES);
	ASSERT_NE(NULL, hold.buf);
	for (int i = 0; i < 50; i++) {
		fill(&self->b, 2, &self->tsc);
		ASSERT_EQ(0, rec_hold_add(&hold, &self->w, HGCOR_SEC_GUEST_RECORDS, prefix,
					  sizeof(prefix), self->b.buf, self->b.len));
		ASSERT_EQ(0, rec_hold_flush(&hold, &self->w, HGCOR_SEC_GUEST_RECORDS, prefix,
					    sizeof(prefix), false));
	}
	EXPECT_EQ(bytes0, self->w.bytes);
	ASSERT_EQ(0, rec_hold_flush(&hold, &self->w, HGCOR_SEC_GUEST_RECORDS, prefix,
				    sizeof(prefix), true));
	prefix[0] = 8;
	for (int i = 0; i < 10; i++) {
		fill(&self->b, 1, &self->tsc);
		ASSERT_EQ(0, rec_hold_add(&hold, &self->w, HGCOR_SEC_GUEST_RECORDS, prefix,
					  sizeof(prefix), self->b.buf, self->b.len));
	}
	ASSERT_EQ(0, rec_hold_flush(&hold, &self->w, HGCOR_SEC_GUEST_RECORDS, prefix,
				    sizeof(prefix), true));
	free(hold.buf);
	ASSERT_EQ(0, hgcor_close(&self->w));

	ASSERT_EQ(0, hg_map_file(self->path, &buf, &len));
	ASSERT_EQ(0, hgcor_open(&r, buf, len));
	while ((ret = hgcor_next(&r, &v)) > 0) {
		uint32_t id;

		if (v.type != HGCOR_SEC_GUEST_RECORDS)
			continue;
		ASSERT_LE(8, v.length);
		memcpy(&id, v.payload, sizeof(id));
		/* Section 1 is guest 7's 100 records, section 2 guest 8's 10. */
		if (id != (rb.sections ? 8u : 7u))
			wrong_id++;
		rb.sections++;
		ASSERT_EQ(0, hgcor_walk_records(v.payload + 8, v.length - 8,
						count_rec, &rb));
	}
	EXPECT_EQ(0, ret) {
		TH_LOG("%s at %zu", hgcor_strerror(ret), (size_t)r.pos);
	}
	hgcor_release(&r);
	hg_unmap_file(buf, len);
	EXPECT_EQ(2, rb.sections);
	EXPECT_EQ(110, rb.records);
	EXPECT_EQ(0, wrong_id);
	EXPECT_EQ(0, rb.out_of_order);
}

TEST_HARNESS_MAIN
