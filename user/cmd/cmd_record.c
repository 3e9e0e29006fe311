// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock record -o FILE [--duration SEC] [--period MS]: records this
 * host's clock data into a correlation file: the module's INFO, then every
 * record of every CPU's ring (CYC2NS snapshots, vCPU tracking, KVM TSC
 * offset changes, losses) as it arrives, until the duration ends or
 * SIGINT/SIGTERM.  Then it drains what is left, writes the END section and
 * closes.  It writes to FILE.tmp-XXXXXX next to FILE (valid up to its
 * last section at any time) and renames that to FILE after a clean stop
 * only (user/output.h).  A status line is shown on a terminal.
 *
 * With --guest, each guest's agent streams its own ring into the file,
 * and the host probes its clocks continuously (bursts of bracketed
 * exchanges, see proto.h).  At the end the mapping is computed from all of
 * it (sync*.c: KVM's exact TSC relation where the guest's VM is known and
 * agrees with the probes, fitted probes otherwise) and written as the
 * SEGMENTS section before END.
 *
 * A guest whose session breaks, stalls or ends early is followed: looked
 * for until --follow-timeout (a live migration or a restore moves it to
 * another VM process), and found again it goes on under a new guest id,
 * with a DISRUPTION section between (guest_ended()).  One that cannot be
 * reached at the start or does not come back is written down as lost (a
 * NOTE, file-format.rst) and the others go on; --require-all makes that
 * fatal.  SIGINT, SIGTERM and
 * SIGHUP end the recording cleanly; SIGPIPE is ignored (every write is
 * checked instead).  With a COMMAND after the options, record runs it
 * and records for its life: see run_command() below; with --merge OUT it
 * then merges the traces COMMAND wrote (merge_at_end()).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "corr.h"
#include "libhgclock.h"
#include "merge.h"
#include "output.h"
#include "proto.h"
#include "sync.h"
#include "vmfind.h"

/*
 * Guests of one recording: the readers' limit (sync.h), so that every
 * guest recorded can be mapped.  Allocated as given, not up front.
 */
#define HG_MAX_GUESTS	HGSYNC_MAX_GUESTS
/* A message from an agent that has begun must be complete within this. */
#define HG_GUEST_MSG_TIMEOUT_S	10
/* With probes on: an agent that answers none for this long is lost. */
#define HG_GUEST_SILENT_S	60

/* The output's name for messages: what -o said. */
static const char *out_name;

/* Every section goes through here: a failed write is said, with the file's name. */
static int put_section2(struct hgcor_writer *w, uint32_t type, uint32_t flags,
			const void *p1, size_t l1, const void *p2, size_t l2)
{
	int ret = hgcor_write_section2(w, type, flags, p1, l1, p2, l2);

	if (ret)
		hg_err("%s: writing a section (type %u, %zu bytes): %s", out_name, type, l1 + l2,
		       strerror(-ret));
	return ret;
}

static int put_section(struct hgcor_writer *w, uint32_t type, uint32_t flags,
		       const void *payload, size_t len)
{
	return put_section2(w, type, flags, payload, len, NULL, 0);
}

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
	/*
	 * No agent (--guest vm=PID, or ,no-agent): only the VM is recorded
	 * (its GUEST_VM; exit pairing on, for `hgclock pairmark` in it), no
	 * connection, no probes (sync.rst, "Guests without the module").
	 */
	bool no_agent;
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
	 * Losing the guest: @lost once its NOTE is written (guest_lost());
	 * @why says what went wrong before that.  @last_heard (now_s(),
	 * under @lock): its last message or probe reply; @probe_dead: the
	 * probe thread ended on an error, so silence means nothing.
	 */
	bool lost;
	char why[200];
	double last_heard;
	volatile bool probe_dead;
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
	/*
	 * Following the guest through a migration, a restore or a broken
	 * connection (sync.rst, "Migration and restore").  When its session
	 * breaks, guest_ended() starts the follower thread instead of losing
	 * it: until --follow-timeout, the thread looks for a VM with its
	 * vsock CID or its VM's name (@vm_name; a local migration's
	 * destination has another CID) whose agent answers HELLO, and hands
	 * the connection over in the follow_* fields, under @lock, with
	 * @follow_done.  The main loop then starts a new session under a new
	 * guest id (follow_finish()): @id changes, this slot stays.  @disr
	 * is the DISRUPTION between the two, written when the new session's
	 * identity and first probe are in (the clock jump), or after
	 * HG_DISR_WAIT_S.  The follower reads only @spec, @vm, @vm_name and
	 * @port_suffix, which nothing changes while it runs.
	 */
	char vm_name[VMFIND_NAME_MAX + 1];
	char port_suffix[16];		/* ":PORT" of a vsock spec, or "" */
	struct hgcor_identity identity;	/* of the first session, for comparison */
	bool has_identity;
	bool following;
	double follow_since, follow_deadline;
	char follow_cause[200];		/* why the session broke */
	pthread_t follower;
	bool follower_on;
	volatile bool follow_stop;
	bool follow_done;		/* under @lock, with the four below */
	int follow_fd;
	int32_t follow_pid;
	uint32_t follow_cid;
	uint8_t *follow_hello;		/* the HELLO reply's payload (malloc) */
	uint32_t follow_hello_len, follow_hello_minor;
	struct hgcor_disruption disr;
	bool disr_pending, disr_identity_in, disr_probe_in;
	double disr_deadline;
	bool have_last_probe, want_first_probe;
	struct hgcor_probe last_probe;	/* the latest written: the jump's "before" */
};

/* Seconds a DISRUPTION waits for the new session's identity and first probe. */
#define HG_DISR_WAIT_S	5

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

/* Guest @g was heard from now (a message or a probe reply): see @last_heard. */
static void heard(struct guest *g)
{
	pthread_mutex_lock(&g->lock);
	g->last_heard = now_s();
	pthread_mutex_unlock(&g->lock);
}

