// SPDX-License-Identifier: LGPL-2.1
/*
 * The correlation file: writer and validating reader.
 *
 * The reader works on a buffer holding the whole file and trusts nothing
 * in it: every length is checked against what is left before it is used,
 * every header and payload against its CRC, and a known section's content
 * against its type, so a truncated, damaged or hostile file yields an
 * error naming the offset, never a crash (a libFuzzer target checks this:
 * selftests/fuzz/fuzz_corr.c).
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/hgclock.h>

#ifndef HGCLOCK_NO_ZSTD
#include <zstd.h>
#endif

#include "corr.h"
#include "corr_check.h"

/*
 * The writer's zstd level: record batches of a few hundred bytes to a few
 * KiB compress some 3.3 times at level 3 and 3.6 times at 9, which costs
 * some 60 us a batch (tools/bench/compress.sh).
 */
#define HGCOR_ZSTD_LEVEL	9
/* Smaller payloads are stored as they are: a frame costs some 10 bytes. */
#define HGCOR_ZSTD_MIN_INPUT	64

_Static_assert(sizeof(struct hgcor_file_header) == 64, "file header is 64 bytes");
_Static_assert(sizeof(struct hgcor_section) == 24, "section header is 24 bytes");
_Static_assert(sizeof(struct hgcor_probe) == 64, "probe is 64 bytes");
_Static_assert(sizeof(struct hgcor_guest_vm) == 32, "guest_vm is 32 bytes");
_Static_assert(sizeof(struct hgcor_disruption) == 96, "disruption is 96 bytes");
_Static_assert(sizeof(struct hgcor_segment) == 112, "segment is 112 bytes");
_Static_assert(sizeof(struct hgcor_zstd_header) == 16, "zstd header is 16 bytes");

/*
 * CRC-32 (IEEE 802.3, reflected 0xEDB88320), eight bytes a step
 * ("slicing by 8"): crc_table[k][n] is the CRC of byte n followed by k
 * zero bytes, so one 64-bit load XORed with the running CRC is folded by
 * eight independent look-ups.  About four times the byte-at-a-time loop
 * (compress.crc32_vs_bytewise in tools/bench/compress.sh); a recording's
 * sections are CRC'd on writing and on every read.  The tables are built
 * once: pthread_once() orders their stores before every later reader, in
 * any thread (merge's workers read files in parallel).
 */
static uint32_t crc_table[8][256];
static pthread_once_t crc_table_once = PTHREAD_ONCE_INIT;

static void crc_table_build(void)
{
	for (uint32_t n = 0; n < 256; n++) {
		uint32_t c = n;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
		crc_table[0][n] = c;
	}
	for (uint32_t n = 0; n < 256; n++)
		for (int k = 1; k < 8; k++)
			crc_table[k][n] = (crc_table[k - 1][n] >> 8) ^
					  crc_table[0][crc_table[k - 1][n] & 0xff];
}

/* The reference: one byte a step (also what big-endian hosts use). */
static uint32_t crc32_bytes(uint32_t crc_inv, const uint8_t *p, size_t len)
{
	while (len--)
		crc_inv = crc_table[0][(crc_inv ^ *p++) & 0xff] ^ (crc_inv >> 8);
	return crc_inv;
}

uint32_t hgcor_crc32_bytewise(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc_table_once, crc_table_build);
	return ~crc32_bytes(~crc, buf, len);
}

uint32_t hgcor_crc32(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint32_t c = ~crc;

	pthread_once(&crc_table_once, crc_table_build);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, sizeof(v));	/* any alignment */
		v ^= c;
		c = crc_table[7][v & 0xff] ^ crc_table[6][(v >> 8) & 0xff] ^
		    crc_table[5][(v >> 16) & 0xff] ^ crc_table[4][(v >> 24) & 0xff] ^
		    crc_table[3][(v >> 32) & 0xff] ^ crc_table[2][(v >> 40) & 0xff] ^
		    crc_table[1][(v >> 48) & 0xff] ^ crc_table[0][v >> 56];
		p += 8;
		len -= 8;
	}
