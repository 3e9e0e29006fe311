// SPDX-License-Identifier: GPL-2.0
/* Tick marks of a plot axis (plot_axis.h). */
#include <math.h>

#include "plot_axis.h"

size_t hg_axis_ticks(double t0, double t1, double *ticks, size_t max)
{
	double span = t1 - t0, step, first;
	size_t n = 0;

	if (!isfinite(t0) || !isfinite(t1) || !isfinite(span) || span < 0)
		return 0;
	step = pow(10, floor(log10(span > 0 ? span : 1)));
	if (span / step < 4)
		step /= 2;
	first = ceil(t0 / step) * step;
	/* At most 10 ticks fit a span of step * 10; max bounds it anyway. */
	for (size_t i = 0; n < max && i < max * 2; i++) {
		double t = first + (double)i * step;

		if (t > t1 + 1e-9)
			break;
		if (n && t <= ticks[n - 1])
			continue;	/* below the doubles' resolution here */
		ticks[n++] = t;
	}
	return n;
}
