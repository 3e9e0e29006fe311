// SPDX-License-Identifier: GPL-2.0
/*
 * The recorder's guests from the command line: --guest SPEC parsed
 * (guest_parse()), the VM behind it found (by libvirt domain, vm=PID or
 * its vsock CID: vmfind.h) and said, and --all-guests' list of every VM
 * with a vsock device (add_all_guests()).  Nothing is connected here.
 */
#include "record.h"

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
int32_t vm_by_cid(struct guest *g, char *why, size_t size)
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
 * Adds the guest of one --guest argument to @*guests: 0 or an exit
 * status (said).
 */
int add_guest(struct guest **guests, unsigned int *nr_guests, const char *arg)
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
int add_all_guests(struct guest **guests, unsigned int *nr_guests)
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
