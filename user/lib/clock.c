// SPDX-License-Identifier: LGPL-2.1
/*
 * libhgclock's application API (<hgclock/hgclock.h>, libhgclock.so.1).
 *
 * A thin layer over the tool's own code: hgclock_open_readonly() and
 * hgclock_get_info() (libhgclock.c), hgclock_map_clock() and
 * hgclock_map_open() (ring.c) and
 * hgclock_now() / hgclock_now_user() (uclock.c), the zero-syscall read
 * `hgclock now` reports.  Only the functions marked HGCLOCK_EXPORT leave
 * the shared library (user/lib/libhgclock.map, -fvisibility=hidden);
 * everything they call stays inside it.
 *
 * The public API reports errors the C library's way (NULL or -1, errno),
 * the internal one returns -errno: the conversion happens here only.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hgclock/hgclock.h>

#include "libhgclock.h"

#define HGCLOCK_EXPORT __attribute__((visibility("default")))

#define HGCLOCK_OPEN_FLAGS_ALL	HGCLOCK_OPEN_NO_SYSCALL

/* Part of libhgclock.so.1's ABI: never changes there (library.rst). */
_Static_assert(sizeof(struct hgclock_reading) == 40 &&
	       offsetof(struct hgclock_reading, cpu) == 32,
	       "struct hgclock_reading is ABI: libhgclock.so.1's layout");

/*
 * @fd: /dev/hgclock read-only, for the ioctl fallback, or -1 (not
 *	accessible to this user, or HGCLOCK_OPEN_NO_SYSCALL).
 * @flags: hgclock_clock_open()'s.
 * @map: the meta area only, the public clock's or a session's (no
 *	consumer area, no data area is touched); it holds its own
 *	reference on its file.
 * Nothing here changes after hgclock_clock_open(): reads share it.
 */
struct hgclock_clock {
	int fd;
	unsigned int flags;
	struct hgclock_map map;
};

/*
 * @fd is the public clock (GET_INFO is not one of its operations: it
 * has none): map it.  A file that is neither device answers ENOTTY too,
 * and then fails to map: ENOTTY, "not the hgclock device".
 */
static int map_public(int fd, struct hgclock_map *map)
{
	int ret = hgclock_map_clock(fd, map);

	return ret == -EPROTO || ret == -ENOMEM ? ret : ret ? -ENOTTY : 0;
}

/* @fd is /dev/hgclock: its session's meta area. */
static int map_session(int fd, unsigned int flags, struct hgclock_map *map)
{
	struct hgclock_info info;
	int ret = hgclock_get_info(fd, &info);

	if (ret == -ENOTTY)
		return map_public(fd, map);
	/* No conversion at all: every read would need the kernel. */
	if (!ret && (flags & HGCLOCK_OPEN_NO_SYSCALL) &&
	    !(info.features & HGCLOCK_FEAT_USER_CLOCK))
		ret = -ENODATA;
	return ret ?: hgclock_map_open(fd, 0, map);
}

HGCLOCK_EXPORT struct hgclock_clock *hgclock_clock_open(const char *path,
							unsigned int flags)
{
	struct hgclock_clock *clk;
	int fd, ret;

	if (flags & ~HGCLOCK_OPEN_FLAGS_ALL) {
		errno = EINVAL;
		return NULL;
	}
	clk = calloc(1, sizeof(*clk));
	if (!clk)
		return NULL;	/* errno: ENOMEM */
	clk->fd = -1;
	fd = hgclock_open_readonly(path ? path : HGCLOCK_CLOCK_DEVICE);
	/* A module older than 1.3 has no public clock. */
	if (!path && fd == -ENOENT)
		fd = hgclock_open_readonly(HGCLOCK_CLOCK_DEVICE_OLD);
	if (fd < 0) {
		free(clk);
		errno = -fd;
		return NULL;
	}
	ret = map_session(fd, flags, &clk->map);
	/* The mapping holds the file: the descriptor is not needed. */
	if (ret || clk->map.meta->ring_size == 0)
		close(fd);
	else
		clk->fd = fd;
	if (ret) {
		free(clk);
		errno = -ret;
		return NULL;
	}
	/* The ioctl fallback, where this user may have it. */
	if (clk->fd < 0 && !(flags & HGCLOCK_OPEN_NO_SYSCALL)) {
		fd = hgclock_open_readonly(HGCLOCK_CLOCK_DEVICE_OLD);
		if (fd >= 0)
			clk->fd = fd;
	}
	clk->flags = flags;
	return clk;
}

