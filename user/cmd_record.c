// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock record -o FILE [--duration SEC] [--period MS]: records this
 * host's clock data into a correlation file: the module's INFO, then every
 * record of every CPU's ring (CYC2NS snapshots, vCPU tracking, KVM TSC
 * offset changes, losses) as it arrives, until the duration ends or
 * SIGINT/SIGTERM.  Then it drains what is left, writes the END section and
 * closes: the file is valid up to its last section at any time, and
 * complete after a clean stop.  A status line is shown on a terminal.
 *
 * With --guest, each guest's agent streams its own ring into the file,
 * and the host probes its clocks continuously (bursts of bracketed
 * exchanges, see proto.h).  At the end the mapping is computed from all of
 * it (sync.c: KVM's exact TSC relation where the guest's VM is known and
 * agrees with the probes, fitted probes otherwise) and written as the
 * SEGMENTS section before END.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "corr.h"
#include "libhgclock.h"
#include "proto.h"
#include "sync.h"

#define HG_MAX_GUESTS 8

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

#define HG_PROBE_BURST	4	/* default: probes back to back each interval */
#define HG_PROBE_BURST_MAX 1024
#define HG_PROBE_BUF	512	/* probes per PROBES section */

struct guest {
	char spec[128];		/* the connection part of --guest */
	int fd;			/* -1 once the session is over */
	uint32_t id;		/* index: the guest id in the file */
	uint64_t records;
	struct hgcor_guest_vm vm;
	/* Probing: one request in flight at a time. */
	bool probe_pending;
	bool closing;			/* BYE sent: no new probes */
	bool can_probe;			/* the agent speaks 1.1 or later */
	uint64_t probe_seq;
	struct hgclock_now probe_send;	/* host clocks right before sending */
	unsigned int burst;		/* probes back to back each interval */
	unsigned int burst_left;
	double next_probe;
	uint64_t nr_probes;
	uint64_t best_rtt_ns;		/* tightest round trip so far */
	struct hgcor_probe pbuf[HG_PROBE_BUF];
	size_t np;
	uint64_t probes_dropped;	/* buffer full: the main loop fell behind */
	uint64_t probe_timeouts;	/* replies later than the receive timeout */
	/*
	 * The probe channel: a connection of its own, probed by a thread in
	 * a tight send/receive loop, so that neither ring data on the main
	 * connection nor this process's file writes sit inside a round trip.
	 * @lock guards pbuf, np, nr_probes, best_rtt_ns and probes_dropped
	 * between that thread and the main loop.  -1: probes go in-band.
	 */
	int probe_fd;
	pthread_t probe_thread;
	bool probe_thread_on;
	volatile bool probe_stop;
	pthread_mutex_t lock;
	const struct host_clock *hc;
	double interval_s;
};

/* The host's clocks, now (zero-syscall where the conversion is exact). */
struct host_clock {
	int fd;
	const struct hgclock_map *map;
};

static int host_now(const struct host_clock *hc, struct hgclock_now *now)
{
	int used_ioctl;

	return hgclock_now(hc->fd, hc->map, now, &used_ioctl);
}

/*
 * The VM process of a vsock guest: the qemu whose command line says
 * guest-cid=CID (vhost-vsock-pci,guest-cid=CID).  -1 if none or several.
 */
static int32_t vm_by_cid(uint32_t cid)
{
	char want[32], path[300], buf[4096];
	struct dirent *de;
	int32_t found = -1;
	DIR *d = opendir("/proc");

	if (!d)
		return -1;
	snprintf(want, sizeof(want), "guest-cid=%u", cid);
	while ((de = readdir(d))) {
		ssize_t n;
		int fd;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		for (ssize_t i = 0; i < n; i++)
			if (!buf[i])
				buf[i] = ',';	/* arguments, then options, comma separated */
		buf[n] = 0;
		for (char *p = strstr(buf, want); p; p = strstr(p + 1, want)) {
			char end = p[strlen(want)];

			if ((p == buf || p[-1] == ',') && (end == ',' || !end)) {
				if (found > 0) {
					closedir(d);
					return -1;
				}
				found = atoi(de->d_name);
				break;
			}
		}
	}
	closedir(d);
	return found;
}

/* "SPEC[,vm=PID]": the connection spec and which VM on this host it is. */
static int guest_parse(struct guest *g, const char *arg)
{
	const char *comma = strstr(arg, ",vm=");
	size_t len = comma ? (size_t)(comma - arg) : strlen(arg);
	uint64_t pid;

	if (len >= sizeof(g->spec)) {
		hg_err("--guest '%s' is too long", arg);
		return -1;
	}
	memcpy(g->spec, arg, len);
	g->spec[len] = 0;
	g->vm.vm_pid = -1;
	g->vm.how = HGCOR_VM_UNKNOWN;
	memcpy(g->vm.spec, g->spec, len < sizeof(g->vm.spec) - 1 ? len : sizeof(g->vm.spec) - 1);
	if (!strncmp(g->spec, "vsock:", 6))
		g->vm.cid = (uint32_t)strtoul(g->spec + 6, NULL, 10);
	if (comma) {
		if (!parse_u64(comma + 4, 0x7fffffff, &pid) || !pid) {
			hg_err("--guest %s: vm= wants the VM's process id", arg);
			return -1;
		}
		g->vm.vm_pid = (int32_t)pid;
		g->vm.how = HGCOR_VM_BY_OPTION;
	}
	return 0;
}

