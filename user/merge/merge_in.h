/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The merge engine's own helper from merge_in.c for merge.c: not for the
 * engine's users (those have merge.h).
 */
#ifndef HGCLOCK_MERGE_IN_H
#define HGCLOCK_MERGE_IN_H

#include <stddef.h>

void set_err(char *err, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif /* HGCLOCK_MERGE_IN_H */
