// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target of the correlation file, in two modes chosen by the
 * first byte of the input:
 *
 * even: the reader on arbitrary bytes (the whole input).  It must
 *	return an error or walk the file, never crash, hang or read out of
 *	bounds.  Nearly every such input fails a CRC.
 *
 * odd: well-formed but hostile files.  The rest of the input is a list
 *	of edits, each setting a value (an extreme one, or the input's
 *	bytes) at a place in a valid file: a real recording
 *	(selftests/data/merge.hgc.xz, unpacked by the Makefile; its path in
 *	HGCLOCK_FUZZ_BASE) cut to its first 24 sections of each kind.  The
 *	checksums are recomputed after the edits, so the edited values
 *	pass the reader and reach the validation layer (corr_check.c) and,
 *	when it accepts them, the mapping: hgsync_load() with and without
 *	the file's segments, hgsync_build() (what `convert --recompute`
 *	runs), and conversions of every clock and method at values taken
 *	from the file and from the input, and plot's axis over the probes'
 *	span.  Bit 1 of the first byte stores the record and probe
 *	sections compressed (ZSTD sections, format 1.4): the edits then
 *	reach the values through the decompressing reader; with bit 2 too,
 *	the edits hit the stored bytes instead (the zstd header and frame,
 *	their CRC recomputed): hostile frames that pass the checksum.
 *
 * Both modes also give the input to convert's stdin line parser.  The
 * seed corpus (make fuzz) holds a file of compressed sections for the
 * first mode too.
 *
 * Built with ASan and UBSan (`make fuzz`): an out-of-bounds access,
 * undefined behaviour, a leak, a crash or a hang of more than 5 s fails it.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef HGCLOCK_NO_ZSTD
#include <zstd.h>
#endif

#include "corr.h"
#include "plot_axis.h"
#include "sync.h"
#include "vcpu_lines.h"

#ifndef HGCLOCK_FUZZ_BASE_DEFAULT
#define HGCLOCK_FUZZ_BASE_DEFAULT "build/unit/data/merge.hgc"
#endif

#define BASE_MAX_SECTIONS	24	/* of HOST_RECORDS, GUEST_RECORDS, PROBES each */
#define MAX_EDITS		16

static int touch(const void *rec, size_t size, void *ctx)
{
	const volatile uint8_t *p = rec;

	(void)ctx;
	if (size)
		(void)p[size - 1];
	return 0;
}

static void fuzz_reader(const uint8_t *data, size_t size)
{
	struct hgcor_reader r;
	struct hgcor_view v;
	int n = 0;

	if (hgcor_open(&r, data, size))
		return;
	while (hgcor_next(&r, &v) > 0 && n++ < 100000) {
		if (v.type == HGCOR_SEC_HOST_RECORDS)
			hgcor_walk_records(v.payload, v.length, touch, NULL);
		else if (v.type == HGCOR_SEC_GUEST_RECORDS)
			hgcor_walk_records(v.payload + 8, v.length - 8, touch, NULL);
	}
	hgcor_release(&r);	/* the loop may stop before the end */
}

/* ---- the base file: sections of a real recording ---- */

struct base_sec {
	uint32_t type;
	uint8_t *payload;
	size_t len;
};

static struct base_sec *base;
static size_t nr_base, base_bytes;
static bool base_tried;

static void load_base(void)
{
	const char *path = getenv("HGCLOCK_FUZZ_BASE");
	size_t n_host = 0, n_guest = 0, n_probes = 0;
	struct hgcor_reader r;
	struct hgcor_view v;
	uint8_t *buf;
	long len;
	FILE *f;

	base_tried = true;
	f = fopen(path ? path : HGCLOCK_FUZZ_BASE_DEFAULT, "rb");
	if (!f)
		return;
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	buf = malloc(len > 0 ? len : 1);
	if (!buf || len <= 0 || fread(buf, 1, len, f) != (size_t)len) {
		fclose(f);
		free(buf);
		return;
	}
	fclose(f);
	base = calloc(4096, sizeof(*base));
	if (!base || hgcor_open(&r, buf, len)) {
		free(buf);
		return;
	}
	while (nr_base < 4096 && hgcor_next(&r, &v) > 0) {
		if (v.type == HGCOR_SEC_END)
			break;
		if ((v.type == HGCOR_SEC_HOST_RECORDS && n_host++ >= BASE_MAX_SECTIONS) ||
		    (v.type == HGCOR_SEC_GUEST_RECORDS && n_guest++ >= BASE_MAX_SECTIONS) ||
		    (v.type == HGCOR_SEC_PROBES && n_probes++ >= BASE_MAX_SECTIONS))
			continue;
		base[nr_base].type = v.type;
		base[nr_base].len = v.length;
		base[nr_base].payload = malloc(v.length ? v.length : 1);
		if (!base[nr_base].payload)
			break;
		memcpy(base[nr_base].payload, v.payload, v.length);
		base_bytes += v.length;
		nr_base++;
	}
	hgcor_release(&r);	/* it stopped at END */
	free(buf);
}