static int flush_probes(struct guest *g, struct hgcor_writer *w)
{
	static struct hgcor_probe copy[HG_PROBE_BUF];
	uint32_t prefix[2] = { g->id, 0 };
	size_t n;

	/* Copied out under the lock: the probe thread never waits on a write. */
	pthread_mutex_lock(&g->lock);
	n = g->np;
	memcpy(copy, g->pbuf, n * sizeof(copy[0]));
	g->np = 0;
	pthread_mutex_unlock(&g->lock);
	if (!n)
		return 0;
	/* 1.1 sections are optional: a 1.0 reader skips them. */
	return hgcor_write_section2(w, HGCOR_SEC_PROBES, HGCOR_SEC_OPTIONAL, prefix, sizeof(prefix),
				    copy, n * sizeof(copy[0]));
}

/* Keeps one probe; false when the buffer is full (counted, dropped). */
static bool keep_probe(struct guest *g, const struct hgcor_probe *p)
{
	bool kept;

	pthread_mutex_lock(&g->lock);
	kept = g->np < HG_PROBE_BUF;
	if (kept) {
		g->pbuf[g->np++] = *p;
		g->nr_probes++;
		if (!g->best_rtt_ns || p->host_ns_recv - p->host_ns_send < g->best_rtt_ns)
			g->best_rtt_ns = p->host_ns_recv - p->host_ns_send;
	} else {
		g->probes_dropped++;
	}
	pthread_mutex_unlock(&g->lock);
	return kept;
}

static struct hgcor_probe make_probe(const struct hgclock_now *send, const struct hgclock_now *recv,
				     const struct hgp_probe_reply *r)
{
	return (struct hgcor_probe){
		.host_tsc_send = send->tsc, .host_ns_send = send->sched_clock_ns,
		.host_tsc_recv = recv->tsc, .host_ns_recv = recv->sched_clock_ns,
		.guest_tsc = r->guest_tsc, .guest_sched_ns = r->guest_sched_ns,
		.guest_local_ns = r->guest_local_ns,
		.host_cpu_send = (uint16_t)send->cpu, .host_cpu_recv = (uint16_t)recv->cpu,
		.guest_cpu = (uint16_t)r->guest_cpu, .flags = (uint16_t)r->flags,
	};
}

/*
 * The probe thread: every interval, --probe-burst exchanges back to
 * back, each timed by the host's clock read right before the send and
 * right after the reply is in.  A longer burst gives the fit more chances
 * at a fast request and a fast reply; under nested TCG the fastest legs
 * were the same at every position of a burst (Documentation/sync.rst).
 * Ends on the stop flag or a broken channel.
 */
static void *probe_thread_fn(void *arg)
{
	struct guest *g = arg;
	const char *why = NULL;
	uint64_t seq = 0;
	int err = 0;

	while (!g->probe_stop && !why) {
		for (unsigned int k = 0; k < g->burst && !g->probe_stop && !why; k++) {
			struct hgp_probe p = { .seq = ++seq };
			struct hgp_probe_reply r = { 0 };
			struct hgclock_now send, recv_now;
			struct hgp_header h;
			uint8_t buf[64];
			struct hgcor_probe sample;
			ssize_t n;

			err = host_now(g->hc, &send);
			if (err) {
				why = "reading the host's clock";
				break;
			}
			err = hgp_send(g->probe_fd, HGP_PROBE, &p, sizeof(p));
			if (err) {
				why = "sending";
				break;
			}
			/*
			 * The reply to this probe; a late reply to an earlier one
			 * (its wait timed out) is read and dropped.  The header is
			 * peeked first: a receive timeout then consumes nothing.
			 */
			for (;;) {
				do
					n = recv(g->probe_fd, &h, sizeof(h), MSG_PEEK | MSG_WAITALL);
				while (n < 0 && errno == EINTR && !g->probe_stop);
				if (n < 0 && errno == EAGAIN) {
					g->probe_timeouts++;
					break;
				}
				if (n != sizeof(h)) {
					err = n < 0 ? -errno : -EPROTO;
					why = n == 0 ? "closed by the agent" : "receiving";
					break;
				}
				err = hgp_recv_max(g->probe_fd, &h, buf, sizeof(buf));
				if (!err)
					err = host_now(g->hc, &recv_now);
				if (!err && (h.type != HGP_PROBE_REPLY || h.length != sizeof(r)))
					err = -EPROTO;
				if (err) {
					why = "a bad reply";
					break;
				}
				memcpy(&r, buf, sizeof(r));
				if (r.seq == p.seq)
					break;
				if (r.seq > p.seq) {
					err = -EPROTO;
					why = "a reply to a probe not sent";
					break;
				}
			}
			if (why)
				break;
			if (r.seq != p.seq)
				continue;	/* timed out: the next probe */
			sample = make_probe(&send, &recv_now, &r);
			keep_probe(g, &sample);
		}
		for (double slept = 0; slept < g->interval_s && !g->probe_stop && !why;
		     slept += 0.01) {
			struct timespec ts = { 0, 10000000 };

			nanosleep(&ts, NULL);
		}
	}
	if (why && !g->probe_stop)
		hg_err("guest %s: probe channel: %s (%s); no more probes", g->spec, why,
		       strerror(err < 0 ? -err : EPROTO));
	return NULL;
}

