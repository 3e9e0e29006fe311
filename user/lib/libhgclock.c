// SPDX-License-Identifier: LGPL-2.1
/*
 * libhgclock: device access and ioctl wrappers.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "libhgclock.h"
#include "sync.h"

static int hgclock_open_mode(const char *path, int mode)
{
	int fd = open(path ? path : HGCLOCK_DEV_PATH, mode | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

int hgclock_open(const char *path)
{
	return hgclock_open_mode(path, O_RDWR);
}

int hgclock_open_readonly(const char *path)
{
	return hgclock_open_mode(path, O_RDONLY);
}

const char *hgclock_open_hint(int err)
{
	switch (-err) {
	case ENOENT:
	case ENXIO:
	case ENODEV:
		return HGCLOCK_DEV_PATH " does not exist: load the module first "
		       "(modprobe hgclock once installed, see install.rst; or "
		       "insmod build/module/$(uname -r)/hgclock.ko from the source tree)";
	case EACCES:
	case EPERM:
		return HGCLOCK_DEV_PATH " is not accessible: run as root or as a "
		       "member of the group the udev rule grants access to";
	default:
		return "cannot open " HGCLOCK_DEV_PATH;
	}
}

enum hgclock_exit hgclock_open_exit(int err)
{
	switch (-err) {
	case ENOENT:
	case ENXIO:
	case ENODEV:
		return HGCLOCK_EXIT_NO_DEVICE;
	case EACCES:
	case EPERM:
		return HGCLOCK_EXIT_PERM;
	default:
		return HGCLOCK_EXIT_FAILURE;
	}
}

int hgclock_get_info(int fd, struct hgclock_info *info)
{
	memset(info, 0, sizeof(*info));
	info->size = sizeof(*info);
	if (ioctl(fd, HGCLOCK_IOC_GET_INFO, info))
		return -errno;
	if (info->abi_major != HGCLOCK_ABI_MAJOR)
		return -EPROTO;
	return 0;
}

int hgclock_read_clock(int fd, int cpu, struct hgclock_clock_sample *sample)
{
	struct hgclock_read_clock req;

	memset(&req, 0, sizeof(req));
	req.size = sizeof(req);
	if (cpu >= 0) {
		req.flags = HGCLOCK_READ_CPU;
		req.cpu = (__u32)cpu;
	}
	if (ioctl(fd, HGCLOCK_IOC_READ_CLOCK, &req))
		return -errno;
	*sample = req.sample;
	return 0;
}

int hgclock_read_all_cpus(int fd, struct hgclock_clock_sample *samples,
			  unsigned int cap, unsigned int *nr)
{
	struct hgclock_read_clock req;
	int ret = 0;

	memset(&req, 0, sizeof(req));
	req.size = sizeof(req);
	req.flags = HGCLOCK_READ_ALL_CPUS;
	req.nr_samples = cap;
	req.samples_ptr = (__u64)(uintptr_t)samples;
	if (ioctl(fd, HGCLOCK_IOC_READ_CLOCK, &req))
		ret = -errno;
	*nr = req.nr_samples;
	return ret;
}

int hgclock_list_vcpus(int fd, struct hgclock_vcpu_info **infos, unsigned int *nr)
{
	struct hgclock_list_vcpus req;
	unsigned int cap = 16;

	*infos = NULL;
	*nr = 0;
	for (;;) {
		struct hgclock_vcpu_info *buf = calloc(cap, sizeof(*buf));

		if (!buf)
			return -ENOMEM;
		memset(&req, 0, sizeof(req));
		req.size = sizeof(req);
		req.nr = cap;
		req.vcpus_ptr = (__u64)(uintptr_t)buf;
		if (ioctl(fd, HGCLOCK_IOC_LIST_VCPUS, &req) == 0) {
			*infos = buf;
			*nr = req.nr;
			return 0;
		}
		free(buf);
		if (errno != ENOSPC)
			return -errno;
		cap = req.nr + 16;
	}
}

/* HGCLOCK_IOC_TRACK with one of its flags on thread (or process) @tid. */
static int track_ioctl(int fd, uint32_t flags, int tid)
{
	struct hgclock_track req;

	memset(&req, 0, sizeof(req));
	req.size = sizeof(req);
	req.flags = flags;
	req.tid = tid;
	return ioctl(fd, HGCLOCK_IOC_TRACK, &req) ? -errno : 0;
}

int hgclock_track(int fd, int tid, int add)
{
	return track_ioctl(fd, add ? HGCLOCK_TRACK_ADD : HGCLOCK_TRACK_REMOVE, tid);
}

int hgclock_pair_vm(int fd, int vm_pid, int on)
{
	return track_ioctl(fd, on ? HGCLOCK_TRACK_PAIR_ON : HGCLOCK_TRACK_PAIR_OFF, vm_pid);
}

const char *hgclock_role_name(uint32_t role)
{
	switch (role) {
	case HGCLOCK_ROLE_BARE:
		return "bare";
	case HGCLOCK_ROLE_GUEST:
		return "guest";
	case HGCLOCK_ROLE_HOST:
		return "host";
	case HGCLOCK_ROLE_NESTED:
		return "nested";
	default:
		return "unknown";
	}
}

static const struct {
	uint32_t bit;
	const char *name;
} clock_flag_names[] = {
	{ HGCLOCK_CLK_TSC_UNSTABLE, "tsc_unstable" },
	{ HGCLOCK_CLK_SCHED_CLOCK_STABLE, "sched_clock_stable" },
	{ HGCLOCK_CLK_CONSTANT_TSC, "constant_tsc" },
	{ HGCLOCK_CLK_NONSTOP_TSC, "nonstop_tsc" },
	{ HGCLOCK_CLK_NATIVE_SCHED_CLOCK, "native_sched_clock" },
	{ HGCLOCK_CLK_PVCLOCK_SCHED_CLOCK, "pvclock_sched_clock" },
};

char *hgclock_clock_flags_str(uint32_t clock_flags, char *buf, size_t len)
{
	size_t used = 0, i;

	if (!len)
		return buf;
	buf[0] = '\0';
	for (i = 0; i < sizeof(clock_flag_names) / sizeof(clock_flag_names[0]); i++) {
		int n;

		if (!(clock_flags & clock_flag_names[i].bit))
			continue;
		clock_flags &= ~clock_flag_names[i].bit;
		n = snprintf(buf + used, len - used, "%s%s", used ? "," : "",
			     clock_flag_names[i].name);
		if (n < 0 || (size_t)n >= len - used)
			return buf;
		used += (size_t)n;
	}
	if (clock_flags)
		snprintf(buf + used, len - used, "%s0x%x", used ? "," : "",
			 clock_flags);
	return buf;
}

int hgclock_clock_parse(const char *name, uint32_t *clock)
{
	if (!strcmp(name, "local") || !strcmp(name, "sched"))
		*clock = HGSYNC_CLOCK_SCHED;
	else if (!strcmp(name, "perf"))
		*clock = HGSYNC_CLOCK_LOCAL;
	else if (!strcmp(name, "x86-tsc") || !strcmp(name, "tsc"))
		*clock = HGSYNC_CLOCK_TSC;
	else
		return -EINVAL;
	return 0;
}
