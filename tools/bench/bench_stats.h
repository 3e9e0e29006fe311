/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the benchmarks report of their rounds: the median (shared by
 * bench_read_clock.c, bench_native_clock.c and bench_native_event.c), and
 * of the machine: its CPU model (the native benches).
 */
#ifndef HGCLOCK_BENCH_STATS_H
#define HGCLOCK_BENCH_STATS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of @n values (sorts @v in place). */
static inline double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[n / 2];
}

/* /proc/cpuinfo's first "model name", into @buf. */
static inline void cpu_model(char *buf, size_t len)
{
	char line[512];
	FILE *f = fopen("/proc/cpuinfo", "r");

	snprintf(buf, len, "unknown");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');

		if (strncmp(line, "model name", 10) || !colon)
			continue;
		colon += 1 + (colon[1] == ' ');
		colon[strcspn(colon, "\n")] = '\0';
		snprintf(buf, len, "%s", colon);
		break;
	}
	fclose(f);
}

#endif /* HGCLOCK_BENCH_STATS_H */
