// SPDX-License-Identifier: LGPL-2.1
/*
 * Message framing and connection set-up for the host/guest protocol.
 * The receiver checks every header before it trusts a length, and never
 * reads more than HGP_MAX_PAYLOAD bytes for one message.
 */
#include <errno.h>
#include <stdbool.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <linux/vm_sockets.h>

#include "proto.h"

static int read_all(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = recv(fd, p, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			return -ECONNRESET;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int hgp_send(int fd, uint16_t type, const void *payload, uint32_t len)
{
	struct hgp_header h = {
		.magic = HGP_MAGIC, .type = type, .length = len,
	};
	struct iovec iov[2] = {
		{ .iov_base = &h, .iov_len = sizeof(h) },
		{ .iov_base = (void *)payload, .iov_len = len },
	};
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };
	size_t left = sizeof(h) + len;

	if (len > HGP_MAX_PAYLOAD)
		return -EMSGSIZE;
	/*
	 * Header and payload in one call: one packet for a small message,
	 * so a clock probe is not split in two (each would wake the peer).
	 */
	while (left) {
		ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		left -= (size_t)n;
		while (n > 0 && msg.msg_iovlen) {
			size_t take = (size_t)n < msg.msg_iov->iov_len ? (size_t)n :
				      msg.msg_iov->iov_len;

			msg.msg_iov->iov_base = (char *)msg.msg_iov->iov_base + take;
			msg.msg_iov->iov_len -= take;
			n -= (ssize_t)take;
			if (!msg.msg_iov->iov_len) {
				msg.msg_iov++;
				msg.msg_iovlen--;
			}
		}
	}
	return 0;
}

int hgp_check_header(const struct hgp_header *h)
{
	if (h->magic != HGP_MAGIC || h->flags || h->reserved ||
	    h->length > HGP_MAX_PAYLOAD || h->type < HGP_HELLO || h->type > HGP_TYPE_MAX)
		return -EPROTO;
	return 0;
}

int hgp_cpu_map_check(const void *payload, uint32_t len, uint32_t max_apic_id)
{
	const uint8_t *p = payload;
	uint32_t n = len / sizeof(struct hgp_cpu_apic);

	if (!len || len % sizeof(struct hgp_cpu_apic) || n > HGP_CPU_MAP_MAX)
		return -EPROTO;
	for (uint32_t i = 0; i < n; i++) {
		struct hgp_cpu_apic e, prev;

		memcpy(&e, p + (size_t)i * sizeof(e), sizeof(e));
		if (e.cpu >= HGP_CPU_MAP_MAX || e.apic_id >= max_apic_id || e.reserved)
			return -EPROTO;
		/* Rising: no CPU twice, so one message is one consistent map. */
		if (i) {
			memcpy(&prev, p + (size_t)(i - 1) * sizeof(prev), sizeof(prev));
			if (e.cpu <= prev.cpu)
				return -EPROTO;
		}
	}
	return 0;
}

/* "NAME<tabs/spaces>: VALUE" at @line (up to @end): VALUE as a number, or -1. */
static int64_t cpuinfo_field(const char *line, const char *end, const char *name)
{
	size_t nl = strlen(name);
	const char *p = line + nl;
	int64_t v = 0;
	int digits = 0;

	if ((size_t)(end - line) <= nl || memcmp(line, name, nl) || (*p != '\t' && *p != ' ' &&
									 *p != ':'))
		return -1;
	while (p < end && (*p == '\t' || *p == ' '))
		p++;
	if (p >= end || *p++ != ':')
		return -1;
	while (p < end && *p == ' ')
		p++;
	for (; p < end && *p >= '0' && *p <= '9' && digits < 10; p++, digits++)
		v = v * 10 + (*p - '0');
	return digits && digits < 10 && p == end ? v : -1;
}

int hgp_cpuinfo_apic_ids(const char *text, size_t len, int64_t *apic_id, unsigned int n)
{
	const char *p = text, *end = text + len;
	int64_t cpu = -1;
	int found = 0;

	for (unsigned int i = 0; i < n; i++)
		apic_id[i] = -1;
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		int64_t v;

		/* Whole lines only: a text cut inside a number does not give a smaller one. */
		if (!eol)
			break;
		/* A block starts with "processor"; an empty line ends it. */
		if (eol == p) {
			cpu = -1;
		} else if ((v = cpuinfo_field(p, eol, "processor")) >= 0) {
			cpu = v;
		} else if (cpu >= 0 && cpu < (int64_t)n &&
			   (v = cpuinfo_field(p, eol, "apicid")) >= 0) {
			if (apic_id[cpu] < 0)
				found++;
			apic_id[cpu] = v;
		}
		p = eol + 1;
	}
	return found;
}

int hgp_recv_max(int fd, struct hgp_header *hdr, void *buf, uint32_t cap)
{
	int ret = read_all(fd, hdr, sizeof(*hdr));

	if (ret)
		return ret;
	ret = hgp_check_header(hdr);
	if (ret)
		return ret;
	if (hdr->length > cap)
		return -EMSGSIZE;
	return hdr->length ? read_all(fd, buf, hdr->length) : 0;
}

int hgp_recv(int fd, struct hgp_header *hdr, void *buf)
{
	return hgp_recv_max(fd, hdr, buf, HGP_MAX_PAYLOAD);
}

