// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock agent [--port P] [--tcp ADDR] [--peer ADDR] [--any-peer] [--once]
 *               [--duration SEC] [--pair-interval MS]
 *
 * Runs in a guest: waits for `hgclock record --guest ...` on the host
 * (vsock port 7007 by default, or TCP) and streams this guest's hgclock
 * ring (CYC2NS snapshots with the kvm-clock conversion, ...) to it, and
 * answers its clock probes (PROBE: this vCPU's TSC and clocks, at once).  Only
 * the host (vsock CID 2) is accepted unless --any-peer; over TCP only
 * --peer ADDR.  One host at a time; a version mismatch is answered with
 * an ERROR message naming both versions.  While a host is connected, every
 * --pair-interval ms it runs an exit pairing on each vCPU (module/pair.c):
 * their records go out with the ring.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <linux/vm_sockets.h>

#include "cmd.h"
#include "libhgclock.h"
#include "proto.h"

static volatile sig_atomic_t stop;

/* Who may connect (set once by cmd_agent before serving). */
static struct {
	const char *tcp;
	const char *peer;
	bool any_peer;
} acl;

/* Exit pairing period while streaming, ms; 0: off. */
static unsigned int pair_interval_ms = 100;

static bool peer_allowed(int sock, const struct sockaddr_storage *ss)
{
	if (acl.tcp) {
		char addr[64] = "";
		int one = 1;

		/* Probe replies are tiny and timed: no Nagle delay. */
		setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, addr, sizeof(addr));
		if (acl.any_peer || (acl.peer && !strcmp(addr, acl.peer)))
			return true;
		hg_err("agent: refused a connection from %s (not --peer)", addr);
		return false;
	}
	if (acl.any_peer || ((const struct sockaddr_vm *)ss)->svm_cid == VMADDR_CID_HOST)
		return true;
	hg_err("agent: refused a connection from CID %u (not the host)",
	       ((const struct sockaddr_vm *)ss)->svm_cid);
	return false;
}

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int send_batch(const struct hg_batch *b, void *ctx)
{
	return hgp_send(*(int *)ctx, HGP_RECORDS, b->buf, (uint32_t)b->len);
}

/* Sends everything the rings hold, in messages of at most 1 MiB. */
static int forward_rings(int sock, struct hgclock_map *map, struct hg_batch *b)
{
	return hg_drain_batched(map, b, send_batch, &sock);
}

/*
 * A clock probe: read this vCPU's TSC and clocks and answer at once (the
 * host's round trip bounds the pairing, so nothing else comes between).
 */
static int answer_probe(int sock, int devfd, const struct hgclock_map *map,
			const uint8_t *in, uint32_t len)
{
	struct hgp_probe_reply r = { 0 };
	struct hgp_probe p;
	struct hgclock_now now;
	int used_ioctl, ret;

	if (len != sizeof(p))
		return -EPROTO;
	memcpy(&p, in, sizeof(p));
	ret = hgclock_now(devfd, map, &now, &used_ioctl);
	if (ret)
		return ret;
	r.seq = p.seq;
	r.guest_tsc = now.tsc;
	r.guest_sched_ns = now.sched_clock_ns;
	r.guest_local_ns = now.local_clock_ns;
	r.guest_cpu = now.cpu;
	r.flags = (used_ioctl ? 0 : HGP_PROBE_EXACT) | (now.has_local ? HGP_PROBE_HAS_LOCAL : 0);
	return hgp_send(sock, HGP_PROBE_REPLY, &r, sizeof(r));
}

struct probe_channel {
	int sock;
	int devfd;
	struct hgclock_info info;
};

/*
 * A connection of its own for probes (HGP_HELLO_PROBE_CHANNEL), served by
 * a thread that does nothing but answer: no ring data queues ahead of a
 * reply, and nothing delays reading the request.  Owns @arg and its socket.
 */
