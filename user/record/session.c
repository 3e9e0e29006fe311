// SPDX-License-Identifier: GPL-2.0
/*
 * The recorder's session with one guest's agent: HELLO and the guest's
 * INFO (guest_open(), session_start(); a guest without an agent by its VM
 * alone, guest_open_vm_only()), each message after that (guest_message():
 * records into the file, probe replies to probe.c), and a guest written
 * down as lost (guest_lost()).  Following a guest whose session broke is
 * disrupt.c's, above this file.
 */
#include "record.h"

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
int agent_hello(int fd, uint8_t *buf, uint32_t *len, uint32_t *minor, int timeout_s,
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
int session_start(struct guest *g, struct hgcor_writer *w, uint8_t *buf,
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

int guest_open(struct guest *g, struct hgcor_writer *w, uint8_t *buf)
{
	char err[300], why[200];
	uint32_t len = 0, minor = 0;
	const char *colon;

	if (g->no_agent)
		return guest_open_vm_only(g, w);
	/* vsock:CID:PORT: the port goes with every CID the guest may move to. */
	colon = !strncmp(g->spec, "vsock:", 6) ? strchr(g->spec + 6, ':') : NULL;
	snprintf(g->port_suffix, sizeof(g->port_suffix), "%.15s", colon ? colon : "");
	g->fd = hgp_connect(g->spec, HGP_CONNECT_START_S, err, sizeof(err));
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
double rec_start;
unsigned int nr_lost;
bool require_all;

/*
 * Guest @g is lost (@g->why says why): its connections are closed, a NOTE
 * says which guest, when (the host's TSC and ftrace local clock, and the
 * seconds since the start) and why, and standard error says it in one
 * line.  The host and the other guests go on (unless --require-all).
 * 0, or -errno when the NOTE could not be written (said).
 */
int guest_lost(struct guest *g, struct hgcor_writer *w, const struct host_clock *hc)
{
	struct hgclock_now now = { 0 };
	double t = now_s() - rec_start;
	char note[400];
	int err;

	close_probe_channel(g);
	if (g->fd >= 0) {
		close(g->fd);
		g->fd = -1;
	}
	if (g->lost)
		return 0;
	g->lost = true;
	nr_lost++;
	/* What it sent before, then the NOTE. */
	err = guest_records_flush(g, w, true);
	if (err)
		return err;	/* said by put_section2() */
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

/*
 * One message from a guest: records go to the file, probe replies are
 * paired with the host's clocks; BYE/ERROR end the session.  0 while the
 * session goes on or when it ended as asked (BYE after ours); 1 when it
 * ended otherwise (@g->why says how: the caller notes the loss); -errno
 * when writing the file failed (said).
 */
int guest_message(struct guest *g, struct hgcor_writer *w, uint8_t *buf,
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
			/*
			 * Held with the guest's others (an idle agent sends a
			 * few records a drain): a section for each made the
			 * sections' overhead most of the guest's bytes.  No
			 * buffer (no memory): each message is a section.
			 */
			if (!g->rec_hold.buf)
				g->rec_hold.buf = malloc(HG_HOST_HOLD_BYTES);
			return rec_hold_add(&g->rec_hold, w, HGCOR_SEC_GUEST_RECORDS, prefix,
					    sizeof(prefix), buf, h.length);
		}
		set_why(g, "malformed records from the agent");
		ret = 1;
	} else if (!ret && h.type == HGP_CPU_MAP) {
		/* Guest CPU -> APIC ID (KVM's vcpu_id), 1.2: sync.rst, "vCPU identity". */
		heard(g);
		if (!hgp_cpu_map_check(buf, h.length, HGP_APIC_ID_LIMIT)) {
			/* After the records it sent before it, as they came. */
			int err = guest_records_flush(g, w, true);

			return err ? err : put_section2(w, HGCOR_SEC_CPU_MAP, HGCOR_SEC_OPTIONAL,
						       prefix, sizeof(prefix), buf, h.length);
		}
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
			ret = guest_records_flush(g, w, true);
			if (ret)
				return ret;
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
