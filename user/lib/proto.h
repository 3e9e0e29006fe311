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
#define HGP_VERSION_MINOR	3	/* 1.1: PROBE/PROBE_REPLY; 1.2: CPU_MAP; 1.3: IDENTITY */
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
	HGP_CPU_MAP = 8,	/* guest: struct hgp_cpu_apic[] (1.2) */
	HGP_IDENTITY = 9,	/* guest: struct hgp_identity (1.3) */
};
#define HGP_TYPE_MAX		HGP_IDENTITY

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

/*
 * The guest's CPU numbers and their APIC IDs (CPU_MAP, 1.2).  KVM's
 * vcpu_id of a vCPU is its APIC ID (QEMU creates each vCPU with its APIC
 * ID as vcpu_id, and KVM's local APIC reports vcpu_id as the x2APIC ID),
 * and APIC IDs have gaps when a topology level is not a power of two:
 * guest CPU n is not vcpu_id n in general.  The agent sends one entry per
 * online CPU, in CPU order, right after HELLO_REPLY and again when the
 * set of online CPUs changes; only to a host whose HELLO says 1.2 or
 * later (an older host would take type 8 for a malformed header).
 * Documentation/protocol.rst.
 */
#define HGP_CPU_APIC_CPUINFO	(1u << 0) /* /proc/cpuinfo "apicid": the kernel's (since */
						  /* Linux 6.9 the APIC ID register's) */
#define HGP_CPU_APIC_X2APIC	(1u << 1) /* CPUID 0x1F/0xB read on the CPU (32 bits) */
#define HGP_CPU_APIC_INITIAL	(1u << 2) /* CPUID 1 EBX[31:24] read on the CPU (8 bits) */
#define HGP_CPU_APIC_CHECKED	(1u << 3) /* both read, and they agree */
#define HGP_CPU_APIC_MISMATCH	(1u << 4) /* both read, they differ: apic_id is cpuinfo's */

struct hgp_cpu_apic {
	uint32_t cpu;		/* the guest's CPU number */
	uint32_t apic_id;	/* its APIC ID: KVM's vcpu_id */
	uint32_t flags;		/* HGP_CPU_APIC_* */
	uint32_t reserved;	/* zero */
};

#define HGP_CPU_MAP_MAX		8192	/* entries: one per CPU, CPUs below 8192 */
#define HGP_APIC_ID_LIMIT	16384	/* KVM's vcpu_ids (x86 KVM_MAX_VCPU_IDS) are below */

/*
 * Checks a CPU_MAP payload (pure; unit tested): whole entries, at least
 * one, at most HGP_CPU_MAP_MAX, CPU numbers below HGP_CPU_MAP_MAX and
 * strictly rising, APIC IDs below @max_apic_id, reserved zero.  0 or
 * -EPROTO.
 */
int hgp_cpu_map_check(const void *payload, uint32_t len, uint32_t max_apic_id);

/*
 * From the text of /proc/cpuinfo (@len bytes): apic_id[c] = the "apicid"
 * of the block whose "processor" is c, for c < @n; -1 where there is
 * none (CPU offline or the field absent).  Returns the number of CPUs
 * that have one (pure; unit tested).
 */
int hgp_cpuinfo_apic_ids(const char *text, size_t len, int64_t *apic_id, unsigned int n);

/*
 * Which machine the guest is (IDENTITY, 1.3): what `hgclock merge` compares
 * with the nodename in a guest's trace.dat, so that a trace is not mapped
 * through another guest's clocks.  Each field is a NUL-terminated string,
 * NUL-padded to its end; an empty one was not readable.  The agent sends
 * it once, right after HELLO_REPLY, and only to a host whose HELLO says
 * 1.3 or later (an older host would take type 9 for a malformed header).
 * Documentation/protocol.rst.  152 bytes.
 */
#define HGP_NODENAME_MAX	64	/* characters: Linux's __NEW_UTS_LEN */

struct hgp_identity {
	char nodename[72];	/* uname()'s nodename, 1 to 64 printable characters */
	char machine_id[40];	/* /etc/machine-id: 32 lowercase hex digits, or "" */
	char boot_id[40];	/* /proc/sys/kernel/random/boot_id: a UUID, or "" */
};

/*
 * Checks an IDENTITY payload (pure; unit tested): exactly the struct's
 * size, a nodename of 1 to HGP_NODENAME_MAX printable ASCII characters
 * without spaces, quotes or backslashes, a machine id of "" or 32 lowercase hex digits, a boot
 * id of "" or a UUID (8-4-4-4-12 lowercase hex), zero after each NUL.
 * 0 or -EPROTO.
 */
int hgp_identity_check(const void *payload, uint32_t len);

/*
 * Fills @id from the text of uname's nodename, /etc/machine-id and
 * boot_id as read (any may be NULL: unreadable); trailing newlines are
 * dropped, a value of the wrong form is left empty.  A nodename that is
 * empty or too long becomes "(none)".  Pure; unit tested.
 */
void hgp_identity_fill(struct hgp_identity *id, const char *nodename, const char *machine_id,
		       const char *boot_id);

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

/*
 * "vsock:CID[:PORT]" or "tcp:HOST:PORT" -> connected socket or -errno.
 * A vsock connect waits up to @timeout_s for the guest to answer (the
 * kernel's own default is 2 s: a guest whose vCPUs a loaded host does
 * not run within 2 s is not there); tcp's connect keeps the kernel's.
 */
#define HGP_CONNECT_START_S	10	/* a guest that should be there */
#define HGP_CONNECT_POLL_S	2	/* one of several asked in turn */
int hgp_connect(const char *spec, unsigned int timeout_s, char *err, size_t errlen);

#endif /* HGCLOCK_PROTO_H */