#endif
	return ~crc32_bytes(c, p, len);
}

static uint32_t header_crc(const struct hgcor_file_header *h)
{
	struct hgcor_file_header copy = *h;

	copy.header_crc = 0;
	return hgcor_crc32(0, &copy, sizeof(copy));
}

/* ---- writing ---- */

int hgcor_create(struct hgcor_writer *w, const char *path)
{
	struct hgcor_file_header h;
	struct timespec ts;

	memset(w, 0, sizeof(*w));
	w->f = fopen(path, "wb");
	if (!w->f)
		return -errno;
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, HGCOR_MAGIC, 8);
	h.version_major = HGCOR_VERSION_MAJOR;
	h.version_minor = HGCOR_VERSION_MINOR;
	h.header_size = sizeof(h);
	clock_gettime(CLOCK_REALTIME, &ts);
	h.created_realtime_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	h.section_header_size = sizeof(struct hgcor_section);
	h.header_crc = header_crc(&h);
	if (fwrite(&h, sizeof(h), 1, w->f) != 1 || fflush(w->f)) {
		int err = -errno;

		fclose(w->f);
		w->f = NULL;
		return err ? err : -EIO;
	}
	w->bytes = sizeof(h);
	return 0;
}

int hgcor_have_zstd(void)
{
#ifdef HGCLOCK_NO_ZSTD
	return 0;
#else
	return 1;
#endif
}

int hgcor_set_compression(struct hgcor_writer *w, int compress)
{
	if (compress != HGCOR_COMPRESS_NONE && compress != HGCOR_COMPRESS_ZSTD)
		return -EINVAL;
	if (compress == HGCOR_COMPRESS_ZSTD && !hgcor_have_zstd())
		return -ENOTSUP;
	w->compress = compress;
	return 0;
}

static void free_compression(struct hgcor_writer *w)
{
#ifndef HGCLOCK_NO_ZSTD
	ZSTD_freeCCtx(w->zcctx);
#endif
	w->zcctx = NULL;
	free(w->zbuf);
	w->zbuf = NULL;
	w->zbuf_cap = 0;
}

static int write_plain(struct hgcor_writer *w, uint32_t type, uint32_t flags,
		       const void *p1, size_t l1, const void *p2, size_t l2)
{
	static const uint8_t zeros[8];
	struct hgcor_section s;
	size_t pad = (8 - (l1 + l2) % 8) % 8;

	if (!w->f)
		return -EBADF;
	if (l1 + l2 > HGCOR_MAX_SECTION)
		return -E2BIG;
	memset(&s, 0, sizeof(s));
	s.type = type;
	s.flags = flags;
	s.length = l1 + l2;
	s.payload_crc = hgcor_crc32(hgcor_crc32(0, p1, l1), p2, l2);
	s.header_crc = hgcor_crc32(0, &s, offsetof(struct hgcor_section, header_crc));
	/*
	 * One section is flushed whole before the next starts: a reader of a
	 * file cut by a crash sees every section before the cut intact.
	 */
	if (fwrite(&s, sizeof(s), 1, w->f) != 1 ||
	    (l1 && fwrite(p1, l1, 1, w->f) != 1) ||
	    (l2 && fwrite(p2, l2, 1, w->f) != 1) ||
	    (pad && fwrite(zeros, pad, 1, w->f) != 1) || fflush(w->f))
		return errno ? -errno : -EIO;
	w->nr_sections++;
	w->bytes += sizeof(s) + l1 + l2 + pad;
	return 0;
}

/*
 * The types the writer compresses: the bulk of a recording.  A reader
 * accepts any type but END and ZSTD inside a ZSTD section.
 */
static int compressible(uint32_t type)
{
	return type == HGCOR_SEC_HOST_RECORDS || type == HGCOR_SEC_GUEST_RECORDS ||
	       type == HGCOR_SEC_PROBES;
}