/*
 * Replaces a records or probes section @s by a ZSTD section holding it,
 * as `record` writes them.  Left as it is when it cannot.
 */
static void zstd_wrap(struct base_sec *s)
{
#ifndef HGCLOCK_NO_ZSTD
	struct hgcor_zstd_header zh = { .type = s->type, .raw_length = s->len };
	size_t bound = ZSTD_compressBound(s->len), n;
	uint8_t *p;

	if (s->type != HGCOR_SEC_HOST_RECORDS && s->type != HGCOR_SEC_GUEST_RECORDS &&
	    s->type != HGCOR_SEC_PROBES)
		return;
	p = malloc(sizeof(zh) + bound);
	if (!p)
		return;
	n = ZSTD_compress(p + sizeof(zh), bound, s->payload, s->len, 1);
	if (ZSTD_isError(n)) {
		free(p);
		return;
	}
	memcpy(p, &zh, sizeof(zh));
	free(s->payload);
	s->payload = p;
	s->len = sizeof(zh) + n;
	s->type = HGCOR_SEC_ZSTD;
#else
	(void)s;
#endif
}

/* ---- writing a file in memory, checksums and all ---- */

static size_t put_section(uint8_t *out, uint32_t type, const uint8_t *p, size_t len)
{
	struct hgcor_section s;
	size_t padded = (len + 7) & ~(size_t)7;

	memset(&s, 0, sizeof(s));
	s.type = type;
	s.length = len;
	s.payload_crc = hgcor_crc32(0, p, len);
	s.header_crc = hgcor_crc32(0, &s, offsetof(struct hgcor_section, header_crc));
	memcpy(out, &s, sizeof(s));
	memcpy(out + sizeof(s), p, len);
	memset(out + sizeof(s) + len, 0, padded - len);
	return sizeof(s) + padded;
}

static size_t write_file(uint8_t *out, struct base_sec *secs, size_t n)
{
	struct hgcor_file_header h;
	size_t pos = sizeof(h);
	uint64_t count = n;

	memset(&h, 0, sizeof(h));
	memcpy(h.magic, HGCOR_MAGIC, 8);
	h.version_major = HGCOR_VERSION_MAJOR;
	h.version_minor = HGCOR_VERSION_MINOR;
	h.header_size = sizeof(h);
	h.section_header_size = sizeof(struct hgcor_section);
	h.header_crc = hgcor_crc32(0, &h, sizeof(h));
	memcpy(out, &h, sizeof(h));
	for (size_t i = 0; i < n; i++)
		pos += put_section(out + pos, secs[i].type, secs[i].payload, secs[i].len);
	return pos + put_section(out + pos, HGCOR_SEC_END, (const uint8_t *)&count, 8);
}

/* ---- the edits ---- */

static const uint64_t extremes[] = {
	0, 1, 2, 7, 31, 32, 33, 48, 63, 64, 65, 100, 255, 256, 4095, 4096, 8191, 8192,
	16383, 16384, 65535, 65536, 0x7fffffffull, 0x80000000ull, 0xffffffffull,
	(uint64_t)-1, (uint64_t)-2, (uint64_t)-32, (uint64_t)-33, (uint64_t)-100,
	(uint64_t)INT32_MIN, 1ull << 32, 1ull << 48, 1ull << 62, 1ull << 63,
	(1ull << 63) - 1, (1ull << 63) + 1, 281474976711ull, (uint64_t)-281474976711ll,
};

#define NR_EXTREMES (sizeof(extremes) / sizeof(extremes[0]))

/*
 * One edit, 8 bytes of input: section (2 bytes), offset (4), width and
 * value selector (1), a byte (1).  A selector below NR_EXTREMES takes that
 * extreme value; others add the byte to what is there, or take the
 * value at another offset of the file (which moves a time past another).
 */
static void apply_edit(struct base_sec *secs, size_t n, const uint8_t *e)
{
	static const size_t widths[] = { 1, 2, 4, 8 };
	uint16_t si;
	uint32_t off;
	uint8_t sel = e[6], byte = e[7];
	size_t w = widths[sel & 3];
	struct base_sec *s;
	uint64_t val = 0, old = 0;

	memcpy(&si, e, 2);
	memcpy(&off, e + 2, 4);
	s = &secs[si % n];
	if (s->len < w)
		return;
	off = (uint32_t)((off % (s->len - w + 1)) & ~(uint32_t)(w - 1));
	memcpy(&old, s->payload + off, w);
	sel >>= 2;
	if (sel < NR_EXTREMES)
		val = extremes[sel];
	else if (sel < NR_EXTREMES + 8)
		val = old + (int8_t)byte;
	else
		memcpy(&val, s->payload + ((off + byte * 8u) % (s->len - w + 1)), w);
	memcpy(s->payload + off, &val, w);
}

