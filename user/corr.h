/* SPDX-License-Identifier: LGPL-2.1 */
/*
 * The correlation file: what `hgclock record` writes and `hgclock dump`
 * (and later `hgclock merge`) read.  Documentation/file-format.rst is the
 * reference; this header is its implementation.
 *
 * Layout: a 64-byte file header, then sections, each a 24-byte section
 * header and its payload padded to 8 bytes.  Every section header and
 * payload carries a CRC-32, so a reader can tell a file cut short or
 * damaged from a valid one, and say where.  All integers little endian.
 */
#ifndef HGCLOCK_CORR_H
#define HGCLOCK_CORR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define HGCOR_MAGIC		"HGCLKCOR"
#define HGCOR_VERSION_MAJOR	1	/* readers reject a larger major */
#define HGCOR_VERSION_MINOR	0	/* readers accept any minor */
#define HGCOR_MAX_SECTION	(64u << 20)	/* bytes of one payload */

struct hgcor_file_header {
	char magic[8];			/* HGCOR_MAGIC, not NUL terminated */
	uint16_t version_major;
	uint16_t version_minor;
	uint32_t header_size;		/* 64; a later minor may grow it */
	uint64_t created_realtime_ns;	/* CLOCK_REALTIME at creation */
	uint32_t section_header_size;	/* 24 */
	uint32_t flags;			/* zero */
	uint32_t header_crc;		/* CRC-32 of the 64 bytes, this field 0 */
	uint8_t reserved[28];		/* zero */
};

/* hgcor_section.flags */
#define HGCOR_SEC_OPTIONAL	(1u << 0) /* a reader may skip it if unknown */

struct hgcor_section {
	uint32_t type;			/* HGCOR_SEC_* */
	uint32_t flags;
	uint64_t length;		/* payload bytes, without padding */
	uint32_t payload_crc;		/* CRC-32 of the payload */
	uint32_t header_crc;		/* CRC-32 of the 20 bytes before */
};

/* Section types */
#define HGCOR_SEC_HOST_INFO	1	/* struct hgclock_info of the host */
#define HGCOR_SEC_HOST_RECORDS	2	/* host ring records, back to back */
#define HGCOR_SEC_GUEST_INFO	3	/* u32 guest id, u32 0, hgclock_info */
#define HGCOR_SEC_GUEST_RECORDS	4	/* u32 guest id, u32 0, ring records */
#define HGCOR_SEC_NOTE		5	/* UTF-8 text (command line, host name) */
#define HGCOR_SEC_END		6	/* u64 sections before it: a clean close */
#define HGCOR_SEC_MAX		6

uint32_t hgcor_crc32(uint32_t crc, const void *buf, size_t len);

/* ---- writing ---- */

struct hgcor_writer {
	FILE *f;
	uint64_t nr_sections;
	uint64_t bytes;
};

/* Creates @path (truncating) and writes the file header. -errno on error. */
int hgcor_create(struct hgcor_writer *w, const char *path);
/* Appends one section and flushes it to the file. */
int hgcor_write_section(struct hgcor_writer *w, uint32_t type, uint32_t flags,
			const void *payload, size_t len);
/* Same with a payload in two parts (a small prefix, then data). */
int hgcor_write_section2(struct hgcor_writer *w, uint32_t type, uint32_t flags,
			 const void *p1, size_t l1, const void *p2, size_t l2);
/* Writes the END section and closes. */
int hgcor_close(struct hgcor_writer *w);
/* Closes without END: readers will say the recording did not finish. */
void hgcor_abort(struct hgcor_writer *w);

/* ---- reading ---- */

/* Reader errors: hgcor_strerror() explains them. */
enum hgcor_err {
	HGCOR_OK = 0,
	HGCOR_E_SHORT = -1000,	/* shorter than a file header */
	HGCOR_E_MAGIC,		/* not a correlation file */
	HGCOR_E_VERSION,	/* a newer major version */
	HGCOR_E_HEADER,		/* file header damaged (CRC, sizes, flags) */
	HGCOR_E_TRUNCATED,	/* ends inside a section */
	HGCOR_E_SECTION_CRC,	/* a section header fails its CRC */
	HGCOR_E_PAYLOAD_CRC,	/* a payload fails its CRC */
	HGCOR_E_TOO_BIG,	/* a section longer than HGCOR_MAX_SECTION */
	HGCOR_E_UNKNOWN,	/* an unknown section not marked optional */
	HGCOR_E_CONTENT,	/* a known section with malformed content */
	HGCOR_E_NO_END,		/* no END section: the writer did not finish */
};

const char *hgcor_strerror(int err);

struct hgcor_reader {
	const uint8_t *buf;	/* the whole file */
	size_t len;
	size_t pos;		/* next section header */
	struct hgcor_file_header hdr;
	uint64_t nr_sections;
	int seen_end;
};

struct hgcor_view {
	uint32_t type;
	uint32_t flags;
	uint64_t offset;	/* of the section header in the file */
	const uint8_t *payload;
	uint64_t length;
};

/* Validates the file header of @buf/@len. */
int hgcor_open(struct hgcor_reader *r, const void *buf, size_t len);
/*
 * The next section in @v: 1, or 0 at a clean end of file (after END),
 * or a negative hgcor_err.  Content of known sections is checked too
 * (record streams walk cleanly, sizes fit); unknown optional sections
 * are returned with their type for the caller to skip.
 */
int hgcor_next(struct hgcor_reader *r, struct hgcor_view *v);

/* Walks the ring records in a *_RECORDS payload (after any prefix). */
typedef int (*hgcor_rec_fn)(const void *rec, size_t size, void *ctx);
int hgcor_walk_records(const uint8_t *p, size_t len, hgcor_rec_fn fn, void *ctx);

#endif /* HGCLOCK_CORR_H */
