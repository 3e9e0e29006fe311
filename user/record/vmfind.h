/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Finding a guest's VM on this host: which QEMU process runs it, its vsock
 * CID and its vCPU threads, from /proc and from libvirt (its run
 * directory, its domain XML).  `hgclock record` uses it for --guest
 * vsock:CID, --guest domain:NAME and --all-guests.
 *
 * Every path is taken from a struct vmfind, so that tests build fake
 * /proc and libvirt trees in a temporary directory.  Nothing here trusts
 * what it reads: command lines, pid files and XML are range-checked and
 * anything malformed is refused, never guessed at.
 */
#ifndef HGCLOCK_VMFIND_H
#define HGCLOCK_VMFIND_H

#include <stddef.h>
#include <stdint.h>

#define VMFIND_PROC_DEFAULT	"/proc"
#define VMFIND_RUN_DIR_DEFAULT	"/run/libvirt/qemu"
#define VMFIND_VIRSH_DEFAULT	"virsh"
#define VMFIND_CMDLINE_MAX	(1u << 20)	/* bytes of one /proc/PID/cmdline */
#define VMFIND_XML_MAX		(4u << 20)	/* bytes of one domain XML */
#define VMFIND_NAME_MAX		200		/* bytes of a libvirt domain name */
#define VMFIND_CID_MIN		3u		/* 0-2: hypervisor, local, host */
#define VMFIND_CID_MAX		0xfffffffeu	/* 0xffffffff: VMADDR_CID_ANY */
#define VMFIND_VCPU_MAX		16383u		/* x86 KVM's largest vcpu id */

/* What the functions below return besides VMFIND_OK; vmfind_strerror(). */
enum vmfind_err {
	VMFIND_OK = 0,
	VMFIND_E_NONE = -2000,	/* no process has a vsock device with that CID */
	VMFIND_E_SEVERAL,	/* several processes claim that CID or name */
	VMFIND_E_NO_DOMAIN,	/* libvirt knows no domain of that name */
	VMFIND_E_NOT_RUNNING,	/* the domain exists but is not running */
	VMFIND_E_NOT_FOUND,	/* no running domain of that name (virsh could not say more) */
	VMFIND_E_NO_VSOCK,	/* the VM has no vsock device */
	VMFIND_E_CONFLICT,	/* libvirt's XML and QEMU's command line differ on the CID */
	VMFIND_E_BAD_NAME,	/* not a name libvirt can give a domain */
	VMFIND_E_MALFORMED,	/* a -device argument, pid file or XML is garbage */
	VMFIND_E_SYS,		/* a directory could not be read */
};

const char *vmfind_strerror(int err);

/*
 * Where to look.  vmfind_init() fills the defaults, overridden by the
 * environment: HGCLOCK_PROC (the proc root), HGCLOCK_LIBVIRT_RUN_DIR
 * (libvirt's QEMU run directory), HGCLOCK_VIRSH (the virsh program; empty:
 * never run it).  @why holds the last failure's explanation, one line.
 */
struct vmfind {
	const char *proc;
	const char *run_dir;
	const char *virsh;	/* NULL: never run virsh */
	unsigned int virsh_timeout_s;
	char why[512];
};

void vmfind_init(struct vmfind *vf);

/* ---- command lines ---- */

/* One process's arguments: @argv points into @buf. */
struct vmfind_args {
	char *buf;
	size_t len;
	char **argv;
	size_t argc;
};

/*
 * Reads /proc/PID/cmdline whole (at most VMFIND_CMDLINE_MAX bytes) and
 * splits it at its NULs.  0; -ENOENT (no such process, or a kernel thread:
 * an empty command line), -E2BIG (longer than the maximum), -errno.
 */
int vmfind_read_cmdline(const struct vmfind *vf, int32_t pid, struct vmfind_args *a);
void vmfind_args_free(struct vmfind_args *a);

/* True if argv[0] names a QEMU ("qemu*", or Debian's "kvm" wrapper). */
int vmfind_args_is_qemu(const struct vmfind_args *a);

/*
 * The guest CID of one -device argument, in QEMU's key=value form
 * ("vhost-vsock-pci,id=vsock0,guest-cid=3", ",," escaping a comma, the
 * number as QEMU reads it: decimal, 0x hex or 0 octal) or its JSON form
 * ({"driver":"vhost-vsock-pci",...,"guest-cid":3}, a decimal number).
 * Drivers vhost-vsock-* only.  1 with @cid set; 0 if not a vsock device;
 * -EINVAL for garbage, a duplicate key or a CID outside 3..0xfffffffe.
 */
