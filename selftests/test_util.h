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

/*
 * The module's coalescing of a tracked thread's stops (coalesce_stop_us,
 * struct hgclock_rec_vcpu).  set_coalesce() writes @us and returns the
 * value it replaces (for restore_coalesce()), or -1 when the parameter
 * cannot be read or written (a module older than ABI 1.4).
 */
#define HGCLOCK_COALESCE_PARAM "/sys/module/hgclock/parameters/coalesce_stop_us"

static inline long set_coalesce(unsigned long us)
{
	char buf[32];
	long old = -1;
	FILE *f = fopen(HGCLOCK_COALESCE_PARAM, "r");

	if (!f)
		return -1;
	if (fscanf(f, "%ld", &old) != 1)
		old = -1;
	fclose(f);
	snprintf(buf, sizeof(buf), "%lu", us);
	if (old < 0 || write_sysfs(HGCLOCK_COALESCE_PARAM, buf))
		return -1;
	return old;
}

static inline void restore_coalesce(long old)
{
	char buf[32];

	if (old < 0)
		return;
	snprintf(buf, sizeof(buf), "%ld", old);
	write_sysfs(HGCLOCK_COALESCE_PARAM, buf);
}

#endif /* HGCLOCK_TEST_UTIL_H */
