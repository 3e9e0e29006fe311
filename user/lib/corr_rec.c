// SPDX-License-Identifier: LGPL-2.1
/*
 * The records inside a correlation file's record sections (corr.h,
 * hgcor_walk_records()): their framing (size, alignment, what is left),
 * checked before a record is handed on.  A leaf under the reader (corr.c)
 * and the value checks (corr_check.c), which both walk records: it calls
 * neither.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <linux/hgclock.h>

#include "corr.h"

int hgcor_walk_records(const uint8_t *p, size_t len, hgcor_rec_fn fn, void *ctx)
{
	size_t off = 0;

	while (off < len) {
		struct hgclock_rec_header h;

		if (len - off < sizeof(h))
			return HGCOR_E_CONTENT;
		memcpy(&h, p + off, sizeof(h));
		if (h.size < sizeof(h) || h.size % 8 || h.size > len - off ||
		    h.type == HGCLOCK_REC_PAD)
			return HGCOR_E_CONTENT;
		if (fn) {
			int ret = fn(p + off, h.size, ctx);

			if (ret)
				return ret;
		}
		off += h.size;
	}
	return HGCOR_OK;
}
