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
 * their records go out with the ring.  To a 1.2 host it also sends each
 * online CPU's APIC ID, KVM's vcpu_id of that vCPU (CPU_MAP), at the
 * start and whenever the set of online CPUs changes.
 */
#include <arpa/inet.h>
#include <cpuid.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/utsname.h>
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

/* ---- the CPU map: each guest CPU's APIC ID, which is KVM's vcpu_id ---- */

/*
 * This CPU's APIC ID from CPUID: the 32-bit x2APIC ID of leaf 0x1F or
 * 0xB (EDX, the same in every subleaf; a leaf is there when subleaf 0
 * has a level type, ECX[15:8]), else leaf 1's 8-bit initial APIC ID
 * (EBX[31:24]).  QEMU sets both to the APIC ID it gives KVM as vcpu_id,
 * and KVM's local APIC reports vcpu_id as the x2APIC ID.
 */
static uint32_t cpuid_apic_id(uint32_t *flags)
{
	static const unsigned int leaves[] = { 0x1f, 0xb };
	unsigned int max = __get_cpuid_max(0, NULL), a, b, c, d;

	for (unsigned int i = 0; i < sizeof(leaves) / sizeof(leaves[0]); i++) {
		if (max < leaves[i])
			continue;
		__cpuid_count(leaves[i], 0, a, b, c, d);
		if ((c >> 8) & 0xff) {
			*flags = HGP_CPU_APIC_X2APIC;
			return d;
		}
	}
	__cpuid(1, a, b, c, d);
	*flags = HGP_CPU_APIC_INITIAL;
	return b >> 24;
}

