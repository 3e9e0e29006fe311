/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Whether merge's inputs belong together (claims.c): for cmd_merge.c.
 */
#ifndef HGCLOCK_MERGE_CLAIMS_H
#define HGCLOCK_MERGE_CLAIMS_H

#include <stdbool.h>
#include <stddef.h>

#include "merge.h"

void corr_host_name(const void *buf, size_t len, char *name, size_t size);

int check_claims(const struct hgsync *s, const void *buf, size_t len,
		 const struct hgm_input_spec *in, int n, bool force, bool quiet,
		 const char *corr);

#endif /* HGCLOCK_MERGE_CLAIMS_H */