int hgp_connect(const char *spec, unsigned int timeout_s, char *err, size_t errlen)
{
	int fd;

	if (!strncmp(spec, "vsock:", 6)) {
		struct sockaddr_vm sa;
		unsigned long cid, port = HGP_DEFAULT_PORT;
		char *end;

		cid = strtoul(spec + 6, &end, 10);
		if (end == spec + 6 || (*end && *end != ':'))
			goto bad;
		if (*end == ':') {
			port = strtoul(end + 1, &end, 10);
			if (*end || !port || port > 0xffffffffUL)
				goto bad;
		}
		memset(&sa, 0, sizeof(sa));
		sa.svm_family = AF_VSOCK;
		sa.svm_cid = (unsigned int)cid;
		sa.svm_port = (unsigned int)port;
		fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && timeout_s) {
			/*
			 * The old option takes a struct timeval of native
			 * longs: right for every 64-bit ABI, which is all
			 * a KVM host recorder runs on.  Not fatal: the
			 * kernel's 2 s then.
			 */
			struct timeval tv = { .tv_sec = timeout_s };

			(void)setsockopt(fd, AF_VSOCK, SO_VM_SOCKETS_CONNECT_TIMEOUT,
					 &tv, sizeof(tv));
		}
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
			int e = errno;

			snprintf(err, errlen, "%s: %s", spec, strerror(e));
			if (fd >= 0)
				close(fd);
			return -e;
		}
		return fd;
	}
	if (!strncmp(spec, "tcp:", 4)) {
		char host[256], *colon;
		struct addrinfo hints, *res, *ai;
		int ret;

		snprintf(host, sizeof(host), "%s", spec + 4);
		colon = strrchr(host, ':');
		if (!colon || colon == host || !colon[1])
			goto bad;
		*colon = '\0';
		memset(&hints, 0, sizeof(hints));
		hints.ai_socktype = SOCK_STREAM;
		ret = getaddrinfo(host, colon + 1, &hints, &res);
		if (ret) {
			snprintf(err, errlen, "%s: %s", spec, gai_strerror(ret));
			return -EHOSTUNREACH;
		}
		fd = -ECONNREFUSED;
		for (ai = res; ai; ai = ai->ai_next) {
			int s = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
				       ai->ai_protocol);

			if (s < 0)
				continue;
			if (!connect(s, ai->ai_addr, ai->ai_addrlen)) {
				int one = 1;

				/* Probes are tiny and timed: no Nagle delay. */
				setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
				fd = s;
				break;
			}
			fd = -errno;
			close(s);
		}
		freeaddrinfo(res);
		if (fd < 0)
			snprintf(err, errlen, "%s: %s", spec, strerror(-fd));
		return fd;
	}
bad:
	snprintf(err, errlen, "'%s': want vsock:CID[:PORT] or tcp:HOST:PORT", spec);
	return -EINVAL;
}

/* @f (of @size bytes) holds a string of at most @max characters, zeros after it. */
static const char *field_str(const char *f, size_t size, size_t max)
{
	const char *nul = memchr(f, '\0', size);

	if (!nul || (size_t)(nul - f) > max)
		return NULL;
	for (const char *p = nul; p < f + size; p++)
		if (*p)
			return NULL;
	return f;
}

static bool is_lower_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* "" or 32 lowercase hex digits (machine-id(5)). */
static bool machine_id_ok(const char *s, size_t len)
{
	if (len != 0 && len != 32)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!is_lower_hex(s[i]))
			return false;
	return true;
}

/* "" or a UUID: 8-4-4-4-12 lowercase hex digits. */
static bool boot_id_ok(const char *s, size_t len)
{
	if (len == 0)
		return true;
	if (len != 36)
		return false;
	for (size_t i = 0; i < len; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;

		if (dash ? s[i] != '-' : !is_lower_hex(s[i]))
			return false;
	}
	return true;
}

/* 1 to HGP_NODENAME_MAX printable ASCII characters, no spaces, quotes or backslashes. */
static bool nodename_ok(const char *s, size_t len)
{
	if (len == 0 || len > HGP_NODENAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] <= ' ' || s[i] > '~' || s[i] == '"' || s[i] == '\\')
			return false;
	return true;
}

int hgp_identity_check(const void *payload, uint32_t len)
{
	struct hgp_identity id;
	const char *n, *m, *b;

	if (len != sizeof(id))
		return -EPROTO;
	memcpy(&id, payload, sizeof(id));
	n = field_str(id.nodename, sizeof(id.nodename), HGP_NODENAME_MAX);
	m = field_str(id.machine_id, sizeof(id.machine_id), 32);
	b = field_str(id.boot_id, sizeof(id.boot_id), 36);
	if (!n || !m || !b || !nodename_ok(n, strlen(n)) || !machine_id_ok(m, strlen(m)) ||
	    !boot_id_ok(b, strlen(b)))
		return -EPROTO;
	return 0;
}

/* @src up to its first newline or NUL, if @ok accepts it, into @dst (zeroed). */
static void fill_field(char *dst, size_t size, const char *src,
		       bool (*ok)(const char *s, size_t len))
{
	size_t len;

	memset(dst, 0, size);
	if (!src)
		return;
	len = strcspn(src, "\n");
	if (len < size && ok(src, len))
		memcpy(dst, src, len);
}

void hgp_identity_fill(struct hgp_identity *id, const char *nodename, const char *machine_id,
		       const char *boot_id)
{
	fill_field(id->nodename, sizeof(id->nodename), nodename, nodename_ok);
	if (!id->nodename[0])
		strcpy(id->nodename, "(none)");
	fill_field(id->machine_id, sizeof(id->machine_id), machine_id, machine_id_ok);
	fill_field(id->boot_id, sizeof(id->boot_id), boot_id, boot_id_ok);
}
