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
#define HGCOR_VERSION_MINOR	5	/* readers accept any minor; 1.1: probes, segments; */
					/* 1.2: CPU_MAP; 1.3: GUEST_IDENTITY; 1.4: ZSTD; */
					/* 1.5: DISRUPTION */
#define HGCOR_MAX_SECTION	(64u << 20)	/* bytes of one payload, also uncompressed */

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
#define HGCOR_SEC_CPU_MAP	10	/* u32 guest id, u32 0, struct hgcor_cpu_apic[] */
#define HGCOR_SEC_GUEST_IDENTITY 11	/* u32 guest id, u32 0, struct hgcor_identity */
#define HGCOR_SEC_ZSTD		12	/* struct hgcor_zstd_header, one zstd frame */
#define HGCOR_SEC_DISRUPTION	13	/* struct hgcor_disruption (1.5, optional) */
#define HGCOR_SEC_MAX		13

/*
 * A compressed section (format 1.4): the payload of an HGCOR_SEC_ZSTD
 * section starts with this header, then holds one zstd frame whose
 * content is the payload of a section of type @type.  The section header's
 * length is the stored size (this header and the frame), its payload_crc
 * covers those stored bytes: damage is found before anything is
 * decompressed.  The section header's own type is ZSTD and its flags 0,
 * so a reader older than 1.4 refuses the file (an unknown required
 * section) rather than misread it; @flags are the inner section's
 * (HGCOR_SEC_OPTIONAL).  16 bytes, so the frame stays 8-byte aligned.
 */
struct hgcor_zstd_header {
	uint32_t type;			/* the inner section's type: not END, not ZSTD */
	uint32_t flags;			/* the inner section's flags */
	uint64_t raw_length;		/* its payload bytes: the frame's content size */
};

/*
 * The reader's limit on a compressed section: raw_length at most
 * HGCOR_MAX_SECTION and at most this many times the frame's size.  The
 * writer stores a section uncompressed when it would compress better.
 * Record batches compress 3 to 5 times; the cap bounds the memory and
 * time a small hostile file can cost (a "zip bomb").
 */
#define HGCOR_ZSTD_MAX_RATIO	64

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

/*
 * One guest CPU's APIC ID, as the agent read it (proto.h, CPU_MAP): KVM's
 * vcpu_id of the vCPU that is guest CPU @guest_cpu.  A CPU_MAP section
 * holds one per CPU that was online, CPUs rising; a later section for the
 * same guest (CPUs brought online since) adds to or replaces earlier
 * entries.  Without one, guest CPU n is taken to be vcpu_id n (sync.rst,
 * "vCPU identity").  16 bytes.
 */
struct hgcor_cpu_apic {
	uint32_t guest_cpu;
	uint32_t apic_id;		/* = KVM vcpu_id */
	uint32_t flags;			/* HGP_CPU_APIC_* of the agent (proto.h) */
	uint32_t reserved;		/* zero */
};

/*
 * Which machine guest @guest_id is, as its agent said (proto.h, IDENTITY,
 * 1.3): the payload of a GUEST_IDENTITY section after the u32 guest id and
 * u32 0.  The same layout as struct hgp_identity; each field NUL
 * terminated and NUL padded, "" when the guest could not read it.
 * `hgclock merge` compares the nodename with a guest trace's.  152 bytes.
 */
struct hgcor_identity {
	char nodename[72];		/* uname nodename, 1 to 64 characters */
	char machine_id[40];		/* /etc/machine-id, 32 hex digits, or "" */
	char boot_id[40];		/* kernel boot id (UUID), or "" */
};

/* hgcor_disruption.kind */
#define HGCOR_DISRUPT_RECONNECT	1	/* the same VM process: only the session broke */
#define HGCOR_DISRUPT_MIGRATION	2	/* another VM process, -incoming from a socket */
#define HGCOR_DISRUPT_RESTORE	3	/* another VM process, -incoming from a file/exec */
#define HGCOR_DISRUPT_NEW_VM	4	/* another VM process, how it came unknown */
#define HGCOR_DISRUPT_GONE	5	/* never came back within --follow-timeout */
#define HGCOR_DISRUPT_REBOOT	6	/* it came back with another boot id: a new boot */
#define HGCOR_DISRUPT_KIND_MAX	6

/* hgcor_disruption.flags */
#define HGCOR_DISRUPT_JUMP_KNOWN (1u << 0) /* guest_*_jump and jump_bound_ns measured */

/* hgcor_disruption.next_guest_id when nothing follows (GONE) */
#define HGCOR_NO_GUEST		0xffffffffu

/*
 * A guest's session ended and the recorder followed the guest (format
 * 1.5, sync.rst "Migration and restore"): guest @guest_id (one
 * incarnation: one VM process, one agent session) ended, and guest
 * @next_guest_id, a later id of this file, is the same machine again (the
 * same boot id), in VM process @new_vm_pid.  Its sections come after
 * this one.  Host times: when the recorder found the session over
 * (@host_tsc_lost, @host_local_ns_lost, the host's ftrace local clock)
 * and when the new session's HELLO was answered (@host_tsc_back; 0 when
 * GONE).  The jump, when JUMP_KNOWN: how far the guest's clocks moved
 * against the host's across the disruption, (guest - host) after minus
 * before, from the last probe before and the first after (their round
 * trips: @jump_bound_ns); the exact TSC jump, where KVM's offsets are
 * recorded, is the difference of the two VMs' offsets (hgclock dump
 * prints it).  96 bytes.
 */