/* What went wrong with guest @g, for guest_lost(): one line, printable. */
static void __attribute__((format(printf, 2, 3))) set_why(struct guest *g, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(g->why, sizeof(g->why), fmt, ap);
	va_end(ap);
	/* An agent's ERROR text is the agent's: no control characters. */
	for (char *p = g->why; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = ' ';
}

/* Says which process runs guest @g's VM and its vCPU threads by QEMU's names. */
static void say_vm(const struct vmfind *vf, const struct guest *g, const char *how)
{
	struct vmfind_vcpu *v;
	int n = vmfind_vcpus(vf, g->vm.vm_pid, &v);

	fprintf(stderr, "hgclock record: guest %s: VM process %d (%s, vsock CID %u)",
		g->vm.spec, g->vm.vm_pid, how, g->vm.cid);
	if (n > 0) {
		fprintf(stderr, ", %d vCPU threads:", n);
		for (int i = 0; i < n && i < 8; i++)
			fprintf(stderr, " CPU %u/KVM %d", v[i].index, v[i].tid);
		if (n > 8)
			fputs(" ...", stderr);
	}
	fputc('\n', stderr);
	free(v);
}

/*
 * The VM process of a vsock guest: the QEMU whose command line gives a
 * vhost-vsock device guest-cid=CID, read whole, in QEMU's key=value or
 * libvirt's JSON -device form (vmfind.c).  -1 if none or several, with
 * the reason in @why.
 */
static int32_t vm_by_cid(struct guest *g, char *why, size_t size)
{
	struct vmfind vf;
	struct vmfind_vm vm;
	int ret;

	vmfind_init(&vf);
	ret = vmfind_by_cid(&vf, g->vm.cid, &vm);
	if (ret) {
		snprintf(why, size, "%s%s", vf.why,
			 ret == VMFIND_E_NONE || ret == VMFIND_E_SEVERAL ? " (add ,vm=PID)" : "");
		return -1;
	}
	g->vm.vm_pid = vm.pid;
	say_vm(&vf, g, "found by vsock CID");
	return vm.pid;
}

/*
 * "domain:NAME": libvirt's running domain NAME, its QEMU process and vsock
 * CID (vmfind_domain()); the agent is then reached at vsock:CID.  The
 * user named the VM: not finding it is an error.
 */
static int guest_domain(struct guest *g, const char *name)
{
	struct vmfind vf;
	struct vmfind_vm vm;
	int ret;

	vmfind_init(&vf);
	ret = vmfind_domain(&vf, name, &vm);
	if (ret) {
		hg_err("--guest domain:%s: %s", name, vf.why);
		return -1;
	}
	snprintf(g->spec, sizeof(g->spec), "vsock:%u", vm.cid);
	snprintf(g->vm.spec, sizeof(g->vm.spec), "domain:%.8s", name);
	g->vm.vm_pid = vm.pid;
	g->vm.cid = vm.cid;
	/* The user named it, as with vm=PID: how 2 keeps 1.1 readers reading. */
	g->vm.how = HGCOR_VM_BY_OPTION;
	say_vm(&vf, g, vm.pid_from == VMFIND_PID_PIDFILE ? "libvirt's pid file" :
	       "QEMU's -name");
	return 0;
}

#define HG_NO_AGENT	",no-agent"

/*
 * "SPEC[,vm=PID][,no-agent]", "domain:NAME[,no-agent]" or "vm=PID": the
 * connection spec and which VM on this host it is.  "vm=PID" alone and
 * ",no-agent" record the VM without an agent: it must then be known (vm=,
 * domain:, or a vsock CID's QEMU).
 */
static int guest_parse(struct guest *g, const char *arg_in)
{
	char arg[256];
	const char *comma;
	size_t len = strlen(arg_in), nl = strlen(HG_NO_AGENT);
	uint64_t pid;

	g->vm.vm_pid = -1;
	g->vm.how = HGCOR_VM_UNKNOWN;
	if (len >= sizeof(arg)) {
		hg_err("--guest '%s' is too long", arg_in);
		return -1;
	}
	memcpy(arg, arg_in, len + 1);
	if (len > nl && !strcmp(arg + len - nl, HG_NO_AGENT)) {
		g->no_agent = true;
		arg[len - nl] = 0;
	}
	if (!strncmp(arg, "vm=", 3)) {
		if (!parse_u64(arg + 3, 0x7fffffff, &pid) || !pid) {
			hg_err("--guest %s: vm= wants the VM's process id", arg_in);
			return -1;
		}
		g->no_agent = true;
		snprintf(g->spec, sizeof(g->spec), "vm=%d", (int)pid);
		snprintf(g->vm.spec, sizeof(g->vm.spec), "vm=%d", (int)pid);
		g->vm.vm_pid = (int32_t)pid;
		g->vm.how = HGCOR_VM_BY_OPTION;
		return 0;
	}
	if (!strncmp(arg, "domain:", 7))
		return guest_domain(g, arg + 7);
	comma = strstr(arg, ",vm=");
	len = comma ? (size_t)(comma - arg) : strlen(arg);
	if (g->no_agent && strncmp(arg, "vsock:", 6) && !comma) {
		hg_err("--guest %s: without an agent the VM must be named (vm=PID, "
		       "domain:NAME, or vsock:CID)", arg_in);
		return -1;
	}
	if (len >= sizeof(g->spec)) {
		hg_err("--guest '%s' is too long", arg);
		return -1;
	}
	memcpy(g->spec, arg, len);
	g->spec[len] = 0;
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

/*
 * How far the guest's clocks moved against the host's across a
 * disruption: (guest - host) at the first probe after, minus the same at
 * the last before, each taken at its round trip's middle; the bound is
 * half the two round trips.  Differences of u64 readings, so a wrap
 * still gives the signed jump.  On the ftrace local clock (sched_clock)
 * and on the TSC.
 */
static void disr_jump(struct hgcor_disruption *d, const struct hgcor_probe *before,
		      const struct hgcor_probe *after)
{
	uint64_t b_tsc = before->host_tsc_send + (before->host_tsc_recv - before->host_tsc_send) / 2;
	uint64_t a_tsc = after->host_tsc_send + (after->host_tsc_recv - after->host_tsc_send) / 2;
	uint64_t b_ns = before->host_ns_send + (before->host_ns_recv - before->host_ns_send) / 2;
	uint64_t a_ns = after->host_ns_send + (after->host_ns_recv - after->host_ns_send) / 2;

	d->guest_tsc_jump = (int64_t)((after->guest_tsc - a_tsc) - (before->guest_tsc - b_tsc));
	d->guest_local_jump_ns = (int64_t)((after->guest_sched_ns - a_ns) -
					   (before->guest_sched_ns - b_ns));
	d->jump_bound_ns = ((before->host_ns_recv - before->host_ns_send) +
			    (after->host_ns_recv - after->host_ns_send) + 1) / 2;
	d->flags |= HGCOR_DISRUPT_JUMP_KNOWN;
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
	/* Across a disruption: the guest's clock jump, from the probes either side. */
	if (g->want_first_probe && g->disr_pending) {
		if (g->have_last_probe)
			disr_jump(&g->disr, &g->last_probe, &copy[0]);
		g->want_first_probe = false;
		g->disr_probe_in = true;
	}
	g->last_probe = copy[n - 1];
	g->have_last_probe = true;
	/* 1.1 sections are optional: a 1.0 reader skips them. */
	return put_section2(w, HGCOR_SEC_PROBES, HGCOR_SEC_OPTIONAL, prefix, sizeof(prefix),
			    copy, n * sizeof(copy[0]));
}

/* Keeps one probe; false when the buffer is full (counted, dropped). */
static bool keep_probe(struct guest *g, const struct hgcor_probe *p)
{
	bool kept;

	pthread_mutex_lock(&g->lock);
	kept = g->np < HG_PROBE_BUF;
	g->last_heard = now_s();
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
	if (why && !g->probe_stop) {
		g->probe_dead = true;
		hg_err("guest %s: probe channel: %s (%s); no more probes", g->spec, why,
		       strerror(err < 0 ? -err : EPROTO));
	}
	return NULL;
}

/* A second connection to the agent, for probes only (protocol 1.1). */
static int open_probe_channel(struct guest *g, uint8_t *buf)
{
	struct hgp_hello hello = { HGP_VERSION_MAJOR, HGP_VERSION_MINOR, HGP_HELLO_PROBE_CHANNEL };
	struct timeval tv = { .tv_sec = 1 };
	struct hgp_header h;
	pthread_attr_t attr;
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
	/* A channel closed before (a session that broke) left the flag set. */
	g->probe_stop = false;
	/* Small stacks: a host may record hundreds of guests at once. */
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 << 10);
	ret = -pthread_create(&g->probe_thread, &attr, probe_thread_fn, g);
	pthread_attr_destroy(&attr);
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
		set_why(g, "a probe reply it was not asked for");
		return -EPROTO;
	}
	memcpy(&r, buf, sizeof(r));
	if (r.seq != g->probe_seq) {
		set_why(g, "probe reply %llu, expected %llu",
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
		if (ret) {
			set_why(g, "sending a probe: %s", strerror(-ret));
			ret = -EPROTO;	/* the guest's failure, not the file's */
		}
	} else {
		g->next_probe = now_s() + interval_s;
	}
	return ret;
}

/*
 * Connects, says HELLO, writes the guest's INFO to the file.  0; 1 when
 * the guest cannot be recorded (@g->why says why; the others go on); or
 * -errno when writing the file failed (said; the recording fails).
 */
/*
 * A guest without an agent: its VM (named, or found by its vsock CID) gets
 * exit pairing (for `hgclock pairmark` in the guest: EXIT_HOST records)
 * and its GUEST_VM section, and a NOTE says it has no agent.  A GUEST_VM
 * without a GUEST_INFO of its id is what tells readers (file-format.rst).
 * 0, 1 when the VM is unknown (@g->why says why), -errno on a failed write.
 */
static int guest_open_vm_only(struct guest *g, struct hgcor_writer *w)
{
	char note[400];
	int ret, pret;

	if (g->vm.how == HGCOR_VM_UNKNOWN) {
		char why[600] = "no VM";

		if (g->vm.cid)
			g->vm.vm_pid = vm_by_cid(g, why, sizeof(why));
		if (g->vm.vm_pid <= 0) {
			set_why(g, "no agent and its VM not found: %s", why);
			return 1;
		}
		g->vm.how = HGCOR_VM_BY_CID;
	}
	if (kill(g->vm.vm_pid, 0) && errno == ESRCH) {
		set_why(g, "no agent, and no process %d", (int)g->vm.vm_pid);
		return 1;
	}
	pret = hgclock_pair_vm(g->hc->fd, g->vm.vm_pid, 1);
	if (pret && pret != -EINVAL)
		fprintf(stderr, "hgclock record: guest %s: no exit pairing (%s): 'hgclock pairmark'"
			" in it pairs nothing\n", g->spec, strerror(-pret));
	g->vm.guest_id = g->id;
	ret = put_section(w, HGCOR_SEC_GUEST_VM, HGCOR_SEC_OPTIONAL, &g->vm, sizeof(g->vm));
	snprintf(note, sizeof(note), "guest %u (%s) is VM %d without an agent: x86-tsc exact from "
		 "the host's records, local/perf only with marker pairings", g->id, g->spec,
		 (int)g->vm.vm_pid);
	if (!ret)
		ret = put_section(w, HGCOR_SEC_NOTE, 0, note, strlen(note));
	fprintf(stderr, "hgclock record: guest %u: VM %d without an agent: its x86-tsc trace maps"
		" exactly; local/perf need 'hgclock pairmark' in the guest\n", g->id,
		(int)g->vm.vm_pid);
	return ret;
}

/*
 * HELLO on a fresh connection @fd to an agent: the reply's payload lands
 * in @buf (HGP_MAX_PAYLOAD), its length in @len, and @minor says the
 * agent's protocol minor.  0; 1 when this is no agent we can use (@why
 * says why, one line).  Touches no struct guest: the follower thread
 * calls it too.
 */
static int agent_hello(int fd, uint8_t *buf, uint32_t *len, uint32_t *minor, int timeout_s,
		       char *why, size_t why_size)
{
	struct hgp_hello hello = { HGP_VERSION_MAJOR, HGP_VERSION_MINOR, 0 };
	struct timeval tv = { .tv_sec = timeout_s };
	struct hgp_header h;
	int ret;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	ret = hgp_send(fd, HGP_HELLO, &hello, sizeof(hello));
	if (!ret)
		ret = hgp_recv(fd, &h, buf);
	if (ret) {
		snprintf(why, why_size, "no reply to HELLO: %s", ret == -EAGAIN ?
			 "timed out" : ret == -ECONNRESET ? "connection closed" : strerror(-ret));
		return 1;
	}
	if (h.type == HGP_ERROR) {
		snprintf(why, why_size, "refused: %.*s", (int)(h.length < 150 ? h.length : 150),
			 (char *)buf);
		return 1;
	}
	if (h.type != HGP_HELLO_REPLY || h.length < sizeof(hello) + HGCLOCK_INFO_SIZE_VER0) {
		snprintf(why, why_size, "not an hgclock agent (bad reply to HELLO)");
		return 1;
	}
	memcpy(&hello, buf, sizeof(hello));
	if (hello.major != HGP_VERSION_MAJOR) {
		snprintf(why, why_size, "the agent speaks protocol %u.%u, this host %u.%u",
			 hello.major, hello.minor, HGP_VERSION_MAJOR, HGP_VERSION_MINOR);
		return 1;
	}
	*len = h.length;
	*minor = hello.minor;
	return 0;
}

/* QEMU's -name (or libvirt's domain) of VM process @pid into @name, "" if none. */
static void vm_name_of(int32_t pid, char *name, size_t size)
{
	struct vmfind vf;
	struct vmfind_args a;

	name[0] = '\0';
	vmfind_init(&vf);
	if (pid <= 0 || vmfind_read_cmdline(&vf, pid, &a))
		return;
	if (vmfind_args_name(&a, name, size) != 1)
		name[0] = '\0';
	vmfind_args_free(&a);
}

/*
 * A session begins on @g->fd, whose HELLO reply (@hello_len bytes) is in
 * @buf: the guest's INFO under its id, its VM found if not known, exit
 * pairing asked for, the probe channel opened, its GUEST_VM.  0, or
 * -errno when writing the file failed (said).
 */
static int session_start(struct guest *g, struct hgcor_writer *w, uint8_t *buf,
			 uint32_t hello_len, uint32_t minor)
{
	struct timeval tv = { .tv_sec = HG_GUEST_MSG_TIMEOUT_S };
	uint32_t prefix[2] = { g->id, 0 };
	int ret;

	g->can_probe = minor >= 1;
	ret = put_section2(w, HGCOR_SEC_GUEST_INFO, 0, prefix, sizeof(prefix),
			   buf + sizeof(struct hgp_hello), hello_len - sizeof(struct hgp_hello));
	/* Which VM on this host: said on the command line, or found by CID. */
	if (!ret && g->vm.how == HGCOR_VM_UNKNOWN) {
		char why[600] = "a tcp: guest names no VM process (add ,vm=PID)";

		if (g->vm.cid)
			g->vm.vm_pid = vm_by_cid(g, why, sizeof(why));
		if (g->vm.vm_pid > 0)
			g->vm.how = HGCOR_VM_BY_CID;
		else
			fprintf(stderr, "hgclock record: KVM-exact pairing unavailable for guest %s:"
				" %s; falls back to probes, bound ~hundreds of us\n", g->spec, why);
	}
	/* Its name: how a migration's destination with another CID is known. */
	if (!ret && g->vm.vm_pid > 0 && !g->vm_name[0])
		vm_name_of(g->vm.vm_pid, g->vm_name, sizeof(g->vm_name));
	/*
	 * The host records a VM's exit pairings only while a recorder asks
	 * for them (until our device file is closed): an older module
	 * records them for every VM and refuses the flag.
	 */
	if (!ret && g->vm.vm_pid > 0) {
		int pret = hgclock_pair_vm(g->hc->fd, g->vm.vm_pid, 1);

		if (pret && pret != -EINVAL)
			fprintf(stderr, "hgclock record: guest %s: no exit pairing (%s)\n",
				g->spec, strerror(-pret));
	}
	/* Probes on a channel of their own; in-band if the agent cannot. */
	if (!ret && g->can_probe && g->interval_s > 0) {
		int pret = open_probe_channel(g, buf);

		if (pret)
			fprintf(stderr, "hgclock record: guest %s: no probe channel (%s); probing"
				" in-band\n", g->spec, strerror(-pret));
	}
	if (!ret) {
		g->vm.guest_id = g->id;
		ret = put_section(w, HGCOR_SEC_GUEST_VM, HGCOR_SEC_OPTIONAL, &g->vm,
				  sizeof(g->vm));
	}
	if (ret) {
		close(g->fd);
		g->fd = -1;
		return ret;
	}
	/*
	 * Reads from here when poll() says a message is there; one that
	 * stalls half-way for HG_GUEST_MSG_TIMEOUT_S loses the guest, and
	 * so does a send that long blocked: one agent never holds up the
	 * host's rings and the other guests for longer.
	 */
	setsockopt(g->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(g->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	heard(g);
	return 0;
}

static int guest_open(struct guest *g, struct hgcor_writer *w, uint8_t *buf)
{
	char err[300], why[200];
	uint32_t len = 0, minor = 0;
	const char *colon;

	if (g->no_agent)
		return guest_open_vm_only(g, w);
	/* vsock:CID:PORT: the port goes with every CID the guest may move to. */
	colon = !strncmp(g->spec, "vsock:", 6) ? strchr(g->spec + 6, ':') : NULL;
	snprintf(g->port_suffix, sizeof(g->port_suffix), "%.15s", colon ? colon : "");
	g->fd = hgp_connect(g->spec, err, sizeof(err));
	if (g->fd < 0) {
		set_why(g, "not reached at the start: %s", err);
		g->fd = -1;
		return 1;
	}
	if (agent_hello(g->fd, buf, &len, &minor, 10, why, sizeof(why))) {
		set_why(g, "at the start, %s", why);
		close(g->fd);
		g->fd = -1;
		return 1;
	}
	if (minor < 1)
		fprintf(stderr, "hgclock record: guest %s: agent %u.%u answers no probes\n",
			g->spec, HGP_VERSION_MAJOR, minor);
	if (minor < 2)
		fprintf(stderr, "hgclock record: guest %s: agent %u.%u sends no CPU map: "
			"guest CPU n is taken as vCPU n\n", g->spec, HGP_VERSION_MAJOR, minor);
	return session_start(g, w, buf, len, minor);
}

/* The recording's start (now_s()), and how guests fared: see guest_lost(). */
static double rec_start;
static unsigned int nr_lost;
static bool require_all;

/*
 * Guest @g is lost (@g->why says why): its connections are closed, a NOTE
 * says which guest, when (the host's TSC and ftrace local clock, and the
 * seconds since the start) and why, and standard error says it in one
 * line.  The host and the other guests go on (unless --require-all).
 * 0, or -errno when the NOTE could not be written (said).
 */
static int guest_lost(struct guest *g, struct hgcor_writer *w, const struct host_clock *hc)
{
	struct hgclock_now now = { 0 };
	double t = now_s() - rec_start;
	char note[400];

	close_probe_channel(g);
	if (g->fd >= 0) {
		close(g->fd);
		g->fd = -1;
	}
	if (g->lost)
		return 0;
	g->lost = true;
	nr_lost++;
	if (host_now(hc, &now))
		memset(&now, 0, sizeof(now));	/* 0: unknown; the seconds still say */
	snprintf(note, sizeof(note), "guest %u (%s) lost at host_tsc %llu host_local_ns %llu "
		 "(+%.3f s): %s", g->id, g->spec, (unsigned long long)now.tsc,
		 (unsigned long long)now.sched_clock_ns, t > 0 ? t : 0, g->why);
	fprintf(stderr, "hgclock record: guest %u (%s) lost %.1f s into the recording: %s; %s\n",
		g->id, g->spec, t > 0 ? t : 0, g->why,
		require_all ? "stopping (--require-all)" : "recording the others");
	return put_section(w, HGCOR_SEC_NOTE, 0, note, strlen(note));
}

/* --follow-timeout: how long a guest whose session broke is looked for. */
static unsigned int follow_timeout_s = 60;
/* The next guest id of the file: each session after a disruption takes one. */
static uint32_t next_file_id;

/* The DISRUPTION of @g, once (file-format.rst); said on standard error. */
static int disr_commit(struct guest *g, struct hgcor_writer *w)
{
	const struct hgcor_disruption *d = &g->disr;

	if (!g->disr_pending)
		return 0;
	g->disr_pending = false;
	g->want_first_probe = false;
	if (d->flags & HGCOR_DISRUPT_JUMP_KNOWN)
		fprintf(stderr, "hgclock record: guest %u -> %u: the guest's clock jumped %+.3f ms "
			"(+-%.3f ms) against the host's, by probes\n", d->guest_id,
			d->next_guest_id, d->guest_local_jump_ns / 1e6, d->jump_bound_ns / 1e6);
	return put_section(w, HGCOR_SEC_DISRUPTION, HGCOR_SEC_OPTIONAL, d, sizeof(*d));
}

/*
 * How VM process @pid came to run the guest, from its command line:
 * QEMU's -incoming from a socket is a migration, from a file or a
 * command a restore; libvirt's "-incoming defer" serves both, and says
 * nothing.
 */
static uint32_t incoming_kind(int32_t pid)
{
	struct vmfind vf;
	struct vmfind_args a;
	uint32_t kind = HGCOR_DISRUPT_NEW_VM;

	vmfind_init(&vf);
	if (vmfind_read_cmdline(&vf, pid, &a))
		return kind;
	for (size_t i = 0; i + 1 < a.argc; i++) {
		const char *v = a.argv[i + 1];

		if (strcmp(a.argv[i], "-incoming") && strcmp(a.argv[i], "--incoming"))
			continue;
		if (!strncmp(v, "tcp:", 4) || !strncmp(v, "unix:", 5) || !strncmp(v, "rdma:", 5) ||
		    !strncmp(v, "vsock:", 6))
			kind = HGCOR_DISRUPT_MIGRATION;
		else if (!strncmp(v, "exec:", 5) || !strncmp(v, "file:", 5))
			kind = HGCOR_DISRUPT_RESTORE;
	}
	vmfind_args_free(&a);
	return kind;
}

/*
 * The follower thread of guest @arg (struct guest, "Following" above):
 * every half second, each VM with the guest's CID or its VM's name is
 * asked HELLO; the first whose agent answers is handed over.  A VM that
 * is paused or still receiving its migration does not answer (vsock's
 * connect times out): it is asked again next time.  Ends on the stop
 * flag or the deadline, with follow_done set either way.
 */
static void *follower_fn(void *arg)
{
	struct guest *g = arg;
	uint8_t *buf = malloc(HGP_MAX_PAYLOAD);
	char why[200] = "no VM with its CID or name answered";
	int fd = -1;
	int32_t pid = -1;
	uint32_t cid = 0, len = 0, minor = 0;

	while (buf && !g->follow_stop && now_s() < g->follow_deadline && fd < 0) {
		struct vmfind vf;
		struct vmfind_vm *vms = NULL;
		size_t nr = 0;

		vmfind_init(&vf);
		vf.virsh = NULL;	/* twice a second: the run directory's XML only */
		if (!g->vm.cid && !g->vm_name[0]) {
			/* tcp:HOST:PORT: only that address. */
			char err[300];

			fd = hgp_connect(g->spec, err, sizeof(err));
			if (fd >= 0 && agent_hello(fd, buf, &len, &minor, 3, why, sizeof(why))) {
				close(fd);
				fd = -1;
			}
		} else if (!vmfind_all(&vf, &vms, &nr)) {
			for (size_t i = 0; i < nr && fd < 0 && !g->follow_stop; i++) {
				char spec[64], err[300];

				if (vms[i].err || !vms[i].cid || vms[i].pid <= 0)
					continue;
				if (vms[i].cid != g->vm.cid &&
				    (!g->vm_name[0] || strcmp(vms[i].name, g->vm_name)))
					continue;
				snprintf(spec, sizeof(spec), "vsock:%u%s", vms[i].cid, g->port_suffix);
				fd = hgp_connect(spec, err, sizeof(err));
				if (fd < 0)
					continue;
				if (agent_hello(fd, buf, &len, &minor, 3, why, sizeof(why))) {
					close(fd);
					fd = -1;
					continue;
				}
				pid = vms[i].pid;
				cid = vms[i].cid;
			}
		}
		free(vms);
		for (int k = 0; k < 50 && fd < 0 && !g->follow_stop; k++) {
			struct timespec ts = { 0, 10000000 };

			nanosleep(&ts, NULL);
		}
	}
	pthread_mutex_lock(&g->lock);
	g->follow_fd = fd;
	g->follow_pid = pid;
	g->follow_cid = cid;
	g->follow_hello = fd >= 0 ? buf : NULL;
	g->follow_hello_len = len;
	g->follow_hello_minor = minor;
	g->follow_done = true;
	pthread_mutex_unlock(&g->lock);
	if (fd < 0)
		free(buf);
	return NULL;
}

/*
 * Guest @g's session ended otherwise than asked (@g->why says how).
 * Without --follow-timeout 0, and for a guest with an agent, it is not
 * lost yet: its DISRUPTION begins (the host's clocks now, its VM), what
 * it sent is written under its id, and the follower thread looks for it
 * (follower_fn()).  Otherwise, and when no thread can start, it is lost
 * (guest_lost()).  0 or -errno when writing failed.
 */
static int guest_ended(struct guest *g, struct hgcor_writer *w, const struct host_clock *hc)
{
	struct hgclock_now now = { 0 };
	pthread_attr_t attr;
	int ret;

	if (!follow_timeout_s || g->no_agent || g->closing || g->lost)
		return guest_lost(g, w, hc);
	/* A previous disruption's record first: this one reuses @disr. */
	ret = disr_commit(g, w);
	close_probe_channel(g);
	if (!ret)
		ret = flush_probes(g, w);
	if (g->fd >= 0) {
		close(g->fd);
		g->fd = -1;
	}
	if (ret)
		return ret;
	if (host_now(hc, &now))
		memset(&now, 0, sizeof(now));
	g->disr = (struct hgcor_disruption){
		.guest_id = g->id, .next_guest_id = HGCOR_NO_GUEST, .kind = HGCOR_DISRUPT_GONE,
		.old_vm_pid = g->vm.vm_pid > 0 ? g->vm.vm_pid : -1, .new_vm_pid = -1,
		.old_cid = g->vm.cid, .host_tsc_lost = now.tsc,
		.host_local_ns_lost = now.sched_clock_ns,
	};
	snprintf(g->follow_cause, sizeof(g->follow_cause), "%s", g->why);
	g->follow_since = now_s();
	g->follow_deadline = g->follow_since + follow_timeout_s;
	g->follow_stop = false;
	g->follow_done = false;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 << 10);
	ret = pthread_create(&g->follower, &attr, follower_fn, g);
	pthread_attr_destroy(&attr);
	if (ret) {
		set_why(g, "%s; not followed: %s", g->follow_cause, strerror(ret));
		return guest_lost(g, w, hc);
	}
	g->follower_on = true;
	g->following = true;
	fprintf(stderr, "hgclock record: guest %u (%s): session broken %.1f s into the recording "
		"(%s); looking for it for %u s (a migration or restore?)\n", g->id, g->spec,
		g->follow_since - rec_start, g->follow_cause, follow_timeout_s);
	return 0;
}

/* Stops and joins @g's follower; a connection it made at the last moment is closed. */
static void follow_stop(struct guest *g)
{
	if (!g->follower_on)
		return;
	g->follow_stop = true;
	pthread_join(g->follower, NULL);
	g->follower_on = false;
	g->following = false;
	if (g->follow_fd >= 0)
		close(g->follow_fd);
	g->follow_fd = -1;
	free(g->follow_hello);
	g->follow_hello = NULL;
}

/*
 * Guest @g did not come back within --follow-timeout (or the recording
 * ended first): its DISRUPTION says GONE and the guest is lost.
 */
static int follow_gone(struct guest *g, struct hgcor_writer *w, const struct host_clock *hc,
		       const char *when)
{
	int ret;

	follow_stop(g);
	g->disr_pending = true;
	ret = disr_commit(g, w);
	set_why(g, "%s, and %s", g->follow_cause, when);
	return ret ? ret : guest_lost(g, w, hc);
}

/*
 * The follower found guest @g again: a new session on its connection,
 * under a new guest id, in the VM that answered.  What kind of
 * disruption it was follows from that VM (incoming_kind()); the
 * DISRUPTION itself waits for the session's identity and first probe
 * (disr_commit()).  0, 1 when it cannot be recorded (lost), -errno on a
 * failed write.
 */
static int follow_finish(struct guest *g, struct hgcor_writer *w, const struct host_clock *hc)
{
	struct hgclock_now now = { 0 };
	uint8_t *hello;
	uint32_t len, minor;
	int ret;

	pthread_join(g->follower, NULL);
	g->follower_on = false;
	g->following = false;
	if (next_file_id >= HG_MAX_GUESTS) {
		close(g->follow_fd);
		g->follow_fd = -1;
		free(g->follow_hello);
		g->follow_hello = NULL;
		g->disr_pending = true;
		ret = disr_commit(g, w);
		set_why(g, "%s; it came back, but the file has no guest id left (%d)",
			g->follow_cause, HG_MAX_GUESTS);
		return ret ? ret : guest_lost(g, w, hc);
	}
	hello = g->follow_hello;
	len = g->follow_hello_len;
	minor = g->follow_hello_minor;
	g->follow_hello = NULL;
	g->fd = g->follow_fd;
	g->follow_fd = -1;
	if (host_now(hc, &now))
		memset(&now, 0, sizeof(now));
	g->id = next_file_id++;
	g->disr.next_guest_id = g->id;
	g->disr.new_vm_pid = g->follow_pid;
	g->disr.new_cid = g->follow_cid;
	g->disr.host_tsc_back = now.tsc >= g->disr.host_tsc_lost ? now.tsc : g->disr.host_tsc_lost;
	g->disr.host_local_ns_back = now.sched_clock_ns;
	g->disr.kind = g->follow_pid == g->disr.old_vm_pid ? HGCOR_DISRUPT_RECONNECT :
		       g->follow_pid > 0 ? incoming_kind(g->follow_pid) : HGCOR_DISRUPT_NEW_VM;
	g->disr_pending = true;
	/* Agents before 1.3 say no identity; without probes no first probe comes. */
	g->disr_identity_in = minor < 3;
	g->disr_probe_in = minor < 1 || g->interval_s <= 0;
	g->want_first_probe = true;
	g->disr_deadline = now_s() + HG_DISR_WAIT_S;
	/* The new VM: its vCPU threads, offsets and exit pairing are its own. */
	if (g->follow_pid > 0) {
		g->vm.vm_pid = g->follow_pid;
		g->vm.cid = g->follow_cid;
		g->vm.how = HGCOR_VM_BY_CID;
		snprintf(g->spec, sizeof(g->spec), "vsock:%u%s", g->follow_cid, g->port_suffix);
	}
	g->probe_pending = false;
	g->probe_dead = false;
	g->burst_left = 0;
	g->next_probe = 0;
	fprintf(stderr, "hgclock record: guest %u (%s) is back after %.1f s as guest %u, in VM %d "
		"(CID %u): %s\n", g->disr.guest_id, g->spec, now_s() - g->follow_since, g->id,
		(int)g->disr.new_vm_pid, g->disr.new_cid, hgsync_disruption_name(g->disr.kind));
	ret = session_start(g, w, hello, len, minor);
	free(hello);
	return ret;
}

/*
 * One message from a guest: records go to the file, probe replies are
 * paired with the host's clocks; BYE/ERROR end the session.  0 while the
 * session goes on or when it ended as asked (BYE after ours); 1 when it
 * ended otherwise (@g->why says how: the caller notes the loss); -errno
 * when writing the file failed (said).
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
		if (ret) {
			hg_err("reading the host's clock: %s", strerror(-ret));
			return ret;
		}
		heard(g);
		ret = probe_reply(g, w, hc, &recv, buf, h.length, interval_s);
		if (ret != -EPROTO)
			return ret;	/* 0, or the file (said) */
		ret = 1;
	} else if (!ret && h.type == HGP_RECORDS) {
		heard(g);
		if (!hgcor_walk_records(buf, h.length, NULL, NULL)) {
			g->records++;
			return put_section2(w, HGCOR_SEC_GUEST_RECORDS, 0, prefix,
					    sizeof(prefix), buf, h.length);
		}
		set_why(g, "malformed records from the agent");
		ret = 1;
	} else if (!ret && h.type == HGP_CPU_MAP) {
		/* Guest CPU -> APIC ID (KVM's vcpu_id), 1.2: sync.rst, "vCPU identity". */
		heard(g);
		if (!hgp_cpu_map_check(buf, h.length, HGP_APIC_ID_LIMIT))
			return put_section2(w, HGCOR_SEC_CPU_MAP, HGCOR_SEC_OPTIONAL, prefix,
					    sizeof(prefix), buf, h.length);
		set_why(g, "malformed CPU map from the agent");
		ret = 1;
	} else if (!ret && h.type == HGP_IDENTITY) {
		/* Which machine the guest is, 1.3: merge checks its traces against it. */
		_Static_assert(sizeof(struct hgp_identity) == sizeof(struct hgcor_identity),
			       "IDENTITY is stored as received");
		heard(g);
		if (!hgp_identity_check(buf, h.length)) {
			struct hgcor_identity id;

			/*
			 * After a disruption: the same boot is the same machine
			 * resumed; another boot id is a guest that rebooted.
			 */
			memcpy(&id, buf, sizeof(id));
			if (!g->has_identity) {
				g->identity = id;
				g->has_identity = true;
			} else if (g->disr_pending && !g->disr_identity_in) {
				if (id.boot_id[0] && g->identity.boot_id[0] &&
				    strcmp(id.boot_id, g->identity.boot_id)) {
					g->disr.kind = HGCOR_DISRUPT_REBOOT;
					fprintf(stderr, "hgclock record: guest %u came back as another "
						"boot (boot id %s, was %s): not the same run of it\n",
						g->id, id.boot_id, g->identity.boot_id);
					g->identity = id;
				}
			}
			g->disr_identity_in = true;
			return put_section2(w, HGCOR_SEC_GUEST_IDENTITY, HGCOR_SEC_OPTIONAL,
					    prefix, sizeof(prefix), buf, h.length);
		}
		set_why(g, "malformed identity from the agent");
		ret = 1;
	} else if (!ret && h.type == HGP_BYE) {
		ret = !g->closing;
		if (ret)
			set_why(g, "the agent ended the session (BYE) before the recording did");
	} else if (!ret && h.type == HGP_ERROR) {
		set_why(g, "the agent said: %.*s", (int)(h.length < 150 ? h.length : 150),
			(char *)buf);
		ret = 1;
	} else if (!ret) {
		set_why(g, "an unexpected message (type %u)", h.type);
		ret = 1;
	} else if (ret == -EAGAIN) {
		set_why(g, "a message stalled for %d s", HG_GUEST_MSG_TIMEOUT_S);
		ret = 1;
	} else {
		set_why(g, "%s", ret == -ECONNRESET ? "the agent closed the connection" :
			ret == -EPROTO ? "a malformed message header" : strerror(-ret));
		ret = 1;
	}
	/*
	 * BYE, ERROR, closed or broken: this guest's session is over; the
	 * recording goes on with the host and the other guests.
	 */
	close(g->fd);
	g->fd = -1;
	return ret;
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

	if (fflush(w->f)) {
		hg_err("%s: %s", out_name, strerror(errno));
		return -EIO;
	}
	if (hg_map_file(path, &buf, &len))
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
		if (g->agentless) {
			fprintf(stderr, "hgclock record: guest %u (no agent): %u kvm-exact "
				"segments\n", i, n[HGCOR_METHOD_KVM_EXACT]);
			continue;
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
		if (g->has_prev)
			fprintf(stderr, "; guest %u again, in VM %d", hgsync_guest_root(&s, i),
				(int)g->vm.vm_pid);
		fputc('\n', stderr);
	}
	ret = put_section(w, HGCOR_SEC_SEGMENTS, HGCOR_SEC_OPTIONAL, all,
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
		ret = put_section(w, HGCOR_SEC_HOST_RECORDS, 0, recs, n * sizeof(*recs));
	free(recs);
	free(infos);
	return ret;
}

/*
 * Ending: SIGINT, SIGTERM and SIGHUP set @stop (and count in
 * @nr_signals); the main loop ends the recording cleanly, END and the
 * rename included.  A SIGHUP ignored when record started (nohup) stays
 * ignored.  With a command (@child_pid), see run_command().
 */
static volatile sig_atomic_t stop, nr_signals;
static volatile pid_t child_pid;
static const int stop_sigs[] = { SIGINT, SIGTERM, SIGHUP };
static struct sigaction saved_sigs[3], saved_pipe;

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	int saved_errno = errno;

	(void)uc;
	stop = 1;
	if (nr_signals < 1000)
		nr_signals++;
	/*
	 * The terminal sends Ctrl-C (and a hangup) to its whole foreground
	 * process group: the command has it already.  A signal sent to
	 * record alone by a process (kill PID, timeout) is passed on, so
	 * that the command ends too and record after it.
	 */
	if (child_pid > 0 && si && si->si_code <= 0 && si->si_pid != child_pid)
		kill(child_pid, sig);
	errno = saved_errno;
}