/* A second connection to the agent, for probes only (protocol 1.1). */
static int open_probe_channel(struct guest *g, uint8_t *buf)
{
	struct hgp_hello hello = { HGP_VERSION_MAJOR, HGP_VERSION_MINOR, HGP_HELLO_PROBE_CHANNEL };
	struct timeval tv = { .tv_sec = 1 };
	struct hgp_header h;
	char err[300];
	int fd, ret;

	fd = hgp_connect(g->spec, err, sizeof(err));
	if (fd < 0)
		return fd;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ret = hgp_send(fd, HGP_HELLO, &hello, sizeof(hello));
	if (!ret)
		ret = hgp_recv(fd, &h, buf);
	if (!ret && (h.type != HGP_HELLO_REPLY || h.length < sizeof(hello)))
		ret = -EPROTO;
	if (ret) {
		close(fd);
		return ret;
	}
	g->probe_fd = fd;
	ret = -pthread_create(&g->probe_thread, NULL, probe_thread_fn, g);
	if (ret) {
		close(fd);
		g->probe_fd = -1;
		return ret;
	}
	g->probe_thread_on = true;
	return 0;
}

static void close_probe_channel(struct guest *g)
{
	if (!g->probe_thread_on)
		return;
	g->probe_stop = true;
	/* Wakes a thread blocked in recv(). */
	shutdown(g->probe_fd, SHUT_RDWR);
	pthread_join(g->probe_thread, NULL);
	close(g->probe_fd);
	g->probe_fd = -1;
	g->probe_thread_on = false;
}

static int send_probe(struct guest *g, const struct host_clock *hc)
{
	struct hgp_probe p = { .seq = ++g->probe_seq };
	int ret = host_now(hc, &g->probe_send);

	if (!ret)
		ret = hgp_send(g->fd, HGP_PROBE, &p, sizeof(p));
	if (!ret)
		g->probe_pending = true;
	return ret;
}

/* A reply: @recv holds the host's clocks read right after it arrived. */
static int probe_reply(struct guest *g, struct hgcor_writer *w, const struct host_clock *hc,
		       const struct hgclock_now *recv, const uint8_t *buf, uint32_t len,
		       double interval_s)
{
	struct hgp_probe_reply r;
	struct hgcor_probe sample;
	int ret = 0;

	if (len != sizeof(r) || !g->probe_pending) {
		hg_err("guest %s: unexpected probe reply", g->spec);
		return -EPROTO;
	}
	memcpy(&r, buf, sizeof(r));
	if (r.seq != g->probe_seq) {
		hg_err("guest %s: probe reply %llu, expected %llu", g->spec,
		       (unsigned long long)r.seq, (unsigned long long)g->probe_seq);
		return -EPROTO;
	}
	g->probe_pending = false;
	sample = make_probe(&g->probe_send, recv, &r);
	if (!keep_probe(g, &sample)) {
		ret = flush_probes(g, w);
		if (!ret)
			keep_probe(g, &sample);
	}
	if (!ret && g->burst_left && !g->closing) {
		g->burst_left--;
		ret = send_probe(g, hc);
	} else {
		g->next_probe = now_s() + interval_s;
	}
	return ret;
}

