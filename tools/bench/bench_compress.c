// SPDX-License-Identifier: GPL-2.0
/*
 * Benchmark: compressed sections of the correlation file (file-format.rst,
 * format 1.4), on a real recording (tools/bench/compress.sh gives it the
 * capture of selftests/data, 233 s of a nested host and its guest).
 *
 * The input's sections are written again twice by the library's writer,
 * as `record` writes them: once plain (--compress none), once with zstd
 * (the default).  Both copies are read back in full by the validating
 * reader, which must return the same sections.  Prints "BENCH <name>
 * <value> <unit>" lines: bytes per record stored plain and compressed,
 * their ratio, the growth of the file per second of recording, and the
 * time to write and to read a section.
 *
 *   bench_compress INPUT.hgc [TMPDIR]
 *
 * HGCLOCK_BENCH_COMPRESS_KEEP=FILE keeps the compressed copy as FILE.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/hgclock.h>

#include "corr.h"
#include "bench_stats.h"
#include "../../selftests/unit/gen.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* What a pass over a file found: records and the host's sched_clock span. */
struct tally {
	uint64_t sections, records, probes;
	uint64_t first_ns, last_ns;
	uint32_t crc;		/* of every section's type and payload, in order */
};

static int host_rec(const void *rec, size_t size, void *ctx)
{
	const struct hgclock_rec_header *h = rec;
	struct tally *t = ctx;

	(void)size;
	t->records++;
	if (h->sched_clock_ns && (!t->first_ns || h->sched_clock_ns < t->first_ns))
		t->first_ns = h->sched_clock_ns;
	if (h->sched_clock_ns > t->last_ns)
		t->last_ns = h->sched_clock_ns;
	return 0;
}

static int guest_rec(const void *rec, size_t size, void *ctx)
{
	struct tally *t = ctx;

	(void)rec;
	(void)size;
	t->records++;
	return 0;
}

/* Reads @buf whole: 0, or the reader's error. */
static int read_file(const uint8_t *buf, size_t len, struct tally *t)
{
	struct hgcor_reader r;
	struct hgcor_view v;
	int ret;

	memset(t, 0, sizeof(*t));
	ret = hgcor_open(&r, buf, len);
	while (!ret && (ret = hgcor_next(&r, &v)) > 0) {
		ret = 0;
		t->sections++;
		t->crc = hgcor_crc32(t->crc, &v.type, sizeof(v.type));
		t->crc = hgcor_crc32(t->crc, v.payload, v.length);
		if (v.type == HGCOR_SEC_HOST_RECORDS)
			hgcor_walk_records(v.payload, v.length, host_rec, t);
		else if (v.type == HGCOR_SEC_GUEST_RECORDS)
			hgcor_walk_records(v.payload + 8, v.length - 8, guest_rec, t);
		else if (v.type == HGCOR_SEC_PROBES)
			t->probes += (v.length - 8) / sizeof(struct hgcor_probe);
	}
	hgcor_release(&r);
	return ret;
}

/* Writes @in's sections again to @path with @compress: 0 or -errno; ns spent writing. */
static int rewrite(const uint8_t *in, size_t len, const char *path, int compress,
		   uint64_t *write_ns, struct hgcor_writer *w)
{
	struct hgcor_reader r;
	struct hgcor_view v;
	uint64_t spent = 0, t0;
	int ret;

	ret = hgcor_create(w, path);
	if (ret)
		return ret;
	ret = hgcor_set_compression(w, compress);
	if (!ret)
		ret = hgcor_open(&r, in, len) ? -EINVAL : 0;
	while (!ret && (ret = hgcor_next(&r, &v)) > 0) {
		ret = 0;
		if (v.type == HGCOR_SEC_END)
			continue;
		t0 = now_ns();
		ret = hgcor_write_section(w, v.type, v.flags, v.payload, v.length);
		spent += now_ns() - t0;
	}
	hgcor_release(&r);
	if (ret) {
		hgcor_abort(w);
		/* A write's -errno, or the reader's error (HGCOR_E_*, below -200). */
		return ret < 0 && ret > -200 ? ret : -EINVAL;
	}
	t0 = now_ns();
	ret = hgcor_close(w);
	spent += now_ns() - t0;
	*write_ns = spent;
	return ret;
}

/* Best of @n full reads of @buf, in ns. */
static uint64_t time_read(const uint8_t *buf, size_t len, int n)
{
	uint64_t best = UINT64_MAX;
	struct tally t;

	for (int i = 0; i < n; i++) {
		uint64_t t0 = now_ns();

		read_file(buf, len, &t);
		if (now_ns() - t0 < best)
			best = now_ns() - t0;
	}
	return best;
}

/*
 * The CRC-32 every section's header and payload carry, over the plain
 * copy (written on recording, checked on every read): the library's
 * 8-byte steps against its byte-at-a-time reference, same data, same
 * run; the median of 5 rounds each.  Returns the speed-up; the MB/s of
 * the 8-byte version in *@mb_per_s.
 */