/* Wakes poll() when the command exits; waitpid() tells the rest. */
static void on_child(int sig)
{
	(void)sig;
}

static void setup_signals(void)
{
	struct sigaction sa = { .sa_sigaction = on_signal, .sa_flags = SA_SIGINFO };
	struct sigaction ign = { .sa_handler = SIG_IGN };
	struct sigaction chld = { .sa_handler = on_child, .sa_flags = SA_NOCLDSTOP };

	/* No SA_RESTART: a signal interrupts poll() at once. */
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(stop_sigs) / sizeof(stop_sigs[0]); i++) {
		sigaction(stop_sigs[i], NULL, &saved_sigs[i]);
		if (stop_sigs[i] == SIGHUP && saved_sigs[i].sa_handler == SIG_IGN)
			continue;
		sigaction(stop_sigs[i], &sa, NULL);
	}
	/* A closed pipe or socket is a failed write, checked where it happens. */
	sigaction(SIGPIPE, &ign, &saved_pipe);
	sigemptyset(&chld.sa_mask);
	sigaction(SIGCHLD, &chld, NULL);
}

/*
 * Runs COMMAND (@cmd, NULL terminated) as record's child, in record's
 * process group: Ctrl-C at the terminal reaches both, the command (e.g.
 * trace-cmd) finishes its own file, and record records until it has
 * exited, then ends its recording.  The command gets the signal
 * dispositions record was started with (a nohup stays a nohup).  Its
 * pid, or -1 (said) when it cannot be started.
 */