#ifndef HGCLOCK_NO_ZSTD
/*
 * Builds the stored payload of a ZSTD section for @p1/@l1 then @p2/@l2 in
 * w->zbuf: its length, or 0 when the section is better stored as it is
 * (no smaller, or a ratio the reader would refuse), or -errno when it
 * cannot be compressed (the caller then stores it as it is too).
 */
static ssize_t compress_payload(struct hgcor_writer *w, uint32_t type, uint32_t flags,
				const void *p1, size_t l1, const void *p2, size_t l2)
{
	struct hgcor_zstd_header zh = { .type = type, .flags = flags, .raw_length = l1 + l2 };
	size_t raw = l1 + l2, bound = ZSTD_compressBound(raw), need, n;
	const void *src = p1;
	uint8_t *buf;

	/* The frame after the header, then (two parts) a copy of the input. */
	need = sizeof(zh) + bound + (l2 ? raw : 0);
	if (need > w->zbuf_cap) {
		buf = realloc(w->zbuf, need);
		if (!buf)
			return -ENOMEM;
		w->zbuf = buf;
		w->zbuf_cap = need;
	}
	buf = w->zbuf;
	if (!w->zcctx) {
		w->zcctx = ZSTD_createCCtx();
		if (!w->zcctx)
			return -ENOMEM;
		/* The frame holds its content size: the reader checks it against raw_length. */
		if (ZSTD_isError(ZSTD_CCtx_setParameter(w->zcctx, ZSTD_c_compressionLevel,
							HGCOR_ZSTD_LEVEL)) ||
		    ZSTD_isError(ZSTD_CCtx_setParameter(w->zcctx, ZSTD_c_contentSizeFlag, 1)))
			return -EINVAL;
	}
	if (l2) {
		memcpy(buf + sizeof(zh) + bound, p1, l1);
		memcpy(buf + sizeof(zh) + bound + l1, p2, l2);
		src = buf + sizeof(zh) + bound;
	}
	n = ZSTD_compress2(w->zcctx, buf + sizeof(zh), bound, src, raw);
	if (ZSTD_isError(n))
		return -EIO;
	if (sizeof(zh) + n >= raw || raw > n * (size_t)HGCOR_ZSTD_MAX_RATIO)
		return 0;
	memcpy(buf, &zh, sizeof(zh));
	return (ssize_t)(sizeof(zh) + n);
}
#endif

int hgcor_write_section2(struct hgcor_writer *w, uint32_t type, uint32_t flags,
			 const void *p1, size_t l1, const void *p2, size_t l2)
{
	int ret;

	if (!w->f)
		return -EBADF;
	if (l1 + l2 > HGCOR_MAX_SECTION)
		return -E2BIG;
#ifndef HGCLOCK_NO_ZSTD
	if (w->compress == HGCOR_COMPRESS_ZSTD && compressible(type) &&
	    l1 + l2 >= HGCOR_ZSTD_MIN_INPUT) {
		ssize_t stored = compress_payload(w, type, flags, p1, l1, p2, l2);

		/* Compressing failed (no memory): the records are stored plain, not lost. */
		if (stored > 0) {
			/* Flags 0: readers before 1.4 refuse it (file-format.rst). */
			ret = write_plain(w, HGCOR_SEC_ZSTD, 0, w->zbuf, (size_t)stored, NULL, 0);
			if (!ret) {
				w->raw_bytes += l1 + l2;
				w->stored_bytes += (uint64_t)stored;
			}
			return ret;
		}
	}
#else
	(void)compressible;
#endif
	ret = write_plain(w, type, flags, p1, l1, p2, l2);
	if (!ret) {
		w->raw_bytes += l1 + l2;
		w->stored_bytes += l1 + l2;
	}
	return ret;
}

int hgcor_write_section(struct hgcor_writer *w, uint32_t type, uint32_t flags,
			const void *payload, size_t len)
{
	return hgcor_write_section2(w, type, flags, payload, len, NULL, 0);
}

