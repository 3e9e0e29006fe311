/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The LTTng-UST tracepoint bench_native_event.c compares hgclock_event()
 * with: hgclock_bench:event, the same content as an application event (its
 * kind and name; LTTng adds the time stamp and the CPU itself, the thread
 * id through the vtid context the bench's session adds).  The provider
 * pattern of lttng-ust(3), 2.13 names: bench_native_event.c defines
 * LTTNG_UST_TRACEPOINT_CREATE_PROBES and LTTNG_UST_TRACEPOINT_DEFINE before
 * including it, so the probe lives in the bench itself.
 */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER hgclock_bench

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "bench_tp.h"

#if !defined(HGCLOCK_BENCH_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define HGCLOCK_BENCH_TP_H

#include <stdint.h>

#include <lttng/tracepoint.h>

LTTNG_UST_TRACEPOINT_EVENT(
	hgclock_bench,
	event,
	LTTNG_UST_TP_ARGS(uint8_t, kind, const char *, name),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(uint8_t, kind, kind)
		lttng_ust_field_string(name, name)
	)
)

#endif /* HGCLOCK_BENCH_TP_H */

#include <lttng/tracepoint-event.h>