/* Connects, says HELLO, writes the guest's INFO to the file. */
static int guest_open(struct guest *g, struct hgcor_writer *w, uint8_t *buf)
{
	struct hgp_hello hello = { HGP_VERSION_MAJOR, HGP_VERSION_MINOR, 0 };
	struct timeval tv = { .tv_sec = 10 };
	struct hgp_header h;
	char err[300];
	uint32_t prefix[2] = { g->id, 0 };
	int ret;

	g->fd = hgp_connect(g->spec, err, sizeof(err));
	if (g->fd < 0) {
		hg_err("guest %s", err);
		return g->fd;
	}
	setsockopt(g->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ret = hgp_send(g->fd, HGP_HELLO, &hello, sizeof(hello));
	if (!ret)
		ret = hgp_recv(g->fd, &h, buf);
	if (!ret && h.type == HGP_ERROR) {
		hg_err("guest %s: %.*s", g->spec, (int)h.length, (char *)buf);
		ret = -EPROTO;
	} else if (!ret && (h.type != HGP_HELLO_REPLY ||
			    h.length < sizeof(hello) + HGCLOCK_INFO_SIZE_VER0)) {
		hg_err("guest %s: not an hgclock agent (bad reply)", g->spec);
		ret = -EPROTO;
	} else if (ret) {
		hg_err("guest %s: %s", g->spec, strerror(-ret));
	}
	if (!ret) {
		memcpy(&hello, buf, sizeof(hello));
		g->can_probe = hello.minor >= 1;
		if (hello.major == HGP_VERSION_MAJOR && !g->can_probe)
			fprintf(stderr, "hgclock record: guest %s: agent %u.%u answers no probes\n",
				g->spec, hello.major, hello.minor);
		if (hello.major != HGP_VERSION_MAJOR) {
			hg_err("guest %s speaks protocol %u.%u, this host %u.%u",
			       g->spec, hello.major, hello.minor,
			       HGP_VERSION_MAJOR, HGP_VERSION_MINOR);
			ret = -EPROTO;
		}
	}
	if (!ret)
		ret = hgcor_write_section2(w, HGCOR_SEC_GUEST_INFO, 0, prefix, sizeof(prefix),
					   buf + sizeof(hello), h.length - sizeof(hello));
	/* Which VM on this host: said on the command line, or found by CID. */
	if (!ret && g->vm.how == HGCOR_VM_UNKNOWN && g->vm.cid) {
		g->vm.vm_pid = vm_by_cid(g->vm.cid);
		if (g->vm.vm_pid > 0)
			g->vm.how = HGCOR_VM_BY_CID;
	}
	if (!ret && g->vm.vm_pid <= 0)
		fprintf(stderr, "hgclock record: guest %s: its VM process is unknown (add ,vm=PID);"
			" probes only\n", g->spec);
	/* Probes on a channel of their own; in-band if the agent cannot. */
	if (!ret && g->can_probe && g->interval_s > 0) {
		int pret = open_probe_channel(g, buf);

		if (pret)
			fprintf(stderr, "hgclock record: guest %s: no probe channel (%s); probing"
				" in-band\n", g->spec, strerror(-pret));
	}
	if (!ret) {
		g->vm.guest_id = g->id;
		ret = hgcor_write_section(w, HGCOR_SEC_GUEST_VM, HGCOR_SEC_OPTIONAL, &g->vm,
					  sizeof(g->vm));
	}
	if (ret) {
		close(g->fd);
		g->fd = -1;
		return ret;
	}
	/* Blocking reads from here: poll() says when. */
	tv.tv_sec = 0;
	setsockopt(g->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return 0;
}

/*
 * One message from a guest: records go to the file, probe replies are
 * paired with the host's clocks; BYE/ERROR end the session.
 */
static int guest_message(struct guest *g, struct hgcor_writer *w, uint8_t *buf,
			 const struct host_clock *hc, double interval_s)
{
	uint32_t prefix[2] = { g->id, 0 };
	struct hgp_header h;
	struct hgclock_now recv;
	int ret = hgp_recv(g->fd, &h, buf);

	/* The host's side of a probe is read first thing: it bounds the pair. */
	if (!ret && h.type == HGP_PROBE_REPLY) {
		ret = host_now(hc, &recv);
		if (!ret)
			ret = probe_reply(g, w, hc, &recv, buf, h.length, interval_s);
		if (!ret)
			return 0;
		if (ret != -EPROTO)
			hg_err("guest %s: probe: %s", g->spec, strerror(-ret));
	} else if (!ret && h.type == HGP_RECORDS) {
		if (hgcor_walk_records(buf, h.length, NULL, NULL)) {
			hg_err("guest %s: malformed records", g->spec);
			ret = -EPROTO;
		} else {
			ret = hgcor_write_section2(w, HGCOR_SEC_GUEST_RECORDS, 0, prefix,
						   sizeof(prefix), buf, h.length);
			g->records++;
			return ret;
		}
	} else if (!ret && h.type == HGP_ERROR) {
		hg_err("guest %s: %.*s", g->spec, (int)h.length, (char *)buf);
	} else if (ret && ret != -ECONNRESET) {
		hg_err("guest %s: %s", g->spec, strerror(-ret));
	}
	/*
	 * BYE, ERROR, closed or broken: this guest's session is over (said
	 * above); the recording goes on with the host and the other guests.
	 */
	close(g->fd);
	g->fd = -1;
	return 0;
}

/*
 * The mapping, computed from what this run wrote (read back from the
 * file, so it is exactly what a later reader sees), as SEGMENTS.
 */
static int write_segments(struct hgcor_writer *w, const char *path)
{
	const void *buf;
	struct hgsync s;
	size_t len, total = 0;
	struct hgcor_segment *all;
	int ret;

	if (fflush(w->f) || hg_map_file(path, &buf, &len))
		return -EIO;
	ret = hgsync_load(&s, buf, len, HGSYNC_ALLOW_OPEN | HGSYNC_IGNORE_SEGMENTS, NULL);
	if (!ret)
		ret = hgsync_build(&s);
	if (ret) {
		hg_err("%s: cannot compute the mapping: %s", path,
		       ret == -ENOMEM ? strerror(ENOMEM) : hgcor_strerror(ret));
		goto out;
	}
	for (unsigned int i = 0; i < s.nr_guests; i++)
		total += s.guests[i].nr_segs;
	all = calloc(total ? total : 1, sizeof(*all));
	if (!all) {
		ret = -ENOMEM;
		goto out;
	}
	total = 0;
	for (unsigned int i = 0; i < s.nr_guests; i++) {
		const struct hgsync_guest *g = &s.guests[i];
		unsigned int n[HGCOR_METHOD_EXIT + 1] = { 0 };
		uint64_t best[HGCOR_METHOD_EXIT + 1];

		memcpy(all + total, g->segs, g->nr_segs * sizeof(*all));
		total += g->nr_segs;
		for (int m = 0; m <= HGCOR_METHOD_EXIT; m++)
			best[m] = UINT64_MAX;
		for (size_t j = 0; j < g->nr_segs; j++) {
			uint32_t m = g->segs[j].method;

			if (m > HGCOR_METHOD_EXIT)
				continue;
			n[m]++;
			if (g->segs[j].clock == HGCOR_CLOCK_SCHED && g->segs[j].bound_ns < best[m])
				best[m] = g->segs[j].bound_ns;
		}
		if (!g->present)
			continue;
		fprintf(stderr, "hgclock record: guest %u: %u kvm-exact segments (%llu of %llu "
			"probes and pairings agree), %u exit-pairing segments, %u probe segments",
			i, n[HGCOR_METHOD_KVM_EXACT], (unsigned long long)g->kvm_agree,
			(unsigned long long)g->kvm_checked, n[HGCOR_METHOD_EXIT],
			n[HGCOR_METHOD_PROBE]);
		if (best[HGCOR_METHOD_EXIT] != UINT64_MAX)
			fprintf(stderr, ", exit bound %llu ns",
				(unsigned long long)best[HGCOR_METHOD_EXIT]);
		if (best[HGCOR_METHOD_PROBE] != UINT64_MAX)
			fprintf(stderr, ", probe bound %llu ns",
				(unsigned long long)best[HGCOR_METHOD_PROBE]);
		if (g->pv_known)
			fprintf(stderr, "; kvm-clock from %llu of %llu snapshots' parameters, "
				"clamp bound %llu ns", (unsigned long long)g->pv_agree,
				(unsigned long long)g->pv_checked,
				(unsigned long long)g->pv_clamp_ns);
		fputc('\n', stderr);
	}
	ret = hgcor_write_section(w, HGCOR_SEC_SEGMENTS, HGCOR_SEC_OPTIONAL, all,
				  total * sizeof(*all));
	free(all);
out:
	hgsync_free(&s);
	hg_unmap_file(buf, len);
	return ret;
}

/*
 * The vCPU threads tracked before this run, as VCPU_SEEN records stamped
 * now: the ring was skipped at the start, so their discovery records are
 * gone, but their TSC offsets are what the mapping starts from.  Changes
 * after the skip are in the ring (TSC_OFFSET), stamped when they
 * happened, so a reader sorting by TSC sees them in the right order.
 */
static int write_tracked(struct hgcor_writer *w, int fd, const struct host_clock *hc)
{
	struct hgclock_vcpu_info *infos = NULL;
	struct hgclock_rec_vcpu_seen *recs;
	struct hgclock_now now;
	unsigned int nr = 0, n = 0;
	int ret;

	ret = hgclock_list_vcpus(fd, &infos, &nr);
	if (ret || !nr) {
		free(infos);
		return ret == -ENOTTY ? 0 : ret;
	}
	recs = calloc(nr, sizeof(*recs));
	ret = recs ? host_now(hc, &now) : -ENOMEM;
	for (unsigned int i = 0; i < nr && !ret; i++) {
		struct hgclock_rec_vcpu_seen *r = &recs[n];

		if (!(infos[i].flags & HGCLOCK_VCPU_KVM))
			continue;
		r->hdr.type = HGCLOCK_REC_VCPU_SEEN;
		r->hdr.size = sizeof(*r);
		r->hdr.cpu = infos[i].host_cpu >= 0 ? (uint32_t)infos[i].host_cpu : now.cpu;
		r->hdr.tsc = now.tsc;
		r->hdr.sched_clock_ns = now.sched_clock_ns;
		r->tid = infos[i].tid;
		r->vm_pid = infos[i].vm_pid;
		r->vcpu_id = infos[i].vcpu_id;
		r->flags = infos[i].flags;
		memcpy(r->vm_name, infos[i].vm_name, sizeof(r->vm_name));
		r->tsc_offset = infos[i].tsc_offset;
		r->tsc_scaling_ratio = infos[i].tsc_scaling_ratio;
		r->tsc_frac_bits = infos[i].tsc_frac_bits;
		r->host_cpu = infos[i].host_cpu;
		n++;
	}
	if (!ret && n)
		ret = hgcor_write_section(w, HGCOR_SEC_HOST_RECORDS, 0, recs, n * sizeof(*recs));
	free(recs);
	free(infos);
	return ret;
}

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* Sections of host records are at most this long (a ring may be 64 MiB). */
#define HG_SECTION_MAX	(4u << 20)

struct host_sink {
	struct hgcor_writer *w;
	const char *path;
	uint64_t total, lost;
};

static int write_host_batch(const struct hg_batch *b, void *ctx)
{
	struct host_sink *sink = ctx;
	int ret = hgcor_write_section(sink->w, HGCOR_SEC_HOST_RECORDS, 0, b->buf, b->len);

	if (ret) {
		hg_err("%s: %s", sink->path, strerror(-ret));
		return ret;
	}
	sink->total += b->nr;
	sink->lost += b->lost;
	return 0;
}

static void record_usage(FILE *out)
{
	fprintf(out,
		"usage: hgclock record -o FILE [--duration SEC] [--period MS] [--ring-size KIB]\n"
		"                      [--guest SPEC[,vm=PID]]... [--probe-interval MS]\n"
		"                      [--probe-burst N]\n"
		"Records this host's clock data (per-CPU conversions, vCPU tracking,\n"
		"KVM TSC offset changes) into a correlation file until SEC seconds\n"
		"have passed or it is interrupted (Ctrl-C): the file is then complete.\n"
		"--period sets the module's snapshot period while recording; --ring-size KIB\n"
		"grows each CPU's ring first (default 4096; not while another reader maps it).\n"
		"--guest vsock:CID[:PORT][,vm=PID] or tcp:HOST:PORT[,vm=PID] adds a guest\n"
		"running 'hgclock agent': its clock data joins the file, its clocks are\n"
		"probed every --probe-interval MS (default 100, 0: never; N exchanges\n"
		"back to back each time, --probe-burst, default 4), and the\n"
		"guest-to-host mapping is computed at the end.  vm=PID names the VM's\n"
		"process on this host (found from guest-cid=CID on qemu's command line\n"
		"otherwise); with it KVM's exact TSC relation is used.\n");
}

int cmd_record(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "duration", required_argument, NULL, 'd' },
		{ "period", required_argument, NULL, 'p' },
		{ "guest", required_argument, NULL, 'g' },
		{ "probe-interval", required_argument, NULL, 'i' },
		{ "probe-burst", required_argument, NULL, 'b' },
		{ "ring-size", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t duration_s = 0, period_ms = 0;
	struct hgclock_ring_config cfg, saved;
	struct hg_batch b = { .max = HG_SECTION_MAX };
	struct hgcor_writer w;
	struct host_sink sink = { .w = &w };
	struct hgclock_info info;
	struct hgclock_map map;
	const char *out = NULL;
	double start, last_status = 0;
	bool tty = isatty(STDERR_FILENO), period_set = false;
	/* Static: each guest holds a probe buffer; record runs once per process. */
	static struct guest guests[HG_MAX_GUESTS];
	struct host_clock hc;
	uint64_t interval_ms = 100, ring_kib = 4096, burst = HG_PROBE_BURST;
	double interval_s;
	unsigned int nr_guests = 0, g;
	uint8_t *gbuf = NULL;
	char note[512];
	int c, fd, ret, i;

	while ((c = getopt_long(argc, argv, "o:d:p:g:i:b:r:h", opts, NULL)) != -1) {
		switch (c) {
		case 'g':
			if (nr_guests == HG_MAX_GUESTS) {
				hg_err("at most %d guests", HG_MAX_GUESTS);
				return HGCLOCK_EXIT_USAGE;
			}
			if (guest_parse(&guests[nr_guests], optarg)) {
				return HGCLOCK_EXIT_USAGE;
			}
			guests[nr_guests].id = nr_guests;
			guests[nr_guests].fd = -1;
			guests[nr_guests].probe_fd = -1;
			pthread_mutex_init(&guests[nr_guests].lock, NULL);
			nr_guests++;
			break;
		case 'r':
			if (!parse_u64(optarg, 65536, &ring_kib) || ring_kib < 8 ||
			    (ring_kib & (ring_kib - 1))) {
				hg_err("--ring-size wants KiB, a power of two from 8 to 65536, not '%s'",
				       optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 'i':
			if (!parse_u64(optarg, 3600 * 1000, &interval_ms)) {
				hg_err("--probe-interval wants milliseconds, not '%s'", optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 'b':
			if (!parse_u64(optarg, HG_PROBE_BURST_MAX, &burst) || !burst) {
				hg_err("--probe-burst wants a count from 1 to %d, not '%s'",
				       HG_PROBE_BURST_MAX, optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 'o':
			out = optarg;
			break;
		case 'd':
			if (!parse_u64(optarg, 86400 * 365, &duration_s) || !duration_s) {
				hg_err("--duration wants seconds, not '%s'", optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 'p':
			if (!parse_u64(optarg, 3600 * 1000, &period_ms) || !period_ms) {
				hg_err("--period wants milliseconds (1 or more), not '%s'", optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 'h':
			record_usage(stdout);
			return HGCLOCK_EXIT_OK;
		default:
			record_usage(stderr);
			return HGCLOCK_EXIT_USAGE;
		}
	}
	if (!out || optind != argc) {
		if (!out)
			hg_err("-o FILE is required");
		record_usage(stderr);
		return HGCLOCK_EXIT_USAGE;
	}
	fd = hg_open_device();
	if (fd < 0)
		return -fd;
	ret = hgclock_get_info(fd, &info);
	if (ret) {
		hg_err("GET_INFO failed: %s", strerror(-ret));
		close(fd);
		return ret == -EPROTO ? HGCLOCK_EXIT_ABI : HGCLOCK_EXIT_FAILURE;
	}
	/*
	 * A bigger ring before mapping it: a busy host (a trace running, the
	 * guests' vCPUs switching) fills the default one between two drains.
	 * Only ever grown; refused while another reader has it mapped.
	 */
	if (info.ring_size && info.ring_size < ring_kib * 1024) {
		memset(&cfg, 0, sizeof(cfg));
		cfg.flags = HGCLOCK_CFG_SET_RING_SIZE;
		cfg.ring_size = ring_kib * 1024;
		if (hgclock_ring_config(fd, &cfg))
			fprintf(stderr, "hgclock record: keeping the %llu KiB rings (%s)\n",
				(unsigned long long)info.ring_size / 1024, strerror(errno));
	}
	ret = hg_map_consumer(fd, &map);
	if (ret) {
		close(fd);
		return HGCLOCK_EXIT_FAILURE;
	}
	sink.path = out;
	b.buf = malloc(b.max);
	if (!b.buf) {
		ret = HGCLOCK_EXIT_FAILURE;
		goto out_map;
	}
	ret = hgcor_create(&w, out);
	if (ret) {
		hg_err("%s: %s", out, strerror(-ret));
		ret = HGCLOCK_EXIT_FAILURE;
		goto out_map;
	}
	/* Start from now, with every CPU's conversion in the stream first. */
	hgclock_ring_skip_all(&map);
	if (period_ms) {
		memset(&saved, 0, sizeof(saved));
		memset(&cfg, 0, sizeof(cfg));
		cfg.flags = HGCLOCK_CFG_SET_PERIOD;
		cfg.snapshot_period_ns = period_ms * 1000000ull;
		if (hgclock_ring_config(fd, &saved) || hgclock_ring_config(fd, &cfg))
			hg_err("cannot set the snapshot period: %s", strerror(errno));
		else
			period_set = true;
	}
	hgclock_snapshot(fd, -1);

	{
		char host[65] = "";

		gethostname(host, sizeof(host) - 1);
		snprintf(note, sizeof(note), "hgclock record on %s; host abi %u.%u",
			 host, info.abi_major, info.abi_minor);
	}
	for (i = 0; i < argc; i++) {
		size_t l = strlen(note);

		snprintf(note + l, sizeof(note) - l, "%s%s", i ? " " : "; argv: ", argv[i]);
	}
	ret = hgcor_write_section(&w, HGCOR_SEC_HOST_INFO, 0, &info, sizeof(info));
	if (!ret)
		ret = hgcor_write_section(&w, HGCOR_SEC_NOTE, 0, note, strlen(note));
	if (nr_guests) {
		gbuf = malloc(HGP_MAX_PAYLOAD);
		if (!gbuf)
			ret = -ENOMEM;
	}
	hc.fd = fd;
	hc.map = &map;
	interval_s = interval_ms / 1000.0;
	for (g = 0; g < nr_guests; g++) {
		guests[g].hc = &hc;
		guests[g].interval_s = interval_s;
		guests[g].burst = (unsigned int)burst;
	}
	if (!ret)
		ret = write_tracked(&w, fd, &hc);
	for (g = 0; g < nr_guests && !ret; g++)
		ret = guest_open(&guests[g], &w, gbuf);
	signal(SIGPIPE, SIG_IGN);

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	start = now_s();
	while (!ret) {
		struct pollfd pfd[1 + HG_MAX_GUESTS];
		bool last = stop || (duration_s && now_s() - start >= duration_s);

		/* Everything read is written before the next read. */
		ret = hg_drain_batched(&map, &b, write_host_batch, &sink);
		for (g = 0; g < nr_guests && !ret; g++)
			ret = flush_probes(&guests[g], &w);
		if (ret)
			break;
		if (tty && (now_s() - last_status >= 1 || last)) {
			last_status = now_s();
			uint64_t probes = 0, rtt = 0;

			for (g = 0; g < nr_guests; g++) {
				probes += guests[g].nr_probes;
				if (guests[g].best_rtt_ns > rtt)
					rtt = guests[g].best_rtt_ns;
			}
			fprintf(stderr, "\rhgclock record: %.0f s, %llu records, %llu lost, %llu bytes",
				last_status - start, (unsigned long long)sink.total,
				(unsigned long long)sink.lost, (unsigned long long)w.bytes);
			if (nr_guests)
				fprintf(stderr, ", %u guests, %llu probes, tightest round trip %llu ns",
					nr_guests, (unsigned long long)probes,
					(unsigned long long)rtt);
			fputs("  ", stderr);
		}
		if (last)
			break;
		pfd[0].fd = fd;
		pfd[0].events = POLLIN;
		for (g = 0; g < nr_guests; g++) {
			pfd[1 + g].fd = guests[g].fd;	/* -1: ignored */
			pfd[1 + g].events = POLLIN;
			pfd[1 + g].revents = 0;
		}
		if (poll(pfd, 1 + nr_guests, 200) < 0 && errno != EINTR) {
			ret = -errno;
			hg_err("poll: %s", strerror(errno));
		}
		for (g = 0; g < nr_guests && !ret; g++)
			if (guests[g].fd >= 0 && (pfd[1 + g].revents & (POLLIN | POLLHUP | POLLERR)))
				ret = guest_message(&guests[g], &w, gbuf, &hc, interval_s);
		/* A new burst of probes for each guest whose interval has passed. */
		for (g = 0; g < nr_guests && !ret; g++) {
			struct guest *gs = &guests[g];

			if (gs->fd < 0 || gs->probe_fd >= 0 || !gs->can_probe || gs->probe_pending ||
			    !interval_ms || now_s() < gs->next_probe)
				continue;
			gs->burst_left = gs->burst - 1;
			ret = send_probe(gs, &hc);
			if (ret) {
				hg_err("guest %s: probe: %s", gs->spec, strerror(-ret));
				close(gs->fd);
				gs->fd = -1;
				ret = 0;
			}
		}
	}
	for (g = 0; g < nr_guests; g++)
		close_probe_channel(&guests[g]);
	/*
	 * Ask each guest to finish: it sends what its rings still hold, then
	 * BYE.  What arrives is written; a guest gets 5 s.
	 */
	for (g = 0; g < nr_guests; g++) {
		double until = now_s() + 5;

		if (guests[g].fd < 0)
			continue;
		guests[g].closing = true;
		hgp_send(guests[g].fd, HGP_BYE, NULL, 0);
		while (!ret && guests[g].fd >= 0 && now_s() < until) {
			struct pollfd one = { .fd = guests[g].fd, .events = POLLIN };

			if (poll(&one, 1, 500) > 0)
				ret = guest_message(&guests[g], &w, gbuf, &hc, interval_s);
		}
		if (guests[g].fd >= 0) {
			close(guests[g].fd);
			guests[g].fd = -1;
		}
	}
	for (g = 0; g < nr_guests && !ret; g++)
		ret = flush_probes(&guests[g], &w);
	for (g = 0; g < nr_guests; g++)
		fprintf(stderr, "hgclock record: guest %s: %llu record batches, %llu probes"
			" (tightest round trip %llu ns, %llu dropped, %llu timed out)\n", guests[g].spec,
			(unsigned long long)guests[g].records, (unsigned long long)guests[g].nr_probes,
			(unsigned long long)guests[g].best_rtt_ns,
			(unsigned long long)guests[g].probes_dropped,
			(unsigned long long)guests[g].probe_timeouts);
	if (!ret && nr_guests)
		ret = write_segments(&w, out);
	if (tty)
		fputc('\n', stderr);
	if (period_set) {
		saved.flags = HGCLOCK_CFG_SET_PERIOD;
		hgclock_ring_config(fd, &saved);
	}
	/* END only after a clean run: a failed one must not look complete. */
	if (ret)
		hgcor_abort(&w);
	else if (hgcor_close(&w))
		ret = -EIO;
	if (!ret)
		fprintf(stderr, "hgclock record: %s: %llu records (%llu lost in the kernel), %llu bytes\n",
			out, (unsigned long long)sink.total, (unsigned long long)sink.lost,
			(unsigned long long)w.bytes);
	ret = ret ? HGCLOCK_EXIT_FAILURE : HGCLOCK_EXIT_OK;
out_map:
	for (g = 0; g < nr_guests; g++) {
		close_probe_channel(&guests[g]);
		if (guests[g].fd >= 0)
			close(guests[g].fd);
	}
	free(gbuf);
	free(b.buf);
	hgclock_map_close(&map);
	close(fd);
	return ret;
}