int hgcor_close(struct hgcor_writer *w)
{
	uint64_t n = w->nr_sections;
	int ret, fd;

	if (!w->f)
		return -EBADF;
	ret = hgcor_write_section(w, HGCOR_SEC_END, 0, &n, sizeof(n));
	fd = fileno(w->f);
	if (!ret && fsync(fd) && errno != EINVAL)
		ret = -errno;
	if (fclose(w->f) && !ret)
		ret = -errno;
	w->f = NULL;
	free_compression(w);
	return ret;
}

void hgcor_abort(struct hgcor_writer *w)
{
	if (w->f)
		fclose(w->f);
	w->f = NULL;
	free_compression(w);
}

/* ---- reading ---- */

const char *hgcor_strerror(int err)
{
	switch (err) {
	case HGCOR_OK:
		return "no error";
	case HGCOR_E_SHORT:
		return "file too short to be a correlation file";
	case HGCOR_E_MAGIC:
		return "not an hgclock correlation file (bad magic)";
	case HGCOR_E_VERSION:
		return "written by a newer hgclock (file format major version is newer)";
	case HGCOR_E_HEADER:
		return "file header is damaged";
	case HGCOR_E_TRUNCATED:
		return "file is truncated inside a section";
	case HGCOR_E_SECTION_CRC:
		return "a section header is damaged (CRC mismatch)";
	case HGCOR_E_PAYLOAD_CRC:
		return "a section's data is damaged (CRC mismatch)";
	case HGCOR_E_TOO_BIG:
		return "a section is larger than any hgclock writes";
	case HGCOR_E_UNKNOWN:
		return "a required section of an unknown type";
	case HGCOR_E_CONTENT:
		return "a section's content is malformed";
	case HGCOR_E_NO_END:
		return "file has no END section: the recording did not finish";
	case HGCOR_E_RANGE:
		return hgcor_range_reason();
	case HGCOR_E_DECOMPRESS:
		return "a compressed section is damaged (not one zstd frame of its recorded size)";
	case HGCOR_E_NO_ZSTD:
		return "a compressed (zstd) section, and this hgclock was built without libzstd";
	case HGCOR_E_NOMEM:
		return "out of memory for a decompressed section";
	default:
		return "unknown error";
	}
}

int hgcor_open(struct hgcor_reader *r, const void *buf, size_t len)
{
	memset(r, 0, sizeof(*r));
	r->buf = buf;
	r->len = len;
	if (len < sizeof(r->hdr))
		return len >= 8 && memcmp(buf, HGCOR_MAGIC, 8) ? HGCOR_E_MAGIC : HGCOR_E_SHORT;
	memcpy(&r->hdr, buf, sizeof(r->hdr));
	if (memcmp(r->hdr.magic, HGCOR_MAGIC, 8))
		return HGCOR_E_MAGIC;
	if (r->hdr.version_major > HGCOR_VERSION_MAJOR)
		return HGCOR_E_VERSION;
	if (r->hdr.version_major != HGCOR_VERSION_MAJOR ||
	    r->hdr.header_size < sizeof(r->hdr) || r->hdr.header_size > len ||
	    r->hdr.header_size % 8 ||
	    r->hdr.section_header_size != sizeof(struct hgcor_section) ||
	    r->hdr.flags || r->hdr.header_crc != header_crc(&r->hdr))
		return HGCOR_E_HEADER;
	r->pos = r->hdr.header_size;
	return HGCOR_OK;
}

