/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the kselftests (include after kselftest_harness.h).
 */
#ifndef HGCLOCK_TEST_UTIL_H
#define HGCLOCK_TEST_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

/* Writes @val to a sysfs file; 0 or -errno. */
static inline int write_sysfs(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, val, strlen(val));
	close(fd);
	return n < 0 ? -errno : 0;
}

/* Pins the calling thread to @cpu; 0 or -errno. */
static inline int pin_self(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) ? -errno : 0;
}

#endif /* HGCLOCK_TEST_UTIL_H */