static pid_t run_command(char **cmd)
{
	pid_t pid;

	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		hg_err("cannot start %s: %s", cmd[0], strerror(errno));
		return -1;
	}
	if (pid > 0)
		return pid;
	for (size_t i = 0; i < sizeof(stop_sigs) / sizeof(stop_sigs[0]); i++)
		sigaction(stop_sigs[i], &saved_sigs[i], NULL);
	sigaction(SIGPIPE, &saved_pipe, NULL);
	signal(SIGCHLD, SIG_DFL);
	execvp(cmd[0], cmd);
	/* As a shell says it: 127 not found, 126 found but not runnable. */
	fprintf(stderr, "hgclock record: cannot run %s: %s\n", cmd[0], strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

/* The exit status of a command's wait status, as a shell gives it. */
static int command_status(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return HGCLOCK_EXIT_FAILURE;
}

/* Sections of host records are at most this long (a ring may be 64 MiB). */
#define HG_SECTION_MAX	(4u << 20)

struct host_sink {
	struct hgcor_writer *w;
	uint64_t total, lost;
};

static int write_host_batch(const struct hg_batch *b, void *ctx)
{
	struct host_sink *sink = ctx;
	int ret = put_section(sink->w, HGCOR_SEC_HOST_RECORDS, 0, b->buf, b->len);

	if (ret)
		return ret;
	sink->total += b->nr;
	sink->lost += b->lost;
	return 0;
}

/*
 * Adds the guest of one --guest argument to @*guests: 0 or an exit
 * status (said).
 */
static int add_guest(struct guest **guests, unsigned int *nr_guests, const char *arg)
{
	struct guest *more;

	if (*nr_guests == HG_MAX_GUESTS) {
		hg_err("at most %d guests", HG_MAX_GUESTS);
		return HGCLOCK_EXIT_USAGE;
	}
	/*
	 * No lock or thread exists yet: moving them is fine.  Room doubles
	 * when the count reaches a power of two (a struct guest is 33 KB:
	 * one more at a time copied 17 GB for 1024 guests).
	 */
	more = *guests;
	if (!(*nr_guests & (*nr_guests - 1))) {
		unsigned int cap = *nr_guests ? 2 * *nr_guests : 1;

		more = realloc(*guests, (cap < HG_MAX_GUESTS ? cap : HG_MAX_GUESTS) *
				sizeof(**guests));
	}
	if (!more) {
		hg_err("%s", strerror(ENOMEM));
		return HGCLOCK_EXIT_FAILURE;
	}
	*guests = more;
	memset(&more[*nr_guests], 0, sizeof(*more));
	if (guest_parse(&more[*nr_guests], arg))
		return HGCLOCK_EXIT_USAGE;
	more[*nr_guests].id = *nr_guests;
	more[*nr_guests].fd = -1;
	more[*nr_guests].probe_fd = -1;
	more[*nr_guests].follow_fd = -1;
	(*nr_guests)++;
	return 0;
}

/*
 * --all-guests: every running libvirt domain and every other QEMU with a
 * vsock device (vmfind_all()), each a guest at vsock:CID, except those
 * --guest already gave.  A VM that cannot be used is said and skipped;
 * none at all is an error.  0 or an exit status.
 */
static int add_all_guests(struct guest **guests, unsigned int *nr_guests)
{
	struct vmfind_vm *vms;
	struct vmfind vf;
	size_t nr, added = 0;
	int ret;

	vmfind_init(&vf);
	if (vmfind_all(&vf, &vms, &nr)) {
		hg_err("--all-guests: %s", strerror(ENOMEM));
		return HGCLOCK_EXIT_FAILURE;
	}
	for (size_t i = 0; i < nr; i++) {
		const struct vmfind_vm *vm = &vms[i];
		char arg[64];
		bool given = false;
		struct guest *g;

		if (vm->err) {
			fprintf(stderr, "hgclock record: --all-guests: skipping a VM: %s\n", vm->why);
			continue;
		}
		for (unsigned int k = 0; k < *nr_guests; k++)
			given |= (*guests)[k].vm.cid == vm->cid || (*guests)[k].vm.vm_pid == vm->pid;
		if (given)
			continue;
		snprintf(arg, sizeof(arg), "vsock:%u,vm=%d", vm->cid, vm->pid);
		ret = add_guest(guests, nr_guests, arg);
		if (ret) {
			free(vms);
			return ret;
		}
		g = &(*guests)[*nr_guests - 1];
		added++;
		/* A libvirt domain counts as named (how 2); a bare QEMU was found by CID. */
		if (vm->pid_from != VMFIND_PID_CID) {
			snprintf(g->vm.spec, sizeof(g->vm.spec), "domain:%.8s", vm->name);
			say_vm(&vf, g, vm->pid_from == VMFIND_PID_PIDFILE ? "libvirt's pid file" :
			       "QEMU's -name");
		} else {
			g->vm.how = HGCOR_VM_BY_CID;
			say_vm(&vf, g, "found by vsock CID");
		}
	}
	free(vms);
	if (!added && !*nr_guests) {
		hg_err("--all-guests: no running VM with a vsock device on this host (libvirt: %s)",
		       vf.run_dir);
		return HGCLOCK_EXIT_USAGE;
	}
	return 0;
}

/*
 * --merge OUT (Documentation/tools.rst, "Merging at the end"): once the
 * file is complete and COMMAND exited 0, the traces COMMAND wrote are
 * merged into OUT by cmd_merge() itself, given the arguments 'hgclock
 * merge' would get: its checks (no output over an input, inputs that
 * belong together) and exit statuses are the same.  Which traces: the
 * host's (--merge-host, default trace.dat) and the guests' (each
 * --merge-guest [ID=]FILE as merge's --guest; by default trace-cmd
 * record -A's names next to the host's, STEM-NAME.EXT, matched to the
 * recorded guests below), every one written since COMMAND started.
 */
#define HG_MERGE_MAX_CANDS	4096	/* guest traces looked at in one directory */

struct merge_req {
	const char *out;		/* the timeline; NULL: no merge */
	const char *host;		/* the host's trace */
	bool host_given;
	const char *guest[HG_MAX_GUESTS];	/* --merge-guest [ID=]FILE, as given */
	int nr_guest;
	struct timespec t0;		/* CLOCK_REALTIME_COARSE before COMMAND started */
	bool file_complete;		/* the correlation file got END and its name */
};

/* A file in the host trace's directory named as trace-cmd names a guest's trace. */
struct merge_cand {
	char *path;
	char *name;			/* NAME of STEM-NAME.EXT */
	bool fresh;			/* written since COMMAND started */
	int guest;			/* the recorded guest it is, -1: none */
};

/*
 * The --merge options on the command line, before anything is created:
 * 0, or HGCLOCK_EXIT_USAGE (said).  OUT is not the correlation file nor a
 * trace given, and the correlation file not a trace (hg_check_outputs(),
 * which merge runs on its own arguments again at the end).
 */
static int merge_check_args(const struct merge_req *mr, const char *corr, bool command,
			    unsigned int nr_guests)
{
	const char *ins[2 + HG_MAX_GUESTS];
	int next = 0, n = 0, ret;

	if (!mr->out) {
		if (!mr->host_given && !mr->nr_guest)
			return HGCLOCK_EXIT_OK;
		hg_err("--merge-host and --merge-guest go with --merge OUT");
		return HGCLOCK_EXIT_USAGE;
	}
	if (!command) {
		hg_err("--merge %s needs a COMMAND that writes the traces (record ... --merge %s -- "
		       "trace-cmd record ...)", mr->out, mr->out);
		return HGCLOCK_EXIT_USAGE;
	}
	ins[n++] = mr->host;
	for (int i = 0; i < mr->nr_guest; i++) {
		struct hgm_input_spec in;

		hgm_guest_spec(mr->guest[i], &next, &in);
		if ((unsigned int)in.guest >= nr_guests) {
			if (nr_guests)
				hg_err("--merge-guest %s: no guest %d in this recording (guests 0 to "
				       "%u, in the order of --guest)", mr->guest[i], in.guest,
				       nr_guests - 1);
			else
				hg_err("--merge-guest %s: no guest is recorded (--guest)",
				       mr->guest[i]);
			return HGCLOCK_EXIT_USAGE;
		}
		ins[n++] = in.path;
	}
	ins[n] = corr;
	ret = hg_check_outputs(ins, n + 1, &mr->out, 1);
	if (!ret)
		ret = hg_check_outputs(ins, n, &corr, 1);
	return ret;
}

static bool written_since(const struct stat *st, const struct timespec *t0)
{
	return st->st_mtim.tv_sec > t0->tv_sec ||
	       (st->st_mtim.tv_sec == t0->tv_sec && st->st_mtim.tv_nsec >= t0->tv_nsec);
}

/*
 * A trace to merge, @what ("host trace", "guest 0's trace"): written
 * since COMMAND started?  0; else said (@hint after a missing file's
 * reason): HGCLOCK_EXIT_FAILURE when it is missing, HGCLOCK_EXIT_BAD_INPUT
 * when older (a trace left by an earlier run is never merged in silence).
 * Not a regular file: merge says so.
 */
static int merge_input_fresh(const char *what, const char *path, const struct timespec *t0,
			     const char *hint)
{
	struct stat st;

	if (stat(path, &st)) {
		hg_err("--merge: %s %s: %s%s", what, path, strerror(errno), hint);
		return HGCLOCK_EXIT_FAILURE;
	}
	if (S_ISREG(st.st_mode) && !written_since(&st, t0)) {
		hg_err("--merge: %s %s was last written before the command started (left by an "
		       "earlier run?): not merging it", what, path);
		return HGCLOCK_EXIT_BAD_INPUT;
	}
	return HGCLOCK_EXIT_OK;
}

/* The name trace-cmd gives guest @g by default: its QEMU's -name (libvirt's domain), or "". */
static void guest_vm_name(const struct guest *g, char *name, size_t size)
{
	struct vmfind_args a;
	struct vmfind vf;

	name[0] = '\0';
	if (g->vm.vm_pid <= 0)
		return;
	vmfind_init(&vf);
	if (vmfind_read_cmdline(&vf, g->vm.vm_pid, &a))
		return;
	if (vmfind_args_name(&a, name, size) != 1)
		name[0] = '\0';
	vmfind_args_free(&a);
}

static int cand_cmp(const void *a, const void *b)
{
	return strcmp(((const struct merge_cand *)a)->name, ((const struct merge_cand *)b)->name);
}

static void cands_free(struct merge_cand *c, size_t nr)
{
	for (size_t i = 0; i < nr; i++) {
		free(c[i].path);
		free(c[i].name);
	}
	free(c);
}

static bool same_file(const struct stat *a, const char *path)
{
	struct stat b;

	return !stat(path, &b) && a->st_dev == b.st_dev && a->st_ino == b.st_ino;
}

/*
 * The files trace-cmd record -A names after the host's trace @host for
 * its guests (trace_get_guest_file(): "trace.dat" gives trace-NAME.dat):
 * STEM-NAME.EXT in @host's directory, regular files, neither the
 * correlation file @corr nor OUT; sorted by NAME.  0, or an exit status
 * (said).
 */
static int merge_list_cands(const struct merge_req *mr, const char *corr,
			    struct merge_cand **out, size_t *nr_out)
{
	const char *slash = strrchr(mr->host, '/'), *base, *dot;
	struct merge_cand *c = NULL;
	size_t nr = 0, stem_len, ext_len, dir_len;
	struct dirent *d;
	char *dir;
	DIR *dp;

	base = slash ? slash + 1 : mr->host;
	dot = strrchr(base, '.');
	if (!dot || dot == base)
		dot = base + strlen(base);
	stem_len = (size_t)(dot - base);
	ext_len = strlen(dot);
	dir_len = (size_t)(base - mr->host);
	dir = strndup(mr->host, dir_len);
	if (!dir)
		goto nomem;
	dp = opendir(dir_len ? dir : ".");
	if (!dp) {
		hg_err("--merge: reading the directory %s: %s", dir_len ? dir : ".",
		       strerror(errno));
		free(dir);
		return HGCLOCK_EXIT_FAILURE;
	}
	while ((d = readdir(dp))) {
		size_t len = strlen(d->d_name);
		struct merge_cand *more;
		struct stat st;
		char *path;

		if (len <= stem_len + 1 + ext_len || strncmp(d->d_name, base, stem_len) ||
		    d->d_name[stem_len] != '-' || strcmp(d->d_name + len - ext_len, dot))
			continue;
		if (asprintf(&path, "%s%s", dir, d->d_name) < 0)
			goto nomem_dir;
		if (stat(path, &st) || !S_ISREG(st.st_mode) || same_file(&st, corr) ||
		    (strcmp(mr->out, "-") && same_file(&st, mr->out))) {
			free(path);
			continue;
		}
		if (nr == HG_MERGE_MAX_CANDS) {
			hg_err("--merge: more than %d files named like guest traces in %s: give "
			       "them (--merge-guest)", HG_MERGE_MAX_CANDS, dir_len ? dir : ".");
			free(path);
			closedir(dp);
			free(dir);
			cands_free(c, nr);
			return HGCLOCK_EXIT_USAGE;
		}
		more = realloc(c, (nr + 1) * sizeof(*c));
		if (!more) {
			free(path);
			goto nomem_dir;
		}
		c = more;
		c[nr].path = path;
		c[nr].name = strndup(d->d_name + stem_len + 1, len - stem_len - 1 - ext_len);
		c[nr].fresh = written_since(&st, &mr->t0);
		c[nr].guest = -1;
		nr++;
		if (!c[nr - 1].name)
			goto nomem_dir;
	}
	closedir(dp);
	free(dir);
	qsort(c, nr, sizeof(*c), cand_cmp);
	*out = c;
	*nr_out = nr;
	return HGCLOCK_EXIT_OK;
nomem_dir:
	closedir(dp);
nomem:
	free(dir);
	cands_free(c, nr);
	hg_err("--merge: %s", strerror(ENOMEM));
	return HGCLOCK_EXIT_FAILURE;
}

/*
 * Default guest traces: which STEM-NAME.EXT is which recorded guest.  A
 * guest whose VM's QEMU has -name NAME (libvirt names it after the
 * domain, and trace-cmd -A NAME calls the guest that) gets the file of
 * that NAME; then, if one guest and one file are left (-A @CID --name
 * ANY), they go together.  A file left over that was written during the
 * run is an error (which guest's?); an older one is said and left out.
 * A guest without a trace is said and merged without.  Fills @args with
 * "ID=FILE" strings (freed by the caller); 0 or an exit status (said).
 */
static int merge_find_guests(const struct merge_req *mr, const char *corr,
			     const struct guest *guests, unsigned int nr_guests,
			     char **args, int *nr_args)
{
	struct merge_cand *c = NULL;
	unsigned int left_guest = 0, nr_left_guests = 0;
	size_t nr = 0, left_cand = 0, left_fresh = 0, nr_left_cands = 0, nr_left_fresh = 0;
	char name[VMFIND_NAME_MAX + 1];
	int ret;

	ret = merge_list_cands(mr, corr, &c, &nr);
	if (ret)
		return ret;
	for (unsigned int g = 0; g < nr_guests; g++) {
		bool found = false;

		guest_vm_name(&guests[g], name, sizeof(name));
		for (size_t i = 0; i < nr && name[0] && !found; i++)
			if (c[i].guest < 0 && !strcmp(c[i].name, name)) {
				c[i].guest = (int)g;
				found = true;
			}
		if (!found) {
			left_guest = g;
			nr_left_guests++;
		}
	}
	for (size_t i = 0; i < nr; i++) {
		if (c[i].guest >= 0)
			continue;
		left_cand = i;
		nr_left_cands++;
		if (c[i].fresh) {
			left_fresh = i;
			nr_left_fresh++;
		}
	}
	/* The one left: the one written in this run, else the only one (then refused as old). */
	if (nr_left_guests == 1 && nr_left_fresh == 1) {
		c[left_fresh].guest = (int)left_guest;
		nr_left_cands--;
	} else if (nr_left_guests == 1 && nr_left_cands == 1) {
		c[left_cand].guest = (int)left_guest;
		nr_left_cands--;
	}
	for (size_t i = 0; i < nr && !ret; i++) {
		char what[64];

		if (c[i].guest < 0 && c[i].fresh) {
			hg_err("--merge: cannot tell which recorded guest's trace %s is (guests "
			       "recorded: %u, traces unmatched: %zu): give each with --merge-guest "
			       "ID=FILE", c[i].path, nr_guests, nr_left_cands);
			ret = HGCLOCK_EXIT_BAD_INPUT;
		} else if (c[i].guest < 0) {
			fprintf(stderr, "hgclock record: --merge: leaving out %s: last written before "
				"the command started\n", c[i].path);
		} else {
			snprintf(what, sizeof(what), "guest %d's trace", c[i].guest);
			ret = merge_input_fresh(what, c[i].path, &mr->t0, "");
			if (!ret && asprintf(&args[(*nr_args)++], "%d=%s", c[i].guest,
					     c[i].path) < 0) {
				(*nr_args)--;
				hg_err("--merge: %s", strerror(ENOMEM));
				ret = HGCLOCK_EXIT_FAILURE;
			}
		}
	}
	for (unsigned int g = 0; g < nr_guests && !ret; g++) {
		bool has = false;

		for (size_t i = 0; i < nr; i++)
			has |= c[i].guest == (int)g;
		if (!has)
			fprintf(stderr, "hgclock record: --merge: guest %u (%s): no trace of its own "
				"next to %s (give it with --merge-guest %u=FILE): merged without\n",
				g, guests[g].vm.spec[0] ? guests[g].vm.spec : guests[g].spec,
				mr->host, g);
	}
	cands_free(c, nr);
	return ret;
}

/*
 * The merge at the end of a clean recording into correlation file @corr
 * (complete, renamed into place): the traces found as above, then
 * cmd_merge() with "merge [--guest ID=FILE]... --host HOST -o OUT --
 * CORR".  record's signal handlers are taken down first: Ctrl-C now
 * stops the merge as it stops 'hgclock merge' (its temporary file
 * removed, OUT as it was).  merge's exit status.
 */
static int merge_at_end(struct merge_req *mr, const char *corr, const struct guest *guests,
			unsigned int nr_guests)
{
	char **args = calloc(HG_MAX_GUESTS, sizeof(*args));
	char **argv = calloc(8 + 2 * HG_MAX_GUESTS, sizeof(*argv));
	int nr_args = 0, argc = 0, ret;
	struct stat st;

	if (!args || !argv) {
		hg_err("--merge: %s", strerror(ENOMEM));
		ret = HGCLOCK_EXIT_FAILURE;
		goto out;
	}
	/* An OUT written while the command ran is one of its outputs, not an old timeline. */
	if (strcmp(mr->out, "-") && !stat(mr->out, &st) && S_ISREG(st.st_mode) &&
	    written_since(&st, &mr->t0)) {
		hg_err("--merge: %s was written while the command ran (one of its traces?): "
		       "refusing to overwrite it", mr->out);
		ret = HGCLOCK_EXIT_USAGE;
		goto out;
	}
	ret = merge_input_fresh("host trace", mr->host, &mr->t0, mr->host_given ? "" :
				" (the command wrote none; trace-cmd record -o FILE: --merge-host FILE)");
	for (int i = 0, next = 0; i < mr->nr_guest && !ret; i++) {
		struct hgm_input_spec in;
		char what[32];

		hgm_guest_spec(mr->guest[i], &next, &in);
		snprintf(what, sizeof(what), "guest %d's trace", in.guest);
		ret = merge_input_fresh(what, in.path, &mr->t0, "");
	}
	if (!ret && !mr->nr_guest)
		ret = merge_find_guests(mr, corr, guests, nr_guests, args, &nr_args);
	if (ret)
		goto out;
	argv[argc++] = "merge";
	argv[argc++] = "--host";
	argv[argc++] = (char *)mr->host;
	for (int i = 0; i < mr->nr_guest; i++) {
		argv[argc++] = "--guest";
		argv[argc++] = (char *)mr->guest[i];
	}
	for (int i = 0; i < nr_args; i++) {
		argv[argc++] = "--guest";
		argv[argc++] = args[i];
	}
	argv[argc++] = "-o";
	argv[argc++] = (char *)mr->out;
	argv[argc++] = "--";
	argv[argc++] = (char *)corr;
	fprintf(stderr, "hgclock record: merging:");
	for (int i = 0; i < argc; i++)
		fprintf(stderr, " %s", argv[i]);
	fputc('\n', stderr);
	for (size_t i = 0; i < sizeof(stop_sigs) / sizeof(stop_sigs[0]); i++)
		sigaction(stop_sigs[i], &saved_sigs[i], NULL);
	sigaction(SIGPIPE, &saved_pipe, NULL);
	optind = 0;	/* glibc: a new getopt scan */
	ret = cmd_merge(argc, argv);
out:
	for (int i = 0; i < nr_args; i++)
		free(args[i]);
	free(args);
	free(argv);
	return ret;
}

static void record_usage(FILE *out)
{
	fprintf(out,
		"usage: hgclock record -o FILE [--duration SEC] [--period MS] [--ring-size KIB]\n"
		"                      [--guest SPEC[,vm=PID][,no-agent]]... [--all-guests]\n"
		"                      [--probe-interval MS] [--compress zstd|none]\n"
		"                      [--probe-burst N] [--require-all] [--follow-timeout SEC]\n"
		"                      [--merge OUT [--merge-host FILE] [--merge-guest [ID=]FILE]...]\n"
		"                      [[--] COMMAND [ARG...]]\n"
		"Records this host's clock data (per-CPU conversions, vCPU tracking,\n"
		"KVM TSC offset changes) into a correlation file until SEC seconds\n"
		"have passed or it is interrupted (Ctrl-C, SIGTERM, SIGHUP): the file\n"
		"is then complete.  With a COMMAND, it runs it and records until it\n"
		"exits (e.g. -- trace-cmd record -A @3 ...; Ctrl-C reaches both, record\n"
		"waits for the command); the exit status is then the command's.\n"
		"--merge OUT (with a COMMAND): when the file is complete and COMMAND exited\n"
		"0, runs 'hgclock merge' into OUT on the traces COMMAND wrote: --merge-host\n"
		"FILE (default trace.dat) and the guests' (default: trace-NAME.dat next to it,\n"
		"trace-cmd record -A's names, matched to the guests by VM name; or each\n"
		"--merge-guest [ID=]FILE as merge's --guest), all written since COMMAND\n"
		"started; the exit status is then merge's.\n"
		"-o, --output FILE is written as FILE.tmp-XXXXXX, renamed to FILE at a\n"
		"clean end (a failed run leaves FILE as it was).\n"
		"--compress zstd (the default when built with libzstd) stores the batches of\n"
		"records and probes compressed (file format 1.4, some 3.5 times smaller);\n"
		"none writes a file that hgclock before format 1.4 also reads.\n"
		"--period sets the module's snapshot period while recording; --ring-size KIB\n"
		"sizes this recording's own rings (default 4096 per CPU; other readers keep theirs).\n"
		"--guest vsock:CID[:PORT][,vm=PID], tcp:HOST:PORT[,vm=PID] or domain:NAME\n"
		"adds a guest running 'hgclock agent': its clock data joins the file, its\n"
		"clocks are probed every --probe-interval MS (default 100, 0: never; N\n"
		"exchanges back to back each time, --probe-burst, default 4), and the\n"
		"guest-to-host mapping is computed at the end.  vm=PID names the VM's\n"
		"process on this host (for vsock:CID found otherwise: the QEMU whose\n"
		"vhost-vsock -device has guest-cid=CID); with it KVM's exact TSC relation\n"
		"is used, without it probes only (said on stderr).  domain:NAME is libvirt's\n"
		"running domain NAME, at vsock:CID: its QEMU process and CID are found, or\n"
		"exit 2 says why not.  --all-guests adds every running libvirt domain and\n"
		"every other QEMU with a vsock device.\n"
		"--guest vm=PID alone, or any form above with ,no-agent, records a VM\n"
		"whose guest runs no agent (no module): its vCPUs' TSC offsets and exit\n"
		"pairing for 'hgclock pairmark' in it; its x86-tsc trace then maps\n"
		"exactly, local/perf only through pairmark's markers (merge).\n");
	fprintf(out,
		"A guest whose session breaks (a live migration, a restore from a file, a\n"
		"lost connection) is looked for, for --follow-timeout SEC (default 60, 0:\n"
		"never): a VM with its vsock CID or its VM's name whose agent answers. The\n"
		"recording goes on meanwhile; once found, the guest goes on under a new\n"
		"guest id, and a DISRUPTION in the file says when, what kind, which VMs and\n"
		"how far its clock jumped (hgclock dump).\n"
		"A guest whose agent cannot be reached at the start, or that does not come\n"
		"back, is noted in the file as lost and the others go on; --require-all\n"
		"makes that an error (exit 1; a loss after the start ends the recording,\n"
		"which is kept).\n"
		"At most %d guests.  'hgclock recover' completes a file that a killed\n"
		"record left unfinished.\n", HG_MAX_GUESTS);
}

/* Long options without a short form. */
enum { OPT_MERGE = 0x100, OPT_MERGE_HOST, OPT_MERGE_GUEST };
enum { OPT_COMPRESS = 0x200, OPT_FOLLOW };

int cmd_record(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "duration", required_argument, NULL, 'd' },
		{ "period", required_argument, NULL, 'p' },
		{ "guest", required_argument, NULL, 'g' },
		{ "all-guests", no_argument, NULL, 'G' },
		{ "probe-interval", required_argument, NULL, 'i' },
		{ "probe-burst", required_argument, NULL, 'b' },
		{ "ring-size", required_argument, NULL, 'r' },
		{ "compress", required_argument, NULL, OPT_COMPRESS },
		{ "require-all", no_argument, NULL, 'A' },
		{ "follow-timeout", required_argument, NULL, OPT_FOLLOW },
		{ "merge", required_argument, NULL, OPT_MERGE },
		{ "merge-host", required_argument, NULL, OPT_MERGE_HOST },
		{ "merge-guest", required_argument, NULL, OPT_MERGE_GUEST },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	/* --merge: nothing merged unless asked (merge_at_end()). */
	struct merge_req mr = { 0 };
	uint64_t duration_s = 0, period_ms = 0;
	struct hgclock_ring_config cfg, saved;
	struct hg_batch b = { .max = HG_SECTION_MAX };
	struct hgcor_writer w;
	struct hg_output o;
	struct host_sink sink = { .w = &w };
	struct hgclock_info info;
	struct hgclock_map map;
	const char *out = NULL;
	double start, last_status = 0;
	bool tty = isatty(STDERR_FILENO), period_set = false;
	bool all_guests = false;
	/* Record batches and probes stored compressed (file-format.rst, 1.4). */
	int compress = hgcor_have_zstd() ? HGCOR_COMPRESS_ZSTD : HGCOR_COMPRESS_NONE;
	/* Each guest holds a probe buffer: allocated as --guest adds them. */
	struct guest *guests = NULL;
	struct pollfd *pfd = NULL;
	char **command = NULL;
	int child_status = 0;
	bool child_running = false, child_started = false, child_told = false;
	struct host_clock hc;
	uint64_t interval_ms = 100, ring_kib = 4096, burst = HG_PROBE_BURST;
	double interval_s;
	unsigned int nr_guests = 0, g;
	uint8_t *gbuf = NULL;
	char note[512];
	int c, fd, ret, i;

	/* "+": the first argument that is not an option starts COMMAND. */
	while ((c = getopt_long(argc, argv, "+o:d:p:g:i:b:r:Ah", opts, NULL)) != -1) {
		switch (c) {
		case 'g':
			ret = add_guest(&guests, &nr_guests, optarg);
			if (ret) {
				free(guests);
				return ret;
			}
			break;
		case 'G':
			all_guests = true;
			break;
		case OPT_COMPRESS:
			if (!strcmp(optarg, "none")) {
				compress = HGCOR_COMPRESS_NONE;
			} else if (!strcmp(optarg, "zstd") && hgcor_have_zstd()) {
				compress = HGCOR_COMPRESS_ZSTD;
			} else {
				hg_err(!strcmp(optarg, "zstd") ? "--compress zstd: this hgclock was "
				       "built without libzstd" : "--compress wants zstd or none, not '%s'",
				       optarg);
				free(guests);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 'A':
			require_all = true;
			break;
		case OPT_FOLLOW: {
			uint64_t t;

			if (!parse_u64(optarg, 86400, &t)) {
				hg_err("--follow-timeout wants seconds from 0 to 86400, not '%s'",
				       optarg);
				free(guests);
				return HGCLOCK_EXIT_USAGE;
			}
			follow_timeout_s = (unsigned int)t;
			break;
		}
		case OPT_MERGE:
			mr.out = optarg;
			break;
		case OPT_MERGE_HOST:
			mr.host = optarg;
			mr.host_given = true;
			break;
		case OPT_MERGE_GUEST:
			if (mr.nr_guest == HG_MAX_GUESTS) {
				hg_err("at most %d --merge-guest", HG_MAX_GUESTS);
				free(guests);
				return HGCLOCK_EXIT_USAGE;
			}
			mr.guest[mr.nr_guest++] = optarg;
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
			free(guests);
			record_usage(stdout);
			return HGCLOCK_EXIT_OK;
		default:
			free(guests);
			record_usage(stderr);
			return HGCLOCK_EXIT_USAGE;
		}
	}
	if (!out) {
		hg_err("-o FILE is required");
		free(guests);
		record_usage(stderr);
		return HGCLOCK_EXIT_USAGE;
	}
	if (!strcmp(out, "-")) {
		hg_err("-o -: record writes a file (it reads it back for the mapping)");
		free(guests);
		return HGCLOCK_EXIT_USAGE;
	}
	if (all_guests) {
		ret = add_all_guests(&guests, &nr_guests);
		if (ret) {
			free(guests);
			return ret;
		}
	}
	if (optind < argc)
		command = argv + optind;
	if (!mr.host)
		mr.host = "trace.dat";
	ret = merge_check_args(&mr, out, command, nr_guests);
	if (ret) {
		free(guests);
		return ret;
	}
	for (g = 0; g < nr_guests; g++)
		pthread_mutex_init(&guests[g].lock, NULL);
	pfd = calloc(1 + nr_guests, sizeof(*pfd));
	if (!pfd) {
		hg_err("%s", strerror(ENOMEM));
		free(guests);
		return HGCLOCK_EXIT_FAILURE;
	}
	/*
	 * Two sockets a guest: a host recording hundreds of guests needs more
	 * than the usual 1024 descriptors; as many as the hard limit allows.
	 */
	if (nr_guests > 100) {
		struct rlimit rl;

		if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
		}
	}
	/*
	 * Before anything is created: a signal from here on ends the
	 * recording cleanly (output.c's handlers, which remove a temporary
	 * file, are then not installed over these).
	 */
	setup_signals();
	fd = hg_open_device();
	if (fd < 0) {
		free(pfd);
		free(guests);
		return -fd;
	}
	ret = hgclock_get_info(fd, &info);
	if (ret) {
		hg_err("GET_INFO failed: %s", strerror(-ret));
		close(fd);
		free(pfd);
		free(guests);
		return ret == -EPROTO ? HGCLOCK_EXIT_ABI : HGCLOCK_EXIT_FAILURE;
	}
	/*
	 * A bigger ring before mapping it: a busy host (a trace running, the
	 * guests' vCPUs switching) fills the default one between two drains.
	 * Our session's rings only (ABI 1.2; before, the one shared ring,
	 * refused while another reader had it mapped).
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
		free(pfd);
		free(guests);
		return HGCLOCK_EXIT_FAILURE;
	}
	out_name = out;
	b.buf = malloc(b.max);
	if (!b.buf) {
		ret = HGCLOCK_EXIT_FAILURE;
		goto out_map;
	}
	/* A temporary file next to FILE, renamed to it after a clean run. */
	ret = hg_output_open(&o, out);
	if (ret)
		goto out_map;
	/* Killed, it leaves its temporary file: valid up to its last section. */
	hg_output_keep_on_signal(&o);
	ret = hgcor_create(&w, hg_output_write_path(&o));
	if (ret) {
		hg_err("%s: %s", out, strerror(-ret));
		hg_output_abort(&o);
		ret = HGCLOCK_EXIT_FAILURE;
		goto out_map;
	}
	hgcor_set_compression(&w, compress);	/* checked with the option */
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
	ret = put_section(&w, HGCOR_SEC_HOST_INFO, 0, &info, sizeof(info));
	if (!ret)
		ret = put_section(&w, HGCOR_SEC_NOTE, 0, note, strlen(note));
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
	rec_start = now_s();
	next_file_id = nr_guests;
	for (g = 0; g < nr_guests && !ret && !stop; g++) {
		ret = guest_open(&guests[g], &w, gbuf);
		if (ret > 0)
			ret = guest_lost(&guests[g], &w, &hc);
	}
	if (!ret && stop)
		fprintf(stderr, "hgclock record: interrupted while connecting to the guests\n");
	/* --require-all: nothing is recorded unless every guest is there. */
	if (!ret && require_all && nr_lost) {
		hg_err("%u of %u guests could not be reached (--require-all): not recording",
		       nr_lost, nr_guests);
		ret = -ENOTCONN;
	}
	if (!ret && command && !stop) {
		/* --merge takes the traces written from here on (merge_input_fresh()). */
		clock_gettime(CLOCK_REALTIME_COARSE, &mr.t0);
		child_pid = run_command(command);
		if (child_pid < 0)
			ret = -ECHILD;
		else
			child_running = child_started = true;
	}
	start = now_s();
	while (!ret) {
		bool last;

		/* The command's end ends the recording; record's own stop waits for it. */
		if (child_running) {
			pid_t p = waitpid(child_pid, &child_status, WNOHANG);

			if (p == child_pid || (p < 0 && errno == ECHILD)) {
				child_running = false;
				child_pid = 0;
			}
		}
		if (child_running && !child_told &&
		    ((duration_s && now_s() - start >= duration_s) || (require_all && nr_lost))) {
			/* As Ctrl-C would: trace-cmd finishes its file on SIGINT. */
			fprintf(stderr, "hgclock record: %s: sending SIGINT to %s (pid %d)\n",
				require_all && nr_lost ? "a guest was lost" : "--duration is over",
				command[0], (int)child_pid);
			kill(child_pid, SIGINT);
			child_told = true;
		}
		if (command)
			/* A third signal: record stops waiting for the command. */
			last = !child_running || nr_signals >= 3;
		else
			last = stop || (duration_s && now_s() - start >= duration_s) ||
			       (require_all && nr_lost);

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
				fprintf(stderr, ", %u guests (%u lost), %llu probes, tightest round "
					"trip %llu ns", nr_guests, nr_lost, (unsigned long long)probes,
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
			if (guests[g].fd >= 0 && (pfd[1 + g].revents & (POLLIN | POLLHUP | POLLERR))) {
				ret = guest_message(&guests[g], &w, gbuf, &hc, interval_s);
				if (ret > 0)
					ret = guest_ended(&guests[g], &w, &hc);
			}
		/* Guests being followed (guest_ended()), and their DISRUPTIONs. */
		for (g = 0; g < nr_guests && !ret; g++) {
			struct guest *gs = &guests[g];
			bool done;

			if (gs->following) {
				pthread_mutex_lock(&gs->lock);
				done = gs->follow_done;
				pthread_mutex_unlock(&gs->lock);
				if (done && gs->follow_fd >= 0) {
					ret = follow_finish(gs, &w, &hc);
					if (ret > 0)
						ret = guest_lost(gs, &w, &hc);
				} else if (done) {
					char when[64];

					snprintf(when, sizeof(when), "it did not come back within %u s",
						 follow_timeout_s);
					ret = follow_gone(gs, &w, &hc, when);
				}
			}
			if (!ret && gs->disr_pending &&
			    ((gs->disr_identity_in && gs->disr_probe_in) || now_s() >= gs->disr_deadline))
				ret = disr_commit(gs, &w);
		}
		/*
		 * A guest probed that has answered nothing for a long time (a
		 * hung or paused VM) is lost: its data would stop anyway.
		 */
		for (g = 0; g < nr_guests && !ret; g++) {
			struct guest *gs = &guests[g];
			double silent_s = 3 * interval_s > HG_GUEST_SILENT_S ? 3 * interval_s :
					  HG_GUEST_SILENT_S;
			double heard_at;

			if (gs->fd < 0 || !gs->can_probe || !interval_ms || gs->probe_dead)
				continue;
			pthread_mutex_lock(&gs->lock);
			heard_at = gs->last_heard;
			pthread_mutex_unlock(&gs->lock);
			if (now_s() - heard_at < silent_s)
				continue;
			set_why(gs, "no message and no probe reply for %.0f s", now_s() - heard_at);
			ret = guest_ended(gs, &w, &hc);
		}
		/* A new burst of probes for each guest whose interval has passed. */
		for (g = 0; g < nr_guests && !ret; g++) {
			struct guest *gs = &guests[g];

			if (gs->fd < 0 || gs->probe_fd >= 0 || !gs->can_probe || gs->probe_pending ||
			    !interval_ms || now_s() < gs->next_probe)
				continue;
			gs->burst_left = gs->burst - 1;
			ret = send_probe(gs, &hc);
			if (ret) {
				set_why(gs, "sending a probe: %s", strerror(-ret));
				ret = guest_ended(gs, &w, &hc);
			}
		}
	}
	if (child_running && !ret)
		fprintf(stderr, "hgclock record: not waiting for %s (pid %d) any longer\n",
			command[0], (int)child_pid);
	/* A guest still being looked for is lost; a DISRUPTION waiting is written. */
	for (g = 0; g < nr_guests; g++) {
		int err = 0;

		if (guests[g].following && !ret)
			err = follow_gone(&guests[g], &w, &hc, "the recording ended before it came back");
		else if (guests[g].following)
			follow_stop(&guests[g]);
		if (!err && !ret)
			err = disr_commit(&guests[g], &w);
		if (err && !ret)
			ret = err;
	}
	for (g = 0; g < nr_guests; g++)
		close_probe_channel(&guests[g]);
	/*
	 * Ask every guest to finish: each sends what its rings still hold,
	 * then BYE.  What arrives is written; together they get 5 s.
	 */
	for (g = 0; g < nr_guests; g++) {
		int err;

		if (guests[g].fd < 0)
			continue;
		guests[g].closing = true;
		err = hgp_send(guests[g].fd, HGP_BYE, NULL, 0);
		if (err) {
			set_why(&guests[g], "sending BYE at the end: %s", strerror(-err));
			if (!ret)
				ret = guest_lost(&guests[g], &w, &hc);
		}
	}
	for (double until = now_s() + 5; !ret && now_s() < until;) {
		unsigned int open = 0;

		for (g = 0; g < nr_guests; g++) {
			pfd[g].fd = guests[g].fd;
			pfd[g].events = POLLIN;
			pfd[g].revents = 0;
			open += guests[g].fd >= 0;
		}
		if (!open)
			break;
		if (poll(pfd, nr_guests, 200) < 0 && errno != EINTR)
			break;
		for (g = 0; g < nr_guests && !ret; g++)
			if (guests[g].fd >= 0 && (pfd[g].revents & (POLLIN | POLLHUP | POLLERR))) {
				ret = guest_message(&guests[g], &w, gbuf, &hc, interval_s);
				if (ret > 0)
					ret = guest_lost(&guests[g], &w, &hc);
			}
	}
	for (g = 0; g < nr_guests; g++) {
		if (guests[g].fd < 0)
			continue;
		if (ret) {	/* the recording failed (said): no file to note it in */
			close(guests[g].fd);
			guests[g].fd = -1;
			continue;
		}
		set_why(&guests[g], "no BYE within 5 s of the end: its last records may be missing");
		ret = guest_lost(&guests[g], &w, &hc);
	}
	for (g = 0; g < nr_guests && !ret; g++)
		ret = flush_probes(&guests[g], &w);
	for (g = 0; g < nr_guests; g++)
		fprintf(stderr, "hgclock record: guest %s: %llu record batches, %llu probes"
			" (tightest round trip %llu ns, %llu dropped, %llu timed out)%s\n",
			guests[g].spec, (unsigned long long)guests[g].records,
			(unsigned long long)guests[g].nr_probes,
			(unsigned long long)guests[g].best_rtt_ns,
			(unsigned long long)guests[g].probes_dropped,
			(unsigned long long)guests[g].probe_timeouts, guests[g].lost ? ", lost" : "");
	if (!ret && nr_guests)
		ret = write_segments(&w, hg_output_write_path(&o));
	if (tty)
		fputc('\n', stderr);
	if (period_set) {
		saved.flags = HGCLOCK_CFG_SET_PERIOD;
		hgclock_ring_config(fd, &saved);
	}
	/*
	 * END only after a clean run: a failed one must not look complete,
	 * and leaves FILE as it was.
	 */
	if (ret) {
		hgcor_abort(&w);
	} else {
		ret = hgcor_close(&w);
		if (ret)
			hg_err("%s: writing the END section: %s", out, strerror(-ret));
	}
	if (ret)
		hg_output_abort(&o);
	else if (hg_output_commit(&o))
		ret = -EIO;
	if (!ret)
		fprintf(stderr, "hgclock record: %s: %llu records (%llu lost in the kernel), %llu bytes\n",
			out, (unsigned long long)sink.total, (unsigned long long)sink.lost,
			(unsigned long long)w.bytes);
	if (!ret && nr_lost)
		fprintf(stderr, "hgclock record: %u of %u guests lost (the file's notes say when "
			"and why)%s\n", nr_lost, nr_guests, require_all ? "; exit 1 (--require-all)" : "");
	/*
	 * The status: record's own failure first; then --require-all's; then,
	 * with a command, the command's (a shell's 128 + N when a signal N
	 * killed it; 1 if record stopped waiting for it).
	 */
	mr.file_complete = !ret;
	if (ret)
		ret = HGCLOCK_EXIT_FAILURE;
	else if (require_all && nr_lost)
		ret = HGCLOCK_EXIT_FAILURE;
	else if (command)
		ret = child_running || !child_started ? HGCLOCK_EXIT_FAILURE :
		      command_status(child_status);
	else
		ret = HGCLOCK_EXIT_OK;
	/*
	 * --merge: a complete file and a command that exited 0 only; merge's
	 * status is then record's.
	 */
	if (mr.out && !ret)
		ret = merge_at_end(&mr, out, guests, nr_guests);
	else if (mr.out && !child_running && child_started && !(require_all && nr_lost) &&
		 mr.file_complete)
		fprintf(stderr, "hgclock record: not merging into %s: %s exited with status %d\n",
			mr.out, command[0], ret);
	else if (mr.out)
		fprintf(stderr, "hgclock record: not merging into %s: the recording did not end "
			"cleanly\n", mr.out);
	/* record failed with the command still running: it is told to stop too. */
	if (child_running && ret == HGCLOCK_EXIT_FAILURE && !nr_signals && !child_told) {
		fprintf(stderr, "hgclock record: sending SIGTERM to %s (pid %d)\n", command[0],
			(int)child_pid);
		kill(child_pid, SIGTERM);
	}
out_map:
	for (g = 0; g < nr_guests; g++) {
		follow_stop(&guests[g]);
		close_probe_channel(&guests[g]);
		if (guests[g].fd >= 0)
			close(guests[g].fd);
		pthread_mutex_destroy(&guests[g].lock);
	}
	free(guests);
	free(pfd);
	free(gbuf);
	free(b.buf);
	hgclock_map_close(&map);
	close(fd);
	return ret;
}
