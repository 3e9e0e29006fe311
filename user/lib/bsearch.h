/* SPDX-License-Identifier: LGPL-2.1 */
/*
 * The one binary search of the mapping (sync*.c) and its users: every
 * sorted array is searched with hg_partition(), not a loop of its own.
 */
#ifndef HGCLOCK_BSEARCH_H
#define HGCLOCK_BSEARCH_H

#include <stdbool.h>
#include <stddef.h>

/*
 * The @n elements of @size bytes at @base are ordered so that
 * @before(elem, key) holds for a prefix of them (none, some or all).
 * Returns the length of that prefix: the index of the first element for
 * which it does not hold, @n when it holds for all.  At most
 * log2(@n) + 1 calls of @before.  Inline, so that a constant @before
 * is inlined too (the merge looks segments up per event).
 */
static inline size_t hg_partition(const void *base, size_t n, size_t size,
				  bool (*before)(const void *elem, const void *key),
				  const void *key)
{
	const char *p = base;
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (before(p + mid * size, key))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

#endif /* HGCLOCK_BSEARCH_H */