static double crc_speedup(const uint8_t *buf, size_t len, double *mb_per_s)
{
	double fast[5], slow[5];
	uint32_t a = 0, b = 0;

	for (int r = 0; r < 5; r++) {
		uint64_t t0 = now_ns();

		a = hgcor_crc32(0, buf, len);
		fast[r] = (double)(now_ns() - t0);
		t0 = now_ns();
		b = hgcor_crc32_bytewise(0, buf, len);
		slow[r] = (double)(now_ns() - t0);
	}
	if (a != b) {
		fprintf(stderr, "bench_compress: CRC-32 %08x, byte at a time %08x\n", a, b);
		exit(1);
	}
	*mb_per_s = len / (median(fast, 5) / 1e9) / 1e6;
	return median(slow, 5) / median(fast, 5);
}

int main(int argc, char **argv)
{
	const char *tmpdir = argc > 2 ? argv[2] : "/tmp";
	char plain_path[4096], z_path[4096];
	struct hgcor_writer wp, wz;
	struct tally tin, tp, tz;
	uint64_t plain_write_ns, z_write_ns, plain_read_ns, z_read_ns;
	size_t in_len = 0, plain_len = 0, z_len = 0;
	uint8_t *in, *plain = NULL, *z = NULL;
	double secs, items, crc_ratio, crc_mb_per_s;
	int ret;

	if (argc < 2) {
		fprintf(stderr, "usage: bench_compress INPUT.hgc [TMPDIR]\n");
		return 2;
	}
	if (!hgcor_have_zstd()) {
		fprintf(stderr, "bench_compress: built without libzstd\n");
		return 1;
	}
	in = gen_slurp(argv[1], &in_len);
	if (!in || (ret = read_file(in, in_len, &tin))) {
		fprintf(stderr, "bench_compress: %s: %s\n", argv[1],
			in ? hgcor_strerror(ret) : strerror(errno));
		return 1;
	}
	snprintf(plain_path, sizeof(plain_path), "%s/bench-compress-plain-%d.hgc", tmpdir,
		 getpid());
	snprintf(z_path, sizeof(z_path), "%s/bench-compress-zstd-%d.hgc", tmpdir, getpid());
	ret = rewrite(in, in_len, plain_path, HGCOR_COMPRESS_NONE, &plain_write_ns, &wp);
	if (!ret)
		ret = rewrite(in, in_len, z_path, HGCOR_COMPRESS_ZSTD, &z_write_ns, &wz);
	if (!ret) {
		plain = gen_slurp(plain_path, &plain_len);
		z = gen_slurp(z_path, &z_len);
	}
	unlink(plain_path);
	if (!getenv("HGCLOCK_BENCH_COMPRESS_KEEP") ||
	    rename(z_path, getenv("HGCLOCK_BENCH_COMPRESS_KEEP")))
		unlink(z_path);
	if (ret || !plain || !z) {
		fprintf(stderr, "bench_compress: writing the copies: %s\n",
			strerror(ret ? -ret : errno));
		return 1;
	}
	ret = read_file(plain, plain_len, &tp);
	if (!ret)
		ret = read_file(z, z_len, &tz);
	if (ret || tp.sections != tin.sections || tz.sections != tin.sections ||
	    tp.crc != tin.crc || tz.crc != tin.crc || tz.records != tin.records) {
		fprintf(stderr, "bench_compress: the copies do not read back as the input (%s)\n",
			ret ? hgcor_strerror(ret) : "different sections");
		return 1;
	}
	plain_read_ns = time_read(plain, plain_len, 5);
	z_read_ns = time_read(z, z_len, 5);
	crc_ratio = crc_speedup(plain, plain_len, &crc_mb_per_s);

	/* Records and probes: what the file holds, one "item" each. */
	items = (double)(tin.records + tin.probes);
	secs = tin.last_ns > tin.first_ns ? (tin.last_ns - tin.first_ns) / 1e9 : 0;
	printf("BENCH compress.input_records %" PRIu64 " records\n", tin.records);
	printf("BENCH compress.input_probes %" PRIu64 " probes\n", tin.probes);
	printf("BENCH compress.input_seconds %.1f s\n", secs);
	printf("BENCH compress.file_plain %zu bytes\n", plain_len);
	printf("BENCH compress.file_zstd %zu bytes\n", z_len);
	printf("BENCH compress.bytes_per_record_plain %.1f bytes\n", plain_len / items);
	printf("BENCH compress.bytes_per_record_zstd %.1f bytes\n", z_len / items);
	printf("BENCH compress.file_ratio %.2f ratio\n", (double)plain_len / z_len);
	/* The compressible sections alone (records, probes), payloads only. */
	printf("BENCH compress.payload_ratio %.2f ratio\n",
	       (double)wz.raw_bytes / (double)wz.stored_bytes);
	if (secs > 0) {
		printf("BENCH compress.growth_plain %.1f KB/s\n", plain_len / secs / 1000);
		printf("BENCH compress.growth_zstd %.1f KB/s\n", z_len / secs / 1000);
	}
	printf("BENCH compress.write_per_section_plain %.1f us\n",
	       plain_write_ns / 1e3 / tin.sections);
	printf("BENCH compress.write_per_section_zstd %.1f us\n", z_write_ns / 1e3 / tin.sections);
	printf("BENCH compress.read_file_plain %.1f ms\n", plain_read_ns / 1e6);
	printf("BENCH compress.read_file_zstd %.1f ms\n", z_read_ns / 1e6);
	printf("BENCH compress.crc32 %.0f MB/s\n", crc_mb_per_s);
	printf("BENCH compress.crc32_vs_bytewise %.2f ratio\n", crc_ratio);
	free(in);
	free(plain);
	free(z);
	return 0;
}