/* Per type: the smallest payload and how its content is checked. */
static int check_content(uint32_t type, const uint8_t *p, uint64_t len)
{
	switch (type) {
	case HGCOR_SEC_HOST_INFO:
		return len >= HGCLOCK_INFO_SIZE_VER0 ? HGCOR_OK : HGCOR_E_CONTENT;
	case HGCOR_SEC_GUEST_INFO:
		return len >= 8 + HGCLOCK_INFO_SIZE_VER0 ? HGCOR_OK : HGCOR_E_CONTENT;
	case HGCOR_SEC_HOST_RECORDS:
		return hgcor_walk_records(p, len, NULL, NULL);
	case HGCOR_SEC_GUEST_RECORDS:
		if (len < 8)
			return HGCOR_E_CONTENT;
		return hgcor_walk_records(p + 8, len - 8, NULL, NULL);
	case HGCOR_SEC_NOTE:
		return HGCOR_OK;
	case HGCOR_SEC_PROBES:
		return len >= 8 && (len - 8) % sizeof(struct hgcor_probe) == 0 ?
			HGCOR_OK : HGCOR_E_CONTENT;
	case HGCOR_SEC_GUEST_VM:
		return len == sizeof(struct hgcor_guest_vm) ? HGCOR_OK : HGCOR_E_CONTENT;
	case HGCOR_SEC_SEGMENTS:
		return len % sizeof(struct hgcor_segment) == 0 ? HGCOR_OK : HGCOR_E_CONTENT;
	case HGCOR_SEC_END:
		return len == 8 ? HGCOR_OK : HGCOR_E_CONTENT;
	case HGCOR_SEC_CPU_MAP:
		return len >= 8 && (len - 8) % sizeof(struct hgcor_cpu_apic) == 0 ?
			HGCOR_OK : HGCOR_E_CONTENT;
	case HGCOR_SEC_GUEST_IDENTITY:
		/* The strings' form is corr_check.c's (HGCOR_E_RANGE). */
		return len == 8 + sizeof(struct hgcor_identity) ? HGCOR_OK : HGCOR_E_CONTENT;
	case HGCOR_SEC_DISRUPTION:
		/* Its values' ranges are corr_check.c's (HGCOR_E_RANGE). */
		return len == sizeof(struct hgcor_disruption) ? HGCOR_OK : HGCOR_E_CONTENT;
	default:
		return HGCOR_OK;
	}
}

void hgcor_release(struct hgcor_reader *r)
{
	free(r->raw);
	r->raw = NULL;
#ifndef HGCLOCK_NO_ZSTD
	ZSTD_freeDCtx(r->zdctx);
#endif
	r->zdctx = NULL;
}

/*
 * Replaces the view of a ZSTD section (its stored payload, CRC checked)
 * by the section it holds, decompressed into r->raw.  Nothing in the
 * frame is trusted: the size comes from the header, is capped before any
 * allocation, and must be both the frame's declared content size and
 * what decompressing it yields; the frame must fill the payload exactly.
 */
static int unpack_zstd(struct hgcor_reader *r, struct hgcor_view *v)
{
	struct hgcor_zstd_header zh;
	const uint8_t *frame = v->payload + sizeof(zh);
	uint64_t frame_len;

	if (v->length < sizeof(zh))
		return HGCOR_E_CONTENT;
	memcpy(&zh, v->payload, sizeof(zh));
	frame_len = v->length - sizeof(zh);
	if (zh.type == HGCOR_SEC_END || zh.type == HGCOR_SEC_ZSTD)
		return HGCOR_E_CONTENT;
	/* A zip bomb: more than any section, or than this frame can hold. */
	if (zh.raw_length > HGCOR_MAX_SECTION ||
	    zh.raw_length > frame_len * HGCOR_ZSTD_MAX_RATIO)
		return HGCOR_E_TOO_BIG;
#ifdef HGCLOCK_NO_ZSTD
	(void)r;
	(void)frame;
	return HGCOR_E_NO_ZSTD;
#else
	{
		unsigned long long declared = ZSTD_getFrameContentSize(frame, frame_len);
		size_t n = ZSTD_findFrameCompressedSize(frame, frame_len);

		/* One frame, declaring raw_length, and nothing after it. */
		if (declared == ZSTD_CONTENTSIZE_ERROR || declared == ZSTD_CONTENTSIZE_UNKNOWN ||
		    declared != zh.raw_length || ZSTD_isError(n) || n != frame_len)
			return HGCOR_E_DECOMPRESS;
		if (!r->zdctx) {
			r->zdctx = ZSTD_createDCtx();
			if (!r->zdctx)
				return HGCOR_E_NOMEM;
		}
		r->raw = malloc(zh.raw_length ? zh.raw_length : 1);
		if (!r->raw)
			return HGCOR_E_NOMEM;
		n = ZSTD_decompressDCtx(r->zdctx, r->raw, zh.raw_length, frame, frame_len);
		if (ZSTD_isError(n) || n != zh.raw_length)
			return HGCOR_E_DECOMPRESS;
	}
	v->type = zh.type;
	v->flags = zh.flags;
	v->payload = r->raw;
	v->length = zh.raw_length;
	v->encoding = HGCOR_ENC_ZSTD;
	return HGCOR_OK;
#endif
}