/* A small text file whole (procfs/sysfs: read until EOF); NULL on error. */
static char *read_text(const char *path, size_t *len)
{
	size_t cap = 65536, n = 0;
	char *buf = malloc(cap);
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (!buf || fd < 0)
		goto fail;
	for (;;) {
		ssize_t r;

		if (n + 1 >= cap) {
			char *nb = cap < (64u << 20) ? realloc(buf, cap * 2) : NULL;

			if (!nb)
				goto fail;
			buf = nb;
			cap *= 2;
		}
		r = read(fd, buf + n, cap - n - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			goto fail;
		if (!r)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	*len = n;
	return buf;
fail:
	if (fd >= 0)
		close(fd);
	free(buf);
	return NULL;
}

/*
 * Fills @map (HGP_CPU_MAP_MAX entries) with one entry per online CPU, in
 * CPU order.  The APIC ID is /proc/cpuinfo's "apicid", the kernel's own
 * (since Linux 6.9 read from the APIC ID register, which KVM sets to the
 * vcpu_id; before, from CPUID).  This thread is also pinned to each CPU
 * in turn to read CPUID there: the cross-check, and the value when the
 * kernel does not say.  A CPU neither names nor lets us run on is left
 * out.  The thread's affinity is restored after.  Returns the number of
 * entries.
 */
static unsigned int build_cpu_map(struct hgp_cpu_apic *map)
{
	int64_t *info_apic = malloc(HGP_CPU_MAP_MAX * sizeof(*info_apic));
	size_t setsz = CPU_ALLOC_SIZE(HGP_CPU_MAP_MAX), len = 0;
	cpu_set_t *saved = CPU_ALLOC(HGP_CPU_MAP_MAX), *one = CPU_ALLOC(HGP_CPU_MAP_MAX);
	long conf = sysconf(_SC_NPROCESSORS_CONF);
	unsigned int n = 0, limit = conf > 0 && conf < HGP_CPU_MAP_MAX ? (unsigned int)conf :
							HGP_CPU_MAP_MAX;
	char *text = read_text("/proc/cpuinfo", &len);
	bool pin;

	if (!info_apic || !saved || !one)
		goto out;
	if (!text || hgp_cpuinfo_apic_ids(text, len, info_apic, HGP_CPU_MAP_MAX) <= 0)
		for (unsigned int c = 0; c < HGP_CPU_MAP_MAX; c++)
			info_apic[c] = -1;
	for (unsigned int c = limit; c < HGP_CPU_MAP_MAX; c++)
		if (info_apic[c] >= 0)
			limit = c + 1;
	pin = !sched_getaffinity(0, setsz, saved);
	for (unsigned int cpu = 0; cpu < limit; cpu++) {
		struct hgp_cpu_apic *e = &map[n];
		bool have_cpuid = false;
		uint32_t cpuid_id = 0, flags = 0;

		CPU_ZERO_S(setsz, one);
		CPU_SET_S(cpu, setsz, one);
		if (pin && !sched_setaffinity(0, setsz, one) && sched_getcpu() == (int)cpu) {
			cpuid_id = cpuid_apic_id(&flags);
			have_cpuid = true;
		}
		if (info_apic[cpu] < 0 && !have_cpuid)
			continue;	/* offline, or neither source says */
		memset(e, 0, sizeof(*e));
		e->cpu = cpu;
		if (info_apic[cpu] < 0) {
			e->apic_id = cpuid_id;
			e->flags = flags;
		} else {
			e->apic_id = (uint32_t)info_apic[cpu];
			e->flags = HGP_CPU_APIC_CPUINFO;
			/* Leaf 1's initial APIC ID has only the low 8 bits. */
			if (have_cpuid)
				e->flags |= flags | (cpuid_id == ((flags & HGP_CPU_APIC_INITIAL) ?
						     (e->apic_id & 0xff) : e->apic_id) ?
						     HGP_CPU_APIC_CHECKED : HGP_CPU_APIC_MISMATCH);
		}
		n++;
	}
	if (pin && sched_setaffinity(0, setsz, saved))
		hg_err("agent: cannot restore the CPU affinity: %s", strerror(errno));
out:
	free(text);
	free(info_apic);
	if (saved)
		CPU_FREE(saved);
	if (one)
		CPU_FREE(one);
	return n;
}

/*
 * The online CPUs as the kernel lists them ("0-3,5"), to notice a CPU
 * brought up or down: cheap to read, unlike /proc/cpuinfo.
 */
static void online_cpus(char *buf, size_t size)
{
	size_t len;
	char *t = read_text("/sys/devices/system/cpu/online", &len);

	snprintf(buf, size, "%s", t ? t : "?");
	free(t);
}

/* Sends the CPU map (CPU_MAP) to a 1.2 host; says it on stderr the first time. */
static int send_cpu_map(int sock, bool verbose)
{
	struct hgp_cpu_apic *map = calloc(HGP_CPU_MAP_MAX, sizeof(*map));
	unsigned int n = map ? build_cpu_map(map) : 0;
	int ret = 0;

	if (!n) {
		hg_err("agent: no CPU map (cannot read the APIC IDs): the host assumes guest "
		       "CPU n is vCPU n");
		free(map);
		return 0;
	}
	if (verbose) {
		fprintf(stderr, "hgclock agent: CPU map (CPU:APIC ID):");
		for (unsigned int i = 0; i < n && i < 64; i++)
			fprintf(stderr, " %u:%u%s", map[i].cpu, map[i].apic_id,
				map[i].flags & HGP_CPU_APIC_MISMATCH ? "(CPUID differs)" : "");
		fprintf(stderr, "%s\n", n > 64 ? " ..." : "");
	}
	ret = hgp_send(sock, HGP_CPU_MAP, map, n * (uint32_t)sizeof(*map));
	free(map);
	return ret;
}

/*
 * Says which machine this is (IDENTITY) to a 1.3 host: the nodename, the
 * machine id and the boot id, so that `hgclock merge` can tell this
 * guest's traces from another's.  Unreadable ones go empty; what is
 * sent is said on standard error.
 */
static int send_identity(int sock)
{
	struct hgp_identity id;
	struct utsname u;
	size_t len;
	char *mid = read_text("/etc/machine-id", &len);
	char *bid = read_text("/proc/sys/kernel/random/boot_id", &len);

	hgp_identity_fill(&id, uname(&u) ? NULL : u.nodename, mid, bid);
	free(mid);
	free(bid);
	fprintf(stderr, "hgclock agent: identity: host '%s', machine id %s, boot id %s\n",
		id.nodename, id.machine_id[0] ? id.machine_id : "(unreadable)",
		id.boot_id[0] ? id.boot_id : "(unreadable)");
	return hgp_send(sock, HGP_IDENTITY, &id, sizeof(id));
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
	double next_online = 0;	/* ... of the next look at the online CPUs */
	bool cpu_map = false;	/* the host takes CPU_MAP (1.2) */
	char online[256] = "";
	bool pair_late_said = false;	/* a skipped pairing round was reported */
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
	/*
	 * Which vCPU each CPU is, before any record: the host maps guest
	 * CPUs to KVM's vCPUs with it (an older host would take the message
	 * for a malformed one).
	 */
	/* Which machine this is (1.3; an older host would take it for malformed). */
	if (!ret && hello.minor >= 3)
		ret = send_identity(sock);
	cpu_map = hello.minor >= 2;
	if (!ret && cpu_map) {
		online_cpus(online, sizeof(online));
		ret = send_cpu_map(sock, true);
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
		/* A CPU brought up or down (hotplug): the map again, once a second. */
		if (cpu_map && now.tv_sec + now.tv_nsec / 1e9 >= next_online) {
			char cur[sizeof(online)];

			online_cpus(cur, sizeof(cur));
			if (strcmp(cur, online)) {
				memcpy(online, cur, sizeof(online));
				ret = send_cpu_map(sock, true);
				if (ret)
					break;
			}
			next_online = now.tv_sec + now.tv_nsec / 1e9 + 1;
		}
		if (pair_interval_ms) {
			double t = now.tv_sec + now.tv_nsec / 1e9;

			if (t >= next_pair) {
				int n = hgclock_exit_pair(devfd, -1);

				/*
				 * A vCPU its host did not run in time
				 * (ETIMEDOUT) or the unprivileged budget
				 * (EAGAIN): this round only, said once.
				 * Anything else stops pairing.
				 */
				if ((n == -ETIMEDOUT || n == -EAGAIN) && !pair_late_said) {
					hg_err("agent: exit pairing round skipped (%s); trying again",
					       strerror(-n));
					pair_late_said = true;
				} else if (n < 0 && n != -EINTR && n != -ETIMEDOUT && n != -EAGAIN) {
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
