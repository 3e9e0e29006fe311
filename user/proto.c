// SPDX-License-Identifier: LGPL-2.1
/*
 * Message framing and connection set-up for the host/guest protocol.
 * The receiver checks every header before it trusts a length, and never
 * reads more than HGP_MAX_PAYLOAD bytes for one message.
 */
#include <errno.h>
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

int hgp_connect(const char *spec, char *err, size_t errlen)
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
