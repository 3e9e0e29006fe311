/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the kselftests and the unit tests (include after
 * kselftest_harness.h).
 */
#ifndef HGCLOCK_TEST_UTIL_H
#define HGCLOCK_TEST_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
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

/* A flag of /proc/cpuinfo's first "flags" line, as a word. */
static inline bool cpuinfo_has(const char *flag)
{
	char line[8192], word[64];
	bool found = false;
	FILE *f = fopen("/proc/cpuinfo", "r");

	if (!f)
		return false;
	snprintf(word, sizeof(word), " %s", flag);
	while (fgets(line, sizeof(line), f)) {
		char *p;

		if (strncmp(line, "flags", 5))
			continue;
		line[strcspn(line, "\n")] = ' ';
		for (p = strstr(line, word); p; p = strstr(p + 1, word))
			if (p[strlen(word)] == ' ')
				found = true;
		break;
	}
	fclose(f);
	return found;
}

#endif /* HGCLOCK_TEST_UTIL_H */
