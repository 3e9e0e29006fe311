// SPDX-License-Identifier: GPL-2.0
/*
 * The recorder's disruptions: a guest whose session breaks, stalls or ends
 * early is followed (guest_ended(): a follower thread looks for it until
 * --follow-timeout, since a live migration or a restore moves it to
 * another VM process), found again it goes on under a new guest id
 * (follow_finish(), through session.c's session_start()), and the
 * DISRUPTION section between the two is written once its identity and
 * first probe are in, or its wait is over (disr_commit()).
 */
#include "record.h"

/* --follow-timeout: how long a guest whose session broke is looked for. */
unsigned int follow_timeout_s = 60;
/* The next guest id of the file: each session after a disruption takes one. */
uint32_t next_file_id;

/* The DISRUPTION of @g, once (file-format.rst); said on standard error. */
int disr_commit(struct guest *g, struct hgcor_writer *w)
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

			fd = hgp_connect(g->spec, HGP_CONNECT_POLL_S, err, sizeof(err));
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
				fd = hgp_connect(spec, HGP_CONNECT_POLL_S, err, sizeof(err));
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
int guest_ended(struct guest *g, struct hgcor_writer *w, const struct host_clock *hc)
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
void follow_stop(struct guest *g)
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
int follow_gone(struct guest *g, struct hgcor_writer *w, const struct host_clock *hc,
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
int follow_finish(struct guest *g, struct hgcor_writer *w, const struct host_clock *hc)
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
	/* Records held under the old id stay under it (none: guest_ended()). */
	ret = guest_records_flush(g, w, true);
	if (ret) {
		free(hello);
		return ret;
	}
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
