/* SPDX-License-Identifier: LGPL-2.1 */
/*
 * The host/guest wire protocol of `hgclock record` (host) and
 * `hgclock agent` (guest), over vsock or TCP.  Documentation/protocol.rst.
 *
 * Every message: a 16-byte header, then at most HGP_MAX_PAYLOAD bytes.
 * Integers little endian (both ends are x86).  The host speaks first
 * (HELLO); a different major version is refused with an ERROR message
 * naming both versions.
 */
#ifndef HGCLOCK_PROTO_H
#define HGCLOCK_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include <linux/hgclock.h>

#define HGP_MAGIC		0x50434748u	/* "HGCP" */
#define HGP_VERSION_MAJOR	1
#define HGP_VERSION_MINOR	1	/* 1.1: PROBE/PROBE_REPLY */
#define HGP_DEFAULT_PORT	7007		/* vsock port and TCP port */
#define HGP_MAX_PAYLOAD		(1u << 20)

enum hgp_type {
	HGP_HELLO = 1,		/* host: struct hgp_hello */
	HGP_HELLO_REPLY = 2,	/* guest: struct hgp_hello, then hgclock_info */
	HGP_RECORDS = 3,	/* guest: ring records, back to back */
	HGP_BYE = 4,		/* either: orderly end, no payload */
	HGP_ERROR = 5,		/* either: UTF-8 text, then the connection ends */
	HGP_PROBE = 6,		/* host: struct hgp_probe (1.1) */
	HGP_PROBE_REPLY = 7,	/* guest: struct hgp_probe_reply (1.1) */
};
#define HGP_TYPE_MAX		HGP_PROBE_REPLY

struct hgp_header {
	uint32_t magic;
	uint16_t type;
	uint16_t flags;		/* zero */
	uint32_t length;	/* payload bytes */
	uint32_t reserved;	/* zero */
};

/* hgp_hello.flags (host's HELLO; zero in the reply) */
#define HGP_HELLO_PROBE_CHANNEL	(1u << 0) /* 1.1: this connection carries probes only */

struct hgp_hello {
	uint16_t major;
	uint16_t minor;
	uint32_t flags;		/* HGP_HELLO_*; a 1.0 agent ignores them */
};

/*
 * A clock probe: the host reads its clock, sends PROBE, and reads its clock
 * again when PROBE_REPLY arrives; the guest's reading inside the reply was
 * taken between the two (causality), which bounds the offset between the
 * clocks by the round trip.  Documentation/sync.rst.
 */
struct hgp_probe {
	uint64_t seq;		/* echoed in the reply */
};

/* hgp_probe_reply.flags */
#define HGP_PROBE_EXACT		(1u << 0) /* read with the exact conversion */
#define HGP_PROBE_HAS_LOCAL	(1u << 1) /* guest_local_ns is valid */

struct hgp_probe_reply {
	uint64_t seq;
	uint64_t guest_tsc;		/* rdtscp on guest_cpu */
	uint64_t guest_sched_ns;	/* the guest's sched_clock at guest_tsc */
	uint64_t guest_local_ns;	/* its local_clock there */
	uint32_t guest_cpu;
	uint32_t flags;			/* HGP_PROBE_* */
};

/* Sends one message; 0 or -errno. */
int hgp_send(int fd, uint16_t type, const void *payload, uint32_t len);
/*
 * Receives one message into @buf (at least HGP_MAX_PAYLOAD bytes).
 * Returns 0 with @hdr filled, -EPROTO for a malformed header (bad magic,
 * flags, reserved or length), -ECONNRESET when the peer closed.
 */
int hgp_recv(int fd, struct hgp_header *hdr, void *buf);
/*
 * The same into a buffer of @cap bytes: a longer payload is not read and
 * gives -EMSGSIZE (the header is consumed; end the connection then).
 */
int hgp_recv_max(int fd, struct hgp_header *hdr, void *buf, uint32_t cap);
/* Validates a header alone (pure; unit tested). */
int hgp_check_header(const struct hgp_header *hdr);

/* "vsock:CID[:PORT]" or "tcp:HOST:PORT" -> connected socket or -errno. */
int hgp_connect(const char *spec, char *err, size_t errlen);

#endif /* HGCLOCK_PROTO_H */
