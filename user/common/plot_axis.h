/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The tick marks of a plot axis (hgclock plot), apart from the drawing so
 * that they can be tested: whatever the span, a bounded number of them.
 */
#ifndef HGCLOCK_PLOT_AXIS_H
#define HGCLOCK_PLOT_AXIS_H

#include <stddef.h>

#define HG_AXIS_MAX_TICKS	32

/*
 * Fills @ticks with the round values (1, 2 or 5 times a power of ten
 * apart) from @t0 to @t1, ascending, at most @max of them; returns how
 * many.  None for a span that is not finite or runs backwards.  Each tick
 * is computed from the first, not by adding a step to the last: near
 * 2^64 ns a step below the doubles' resolution no longer moves a sum,
 * and the loop used to run on forever.  Ticks that round to the one
 * before are dropped.
 */
size_t hg_axis_ticks(double t0, double t1, double *ticks, size_t max);

#endif /* HGCLOCK_PLOT_AXIS_H */
