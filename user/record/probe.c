// SPDX-License-Identifier: GPL-2.0
/*
 * The recorder's probe channel to one guest: its own vsock connection, a
 * thread that sends bursts of probes every interval (probe_thread_fn()),
 * each reply paired with the host's clocks around it (probe_reply()) and
 * kept in the guest's PROBES buffer until flushed into the file
 * (flush_probes()); and the clock jump a disruption made, measured from
 * the probes before and after it (disr_jump()).
 */
#include "record.h"

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

int guest_records_flush(struct guest *g, struct hgcor_writer *w, bool force)
{
	uint32_t prefix[2] = { g->id, 0 };

	return rec_hold_flush(&g->rec_hold, w, HGCOR_SEC_GUEST_RECORDS, prefix, sizeof(prefix),
			      force);
}

/*
 * The probes gathered, as one section; the guest's held records first,
 * whatever their age: every caller is a point after which they must be in
 * the file (its session ends, a disruption begins, the recording ends).
 */
int flush_probes(struct guest *g, struct hgcor_writer *w)
{
	static struct hgcor_probe copy[HG_PROBE_BUF];
	uint32_t prefix[2] = { g->id, 0 };
	size_t n;
	int ret;

	ret = guest_records_flush(g, w, true);
	if (ret)
		return ret;

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

/*
 * The main loop's flush: the guest's held records and the probes gathered
 * are written when @force,
 * while a disruption waits for the first probe after it, when the buffer
 * is half full, or HG_HOST_HOLD_S after the last write; in between they
 * wait in the buffer (a section for each pass of the loop made PROBES
 * sections of a few probes, mostly header).
 */
int flush_probes_due(struct guest *g, struct hgcor_writer *w, bool force)
{
	size_t n;
	int ret;

	/* Its records on the same terms (HG_HOST_HOLD_BYTES, HG_HOST_HOLD_S). */
	ret = guest_records_flush(g, w, force || g->disr_pending);
	if (ret)
		return ret;

	pthread_mutex_lock(&g->lock);
	n = g->np;
	pthread_mutex_unlock(&g->lock);
	if (!force && !g->disr_pending && n < HG_PROBE_BUF / 2 &&
	    now_s() - g->probes_written_s < HG_HOST_HOLD_S)
		return 0;
	g->probes_written_s = now_s();
	return flush_probes(g, w);
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
int open_probe_channel(struct guest *g, uint8_t *buf)
{
	struct hgp_hello hello = { HGP_VERSION_MAJOR, HGP_VERSION_MINOR, HGP_HELLO_PROBE_CHANNEL };
	struct timeval tv = { .tv_sec = 1 };
	struct hgp_header h;
	pthread_attr_t attr;
	char err[300];
	int fd, ret;

	/* Right after the session's HELLO: a guest that is there. */
	fd = hgp_connect(g->spec, HGP_CONNECT_START_S, err, sizeof(err));
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

void close_probe_channel(struct guest *g)
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

int send_probe(struct guest *g, const struct host_clock *hc)
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
int probe_reply(struct guest *g, struct hgcor_writer *w, const struct host_clock *hc,
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
