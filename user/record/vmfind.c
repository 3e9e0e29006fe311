// SPDX-License-Identifier: GPL-2.0
/*
 * Finding a guest's VM on this host (vmfind.h): QEMU command lines read
 * whole from /proc (their -device and -name arguments parsed by
 * vmfind_args.c), libvirt's pid files and domain XML, and QEMU's vCPU
 * thread names.
 *
 * Everything read is hostile until checked: a file may be cut, huge, or
 * written by another user's process (a command line is whatever that
 * process chose).  Reads are bounded, numbers range-checked, and any
 * doubt is an error rather than a guess: a wrong VM would pair the guest
 * with another guest's TSC offsets, silently.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vmfind.h"

#define SAY(vf, ...) snprintf((vf)->why, sizeof((vf)->why), __VA_ARGS__)

const char *vmfind_strerror(int err)
{
	switch (err) {
	case VMFIND_OK: return "found";
	case VMFIND_E_NONE: return "no such VM";
	case VMFIND_E_SEVERAL: return "several VMs match";
	case VMFIND_E_NO_DOMAIN: return "unknown libvirt domain";
	case VMFIND_E_NOT_RUNNING: return "domain not running";
	case VMFIND_E_NOT_FOUND: return "no running domain of that name";
	case VMFIND_E_NO_VSOCK: return "no vsock device";
	case VMFIND_E_CONFLICT: return "libvirt and QEMU differ on the CID";
	case VMFIND_E_BAD_NAME: return "not a domain name";
	case VMFIND_E_MALFORMED: return "malformed input";
	case VMFIND_E_SYS: return "cannot read";
	}
	return "unknown error";
}

void vmfind_init(struct vmfind *vf)
{
	const char *e;

	memset(vf, 0, sizeof(*vf));
	vf->proc = VMFIND_PROC_DEFAULT;
	vf->run_dir = VMFIND_RUN_DIR_DEFAULT;
	vf->virsh = VMFIND_VIRSH_DEFAULT;
	vf->virsh_timeout_s = 10;
	e = getenv("HGCLOCK_PROC");
	if (e && *e)
		vf->proc = e;
	e = getenv("HGCLOCK_LIBVIRT_RUN_DIR");
	if (e && *e)
		vf->run_dir = e;
	e = getenv("HGCLOCK_VIRSH");
	if (e)
		vf->virsh = *e ? e : NULL;
}

/*
 * Reads a whole file of at most @max bytes into a NUL-terminated buffer
 * (@*len excludes the NUL).  0, -E2BIG if longer, -errno.
 */