struct hgcor_disruption {
	uint32_t guest_id;
	uint32_t next_guest_id;		/* HGCOR_NO_GUEST: it never came back */
	uint32_t kind;			/* HGCOR_DISRUPT_* */
	uint32_t flags;			/* HGCOR_DISRUPT_JUMP_KNOWN */
	int32_t old_vm_pid;		/* -1 when unknown */
	int32_t new_vm_pid;		/* -1 when unknown or GONE */
	uint32_t old_cid;		/* vsock CIDs, 0 for TCP */
	uint32_t new_cid;
	uint64_t host_tsc_lost;
	uint64_t host_local_ns_lost;
	uint64_t host_tsc_back;
	uint64_t host_local_ns_back;
	int64_t guest_tsc_jump;		/* guest TSC counts minus host TSC counts */
	int64_t guest_local_jump_ns;	/* guest local clock ns minus host's */
	uint64_t jump_bound_ns;		/* |error| of guest_local_jump_ns */
	uint64_t reserved;		/* zero */
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
	int32_t vcpu_id;		/* the guest CPU number (CPU_MAP: not KVM's id) */
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
/* The same CRC one byte a step: the reference for tests and benchmarks. */
uint32_t hgcor_crc32_bytewise(uint32_t crc, const void *buf, size_t len);

/* ---- writing ---- */

/* hgcor_writer.compress */
#define HGCOR_COMPRESS_NONE	0
#define HGCOR_COMPRESS_ZSTD	1

struct hgcor_writer {
	FILE *f;
	uint64_t nr_sections;
	uint64_t bytes;			/* written to the file */
	/*
	 * Compression (hgcor_set_compression(); zero: none).  Statistics of
	 * what was compressed: the payloads before and after (header
	 * included), for `record`'s summary and the benchmark.
	 */
	int compress;
	void *zcctx;			/* ZSTD_CCtx, created on first use */
	void *zbuf;			/* the stored payload being built */
	size_t zbuf_cap;
	uint64_t raw_bytes;		/* payload bytes given to the writer */
	uint64_t stored_bytes;		/* payload bytes stored for them */
};

/* Creates @path (truncating) and writes the file header. -errno on error. */
int hgcor_create(struct hgcor_writer *w, const char *path);
/*
 * HGCOR_COMPRESS_ZSTD: from now on, sections of records and probes
 * (HOST_RECORDS, GUEST_RECORDS, PROBES) are stored as ZSTD sections when
 * that makes them smaller.  -ENOTSUP in a build without libzstd.
 */
int hgcor_set_compression(struct hgcor_writer *w, int compress);
/* Whether this build can read and write ZSTD sections. */
int hgcor_have_zstd(void);
/* Appends one section and flushes it to the file. */
int hgcor_write_section(struct hgcor_writer *w, uint32_t type, uint32_t flags,
			const void *payload, size_t len);
/* Same with a payload in two parts (a small prefix, then data). */
int hgcor_write_section2(struct hgcor_writer *w, uint32_t type, uint32_t flags,
			 const void *p1, size_t l1, const void *p2, size_t l2);
/* Writes the END section and closes (also frees the compression state). */
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
	HGCOR_E_RANGE,		/* a value no recording can hold (corr_check.h) */
	HGCOR_E_DECOMPRESS,	/* a ZSTD section's frame is not its recorded content */
	HGCOR_E_NO_ZSTD,	/* a ZSTD section, and this build has no libzstd */
	HGCOR_E_NOMEM,		/* no memory for a decompressed section */
};

const char *hgcor_strerror(int err);

struct hgcor_reader {
	const uint8_t *buf;	/* the whole file */
	size_t len;
	size_t pos;		/* next section header */
	struct hgcor_file_header hdr;
	uint64_t nr_sections;
	int seen_end;
	/*
	 * A ZSTD section's payload, decompressed: owned by the reader, valid
	 * until the next hgcor_next() or hgcor_release() (freed there, not
	 * reused, so that a use after it is an ASan error, not stale data).
	 */
	uint8_t *raw;
	void *zdctx;		/* ZSTD_DCtx, created on first use */
};

/* hgcor_view.encoding: how the section is stored */
#define HGCOR_ENC_NONE		0
#define HGCOR_ENC_ZSTD		1

/*
 * A section as read.  For a ZSTD section, @type, @flags, @payload and
 * @length are the inner (decompressed) section's, and @payload points into
 * the reader's buffer (see hgcor_reader.raw); otherwise into the file.
 */
struct hgcor_view {
	uint32_t type;
	uint32_t flags;
	uint64_t offset;	/* of the section header in the file */
	const uint8_t *payload;
	uint64_t length;
	uint64_t stored_length;	/* payload bytes in the file (= length if not compressed) */
	uint32_t encoding;	/* HGCOR_ENC_* */
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
/*
 * Frees what the reader allocated (a decompressed payload, the zstd
 * context); the views it returned are invalid after it.  hgcor_next()
 * does this itself when it returns 0 or an error; a caller that stops
 * earlier calls it.  Safe to call more than once.
 */
void hgcor_release(struct hgcor_reader *r);

/* Walks the ring records in a *_RECORDS payload (after any prefix): corr_rec.c. */
typedef int (*hgcor_rec_fn)(const void *rec, size_t size, void *ctx);
int hgcor_walk_records(const uint8_t *p, size_t len, hgcor_rec_fn fn, void *ctx);

#endif /* HGCLOCK_CORR_H */