static void *probe_channel_thread(void *arg)
{
	struct probe_channel *pc = arg;
	struct hgp_hello mine = { HGP_VERSION_MAJOR, HGP_VERSION_MINOR, 0 };
	uint8_t reply[sizeof(mine) + sizeof(pc->info)];
	struct timeval tv = { 0 };
	struct hgclock_map map;
	struct hgp_header h;
	uint8_t in[64];
	bool mapped;
	int ret;

	mapped = !hgclock_map_open(pc->devfd, 0, &map);
	memcpy(reply, &mine, sizeof(mine));
	memcpy(reply + sizeof(mine), &pc->info, sizeof(pc->info));
	setsockopt(pc->sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ret = hgp_send(pc->sock, HGP_HELLO_REPLY, reply, sizeof(reply));
	while (!ret) {
		/* Only probes here: anything else, or anything big, ends it. */
		ret = hgp_recv_max(pc->sock, &h, in, sizeof(in));
		if (ret || h.type != HGP_PROBE)
			break;
		ret = answer_probe(pc->sock, pc->devfd, mapped ? &map : NULL, in, h.length);
		if (ret)
			hg_err("agent: probe channel: %s", strerror(-ret));
	}
	if (mapped)
		hgclock_map_close(&map);
	close(pc->sock);
	free(pc);
	return NULL;
}

static int start_probe_channel(int sock, int devfd, const struct hgclock_info *info)
{
	struct probe_channel *pc = malloc(sizeof(*pc));
	pthread_attr_t attr;
	pthread_t t;
	int ret;

	if (!pc)
		return -ENOMEM;
	pc->sock = sock;
	pc->devfd = devfd;
	pc->info = *info;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	ret = -pthread_create(&t, &attr, probe_channel_thread, pc);
	pthread_attr_destroy(&attr);
	if (ret)
		free(pc);
	return ret;
}

/*
 * A connection arriving during a session: a probe channel for it gets its
 * thread; anything else is told the agent is busy.
 */
/*
 * The host's HELLO, waiting @timeout_s at most.  0, -EPROTO for anything
 * else (a longer payload is not read), or -errno.
 */
static int recv_hello(int sock, int timeout_s, struct hgp_hello *hello)
{
	struct timeval tv = { .tv_sec = timeout_s };
	struct hgp_header h;
	uint8_t in[64];
	int ret;

	setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ret = hgp_recv_max(sock, &h, in, sizeof(in));
	if (ret == -EMSGSIZE || (!ret && (h.type != HGP_HELLO || h.length < sizeof(*hello))))
		ret = -EPROTO;
	if (!ret)
		memcpy(hello, in, sizeof(*hello));
	return ret;
}

static void accept_during_session(int lfd, int devfd, const struct hgclock_info *info)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct hgp_hello hello;
	int sock = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);

	if (sock < 0)
		return;
	if (!peer_allowed(sock, &ss) || recv_hello(sock, 2, &hello))
		goto close;
	if (hello.major == HGP_VERSION_MAJOR && (hello.flags & HGP_HELLO_PROBE_CHANNEL) &&
	    !start_probe_channel(sock, devfd, info))
		return;
	{
		static const char busy[] = "agent busy: one host session at a time";

		hgp_send(sock, HGP_ERROR, busy, sizeof(busy) - 1);
	}
close:
	close(sock);
}