/*
 * Every read of the API: user space where this CPU's conversion is
 * exact, else the ioctl where this handle has the device (*@used_ioctl
 * then 1).  -errno.
 */
int hgclock_clock_now(struct hgclock_clock *clk, struct hgclock_now *now, int *used_ioctl)
{
	*used_ioctl = 0;
	if (clk->fd < 0)
		return hgclock_now_user(&clk->map, now);
	return hgclock_now(clk->fd, &clk->map, now, used_ioctl);
}

HGCLOCK_EXPORT int hgclock_clock_read(struct hgclock_clock *clk,
				      struct hgclock_reading *reading)
{
	struct hgclock_now now;
	struct timespec mono;
	int used_ioctl = 0, ret;

	if (!clk || !reading) {
		errno = EINVAL;
		return -1;
	}
	ret = hgclock_clock_now(clk, &now, &used_ioctl);
	if (ret) {
		errno = -ret;
		return -1;
	}
	/* The vDSO's: CLOCK_MONOTONIC cannot fail with a valid pointer. */
	if (clock_gettime(CLOCK_MONOTONIC, &mono))
		return -1;
	memset(reading, 0, sizeof(*reading));
	reading->tsc = now.tsc;
	reading->local_ns = now.sched_clock_ns;
	reading->mono_ns = (uint64_t)mono.tv_sec * 1000000000ULL + (uint64_t)mono.tv_nsec;
	reading->cpu = now.cpu;
	reading->flags = used_ioctl ? HGCLOCK_READING_SYSCALL : HGCLOCK_READING_EXACT;
	if (now.has_local) {
		reading->perf_ns = now.local_clock_ns;
		reading->flags |= HGCLOCK_READING_PERF;
	}
	return 0;
}

HGCLOCK_EXPORT int hgclock_clock_perf_ns(struct hgclock_clock *clk, uint64_t *perf_ns)
{
	struct hgclock_now now;
	int used_ioctl, ret;

	if (!clk || !perf_ns) {
		errno = EINVAL;
		return -1;
	}
	ret = hgclock_clock_now(clk, &now, &used_ioctl);
	/* sched_clock alone is not perf's clock: refuse rather than guess. */
	if (!ret && !now.has_local)
		ret = -ENODATA;
	if (ret) {
		errno = -ret;
		return -1;
	}
	*perf_ns = now.local_clock_ns;
	return 0;
}

HGCLOCK_EXPORT void hgclock_clock_close(struct hgclock_clock *clk)
{
	if (!clk)
		return;
	hgclock_map_close(&clk->map);
	if (clk->fd >= 0)
		close(clk->fd);
	free(clk);
}

HGCLOCK_EXPORT const char *hgclock_clock_strerror(int errnum)
{
	switch (errnum) {
	case ENOENT:
	case ENXIO:
	case ENODEV:
	case EACCES:
	case EPERM:
		/* The tool's advice: load the module, or get access. */
		return hgclock_open_hint(-errnum);
	case EPROTO:
		return "the hgclock module speaks another ABI than this libhgclock: "
		       "install matching versions";
	case EOPNOTSUPP:
		return "the hgclock module has no mapped conversions (too old)";
	case ENOSPC:
		return "the hgclock module's ring memory is used up (its ring_max_mb "
		       "parameter): close other hgclock sessions or raise it";
	case ENODATA:
		return "no exact TSC conversion on this CPU (or no way to read the CPU with "
		       "the TSC: no RDTSCP, no rseq registration, no RDPID), and the "
		       "kernel cannot be asked (HGCLOCK_OPEN_NO_SYSCALL, or "
		       HGCLOCK_CLOCK_DEVICE_OLD " not accessible to this user)";
	case ENOTTY:
		return "not an hgclock device";
	case EAGAIN:
		return "the conversion kept changing during the read: try again";
	case EINVAL:
		return "invalid argument (a NULL handle or reading, unknown flags, or an "
		       "event's kind, name or text out of range)";
	case EEXIST:
		return "the event file exists: choose another name, or pass "
		       "HGCLOCK_EVENTS_OVERWRITE to replace it";
	case EIO:
		return "a write to the event file failed: the file is incomplete";
	case ENOMEM:
		return "out of memory";
	default:
		return "unexpected error from " HGCLOCK_CLOCK_DEVICE;
	}
}

HGCLOCK_EXPORT unsigned int hgclock_lib_version(void)
{
	return HGCLOCK_LIB_VERSION;
}