int vmfind_device_cid(const char *arg, uint32_t *cid);

/*
 * The CIDs of every vsock -device of @a, up to @max of them in @cids:
 * their number, or -EINVAL if one is malformed.
 */
int vmfind_args_cids(const struct vmfind_args *a, uint32_t *cids, size_t max);

/*
 * The guest name of QEMU's "-name guest=NAME,..." or "-name NAME,...",
 * unescaped (",," is a comma): 1 with @name set, 0 if none, -EINVAL if it
 * does not fit @size.
 */
int vmfind_args_name(const struct vmfind_args *a, char *name, size_t size);

/* ---- libvirt ---- */

/*
 * The vsock CID of a libvirt domain XML (or status XML):
 * <vsock model='virtio'><cid auto='yes' address='3'/></vsock>.
 * VMFIND_OK with @cid set; VMFIND_E_NO_VSOCK without a <vsock>;
 * VMFIND_E_MALFORMED for a <vsock> without an address (a defined domain
 * that never ran), several, or garbage.
 */
int vmfind_xml_cid(const char *xml, size_t len, uint32_t *cid);

/* True if @name could be a libvirt domain name (and a file name). */
int vmfind_name_ok(const char *name);

/* ---- finding a VM ---- */

/* vmfind_vm.pid_from */
enum {
	VMFIND_PID_CID = 1,	/* the one process with a vsock device of that CID */
	VMFIND_PID_PIDFILE,	/* libvirt's RUN_DIR/NAME.pid, checked */
	VMFIND_PID_NAME,	/* the QEMU whose command line says -name guest=NAME */
};

/* vmfind_vm.cid_from */
enum {
	VMFIND_CID_CMDLINE = 1,	/* QEMU's -device vhost-vsock-* */
	VMFIND_CID_STATUS_XML,	/* libvirt's RUN_DIR/NAME.xml */
	VMFIND_CID_VIRSH,	/* virsh dumpxml NAME */
};

struct vmfind_vm {
	int32_t pid;
	uint32_t cid;			/* 0 when unknown */
	unsigned int pid_from;		/* VMFIND_PID_* */
	unsigned int cid_from;		/* VMFIND_CID_*, 0 when unknown */
	char name[VMFIND_NAME_MAX + 1];	/* libvirt domain or -name; "" if none */
	int err;			/* vmfind_all(): why this VM is unusable */
	char why[512];
};

/*
 * The QEMU process of the guest with vsock CID @cid: VMFIND_OK with
 * @vm->pid; VMFIND_E_NONE; VMFIND_E_SEVERAL (unless exactly one of the
 * claimants is a QEMU: a "sudo qemu ..." parent repeats its arguments).
 * @vf->why says which processes.
 */
int vmfind_by_cid(struct vmfind *vf, uint32_t cid, struct vmfind_vm *vm);

/*
 * The running libvirt domain @name: its QEMU process (the pid file, if
 * it names a live QEMU of that name, else the one QEMU whose command line
 * names it) and its vsock CID (the status XML, else virsh dumpxml, else
 * the command line; the XML and the command line must agree).  Errors:
 * VMFIND_E_BAD_NAME, _NO_DOMAIN, _NOT_RUNNING, _NOT_FOUND, _SEVERAL,
 * _NO_VSOCK, _CONFLICT, _MALFORMED; @vf->why says more.
 */
int vmfind_domain(struct vmfind *vf, const char *name, struct vmfind_vm *vm);

/*
 * Every running VM: each libvirt domain with a pid file in the run
 * directory, then every other QEMU with a vsock device.  @*vms (free())
 * holds @*nr entries; those with @err set are VMs that cannot be used
 * (their @why says why).  0 or -ENOMEM.
 */
int vmfind_all(struct vmfind *vf, struct vmfind_vm **vms, size_t *nr);

/* One vCPU thread of a QEMU, by its own name "CPU n/KVM". */
struct vmfind_vcpu {
	uint32_t index;		/* QEMU's CPU index n */
	int32_t tid;
};

/*
 * The KVM vCPU threads of QEMU process @pid, sorted by index (QEMU names
 * them with -name ...,debug-threads=on, as libvirt does; without it there
 * are none).  Their number, or -errno.  @*vcpus: free().
 */
int vmfind_vcpus(const struct vmfind *vf, int32_t pid, struct vmfind_vcpu **vcpus);

#endif /* HGCLOCK_VMFIND_H */