/* Returns 1 when @sock became a probe channel (its thread owns it). */
static int serve(int sock, int lfd, int devfd, const struct hgclock_info *info, double deadline)
{
	struct hgp_header h;
	struct hgp_hello hello;
	struct hgclock_map map;
	struct hg_batch b = { .max = HGP_MAX_PAYLOAD };
	double next_pair = 0;	/* CLOCK_MONOTONIC s of the next exit pairing */
	uint8_t *in;
	char msg[160];
	int ret;

	in = malloc(HGP_MAX_PAYLOAD);
	b.buf = malloc(HGP_MAX_PAYLOAD);
	if (!in || !b.buf) {
		free(in);
		free(b.buf);
		return -ENOMEM;
	}
	ret = recv_hello(sock, 10, &hello);
	if (ret) {
		hg_err("agent: no valid HELLO from the host (%s)",
		       ret == -EPROTO ? "protocol" : strerror(-ret));
		goto out;
	}
	if (hello.major != HGP_VERSION_MAJOR) {
		snprintf(msg, sizeof(msg), "protocol version mismatch: host speaks %u.%u, "
			 "this agent %u.%u", hello.major, hello.minor,
			 HGP_VERSION_MAJOR, HGP_VERSION_MINOR);
		hg_err("agent: %s", msg);
		hgp_send(sock, HGP_ERROR, msg, (uint32_t)strlen(msg));
		ret = -EPROTO;
		goto out;
	}
	if (hello.flags & HGP_HELLO_PROBE_CHANNEL) {
		ret = start_probe_channel(sock, devfd, info);
		if (!ret)
			ret = 1;
		goto out;
	}
	ret = hgclock_map_open(devfd, HGCLOCK_MAP_CONSUMER, &map);
	if (ret) {
		snprintf(msg, sizeof(msg), "guest ring unavailable: %s", strerror(-ret));
		hgp_send(sock, HGP_ERROR, msg, (uint32_t)strlen(msg));
		goto out;
	}
	{
		uint8_t reply[sizeof(struct hgp_hello) + sizeof(*info)];
		struct hgp_hello mine = { HGP_VERSION_MAJOR, HGP_VERSION_MINOR, 0 };

		memcpy(reply, &mine, sizeof(mine));
		memcpy(reply + sizeof(mine), info, sizeof(*info));
		ret = hgp_send(sock, HGP_HELLO_REPLY, reply, sizeof(reply));
	}
	/* From now on, with every CPU's conversion first in the stream. */
	hgclock_ring_skip_all(&map);
	hgclock_snapshot(devfd, -1);
	fprintf(stderr, "hgclock agent: streaming to the host\n");
	if (pair_interval_ms && !(info->features & HGCLOCK_FEAT_EXIT_PAIR))
		pair_interval_ms = 0;	/* no hypervisor to exit to */
	while (!ret) {
		struct pollfd pfd[3] = {
			{ .fd = sock, .events = POLLIN },
			{ .fd = devfd, .events = POLLIN },
			{ .fd = lfd, .events = POLLIN },
		};
		struct timespec now;
		bool host_done = false;

		ret = forward_rings(sock, &map, &b);
		if (ret)
			break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (stop || (deadline && now.tv_sec + now.tv_nsec / 1e9 >= deadline))
			break;
		if (pair_interval_ms) {
			double t = now.tv_sec + now.tv_nsec / 1e9;

			if (t >= next_pair) {
				int n = hgclock_exit_pair(devfd, -1);

				if (n < 0 && n != -EINTR) {
					hg_err("agent: exit pairing failed (%s): stopped",
					       strerror(-n));
					pair_interval_ms = 0;
				}
				next_pair = t + pair_interval_ms / 1e3;
			}
		}
		if (poll(pfd, 3, pair_interval_ms && pair_interval_ms < 200 ?
			 (int)pair_interval_ms : 200) < 0 && errno != EINTR) {
			ret = -errno;
			break;
		}
		if (pfd[2].revents & POLLIN)
			accept_during_session(lfd, devfd, info);
		if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			ret = hgp_recv(sock, &h, in);
			if (ret)
				break;
			if (h.type == HGP_BYE)
				host_done = true;
			else if (h.type == HGP_PROBE)
				ret = answer_probe(sock, devfd, &map, in, h.length);
			else if (h.type == HGP_ERROR)
				hg_err("agent: host says: %.*s", (int)h.length, (char *)in);
		}
		if (host_done) {
			/* Whatever is left, then goodbye: nothing read is lost. */
			ret = forward_rings(sock, &map, &b);
			break;
		}
	}
	if (ret != -ECONNRESET && ret != -EPIPE)
		hgp_send(sock, HGP_BYE, NULL, 0);
	hgclock_map_close(&map);
	if (ret == -ECONNRESET)
		ret = 0;
out:
	free(in);
	free(b.buf);
	return ret;
}

static void agent_usage(FILE *out)
{
	fprintf(out,
		"usage: hgclock agent [--port P] [--tcp ADDR] [--peer ADDR] [--any-peer]\n"
		"                     [--once] [--duration SEC] [--pair-interval MS]\n"
		"Serves this guest's clock data to 'hgclock record --guest' on the host:\n"
		"vsock port %u by default (only the host, CID 2, is accepted unless\n"
		"--any-peer); --tcp ADDR listens on TCP ADDR:PORT instead and accepts only\n"
		"--peer ADDR.  --once: exit after one host session.  --pair-interval MS:\n"
		"exit pairings on every vCPU this often while a host is connected\n"
		"(default 100, 0: none).\n", HGP_DEFAULT_PORT);
}

