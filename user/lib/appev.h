/* SPDX-License-Identifier: LGPL-2.1 */
/*
 * Application event files: what hgclock_events_open(3) writes and
 * hgclock merge reads (--app, --guest-app).  Documentation/library.rst,
 * "Application events", is the format's specification; this header is
 * its one definition in code, for the writer (events.c) and the reader
 * (appev.c) alike.
 *
 * All integers are little-endian (the file is written on x86 only, but
 * the reader does not rely on that).  The file is a 128-byte header and
 * then records, each a multiple of 8 bytes:
 *
 *   header  0  magic "HGCLKEVT"
 *           8  u32 version (1)        12 u32 header_size (>= 128)
 *          16  u32 clock (HGEV_CLOCK_*)  20 u32 flags (0)
 *          24  u32 pid                28 u32 reserved (0)
 *          32  comm[16]  the process's name, NUL-padded
 *          48  nodename[72]  uname's nodename, NUL-padded
 *         120  u64 reserved (0)
 *   record  0  u16 size (24 + name + text, rounded up to 8)
 *           2  u8 kind (HGEV_KIND_*)   3 u8 flags (HGEV_REC_*)
 *           4  u32 cpu (the CPU the stamp was read on: RDTSCP's)
 *           8  u64 ts (ns of the header's clock, on that CPU)
 *          16  u32 tid                20 u16 name_len  22 u16 text_len
 *          24  name (name_len bytes), text (text_len bytes), zeroes
 *
 * Order: the writer reads the clock and appends under one lock, so the
 * records are in the order they were stamped; one CPU's stamps never go
 * back (the kernel's clocks are monotonic per CPU), so each CPU's
 * records are in time order, which the reader checks.
 */
#ifndef HGCLOCK_APPEV_H
#define HGCLOCK_APPEV_H

#include <stdint.h>
#include <stdio.h>

#define HGEV_MAGIC		"HGCLKEVT"
#define HGEV_VERSION		1
#define HGEV_HEADER_SIZE	128
#define HGEV_HEADER_MAX		4096	/* a later version's longer header, skipped */
#define HGEV_REC_HEADER		24
#define HGEV_NAME_MAX		255
#define HGEV_TEXT_MAX		1023
/* 24 + 255 + 1023 rounded up to 8 */
#define HGEV_REC_MAX		1304
/* A CPU number beyond this is damage, not a machine (the kernel's NR_CPUS is 8192). */
#define HGEV_MAX_CPUS		8192

/* The header's clock: hgclock's names (hgclock_clock_parse()). */
#define HGEV_CLOCK_PERF		1	/* local_clock(): ftrace "perf", perf's default */
#define HGEV_CLOCK_LOCAL	2	/* sched_clock(): ftrace "local" */

#define HGEV_KIND_INSTANT	1
#define HGEV_KIND_BEGIN		2
#define HGEV_KIND_END		3

/* The record's stamp came from an exact user-space conversion... */
#define HGEV_REC_EXACT		(1u << 0)
/* ...or from the kernel through the ioctl fallback. */
#define HGEV_REC_SYSCALL	(1u << 1)

struct hgev_header {
	uint32_t version;
	uint32_t clock;		/* HGEV_CLOCK_* */
	uint32_t pid;
	char comm[17];		/* NUL-terminated, control characters as '?' */
	char nodename[73];
};

/* One record as read: name and text NUL-terminated, control characters as '?'. */
struct hgev_rec {
	uint64_t ts;
	uint32_t cpu, tid;
	uint8_t kind, flags;
	uint16_t name_len, text_len;
	uint16_t size;		/* its bytes in the file, padding included */
	char name[HGEV_NAME_MAX + 1];
	char text[HGEV_TEXT_MAX + 1];
};

/* The name of an HGEV_CLOCK_* in hgclock's words ("perf", "local"), or NULL. */
const char *hgev_clock_name(uint32_t clock);

/*
 * Writes all @len bytes of @buf to @fd, through short writes and signals:
 * 0, or -errno (-EIO for a write of 0 bytes).  The one write loop of the
 * event files' writers (the library's, merge's conversion of perf).
 */
int hgev_write_all(int fd, const void *buf, size_t len);

/* Encodes the header into @buf (HGEV_HEADER_SIZE bytes). */
void hgev_encode_header(unsigned char *buf, uint32_t clock, uint32_t pid, const char *comm,
			const char *nodename);

/*
 * Encodes one record into @buf (room for HGEV_REC_MAX bytes); returns
 * its size, or 0 for a kind, name or text out of range (an empty name,
 * longer than HGEV_NAME_MAX, text longer than HGEV_TEXT_MAX).
 */
size_t hgev_encode_record(unsigned char *buf, unsigned int kind, unsigned int flags,
			  uint32_t cpu, uint64_t ts, uint32_t tid, const char *name,
			  const char *text);

/* The same with the lengths known (the writer measured them to check them). */
size_t hgev_encode_record_len(unsigned char *buf, unsigned int kind, unsigned int flags,
			      uint32_t cpu, uint64_t ts, uint32_t tid, const char *name,
			      size_t name_len, const char *text, size_t text_len);

/*
 * Reads and checks the header of @f, leaving it at the first record.
 * 0, or -1 with the reason in @err.
 */
int hgev_read_header(FILE *f, struct hgev_header *h, char *err, size_t err_len);

/*
 * Reads and checks the next record.  1: one in *@r; 0: the end of the
 * file; -1: a damaged record (@err says which, at which offset); -2: the
 * file ends inside a record (a writer that did not finish: @err says how
 * many bytes are left over).
 */
int hgev_read_record(FILE *f, struct hgev_rec *r, char *err, size_t err_len);

#endif /* HGCLOCK_APPEV_H */
