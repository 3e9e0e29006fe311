/* SPDX-License-Identifier: LGPL-2.1 */
/*
 * libhgclock: the user-space side of /dev/hgclock.
 *
 * A thin, dependency-free library the hgclock tool and the selftests use:
 * opening the device with an error a person can act on, and one wrapper
 * per ioctl.  Functions return 0 or a negative errno; they never print.
 */
#ifndef LIBHGCLOCK_H
#define LIBHGCLOCK_H

#include <stddef.h>
#include <stdint.h>
#include <linux/hgclock.h>

#define HGCLOCK_DEV_PATH "/dev/" HGCLOCK_DEVICE_NAME

/* Exit statuses of the hgclock tool, documented in hgclock(1). */
enum hgclock_exit {
	HGCLOCK_EXIT_OK = 0,
	HGCLOCK_EXIT_FAILURE = 1,	/* an operation failed */
	HGCLOCK_EXIT_USAGE = 2,		/* bad command line */
	HGCLOCK_EXIT_NO_DEVICE = 3,	/* /dev/hgclock missing: module not loaded */
	HGCLOCK_EXIT_PERM = 4,		/* /dev/hgclock not accessible */
	HGCLOCK_EXIT_ABI = 5,		/* module speaks an incompatible ABI */
	HGCLOCK_EXIT_BAD_INPUT = 6,	/* an input file is corrupt or unsupported */
};

/* Opens @path (NULL: HGCLOCK_DEV_PATH); returns an fd or -errno. */
int hgclock_open(const char *path);
/* A sentence explaining a failed hgclock_open() (static storage). */
const char *hgclock_open_hint(int err);
/* Maps a failed hgclock_open() to an exit status. */
enum hgclock_exit hgclock_open_exit(int err);

int hgclock_get_info(int fd, struct hgclock_info *info);
/* Reads on the calling CPU (cpu < 0) or on @cpu. */
int hgclock_read_clock(int fd, int cpu, struct hgclock_clock_sample *sample);
/*
 * Reads on every online CPU.  On success *@nr is the number of samples
 * written; -ENOSPC with *@nr set to the number needed when @cap is short.
 */
int hgclock_read_all_cpus(int fd, struct hgclock_clock_sample *samples,
			  unsigned int cap, unsigned int *nr);

/* Names of the HGCLOCK_ROLE_* values and HGCLOCK_CLK_* bits. */
const char *hgclock_role_name(uint32_t role);
/* Writes "flag,flag" names of @clock_flags into @buf; returns @buf. */
char *hgclock_clock_flags_str(uint32_t clock_flags, char *buf, size_t len);

#endif /* LIBHGCLOCK_H */
