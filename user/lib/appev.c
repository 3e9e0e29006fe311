// SPDX-License-Identifier: LGPL-2.1
/*
 * Application event files (appev.h): encoding for the writer, checked
 * decoding for hgclock merge.  A file comes from an application, maybe
 * from a guest: every field is range-checked before anything uses it.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "appev.h"

/*
 * Stores little-endian: a plain copy where the CPU is (x86, the only
 * place the writer runs: an event's encoding is on its hot path), bytes
 * one by one elsewhere.
 */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HGEV_PUT(p, v)	memcpy((p), &(v), sizeof(v))
#else
#define HGEV_PUT(p, v)	do {					\
		for (size_t _i = 0; _i < sizeof(v); _i++)	\
			(p)[_i] = (unsigned char)((v) >> (8 * _i)); \
	} while (0)
#endif

static void put_le16(unsigned char *p, uint16_t v)
{
	HGEV_PUT(p, v);
}

static void put_le32(unsigned char *p, uint32_t v)
{
	HGEV_PUT(p, v);
}

static void put_le64(unsigned char *p, uint64_t v)
{
	HGEV_PUT(p, v);
}

static uint16_t get_le16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get_le32(const unsigned char *p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint64_t get_le64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

const char *hgev_clock_name(uint32_t clock)
{
	switch (clock) {
	case HGEV_CLOCK_PERF:
		return "perf";
	case HGEV_CLOCK_LOCAL:
		return "local";
	default:
		return NULL;
	}
}

/* At most @size - 1 bytes of @s, NUL-padded to @size. */
static void put_str(unsigned char *p, size_t size, const char *s)
{
	size_t n = s ? strnlen(s, size - 1) : 0;

	memset(p, 0, size);
	if (n)
		memcpy(p, s, n);
}

int hgev_write_all(int fd, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	while (len) {
		ssize_t w = write(fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

void hgev_encode_header(unsigned char *buf, uint32_t clock, uint32_t pid, const char *comm,
			const char *nodename)
{
	memset(buf, 0, HGEV_HEADER_SIZE);
	memcpy(buf, HGEV_MAGIC, 8);
	put_le32(buf + 8, HGEV_VERSION);
	put_le32(buf + 12, HGEV_HEADER_SIZE);
	put_le32(buf + 16, clock);
	put_le32(buf + 24, pid);
	put_str(buf + 32, 16, comm);
	put_str(buf + 48, 72, nodename);
}

size_t hgev_encode_record(unsigned char *buf, unsigned int kind, unsigned int flags,
			  uint32_t cpu, uint64_t ts, uint32_t tid, const char *name,
			  const char *text)
{
	return hgev_encode_record_len(buf, kind, flags, cpu, ts, tid, name,
				      name ? strnlen(name, HGEV_NAME_MAX + 1) : 0, text,
				      text ? strnlen(text, HGEV_TEXT_MAX + 1) : 0);
}

size_t hgev_encode_record_len(unsigned char *buf, unsigned int kind, unsigned int flags,
			      uint32_t cpu, uint64_t ts, uint32_t tid, const char *name,
			      size_t name_len, const char *text, size_t text_len)
{
	size_t size;

	if (kind < HGEV_KIND_INSTANT || kind > HGEV_KIND_END || !name_len ||
	    name_len > HGEV_NAME_MAX || text_len > HGEV_TEXT_MAX || flags > 0xff)
		return 0;
	size = (HGEV_REC_HEADER + name_len + text_len + 7) & ~(size_t)7;
	put_le16(buf, (uint16_t)size);
	buf[2] = (unsigned char)kind;
	buf[3] = (unsigned char)flags;
	put_le32(buf + 4, cpu);
	put_le64(buf + 8, ts);
	put_le32(buf + 16, tid);
	put_le16(buf + 20, (uint16_t)name_len);
	put_le16(buf + 22, (uint16_t)text_len);
	memcpy(buf + HGEV_REC_HEADER, name, name_len);
	if (text_len)
		memcpy(buf + HGEV_REC_HEADER + name_len, text, text_len);
	memset(buf + HGEV_REC_HEADER + name_len + text_len, 0,
	       size - HGEV_REC_HEADER - name_len - text_len);
	return size;
}

/*
 * @n bytes of @src into @dst as a C string, control characters as '?':
 * names and text go into text lines and JSON, which they must not break.
 */
static void copy_clean(char *dst, const unsigned char *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = src[i] < 0x20 || src[i] == 0x7f ? '?' : (char)src[i];
	dst[n] = '\0';
}

int hgev_read_header(FILE *f, struct hgev_header *h, char *err, size_t err_len)
{
	unsigned char buf[HGEV_HEADER_SIZE];
	uint32_t size;
	size_t n;

	memset(h, 0, sizeof(*h));
	n = fread(buf, 1, sizeof(buf), f);
	if (n < 8 || memcmp(buf, HGEV_MAGIC, 8)) {
		snprintf(err, err_len, "not an hgclock application event file (no %s magic)",
			 HGEV_MAGIC);
		return -1;
	}
	if (n < sizeof(buf)) {
		snprintf(err, err_len, "truncated header (%zu of %d bytes)", n, HGEV_HEADER_SIZE);
		return -1;
	}
	h->version = get_le32(buf + 8);
	size = get_le32(buf + 12);
	h->clock = get_le32(buf + 16);
	h->pid = get_le32(buf + 24);
	if (h->version != HGEV_VERSION) {
		snprintf(err, err_len, "format version %u, this hgclock reads version %d: "
			 "a newer libhgclock wrote it", h->version, HGEV_VERSION);
		return -1;
	}
	if (size < HGEV_HEADER_SIZE || size > HGEV_HEADER_MAX || size % 8) {
		snprintf(err, err_len, "impossible header size %u", size);
		return -1;
	}
	if (!hgev_clock_name(h->clock)) {
		snprintf(err, err_len, "unknown clock %u in the header", h->clock);
		return -1;
	}
	copy_clean(h->comm, buf + 32, strnlen((const char *)buf + 32, 16));
	copy_clean(h->nodename, buf + 48, strnlen((const char *)buf + 48, 72));
	/* A longer header (a later minor revision): its tail is skipped. */
	for (uint32_t skip = size - HGEV_HEADER_SIZE; skip; skip--)
		if (getc(f) == EOF) {
			snprintf(err, err_len, "truncated header (%u bytes announced)", size);
			return -1;
		}
	return 0;
}

/*
 * Where a record began, @n bytes back from @f's position (-1: not
 * seekable), for the messages only: an ftell() per record is an lseek()
 * per record (stdio asks the kernel), which was most of the merge's time
 * on perf samples (Documentation/bench.rst, "perf samples").
 */
static long rec_offset(FILE *f, size_t n)
{
	long pos = ftell(f);

	return pos < 0 ? -1 : pos - (long)n;
}

int hgev_read_record(FILE *f, struct hgev_rec *r, char *err, size_t err_len)
{
	unsigned char buf[HGEV_REC_MAX];
	size_t n = fread(buf, 1, HGEV_REC_HEADER, f), size;

	if (!n)
		return ferror(f) ? (snprintf(err, err_len, "read error: %s", strerror(errno)), -1)
				 : 0;
	if (n < HGEV_REC_HEADER) {
		snprintf(err, err_len, "the file ends inside a record: %zu bytes at offset %ld "
			 "left over (the writer did not finish)", n, rec_offset(f, n));
		return -2;
	}
	size = get_le16(buf);
	r->kind = buf[2];
	r->flags = buf[3];
	r->cpu = get_le32(buf + 4);
	r->ts = get_le64(buf + 8);
	r->tid = get_le32(buf + 16);
	r->name_len = get_le16(buf + 20);
	r->text_len = get_le16(buf + 22);
	if (size < HGEV_REC_HEADER || size > HGEV_REC_MAX || size % 8 ||
	    r->kind < HGEV_KIND_INSTANT || r->kind > HGEV_KIND_END ||
	    !r->name_len || r->name_len > HGEV_NAME_MAX || r->text_len > HGEV_TEXT_MAX ||
	    HGEV_REC_HEADER + (size_t)r->name_len + r->text_len > size ||
	    r->cpu >= HGEV_MAX_CPUS) {
		snprintf(err, err_len, "damaged record at offset %ld (size %zu, kind %u, "
			 "name %u, text %u bytes, cpu %u)", rec_offset(f, HGEV_REC_HEADER), size,
			 r->kind, r->name_len, r->text_len, r->cpu);
		return -1;
	}
	n = fread(buf + HGEV_REC_HEADER, 1, size - HGEV_REC_HEADER, f);
	if (n < size - HGEV_REC_HEADER) {
		snprintf(err, err_len, "the file ends inside a record: %zu bytes at offset %ld "
			 "left over (the writer did not finish)", HGEV_REC_HEADER + n,
			 rec_offset(f, HGEV_REC_HEADER + n));
		return -2;
	}
	r->size = (uint16_t)size;
	copy_clean(r->name, buf + HGEV_REC_HEADER, r->name_len);
	copy_clean(r->text, buf + HGEV_REC_HEADER + r->name_len, r->text_len);
	return 1;
}