static void convert_all(const struct hgsync *s, uint64_t extra)
{
	for (unsigned int gi = 0; gi < s->nr_guests; gi++) {
		const struct hgsync_guest *g = &s->guests[gi];
		uint64_t values[6] = { extra, 0, UINT64_MAX, 1ull << 63 };
		uint64_t tmin = UINT64_MAX, tmax = 0;
		double ticks[HG_AXIS_MAX_TICKS];
		size_t nv = 4;

		/* plot's time axis over the probes' span, in seconds. */
		for (size_t i = 0; i < g->nr_probes; i++) {
			if (g->probes[i].host_ns_send < tmin)
				tmin = g->probes[i].host_ns_send;
			if (g->probes[i].host_ns_recv > tmax)
				tmax = g->probes[i].host_ns_recv;
		}
		if (tmin < tmax)
			hg_axis_ticks((double)tmin / 1e9, (double)tmax / 1e9, ticks,
				      HG_AXIS_MAX_TICKS);

		if (g->nr_probes) {
			values[nv++] = g->probes[g->nr_probes / 2].guest_tsc;
			values[nv++] = g->probes[g->nr_probes / 2].guest_sched_ns;
		}
		for (int vcpu = -1; vcpu < 3; vcpu++) {
			for (size_t k = 0; k < nv; k++) {
				for (uint32_t clock = HGSYNC_CLOCK_TSC; clock <= HGSYNC_CLOCK_LOCAL;
				     clock++) {
					for (uint32_t m = 0; m <= HGCOR_METHOD_EXIT; m++) {
						struct hgsync_result r;

						hgsync_to_host_by(s, gi, vcpu, clock, values[k], m,
								  &r);
					}
				}
				{
					struct hgsync_place p;
					uint64_t v;

					hgsync_vcpu_place(s, gi, vcpu, values[k], &p);
					hgsync_host_from_tsc(s, vcpu, HGSYNC_CLOCK_LOCAL, values[k], &v);
					hgsync_host_to_tsc(s, vcpu, HGSYNC_CLOCK_SCHED, values[k], &v);
				}
			}
		}
	}
}

static void fuzz_hostile(const uint8_t *data, size_t size, uint8_t mode)
{
	bool compress = mode & 2, edit_stored = mode & 4;
	struct base_sec *secs;
	struct hgsync s;
	uint8_t *file = NULL;
	size_t len, pos, nedits = size / 8, bytes = 0;
	uint64_t extra = 0;

	if (!base_tried)
		load_base();
	if (!nr_base)
		return;
	if (nedits > MAX_EDITS)
		nedits = MAX_EDITS;
	secs = calloc(nr_base, sizeof(*secs));
	if (!secs)
		goto out;
	for (size_t i = 0; i < nr_base; i++) {
		secs[i] = base[i];
		secs[i].payload = malloc(base[i].len ? base[i].len : 1);
		if (!secs[i].payload)
			goto out;
		memcpy(secs[i].payload, base[i].payload, base[i].len);
	}
	if (!compress || !edit_stored)
		for (size_t i = 0; i < nedits; i++)
			apply_edit(secs, nr_base, data + i * 8);
	for (size_t i = 0; compress && i < nr_base; i++)
		zstd_wrap(&secs[i]);
	if (compress && edit_stored)
		for (size_t i = 0; i < nedits; i++)
			apply_edit(secs, nr_base, data + i * 8);
	for (size_t i = 0; i < nr_base; i++)
		bytes += 24 + secs[i].len + 8;
	file = malloc(64 + bytes + 24 + 8);
	if (!file)
		goto out;
	if (size >= 8)
		memcpy(&extra, data + size - 8, 8);
	len = write_file(file, secs, nr_base);
	fuzz_reader(file, len);
	if (!hgsync_load(&s, file, len, HGSYNC_ALLOW_OPEN, &pos)) {
		if (!s.has_file_segments)
			hgsync_build(&s);
		convert_all(&s, extra);
		hgsync_free(&s);
	}
	/* convert --recompute: the mapping built from the records. */
	if (!hgsync_load(&s, file, len, HGSYNC_ALLOW_OPEN | HGSYNC_IGNORE_SEGMENTS, &pos)) {
		if (!hgsync_build(&s))
			convert_all(&s, extra);
		hgsync_free(&s);
	}
out:
	if (secs)
		for (size_t i = 0; i < nr_base; i++)
			free(secs[i].payload);
	free(secs);
	free(file);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t vcpu, value;

	if (!size)
		return 0;
	hg_parse_vcpu_value((const char *)data, size, 4095, &vcpu, &value);
	if (data[0] & 1)
		fuzz_hostile(data + 1, size - 1, data[0]);
	else
		fuzz_reader(data, size);	/* a file's magic starts with an even 'H' */
	return 0;
}