static int read_whole(const char *path, size_t max, char **buf, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *b = malloc(cap + 1);
	int fd, ret = 0;

	*buf = NULL;
	*len = 0;
	if (!b)
		return -ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		free(b);
		return -errno;
	}
	for (;;) {
		ssize_t r;

		if (n == cap) {
			char *nb;

			if (cap > max) {
				ret = -E2BIG;
				break;
			}
			cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
			nb = realloc(b, cap + 1);
			if (!nb) {
				ret = -ENOMEM;
				break;
			}
			b = nb;
		}
		r = read(fd, b + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ret = -errno;
			break;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	if (!ret && n > max)
		ret = -E2BIG;
	if (ret) {
		free(b);
		return ret;
	}
	b[n] = 0;
	*buf = b;
	*len = n;
	return 0;
}

/* ---- command lines ---- */

void vmfind_args_free(struct vmfind_args *a)
{
	free(a->argv);
	free(a->buf);
	memset(a, 0, sizeof(*a));
}

int vmfind_read_cmdline(const struct vmfind *vf, int32_t pid, struct vmfind_args *a)
{
	char path[PATH_MAX];
	size_t i, k;
	int ret;

	memset(a, 0, sizeof(*a));
	if (pid <= 0)
		return -ENOENT;
	if (snprintf(path, sizeof(path), "%s/%d/cmdline", vf->proc, pid) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	ret = read_whole(path, VMFIND_CMDLINE_MAX, &a->buf, &a->len);
	if (ret)
		return ret;
	if (!a->len) {		/* a kernel thread, or a zombie */
		vmfind_args_free(a);
		return -ENOENT;
	}
	/* Arguments end in NUL; the last one's may be missing (read_whole adds it). */
	for (i = 0; i < a->len; i++)
		if (!a->buf[i])
			a->argc++;
	if (a->buf[a->len - 1])
		a->argc++;
	a->argv = calloc(a->argc + 1, sizeof(*a->argv));
	if (!a->argv) {
		vmfind_args_free(a);
		return -ENOMEM;
	}
	for (i = 0, k = 0; i < a->len && k < a->argc; k++) {
		a->argv[k] = a->buf + i;
		i += strlen(a->buf + i) + 1;
	}
	return 0;
}

int vmfind_args_is_qemu(const struct vmfind_args *a)
{
	const char *base;

	if (!a->argc)
		return 0;
	base = strrchr(a->argv[0], '/');
	base = base ? base + 1 : a->argv[0];
	return !strncmp(base, "qemu", 4) || !strcmp(base, "kvm");
}

/* The element <@tag at @p (followed by a space, '/' or '>'), from @p to @end. */
static const char *find_tag(const char *p, const char *end, const char *tag)
{
	size_t tl = strlen(tag);

	for (; p && p + tl + 1 < end; p++) {
		p = memchr(p, '<', (size_t)(end - p));
		if (!p || p + tl + 1 >= end)
			return NULL;
		if (!memcmp(p + 1, tag, tl) && strchr(" \t\r\n/>", p[1 + tl]))
			return p;
	}
	return NULL;
}

/*
 * The value of attribute @attr in the start tag at @tag (up to its '>'):
 * 1 with it in @val, 0 if absent, -EINVAL if the tag is cut or the value
 * does not fit.
 */
static int xml_attr(const char *tag, const char *end, const char *attr, char *val, size_t size)
{
	const char *gt = memchr(tag, '>', (size_t)(end - tag));
	size_t al = strlen(attr);
	const char *p;

	if (!gt)
		return -EINVAL;
	for (p = tag + 1; p < gt && !isspace((unsigned char)*p) && *p != '/'; p++)
		;
	while (p < gt) {
		const char *name, *v;
		char q;
		size_t nl;

		while (p < gt && (isspace((unsigned char)*p) || *p == '/'))
			p++;
		if (p >= gt)
			break;
		name = p;
		while (p < gt && *p != '=' && !isspace((unsigned char)*p))
			p++;
		nl = (size_t)(p - name);
		while (p < gt && isspace((unsigned char)*p))
			p++;
		if (p >= gt || *p++ != '=')
			return -EINVAL;
		while (p < gt && isspace((unsigned char)*p))
			p++;
		if (p >= gt || (*p != '\'' && *p != '"'))
			return -EINVAL;
		q = *p++;
		v = p;
		p = memchr(p, q, (size_t)(gt - p));
		if (!p)
			return -EINVAL;
		if (nl == al && !memcmp(name, attr, al)) {
			if ((size_t)(p - v) >= size)
				return -EINVAL;
			memcpy(val, v, (size_t)(p - v));
			val[p - v] = 0;
			return 1;
		}
		p++;
	}
	return 0;
}

int vmfind_xml_cid(const char *xml, size_t len, uint32_t *cid)
{
	const char *end = xml + len, *vsock, *stop, *c;
	char addr[32];
	uint64_t v = 0;
	int r;

	vsock = find_tag(xml, end, "vsock");
	if (!vsock)
		return VMFIND_E_NO_VSOCK;
	if (find_tag(vsock + 1, end, "vsock"))
		return VMFIND_E_MALFORMED;	/* libvirt allows one */
	/* The <cid> inside this <vsock>: before its end tag. */
	stop = memmem(vsock, (size_t)(end - vsock), "</vsock>", 8);
	if (!stop)
		return VMFIND_E_MALFORMED;	/* cut, or <vsock/>: no CID */
	c = find_tag(vsock, stop, "cid");
	if (!c)
		return VMFIND_E_MALFORMED;
	r = xml_attr(c, stop, "address", addr, sizeof(addr));
	if (r <= 0 || !addr[0])
		return VMFIND_E_MALFORMED;
	for (const char *s = addr; *s; s++) {
		if (!isdigit((unsigned char)*s))
			return VMFIND_E_MALFORMED;
		v = v * 10 + (uint64_t)(*s - '0');
		if (v > VMFIND_CID_MAX)
			return VMFIND_E_MALFORMED;
	}
	if (v < VMFIND_CID_MIN)
		return VMFIND_E_MALFORMED;
	*cid = (uint32_t)v;
	return VMFIND_OK;
}

/*
 * Runs "VIRSH dumpxml --domain NAME" (no shell) and returns its output:
 * 0 (@*out, @*len; free()); 1 if virsh says there is no such domain; 2 if
 * it failed otherwise (libvirtd unreachable...), its first error line in
 * @err; -errno if it could not run (-ENOENT: not installed) or took
 * longer than vf->virsh_timeout_s.
 */
static int virsh_dumpxml(const struct vmfind *vf, const char *name, char **out, size_t *len,
			 char *err, size_t err_size)
{
	char *argv[] = { (char *)vf->virsh, "dumpxml", "--domain", (char *)name, NULL };
	size_t cap = 65536, n = 0, nerr = 0;
	int pout[2], perr[2], status, ret = 0, open_fds = 2;
	char ebuf[512];
	time_t deadline;
	char *b;
	pid_t pid;

	*out = NULL;
	*len = 0;
	err[0] = 0;
	if (!vf->virsh)
		return -ENOENT;
	b = malloc(cap + 1);
	if (!b)
		return -ENOMEM;
	if (pipe2(pout, O_CLOEXEC)) {
		free(b);
		return -errno;
	}
	if (pipe2(perr, O_CLOEXEC)) {
		ret = -errno;
		close(pout[0]);
		close(pout[1]);
		free(b);
		return ret;
	}
	pid = fork();
	if (pid < 0) {
		ret = -errno;
		close(pout[0]);
		close(pout[1]);
		close(perr[0]);
		close(perr[1]);
		free(b);
		return ret;
	}
	if (pid == 0) {
		int nul = open("/dev/null", O_RDONLY);

		if (nul >= 0)
			dup2(nul, 0);
		dup2(pout[1], 1);
		dup2(perr[1], 2);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(pout[1]);
	close(perr[1]);
	deadline = time(NULL) + vf->virsh_timeout_s;
	/*
	 * Both pipes until both close: virsh never blocks on a full one.  A
	 * closed one is kept as -1 - fd, which poll() skips.
	 */
	while (open_fds) {
		struct pollfd p[2] = { { .fd = pout[0], .events = POLLIN },
				       { .fd = perr[0], .events = POLLIN } };
		int left = (int)(deadline - time(NULL)), pr;
		ssize_t r;

		pr = left > 0 ? poll(p, 2, left * 1000) : 0;
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0) {
			ret = pr ? -errno : -ETIMEDOUT;
			break;
		}
		if (p[1].revents && perr[0] >= 0) {
			char sink[512];

			r = read(perr[0], nerr < sizeof(ebuf) - 1 ? ebuf + nerr : sink,
				 nerr < sizeof(ebuf) - 1 ? sizeof(ebuf) - 1 - nerr : sizeof(sink));
			if (r > 0 && nerr < sizeof(ebuf) - 1)
				nerr += (size_t)r;
			if (r == 0 || (r < 0 && errno != EINTR)) {
				perr[0] = -1 - perr[0];	/* closed below */
				open_fds--;
			}
		}
		if (p[0].revents && pout[0] >= 0) {
			if (n == cap) {
				char *nb;

				if (cap >= VMFIND_XML_MAX) {
					ret = -E2BIG;
					break;
				}
				cap *= 2;
				nb = realloc(b, cap + 1);
				if (!nb) {
					ret = -ENOMEM;
					break;
				}
				b = nb;
			}
			r = read(pout[0], b + n, cap - n);
			if (r > 0)
				n += (size_t)r;
			if (r == 0 || (r < 0 && errno != EINTR)) {
				pout[0] = -1 - pout[0];
				open_fds--;
			}
		}
	}
	close(pout[0] < 0 ? -1 - pout[0] : pout[0]);
	close(perr[0] < 0 ? -1 - perr[0] : perr[0]);
	if (ret)
		kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	ebuf[nerr] = 0;
	/* The first line of what virsh said, without control characters. */
	{
		size_t k = 0;

		for (char *c = ebuf; *c && *c != '\n' && k + 1 < err_size; c++)
			err[k++] = (unsigned char)*c < 0x20 ? ' ' : *c;
		err[k] = 0;
	}
	if (!ret && WIFEXITED(status) && WEXITSTATUS(status) == 127)
		ret = -ENOENT;	/* not installed */
	else if (!ret && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
		ret = strstr(ebuf, "failed to get domain") || strstr(ebuf, "Domain not found") ?
		      1 : 2;
	if (ret) {
		free(b);
		return ret;
	}
	b[n] = 0;
	*out = b;
	*len = n;
	return 0;
}

/* ---- finding a VM ---- */

static bool all_digits(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			return false;
	return true;
}

/* A process directory name: 1 to 2^31-1 (pid_max is at most 2^22). */
static int32_t dir_pid(const char *name)
{
	unsigned long v;

	if (!all_digits(name) || strlen(name) > 10)
		return -1;
	v = strtoul(name, NULL, 10);
	return v && v <= INT32_MAX ? (int32_t)v : -1;
}

#define CLAIM_MAX 4

int vmfind_by_cid(struct vmfind *vf, uint32_t cid, struct vmfind_vm *vm)
{
	int32_t claim[CLAIM_MAX], qemu[CLAIM_MAX];
	unsigned int nc = 0, nq = 0;
	struct dirent *de;
	DIR *d;

	memset(vm, 0, sizeof(*vm));
	vm->pid = -1;
	vf->why[0] = 0;
	d = opendir(vf->proc);
	if (!d) {
		SAY(vf, "cannot read %s: %s", vf->proc, strerror(errno));
		return VMFIND_E_SYS;
	}
	while ((de = readdir(d))) {
		int32_t pid = dir_pid(de->d_name);
		struct vmfind_args a;
		uint32_t cids[8];
		int n;
		bool match = false;

		if (pid < 0 || vmfind_read_cmdline(vf, pid, &a))
			continue;
		n = vmfind_args_cids(&a, cids, 8);
		for (int i = 0; i < n && i < 8; i++)
			match |= cids[i] == cid;
		if (match) {
			if (nc < CLAIM_MAX)
				claim[nc] = pid;
			nc++;
			if (vmfind_args_is_qemu(&a)) {
				if (nq < CLAIM_MAX)
					qemu[nq] = pid;
				nq++;
			}
		}
		vmfind_args_free(&a);
	}
	closedir(d);
	if (!nc) {
		SAY(vf, "no process on this host has a vhost-vsock device with guest-cid %u", cid);
		return VMFIND_E_NONE;
	}
	if (nc == 1 || nq == 1) {
		vm->pid = nc == 1 ? claim[0] : qemu[0];
		vm->cid = cid;
		vm->pid_from = VMFIND_PID_CID;
		vm->cid_from = VMFIND_CID_CMDLINE;
		return VMFIND_OK;
	}
	{
		size_t l;

		SAY(vf, "%u processes claim vsock CID %u (", nc, cid);
		for (unsigned int i = 0; i < nc && i < CLAIM_MAX; i++) {
			l = strlen(vf->why);
			snprintf(vf->why + l, sizeof(vf->why) - l, "%s%d", i ? ", " : "", claim[i]);
		}
		l = strlen(vf->why);
		snprintf(vf->why + l, sizeof(vf->why) - l, "%s)", nc > CLAIM_MAX ? ", ..." : "");
	}
	return VMFIND_E_SEVERAL;
}

/*
 * Whether process @pid is a QEMU running domain @name: 0 (its arguments
 * in @a), or -1 with the reason in @why.
 */
static int check_domain_pid(const struct vmfind *vf, int32_t pid, const char *name,
			    struct vmfind_args *a, char *why, size_t size)
{
	char qname[VMFIND_NAME_MAX + 1];
	int r = vmfind_read_cmdline(vf, pid, a);

	if (r) {
		snprintf(why, size, "process %d is gone", pid);
		return -1;
	}
	if (!vmfind_args_is_qemu(a)) {
		snprintf(why, size, "process %d is not a QEMU (%.100s)", pid, a->argv[0]);
		goto bad;
	}
	r = vmfind_args_name(a, qname, sizeof(qname));
	if (r <= 0) {
		snprintf(why, size, "process %d is a QEMU without -name", pid);
		goto bad;
	}
	if (strcmp(qname, name)) {
		snprintf(why, size, "process %d is the QEMU of '%.100s'", pid, qname);
		goto bad;
	}
	return 0;
bad:
	vmfind_args_free(a);
	return -1;
}

/* The pid in libvirt's NAME.pid: >0, 0 if there is no pid file, -1 for garbage. */
static int32_t read_pid_file(const struct vmfind *vf, const char *name)
{
	char path[PATH_MAX], *buf, *s;
	size_t len;
	uint64_t v = 0;

	if (snprintf(path, sizeof(path), "%s/%s.pid", vf->run_dir, name) >= (int)sizeof(path))
		return -1;
	if (read_whole(path, 64, &buf, &len))
		return 0;
	s = buf;
	while (isdigit((unsigned char)*s) && v <= INT32_MAX)
		v = v * 10 + (uint64_t)(*s++ - '0');
	while (*s == '\n' || *s == ' ')
		s++;
	if (*s || s == buf || !v || v > INT32_MAX) {
		free(buf);
		return -1;
	}
	free(buf);
	return (int32_t)v;
}

/* The one QEMU whose command line names domain @name: >0, 0 none, -1 several. */
static int32_t qemu_by_name(const struct vmfind *vf, const char *name)
{
	struct dirent *de;
	int32_t found = 0;
	DIR *d = opendir(vf->proc);

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		int32_t pid = dir_pid(de->d_name);
		struct vmfind_args a;
		char why[8];

		if (pid < 0 || check_domain_pid(vf, pid, name, &a, why, sizeof(why)))
			continue;
		vmfind_args_free(&a);
		if (found) {
			found = -1;
			break;
		}
		found = pid;
	}
	closedir(d);
	return found;
}

int vmfind_domain(struct vmfind *vf, const char *name, struct vmfind_vm *vm)
{
	char path[PATH_MAX], stale[200] = "", verr[200], vwhy[240] = "", *xml = NULL;
	uint32_t xml_cid = 0, cmd_cids[2];
	int xml_ret = VMFIND_E_SYS, ncmd, xml_from = 0, r;
	struct vmfind_args a;
	size_t len;
	int32_t pid;

	memset(vm, 0, sizeof(*vm));
	vm->pid = -1;
	vf->why[0] = 0;
	if (!vmfind_name_ok(name)) {
		SAY(vf, "'%.100s' is not a libvirt domain name", name);
		return VMFIND_E_BAD_NAME;
	}
	strcpy(vm->name, name);
	/* 1. The QEMU process: libvirt's pid file, if it names that QEMU. */
	pid = read_pid_file(vf, name);
	if (pid < 0)
		snprintf(stale, sizeof(stale), "%s/%s.pid is not a process id", vf->run_dir, name);
	if (pid > 0 && !check_domain_pid(vf, pid, name, &a, stale, sizeof(stale))) {
		vm->pid_from = VMFIND_PID_PIDFILE;
	} else {
		/* 2. Else the one QEMU whose command line names it. */
		pid = qemu_by_name(vf, name);
		if (pid < 0) {
			SAY(vf, "several QEMU processes say -name guest=%s", name);
			return VMFIND_E_SEVERAL;
		}
		if (pid > 0 && check_domain_pid(vf, pid, name, &a, path, sizeof(path)))
			pid = 0;	/* gone in between */
		if (pid > 0)
			vm->pid_from = VMFIND_PID_NAME;
	}
	if (pid <= 0) {
		/* Not running: libvirt (virsh) tells a stopped domain from none. */
		r = virsh_dumpxml(vf, name, &xml, &len, verr, sizeof(verr));
		free(xml);
		if (r == 0) {
			SAY(vf, "libvirt domain '%s' is not running%s%s%s", name,
			    *stale ? " (" : "", stale, *stale ? ")" : "");
			return VMFIND_E_NOT_RUNNING;
		}
		if (r == 1) {
			SAY(vf, "no libvirt domain '%s'%s%s", name, *stale ? " (" : "",
			    *stale ? stale : "");
			if (*stale)
				strncat(vf->why, ")", sizeof(vf->why) - strlen(vf->why) - 1);
			return VMFIND_E_NO_DOMAIN;
		}
		if (r == 2)
			snprintf(vwhy, sizeof(vwhy), "; virsh: %s", *verr ? verr : "failed");
		else if (vf->virsh)
			snprintf(vwhy, sizeof(vwhy), "; %s: %s", vf->virsh, strerror(-r));
		SAY(vf, "no running libvirt domain '%s' (%s; no QEMU with -name guest=%s%s)",
		    name, *stale ? stale : "no pid file in the run directory", name, vwhy);
		return VMFIND_E_NOT_FOUND;
	}
	vm->pid = pid;
	/* 3. The CID: libvirt's status XML, else virsh's live XML, else the command line. */
	if (snprintf(path, sizeof(path), "%s/%s.xml", vf->run_dir, name) < (int)sizeof(path) &&
	    !read_whole(path, VMFIND_XML_MAX, &xml, &len)) {
		/* Not a domain's XML (empty, cut before it): as if absent. */
		if (strstr(xml, "<domain")) {
			xml_ret = vmfind_xml_cid(xml, len, &xml_cid);
			xml_from = VMFIND_CID_STATUS_XML;
		}
		free(xml);
		xml = NULL;
	}
	if (xml_ret != VMFIND_OK && xml_ret != VMFIND_E_NO_VSOCK &&
	    !virsh_dumpxml(vf, name, &xml, &len, verr, sizeof(verr))) {
		if (strstr(xml, "<domain")) {
			xml_ret = vmfind_xml_cid(xml, len, &xml_cid);
			xml_from = VMFIND_CID_VIRSH;
		}
		free(xml);
	}
	ncmd = vmfind_args_cids(&a, cmd_cids, 2);
	vmfind_args_free(&a);
	if (ncmd < 0) {
		SAY(vf, "domain '%s': a malformed vhost-vsock -device on process %d's command line",
		    name, pid);
		return VMFIND_E_MALFORMED;
	}
	if (ncmd > 1) {
		SAY(vf, "domain '%s': process %d has %d vhost-vsock devices", name, pid, ncmd);
		return VMFIND_E_SEVERAL;
	}
	if (xml_ret == VMFIND_OK) {
		if (ncmd == 1 && cmd_cids[0] != xml_cid) {
			SAY(vf, "domain '%s': libvirt says vsock CID %u, process %d's command"
			    " line %u", name, xml_cid, pid, cmd_cids[0]);
			return VMFIND_E_CONFLICT;
		}
		vm->cid = xml_cid;
		vm->cid_from = (unsigned int)xml_from;
		return VMFIND_OK;
	}
	if (ncmd == 1 && xml_ret != VMFIND_E_NO_VSOCK) {
		vm->cid = cmd_cids[0];
		vm->cid_from = VMFIND_CID_CMDLINE;
		return VMFIND_OK;
	}
	if (xml_ret == VMFIND_E_MALFORMED) {
		SAY(vf, "domain '%s': its XML's <vsock> has no valid <cid address='N'/>", name);
		return VMFIND_E_MALFORMED;
	}
	SAY(vf, "domain '%s' has no vsock device (add <vsock model='virtio'><cid auto='yes'/>"
	    "</vsock> to its XML)", name);
	return VMFIND_E_NO_VSOCK;
}

static int add_vm(struct vmfind_vm **vms, size_t *nr, size_t *cap, const struct vmfind_vm *vm)
{
	if (*nr == *cap) {
		size_t ncap = *cap ? *cap * 2 : 8;
		struct vmfind_vm *n = realloc(*vms, ncap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		*vms = n;
		*cap = ncap;
	}
	(*vms)[(*nr)++] = *vm;
	return 0;
}

/*
 * Whether NAME.pid in the run directory is a domain's: its status XML is
 * there too, or it names a QEMU.  The driver's own lock file (driver.pid,
 * libvirtd's or virtqemud's process) is neither.
 */
static bool is_domain_pid_file(const struct vmfind *vf, const char *name)
{
	char path[PATH_MAX];
	struct vmfind_args a;
	int32_t pid;
	bool qemu;

	if (!vmfind_name_ok(name))
		return false;
	if (snprintf(path, sizeof(path), "%s/%s.xml", vf->run_dir, name) < (int)sizeof(path) &&
	    !access(path, F_OK))
		return true;
	pid = read_pid_file(vf, name);
	if (pid <= 0 || vmfind_read_cmdline(vf, pid, &a))
		return false;
	qemu = vmfind_args_is_qemu(&a);
	vmfind_args_free(&a);
	return qemu;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int vmfind_all(struct vmfind *vf, struct vmfind_vm **vms, size_t *nr)
{
	struct vmfind_vm *vm = calloc(1, sizeof(*vm));
	char **names = NULL;
	size_t nnames = 0, cap = 0, ncap = 0, libvirt_nr;
	struct dirent *de;
	int ret = 0;
	DIR *d;

	*vms = NULL;
	*nr = 0;
	if (!vm)
		return -ENOMEM;
	/* libvirt's running domains: a NAME.pid each, in name order. */
	d = opendir(vf->run_dir);
	if (!d && errno != ENOENT) {
		memset(vm, 0, sizeof(*vm));
		vm->pid = -1;
		vm->err = VMFIND_E_SYS;
		snprintf(vm->why, sizeof(vm->why), "cannot read %s: %s", vf->run_dir,
			 strerror(errno));
		ret = add_vm(vms, nr, &cap, vm);
	}
	while (d && !ret && (de = readdir(d))) {
		size_t l = strlen(de->d_name);

		if (l <= 4 || strcmp(de->d_name + l - 4, ".pid") || de->d_name[0] == '.')
			continue;
		if (nnames == ncap) {
			char **nn = realloc(names, (ncap ? ncap * 2 : 8) * sizeof(*nn));

			if (!nn) {
				ret = -ENOMEM;
				break;
			}
			names = nn;
			ncap = ncap ? ncap * 2 : 8;
		}
		names[nnames] = strndup(de->d_name, l - 4);
		if (!names[nnames]) {
			ret = -ENOMEM;
			break;
		}
		nnames++;
	}
	if (d)
		closedir(d);
	if (nnames)
		qsort(names, nnames, sizeof(*names), cmp_name);
	for (size_t i = 0; i < nnames && !ret; i++) {
		int r;

		if (!is_domain_pid_file(vf, names[i]))
			continue;
		r = vmfind_domain(vf, names[i], vm);

		if (r) {
			vm->err = r;
			snprintf(vm->why, sizeof(vm->why), "%s", vf->why);
		}
		ret = add_vm(vms, nr, &cap, vm);
	}
	libvirt_nr = *nr;
	/* Every other QEMU with a vsock device. */
	d = ret ? NULL : opendir(vf->proc);
	while (d && !ret && (de = readdir(d))) {
		int32_t pid = dir_pid(de->d_name);
		struct vmfind_args a;
		uint32_t cids[2];
		bool known = false;
		int n;

		if (pid < 0)
			continue;
		for (size_t i = 0; i < libvirt_nr && !known; i++)
			known = (*vms)[i].pid == pid;
		if (known || vmfind_read_cmdline(vf, pid, &a))
			continue;
		if (!vmfind_args_is_qemu(&a)) {
			vmfind_args_free(&a);
			continue;
		}
		n = vmfind_args_cids(&a, cids, 2);
		memset(vm, 0, sizeof(*vm));
		vm->pid = pid;
		if (vmfind_args_name(&a, vm->name, sizeof(vm->name)) < 0)
			vm->name[0] = 0;
		vmfind_args_free(&a);
		if (n == 0)
			continue;
		if (n == 1) {
			vm->cid = cids[0];
			vm->pid_from = VMFIND_PID_CID;
			vm->cid_from = VMFIND_CID_CMDLINE;
		} else {
			vm->err = n < 0 ? VMFIND_E_MALFORMED : VMFIND_E_SEVERAL;
			snprintf(vm->why, sizeof(vm->why), "QEMU process %d: %s", pid, n < 0 ?
				 "a malformed vhost-vsock -device" : "several vsock devices");
		}
		ret = add_vm(vms, nr, &cap, vm);
	}
	if (d)
		closedir(d);
	for (size_t i = 0; i < nnames; i++)
		free(names[i]);
	free(names);
	free(vm);
	if (ret) {
		free(*vms);
		*vms = NULL;
		*nr = 0;
	}
	return ret;
}

static int cmp_vcpu(const void *a, const void *b)
{
	const struct vmfind_vcpu *x = a, *y = b;

	if (x->index != y->index)
		return x->index < y->index ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/* "CPU n/KVM" (comm, with its newline): 1 with @index, else 0. */
static int vcpu_comm(const char *comm, uint32_t *index)
{
	uint32_t v = 0;
	const char *s;

	if (strncmp(comm, "CPU ", 4) || !isdigit((unsigned char)comm[4]))
		return 0;
	for (s = comm + 4; isdigit((unsigned char)*s); s++) {
		v = v * 10 + (uint32_t)(*s - '0');
		if (v > VMFIND_VCPU_MAX)
			return 0;
	}
	if (s - comm > 5 && comm[4] == '0')
		return 0;	/* QEMU writes no leading zeros */
	if (strcmp(s, "/KVM\n") && strcmp(s, "/KVM"))
		return 0;
	*index = v;
	return 1;
}

int vmfind_vcpus(const struct vmfind *vf, int32_t pid, struct vmfind_vcpu **vcpus)
{
	char path[PATH_MAX];
	struct vmfind_vcpu *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d;

	*vcpus = NULL;
	if (pid <= 0)
		return -ENOENT;
	if (snprintf(path, sizeof(path), "%s/%d/task", vf->proc, pid) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	d = opendir(path);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		int32_t tid = dir_pid(de->d_name);
		char *comm;
		size_t len;
		uint32_t index;
		int ok;

		if (tid < 0)
			continue;
		if (snprintf(path, sizeof(path), "%s/%d/task/%d/comm", vf->proc, pid, tid) >=
		    (int)sizeof(path) || read_whole(path, 64, &comm, &len))
			continue;
		ok = vcpu_comm(comm, &index);
		free(comm);
		if (!ok)
			continue;
		if (n == cap) {
			struct vmfind_vcpu *nv = realloc(v, (cap ? cap * 2 : 16) * sizeof(*nv));

			if (!nv) {
				closedir(d);
				free(v);
				return -ENOMEM;
			}
			v = nv;
			cap = cap ? cap * 2 : 16;
		}
		v[n].index = index;
		v[n].tid = tid;
		n++;
	}
	closedir(d);
	if (n)
		qsort(v, n, sizeof(*v), cmp_vcpu);
	*vcpus = v;
	return (int)n;
}
