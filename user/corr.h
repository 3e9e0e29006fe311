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
#define HGCOR_VERSION_MINOR	1	/* readers accept any minor; 1.1: probes, segments */
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
#define HGCOR_SEC_PROBES	7	/* u32 guest id, u32 0, struct hgcor_probe[] */
#define HGCOR_SEC_GUEST_VM	8	/* struct hgcor_guest_vm */
#define HGCOR_SEC_SEGMENTS	9	/* struct hgcor_segment[]: the mapping chosen */
#define HGCOR_SEC_MAX		9

/*
 * One clock probe (see proto.h): the host's TSC and sched_clock right
 * before it sent the request and right after the reply arrived, and the
 * guest's reading in between.  64 bytes.
 */
struct hgcor_probe {
	uint64_t host_tsc_send;
	uint64_t host_ns_send;		/* host sched_clock at host_tsc_send */
	uint64_t host_tsc_recv;
	uint64_t host_ns_recv;
	uint64_t guest_tsc;
	uint64_t guest_sched_ns;	/* guest sched_clock at guest_tsc */
	uint64_t guest_local_ns;	/* guest local_clock (HGP_PROBE_HAS_LOCAL) */
	uint16_t host_cpu_send;
	uint16_t host_cpu_recv;
	uint16_t guest_cpu;
	uint16_t flags;			/* HGP_PROBE_* of the reply */
};

/* hgcor_guest_vm.how */
#define HGCOR_VM_UNKNOWN	0	/* no VM found: probes only */
#define HGCOR_VM_BY_CID		1	/* the qemu whose command line has guest-cid=CID */
#define HGCOR_VM_BY_OPTION	2	/* --guest SPEC,vm=PID */

/* Which process on the host runs guest @guest_id.  32 bytes. */
struct hgcor_guest_vm {
	uint32_t guest_id;
	int32_t vm_pid;			/* -1 when unknown */
	uint32_t how;			/* HGCOR_VM_* */
	uint32_t cid;			/* vsock CID, 0 for TCP */
	char spec[16];			/* --guest argument, cut, NUL terminated */
};

/* hgcor_segment.method */
#define HGCOR_METHOD_KVM_EXACT	1	/* KVM's TSC offset/scaling, chained conversions */
#define HGCOR_METHOD_PROBE	2	/* fitted from bracketed probes */
#define HGCOR_METHOD_EXIT	3	/* fitted from exit pairings (same form as PROBE) */

/* hgcor_segment.clock: which guest clock the segment maps */
#define HGCOR_CLOCK_TSC		1	/* x86-tsc: guest TSC -> host TSC */
#define HGCOR_CLOCK_SCHED	2	/* ftrace "local": guest sched_clock -> host's */

/*
 * One piece of the guest-to-host mapping, for the host TSC span
 * [host_tsc_start, host_tsc_end) and the same span of the guest's clock
 * @clock, [guest_start, guest_end) (the first segment of a vCPU starts
 * at 0, the last ends at UINT64_MAX: before and after what was observed,
 * the mapping in force then is assumed).  112 bytes.
 *
 * KVM_EXACT (clock TSC; the other clocks chain the guest's and the host's
 * conversions around it), per vCPU:
 *	guest_tsc = ((host_tsc * tsc_ratio) >> tsc_frac_bits) + tsc_offset
 *
 * PROBE and EXIT, for clock @clock of vCPU @vcpu_id (-1: every vCPU):
 *	d = guest - ref_guest                       (signed)
 *	host = ref_host + d + ((__int128)d * rate_q48 >> 48)
 * with |error| <= bound_ns inside the probed span (sync.rst).
 */
struct hgcor_segment {
	uint32_t guest_id;
	int32_t vcpu_id;
	uint32_t method;		/* HGCOR_METHOD_* */
	uint32_t clock;			/* HGCOR_CLOCK_* */
	uint64_t host_tsc_start;
	uint64_t host_tsc_end;		/* UINT64_MAX: open */
	uint64_t guest_start;
	uint64_t guest_end;		/* UINT64_MAX: open */
	uint64_t tsc_offset;
	uint64_t tsc_ratio;
	uint32_t tsc_frac_bits;
	uint32_t nr_samples;		/* probes used (PROBE), agreeing (KVM) */
	uint64_t ref_guest;
	uint64_t ref_host;
	int64_t rate_q48;
	uint64_t bound_ns;		/* 0 for KVM_EXACT on the TSC */
	uint64_t reserved;		/* zero */
};

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