static int next_section(struct hgcor_reader *r, struct hgcor_view *v)
{
	struct hgcor_section s;
	uint64_t padded;
	int ret;

	if (r->seen_end)
		return 0;
	if (r->pos == r->len)
		return HGCOR_E_NO_END;
	if (r->len - r->pos < sizeof(s))
		return HGCOR_E_TRUNCATED;
	memcpy(&s, r->buf + r->pos, sizeof(s));
	if (s.header_crc != hgcor_crc32(0, &s, offsetof(struct hgcor_section, header_crc)))
		return HGCOR_E_SECTION_CRC;
	if (s.length > HGCOR_MAX_SECTION)
		return HGCOR_E_TOO_BIG;
	padded = (s.length + 7) & ~7ull;
	if (padded > r->len - r->pos - sizeof(s))
		return HGCOR_E_TRUNCATED;
	v->type = s.type;
	v->flags = s.flags;
	v->offset = r->pos;
	v->payload = r->buf + r->pos + sizeof(s);
	v->length = s.length;
	v->stored_length = s.length;
	v->encoding = HGCOR_ENC_NONE;
	/* Over the stored bytes: a damaged frame is found before it is decompressed. */
	if (s.payload_crc != hgcor_crc32(0, v->payload, s.length))
		return HGCOR_E_PAYLOAD_CRC;
	/* Padding is zero: then every byte of the file is checked. */
	for (uint64_t i = s.length; i < padded; i++)
		if (v->payload[i])
			return HGCOR_E_CONTENT;
	if ((s.type == 0 || s.type > HGCOR_SEC_MAX) && !(s.flags & HGCOR_SEC_OPTIONAL))
		return HGCOR_E_UNKNOWN;
	if (s.type == HGCOR_SEC_ZSTD) {
		ret = unpack_zstd(r, v);
		if (ret)
			return ret;
		/* The inner section's type and flags, as for a section stored plain. */
		if ((v->type == 0 || v->type > HGCOR_SEC_MAX) &&
		    !(v->flags & HGCOR_SEC_OPTIONAL))
			return HGCOR_E_UNKNOWN;
	}
	ret = check_content(v->type, v->payload, v->length);
	if (!ret)
		ret = hgcor_check_values2(v->type, v->payload, v->length, r->pos,
					  v->encoding != HGCOR_ENC_NONE);
	if (ret)
		return ret;
	if (v->type == HGCOR_SEC_END) {
		uint64_t n;

		memcpy(&n, v->payload, 8);
		if (n != r->nr_sections)
			return HGCOR_E_CONTENT;
		r->seen_end = 1;
	}
	r->pos += sizeof(s) + padded;
	r->nr_sections++;
	return 1;
}

int hgcor_next(struct hgcor_reader *r, struct hgcor_view *v)
{
	int ret;

	/* The previous section's decompressed payload: its view ends here. */
	free(r->raw);
	r->raw = NULL;
	ret = next_section(r, v);
	/* At END, the end of the file or an error nothing more is read. */
	if (ret <= 0 || r->seen_end)
		hgcor_release(r);
	return ret;
}