int cmd_agent(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "tcp", required_argument, NULL, 't' },
		{ "peer", required_argument, NULL, 'P' },
		{ "any-peer", no_argument, NULL, 'a' },
		{ "once", no_argument, NULL, '1' },
		{ "duration", required_argument, NULL, 'd' },
		{ "pair-interval", required_argument, NULL, 'i' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *tcp = NULL, *peer = NULL;
	uint64_t port = HGP_DEFAULT_PORT, duration = 0;
	bool any_peer = false, once = false;
	struct hgclock_info info;
	double deadline = 0;
	int c, devfd, lfd, ret, one = 1;

	while ((c = getopt_long(argc, argv, "p:t:P:a1d:i:h", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (!parse_u64(optarg, 0xfffffffe, &port) || !port) {
				hg_err("--port wants a port number, not '%s'", optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 't':
			tcp = optarg;
			break;
		case 'P':
			peer = optarg;
			break;
		case 'a':
			any_peer = true;
			break;
		case '1':
			once = true;
			break;
		case 'd':
			if (!parse_u64(optarg, 86400 * 365, &duration) || !duration) {
				hg_err("--duration wants seconds, not '%s'", optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 'i': {
			uint64_t ms;

			if (!parse_u64(optarg, 60000, &ms)) {
				hg_err("--pair-interval wants milliseconds (0 to 60000), not '%s'",
				       optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			pair_interval_ms = (unsigned int)ms;
			break;
		}
		case 'h':
			agent_usage(stdout);
			return HGCLOCK_EXIT_OK;
		default:
			agent_usage(stderr);
			return HGCLOCK_EXIT_USAGE;
		}
	}
	if (optind != argc || (tcp && !peer && !any_peer) || (tcp && port > 65535)) {
		if (tcp && !peer && !any_peer)
			hg_err("--tcp needs --peer ADDR (or --any-peer): say who may connect");
		agent_usage(stderr);
		return HGCLOCK_EXIT_USAGE;
	}
	acl.tcp = tcp;
	acl.peer = peer;
	acl.any_peer = any_peer;
	devfd = hg_open_device();
	if (devfd < 0)
		return -devfd;
	ret = hgclock_get_info(devfd, &info);
	if (ret) {
		hg_err("GET_INFO failed: %s", strerror(-ret));
		close(devfd);
		return HGCLOCK_EXIT_FAILURE;
	}

	if (tcp) {
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };

		if (inet_pton(AF_INET, tcp, &sa.sin_addr) != 1) {
			hg_err("--tcp wants an IPv4 address, not '%s'", tcp);
			close(devfd);
			return HGCLOCK_EXIT_USAGE;
		}
		lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (lfd >= 0)
			setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1))
			goto err_listen;
	} else {
		struct sockaddr_vm sa = {
			.svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY,
			.svm_port = (unsigned int)port,
		};

		lfd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1))
			goto err_listen;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	if (duration) {
		struct timespec now;

		clock_gettime(CLOCK_MONOTONIC, &now);
		deadline = now.tv_sec + now.tv_nsec / 1e9 + duration;
	}
	fprintf(stderr, "hgclock agent: listening on %s port %llu\n",
		tcp ? tcp : "vsock", (unsigned long long)port);
	ret = 0;
	while (!stop) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		struct pollfd pfd = { .fd = lfd, .events = POLLIN };
		bool allowed;
		int sock;

		if (poll(&pfd, 1, 200) <= 0) {
			struct timespec now;

			clock_gettime(CLOCK_MONOTONIC, &now);
			if (deadline && now.tv_sec + now.tv_nsec / 1e9 >= deadline)
				break;
			continue;
		}
		sock = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
		if (sock < 0)
			continue;
		allowed = peer_allowed(sock, &ss);
		if (allowed) {
			ret = serve(sock, lfd, devfd, &info, deadline);
			if (ret == 1) {
				/* A probe channel: its thread has the socket. */
				ret = 0;
				continue;
			}
			if (ret)
				hg_err("agent: session ended: %s", strerror(-ret));
		}
		close(sock);
		if (once && allowed)
			break;
	}
	close(lfd);
	close(devfd);
	return ret ? HGCLOCK_EXIT_FAILURE : HGCLOCK_EXIT_OK;

err_listen:
	hg_err("cannot listen on %s port %llu: %s", tcp ? tcp : "vsock",
	       (unsigned long long)port, strerror(errno));
	if (lfd >= 0)
		close(lfd);
	close(devfd);
	return HGCLOCK_EXIT_FAILURE;
}
