/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the benchmarks report of their rounds: the median (shared by
 * bench_read_clock.c and bench_native_clock.c).
 */
#ifndef HGCLOCK_BENCH_STATS_H
#define HGCLOCK_BENCH_STATS_H

#include <stdlib.h>

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

#endif /* HGCLOCK_BENCH_STATS_H */
